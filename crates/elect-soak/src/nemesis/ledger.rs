//! The ledger of faults: those in effect, with how and when each heals;
//! those healed, in the order they healed; those refused, by why. Its
//! budgets keep the service able to recover: at most one member fault per
//! service at a time, one fault per election's candidates, load on the
//! machine once.

use std::collections::BTreeMap;
use std::sync::Arc;

use elect_judge::history::{FaultKind, FaultRecord, Micros};
use elect_lab::Fault;
use elect_lab::fault::Proxy;

use crate::options::Backend;
use crate::tools::ToolError;

/// Why a fault was not dealt, as the ledger counts it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Every election's candidates are busy: the budget, not worth
    /// reporting.
    #[error("every election's candidates are busy")]
    Busy,
    /// Nothing of its kind to hit at this moment (no leader, a candidate
    /// not running, nothing to delete).
    #[error("{0}")]
    NoTarget(&'static str),
    /// The lab, a signal or a tool failed.
    #[error("{0}")]
    Failed(String),
}

impl From<ToolError> for Refusal {
    fn from(e: ToolError) -> Refusal {
        match e {
            ToolError::NothingThere(what) => Refusal::NoTarget(what),
            ToolError::Failed(why) => Refusal::Failed(why),
        }
    }
}

/// What a fault holds while in effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Budget {
    /// A service's members: one such fault per service at a time.
    Member,
    /// An election's candidates: one such fault per election.
    Candidate,
    /// The machine (load).
    Machine,
    /// An instant fault: nothing.
    Instant,
}

/// The budget a fault of `kind` takes.
pub fn budget(kind: FaultKind) -> Budget {
    match kind {
        FaultKind::MemberKill
        | FaultKind::MemberPause
        | FaultKind::MemberStall
        | FaultKind::MemberStallLog
        | FaultKind::MemberCut
        | FaultKind::QuorumLoss
        | FaultKind::RollingRestart => Budget::Member,
        FaultKind::Compaction | FaultKind::OperatorDelete | FaultKind::ParentDelete => {
            Budget::Instant
        }
        FaultKind::WatchdogKill | FaultKind::GroupKill => Budget::Instant,
        // Over whatever else the candidates suffer: a switchover to a
        // paused, cut-off or just-killed target is part of the test.
        FaultKind::Switchover => Budget::Instant,
        FaultKind::PriorityChange => Budget::Candidate,
        // A failing check holds nobody down: it goes over whatever else
        // the candidates suffer, as a switchover does (and is never
        // refused for an election busy with another fault, which would
        // drop it from a short soak's deck). It still heals at its end.
        FaultKind::HealthFlap | FaultKind::HealthHang | FaultKind::HealthAll => Budget::Instant,
        FaultKind::Load => Budget::Machine,
        FaultKind::CandidateFreeze
        | FaultKind::CandidateKill
        | FaultKind::CandidateResign
        | FaultKind::CandidateCut
        | FaultKind::CandidateStall => Budget::Candidate,
    }
}

/// How a fault in effect is healed.
pub enum Heal {
    /// Each member its undoing fault.
    Members(Vec<(String, Fault)>),
    /// The candidate (election, name) the nemesis held may start again.
    Release(String, String),
    /// SIGCONT to a process, or to a group.
    Resume(i32),
    ResumeGroup(i32),
    /// The candidate's proxies pass traffic again.
    Uncut(Vec<Arc<Proxy>>),
    /// The tracer holding a process's syncs lets them go.
    Unstall(u32),
    /// The load generator stops.
    LoadOff(u32),
    /// The rolling restart's thread: healed once it has finished.
    Rolling(std::thread::JoinHandle<()>),
    /// The switchover's thread: healed once it has finished, its report
    /// (the record's note).
    Switchover(std::thread::JoinHandle<String>),
    /// A health check's marker is removed: the check passes again.
    Unmark(std::path::PathBuf),
}

/// A fault in effect.
pub struct Active {
    pub record: FaultRecord,
    /// When it is due to heal.
    pub heal_at: Micros,
    pub heal: Heal,
    pub budget: Budget,
}

impl Active {
    /// Whether it is due to heal at `now`: a rolling restart once its
    /// thread has finished, any other at its time.
    fn due(&self, now: Micros) -> bool {
        match &self.heal {
            Heal::Rolling(h) => h.is_finished(),
            Heal::Switchover(h) => h.is_finished(),
            _ => self.heal_at <= now,
        }
    }
}

/// The faults in effect, healed, and refused.
#[derive(Default)]
pub struct Ledger {
    active: Vec<Active>,
    dealt: Vec<FaultRecord>,
    refused: BTreeMap<String, usize>,
}

impl Ledger {
    /// Faults in effect now.
    pub fn in_effect(&self) -> usize {
        self.active.len()
    }

    /// Every fault that has healed, in the order it healed.
    pub fn dealt(&self) -> &[FaultRecord] {
        &self.dealt
    }

    /// Faults that could not be dealt, by why.
    pub fn refused(&self) -> &BTreeMap<String, usize> {
        &self.refused
    }

    /// Whether `budget` is taken, on `backend` for a member fault.
    pub fn busy(&self, budget: Budget, backend: Option<Backend>) -> bool {
        match budget {
            Budget::Instant | Budget::Candidate => false,
            Budget::Machine => self.active.iter().any(|a| a.budget == Budget::Machine),
            Budget::Member => self.active.iter().any(|a| {
                a.budget == Budget::Member
                    && Some(a.record.backend.as_str()) == backend.map(Backend::name)
            }),
        }
    }

