//! Raft-vote backend: the `elect` processes elect a leader among
//! themselves with Raft's election (no log), no external service.
//!
//! - [`core`]: the sans-IO state machine (PreVote, CheckQuorum, leader
//!   lease, leadership transfer), tested in a deterministic simulator.

pub mod core;
