//! Faults only containers can stage: a member or an `elect` taken off the
//! network (`docker network disconnect`), a member frozen (`docker pause`),
//! and Raft-vote peers partitioned from each other. In process mode these
//! tests say they need containers and do nothing.

mod support;

use std::time::{Duration, Instant};

use support::containers_only;
use support::docker::{Container, ElectContainer};
use support::elect::{Proc, campaign, campaign_zk, leader_once};
use support::proc::DeathWatch;
use support::{etcd, eventually, zk};

const SOON: Duration = Duration::from_secs(20);

/// How long a member stays cut off or frozen: past etcd's election timeout
/// (1 s) and the ZooKeeper follower's sync limit (10 ticks of 200 ms).
const OUTAGE: Duration = Duration::from_secs(3);

type Fault = (
    &'static str,
    fn(&Container) -> elect_lab::Result<()>,
    fn(&Container) -> elect_lab::Result<()>,
);

/// What is done to one member, and how it is undone.
const MINORITY_FAULTS: [Fault; 2] = [
    (
        "network disconnect",
        Container::disconnect,
        Container::connect,
    ),
    ("docker pause", Container::pause, Container::unpause),
];

/// One member at a time is disconnected, reconnected, paused and
/// unpaused. A majority stays up throughout, so the leader keeps leading
/// (it may step down while its own connection hangs, but nobody else may
/// lead) and the member rejoins.
fn minority_faults_leave_the_leader_in_place<'a>(
    backend: &str,
    endpoints: &str,
    member: impl Fn(usize) -> &'a Container,
    a: &Proc,
    b: &mut Proc,
) {
    for i in 0..3 {
        for (what, cut, heal) in MINORITY_FAULTS {
            cut(member(i)).unwrap_or_else(|e| panic!("{what}: {e}"));
            std::thread::sleep(OUTAGE);
            heal(member(i)).unwrap_or_else(|e| panic!("undoing {what}: {e}"));
            assert!(
                !b.sees_event("elected", Duration::ZERO),
                "b was elected while only member {i} had a fault ({what}); a's log:\n{}\nb's log:\n{}",
                a.stderr(),
                b.stderr()
            );
            // What `elect leader` last said, for the failure message.
            let mut last = (0, String::new());
            let led = elect_lab::poll(SOON, || {
                last = leader_once(backend, endpoints, "/minority", "text");
                (last.1.trim() == "a").then_some(())
            });
            assert!(
                led.is_some(),
                "a not leading {SOON:?} after member {i}'s {what} was undone: `elect leader` \
                 exited {} saying {:?}; a's log:\n{}\nb's log:\n{}",
                last.0,
                last.1,
                a.stderr(),
                b.stderr()
            );
        }
    }
    assert!(
        !b.sees_event("elected", Duration::from_secs(1)),
        "b never led"
    );
}

#[test]
fn etcd_members_cut_off_or_frozen_one_at_a_time_change_nothing() {
    if !containers_only("etcd member faults") {
        return;
    }
    let etcd = etcd::Cluster::start();
    // The lease outlives etcd's own recovery: disconnecting etcd's leader
    // costs an election (two, when the member comes back with a higher
    // term: etcd 3.4 runs without PreVote), and on a busy machine CI saw
    // keepalives unanswered for 8 s of "no leader" at a TTL of 4 s.
    let ttl = "12s";
    let mut a = campaign(&etcd.endpoints, "/minority", "a", ttl);
    a.wait_event("elected", SOON);
    let mut b = campaign(&etcd.endpoints, "/minority", "b", ttl);
    b.wait_leader("a", SOON);
    minority_faults_leave_the_leader_in_place(
        "etcd",
        &etcd.endpoints,
        |i| etcd.member(i).container().expect("container mode"),
        &a,
        &mut b,
    );
    // Every member serves again.
    for i in 0..3 {
        let member = &etcd.member(i).client;
        eventually("the member serving again", SOON, || {
            (leader_once("etcd", member, "/minority", "text").1.trim() == "a").then_some(())
        });
    }
}

