//! A recorded schedule (`history/schedule.json`): what a soak was asked
//! and the faults it dealt, for `--schedule` to replay exactly; read as
//! a regular file of bounded size, and checked fault by fault before
//! anything starts.

use std::path::Path;

use elect_judge::history::{FaultKind, FaultRecord};
use serde::{Deserialize, Serialize};

use crate::nemesis::applies;
use crate::options::{Backend, Error, MAX_CANDIDATES};

/// A recorded schedule (`schedule.json`): what a soak was asked, and the
/// faults it dealt, for `--schedule` to replay exactly.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Schedule {
    pub seed: u64,
    pub backends: Vec<Backend>,
    pub candidates: usize,
    pub peers: bool,
    /// In microseconds.
    pub duration: u64,
    pub faults: Vec<FaultRecord>,
}

impl Schedule {
    /// Reads a schedule file.
    ///
    /// Errors: unreadable or not a schedule (`--schedule`).
    pub fn read(path: &Path) -> Result<Schedule, Error> {
        let text = elect::input::read_regular_text(path, MAX_SCHEDULE_BYTES)
            .map_err(|e| Error::input("--schedule", e.to_string()))?;
        Schedule::parse(&text)
            .map_err(|why| Error::input("--schedule", format!("{}: {why}", path.display())))
    }

    /// A schedule from its text, [`check`](Self::check)ed.
    ///
    /// Errors: not JSON of a schedule, or a fault no soak deals.
    pub fn parse(text: &str) -> Result<Schedule, String> {
        let schedule: Schedule = serde_json::from_str(text).map_err(|e| e.to_string())?;
        schedule.check()?;
        Ok(schedule)
    }

    /// Checks every fault against what a soak of these settings deals:
    /// a known kind on one of its backends, a target of that kind's
    /// shape (a member, a candidate, a key or znode of the soak's), an
    /// end not before its start, within the soak.
    ///
    /// Errors: what is wrong, naming the fault by its place.
    pub fn check(&self) -> Result<(), String> {
        for (i, f) in self.faults.iter().enumerate() {
            let at = |why: String| format!("fault {} ({} at {} µs): {why}", i + 1, f.kind, f.start);
            let kind = f.kind;
            if f.end < f.start {
                return Err(at(format!("it ends ({} µs) before it starts", f.end)));
            }
            if f.start > self.duration {
                return Err(at(format!(
                    "it starts after the soak's end ({} µs)",
                    self.duration
                )));
            }
            if kind == FaultKind::Load {
                if f.target != "machine" {
                    return Err(at(format!("{:?}: load is dealt to the machine", f.target)));
                }
                continue;
            }
            let backend = self
                .backends
                .iter()
                .find(|b| b.name() == f.backend)
                .ok_or_else(|| at(format!("backend {:?} is not one of the soak's", f.backend)))?;
            // Containers or processes is the replay's choice, not the
            // schedule's: a cut needs containers, checked when dealt.
            if !applies(kind, *backend, true) {
                return Err(at(format!("it is not dealt to {backend}")));
            }
            if !target_fits(kind, *backend, &f.target) {
                return Err(at(format!("{:?} is not a target of this kind", f.target)));
            }
        }
        Ok(())
    }
}

/// The most of a schedule file that is read: an hour's soak records a
/// few thousand faults, well under a megabyte.
pub const MAX_SCHEDULE_BYTES: u64 = 64 << 20;

