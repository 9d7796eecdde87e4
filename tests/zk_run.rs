//! `elect --backend zk run` against a real ZooKeeper ensemble.

mod support;

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use support::elect::{Proc, campaign_zk, elect_zk};
use support::eventually;
use support::proc::{DeathWatch, read_pids, scratch, trapping_shell, tree_script};
use support::zk::Ensemble;

const SOON: Duration = Duration::from_secs(15);

fn run(zk: &Ensemble, election: &str, id: &str, script: &str) -> Proc {
    elect_zk(
        id,
        &zk.endpoints,
        &[
            "run",
            "--election",
            election,
            "--id",
            id,
            "--ttl",
            "2s",
            "--",
            "sh",
            "-c",
            script,
        ],
    )
}

#[test]
fn the_command_sees_its_election_and_its_exit_code_propagates() {
    let zk = Ensemble::start();
    let env_file = scratch("env").join("env");
    let script = format!(
        "echo \"$ELECT_LEADER_ID $ELECT_FENCING_TOKEN $ELECT_ELECTION $ELECT_BACKEND\" > {}; exit 7",
        env_file.display()
    );
    let mut a = run(&zk, "/env", "node-a", &script);
    let (_, elected) = a.wait_event("elected", SOON);
    assert_eq!(a.wait_exit(SOON), 7);
    let seen = std::fs::read_to_string(&env_file).unwrap();
    assert_eq!(seen.trim(), format!("node-a {} /env zk", elected["token"]));
    assert!(
        zk.children("/env").is_empty(),
        "resigned after the command exited"
    );

    let mut b = run(&zk, "/env", "b", "kill -9 $$");
    assert_eq!(b.wait_exit(SOON), 128 + 9);
}

#[test]
fn sigterm_is_forwarded_then_we_resign_and_the_successor_runs() {
    let zk = Ensemble::start();
    let trapped = scratch("fwd").join("a-trapped");
    let mut a = run(&zk, "/fwd", "a", &trapping_shell(&trapped));
    a.wait_event("elected", SOON);
    eventually("a's trap", SOON, || trapped.exists().then_some(()));
    let mut b = campaign_zk(&zk.endpoints, "/fwd", "b", "2s");
    eventually("b's znode", SOON, || {
        (zk.children("/fwd").len() == 2).then_some(())
    });
    let sent = Instant::now();
    a.signal(Signal::SIGTERM);
    assert_eq!(a.wait_exit(SOON), 42);
    let (at, _) = b.wait_event("elected", SOON);
    assert!(at - sent < Duration::from_secs(1));
}

/// A leader `a` running a command tree (pids recorded in a scratch file)
/// and a waiting candidate `b`; returns both and the tree's pids.
fn leader_with_tree_and_successor(
    zk: &Ensemble,
    election: &str,
    level: &str,
) -> (Proc, Proc, Vec<i32>) {
    let pids_file = scratch(&election[1..]).join("pids");
    let script = tree_script(&pids_file, false);
    let mut a = elect_zk(
        "a",
        &zk.endpoints,
        &[
            "run",
            "--election",
            election,
            "--id",
            "a",
            "--ttl",
            "2s",
            "--contain",
            level,
            "--",
            "sh",
            "-c",
            &script,
        ],
    );
    a.wait_event("elected", SOON);
    let pids = read_pids(&pids_file, 2);
    let b = campaign_zk(&zk.endpoints, election, "b", "2s");
    eventually("b's znode", SOON, || {
        (zk.children(election).len() == 2).then_some(())
    });
    (a, b, pids)
}

/// An operator deletes the leader's znode. Like a revoked etcd lease, this
/// takes leadership away at once and gives the old leader no head start:
/// the old leader and the successor hear of it together. The old leader's
/// tree (which dies on SIGTERM) is killed at once, within milliseconds of
/// the successor's election (reported, not ordered: under load either may
/// come first; fencing tokens cover the rest), and the old leader
/// campaigns again with exactly one znode.
#[test]
fn znode_deleted_by_an_operator_the_tree_dies_at_once_and_rejoins_once() {
    let zk = Ensemble::start();
    for level in support::containment_levels() {
        let election = format!("/del-{level}");
        let (mut a, mut b, pids) = leader_with_tree_and_successor(&zk, &election, level);
        let deaths = DeathWatch::start(pids, SOON);
        let a_node = zk
            .children(&election)
            .into_iter()
            .min_by_key(|n| n[n.len() - 10..].to_owned())
            .unwrap();
        let deleted = Instant::now();
        zk.delete(&format!("{election}/{a_node}"));
        let (elected_at, _) = b.wait_event("elected", SOON);
        // kazoo's delete returns after the server applied it: `deleted` is
        // before the deletion, so the bound is generous.
        eprint!("{level}: ");
        deaths.assert_all_died_soon_after(deleted, Duration::from_secs(2), elected_at);
        a.wait_event("demoted", SOON);
        eventually("a queued again, once", SOON, || {
            let c = zk.children(&election);
            (c.len() == 2 && !c.contains(&a_node)).then_some(())
        });
        b.signal(Signal::SIGTERM);
        a.wait_event("elected", SOON);
    }
}

/// Only the leading `elect` is frozen (SIGSTOP) past its session timeout:
/// its watchdog kills the command's tree by the deadline, before the
/// successor is elected; after SIGCONT the old leader does not think it
/// leads.
#[test]
fn a_frozen_leader_loses_its_command_before_the_successor_leads() {
    let zk = Ensemble::start();
    let (mut a, mut b, pids) = leader_with_tree_and_successor(&zk, "/pause", "auto");

    let deaths = DeathWatch::start(pids, SOON);
    a.signal(Signal::SIGSTOP);
    let (elected_at, _) = b.wait_event("elected", SOON);
    deaths.assert_all_died_before(elected_at, "b was elected", "");
    a.signal(Signal::SIGCONT);
    a.wait_event("demoted", SOON);
    assert!(
        !a.sees_event("elected", Duration::from_secs(3)),
        "the old leader leads again"
    );
    let (code, out) = support::elect::leader_once("zk", &zk.endpoints, "/pause", "text");
    assert_eq!((code, out.trim()), (0, "b"));
}
