//! The line as data, a switchover's target, its plan (the checks before
//! anything changes) and its report: see [`crate::steer`].

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::Serialize;

use super::priority::{Priority, Standing};
use crate::backend_kind::Backend;

/// Whom a switchover moves leadership to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Target {
    /// The candidate with this id.
    Candidate(String),
    /// The next in line.
    Any,
}

impl FromStr for Target {
    type Err = String;

    fn from_str(s: &str) -> Result<Target, String> {
        match s {
            "" => Err("empty: name a candidate's id, or `any` for the next in line".into()),
            "any" => Ok(Target::Any),
            id => Ok(Target::Candidate(id.to_owned())),
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Candidate(id) => f.write_str(id),
            Target::Any => f.write_str("any"),
        }
    }
}

/// Who takes part in an election, in the order the backend would let
/// them lead.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Line {
    /// The backend that holds the election.
    pub backend: Backend,
    /// The election's name.
    pub election: String,
    /// In line order: the first leads, if anyone does.
    pub candidates: Vec<InLine>,
}

/// One candidate of a [`Line`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InLine {
    /// The id it publishes.
    pub id: String,
    /// Its place's fencing token: the key's create revision (etcd), the
    /// znode's czxid (ZooKeeper), what it leads with; Raft-vote: the
    /// leader's term, none for the others (a term is won, not queued for).
    pub token: Option<u64>,
    /// Whether it leads.
    pub leads: bool,
    /// Its priority (the default where it published none).
    pub priority: Priority,
    /// Whether its health check passes (a candidate with none, and every
    /// peer's candidate, is healthy).
    pub healthy: bool,
    /// Whether it is known alive: its key or znode exists (etcd,
    /// ZooKeeper), it answered the leader within an election timeout
    /// (Raft-vote).
    pub live: bool,
    /// Which tool took part: `elect`, or a peer's (`go` for etcd's
    /// `concurrency.Election` and `etcdctl elect`, `curator`, `kazoo`).
    pub by: &'static str,
}

impl InLine {
    /// Its priority and health.
    pub fn standing(&self) -> Standing {
        Standing {
            priority: self.priority,
            healthy: self.healthy,
        }
    }

    /// Whether it follows a switchover: hands over, or steps aside.
    pub fn steerable(&self) -> bool {
        self.by == "elect"
    }
}

/// Why a switchover was refused, before anything changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Nobody leads: there is nothing to switch over from.
    NoLeader,
    /// No candidate has this id.
    NoSuchCandidate(String),
    /// The candidate with this id is not known alive.
    NotLive(String),
    /// The candidate with this id has priority 0 and another of positive
    /// priority is live: it never leads then (Patroni's `nofailover`).
    NeverLeads(String),
    /// The candidate with this id fails its health check, and a healthy
    /// one is live: it would hand over at once.
    Unhealthy(String),
    /// Several live candidates have this id: the switchover would not
    /// know which one was meant.
    AmbiguousTarget(String),
    /// `--to any`, and nobody live (and healthy, where one is) waits
    /// behind the leader.
    NobodyNext,
    /// The leader is a peer's candidate, which knows no switchovers.
    LeaderNotSteerable {
        /// Its id.
        id: String,
        /// Whose candidate it is.
        by: &'static str,
    },
    /// A peer's candidate stands between the leader and the target and
    /// cannot step aside: it would lead instead of the target.
    InTheWay {
        /// Its id.
        id: String,
        /// Whose candidate it is.
        by: &'static str,
    },
    /// Another switchover of this election is under way.
    Busy,
    /// The line changed between the read and the record (a candidate came
    /// or went): nothing was done; try again.
    LineChanged,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::NoLeader => write!(f, "nobody leads the election"),
            Refusal::NoSuchCandidate(id) => write!(f, "no live candidate has the id {id:?}"),
            Refusal::NeverLeads(id) => write!(
                f,
                "{id:?} has priority 0, and a candidate of positive priority is live: it never leads then"
            ),
            Refusal::Unhealthy(id) => write!(
                f,
                "{id:?} fails its health check, and a healthy candidate is live: it would hand over at once"
            ),
            Refusal::NotLive(id) => write!(
                f,
                "{id:?} has not answered the leader lately: it is not known alive"
            ),
            Refusal::AmbiguousTarget(id) => {
                write!(f, "several live candidates have the id {id:?}")
            }
            Refusal::NobodyNext => write!(
                f,
                "nobody live waits behind the leader (healthy, where a candidate is)"
            ),
            Refusal::LeaderNotSteerable { id, by } => write!(
                f,
                "the leader {id:?} is a {by} candidate, which cannot hand over on request"
            ),
            Refusal::InTheWay { id, by } => write!(
                f,
                "{id:?}, a {by} candidate ahead of the target, cannot step aside and would lead instead"
            ),
            Refusal::Busy => write!(f, "another switchover of this election is under way"),
            Refusal::LineChanged => {
                write!(
                    f,
                    "the line changed while the switchover was being recorded"
                )
            }
        }
    }
}

