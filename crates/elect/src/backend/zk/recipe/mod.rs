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

mod stint;
mod turn;

pub use stint::{Demotion, Stint, StintEnd, StintInput, StintNext, StintRequest};
pub use turn::{Gone, Input, Next, Request, WaitForTurn};

/// A rule of the recipes switched off, for the model checks' teeth tests
/// only: they show the checker finds what each rule prevents.
#[cfg_attr(not(test), allow(dead_code))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mutation {
    /// Any waiter whose predecessor was deleted leads at once, not only
    /// the next in line.
    LeadOnAnyDeletion,
    /// The next in line does not watch its own znode.
    NoOwnWatch,
    /// A disconnected leader leads on past its deadline until the session
    /// is back or known lost (Curator's rule while SUSPENDED).
    LeadThroughDisconnection,
}
