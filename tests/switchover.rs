//! `elect switchover` and `elect candidates` against real ensembles: the
//! target leads with a higher token after the leader's work stopped, the
//! candidates between them step aside, a refused switchover changes
//! nothing, and a peer's candidate in the way is a refusal.

mod support;

use std::time::Duration;

use serde_json::Value;
use support::elect::{Proc, campaign, campaign_zk, elect_at, etcdctl_elect};
use support::etcd::Cluster;
use support::eventually;
use support::raft::Cluster as RaftCluster;
use support::zk::Ensemble;

const SOON: Duration = Duration::from_secs(10);

/// Candidates `ids` in `election`, created in that order; the first leads.
fn line_of(etcd: &Cluster, election: &str, ids: &[&str]) -> (Vec<Proc>, u64) {
    let mut procs = Vec::new();
    for (i, id) in ids.iter().enumerate() {
        procs.push(campaign(&etcd.endpoints, election, id, "10"));
        etcd.wait_for_candidates(election, i + 1);
    }
    let (_, elected) = procs[0].wait_event("elected", SOON);
    (procs, elected["token"].as_u64().unwrap())
}

/// `elect <command> --endpoints ... --election E <args>` on etcd: exit
/// code, stdout, stderr.
fn elect_on(etcd: &Cluster, command: &str, election: &str, args: &[&str]) -> (i32, String, String) {
    elect_at("etcd", &etcd.endpoints, command, election, args)
}

/// The candidates' ids in line order, as `elect candidates` lists them.
fn listed(etcd: &Cluster, election: &str) -> Vec<(String, bool)> {
    listed_at("etcd", &etcd.endpoints, election)
}