/// What a switchover will do, as [`Line::plan`] decided it: indexes into
/// the line it was planned on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The leader, first in line.
    pub leader: usize,
    /// The target, behind it.
    pub target: usize,
    /// Those between them, who step aside.
    pub step_aside: Vec<usize>,
}

impl Plan {
    /// Whether the target leads already: nothing to do.
    pub fn nothing_to_do(&self) -> bool {
        self.leader == self.target
    }
}

impl Line {
    /// Plans a switchover to `to`, or says why it may not start.
    ///
    /// # Errors
    /// The [`Refusal`]: nobody leads, the leader cannot hand over, the
    /// target is not a (single) live candidate, or a candidate between
    /// them cannot step aside.
    pub fn plan(&self, to: &Target) -> Result<Plan, Refusal> {
        let leader = match self.candidates.first() {
            Some(first) if first.leads => first,
            _ => return Err(Refusal::NoLeader),
        };
        let target = match to {
            // The first behind the leader that the checks below accept.
            Target::Any => (1..self.candidates.len())
                .find(|&at| self.refusal_of(at).is_none())
                .ok_or(Refusal::NobodyNext)?,
            Target::Candidate(id) => {
                let mut named = self
                    .candidates
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| &c.id == id);
                match (named.next(), named.next()) {
                    (None, _) => return Err(Refusal::NoSuchCandidate(id.clone())),
                    (Some(_), Some(_)) => return Err(Refusal::AmbiguousTarget(id.clone())),
                    (Some((at, _)), None) => at,
                }
            }
        };
        if let Some(refusal) = self.refusal_of(target) {
            return Err(refusal);
        }
        if target == 0 {
            return Ok(Plan {
                leader: 0,
                target: 0,
                step_aside: vec![],
            });
        }
        if !leader.steerable() {
            return Err(Refusal::LeaderNotSteerable {
                id: leader.id.clone(),
                by: leader.by,
            });
        }
        if let Some(blocker) = self.candidates[1..target].iter().find(|c| !c.steerable()) {
            return Err(Refusal::InTheWay {
                id: blocker.id.clone(),
                by: blocker.by,
            });
        }
        Ok(Plan {
            leader: 0,
            target,
            step_aside: (1..target).collect(),
        })
    }

    /// Why the candidate at `target` may not be switched over to, if it
    /// may not: it is not known alive, or another live candidate is of a
    /// higher tier ([`Standing::tier`]: healthy where it is not, or of
    /// positive priority where it has 0), so it would hand over at once.
    fn refusal_of(&self, target: usize) -> Option<Refusal> {
        let candidate = &self.candidates[target];
        if !candidate.live {
            return Some(Refusal::NotLive(candidate.id.clone()));
        }
        let own = candidate.standing();
        let above = self
            .candidates
            .iter()
            .enumerate()
            .filter(|(i, c)| *i != target && c.live && c.standing().tier() > own.tier())
            .count();
        match (above > 0, own.healthy) {
            (false, _) => None,
            (true, false) => Some(Refusal::Unhealthy(candidate.id.clone())),
            (true, true) => Some(Refusal::NeverLeads(candidate.id.clone())),
        }
    }

    /// Who leads, if anyone.
    pub fn leader(&self) -> Option<&InLine> {
        self.candidates.first().filter(|c| c.leads)
    }
}

/// How a switchover ended, as `elect switchover` reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    /// The target leads, with this token. `changed`: whether leadership
    /// moved (false when the target led already).
    Done {
        /// The target's id.
        leader: String,
        /// Its fencing token.
        token: u64,
        /// Whether leadership moved.
        changed: bool,
    },
    /// It did not happen by the timeout, or the target left half-way:
    /// `reason`, and who leads now as far as the last read saw.
    NotDone {
        /// Why not.
        reason: String,
        /// Who leads, if anyone, as last read.
        leader: Option<String>,
        /// Their token.
        token: Option<u64>,
    },
}

/// A switchover's report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    /// Its identity, as recorded in the election.
    pub switchover: String,
    /// The leader it started from.
    pub from: String,
    /// The target it was planned for.
    pub to: String,
    /// How it ended.
    #[serde(flatten)]
    pub outcome: Outcome,
    /// From the request to the outcome.
    #[serde(serialize_with = "as_millis")]
    pub took: Duration,
}

fn as_millis<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1000.0)
}

impl Report {
    /// Whether the target leads.
    pub fn done(&self) -> bool {
        matches!(self.outcome, Outcome::Done { .. })
    }
}

/// A switchover under way, from the moment it was asked for: what its
/// report says beside the outcome.
#[derive(Debug, Clone)]
pub struct Started {
    /// Its identity.
    pub identity: String,
    from: String,
    to: String,
    at: std::time::Instant,
}

