//! What the service itself got wrong, from the members' own records.
//!
//! A candidate on ZooKeeper waits for the znodes ahead of it to go. If a
//! member keeps a znode whose session the ensemble no longer tracks, or the
//! members disagree about which znodes exist, every recipe built on
//! ZooKeeper (elect's, kazoo's, Curator's) may wait behind a znode that
//! will never go, or decide from a view the others do not share. Those
//! are the service's faults, not the candidates': the judge names them,
//! and treats their time like a fault's when it judges liveness. Safety is
//! never excused.
//!
//! Three findings. No member of the service serving for [`UNAVAILABLE`]
//! or more (**unavailable**). And two held for [`GRACE`] before they
//! count (a follower applies a session's close a moment after the leader,
//! and the probe reads members one after another):
//! - **zombie**: a serving member holds an ephemeral znode whose owner is
//!   not among the sessions the serving leader tracks;
//! - **divergence**: serving members disagree on whether a znode exists.
//!
//! A member with a fault in effect on it (and for [`SETTLE`] after) is
//! left out: a paused or stalled member is behind by design.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::history::{FaultRecord, Held, History, Micros, ServiceRecord};

/// How long a finding must hold before it counts.
pub const GRACE: Micros = 10_000_000;

/// How long after a fault on a member heals it is still left out.
pub const SETTLE: Micros = 2_000_000;

/// One thing the service got wrong, for a while.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub backend: String,
    /// zombie or divergence.
    pub kind: String,
    /// The election the znode is in (empty: every election on the
    /// service).
    pub e: String,
    pub path: String,
    /// Its owner session.
    pub owner: String,
    /// Zombie: the members holding it. Divergence: who holds it, and who
    /// does not.
    pub detail: String,
    pub from: Micros,
    pub to: Micros,
}

impl Finding {
    /// One line for reports.
    pub fn describe(&self) -> String {
        if self.kind == "unavailable" {
            return format!(
                "{} service had no member serving for {:.1} s from {:.1} s",
                self.backend,
                (self.to - self.from) as f64 / 1e6,
                self.from as f64 / 1e6,
            );
        }
        let what = match self.kind.as_str() {
            "zombie" => "kept a znode whose session the leader no longer tracks",
            _ => "members disagreed on a znode",
        };
        format!(
            "{} service {what}: {} (owner {}, {}) for {:.1} s from {:.1} s",
            self.backend,
            self.path,
            self.owner,
            self.detail,
            (self.to - self.from) as f64 / 1e6,
            self.from as f64 / 1e6,
        )
    }
}

/// What a member was last seen to hold.
#[derive(Clone, Default)]
struct MemberState {
    mode: String,
    held: BTreeSet<Held>,
    sessions: BTreeSet<String>,
}

/// The findings in `h`, in the order they began.
pub fn findings(h: &History) -> Vec<Finding> {
    let mut out = merged(zk_findings(h));
    out.extend(unavailability(h));
    out.sort_by_key(|f| f.from);
    out
}

/// One finding per stretch of the same fault: a member that was left out
/// for a moment (a fault on it, or down) splits what it still held when
/// it came back into pieces; pieces less than [`GRACE`] apart are one.
fn merged(mut found: Vec<Finding>) -> Vec<Finding> {
    found.sort_by(|a, b| {
        (&a.kind, &a.path, &a.owner, a.from).cmp(&(&b.kind, &b.path, &b.owner, b.from))
    });
    let mut out: Vec<Finding> = Vec::new();
    for f in found {
        match out.last_mut() {
            Some(last)
                if last.kind == f.kind
                    && last.path == f.path
                    && last.owner == f.owner
                    && f.from <= last.to + GRACE =>
            {
                last.to = last.to.max(f.to);
            }
            _ => out.push(f),
        }
    }
    out
}

/// How long no member may serve before it counts: the probe asks each
/// member once a second.
pub const UNAVAILABLE: Micros = 1_000_000;

/// Stretches in which no member of a service served (etcd: none healthy,
/// knowing no leader; ZooKeeper: none leading or following), whatever the
/// cause: a deliberate quorum loss, or the service slow to recover after
/// a fault healed (an etcd member cut off and back forces an election of
/// its own). No election on that service can make progress then.
fn unavailability(h: &History) -> Vec<Finding> {
    let mut sorted: Vec<&ServiceRecord> = h.service.iter().collect();
    sorted.sort_by_key(|r| r.t());
    let mut serving: BTreeMap<&str, BTreeMap<&str, bool>> = BTreeMap::new();
    let mut since: BTreeMap<&str, Micros> = BTreeMap::new();
    let mut out = Vec::new();
    let mut close = |backend: &str, from: Micros, to: Micros| {
        if to.saturating_sub(from) >= UNAVAILABLE {
            out.push(Finding {
                backend: backend.to_owned(),
                kind: "unavailable".into(),
                e: String::new(),
                path: String::new(),
                owner: String::new(),
                detail: "no member served".into(),
                from,
                to,
            });
        }
    };
    for r in sorted {
        let (backend, member, up) = match r {
            ServiceRecord::Zk { member, mode, .. } => (
                "zk",
                member.as_str(),
                matches!(mode.as_str(), "leader" | "follower"),
            ),
            ServiceRecord::Etcd {
                member, serving, ..
            } => ("etcd", member.as_str(), *serving),
        };
        let members = serving.entry(backend).or_default();
        members.insert(member, up);
        let none = members.values().all(|up| !up);
        match (none, since.get(backend).copied()) {
            (true, None) => {
                since.insert(backend, r.t());
            }
            (false, Some(from)) => {
                since.remove(backend);
                close(backend, from, r.t());
            }
            _ => {}
        }
    }
    for (backend, from) in since {
        close(backend, from, h.meta.ended.max(from));
    }
    out
}

