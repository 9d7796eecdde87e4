//! Raft-vote with real `elect` processes on loopback: failover, a frozen
//! leader, crash between vote and restart, graceful transfer.

mod support;

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use support::elect::{Proc, leader_once};
use support::proc::{DeathWatch, read_pids, scratch, tree_script};
use support::raft::Cluster;

const T: Duration = Duration::from_millis(300);
const SOON: Duration = Duration::from_secs(15);

/// Waits until one of `procs` reports `elected`; returns its index, the
/// instant and the token.
fn elected(procs: &mut [Proc], skip: &[usize], within: Duration) -> (usize, Instant, u64) {
    let until = Instant::now() + within;
    loop {
        for (i, p) in procs.iter_mut().enumerate() {
            if skip.contains(&i) {
                continue;
            }
            if let Some((at, v)) = p.try_event("elected") {
                return (i, at, v["token"].as_u64().unwrap());
            }
        }
        assert!(
            Instant::now() < until,
            "nobody was elected within {within:?}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn failover(n: usize) {
    let cluster = Cluster::new(n, "300ms");
    let mut procs = cluster.all();
    let (leader, _, token) = elected(&mut procs, &[], SOON);
    let killed = Instant::now();
    procs[leader].signal(Signal::SIGKILL);
    let (next, at, next_token) = elected(&mut procs, &[leader], SOON);
    assert_ne!(next, leader);
    assert!(next_token > token, "terms only grow");
    assert!(
        at - killed < T * 3,
        "failover took {:?} (> 3T)",
        at - killed
    );
}

#[test]
fn sigkill_of_the_leader_fails_over_within_3t_with_3_peers() {
    failover(3);
}

#[test]
fn sigkill_of_the_leader_fails_over_within_3t_with_5_peers() {
    failover(5);
}

/// Within T/2: an election after a missed transfer could not start before
/// T, so this tells a transfer from a timeout with room for a loaded machine.
#[test]
fn a_clean_exit_of_the_leader_hands_over_within_half_t() {
    let cluster = Cluster::new(3, "1s");
    let mut procs = cluster.all();
    let (leader, _, _) = elected(&mut procs, &[], SOON);
    let sent = Instant::now();
    procs[leader].signal(Signal::SIGTERM);
    let (_, at, _) = elected(&mut procs, &[leader], SOON);
    assert!(
        at - sent < Duration::from_millis(500),
        "handover took {:?}",
        at - sent
    );
    assert_eq!(procs[leader].wait_exit(SOON), 0);
    let said = procs[leader].stderr();
    assert!(
        said.contains("SIGTERM: resigning") && !said.contains("Some(SIGTERM)"),
        "the signal is named as the user sent it: {said}"
    );
}

/// The leader's `elect` is frozen past T: its lease ends and its watchdog
/// kills its command before anyone else is elected; after SIGCONT it does
/// not disrupt the new leader.
#[test]
fn a_frozen_leader_steps_down_before_anyone_else_leads_and_does_not_disrupt() {
    for level in support::containment_levels() {
        a_frozen_leader_steps_down_first(level);
    }
}

fn a_frozen_leader_steps_down_first(level: &str) {
    let cluster = Cluster::new(3, "300ms");
    let dir = scratch(&format!("raft-pause-{level}"));
    let mut procs: Vec<Proc> = Vec::new();
    let mut pid_files = Vec::new();
    for id in &cluster.ids {
        let pids = dir.join(format!("{id}.pids"));
        let script = tree_script(&pids, false);
        procs.push(cluster.run_argv(id, &["--contain", level], &["sh", "-c", &script]));
        pid_files.push(pids);
    }
    let (leader, _, _) = elected(&mut procs, &[], SOON);
    let pids = read_pids(&pid_files[leader], 2);
    let deaths = DeathWatch::start(pids, SOON);
    procs[leader].signal(Signal::SIGSTOP);
    let (next, at, token) = elected(&mut procs, &[leader], SOON);
    deaths.assert_all_died_before(at, "the new leader", "");
    procs[leader].signal(Signal::SIGCONT);
    std::thread::sleep(T * 4);
    let (code, out) = leader_once("raft", &cluster.endpoints, "test", "json");
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(
        v["leader"],
        cluster.ids[next].as_str(),
        "the new leader still leads"
    );
    assert_eq!(v["token"], token, "no term inflation");
    assert!(
        !procs[next].sees_event("demoted", Duration::ZERO),
        "the new leader was never deposed"
    );
}

/// Peers are SIGKILLed right after they vote and restarted on the same
/// data dir: across both lives, no peer votes for two candidates in a term.
#[test]
fn a_peer_killed_after_voting_never_votes_twice_in_a_term() {
    let cluster = Cluster::new(3, "200ms");
    let mut procs = cluster.all();
    let mut logs: Vec<String> = vec![String::new(); 3];
    for _ in 0..4 {
        let (leader, _, _) = elected(&mut procs, &[], SOON);
        procs[leader].signal(Signal::SIGKILL);
        // Kill the first follower that votes in the new election.
        let voter = support::eventually("a vote", SOON, || {
            (0..3).find(|&i| i != leader && procs[i].stderr().matches(" voted ").count() > 0)
        });
        procs[voter].signal(Signal::SIGKILL);
        for i in [leader, voter] {
            let _ = procs[i].wait_exit(SOON);
            logs[i].push_str(&procs[i].stderr());
            procs[i] = cluster.campaign(&cluster.ids[i]);
        }
    }
    std::thread::sleep(T * 5);
    for (i, p) in procs.iter().enumerate() {
        logs[i].push_str(&p.stderr());
    }
    for (i, log) in logs.iter().enumerate() {
        let mut by_term = std::collections::BTreeMap::new();
        for line in log.lines().filter(|l| l.contains(" voted ")) {
            let field = |name: &str| {
                line.split(&format!("{name}="))
                    .nth(1)
                    .and_then(|r| r.split_whitespace().next())
                    .unwrap()
                    .to_owned()
            };
            if let Some(before) = by_term.insert(field("term"), field("candidate")) {
                assert_eq!(
                    before,
                    field("candidate"),
                    "{} voted twice in a term",
                    cluster.ids[i]
                );
            }
        }
    }
}

/// The binary's signal wiring: SIGUSR1 reaches the command and changes
/// nothing else; a hang-up (SIGHUP) is a clean stop: forwarded to the
/// command, whose exit ends `elect run` with its code.
#[test]
fn sigusr1_is_forwarded_and_a_hangup_ends_the_run_with_the_command() {
    let cluster = Cluster::new(1, "1s");
    let dir = scratch("raft-hup");
    let log = dir.join("signals");
    let script = format!(
        "trap 'echo USR1 >> {0}' USR1; trap 'echo HUP >> {0}; exit 3' HUP; echo ready >> {0}; \
         while :; do sleep 0.01; done",
        log.display()
    );
    let mut peer = cluster.run("p0", &script);
    peer.wait_event("elected", SOON);
    let read = || std::fs::read_to_string(&log).unwrap_or_default();
    support::eventually("the command running", SOON, || {
        read().contains("ready").then_some(())
    });
    peer.signal(Signal::SIGUSR1);
    support::eventually("USR1 forwarded", SOON, || {
        read().contains("USR1").then_some(())
    });
    assert!(
        !peer.sees_event("demoted", Duration::from_millis(300)),
        "USR1 changed nothing"
    );
    peer.signal(Signal::SIGHUP);
    assert_eq!(peer.wait_exit(SOON), 3, "the command's code");
    assert!(read().contains("HUP"));
}

/// A disk too slow for T is said at start and counted in the metrics:
/// every fdatasync of peer p0 (its store's thread included) is held
/// 60 ms by strace, above a quarter of T = 150 ms.
#[test]
fn a_disk_too_slow_for_t_is_said_at_start_and_counted() {
    if std::process::Command::new("strace")
        .arg("-V")
        .output()
        .is_err()
    {
        assert!(
            std::env::var_os("CI").is_none(),
            "strace is needed in CI (deploy/test.sh installs it)"
        );
        eprintln!("no strace here: not tried");
        return;
    }
    let cluster = Cluster::new(3, "150ms");
    let http = format!("127.0.0.1:{}", elect_lab::host::free_port().unwrap());
    let elect = cluster.command("p0", &["--http", &http, "campaign"]);
    let mut slowed = std::process::Command::new("strace");
    slowed
        .args(["-f", "-qq", "-o", "/dev/null", "-e", "trace=fdatasync"])
        .args(["-e", "inject=fdatasync:delay_enter=60000"])
        // Dies with strace, which leaves its tracees running when killed.
        .args(["setpriv", "--pdeathsig", "KILL"])
        .arg(elect.get_program())
        .args(elect.get_args())
        .envs(elect.get_envs().filter_map(|(k, v)| Some((k, v?))));
    let mut p0 = Proc::spawn("p0", slowed);
    let _others: Vec<Proc> = ["p1", "p2"].iter().map(|id| cluster.campaign(id)).collect();
    let said = elect_lab::poll(SOON, || {
        p0.stderr()
            .contains("more than a quarter of the election timeout T = 150ms")
            .then_some(())
    });
    assert!(said.is_some(), "no warning at start:\n{}", p0.stderr());
    // The cluster elects (p0 votes or campaigns, writing each time): p0
    // may win, slow disk and all, and then says "elected", not "leader".
    p0.wait_line("a leader", SOON, |l| {
        l.json()
            .is_some_and(|v| v["event"] == "leader" || v["event"] == "elected")
    });
    let slow = elect_lab::poll(SOON, || {
        let (_, text) = support::http_get(&http, "/metrics");
        let count = text
            .lines()
            .find_map(|l| l.strip_prefix("elect_raft_slow_durable_writes_total "))?
            .parse::<f64>()
            .ok()?;
        (count >= 1.0).then_some(count)
    });
    assert!(slow.is_some(), "no slow write counted:\n{}", p0.stderr());
}

/// A process of the command that outlives its SIGKILL (here frozen by
/// the cgroup v1 freezer, which holds it in an uninterruptible sleep as a
/// hung disk would) is named on stderr with its state, and `elect` does
/// not exit (nor resign) until it is gone; thawed, it dies and `elect`
/// ends. Needs the v1 freezer (this machine mounts it); elsewhere nothing
/// to try.
#[test]
fn a_process_that_outlives_its_sigkill_is_named_and_waited_for() {
    let freezer = std::path::Path::new("/sys/fs/cgroup/freezer");
    if !freezer.join("tasks").exists() {
        eprintln!("no cgroup v1 freezer here: not tried");
        return;
    }
    let cgroup = freezer.join(format!("elect-test-{}", std::process::id()));
    std::fs::create_dir_all(&cgroup).expect("a freezer cgroup (root is needed)");
    let cluster = Cluster::new(1, "1s");
    let dir = scratch("raft-unkillable");
    let pids = dir.join("pids");
    let script = format!(
        "sleep 1000 & echo $! > {p}.tmp; mv {p}.tmp {p}; wait",
        p = pids.display()
    );
    let mut peer = cluster.run_argv("p0", &["--grace", "0s"], &["sh", "-c", &script]);
    peer.wait_event("elected", SOON);
    let stuck = read_pids(&pids, 1)[0];
    std::fs::write(cgroup.join("tasks"), stuck.to_string()).unwrap();
    std::fs::write(cgroup.join("freezer.state"), "FROZEN").unwrap();
    peer.signal(Signal::SIGTERM);
    let said = support::eventually("the survivor named", SOON, || {
        let text = peer.stderr();
        text.contains("outlives its SIGKILL").then_some(text)
    });
    assert!(
        said.contains(&format!("{stuck} (sleep, state D: uninterruptible sleep")),
        "{said}"
    );
    assert!(
        peer.try_exit().is_none(),
        "elect exited while a process of the command lived"
    );
    std::fs::write(cgroup.join("freezer.state"), "THAWED").unwrap();
    // With a grace of 0 the shell dies of the SIGTERM or of the SIGKILL
    // right behind it, whichever lands first.
    let code = peer.wait_exit(SOON);
    assert!(
        [143, 137].contains(&code),
        "elect ends once it is gone: {code}"
    );
    let _ = std::fs::remove_dir(&cgroup);
}
