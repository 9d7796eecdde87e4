//! Priorities and the leader's failback decision: see [`crate::steer`].

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::Serialize;

use crate::clock::BootInstant;

/// How much a candidate wants to lead: among live candidates the highest
/// leads (after a failback delay); equal priorities keep the line's
/// order. 0 leads only when no candidate of positive priority is live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Priority(u32);

impl Priority {
    /// Never leads while a candidate of positive priority is live.
    pub const NEVER: Priority = Priority(0);
    /// Every candidate's unless told otherwise.
    pub const DEFAULT: Priority = Priority(1);
    /// The highest accepted.
    pub const MAX: u32 = 1_000_000;

    /// The priority `n`, at most [`Priority::MAX`].
    pub fn new(n: u32) -> Option<Priority> {
        (n <= Self::MAX).then_some(Priority(n))
    }

    /// Its value.
    pub fn get(self) -> u32 {
        self.0
    }
}

impl Default for Priority {
    fn default() -> Priority {
        Priority::DEFAULT
    }
}

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl FromStr for Priority {
    type Err = String;

    fn from_str(s: &str) -> Result<Priority, String> {
        if s == "never" {
            return Ok(Priority::NEVER);
        }
        s.parse::<u32>()
            .ok()
            .and_then(Priority::new)
            .ok_or_else(|| {
                format!(
                    "{s:?}: give a whole number from 0 to {} (higher leads; 0 or `never`: only when no other candidate is live)",
                    Priority::MAX
                )
            })
    }
}

/// Whether a candidate of priority `own` whose turn has come gives it up
/// to those behind it: priority 0, and one of them has a positive one.
pub fn steps_aside(own: Priority, behind: impl IntoIterator<Item = Priority>) -> bool {
    own == Priority::NEVER && behind.into_iter().any(|p| p > Priority::NEVER)
}

/// The leader's failback decision, sans I/O: to whom, if anyone, it
/// should hand over because a candidate of higher priority is there.
///
/// 1. Only a candidate whose priority is above ours, present (under the
///    same key, with the same priority) for the failback delay as far as
///    this leader has seen it; the highest, the first in line among
///    equals. A candidate that flaps never stays present that long, and
///    causes nothing; and since a new leader starts with nobody seen, a
///    failback comes at least a delay after the change before it:
///    failbacks change leaders at most once per delay.
/// 2. Never while we are pinned (a manual switchover chose us).
/// 3. A leader of priority 0 hands over to a positive one at once.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Failback {
    delay: Duration,
    own: Priority,
    pinned: bool,
    /// Who is in line behind us: key, priority, present since.
    present: Vec<(String, Priority, BootInstant)>,
    /// A rule switched off (the model check's teeth only).
    #[cfg(test)]
    off: Option<FailbackRule>,
}

/// The failback's rules, each of which the model check switches off in
/// turn to show it catches what the rule prevents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum FailbackRule {
    /// Rule 1: a candidate counts at once, not after the delay.
    Settled,
    /// Rule 2: a pinned leader fails back too.
    Pinned,
}

impl Failback {
    /// We lead, with priority `own`; nobody seen yet.
    pub fn new(own: Priority, delay: Duration) -> Failback {
        Failback {
            delay,
            own,
            pinned: false,
            present: Vec::new(),
            #[cfg(test)]
            off: None,
        }
    }

    /// The same, with one rule switched off (model check only).
    #[cfg(test)]
    pub(crate) fn without(mut self, rule: Option<FailbackRule>) -> Failback {
        self.off = rule;
        self
    }

    /// Whether `rule` holds here (always, outside the model's teeth).
    fn holds(&self, rule: FailbackRule) -> bool {
        #[cfg(test)]
        return self.off != Some(rule);
        #[cfg(not(test))]
        {
            let _ = rule;
            true
        }
    }

    /// Our priority.
    pub fn own(&self) -> Priority {
        self.own
    }

    /// Whether a manual switchover pins us.
    pub fn pinned(&self) -> bool {
        self.pinned
    }

    /// Our priority changed.
    pub fn set_own(&mut self, own: Priority) {
        self.own = own;
    }

