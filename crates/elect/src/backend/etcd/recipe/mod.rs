//! The etcd election's decisions, as state machines with no I/O: what
//! [`campaign`](super::campaign) and [`handover`](super::handover) do is
//! send the requests these ask for and hand back etcd's answers and watch
//! events. The handover model (`handover_model`) drives the same machines
//! unchanged against etcd's key space, every past revision kept, with
//! each rule switched off in turn ([`Mutation`]), so a rule removed here
//! is a counterexample there.
//!
//! A candidacy goes through them in order:
//! - [`WaitForTurn`]: from our key's creation until no older key is left
//!   (or our key is gone);
//! - [`TakeOffice`]: from our turn to leading: the tenure claim, or the
//!   wait for a predecessor's lease, or a read of our key back;
//! - [`NextInLine`]: while we lead, who is next in line, whom a
//!   resignation hands over to;
//! - [`Resignation`]: what the release writes, and not before the work
//!   started under our leadership has stopped.
//!
//! Beside them, through the whole candidacy, [`Renewal`] keeps the lease
//! alive through one member and says until when it surely is: the
//! leadership deadline.

mod mutation;
mod office;
mod renewal;
mod turn;

// Read by the model checks, in test builds only.
#[cfg_attr(not(test), allow(unused_imports))]
pub use mutation::Mutation;
pub use office::{
    Claim, KeyEvent, NextInLine, NextStep, OfficeInput, OfficeStep, Pick, ReleaseStep, Resignation,
    TakeOffice, Touch,
};
pub use renewal::{Renewal, RenewalInput, RenewalNext, RenewalRequest};
pub use turn::{Input, Next, Request, Turn, TurnCheck, WaitForTurn};

#[cfg(test)]
mod tests {
    use crate::backend::etcd::layout::CandidateKey;
    use crate::backend::etcd::layout::ELECT_LEASE_TAG;

    /// A candidate's key created at `create_revision`, on a lease elect
    /// granted or not.
    pub fn key(create_revision: i64, elect: bool) -> CandidateKey {
        let lease = (create_revision << 16) | if elect { ELECT_LEASE_TAG } else { 1 };
        CandidateKey {
            key: format!("e/{lease:x}").into_bytes(),
            id: format!("c{create_revision}"),
            create_revision,
            lease,
        }
    }
}
