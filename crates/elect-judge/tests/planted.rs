//! The judge's teeth: a clean history holds; the same history with one
//! planted violation is refused, for that reason and no other.

use elect_judge::history::{
    ElectionMeta, End, FaultKind, FaultRecord, Held, History, Leftover, LineRecord, Meta,
    ProcRecord, ServiceRecord, StoreRecord,
};
use elect_judge::{Kind, judge};

const S: u64 = 1_000_000;
const MS: u64 = 1_000;

/// Two candidates of one elect election, a TTL of 2 s: c1 leads from 0.1 s
/// to 10 s (token 10), c2 from 10.02 s to 30 s (token 20). One fault, a
/// member killed from 12 s to 14 s, ridden out. Sampler ticks every second
/// with a 2 ms gap.
fn clean() -> History {
    let e = "etcd/elect".to_owned();
    let mut store = Vec::new();
    let mut procs = Vec::new();
    let mut lines = Vec::new();
    let mut tenure = |c: u64, cand: &str, token: u64, from: u64, to: u64| {
        store.push(StoreRecord::Hello {
            t: from,
            e: e.clone(),
            c,
            cand: cand.into(),
            token,
            role: "writer".into(),
            period: None,
        });
        store.push(StoreRecord::Span {
            e: e.clone(),
            c,
            token,
            from: from + MS,
            to: to - MS,
            n: (to - from) / (10 * MS),
            sent_from: Some(from + MS / 2),
        });
        store.push(StoreRecord::Close {
            t: to,
            e: e.clone(),
            c,
        });
        for (t, state) in [(from - MS, "run"), (to, "gone")] {
            procs.push(ProcRecord::Proc {
                t,
                pid: c as i32 + 100,
                e: e.clone(),
                cand: cand.into(),
                role: "writer".into(),
                state: state.into(),
            });
        }
        lines.push(LineRecord::Line {
            t: from - 2 * MS,
            e: e.clone(),
            cand: cand.into(),
            text: r#"{"event":"elected","is_self":true}"#.into(),
        });
        lines.push(LineRecord::Line {
            t: to + MS,
            e: e.clone(),
            cand: cand.into(),
            text: r#"{"event":"demoted","is_self":false}"#.into(),
        });
    };
    tenure(1, "c1", 10, 100 * MS, 10 * S);
    tenure(2, "c2", 20, 10 * S + 20 * MS, 30 * S);
    procs.sort_by_key(|p| match p {
        ProcRecord::Proc { t, .. } | ProcRecord::Tick { t, .. } => *t,
    });
    let mut with_ticks = Vec::new();
    for s in 1..=30 {
        with_ticks.push(ProcRecord::Tick {
            t: s * S,
            max_gap: 2 * MS,
            scans: 500,
        });
    }
    with_ticks.extend(procs);
    with_ticks.sort_by_key(|p| match p {
        ProcRecord::Proc { t, .. } | ProcRecord::Tick { t, .. } => *t,
    });
    lines.sort_by_key(|l| match l {
        LineRecord::Line { t, .. } | LineRecord::Start { t, .. } | LineRecord::Exit { t, .. } => *t,
    });
    History {
        meta: Meta {
            seed: 7,
            started_unix_ms: 0,
            ended: 30 * S,
            interrupted: false,
            mode: "processes".into(),
            sampler_period: 2 * MS,
            line_slack: 500 * MS,
            probe_period: 1_000 * MS,
            elections: vec![ElectionMeta {
                key: e.clone(),
                backend: "etcd".into(),
                contender: "elect".into(),
                ttl_ms: 2000,
                period_ms: None,
                liveness_bound: 5 * S,
                decides_exit: true,
                candidates: vec!["c1".into(), "c2".into()],
            }],
            versions: Vec::new(),
        },
        store,
        procs: with_ticks,
        lines,
        faults: vec![FaultRecord {
            kind: FaultKind::MemberKill,
            backend: "etcd".into(),
            target: "etcd-1".into(),
            election: None,
            start: 12 * S,
            end: 14 * S,
            breaks_quorum: false,
            note: String::new(),
        }],
        service: Vec::new(),
        end: Some(End::default()),
    }
}

fn kinds(h: &History) -> Vec<Kind> {
    let j = judge(h);
    let mut k: Vec<Kind> = j
        .elections
        .iter()
        .flat_map(|e| e.violations.iter().map(|v| v.kind))
        .collect();
    k.dedup();
    k
}