/// The ZooKeeper findings (zombie, divergence), in the order they began.
fn zk_findings(h: &History) -> Vec<Finding> {
    let end = h.meta.ended;
    // Instants where what is known changes: records, and faults on members
    // starting and settling.
    let member_faults: Vec<&FaultRecord> = h
        .faults
        .iter()
        .filter(|f| f.backend == "zk" && f.target.starts_with("zk-"))
        .collect();
    let mut breaks: Vec<Micros> = Vec::new();
    for r in &h.service {
        breaks.push(r.t());
    }
    for f in &member_faults {
        breaks.push(f.start);
        breaks.push(f.end + SETTLE);
    }
    breaks.push(end);
    breaks.sort_unstable();
    breaks.dedup();

    // One thread per member records: nearly, not strictly, in order.
    let mut sorted: Vec<&ServiceRecord> = h
        .service
        .iter()
        .filter(|r| matches!(r, ServiceRecord::Zk { .. }))
        .collect();
    sorted.sort_by_key(|r| r.t());
    let mut records = sorted.into_iter().peekable();
    let mut members: BTreeMap<String, MemberState> = BTreeMap::new();
    // Fact -> (since, detail).
    let mut open: BTreeMap<(String, Held), (Micros, String)> = BTreeMap::new();
    let mut out = Vec::new();
    for (i, &t) in breaks.iter().enumerate() {
        while let Some(ServiceRecord::Zk {
            t: at,
            member,
            mode,
            held,
            sessions,
        }) = records.peek()
        {
            if *at > t {
                break;
            }
            members.insert(
                member.clone(),
                MemberState {
                    mode: mode.clone(),
                    held: held.iter().cloned().collect(),
                    sessions: sessions.iter().cloned().collect(),
                },
            );
            records.next();
        }
        let faulted = |m: &str| {
            member_faults
                .iter()
                .any(|f| f.target == m && f.start <= t && t < f.end + SETTLE)
        };
        let serving: BTreeMap<&String, &MemberState> = members
            .iter()
            .filter(|(m, s)| matches!(s.mode.as_str(), "leader" | "follower") && !faulted(m))
            .collect();
        let now = facts(&serving);
        // Facts that ended: findings if they held long enough.
        let ended: Vec<(String, Held)> = open
            .keys()
            .filter(|k| !now.contains_key(*k))
            .cloned()
            .collect();
        for k in ended {
            let (since, detail) = open.remove(&k).expect("open");
            push(&mut out, k, since, t, detail);
        }
        for (k, detail) in now {
            open.entry(k).or_insert((t, detail));
        }
        if i + 1 == breaks.len() {
            for (k, (since, detail)) in std::mem::take(&mut open) {
                push(&mut out, k, since, end.max(t), detail);
            }
        }
    }
    out.sort_by_key(|f| f.from);
    out
}

fn push(
    out: &mut Vec<Finding>,
    (kind, held): (String, Held),
    from: Micros,
    to: Micros,
    detail: String,
) {
    if to.saturating_sub(from) < GRACE {
        return;
    }
    out.push(Finding {
        backend: "zk".into(),
        kind,
        e: held.e,
        path: held.path,
        owner: held.owner,
        detail,
        from,
        to,
    });
}

