//! Priorities, health, and the leader's failback decision: see
//! [`crate::steer`].

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

/// What a candidate says of itself to the others: its priority, and
/// whether its health check passes ([`crate::health`]; a candidate
/// without one is healthy).
///
/// Candidates rank by tier, then by priority: a healthy candidate of
/// positive priority, then a healthy one of priority 0, then an
/// unhealthy one of any priority. A candidate whose tier is below
/// another live one's does not lead: it steps aside at its turn and,
/// leading, hands over at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Standing {
    /// Its priority.
    pub priority: Priority,
    /// Whether its health check passes.
    pub healthy: bool,
}

impl Standing {
    /// A healthy candidate of the default priority: what one that
    /// publishes nothing (and every peer's candidate) counts as.
    pub const DEFAULT: Standing = Standing {
        priority: Priority::DEFAULT,
        healthy: true,
    };

    /// Healthy, with `priority`.
    pub fn healthy(priority: Priority) -> Standing {
        Standing {
            priority,
            healthy: true,
        }
    }

    /// 2: healthy with a positive priority; 1: healthy with priority 0;
    /// 0: unhealthy.
    pub fn tier(self) -> u8 {
        match (self.healthy, self.priority == Priority::NEVER) {
            (false, _) => 0,
            (true, true) => 1,
            (true, false) => 2,
        }
    }

    /// How the backends store it: the priority, then ` unhealthy` when
    /// its check fails.
    pub fn encode(self) -> String {
        match self.healthy {
            true => self.priority.to_string(),
            false => format!("{} unhealthy", self.priority),
        }
    }

    /// Reads what [`Standing::encode`] wrote.
    pub fn decode(s: &str) -> Option<Standing> {
        let (priority, healthy) = match s.strip_suffix(" unhealthy") {
            Some(priority) => (priority, false),
            None => (s, true),
        };
        let priority = priority.parse::<u32>().ok().and_then(Priority::new)?;
        Some(Standing { priority, healthy })
    }
}

impl fmt::Display for Standing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.encode())
    }
}

impl Default for Standing {
    fn default() -> Standing {
        Standing::DEFAULT
    }
}

/// Whether a candidate standing `own` whose turn has come gives it up to
/// those behind it: one of them is of a higher tier (healthy where we are
/// not, or of positive priority where ours is 0).
pub fn steps_aside(own: Standing, behind: impl IntoIterator<Item = Standing>) -> bool {
    behind.into_iter().any(|b| b.tier() > own.tier())
}

/// The leader's failback decision, sans I/O: to whom, if anyone, it
/// should hand over because a candidate of higher priority is there.
///
/// 1. Only a candidate whose priority is above ours, present (under the
///    same key, with the same standing) for the failback delay as far as
///    this leader has seen it; the highest, the first in line among
///    equals. A candidate that flaps never stays present that long, and
///    causes nothing; and since a new leader starts with nobody seen, a
///    failback comes at least a delay after the change before it:
///    failbacks change leaders at most once per delay.
/// 2. Never while we are pinned (a manual switchover chose us).
/// 3. A leader of a lower tier than a candidate's (unhealthy, or priority
///    0) hands over at once to the best of the highest tier; pinned, only
///    if unhealthy: an operator's choice does not keep a broken host
///    leading. A
///    health check's own hysteresis ([`crate::health::Gate`]) is what
///    keeps a flapping candidate from being handed to often.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Failback {
    delay: Duration,
    own: Standing,
    pinned: bool,
    /// Who is in line behind us: key, standing, present since.
    present: Vec<(String, Standing, BootInstant)>,
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
    /// Rule 3: a leader of a lower tier waits like any other.
    Urgent,
}