    /// Whether a candidate of election `key` is already hit by a fault.
    pub fn candidate_busy(&self, key: &str) -> bool {
        self.active
            .iter()
            .any(|a| a.budget == Budget::Candidate && a.record.election.as_deref() == Some(key))
    }

    /// A fault now in effect.
    pub fn take_effect(&mut self, active: Active) {
        self.active.push(active);
    }

    /// The faults due to heal at `now`, no longer in effect.
    pub fn due(&mut self, now: Micros) -> Vec<Active> {
        let (due, rest) = std::mem::take(&mut self.active)
            .into_iter()
            .partition(|a| a.due(now));
        self.active = rest;
        due
    }

    /// Every fault in effect, no longer in effect.
    pub fn all(&mut self) -> Vec<Active> {
        std::mem::take(&mut self.active)
    }

    /// A fault healed (or an instant one dealt).
    pub fn healed(&mut self, record: FaultRecord) {
        self.dealt.push(record);
    }

    /// A fault of `kind` refused: counted by why, but for a budget that
    /// was only busy (not worth reporting).
    pub fn refuse(&mut self, kind: FaultKind, why: &Refusal) {
        if *why == Refusal::Busy {
            return;
        }
        *self.refused.entry(format!("{kind}: {why}")).or_default() += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(kind: FaultKind, backend: &str, election: Option<&str>) -> FaultRecord {
        FaultRecord {
            kind,
            backend: backend.into(),
            target: "t".into(),
            election: election.map(str::to_owned),
            start: 0,
            end: 0,
            breaks_quorum: false,
            note: String::new(),
        }
    }

    fn active(kind: FaultKind, backend: &str, election: Option<&str>, heal_at: Micros) -> Active {
        Active {
            record: record(kind, backend, election),
            heal_at,
            heal: Heal::Resume(0),
            budget: budget(kind),
        }
    }

    #[test]
    fn a_member_fault_takes_its_service_alone() {
        let mut ledger = Ledger::default();
        assert!(!ledger.busy(Budget::Member, Some(Backend::Etcd)));
        ledger.take_effect(active(FaultKind::MemberPause, "etcd", None, 10));
        assert!(ledger.busy(Budget::Member, Some(Backend::Etcd)));
        assert!(!ledger.busy(Budget::Member, Some(Backend::Zk)));
        assert!(!ledger.busy(Budget::Machine, None));
        // Instant faults and candidate faults are never refused as busy
        // here: candidates are budgeted per election.
        assert!(!ledger.busy(Budget::Instant, Some(Backend::Etcd)));
        assert!(!ledger.busy(Budget::Candidate, Some(Backend::Etcd)));
    }

    #[test]
    fn a_candidate_fault_takes_its_election_alone() {
        let mut ledger = Ledger::default();
        ledger.take_effect(active(
            FaultKind::CandidateFreeze,
            "zk",
            Some("zk/elect"),
            10,
        ));
        assert!(ledger.candidate_busy("zk/elect"));
        assert!(!ledger.candidate_busy("zk/kazoo"));
    }

    #[test]
    fn faults_heal_when_due_and_are_kept_in_the_order_they_healed() {
        let mut ledger = Ledger::default();
        ledger.take_effect(active(FaultKind::MemberKill, "etcd", None, 30));
        ledger.take_effect(active(FaultKind::Load, "machine", None, 10));
        assert!(ledger.due(5).is_empty());
        let due = ledger.due(10);
        assert_eq!(due.len(), 1);
        assert_eq!(due[0].record.kind, FaultKind::Load);
        assert_eq!(ledger.in_effect(), 1);
        for a in due.into_iter().chain(ledger.all()) {
            ledger.healed(a.record);
        }
        assert_eq!(ledger.in_effect(), 0);
        let kinds: Vec<FaultKind> = ledger.dealt().iter().map(|r| r.kind).collect();
        assert_eq!(kinds, [FaultKind::Load, FaultKind::MemberKill]);
    }

    #[test]
    fn a_rolling_restart_heals_once_its_thread_is_done() {
        let mut ledger = Ledger::default();
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let _ = wait.recv();
        });
        ledger.take_effect(Active {
            heal: Heal::Rolling(thread),
            ..active(FaultKind::RollingRestart, "zk", None, 0)
        });
        assert!(ledger.due(u64::MAX).is_empty(), "still restarting");
        go.send(()).unwrap();
        let healed = (0..1000).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(5));
            !ledger.due(u64::MAX).is_empty()
        });
        assert!(healed, "healed once its thread ended");
    }

    #[test]
    fn refusals_are_counted_by_why_but_a_busy_budget_is_not() {
        let mut ledger = Ledger::default();
        ledger.refuse(FaultKind::CandidateKill, &Refusal::Busy);
        ledger.refuse(
            FaultKind::WatchdogKill,
            &Refusal::NoTarget("no leader to hit"),
        );
        ledger.refuse(
            FaultKind::WatchdogKill,
            &Refusal::NoTarget("no leader to hit"),
        );
        let refused: Vec<(&str, usize)> = ledger
            .refused()
            .iter()
            .map(|(k, n)| (k.as_str(), *n))
            .collect();
        assert_eq!(refused, [("watchdog-kill: no leader to hit", 2)]);
    }
}