/// Whether `target` has the shape the nemesis gives a target of `kind`
/// on `backend`: a member (`etcd-2`), members (`zk-1,zk-3`), a candidate
/// (`c1`, `p0`, a peer's `k2`), the soak's own keys or znodes.
fn target_fits(kind: FaultKind, backend: Backend, target: &str) -> bool {
    let member = |m: &str| {
        m.strip_prefix(backend.name())
            .and_then(|rest| rest.strip_prefix('-'))
            .and_then(|n| n.parse::<usize>().ok())
            .is_some_and(|n| (1..=SERVICE_MEMBERS).contains(&n))
    };
    let candidate = |c: &str| {
        let mut chars = c.chars();
        chars.next().is_some_and(|l| l.is_ascii_lowercase())
            && chars
                .as_str()
                .parse::<usize>()
                .is_ok_and(|n| n <= MAX_CANDIDATES)
    };
    let soak_path = |p: &str| match backend {
        Backend::Zk => p.starts_with("/soak-"),
        _ => p.starts_with("soak-"),
    };
    match kind {
        FaultKind::MemberKill
        | FaultKind::MemberPause
        | FaultKind::MemberStall
        | FaultKind::MemberStallLog
        | FaultKind::MemberCut => member(target),
        FaultKind::QuorumLoss | FaultKind::RollingRestart => target.split(',').all(member),
        FaultKind::Compaction => target == "every member",
        FaultKind::OperatorDelete | FaultKind::ParentDelete => soak_path(target),
        FaultKind::Load => target == "machine",
        FaultKind::CandidateFreeze
        | FaultKind::CandidateKill
        | FaultKind::CandidateResign
        | FaultKind::WatchdogKill
        | FaultKind::GroupKill
        | FaultKind::CandidateCut
        | FaultKind::CandidateStall
        | FaultKind::Switchover
        | FaultKind::PriorityChange
        | FaultKind::HealthFlap
        | FaultKind::HealthHang
        | FaultKind::HealthAll => candidate(target),
    }
}

/// Members of each service ensemble a soak starts.
pub const SERVICE_MEMBERS: usize = 3;

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule(faults: &[(&str, &str, &str, u64, u64)]) -> Schedule {
        Schedule {
            seed: 1,
            backends: vec![Backend::Etcd, Backend::Zk, Backend::Raft],
            candidates: 3,
            peers: false,
            duration: 60_000_000,
            faults: faults
                .iter()
                .map(|&(kind, backend, target, start, end)| FaultRecord {
                    kind: FaultKind::parse(kind).expect("a kind"),
                    backend: backend.into(),
                    target: target.into(),
                    election: None,
                    start,
                    end,
                    breaks_quorum: false,
                    note: String::new(),
                })
                .collect(),
        }
    }

    #[test]
    fn recorded_schedules_pass_and_bad_faults_are_named() {
        for file in [
            "seed-41.json",
            "seed-41-processes.json",
            "seed-41-watchdog-spin.json",
        ] {
            let path = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../tests/soak-schedules")
                .join(file);
            Schedule::read(&path).unwrap_or_else(|e| panic!("{file}: {e}"));
        }
        let good = ("member-kill", "etcd", "etcd-2", 1, 2);
        assert!(schedule(&[good]).check().is_ok());
        // A kind no soak deals refuses the whole file, naming the kinds.
        let unknown = serde_json::to_string(&schedule(&[good]))
            .unwrap()
            .replace("member-kill", "member-explode");
        let err = Schedule::parse(&unknown).unwrap_err();
        assert!(
            err.contains("\"member-explode\" is not a fault kind: one of member-kill"),
            "{err}"
        );
        for (bad, says) in [
            (("member-kill", "etcd", "etcd-9", 1, 2), "not a target"),
            (("member-kill", "etcd", "zk-1", 1, 2), "not a target"),
            (("candidate-kill", "raft", "nobody", 1, 2), "not a target"),
            (("member-kill", "etcd", "etcd-1", 5, 2), "before it starts"),
            (
                ("member-kill", "consul", "etcd-1", 1, 2),
                "not one of the soak's",
            ),
            (
                ("compaction", "zk", "every member", 1, 1),
                "not dealt to zk",
            ),
            (
                ("member-kill", "etcd", "etcd-1", 61_000_000, 61_000_001),
                "after the soak's end",
            ),
            (("load", "machine", "etcd-1", 1, 2), "dealt to the machine"),
        ] {
            let err = schedule(&[good, bad]).check().unwrap_err();
            assert!(
                err.starts_with("fault 2 ") && err.contains(says),
                "{bad:?}: {err}"
            );
        }
    }
}