/// A daemon of c1's, alive from 5 s until `gone`.
fn c1_daemon_until(h: &mut History, gone: u64) {
    for (t, state) in [(5 * S, "run"), (gone, "gone")] {
        h.procs.push(ProcRecord::Proc {
            t,
            pid: 999,
            e: "etcd/elect".into(),
            cand: "c1".into(),
            role: "daemon".into(),
            state: state.into(),
        });
    }
    h.procs.sort_by_key(|p| match p {
        ProcRecord::Proc { t, .. } | ProcRecord::Tick { t, .. } => *t,
    });
}

#[test]
fn a_clean_history_holds() {
    let h = clean();
    let j = judge(&h);
    assert!(j.held, "{:#?}", j.elections[0].violations);
    assert_eq!(j.elections[0].figures.leader_changes, 1);
    assert_eq!(j.elections[0].figures.liveness_judged, 1);
}

#[test]
fn a_planted_overlap_is_refused() {
    let mut h = clean();
    // c1's daemon lives on 300 ms into c2's tenure.
    c1_daemon_until(&mut h, 10 * S + 320 * MS);
    assert_eq!(kinds(&h), vec![Kind::Overlap]);
}

#[test]
fn an_overlap_below_the_samplers_resolution_is_not_claimed() {
    let mut h = clean();
    c1_daemon_until(&mut h, 10 * S + 21 * MS);
    assert_eq!(kinds(&h), vec![]);
}

#[test]
fn a_planted_lower_token_is_refused() {
    let mut h = clean();
    // The store accepts token 10 again after token 20 wrote.
    h.store.push(StoreRecord::Span {
        e: "etcd/elect".into(),
        c: 1,
        token: 10,
        from: 20 * S,
        to: 20 * S + 30 * MS,
        n: 3,
        sent_from: None,
    });
    let k = kinds(&h);
    assert!(k.contains(&Kind::TokenOrder), "{k:?}");
    assert!(k.contains(&Kind::StaleAccept), "{k:?}");
}

#[test]
fn a_planted_stall_is_refused() {
    let mut h = clean();
    // Writes stop at 20 s and never resume, although nothing is wrong.
    for r in &mut h.store {
        if let StoreRecord::Span { c: 2, to, .. } = r {
            *to = 20 * S;
        }
    }
    assert_eq!(kinds(&h), vec![Kind::Liveness]);
}

/// Writes stop at 20 s, while a member keeps a znode of a session the
/// leader no longer tracks (from 19 s to the end), or holds one the other
/// member lacks: the stall is the service's, named as such, and liveness
/// is not held against the election. In another election, it would be.
#[test]
fn a_stall_behind_the_service_s_own_fault_is_named_and_not_the_candidates() {
    let zombie = |e: &str| {
        let ghost = Held {
            e: e.into(),
            path: "/soak-elect/_c_x-lock-0000000007".into(),
            owner: "0x9".into(),
        };
        vec![
            ServiceRecord::Zk {
                t: 0,
                member: "zk-1".into(),
                mode: "leader".into(),
                held: vec![],
                sessions: vec!["0x1".into()],
            },
            ServiceRecord::Zk {
                t: 19 * S,
                member: "zk-2".into(),
                mode: "follower".into(),
                held: vec![ghost],
                sessions: vec![],
            },
        ]
    };
    let stalled = || {
        let mut h = clean();
        for r in &mut h.store {
            if let StoreRecord::Span { c: 2, to, .. } = r {
                *to = 20 * S;
            }
        }
        h
    };
    let mut h = stalled();
    h.service = zombie("etcd/elect");
    let j = judge(&h);
    assert_eq!(kinds(&h), vec![]);
    let found: Vec<&str> = j.service.iter().map(|f| f.kind.as_str()).collect();
    assert_eq!(found, ["divergence", "zombie"]);
    assert!(
        elect_judge::report::markdown(&j, &h).contains("kept a znode whose session"),
        "the report names it"
    );

    let mut h = stalled();
    h.service = zombie("zk/kazoo");
    assert_eq!(kinds(&h), vec![Kind::Liveness]);
}

#[test]
fn a_refused_stale_write_is_a_second_writer() {
    let mut h = clean();
    h.store.push(StoreRecord::Refused {
        t: 11 * S,
        e: "etcd/elect".into(),
        c: 1,
        token: 10,
        highest: 20,
        sent: None,
    });
    assert_eq!(kinds(&h), vec![Kind::StaleWriter]);
}

