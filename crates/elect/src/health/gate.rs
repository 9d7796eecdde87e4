//! The health gate's hysteresis, sans I/O: see [`crate::health`].

use std::time::Duration;

use crate::clock::BootInstant;

/// A candidate's health from its checks' results, with hysteresis.
///
/// 1. At first it is unhealthy until a check passes (the first check
///    runs before the candidate joins, so it joins knowing).
/// 2. Healthy, it turns unhealthy after `failures` failed checks in a row.
/// 3. Unhealthy after having been healthy, it turns healthy again only
///    once its checks have passed without a failure for `backoff`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Gate {
    failures: u32,
    backoff: Duration,
    state: State,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum State {
    /// No check has passed yet.
    Starting,
    /// Healthy, with this many failed checks in a row.
    Healthy { failed: u32 },
    /// Unhealthy; its checks have passed since this instant, if they do.
    Recovering { passing_since: Option<BootInstant> },
}

impl Gate {
    /// Unhealthy after `failures` (at least 1) failed checks in a row,
    /// healthy again after passing for `backoff`.
    pub fn new(failures: u32, backoff: Duration) -> Gate {
        Gate {
            failures: failures.max(1),
            backoff,
            state: State::Starting,
        }
    }

    /// Whether the candidate counts as healthy.
    pub fn healthy(&self) -> bool {
        matches!(self.state, State::Healthy { .. })
    }

    /// A check ended at `now`, `passed` or not: whether the candidate
    /// counts as healthy after it.
    pub fn observe(&mut self, now: BootInstant, passed: bool) -> bool {
        self.state = match (&self.state, passed) {
            (State::Starting, true) => State::Healthy { failed: 0 },
            (State::Starting, false) => State::Starting,
            (State::Healthy { .. }, true) => State::Healthy { failed: 0 },
            (State::Healthy { failed }, false) if failed + 1 >= self.failures => {
                State::Recovering {
                    passing_since: None,
                }
            }
            (State::Healthy { failed }, false) => State::Healthy { failed: failed + 1 },
            (State::Recovering { passing_since }, true) => {
                let since = passing_since.unwrap_or(now);
                match now.saturating_duration_since(since) >= self.backoff {
                    true => State::Healthy { failed: 0 },
                    false => State::Recovering {
                        passing_since: Some(since),
                    },
                }
            }
            (State::Recovering { .. }, false) => State::Recovering {
                passing_since: None,
            },
        };
        self.healthy()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(n: u64) -> BootInstant {
        BootInstant::from_nanos(n * 1_000_000_000)
    }

    #[test]
    fn it_turns_unhealthy_after_the_failures_and_back_only_after_the_backoff() {
        let mut gate = Gate::new(3, Duration::from_secs(10));
        assert!(!gate.healthy(), "unknown until a check passes");
        assert!(!gate.observe(s(0), false));
        assert!(gate.observe(s(1), true), "the first pass needs no backoff");
        assert!(gate.observe(s(2), false));
        assert!(gate.observe(s(3), false));
        assert!(gate.observe(s(4), true), "a pass resets the count");
        assert!(gate.observe(s(5), false));
        assert!(gate.observe(s(6), false));
        assert!(!gate.observe(s(7), false), "three in a row");
        assert!(!gate.observe(s(8), true));
        assert!(!gate.observe(s(17), true));
        assert!(
            !gate.observe(s(18), false),
            "a failure restarts the backoff"
        );
        assert!(!gate.observe(s(19), true));
        assert!(gate.observe(s(29), true), "passing for the backoff");
    }

    #[test]
    fn a_flapping_check_turns_healthy_at_most_once_per_backoff() {
        let mut gate = Gate::new(1, Duration::from_secs(10));
        gate.observe(s(0), true);
        let mut turned_healthy = Vec::new();
        let mut was = gate.healthy();
        for t in 1..200 {
            // Fails every third check.
            let now = gate.observe(s(t), t % 3 != 0);
            if now && !was {
                turned_healthy.push(t);
            }
            was = now;
        }
        assert!(turned_healthy.is_empty(), "{turned_healthy:?}");
        // And flapping slower than the backoff: one change per backoff.
        let mut gate = Gate::new(1, Duration::from_secs(10));
        gate.observe(s(0), true);
        let mut changes = 0;
        let mut was = true;
        for t in 1..200 {
            let now = gate.observe(s(t), (t / 12) % 2 == 0);
            changes += u32::from(now != was);
            was = now;
        }
        assert!(changes <= 2 * 200 / 10, "{changes}");
    }
}
