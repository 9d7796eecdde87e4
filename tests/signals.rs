//! The process edge, on all three backends against real ensembles: a
//! foreground `elect run` whose whole process group gets what a terminal
//! or a shell sends (Ctrl-C, Ctrl-\, Ctrl-Z as `kill -SIG -- -PGID` from
//! outside the group), the group SIGKILLed, or the watchdog alone SIGKILLed.
//! In every case the command's tree (command and grandchild) is dead before
//! any successor reports `elected`, and nothing is left behind.

mod support;

use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use support::elect::{BIN, Proc};
use support::proc::{DeathWatch, alive, descendants, read_pids, scratch, tree_script};
use support::{etcd, eventually, raft, zk};

const SOON: Duration = Duration::from_secs(20);

/// What happens to the leading `elect run`.
#[derive(Clone, Copy, Debug)]
enum Blow {
    /// A terminal's key, delivered to the whole foreground group.
    Key(&'static str, Signal),
    /// `kill -9 -- -PGID`: elect and everything in its group.
    KillGroup,
    /// SIGKILL to the watchdog only.
    KillWatchdog,
}

impl Blow {
    fn name(self) -> &'static str {
        match self {
            Blow::Key(key, _) => key,
            Blow::KillGroup => "kill -9 -- -PGID",
            Blow::KillWatchdog => "kill -9 <watchdog>",
        }
    }
}

const BLOWS: [Blow; 5] = [
    Blow::Key("Ctrl-C", Signal::SIGINT),
    Blow::Key("Ctrl-\\", Signal::SIGQUIT),
    Blow::Key("Ctrl-Z", Signal::SIGTSTP),
    Blow::KillGroup,
    Blow::KillWatchdog,
];

/// One participant: `elect run` in a process group of its own, as a shell
/// starts a foreground job, wrapping a two-process tree.
struct Runner {
    proc: Proc,
    pids_file: std::path::PathBuf,
}

/// Starts `elect <args> run --grace 1s -- sh -c <tree>` as its own group.
fn runner(name: &str, mut cmd: Command, dir: &std::path::Path) -> Runner {
    let pids_file = dir.join(format!("{name}.pids"));
    cmd.args(["--grace", "1s", "--", "sh", "-c"])
        .arg(tree_script(&pids_file, false))
        .process_group(0);
    Runner {
        proc: Proc::spawn(name, cmd),
        pids_file,
    }
}

/// The first descendant of `pid` whose arguments include `arg`.
fn descendant_with_arg(pid: i32, arg: &str) -> Option<i32> {
    descendants(pid).into_iter().find(|p| {
        std::fs::read(format!("/proc/{p}/cmdline"))
            .is_ok_and(|c| c.split(|b| *b == 0).any(|a| a == arg.as_bytes()))
    })
}