/// A write the old leader sent before its successor's first write, read
/// by a slow store after it, was in flight across the change: refused,
/// as fencing means, and counted, but nobody wrote beside anybody. The
/// same write sent after the successor's first is a second writer.
#[test]
fn a_write_in_flight_across_the_change_is_fenced_not_a_second_writer() {
    let refused_sent_at = |sent: u64| {
        let mut h = clean();
        h.store.push(StoreRecord::Refused {
            t: 10 * S + 400 * MS,
            e: "etcd/elect".into(),
            c: 1,
            token: 10,
            highest: 20,
            sent: Some(sent),
        });
        h
    };
    // Token 20's first write was sent at 10.0205 s.
    let h = refused_sent_at(9 * S + 990 * MS);
    assert_eq!(kinds(&h), vec![]);
    assert_eq!(judge(&h).elections[0].figures.refused_in_flight, 1);
    let h = refused_sent_at(10 * S + 300 * MS);
    assert_eq!(kinds(&h), vec![Kind::StaleWriter]);
}

#[test]
fn a_stale_write_during_an_operators_delete_is_fenced() {
    let mut h = clean();
    h.store.push(StoreRecord::Refused {
        t: 11 * S,
        e: "etcd/elect".into(),
        c: 1,
        token: 10,
        highest: 20,
        sent: None,
    });
    h.faults.push(FaultRecord {
        kind: FaultKind::OperatorDelete,
        backend: "etcd".into(),
        target: "the leader's key".into(),
        election: Some("etcd/elect".into()),
        start: 10 * S,
        end: 10 * S,
        breaks_quorum: false,
        note: String::new(),
    });
    assert_eq!(kinds(&h), vec![]);
}

/// Under an operator's delete the fence is the contract: the old writer's
/// writes accepted after its successor announced itself, before the
/// successor wrote, are not a violation there (seed 4108, a parent
/// deleted by hand); anywhere else they are.
#[test]
fn an_old_writer_accepted_after_an_announcement_is_fenced_under_an_operators_delete() {
    let announced = || {
        let mut h = clean();
        h.store.push(StoreRecord::Hello {
            t: 9 * S,
            e: "etcd/elect".into(),
            c: 3,
            cand: "c3".into(),
            token: 30,
            role: "writer".into(),
            period: None,
        });
        h
    };
    assert!(kinds(&announced()).contains(&Kind::StaleAccept));
    let mut h = announced();
    h.faults.push(FaultRecord {
        kind: FaultKind::ParentDelete,
        backend: "etcd".into(),
        target: "/soak-elect".into(),
        election: Some("etcd/elect".into()),
        start: 8 * S + 900 * MS,
        end: 9 * S,
        breaks_quorum: false,
        note: String::new(),
    });
    assert!(!kinds(&h).contains(&Kind::StaleAccept), "{:?}", kinds(&h));
}

#[test]
fn a_leader_line_while_another_writes_is_refused() {
    let mut h = clean();
    // c1 says it leads again at 15 s while c2 writes.
    h.lines.push(LineRecord::Line {
        t: 15 * S,
        e: "etcd/elect".into(),
        cand: "c1".into(),
        text: r#"{"event":"elected","is_self":true}"#.into(),
    });
    h.lines.push(LineRecord::Exit {
        t: 17 * S,
        e: "etcd/elect".into(),
        cand: "c1".into(),
        code: 1,
    });
    assert_eq!(kinds(&h), vec![Kind::LineContradiction]);
}

#[test]
fn a_frozen_candidate_says_nothing() {
    let mut h = clean();
    // c1 is frozen from 9 s to 16 s, and prints its demotion on waking.
    h.lines
        .retain(|l| !matches!(l, LineRecord::Line { t, cand, .. } if cand == "c1" && *t > 9 * S));
    h.lines.push(LineRecord::Line {
        t: 16 * S + 10 * MS,
        e: "etcd/elect".into(),
        cand: "c1".into(),
        text: r#"{"event":"demoted","is_self":false}"#.into(),
    });
    h.faults.push(FaultRecord {
        kind: FaultKind::CandidateFreeze,
        backend: "etcd".into(),
        target: "c1".into(),
        election: Some("etcd/elect".into()),
        start: 9 * S,
        end: 16 * S,
        breaks_quorum: false,
        note: String::new(),
    });
    assert_eq!(kinds(&h), vec![]);
}