/// What is wrong among the serving members now, each fact with words.
fn facts(serving: &BTreeMap<&String, &MemberState>) -> BTreeMap<(String, Held), String> {
    let mut now = BTreeMap::new();
    if let Some((_, leader)) = serving.iter().find(|(_, s)| s.mode == "leader") {
        for (m, s) in serving {
            for held in &s.held {
                if !leader.sessions.contains(&held.owner) {
                    let entry = now
                        .entry(("zombie".to_owned(), held.clone()))
                        .or_insert_with(|| "held by".to_owned());
                    entry.push(' ');
                    entry.push_str(m);
                }
            }
        }
    }
    let all: BTreeSet<&Held> = serving.values().flat_map(|s| s.held.iter()).collect();
    for held in all {
        let (with, without): (Vec<&String>, Vec<&String>) = serving
            .keys()
            .partition(|m| serving[*m].held.contains(held));
        if !without.is_empty() {
            let names = |v: &[&String]| v.iter().map(|m| m.as_str()).collect::<Vec<_>>().join(" ");
            now.insert(
                ("divergence".to_owned(), held.clone()),
                format!("held by {}, not by {}", names(&with), names(&without)),
            );
        }
    }
    now
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Meta;

    fn history(service: Vec<ServiceRecord>, faults: Vec<FaultRecord>) -> History {
        History {
            meta: Meta {
                seed: 1,
                started_unix_ms: 0,
                ended: 60_000_000,
                interrupted: false,
                mode: "containers".into(),
                sampler_period: 2_000,
                line_slack: 500_000,
                probe_period: 1_000_000,
                elections: vec![],
                versions: vec![],
            },
            store: vec![],
            procs: vec![],
            lines: vec![],
            faults,
            service,
            end: None,
        }
    }

    fn held(path: &str, owner: &str) -> Held {
        Held {
            e: "zk/elect".into(),
            path: path.into(),
            owner: owner.into(),
        }
    }

    fn zk(t: Micros, member: &str, mode: &str, h: &[Held], sessions: &[&str]) -> ServiceRecord {
        ServiceRecord::Zk {
            t,
            member: member.into(),
            mode: mode.into(),
            held: h.to_vec(),
            sessions: sessions.iter().map(|s| s.to_string()).collect(),
        }
    }

    const S: Micros = 1_000_000;

    #[test]
    fn a_znode_outliving_its_session_is_a_zombie_once_it_lasts() {
        let a = held("/e/a-0001", "0x1");
        let h = history(
            vec![
                zk(0, "zk-1", "leader", std::slice::from_ref(&a), &["0x1"]),
                zk(0, "zk-2", "follower", std::slice::from_ref(&a), &[]),
                // The session ends; zk-2 never drops the znode.
                zk(5 * S, "zk-1", "leader", &[], &[]),
                zk(40 * S, "zk-2", "follower", &[], &[]),
            ],
            vec![],
        );
        let found = findings(&h);
        let kinds: Vec<(&str, Micros, Micros)> = found
            .iter()
            .map(|f| (f.kind.as_str(), f.from, f.to))
            .collect();
        assert_eq!(
            kinds,
            [("divergence", 5 * S, 40 * S), ("zombie", 5 * S, 40 * S)]
        );
        assert!(found[1].detail.contains("zk-2"), "{found:?}");
    }

    #[test]
    fn a_service_with_no_member_serving_is_unavailable() {
        let etcd = |t: Micros, member: &str, serving: bool| ServiceRecord::Etcd {
            t,
            member: member.into(),
            serving,
        };
        let h = history(
            vec![
                etcd(0, "etcd-1", true),
                etcd(0, "etcd-2", true),
                etcd(10 * S, "etcd-1", false),
                etcd(12 * S, "etcd-2", false),
                etcd(15 * S, "etcd-2", true),
                // Half a second: below what the probe can tell.
                etcd(20 * S, "etcd-2", false),
                etcd(20 * S + 500_000, "etcd-1", true),
            ],
            vec![],
        );
        let all = findings(&h);
        let found: Vec<(&str, &str, Micros, Micros)> = all
            .iter()
            .map(|f| (f.backend.as_str(), f.kind.as_str(), f.from, f.to))
            .collect();
        assert_eq!(found, [("etcd", "unavailable", 12 * S, 15 * S)]);
    }

    #[test]
    fn a_follower_a_moment_behind_is_no_finding() {
        let a = held("/e/a-0001", "0x1");
        let h = history(
            vec![
                zk(0, "zk-1", "leader", std::slice::from_ref(&a), &["0x1"]),
                zk(0, "zk-2", "follower", std::slice::from_ref(&a), &[]),
                zk(5 * S, "zk-1", "leader", &[], &[]),
                zk(5 * S + 300_000, "zk-2", "follower", &[], &[]),
            ],
            vec![],
        );
        assert_eq!(findings(&h), []);
    }

    #[test]
    fn a_member_under_a_fault_is_left_out() {
        let a = held("/e/a-0001", "0x1");
        let pause = FaultRecord {
            kind: crate::history::FaultKind::MemberPause,
            backend: "zk".into(),
            target: "zk-2".into(),
            election: None,
            start: 4 * S,
            end: 30 * S,
            breaks_quorum: false,
            note: String::new(),
        };
        let h = history(
            vec![
                zk(0, "zk-1", "leader", std::slice::from_ref(&a), &["0x1"]),
                zk(0, "zk-2", "follower", std::slice::from_ref(&a), &[]),
                zk(5 * S, "zk-1", "leader", &[], &[]),
                zk(31 * S, "zk-2", "follower", &[], &[]),
            ],
            vec![pause],
        );
        assert_eq!(findings(&h), []);
    }
}
