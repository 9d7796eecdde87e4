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

mod office;
mod renewal;
mod turn;

pub use office::{
    Claim, KeyEvent, NextInLine, NextStep, OfficeInput, OfficeStep, Pick, ReleaseStep, Resignation,
    TakeOffice, Touch,
};
pub use renewal::{Renewal, RenewalInput, RenewalNext, RenewalRequest};
pub use turn::{Input, Next, Request, Turn, TurnCheck, WaitForTurn};

/// A rule of the recipes switched off, for the model check's teeth tests
/// only: they show the checker finds what each rule prevents.
#[cfg_attr(not(test), allow(dead_code))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mutation {
    /// No older key is our turn, marker or not: the wait for the lease of
    /// a predecessor whose key went without a release is skipped.
    NoLeaseWait,
    /// The predecessor's deletion is our turn, without a read: whatever
    /// is older still is not seen.
    LeadOnDeletion,
    /// Our turn is leadership at once: no tenure marker is claimed (a
    /// first candidate, or one after a predecessor's lease, reads its key
    /// back instead).
    NoTenure,
    /// The release is sent while the work still runs.
    ReleaseBeforeStop,
    /// The leader takes the youngest key as its next in line, not the
    /// oldest younger one.
    NextAnyYounger,
    /// The touch puts the next's key whatever its create revision and
    /// lease.
    TouchUnguarded,
    /// A renewal's deadline counts from the acknowledgement's arrival,
    /// not from the ping's send.
    DeadlineFromAnswer,
    /// A late acknowledgement is credited to whatever ping is out.
    LateAnswerCredited,
}

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