#[test]
fn zk_members_cut_off_or_frozen_one_at_a_time_change_nothing() {
    if !containers_only("ZooKeeper member faults") {
        return;
    }
    let zk = zk::Ensemble::start();
    let mut a = campaign_zk(&zk.endpoints, "/minority", "a", "4s");
    a.wait_event("elected", SOON);
    let mut b = campaign_zk(&zk.endpoints, "/minority", "b", "4s");
    b.wait_leader("a", SOON);
    minority_faults_leave_the_leader_in_place(
        "zk",
        &zk.endpoints,
        |i| zk.member(i).container().expect("container mode"),
        &a,
        &mut b,
    );
    for i in 0..3 {
        let member = &zk.member(i).client;
        eventually("the member serving again", SOON, || {
            let srvr = zk::four_letter(member, "srvr");
            (srvr.contains("Mode: leader") || srvr.contains("Mode: follower")).then_some(())
        });
    }
}

/// The container running the leading `elect run` is cut off from the
/// ensemble past its TTL: the wrapped command is dead before the successor
/// reports `elected`; reconnected, the old leader follows the new one.
fn cut_off_leader_dies_first_and_rejoins_as_follower(
    network: &support::docker::Network,
    args: &[&str],
) {
    let command = ["--", "sh", "-c", "sleep 1000 & wait"];
    let run = |id: &str, n: u8| -> ElectContainer {
        let argv = [args, &["--format", "json", "run", "--id", id], &command[..]].concat();
        support::docker::elect(network, id, n, &argv)
    };
    let mut a = run("a", 41);
    a.proc.wait_event("elected", SOON);
    let mut b = run("b", 42);
    b.proc.wait_leader("a", SOON);
    let tree = eventually("a's command running", SOON, || {
        let tree = a.command_tree();
        // The watchdog, sh and sleep.
        (tree.len() >= 3).then_some(tree)
    });
    let deaths = DeathWatch::start(tree.clone(), SOON);

    let cut = Instant::now();
    a.container.disconnect();
    let (elected_at, _) = b.proc.wait_event("elected", SOON);
    let died = deaths.join();
    for (pid, at) in tree.iter().zip(&died) {
        assert!(
            *at < elected_at,
            "pid {pid} of a's tree died {:?} after b was elected",
            *at - elected_at
        );
    }
    let last_death = died.iter().max().unwrap();
    eprintln!(
        "a's tree dead {:?} after the cut, {:?} before b was elected",
        *last_death - cut,
        elected_at - *last_death
    );
    a.proc.wait_event("demoted", SOON);

    a.container.connect();
    let seen = a.proc.wait_leader("b", SOON);
    assert_eq!(seen["is_self"], false, "a follows b");
    assert!(
        !a.proc.sees_event("elected", Duration::from_secs(1)),
        "a stays a follower"
    );
}

#[test]
fn etcd_leader_cut_off_past_its_ttl_dies_before_the_successor_and_rejoins() {
    if !containers_only("etcd leader cut off") {
        return;
    }
    let etcd = etcd::Cluster::start();
    cut_off_leader_dies_first_and_rejoins_as_follower(
        etcd.network(),
        &[
            "--endpoints",
            &etcd.endpoints,
            "--election",
            "/cut",
            "--ttl",
            "2s",
        ],
    );
}

#[test]
fn zk_leader_cut_off_past_its_session_dies_before_the_successor_and_rejoins() {
    if !containers_only("ZooKeeper leader cut off") {
        return;
    }
    let zk = zk::Ensemble::start();
    cut_off_leader_dies_first_and_rejoins_as_follower(
        zk.network(),
        &[
            "--backend",
            "zk",
            "--endpoints",
            &zk.endpoints,
            "--election",
            "/cut",
            "--ttl",
            "2s",
        ],
    );
}

