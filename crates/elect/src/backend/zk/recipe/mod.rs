//! The ZooKeeper election's decisions, as state machines with no I/O:
//! what [`campaign`](super::campaign) does is send the requests these ask
//! for and hand back ZooKeeper's answers, watch events and session
//! states. The model checks drive the same machines unchanged, with each
//! rule switched off in turn ([`Mutation`]): the turn against a model of
//! ZooKeeper's queue (`turn_model`), the stint against the ZooKeeper
//! leader's session tracker (`lease_model`).
//!
//! A candidacy goes through them in order:
//! - [`WaitForTurn`]: from our znode's creation until it is first in line
//!   and ours (or gone);
//! - [`Stint`]: leading, until the deadline the session's lease proves,
//!   across disconnections, lapses and reconnections.

mod mutation;
mod stint;
mod turn;

// Read by the model checks, in test builds only.
#[cfg_attr(not(test), allow(unused_imports))]
pub use mutation::Mutation;
pub use stint::{Demotion, Stint, StintEnd, StintInput, StintNext, StintRequest};
pub use turn::{Gone, Input, Next, Request, WaitForTurn};
