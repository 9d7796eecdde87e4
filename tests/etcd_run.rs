//! `elect run` against a real etcd cluster: the command runs only while we
//! lead, and its whole process tree is dead before anyone else leads.

mod support;

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use support::elect::{Proc, campaign, elect};
use support::etcd::Cluster;
use support::eventually;
use support::proc::{DeathWatch, read_pids, scratch, trapping_shell, tree_script};

const SOON: Duration = Duration::from_secs(10);

/// `elect run` wrapping `sh -c script`.
fn run(etcd: &Cluster, election: &str, id: &str, extra: &[&str], script: &str) -> Proc {
    let mut args = vec!["run", "--election", election, "--id", id, "--ttl", "5"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", "sh", "-c", script]);
    elect(id, &etcd.endpoints, &args)
}

/// `a` leads running a tree (command and grandchild, both deaf to SIGTERM
/// when `stubborn`) with `grace`; `b` campaigns behind it. Returns both
/// and the tree's pids.
fn leader_with_tree_and_successor(
    etcd: &Cluster,
    election: &str,
    grace: &str,
    stubborn: bool,
    level: &str,
) -> (Proc, Proc, Vec<i32>) {
    let pids_file = scratch(election).join("pids");
    let mut a = run(
        etcd,
        election,
        "a",
        &["--grace", grace, "--contain", level],
        &tree_script(&pids_file, stubborn),
    );
    a.wait_event("elected", SOON);
    let pids = read_pids(&pids_file, 2);
    let b = campaign(&etcd.endpoints, election, "b", "5");
    eventually("b's key", SOON, || {
        (etcd.candidates(election).len() == 2).then_some(())
    });
    (a, b, pids)
}

/// The command and its grandchild (SIGTERM-deaf) died no sooner than the
/// `--grace 1s` after `since`.
fn assert_got_a_second_of_grace(died: &[Instant], since: Instant) {
    for (what, at) in ["command", "grandchild"].iter().zip(died) {
        assert!(
            *at - since >= Duration::from_millis(900),
            "{what} got its grace"
        );
    }
}

#[test]
fn the_command_sees_its_election_and_its_exit_code_propagates() {
    let etcd = Cluster::start();
    let dir = scratch("env");
    let env_file = dir.join("env");
    let script = format!(
        "echo \"$ELECT_LEADER_ID $ELECT_FENCING_TOKEN $ELECT_ELECTION $ELECT_BACKEND\" > {}; exit 7",
        env_file.display()
    );
    let mut a = run(&etcd, "env", "node-a", &[], &script);
    let (_, elected) = a.wait_event("elected", SOON);
    assert_eq!(a.wait_exit(SOON), 7);
    let seen = std::fs::read_to_string(&env_file).unwrap();
    assert_eq!(seen.trim(), format!("node-a {} env etcd", elected["token"]));
    assert!(
        etcd.candidates("env").is_empty(),
        "resigned after the command exited"
    );
    assert!(etcd.leases().is_empty());
}

#[test]
fn a_command_killed_by_a_signal_exits_128_plus_n() {
    let etcd = Cluster::start();
    let mut a = run(&etcd, "sig", "a", &[], "kill -9 $$");
    assert_eq!(a.wait_exit(SOON), 128 + 9);
    assert!(etcd.candidates("sig").is_empty());
}

#[test]
fn sigterm_is_forwarded_then_we_resign_and_the_successor_runs() {
    let etcd = Cluster::start();
    let dir = scratch("fwd");
    let trapped = dir.join("a-trapped");
    let mut a = run(&etcd, "fwd", "a", &[], &trapping_shell(&trapped));
    a.wait_event("elected", SOON);
    eventually("a's trap", SOON, || trapped.exists().then_some(()));
    let marker = dir.join("b-ran");
    let mut b = run(
        &etcd,
        "fwd",
        "b",
        &[],
        &format!("touch {}; sleep 1000", marker.display()),
    );
    eventually("b's key", SOON, || {
        (etcd.candidates("fwd").len() == 2).then_some(())
    });
    let sent = Instant::now();
    a.signal(Signal::SIGTERM);
    assert_eq!(a.wait_exit(SOON), 42, "elect exits with the command's code");
    let (at, _) = b.wait_event("elected", SOON);
    assert!(at - sent < Duration::from_secs(1));
    eventually("b's command", SOON, || marker.exists().then_some(()));
    b.signal(Signal::SIGTERM);
    assert_eq!(b.wait_exit(SOON), 128 + 15);
    assert!(etcd.candidates("fwd").is_empty());
    assert!(etcd.leases().is_empty());
}

/// The leader's key is deleted by an operator while its command (which
/// ignores SIGTERM, as does its grandchild) runs: the successor must not be
/// elected until the whole tree is dead, which takes the full grace.
#[test]
fn key_deleted_by_an_operator_the_tree_dies_before_the_successor_leads() {
    let etcd = Cluster::start();
    let (mut a, mut b, pids) = leader_with_tree_and_successor(&etcd, "del", "1s", true, "auto");

    let deaths = DeathWatch::start(pids, SOON);
    let (a_key, _) = etcd.candidates("del").remove(0);
    let deleted = Instant::now();
    etcd.etcdctl_ok(&["del", &a_key]);
    let (elected_at, _) = b.wait_event("elected", SOON);
    let died = deaths.assert_all_died_before(elected_at, "b was elected", "");
    assert_got_a_second_of_grace(&died, deleted);
    a.wait_event("demoted", SOON);
    // a stays in the race, behind b, and leads again when b resigns.
    eventually("a's new key", SOON, || {
        (etcd.candidates("del").len() == 2).then_some(())
    });
    b.signal(Signal::SIGTERM);
    a.wait_event("elected", SOON);
}

/// The same delete, but the candidate that takes over was not waiting on
/// the leader's key: it joins after the delete, finds no key older than
/// its own and nothing else in the election's prefix. The old leader's
/// tenure marker still says its command may be stopping (the `tenure`
/// module), and the newcomer waits for it, as the one waiting in line does.
#[test]
fn key_deleted_by_an_operator_a_newcomer_waits_for_the_tree_too() {
    let etcd = Cluster::start();
    let pids_file = scratch("newcomer").join("pids");
    let mut a = run(
        &etcd,
        "newcomer",
        "a",
        &["--grace", "1s"],
        &tree_script(&pids_file, true),
    );
    a.wait_event("elected", SOON);
    let deaths = DeathWatch::start(read_pids(&pids_file, 2), SOON);
    let (a_key, _) = etcd.candidates("newcomer").remove(0);
    let deleted = Instant::now();
    etcd.etcdctl_ok(&["del", &a_key]);
    let mut c = campaign(&etcd.endpoints, "newcomer", "c", "5");
    let (elected_at, _) = c.wait_event("elected", SOON);
    let died = deaths.assert_all_died_before(elected_at, "the newcomer was elected", "");
    assert_got_a_second_of_grace(&died, deleted);
    a.wait_event("demoted", SOON);
}

/// The leader's lease is revoked: leadership is gone at once and nothing
/// can hold the successor back. The successor hears of it at the same
/// moment we do, so nothing orders our command's death and its election:
/// the tree gets SIGTERM the moment our key vanishes (SIGKILL once the
/// lease is known to be gone) and must be dead soon after. A command that
/// outlives that is what fencing tokens are for.
#[test]
fn lease_revoked_the_tree_dies_at_once() {
    let etcd = Cluster::start();
    for level in support::containment_levels() {
        let election = format!("revoke-{level}");
        let (mut a, mut b, pids) =
            leader_with_tree_and_successor(&etcd, &election, "5s", false, level);
        let deaths = DeathWatch::start(pids, SOON);
        let (a_key, _) = etcd.candidates(&election).remove(0);
        let lease = a_key.strip_prefix(&format!("{election}/")).unwrap();
        let revoked = Instant::now();
        etcd.etcdctl_ok(&["lease", "revoke", lease]);
        let (elected_at, _) = b.wait_event("elected", SOON);
        // etcdctl returns after the revoke was applied: `revoked` is before
        // it, so the bound is generous.
        eprint!("{level}: ");
        deaths.assert_all_died_soon_after(revoked, Duration::from_secs(2), elected_at);
        a.wait_event("demoted", SOON);
        drop(a);
        drop(b);
        assert!(etcd.candidates(&election).is_empty());
    }
    assert!(etcd.leases().is_empty());
}

/// SIGTERM while the command (deaf to it) takes its grace, then leadership
/// lost before it ends: once the command is dead, elect exits as asked
/// rather than campaigning again.
#[test]
fn a_shutdown_under_way_stands_when_leadership_is_lost_meanwhile() {
    let etcd = Cluster::start();
    let (mut a, mut b, _pids) =
        leader_with_tree_and_successor(&etcd, "standing", "30s", true, "auto");
    a.signal(Signal::SIGTERM);
    eventually("the stop under way", SOON, || {
        a.stderr()
            .contains("SIGTERM: stopping the command")
            .then_some(())
    });
    let (a_key, _) = etcd.candidates("standing").remove(0);
    let lease = a_key.strip_prefix("standing/").unwrap();
    etcd.etcdctl_ok(&["lease", "revoke", lease]);
    b.wait_event("elected", SOON);
    // Before the fix it campaigned again behind b and never exited.
    assert_eq!(a.wait_exit(SOON), 0, "{}", a.stderr());
    assert!(etcd.candidates("standing").len() == 1, "only b is left");
}

/// etcd#15247, on the etcd Debian ships (3.4.23): a leader member whose
/// WAL's disk hangs keeps acknowledging keepalives from memory while the
/// others elect a new leader, whose clock for the lease started at its
/// election. `a` reaches only that member; `b` the other two. Renewals
/// acknowledged by the stalled member must not keep `a`'s command alive:
/// it must be dead before `b` leads (before renewals were proven, it was
/// still alive a minute later).
#[test]
fn a_leader_member_whose_disk_hangs_does_not_keep_the_command_alive() {
    let mut etcd = Cluster::start();
    let stalled = eventually("a Raft leader", SOON, || etcd.leader_member());
    let only_stalled = etcd.member(stalled).client.clone();
    let others: Vec<String> = (0..3)
        .filter(|&i| i != stalled)
        .map(|i| etcd.member(i).client.clone())
        .collect();
    let pids_file = scratch("stall").join("pids");
    let args = [
        "run",
        "--election",
        "stall",
        "--id",
        "a",
        "--ttl",
        "3",
        "--",
    ];
    let script = format!("echo $$ >> {}; exec sleep 1000", pids_file.display());
    let mut a_args = args.to_vec();
    a_args.extend(["sh", "-c", &script]);
    let mut a = elect("a", &only_stalled, &a_args);
    a.wait_event("elected", SOON);
    let pids = read_pids(&pids_file, 1);
    let deaths = DeathWatch::start(pids, Duration::from_secs(60));

    etcd.member_mut(stalled)
        .apply(elect_lab::Fault::StallLog)
        .expect("stalling the leader's WAL (needs strace)");
    // b's lease grant is the write that reaches the stalled leader's disk.
    let mut b = campaign(&others.join(","), "stall", "b", "3");
    let (elected, _) = b.wait_event("elected", Duration::from_secs(60));
    etcd.member_mut(stalled)
        .apply(elect_lab::Fault::Unstall)
        .unwrap();
    deaths.assert_all_died_before(
        elected,
        "b was elected",
        &format!("; a's log:\n{}", a.stderr()),
    );
    b.signal(Signal::SIGTERM);
    b.wait_exit(SOON);
}

/// The version rule behind the term proof, checked on the server itself
/// (etcd#15247): a Raft leader member whose WAL's disk hangs still
/// acknowledges a keepalive after the other two elected a new leader, on
/// every release before 3.4.31 and 3.5.13 (Debian's 3.4.23 and 3.5.1
/// among them); from those on, it checks that it leads and refuses. elect
/// proves its renewals on exactly the releases where this holds
/// (`renews_without_leading` in the library's etcd connection).
#[test]
fn a_stalled_leader_member_acknowledges_keepalives_where_the_version_rule_says() {
    let mut etcd = Cluster::start();
    let version = etcd.version();
    let granted = etcd.etcdctl_ok(&["lease", "grant", "60"]);
    // "lease 694d9a4d2a4f8d1c granted with TTL(60s)"
    let lease = granted
        .split_whitespace()
        .nth(1)
        .expect("a lease id")
        .to_owned();
    let stalled = eventually("a Raft leader", SOON, || etcd.leader_member());
    let deposed = etcd.leader_seen_by(stalled).expect("the leader's id");
    let others: Vec<usize> = (0..3).filter(|&i| i != stalled).collect();
    etcd.member_mut(stalled)
        .apply(elect_lab::Fault::StallLog)
        .expect("stalling the leader's WAL (needs strace)");
    // A write the leader must sync: its Raft loop hangs on it, so its
    // heartbeats stop and the others elect a leader of their own.
    let mut write = etcd
        .etcdctl_at(others[0], "30s", &["put", "stall-premise", "x"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("etcdctl");
    eventually("the others' own leader", Duration::from_secs(30), || {
        others
            .iter()
            .all(|&i| etcd.leader_seen_by(i).is_some_and(|l| l != deposed))
            .then_some(())
    });
    let renewed = etcd
        .etcdctl_at(stalled, "3s", &["lease", "keep-alive", "--once", &lease])
        .output()
        .expect("etcdctl");
    let said = String::from_utf8_lossy(&renewed.stdout).into_owned()
        + &String::from_utf8_lossy(&renewed.stderr);
    etcd.member_mut(stalled)
        .apply(elect_lab::Fault::Unstall)
        .unwrap();
    let _ = write.kill();
    let _ = write.wait();
    let acknowledged = renewed.status.success() && said.contains("keepalived with TTL");
    assert_eq!(
        acknowledged,
        before_the_leadership_check(etcd.version_numbers()),
        "etcd {version}: the deposed leader {}: {said}",
        if acknowledged {
            "acknowledged the keepalive"
        } else {
            "refused the keepalive"
        }
    );
}

/// Releases before etcd#15247's fix (3.4.31, 3.5.13), as the library's
/// version rule has them.
fn before_the_leadership_check(version: [u64; 3]) -> bool {
    match version {
        [3, 4, patch] => patch < 31,
        [3, 5, patch] => patch < 13,
        [3, minor, _] => minor < 4,
        _ => false,
    }
}
