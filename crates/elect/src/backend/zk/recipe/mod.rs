//! The ZooKeeper election's decisions, as state machines with no I/O,
//! each of the one shape of [`Recipe`](crate::backend::recipe::Recipe):
//! the drivers beside this folder, named alike (`turn.rs` drives
//! `recipe/turn.rs`, `stint.rs` drives `recipe/stint.rs`), send the
//! requests these ask for and hand back ZooKeeper's answers, watch events
//! and session states. The model checks (`model/`) drive the same
//! machines unchanged, with each rule switched off in turn (`Mutation`,
//! test builds only): the turn against a model of ZooKeeper's queue, the
//! stint against the ZooKeeper leader's session tracker.
//!
//! A candidacy goes through them in order:
//! - [`WaitForTurn`]: from our znode's creation until it is first in line
//!   and ours (or gone);
//! - [`Stint`]: leading, until the deadline the session's lease proves,
//!   across disconnections, lapses and reconnections.

#[cfg(test)]
mod mutation;
mod stint;
mod turn;

// What the drivers beside this folder and the model checks (test builds
// only) read; the mutations exist in test builds only.
#[cfg(test)]
pub use mutation::Mutation;
pub use stint::{Demotion, Steer, Stint, StintEnd, StintInput, StintNext, StintRequest};
pub use turn::{Gone, TurnInput, TurnNext, TurnRequest, WaitForTurn};
