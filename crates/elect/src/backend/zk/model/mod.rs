//! The ZooKeeper backend's decisions, every interleaving up to a bound,
//! under stateright: the production recipes (`recipe`) and the session's
//! lease driven unchanged, each rule switched off in turn to show the
//! checker finds what it prevents. Test builds only.
//!
//! - [`turn`]: the wait for our turn against a ZooKeeper of sequential
//!   znodes and one-shot watches;
//! - [`lease`]: the session's lease and the leader's stint against the
//!   ZooKeeper leader's session tracker.

mod lease;
mod turn;