/// A `what` named `name` of the planted election, at the end.
fn of_the_election(what: &str, name: &str) -> Leftover {
    Leftover {
        e: "etcd/elect".into(),
        what: what.into(),
        name: name.into(),
    }
}

#[test]
fn leftovers_are_refused() {
    let mut h = clean();
    h.end = Some(End {
        leftovers: vec![of_the_election("key", "soak/elect/694d")],
        expired: Vec::new(),
    });
    assert_eq!(kinds(&h), vec![Kind::Leftover]);
}

/// A znode left at the end that only a member kept, its session no
/// longer tracked by the leader (a zombie, as seed 4106 found after a
/// rolling restart), is the service's, named in the report; the same
/// znode with no such record is the election's leftover.
#[test]
fn a_znode_only_a_diverging_member_kept_is_the_service_s() {
    let path = "/soak-once/_c_x-latch-0000000000";
    let mut h = clean();
    h.end = Some(End {
        leftovers: vec![of_the_election("znode", path)],
        expired: Vec::new(),
    });
    assert_eq!(kinds(&h), vec![Kind::Leftover]);

    h.service = vec![
        ServiceRecord::Zk {
            t: 0,
            member: "zk-1".into(),
            mode: "leader".into(),
            held: vec![],
            sessions: vec!["0x1".into()],
        },
        ServiceRecord::Zk {
            t: 5 * S,
            member: "zk-2".into(),
            mode: "follower".into(),
            held: vec![Held {
                e: "etcd/elect".into(),
                path: path.into(),
                owner: "0x9".into(),
            }],
            sessions: vec![],
        },
    ];
    assert_eq!(kinds(&h), vec![]);
    let j = judge(&h);
    assert_eq!(j.elections[0].figures.left_by_the_service, [path]);
    assert!(
        elect_judge::report::markdown(&j, &h).contains("kept only by a member diverging"),
        "the report says whose it is"
    );
}

/// A key that went with its lease within the TTL after the stop is
/// reported, not refused.
#[test]
fn what_went_with_its_session_is_not_left_behind() {
    let mut h = clean();
    h.end = Some(End {
        leftovers: Vec::new(),
        expired: vec![of_the_election("key", "soak/elect/694d")],
    });
    assert_eq!(kinds(&h), vec![]);
    let j = judge(&h);
    assert!(
        elect_judge::report::markdown(&j, &h).contains("gone within their election's TTL"),
        "the report says what went with its session"
    );
}

/// A second run of a period's job 12 s after the first completed is
/// refused (the record was there); one 2 s after is the contract's
/// at-least-once, counted.
#[test]
fn a_periodic_job_run_again_after_its_record_is_refused() {
    let mut h = clean();
    let e = "etcd/elect-once".to_owned();
    let mut meta = h.meta.elections[0].clone();
    meta.key = e.clone();
    meta.period_ms = Some(20_000);
    h.meta.elections.push(meta);
    for (c, token, t) in [(50, 100, 2 * S), (51, 200, 4 * S), (52, 300, 16 * S)] {
        h.store.push(StoreRecord::Hello {
            t,
            e: e.clone(),
            c,
            cand: format!("o{c}"),
            token,
            role: "once".into(),
            period: Some(1_700_000_000),
        });
        h.store.push(StoreRecord::Done {
            t: t + S,
            e: e.clone(),
            c,
        });
    }
    let j = judge(&h);
    let once = j.elections.iter().find(|x| x.key == e).unwrap();
    assert_eq!(
        once.violations.iter().map(|v| v.kind).collect::<Vec<_>>(),
        vec![Kind::PeriodicTwice]
    );
    assert_eq!(once.figures.periodic_reruns, 1);
    assert_eq!(once.figures.periodic_runs, 3);

    // With the service's quorum broken on purpose just after the first
    // completion, no record could land: the late run is the contract's
    // at-least-once too (seed 4104: a 12 s quorum loss, a rerun 13.8 s
    // after the completion). The same loss on another backend excuses
    // nothing.
    let quorum_loss = |backend: &str| FaultRecord {
        kind: FaultKind::QuorumLoss,
        backend: backend.into(),
        target: "etcd-1,etcd-2".into(),
        election: None,
        start: 3 * S + S / 2,
        end: 15 * S,
        breaks_quorum: true,
        note: String::new(),
    };
    let mut other = h.clone();
    other.faults.push(quorum_loss("zk"));
    let j = judge(&other);
    let once = j.elections.iter().find(|x| x.key == e).unwrap();
    assert_eq!(once.violations.len(), 1, "{:?}", once.violations);
    let unrecorded = h.clone();
    h.faults.push(quorum_loss("etcd"));
    let j = judge(&h);
    let once = j.elections.iter().find(|x| x.key == e).unwrap();
    assert!(once.violations.is_empty(), "{:?}", once.violations);
    assert_eq!(once.figures.periodic_reruns, 2);

    // No fault broke the quorum, but no etcd member served when the first
    // run completed (at 3 s; the probe saw the last member stop at
    // 2.5 s): its record could not land either (seed 41: the leader
    // member paused under fsync load). An outage that began later, with
    // the record long written, excuses nothing.
    let outage = |from: u64, to: u64| {
        ["etcd-1", "etcd-2", "etcd-3"]
            .into_iter()
            .flat_map(|m| {
                [
                    ServiceRecord::Etcd {
                        t: from,
                        member: m.into(),
                        serving: false,
                    },
                    ServiceRecord::Etcd {
                        t: to,
                        member: m.into(),
                        serving: true,
                    },
                ]
            })
            .collect::<Vec<_>>()
    };
    let periodic_twice = |h: &History| {
        let j = judge(h);
        let once = j.elections.iter().find(|x| x.key == e).unwrap().clone();
        once.violations
            .iter()
            .filter(|v| v.kind == Kind::PeriodicTwice)
            .count()
    };
    let mut during = unrecorded.clone();
    during.service = outage(2 * S + S / 2, 9 * S);
    assert_eq!(periodic_twice(&during), 0);
    let mut later = unrecorded;
    later.service = outage(7 * S, 9 * S);
    assert_eq!(periodic_twice(&later), 1);
}

