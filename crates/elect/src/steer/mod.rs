//! Steering who leads: an operator's switchover to a named candidate, and
//! the line it is checked against, as data and rules without I/O.
//!
//! A switchover is a resignation with a chosen successor (the design's
//! rule 13). Before anything changes, [`Line::plan`] checks it against
//! the line as one read saw it: somebody leads and can hand over, the
//! target is a live candidate, and every candidate between them can step
//! aside (only elect's candidates do: an `etcdctl elect`, Go or Curator
//! candidate ahead of the target would take the turn the target was
//! promised, so the switchover is refused instead of ending elsewhere).
//! The backends then carry it out in this order:
//! 1. the switchover is recorded with an identity, bound to the
//!    command's own lease or session, so one that was aborted, timed out
//!    or superseded is gone from the service and can never act later;
//! 2. the candidates between the leader and the target step aside (their
//!    keys or znodes go to the back of the line);
//! 3. the leader, once the target is next in line and while the record
//!    lives, stops its work (its command's whole tree dead, as for any
//!    resignation) and hands over to the target, which leads with a
//!    higher fencing token, one commit later.
//!
//! The command reports what happened by its timeout: [`Outcome`].
//!
//! Priorities ([`Priority`]) are preferences with hysteresis: among live
//! candidates the highest leads, once it has been there for a failback
//! delay; the leader itself starts the switchover to it ([`Failback`]).
//! A manual switchover's choice stands until that leader leaves (the
//! target pins itself when it leads). Priority 0 never leads while a
//! candidate of positive priority is live: it steps aside at its turn
//! ([`steps_aside`]); alone, it leads, since an election with a live
//! candidate is never left without a leader.

mod line;
#[cfg(test)]
mod model;
mod priority;

pub use line::{InLine, Line, Outcome, Plan, Refusal, Report, Started, Target, fresh_identity};
#[cfg(test)]
pub(crate) use priority::FailbackRule;
pub use priority::{Failback, Priority, Standing, steps_aside};

/// How long `elect switchover` waits, past its timeout, for the service
/// to take its record back (etcd: the lease revoked; ZooKeeper: the
/// session closed). A member that does not answer (its disk hung) must
/// not hold the command past what it promised: the record goes by itself
/// when its lease or session runs out, and a leader acts on a record only
/// while it lives.
pub(crate) const WITHDRAWAL_WITHIN: std::time::Duration = std::time::Duration::from_millis(500);