impl Started {
    /// A switchover asked for at `at`, from leader `from` to `to`, with a
    /// fresh identity.
    pub fn new(at: std::time::Instant, from: &str, to: &str) -> Started {
        Started {
            identity: fresh_identity(),
            from: from.to_owned(),
            to: to.to_owned(),
            at,
        }
    }

    /// Its report, ended in `outcome` now.
    pub fn ended(&self, outcome: Outcome) -> Report {
        Report {
            switchover: self.identity.clone(),
            from: self.from.clone(),
            to: self.to.clone(),
            outcome,
            took: self.at.elapsed(),
        }
    }

    /// Its report when the target led already, with `token`.
    pub fn nothing_to_do(&self, token: u64) -> Report {
        self.ended(Outcome::Done {
            leader: self.to.clone(),
            token,
            changed: false,
        })
    }
}

/// A fresh switchover identity: 16 hex digits, random per process and call.
pub fn fresh_identity() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    format!("{:016x}", hasher.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(candidates: &[(&str, &'static str)], led: bool) -> Line {
        Line {
            backend: Backend::Etcd,
            election: "e".into(),
            candidates: candidates
                .iter()
                .enumerate()
                .map(|(i, (id, by))| InLine {
                    id: (*id).into(),
                    token: Some(10 + i as u64),
                    leads: led && i == 0,
                    priority: Priority::DEFAULT,
                    healthy: true,
                    live: true,
                    by,
                })
                .collect(),
        }
    }

    fn to(id: &str) -> Target {
        id.parse().unwrap()
    }

    #[test]
    fn the_candidates_between_leader_and_target_step_aside() {
        let l = line(&[("a", "elect"), ("b", "elect"), ("c", "elect")], true);
        let plan = l.plan(&to("c")).unwrap();
        assert_eq!((plan.leader, plan.target), (0, 2));
        assert_eq!(plan.step_aside, vec![1]);
        assert_eq!(l.plan(&Target::Any).unwrap().target, 1);
        assert!(l.plan(&to("a")).unwrap().nothing_to_do());
    }

    #[test]
    fn a_target_that_is_not_one_live_candidate_is_refused() {
        let l = line(&[("a", "elect"), ("b", "elect"), ("b", "elect")], true);
        assert_eq!(l.plan(&to("z")), Err(Refusal::NoSuchCandidate("z".into())));
        assert_eq!(l.plan(&to("b")), Err(Refusal::AmbiguousTarget("b".into())));
        let alone = line(&[("a", "elect")], true);
        assert_eq!(alone.plan(&Target::Any), Err(Refusal::NobodyNext));
        let leaderless = line(&[("a", "elect"), ("b", "elect")], false);
        assert_eq!(leaderless.plan(&to("b")), Err(Refusal::NoLeader));
        let mut silent = line(&[("a", "elect"), ("b", "elect")], true);
        silent.candidates[1].live = false;
        assert_eq!(silent.plan(&to("b")), Err(Refusal::NotLive("b".into())));
        let mut never = line(&[("a", "elect"), ("b", "elect")], true);
        never.candidates[1].priority = Priority::NEVER;
        assert_eq!(never.plan(&to("b")), Err(Refusal::NeverLeads("b".into())));
        let mut sick = line(&[("a", "elect"), ("b", "elect"), ("c", "elect")], true);
        sick.candidates[1].healthy = false;
        assert_eq!(sick.plan(&to("b")), Err(Refusal::Unhealthy("b".into())));
        assert_eq!(
            sick.plan(&Target::Any).unwrap().target,
            2,
            "the next healthy"
        );
        for c in &mut sick.candidates {
            c.healthy = false;
        }
        assert_eq!(
            sick.plan(&to("b")).unwrap().target,
            1,
            "none healthy: any live"
        );
        assert!("".parse::<Target>().is_err());
    }

    #[test]
    fn a_peer_that_cannot_step_aside_or_hand_over_refuses_the_switchover() {
        let go_leads = line(&[("a", "go"), ("b", "elect")], true);
        assert!(matches!(
            go_leads.plan(&to("b")),
            Err(Refusal::LeaderNotSteerable { .. })
        ));
        let go_between = line(&[("a", "elect"), ("g", "go"), ("c", "elect")], true);
        assert_eq!(
            go_between.plan(&to("c")),
            Err(Refusal::InTheWay {
                id: "g".into(),
                by: "go"
            })
        );
        // Behind the target, a peer is no obstacle.
        let go_behind = line(&[("a", "elect"), ("b", "elect"), ("g", "go")], true);
        assert!(go_behind.plan(&to("b")).is_ok());
    }

    #[test]
    fn identities_differ() {
        assert_ne!(fresh_identity(), fresh_identity());
        assert_eq!(fresh_identity().len(), 16);
    }
}