#[test]
fn a_history_round_trips_through_its_files() {
    let h = clean();
    let dir = std::env::temp_dir().join(format!("elect-judge-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let jsonl = |name: &str, rows: Vec<String>| {
        std::fs::write(dir.join(name), rows.join("\n") + "\n").unwrap();
    };
    std::fs::write(
        dir.join("meta.json"),
        serde_json::to_string(&h.meta).unwrap(),
    )
    .unwrap();
    jsonl(
        "store.jsonl",
        h.store
            .iter()
            .map(|r| serde_json::to_string(r).unwrap())
            .collect(),
    );
    jsonl(
        "procs.jsonl",
        h.procs
            .iter()
            .map(|r| serde_json::to_string(r).unwrap())
            .collect(),
    );
    jsonl(
        "lines.jsonl",
        h.lines
            .iter()
            .map(|r| serde_json::to_string(r).unwrap())
            .collect(),
    );
    jsonl(
        "faults.jsonl",
        h.faults
            .iter()
            .map(|r| serde_json::to_string(r).unwrap())
            .collect(),
    );
    std::fs::write(
        dir.join("end.json"),
        serde_json::to_string(h.end.as_ref().unwrap()).unwrap(),
    )
    .unwrap();
    let back = History::read(&dir).unwrap();
    let j = judge(&back);
    assert!(j.held);
    elect_judge::report::write(&dir, &j, &back).unwrap();
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md.starts_with("# Soak: every check held"), "{md}");
    std::fs::remove_dir_all(&dir).unwrap();
}

fn health_flap(target: &str, start: u64, end: u64) -> FaultRecord {
    FaultRecord {
        kind: FaultKind::HealthFlap,
        backend: "etcd".into(),
        target: target.into(),
        election: Some("etcd/elect".into()),
        start,
        end,
        breaks_quorum: false,
        note: String::new(),
    }
}

#[test]
fn a_leader_that_stays_past_its_failed_health_check_is_refused() {
    // c2 leads from 10 s to 30 s; its check fails from 20 s to 28 s,
    // nothing else happening: it should have handed over by 24.5 s.
    let mut h = clean();
    h.faults.push(health_flap("c2", 20 * S, 28 * S));
    assert_eq!(kinds(&h), vec![Kind::HealthHandOff]);
    // A follower's failing check asks nothing of the leader; nor does a
    // leader's while another fault (the member kill, 12-14 s) may have
    // kept the others from being healthy and live.
    let mut h = clean();
    h.faults.push(health_flap("c1", 20 * S, 28 * S));
    assert_eq!(kinds(&h), vec![]);
    let mut h = clean();
    h.faults.push(health_flap("c2", 15 * S, 22 * S));
    assert_eq!(kinds(&h), vec![]);
}