/// Waits for the first `elected` among `runners` other than `skip`.
fn next_elected(runners: &mut [Runner], skip: usize) -> (usize, Instant) {
    let until = Instant::now() + SOON;
    loop {
        for (i, r) in runners.iter_mut().enumerate() {
            if i != skip
                && let Some((at, _)) = r.proc.try_event("elected")
            {
                return (i, at);
            }
        }
        assert!(Instant::now() < until, "no successor within {SOON:?}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Deals `blow` to `runners[leader]` and checks the tree dies before a
/// successor is elected; returns how long before.
fn deal(runners: &mut [Runner], leader: usize, blow: Blow, backend: &str) -> Duration {
    let pids = read_pids(&runners[leader].pids_file, 2);
    let elect_pid = runners[leader].proc.pid();
    let watchdog = eventually("the watchdog", SOON, || {
        descendant_with_arg(elect_pid, "__watchdog")
    });
    let guard = eventually("the guard", SOON, || {
        descendant_with_arg(watchdog, "__guard")
    });
    let deaths = DeathWatch::start(pids.clone(), SOON);
    let group = Pid::from_raw(elect_pid);
    match blow {
        Blow::Key(_, sig) => killpg(group, sig).unwrap(),
        Blow::KillGroup => killpg(group, Signal::SIGKILL).unwrap(),
        Blow::KillWatchdog => support::signal_pid(watchdog, Signal::SIGKILL),
    }
    let (_, elected_at) = next_elected(runners, leader);
    let died = deaths.assert_all_died_before(elected_at, "a successor was elected", "");
    let margin = elected_at - *died.iter().max().unwrap();
    eprintln!(
        "{backend} {}: tree dead {margin:?} before the successor's election",
        blow.name()
    );
    let code = runners[leader].proc.wait_exit(SOON);
    let expected = match blow {
        // elect exits with the command's code: sh dies of the forwarded
        // signal (Ctrl-Z's SIGTSTP is forwarded as SIGTERM).
        Blow::Key(_, Signal::SIGTSTP) => 128 + 15,
        Blow::Key(_, sig) => 128 + sig as i32,
        Blow::KillGroup => 128 + 9,
        Blow::KillWatchdog => 1,
    };
    assert_eq!(
        code,
        expected,
        "{blow:?}: elect's exit; stderr:\n{}",
        runners[leader].proc.stderr()
    );
    for (what, pid) in [("watchdog", watchdog), ("guard", guard)] {
        eventually(&format!("the {what} gone"), SOON, || {
            (!alive(pid)).then_some(())
        });
    }
    margin
}

/// Stops everyone cleanly and checks their trees are gone.
fn stop_all(runners: Vec<Runner>) {
    let pids: Vec<i32> = runners
        .iter()
        .filter_map(|r| std::fs::read_to_string(&r.pids_file).ok())
        .flat_map(|t| {
            t.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<i32>>()
        })
        .collect();
    drop(runners);
    for pid in pids {
        eventually("every command gone", SOON, || (!alive(pid)).then_some(()));
    }
}

/// One case on a service that queues candidates (etcd, ZooKeeper): `a`
/// leads, `b` waits behind it (`candidates` counts the keys or znodes of
/// the election); `a` gets `blow`; at the end no candidate is left.
fn queued_case(
    backend: &str,
    blow: Blow,
    election: &str,
    flags: &[&str],
    candidates: impl Fn() -> usize,
) {
    let dir = scratch(&format!("{backend}-{}", election.trim_start_matches('/')));
    let start = |id: &str| {
        let mut cmd = Command::new(BIN);
        cmd.args(flags)
            .args(["--format", "json", "run", "--election", election])
            .args(["--id", id, "--ttl", "2s"])
            .env("RUST_LOG", "elect=debug,warn");
        runner(id, cmd, &dir)
    };
    let mut runners = vec![start("a")];
    runners[0].proc.wait_event("elected", SOON);
    runners.push(start("b"));
    eventually("b's candidacy", SOON, || (candidates() == 2).then_some(()));
    deal(&mut runners, 0, blow, backend);
    stop_all(runners);
    eventually("no candidacy left", SOON, || {
        (candidates() == 0).then_some(())
    });
}

#[test]
fn etcd_terminal_signals_and_kills_never_leave_a_command_behind_its_leadership() {
    let cluster = etcd::Cluster::start();
    for (i, blow) in BLOWS.into_iter().enumerate() {
        let election = format!("sig{i}");
        queued_case(
            "etcd",
            blow,
            &election,
            &["--endpoints", &cluster.endpoints],
            || cluster.candidates(&election).len(),
        );
    }
    eventually("no lease left", SOON, || {
        cluster.leases().is_empty().then_some(())
    });
}

#[test]
fn zk_terminal_signals_and_kills_never_leave_a_command_behind_its_leadership() {
    let ensemble = zk::Ensemble::start();
    for (i, blow) in BLOWS.into_iter().enumerate() {
        let election = format!("/sig{i}");
        let flags = ["--backend", "zk", "--endpoints", &ensemble.endpoints];
        queued_case("zk", blow, &election, &flags, || {
            ensemble.children(&election).len()
        });
    }
}

#[test]
fn raft_terminal_signals_and_kills_never_leave_a_command_behind_its_leadership() {
    for (i, blow) in BLOWS.into_iter().enumerate() {
        let cluster = raft::Cluster::new(3, "500ms");
        let dir = scratch(&format!("raft-sig{i}"));
        let mut runners: Vec<Runner> = cluster
            .ids
            .iter()
            .map(|id| runner(id, cluster.command(id, &["run"]), &dir))
            .collect();
        let (leader, _) = next_elected(&mut runners, usize::MAX);
        deal(&mut runners, leader, blow, "raft");
        stop_all(runners);
    }
}