    /// Whether a manual switchover chose us (and still pins us).
    pub fn set_pinned(&mut self, pinned: bool) {
        self.pinned = pinned;
    }

    /// The candidates behind us as a read found them at `now`, in line
    /// order: each candidate's key and priority.
    pub fn saw(&mut self, now: BootInstant, behind: &[(String, Priority)]) {
        let before = std::mem::take(&mut self.present);
        self.present = behind
            .iter()
            .map(|(key, priority)| {
                let since = before
                    .iter()
                    .find(|(k, p, _)| k == key && p == priority)
                    .map_or(now, |(_, _, since)| *since);
                (key.clone(), *priority, since)
            })
            .collect();
    }

    /// Whom to hand over to at `now`, if anyone.
    pub fn decide(&self, now: BootInstant) -> Option<&str> {
        if self.pinned && self.holds(FailbackRule::Pinned) {
            return None;
        }
        let urgent = self.own == Priority::NEVER;
        let mut best: Option<&(String, Priority, BootInstant)> = None;
        for candidate @ (_, priority, since) in &self.present {
            let settled =
                urgent || now >= *since + self.delay || !self.holds(FailbackRule::Settled);
            if *priority > self.own && settled && best.is_none_or(|(_, b, _)| priority > b) {
                best = Some(candidate);
            }
        }
        best.map(|(key, _, _)| key.as_str())
    }

    /// When [`Failback::decide`] may next change its answer without a new
    /// read: the earliest instant a present candidate becomes settled.
    pub fn next_change(&self) -> Option<BootInstant> {
        self.present
            .iter()
            .filter(|(_, p, _)| *p > self.own)
            .map(|(_, _, since)| *since + self.delay)
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> BootInstant {
        BootInstant::from_nanos(n * 1_000_000)
    }

    fn seen(list: &[(&str, u32)]) -> Vec<(String, Priority)> {
        list.iter()
            .map(|(k, p)| ((*k).into(), Priority::new(*p).unwrap()))
            .collect()
    }

    #[test]
    fn a_higher_priority_present_for_the_delay_is_failed_back_to() {
        let delay = Duration::from_millis(100);
        let mut f = Failback::new(Priority::DEFAULT, delay);
        f.saw(ms(10), &seen(&[("b", 1), ("c", 5), ("d", 3)]));
        assert_eq!(f.decide(ms(50)), None, "not settled");
        assert_eq!(f.next_change(), Some(ms(110)));
        assert_eq!(f.decide(ms(110)), Some("c"));
        f.set_pinned(true);
        assert_eq!(f.decide(ms(500)), None, "a manual choice stands");
    }

    #[test]
    fn a_flapping_candidate_causes_nothing() {
        let delay = Duration::from_millis(100);
        let mut f = Failback::new(Priority::DEFAULT, delay);
        for t in (0..1000).step_by(60) {
            // Gone, then back under a new key, every 60 ms.
            let key = format!("c{t}");
            f.saw(ms(t), &seen(&[(key.as_str(), 9)]));
            assert_eq!(f.decide(ms(t + 59)), None);
            f.saw(ms(t + 30), &[]);
        }
    }

    #[test]
    fn a_priority_change_restarts_the_wait_and_zero_hands_over_at_once() {
        let delay = Duration::from_millis(100);
        let mut f = Failback::new(Priority::DEFAULT, delay);
        f.saw(ms(0), &seen(&[("c", 2)]));
        f.saw(ms(90), &seen(&[("c", 3)]));
        assert_eq!(f.decide(ms(150)), None);
        assert_eq!(f.decide(ms(190)), Some("c"));
        let mut never = Failback::new(Priority::NEVER, delay);
        never.saw(ms(1), &seen(&[("b", 0), ("c", 1)]));
        assert_eq!(never.decide(ms(1)), Some("c"));
        assert!(steps_aside(
            Priority::NEVER,
            [Priority::NEVER, Priority::DEFAULT]
        ));
        assert!(!steps_aside(Priority::NEVER, [Priority::NEVER]));
        assert!(!steps_aside(Priority::DEFAULT, [Priority::new(9).unwrap()]));
        assert_eq!("never".parse(), Ok(Priority::NEVER));
        assert!("-1".parse::<Priority>().is_err());
    }
}
