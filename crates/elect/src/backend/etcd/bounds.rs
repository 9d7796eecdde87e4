//! How long a request or a watch may go unanswered: below everything
//! that sends one (`connection.rs`'s attempts, `keywatch.rs`'s watches),
//! so both share one formula and neither imports the other.

use std::time::Duration;

use crate::backend::cadence::Cadence;

/// The shortest wait for one attempt's answer.
pub(super) const SHORTEST_ATTEMPT: Duration = Duration::from_millis(250);

/// The bound of a request's first attempt, for a connect timeout of
/// `connect_timeout`: a quarter of it, at least [`SHORTEST_ATTEMPT`], at
/// most the connect timeout itself.
pub(super) fn first_attempt(connect_timeout: Duration) -> Duration {
    (connect_timeout / 4).clamp(SHORTEST_ATTEMPT, connect_timeout.max(SHORTEST_ATTEMPT))
}

/// How a watch is bounded, as requests are (`connection::Attempts`): a member
/// paused, or cut off with its connection open, answers neither, and
/// without a bound only the connection's pings would find it (about 9 s).
///
/// - Opening a watch is a request: unanswered within `open`, it is given
///   up (and its member passed over for a while, so the next open goes
///   elsewhere).
/// - A watch silent for `quiet` asks its member for progress (etcd 3.4 and
///   later answer at once, with the current revision and no events); no
///   answer within `answer`, and the watch is given up as broken. Every
///   caller reads afresh after a broken watch, and opens another.
///
/// A quiet watch costs its member one progress request per `quiet`. A
/// follower's watches ([`WatchBounds::following`]) ask for none: what
/// they see decides no deadline and can wait for the connection's pings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchBounds {
    pub(super) open: Duration,
    /// `None`: never ask for progress.
    pub(super) quiet: Option<Duration>,
    pub(super) answer: Duration,
}

impl WatchBounds {
    /// The bounds of a candidate or observer whose connect timeout is
    /// `connect_timeout`: an open within it, progress asked after it of
    /// silence, answered within the requests' first bound (a quarter of
    /// it, at least 250 ms).
    pub fn new(connect_timeout: Duration) -> WatchBounds {
        WatchBounds {
            open: connect_timeout,
            quiet: Some(connect_timeout),
            answer: first_attempt(connect_timeout),
        }
    }

    /// The bounds of a waiting candidate's watches, as those of `self` but
    /// asking for no progress. Progress requests were most of what a
    /// follower cost etcd beyond its keepalives (one per watch every
    /// connect timeout: 0.4/s, beside Go's 0.3/s keepalives at a TTL of
    /// 10 s). A member paused or cut off is still found by the
    /// connection's HTTP/2 pings, within about 9 s, as Go's clients find
    /// it; one that lost its quorum cancels the watch itself (we ask for
    /// `require_leader`). Neither case decides a deadline: a follower only
    /// notices its turn later, and its turn is checked with a read.
    pub fn following(self) -> WatchBounds {
        WatchBounds {
            quiet: None,
            ..self
        }
    }

    /// The bounds for a candidate renewing at `cadence`: the next in line
    /// (and a leader) keep the quick check, so a handover is never slowed
    /// by a paused member.
    pub fn at(self, cadence: Cadence) -> WatchBounds {
        match cadence {
            Cadence::Leading => self,
            Cadence::Following => self.following(),
        }
    }
}
