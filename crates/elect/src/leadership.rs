//! The one value every backend publishes and every consumer reads.
//!
//! A backend owns a [`watch::Sender<Leadership>`](tokio::sync::watch) and
//! replaces the whole snapshot on every change; `supervise` and `export`
//! hold receivers and never talk to a backend directly. Keeping the contract
//! this small is what lets those consumers be tested by driving a sender by
//! hand, and what lets three very different backends share them.

use std::time::Duration;

use crate::clock::BootInstant;

/// How long before a lease or session could expire on the server we stop
/// acting on it: 2.5% of the TTL for clock-rate error plus 20 ms to kill
/// the work.
///
/// The rate part is what clocks 2% apart need with room to spare. With
/// the client's clock 1% slow and the server's 1% fast, a deadline
/// `sent + (1 - m) TTL` on the client's clock comes `(1 - m) TTL / 0.99`
/// after the send in true time, the expiry `TTL / 1.01` after it at the
/// earliest: `m` must be at least 1.98%. At 2%, as elect had it, the rate part left 0.02% of the TTL
/// beside the kill's 20 ms (1.2 ms at 6 s); at 2.5% it leaves about 0.5%
/// (31 ms at 6 s).
pub fn safety_margin(ttl: Duration) -> Duration {
    ttl / 40 + Duration::from_millis(20)
}

/// The local leadership deadline bought by a renewal sent at `sent` that
/// the server acknowledged with `ttl`: the server's expiry clock starts when
/// it receives the renewal, never before `sent`.
pub fn deadline_after(sent: BootInstant, ttl: Duration) -> BootInstant {
    sent + ttl - safety_margin(ttl)
}

/// A full snapshot of what this process knows about an election.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leadership {
    /// The id the current leader published, when one is known.
    pub leader: Option<String>,
    /// The leader's fencing token; it only grows within an election.
    pub token: Option<u64>,
    /// Whether the leader is this process. Only ever `true` before
    /// [`deadline`](Self::deadline).
    pub is_self: bool,
    /// Whether the view is current: `false` while contact with the backend
    /// is lost, so nobody mistakes a stale leader for a fresh one.
    pub current: bool,
    /// The local instant, on the boot clock (see [`crate::clock`]), until
    /// which the work started under our leadership may run. While we lead it moves forward with each acknowledged
    /// renewal; after we lose leadership it says how long the work may still
    /// take to stop (the instant the loss was learned, when someone else may
    /// already lead). `None` when we have not led.
    pub deadline: Option<BootInstant>,
}

impl Leadership {
    /// The state before anything has been heard from the backend.
    pub fn unknown() -> Self {
        Self {
            leader: None,
            token: None,
            is_self: false,
            current: false,
            deadline: None,
        }
    }

    /// A current view in which someone else (or nobody) leads.
    pub fn observed(leader: Option<(String, u64)>) -> Self {
        let (leader, token) = leader.unzip();
        Self {
            leader,
            token,
            is_self: false,
            current: true,
            deadline: None,
        }
    }

    /// A current view in which this process leads until `deadline`.
    pub fn elected(id: String, token: u64, deadline: BootInstant) -> Self {
        Self {
            leader: Some(id),
            token: Some(token),
            is_self: true,
            current: true,
            deadline: Some(deadline),
        }
    }

    /// Whether this snapshot tells the same story to a reader as `other`:
    /// equal but for the deadline, which moves with every renewal.
    pub fn same_view(&self, other: &Leadership) -> bool {
        self.same_leader(other) && self.is_self == other.is_self && self.current == other.current
    }

    /// Whether both name the same leader in the same term (fencing token).
    pub fn same_leader(&self, other: &Leadership) -> bool {
        self.leader == other.leader && self.token == other.token
    }

    /// This snapshot as it stands at `now`: past its deadline, a process
    /// that led says it no longer does, and that it does not know who
    /// leads, however late its backend is to say so (a backend stalled on
    /// a hung disk, say: the deadline is what the promise rests on).
    pub fn as_of(self, now: BootInstant) -> Leadership {
        if self.is_self && !self.leads_at(now) {
            Leadership {
                deadline: self.deadline,
                ..Leadership::unknown()
            }
        } else {
            self
        }
    }

