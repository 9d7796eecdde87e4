//! Leadership that follows the host's health: a check the user supplies
//! (a command, or an HTTP URL), run every interval, gates who may lead.
//!
//! A candidate whose check fails says so beside its priority (its
//! [`Standing`](crate::steer::Standing)), and the election's rules (the
//! same as priority 0's, one tier lower: see [`crate::steer`]) do the
//! rest: an unhealthy candidate steps aside at its turn while a healthy
//! one waits behind it, and an unhealthy leader hands over at once to the
//! best healthy candidate, as a switchover of its own (its command's
//! whole tree dead first, then the hand-over with a higher token).
//!
//! What this module decides is only the candidate's own health, with
//! hysteresis ([`Gate`], sans I/O): unhealthy after `failures` failed
//! checks in a row; healthy again only after its checks have passed for a
//! backoff (the failback delay). That backoff is what keeps a flapping
//! check from moving leadership back and forth: a candidate turns healthy
//! at most once per backoff, so the leader changes it causes are bounded.
//!
//! A check cannot harm the leader. A check that hangs is a failed check,
//! ended by its interval. A command check runs under the same watchdog
//! and containment as `elect run`'s command, whose deadline is the
//! check's interval: its whole tree is killed then, even if `elect` is
//! frozen or killed meanwhile. The check's work runs beside the
//! election's, never in its way: the campaign reads the last verdict.
//!
//! When no candidate is healthy, the leader keeps leading (and a
//! leaderless election elects the first in line, as without checks): an
//! election is never emptied by its checks. A check that fails everywhere
//! at once is more often the check or a shared dependency than every
//! host; a leader that must not act while unhealthy should check for
//! itself in its work (the design's steering page says why).

mod check;
mod gate;
#[cfg(test)]
mod model;

pub use check::{Check, HealthConfig, HttpUrl, monitor};
pub use gate::Gate;