fn listed_at(backend: &str, endpoints: &str, election: &str) -> Vec<(String, bool)> {
    let json = ["--format", "json"];
    let (code, out, err) = elect_at(backend, endpoints, "candidates", election, &json);
    assert!(code == 0 || code == 3, "candidates exited {code}: {err}");
    let line: Value = serde_json::from_str(out.trim()).expect("one JSON line");
    line["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["id"].as_str().unwrap().to_owned(), c["leads"] == true))
        .collect()
}

#[test]
fn a_switchover_to_the_last_in_line_hands_over_with_a_higher_token() {
    let etcd = Cluster::start();
    let (mut procs, first) = line_of(&etcd, "steer", &["a", "b", "c"]);
    assert_eq!(
        listed(&etcd, "steer"),
        vec![("a".into(), true), ("b".into(), false), ("c".into(), false)]
    );
    let (code, out, err) = elect_on(
        &etcd,
        "switchover",
        "steer",
        &["--to", "c", "--format", "json"],
    );
    assert_eq!(code, 0, "switchover: {out}{err}");
    let report: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(report["outcome"], "done", "{report}");
    assert_eq!(report["leader"], "c");
    assert_eq!(
        (report["from"].as_str(), report["to"].as_str()),
        (Some("a"), Some("c"))
    );
    let token = report["token"].as_u64().unwrap();
    assert!(token > first, "the target's token {token} is above {first}");

    let (demoted_at, _) = procs[0].wait_event("demoted", SOON);
    let (elected_at, elected) = procs[2].wait_event("elected", SOON);
    assert_eq!(elected["token"].as_u64(), Some(token));
    assert!(
        demoted_at <= elected_at,
        "the old leader stopped before the target led"
    );
    assert!(
        !procs[1].sees_event("elected", Duration::from_millis(500)),
        "b stepped aside"
    );
    // Both stay candidates, behind the target.
    eventually("the old leader and b queue again", SOON, || {
        let line = listed(&etcd, "steer");
        (line.len() == 3 && line[0] == ("c".into(), true)).then_some(())
    });
    for p in &mut procs {
        assert_eq!(
            p.try_exit(),
            None,
            "{} is still a candidate",
            "every process"
        );
    }
    // The record went with the command's lease.
    let keys = etcd.etcdctl_ok(&["get", "steer", "--prefix", "--keys-only"]);
    assert!(
        !keys.contains("switchover"),
        "no switchover record left: {keys}"
    );
}

#[test]
fn a_switchover_to_any_moves_to_the_next_in_line() {
    let etcd = Cluster::start();
    let (mut procs, _) = line_of(&etcd, "any", &["a", "b"]);
    let (code, out, err) = elect_on(&etcd, "switchover", "any", &["--to", "any"]);
    assert_eq!(code, 0, "switchover: {out}{err}");
    assert!(out.contains("b leads"), "{out}");
    procs[1].wait_event("elected", SOON);
    let (code, out, _) = elect_on(&etcd, "switchover", "any", &["--to", "b"]);
    assert_eq!(code, 0);
    assert!(out.contains("leads already"), "{out}");
}

#[test]
fn a_refused_switchover_changes_nothing_and_says_why() {
    let etcd = Cluster::start();
    let (mut procs, _) = line_of(&etcd, "refused", &["a", "b"]);
    let before = etcd.versions("refused");
    let (code, out, err) = elect_on(&etcd, "switchover", "refused", &["--to", "zed"]);
    assert_eq!(code, 5, "refused: {out}{err}");
    assert!(
        err.contains("no live candidate has the id \"zed\""),
        "{err}"
    );
    let (code, _, err) = elect_on(&etcd, "switchover", "nobody-here", &["--to", "a"]);
    assert_eq!(code, 5, "{err}");
    assert!(err.contains("nobody leads"), "{err}");
    assert_eq!(etcd.versions("refused"), before, "the line is as it was");
    assert!(!procs[0].sees_event("demoted", Duration::from_millis(300)));
    let (code, _, err) = elect_on(
        &etcd,
        "switchover",
        "refused",
        &["--to", "b", "--timeout", "0s"],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--timeout"), "{err}");
}

#[test]
fn a_go_candidate_in_the_way_refuses_the_switchover() {
    let etcd = Cluster::start();
    let mut a = campaign(&etcd.endpoints, "mixed", "a", "10");
    a.wait_event("elected", SOON);
    let _go = etcdctl_elect(&etcd.endpoints, &["mixed", "go"]);
    etcd.wait_for_candidates("mixed", 2);
    let _c = campaign(&etcd.endpoints, "mixed", "c", "10");
    etcd.wait_for_candidates("mixed", 3);
    let (code, _, err) = elect_on(&etcd, "switchover", "mixed", &["--to", "c"]);
    assert_eq!(code, 5, "{err}");
    assert!(
        err.contains("\"go\", a go candidate ahead of the target"),
        "{err}"
    );
    // To the Go candidate itself, next in line: it needs no stepping aside,
    // and the touch is only for elect's; it reads its own turn.
    let (code, out, err) = elect_on(&etcd, "switchover", "mixed", &["--to", "go"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(a.sees_event("demoted", SOON));
}

#[test]
fn a_zookeeper_switchover_hands_over_to_the_last_in_line_past_one_who_steps_aside() {
    let zk = Ensemble::start();
    let path = "/steer";
    let mut procs: Vec<Proc> = Vec::new();
    for (i, id) in ["a", "b", "c"].iter().enumerate() {
        procs.push(campaign_zk(&zk.endpoints, path, id, "4s"));
        eventually("the candidates queue", SOON, || {
            (zk.children(path).len() == i + 1).then_some(())
        });
    }
    let (_, first) = procs[0].wait_event("elected", SOON);
    let first = first["token"].as_u64().unwrap();
    let line = listed_at("zk", &zk.endpoints, path);
    assert_eq!(line[0], ("a".into(), true));
    let (code, out, err) = elect_at(
        "zk",
        &zk.endpoints,
        "switchover",
        path,
        &["--to", "c", "--format", "json"],
    );
    assert_eq!(code, 0, "switchover: {out}{err}");
    let report: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(
        (report["outcome"].as_str(), report["leader"].as_str()),
        (Some("done"), Some("c"))
    );
    let (demoted_at, _) = procs[0].wait_event("demoted", SOON);
    let (elected_at, elected) = procs[2].wait_event("elected", SOON);
    assert!(
        demoted_at <= elected_at,
        "the old leader stopped before the target led"
    );
    let token = elected["token"].as_u64().unwrap();
    assert!(token > first, "the target's token {token} is above {first}");
    assert!(
        !procs[1].sees_event("elected", Duration::from_millis(500)),
        "b stepped aside"
    );
    eventually("a and b queue again behind c", SOON, || {
        let line = listed_at("zk", &zk.endpoints, path);
        (line.len() == 3 && line[0] == ("c".into(), true)).then_some(())
    });
    assert!(
        !zk.children(path).iter().any(|c| c == "switchover"),
        "the record went with the command's session"
    );
    let (code, _, err) = elect_at("zk", &zk.endpoints, "switchover", path, &["--to", "zed"]);
    assert_eq!(code, 5, "{err}");
}

/// `elect <command>` on the Raft-vote cluster, with `id`'s TLS flags.
fn elect_raft(
    cluster: &RaftCluster,
    tls_of: &str,
    command: &str,
    args: &[&str],
) -> (i32, String, String) {
    let tls = cluster.tls_flags(tls_of);
    let tls: Vec<&str> = tls.iter().map(String::as_str).collect();
    let args = [args, &tls].concat();
    elect_at("raft", &cluster.endpoints, command, "test", &args)
}

/// The peer that leads, as `elect candidates` lists it, once one does.
fn raft_leader(cluster: &RaftCluster, tls_of: &str) -> (String, Vec<String>) {
    eventually("a Raft-vote leader", SOON, || {
        let (code, out, _) = elect_raft(cluster, tls_of, "candidates", &["--format", "json"]);
        let line: Value = serde_json::from_str(out.trim()).ok()?;
        let ids: Vec<String> = line["candidates"]
            .as_array()?
            .iter()
            .map(|c| c["id"].as_str().unwrap().to_owned())
            .collect();
        (code == 0 && line["candidates"][0]["leads"] == true).then(|| (ids[0].clone(), ids))
    })
}

#[test]
fn a_raft_switchover_moves_leadership_to_the_last_in_line_and_only_peers_may_ask() {
    let cluster = RaftCluster::secured(3, "2s");
    let mut procs: Vec<Proc> = cluster.all();
    let (leader, line) = raft_leader(&cluster, "p0");
    let at = |id: &str| cluster.ids.iter().position(|p| p == id).unwrap();
    let (_, elected) = procs[at(&leader)].wait_event("elected", SOON);
    let term = elected["token"].as_u64().unwrap();
    let last = line.last().unwrap().clone();

    // A reader's certificate (from the CA, naming no peer) may not steer.
    let (code, _, err) = elect_raft(&cluster, "reader", "switchover", &["--to", &last]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("names no peer"), "{err}");
    assert_eq!(raft_leader(&cluster, "p0").0, leader, "nothing changed");

    let (code, out, err) = elect_raft(
        &cluster,
        "p0",
        "switchover",
        &["--to", &last, "--format", "json"],
    );
    assert_eq!(code, 0, "switchover: {out}{err}");
    let report: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(report["leader"].as_str(), Some(last.as_str()), "{report}");
    let (demoted_at, _) = procs[at(&leader)].wait_event("demoted", SOON);
    let (elected_at, elected) = procs[at(&last)].wait_event("elected", SOON);
    assert!(
        demoted_at <= elected_at,
        "the old leader stopped before the target led"
    );
    assert!(elected["token"].as_u64().unwrap() > term, "a higher term");
    // The old leader stays a peer.
    assert_eq!(procs[at(&leader)].try_exit(), None);

    let (code, _, err) = elect_raft(&cluster, "p0", "switchover", &["--to", "nobody"]);
    assert_eq!(code, 5, "{err}");
}

/// The soak's seed 35101 (etcd 3.5.1, 2,800 s): a switchover whose
/// `--timeout` was 3 s returned after 6.5 s, a member's log stalled. Every
/// step is now held to the timeout, and the withdrawal to half a second
/// past it: through a leader member whose disk hangs (its writes never
/// commit), the command ends by its timeout and says so, not by etcd's own
/// 7 s request timeout.
#[test]
fn a_switchover_through_a_member_whose_disk_hangs_ends_by_its_timeout() {
    let mut etcd = Cluster::start();
    let (mut procs, _) = line_of(&etcd, "hung", &["a", "b"]);
    let stalled = eventually("a Raft leader", SOON, || etcd.leader_member());
    let only_stalled = etcd.member(stalled).client.clone();
    etcd.member_mut(stalled)
        .apply(elect_lab::Fault::StallLog)
        .expect("stalling the leader's WAL (needs strace)");
    let (code, out, err, took) = support::elect::elect_once(&[
        "switchover",
        "--endpoints",
        &only_stalled,
        "--election",
        "hung",
        "--to",
        "b",
        "--timeout",
        "1s",
    ]);
    etcd.member_mut(stalled)
        .apply(elect_lab::Fault::Unstall)
        .unwrap();
    assert_ne!(code, 0, "nothing could be done: {out}{err}");
    assert!(
        took < Duration::from_secs(3),
        "took {took:?} against a timeout of 1 s: {out}{err}"
    );
    for p in &mut procs {
        p.signal(nix::sys::signal::Signal::SIGTERM);
    }
}