    /// Whether this process may act as leader at `now`.
    pub fn leads_at(&self, now: BootInstant) -> bool {
        self.is_self && self.deadline.is_some_and(|d| now < d)
    }

    /// What changed from `previous` to `self`, as one of the contract's
    /// event names.
    pub fn event_since(&self, previous: &Leadership) -> Event {
        if self.is_self && !previous.is_self {
            Event::Elected
        } else if previous.is_self && !self.is_self {
            Event::Demoted
        } else if !self.current {
            Event::Unknown
        } else if self.leader.is_some() {
            Event::Leader
        } else {
            Event::None
        }
    }
}

/// The event names of the output contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Event {
    /// Someone else is (now) the leader.
    Leader,
    /// Nobody leads.
    None,
    /// Contact with the backend is lost; the leader is not known.
    Unknown,
    /// This process became the leader.
    Elected,
    /// This process stopped being the leader.
    Demoted,
    /// Our health check started or stopped failing (the line's `healthy`
    /// says which); the leader is as the line before said.
    Health,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_follow_the_transitions() {
        let now = BootInstant::now();
        let unknown = Leadership::unknown();
        let none = Leadership::observed(None);
        let other = Leadership::observed(Some(("b".into(), 7)));
        let us = Leadership::elected("a".into(), 9, now + Duration::from_secs(1));

        assert_eq!(none.event_since(&unknown), Event::None);
        assert_eq!(other.event_since(&none), Event::Leader);
        assert_eq!(us.event_since(&other), Event::Elected);
        assert_eq!(other.event_since(&us), Event::Demoted);
        assert_eq!(unknown.event_since(&us), Event::Demoted);
        assert_eq!(unknown.event_since(&other), Event::Unknown);
    }

    #[test]
    fn leads_only_before_the_deadline() {
        let now = BootInstant::now();
        let us = Leadership::elected("a".into(), 1, now + Duration::from_millis(10));
        assert!(us.leads_at(now));
        assert!(!us.leads_at(now + Duration::from_millis(10)));
        assert!(!Leadership::observed(Some(("a".into(), 1))).leads_at(now));
    }

    #[test]
    fn deadline_is_before_server_expiry() {
        let sent = BootInstant::now();
        for secs in [1, 2, 10, 60] {
            let ttl = Duration::from_secs(secs);
            let d = deadline_after(sent, ttl);
            assert!(d < sent + ttl);
            // and leaves most of the TTL usable
            assert!(d > sent + ttl * 9 / 10, "{secs}s");
        }
    }

    #[test]
    fn a_renewal_is_the_same_view() {
        let now = BootInstant::now();
        let a = Leadership::elected("a".into(), 1, now);
        let b = Leadership::elected("a".into(), 1, now + Duration::from_secs(1));
        assert!(a.same_view(&b));
        assert_ne!(a, b);
    }

    /// Why deadlines are on the boot clock, replayed without a suspend:
    /// a leader 3 s before its deadline, then a 10 s suspend. The boot
    /// clock counted the suspend, so on resume the leader no longer leads;
    /// the monotonic clock stood still, so judged on it the leader would
    /// lead on for 3 s, and until a renewal failed, while a successor
    /// already led.
    #[test]
    fn a_suspend_past_the_deadline_ends_leadership_on_resume() {
        let before = BootInstant::from_nanos(1_000_000_000_000);
        let us = Leadership::elected("a".into(), 1, before + Duration::from_secs(3));
        assert!(us.leads_at(before));

        let suspend = Duration::from_secs(10);
        let boot_on_resume = before + suspend;
        assert!(!us.leads_at(boot_on_resume));

        let mono_before = std::time::Instant::now();
        let mono_deadline = mono_before + Duration::from_secs(3);
        let mono_on_resume = mono_before; // CLOCK_MONOTONIC skips the suspend
        assert!(
            mono_on_resume < mono_deadline,
            "the old clock would lead on"
        );
    }
}