impl Failback {
    /// We lead, standing `own`; nobody seen yet.
    pub fn new(own: Standing, delay: Duration) -> Failback {
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

    /// Our standing.
    pub fn own(&self) -> Standing {
        self.own
    }

    /// Whether a manual switchover pins us.
    pub fn pinned(&self) -> bool {
        self.pinned
    }

    /// Our priority or health changed.
    pub fn set_own(&mut self, own: Standing) {
        self.own = own;
    }

    /// Whether a manual switchover chose us (and still pins us).
    pub fn set_pinned(&mut self, pinned: bool) {
        self.pinned = pinned;
    }

    /// The candidates behind us as a read found them at `now`, in line
    /// order: each candidate's key and standing.
    pub fn saw(&mut self, now: BootInstant, behind: &[(String, Standing)]) {
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
        let own_tier = self.own.tier();
        // An operator's pin keeps a healthy leader of priority 0, not an
        // unhealthy one.
        let pinned = self.pinned && self.holds(FailbackRule::Pinned);
        if own_tier < 2 && !(pinned && self.own.healthy) && self.holds(FailbackRule::Urgent) {
            // Rule 3: the best of a higher tier, at once.
            let mut best: Option<&(String, Standing, BootInstant)> = None;
            for candidate @ (_, standing, _) in &self.present {
                let rank = (standing.tier(), standing.priority);
                if standing.tier() > own_tier
                    && best.is_none_or(|(_, b, _)| rank > (b.tier(), b.priority))
                {
                    best = Some(candidate);
                }
            }
            return best.map(|(key, _, _)| key.as_str());
        }
        if pinned {
            return None;
        }
        let mut best: Option<&(String, Standing, BootInstant)> = None;
        for candidate @ (_, standing, since) in &self.present {
            let settled = now >= *since + self.delay || !self.holds(FailbackRule::Settled);
            let above = standing.tier() >= own_tier && standing.priority > self.own.priority;
            if above && settled && best.is_none_or(|(_, b, _)| standing.priority > b.priority) {
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
            .filter(|(_, s, _)| s.tier() >= self.own.tier() && s.priority > self.own.priority)
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

    fn seen(list: &[(&str, u32)]) -> Vec<(String, Standing)> {
        list.iter()
            .map(|(k, p)| ((*k).into(), Standing::healthy(Priority::new(*p).unwrap())))
            .collect()
    }

    fn standing(p: u32, healthy: bool) -> Standing {
        Standing {
            priority: Priority::new(p).unwrap(),
            healthy,
        }
    }

    #[test]
    fn a_higher_priority_present_for_the_delay_is_failed_back_to() {
        let delay = Duration::from_millis(100);
        let mut f = Failback::new(Standing::DEFAULT, delay);
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
        let mut f = Failback::new(Standing::DEFAULT, delay);
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
        let mut f = Failback::new(Standing::DEFAULT, delay);
        f.saw(ms(0), &seen(&[("c", 2)]));
        f.saw(ms(90), &seen(&[("c", 3)]));
        assert_eq!(f.decide(ms(150)), None);
        assert_eq!(f.decide(ms(190)), Some("c"));
        let mut never = Failback::new(Standing::healthy(Priority::NEVER), delay);
        never.saw(ms(1), &seen(&[("b", 0), ("c", 1)]));
        assert_eq!(never.decide(ms(1)), Some("c"));
        assert!(steps_aside(
            standing(0, true),
            [standing(0, true), standing(1, true)]
        ));
        assert!(!steps_aside(standing(0, true), [standing(0, true)]));
        assert!(!steps_aside(standing(1, true), [standing(9, true)]));
        assert_eq!("never".parse(), Ok(Priority::NEVER));
        assert!("-1".parse::<Priority>().is_err());
    }

    #[test]
    fn health_ranks_first_and_an_unhealthy_leader_hands_over_at_once_even_pinned() {
        assert!(steps_aside(standing(9, false), [standing(0, true)]));
        assert!(!steps_aside(standing(9, false), [standing(1, false)]));
        assert!(!steps_aside(standing(0, true), [standing(9, false)]));
        let delay = Duration::from_millis(100);
        let mut f = Failback::new(standing(5, false), delay);
        f.set_pinned(true);
        f.saw(
            ms(0),
            &[
                ("b".into(), standing(9, false)),
                ("c".into(), standing(0, true)),
                ("d".into(), standing(2, true)),
            ],
        );
        assert_eq!(f.decide(ms(0)), Some("d"), "the best healthy one, at once");
        // Nobody healthy: the unhealthy leader keeps leading.
        f.saw(ms(1), &[("b".into(), standing(9, false))]);
        assert_eq!(f.decide(ms(500)), None);
        // A healthy leader never hands over to an unhealthy candidate,
        // whatever its priority.
        let mut g = Failback::new(standing(1, true), delay);
        g.saw(ms(0), &[("b".into(), standing(9, false))]);
        assert_eq!(g.decide(ms(500)), None);
        assert_eq!(g.next_change(), None);
        for s in [standing(0, true), standing(7, false), Standing::DEFAULT] {
            assert_eq!(Standing::decode(&s.encode()), Some(s));
        }
        assert_eq!(Standing::decode("5 sick"), None);
    }
}
