//! The etcd election's decisions, as state machines with no I/O, each
//! of the one shape of [`Recipe`](crate::backend::recipe::Recipe): the
//! drivers beside this folder, named alike (`turn.rs` drives
//! `recipe/turn.rs`, and so on), send the requests these ask for and
//! hand back etcd's answers and watch events. The handover model
//! (`model/handover.rs`) drives the same machines unchanged against etcd's
//! key space, every past revision kept, with each rule switched off in
//! turn (`Mutation`, test builds only), so a rule removed here is a
//! counterexample there.
//!
//! A candidacy goes through them in order:
//! - [`WaitForTurn`]: from our key's creation until no older key is left
//!   (or our key is gone);
//! - [`TakeOffice`]: from our turn to leading: the tenure claim, or the
//!   wait for a predecessor's lease, or a read of our key back;
//! - [`Stint`]: leading, until the deadline the renewal proves, the
//!   lease's end, our key's loss, or resignation;
//! - [`NextInLine`] (`handover.rs`): beside the stint, who is next in
//!   line, whom a resignation hands over to, and whether our key is gone;
//! - [`Resignation`] (`handover.rs`): what the release writes, and not before the work
//!   started under our leadership has stopped.
//!
//! The transactions a claim and a release send are data too
//! ([`Transaction`]): built and read back here, evaluated by the model as
//! etcd would, and only translated by the driver named alike (`transaction.rs` beside
//! this folder drives `recipe/transaction.rs`).
//!
//! Beside them, through the whole candidacy, [`Renewal`] keeps the lease
//! alive through one member (one per member) and says until when it surely is: the
//! leadership deadline.

mod handover;
#[cfg(test)]
mod mutation;
mod office;
mod renewal;
mod stint;
mod transaction;
mod turn;

// What the drivers beside this folder and the model checks (test builds
// only) read; the mutations exist in test builds only.
pub use handover::{
    KeyEvent, NextInLine, NextInLineInput, NextInLineNext, Pick, Recorded, Resignation,
    ResignationInput, ResignationNext, Steer, Touch,
};
#[cfg(test)]
pub use mutation::Mutation;
pub use office::{Claim, OfficeInput, OfficeNext, TakeOffice};
pub use renewal::{Grant, Renewal, RenewalInput, RenewalNext, RenewalRequest};
pub use stint::{Demotion, Stint, StintEnd, StintInput, StintNext, StintRequest};
pub use transaction::{Answer, ClaimAnswer, Compare, Op, OpResult, Transaction};
pub use turn::{Turn, TurnCheck, TurnInput, TurnNext, TurnRequest, WaitForTurn};

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