/// Three Raft-vote peers in containers. The leader is partitioned away:
/// it steps down before the majority elects a new leader; healed, there is
/// exactly one leader and PreVote kept the isolated peer from inflating
/// the term.
#[test]
fn raft_partitioned_leader_steps_down_first_and_heals_without_term_inflation() {
    if !containers_only("Raft-vote partition") {
        return;
    }
    let network = support::docker::TestNetwork::create("raft");
    let ids = ["p1", "p2", "p3"];
    let endpoints = ids
        .iter()
        .enumerate()
        .map(|(i, id)| format!("{id}={}:7000", network.ip(31 + i as u8)))
        .collect::<Vec<_>>()
        .join(",");
    let mut peers: Vec<ElectContainer> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| {
            support::docker::elect(
                &network,
                id,
                31 + i as u8,
                &[
                    "--backend",
                    "raft",
                    "--endpoints",
                    &endpoints,
                    "--id",
                    id,
                    "--election",
                    "partition",
                    "--ttl",
                    "1s",
                    "--data-dir",
                    "/data/raft",
                    "--format",
                    "json",
                    "campaign",
                ],
            )
        })
        .collect();
    let old = eventually("a Raft-vote leader", SOON, || {
        peers
            .iter_mut()
            .position(|p| p.proc.try_event("elected").is_some())
    });
    let (old_id, others): (&str, Vec<usize>) = (ids[old], (0..3).filter(|&i| i != old).collect());

    peers[old].container.disconnect();
    let (demoted_at, _) = peers[old].proc.wait_event("demoted", SOON);
    let (new, elected_at, elected) = eventually("a new leader", SOON, || {
        others
            .iter()
            .find_map(|&i| peers[i].proc.try_event("elected").map(|(at, v)| (i, at, v)))
    });
    assert!(
        demoted_at < elected_at,
        "{old_id} stepped down {:?} after {} was elected",
        demoted_at - elected_at,
        ids[new]
    );
    let term = elected["token"].as_u64().expect("a term");

    // Isolated for several election timeouts: PreVote must keep it from
    // raising its term.
    std::thread::sleep(Duration::from_secs(4));
    peers[old].container.connect();
    let seen = peers[old].proc.wait_leader(ids[new], SOON);
    assert_eq!(seen["token"].as_u64(), Some(term), "no term inflation");
    for (i, peer) in peers.iter_mut().enumerate() {
        assert!(
            !peer.proc.sees_event(
                "elected",
                Duration::from_millis(if i == 0 { 3000 } else { 0 })
            ),
            "{} was elected after the heal: more than one leader or a new term",
            ids[i]
        );
    }
    drop(peers);
}

/// `elect run --contain auto` inside a container, where Docker's default
/// seccomp profile refuses new namespaces to a process without
/// CAP_SYS_ADMIN and the cgroup file system is read-only: `auto` falls back
/// and says why, and the level it chose still holds the whole tree (a
/// child, a process in a group of its own, a daemon) when leadership ends
/// with `elect` frozen past its deadline.
#[test]
fn in_a_container_auto_falls_back_says_why_and_still_kills_the_whole_tree() {
    if !containers_only("containment in a container") {
        return;
    }
    let network = support::docker::TestNetwork::create("contain");
    let peer = format!("a={}:7000", network.0.ip(51));
    let script = support::proc::tree_script(std::path::Path::new("/data/pids"), false);
    let mut a = support::docker::elect(
        &network.0,
        "contain",
        51,
        &[
            "--backend",
            "raft",
            "--endpoints",
            &peer,
            "--id",
            "a",
            "--election",
            "contain",
            "--ttl",
            "1s",
            "--data-dir",
            "/data",
            "--format",
            "json",
            "run",
            "--contain",
            "auto",
            "--",
            "sh",
            "-c",
            &script,
        ],
    );
    a.proc.wait_event("elected", SOON);
    let said = a.proc.stderr();
    let chosen = said
        .lines()
        .find_map(|l| l.split("containment: ").nth(1))
        .unwrap_or_else(|| panic!("auto names its choice:\n{said}"))
        .to_owned();
    eprintln!("in a container: {chosen}");
    if !chosen.starts_with("pidns") {
        assert!(
            chosen.contains("pidns unavailable: "),
            "auto says why it passed pidns over: {chosen}"
        );
    }
    // The tree as the host sees it: the three `sleep 1000`s (child, other
    // group, daemon) and the command's shell.
    let elect = a.container.host_pid().expect("the container runs");
    let tree = eventually("the whole tree", SOON, || {
        let tree: Vec<i32> = support::proc::descendants(elect)
            .into_iter()
            .filter(|&p| {
                let cmdline = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
                cmdline.starts_with(b"sleep\x001000") || cmdline.starts_with(b"sh\x00-c\x00")
            })
            .collect();
        (tree.len() == 4).then_some(tree)
    });
    let deaths = DeathWatch::start(tree, SOON);
    support::signal_pid(elect, nix::sys::signal::Signal::SIGSTOP);
    let frozen = Instant::now();
    let died = deaths.join();
    support::signal_pid(elect, nix::sys::signal::Signal::SIGCONT);
    let last = died.iter().max().unwrap();
    eprintln!(
        "in a container ({}): the whole tree dead {:?} after elect froze (TTL 1 s)",
        chosen.split(';').next().unwrap_or_default(),
        *last - frozen
    );
    assert!(*last - frozen < Duration::from_secs(5));
}
