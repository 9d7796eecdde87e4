//! The process edge, on all three backends against real ensembles, under
//! every containment level the machine gives: a foreground `elect run`
//! whose whole process group gets what a terminal or a shell sends
//! (Ctrl-C, Ctrl-\, Ctrl-Z as `kill -SIG -- -PGID` from outside the
//! group), the group SIGKILLed, the watchdog alone SIGKILLed, or every
//! process of `elect`'s SIGKILLed at once. The command's tree (the command,
//! its child, a process that moved to a group of its own and a daemon that
//! left the session) is dead before any successor reports `elected`,
//! except where the level's documented guarantee says otherwise (then
//! what it says is what happens), and nothing is left behind.

mod support;

use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use support::elect::{BIN, Proc};
use support::proc::{DeathWatch, TREE, alive, descendants, read_pids, scratch, tree_script};
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
    /// SIGKILL to the watchdog while its guard (or the namespace's init)
    /// is stopped: elect alone must kill the tree, the cgroup included,
    /// and see it dead before it resigns.
    KillWatchdogGuardStopped,
    /// SIGKILL to elect, its watchdog and the guard (or the namespace's
    /// init) at once, as `pkill -9` or an OOM kill of their cgroup would.
    KillAll,
}

impl Blow {
    fn name(self) -> &'static str {
        match self {
            Blow::Key(key, _) => key,
            Blow::KillGroup => "kill -9 -- -PGID",
            Blow::KillWatchdog => "kill -9 <watchdog>",
            Blow::KillWatchdogGuardStopped => "kill -9 <watchdog>, its guard stopped",
            Blow::KillAll => "kill -9 <every elect process>",
        }
    }

    /// Which processes of the tree (indices into `TREE`) the level's
    /// documented guarantee leaves alive after this blow: `pidns` none;
    /// without the watchdog, `subreaper`'s guard kills only the command's
    /// group; with every `elect` process gone only the command's own
    /// parent-death signal fires.
    fn survivors(self, level: &str) -> &'static [usize] {
        match (level, self) {
            ("subreaper", Blow::KillWatchdog | Blow::KillWatchdogGuardStopped) => &[2, 3],
            ("cgroup" | "subreaper", Blow::KillAll) => &[1, 2, 3],
            _ => &[],
        }
    }
}

const BLOWS: [Blow; 7] = [
    Blow::Key("Ctrl-C", Signal::SIGINT),
    Blow::Key("Ctrl-\\", Signal::SIGQUIT),
    Blow::Key("Ctrl-Z", Signal::SIGTSTP),
    Blow::KillGroup,
    Blow::KillWatchdog,
    Blow::KillWatchdogGuardStopped,
    Blow::KillAll,
];

/// Every blow under every containment level the machine gives.
fn cases() -> Vec<(&'static str, Blow)> {
    support::containment_levels()
        .into_iter()
        .flat_map(|level| BLOWS.map(|blow| (level, blow)))
        .collect()
}

/// One participant: `elect run` in a process group of its own, as a shell
/// starts a foreground job, wrapping a two-process tree.
struct Runner {
    proc: Proc,
    pids_file: std::path::PathBuf,
}

/// Starts `elect <args> run --contain <level> --grace 1s -- sh -c <tree>`
/// as its own group.
fn runner(name: &str, mut cmd: Command, dir: &std::path::Path, level: &str) -> Runner {
    let pids_file = dir.join(format!("{name}.pids"));
    cmd.args(["--contain", level, "--grace", "1s", "--", "sh", "-c"])
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
/// successor is elected (but for what the level leaves alive, which must
/// still live then and is killed here); returns how long before.
fn deal(runners: &mut [Runner], leader: usize, blow: Blow, backend: &str, level: &str) -> Duration {
    let pids = read_pids(&runners[leader].pids_file, TREE.len());
    let elect_pid = runners[leader].proc.pid();
    let watchdog = eventually("the watchdog", SOON, || {
        descendant_with_arg(elect_pid, "__watchdog")
    });
    // The namespace's init dies with the watchdog; elsewhere a guard does.
    let helper = if level == "pidns" {
        "__init"
    } else {
        "__guard"
    };
    let helper = eventually(&format!("the {helper}"), SOON, || {
        descendant_with_arg(watchdog, helper)
    });
    let survivors = blow.survivors(level);
    let (doomed, spared): (Vec<_>, Vec<_>) = pids
        .iter()
        .enumerate()
        .partition(|(i, _)| !survivors.contains(i));
    let doomed: Vec<i32> = doomed.into_iter().map(|(_, p)| *p).collect();
    let deaths = DeathWatch::start(doomed.clone(), SOON);
    let group = Pid::from_raw(elect_pid);
    match blow {
        Blow::Key(_, sig) => killpg(group, sig).unwrap(),
        Blow::KillGroup => killpg(group, Signal::SIGKILL).unwrap(),
        Blow::KillWatchdog => support::signal_pid(watchdog, Signal::SIGKILL),
        Blow::KillWatchdogGuardStopped => {
            support::signal_pid(helper, Signal::SIGSTOP);
            support::signal_pid(watchdog, Signal::SIGKILL);
        }
        Blow::KillAll => {
            // At once: each of them, given a moment, would act on another's
            // death; stopped first, none can.
            for sig in [Signal::SIGSTOP, Signal::SIGKILL] {
                for pid in [helper, watchdog, elect_pid] {
                    support::signal_pid(pid, sig);
                }
            }
        }
    }
    let (_, elected_at) = next_elected(runners, leader);
    let died = deaths.join();
    if let Blow::KillWatchdogGuardStopped = blow {
        // Let it go: it finds nothing left to kill.
        support::signal_pid(helper, Signal::SIGCONT);
    }
    for (pid, at) in doomed.iter().zip(&died) {
        let whose = TREE[pids.iter().position(|p| p == pid).unwrap()];
        assert!(
            *at < elected_at,
            "{level}, {}: the {whose} died {:?} after a successor was elected",
            blow.name(),
            *at - elected_at
        );
    }
    let mut cgroups = Vec::new();
    for (i, pid) in spared {
        assert!(
            alive(*pid),
            "{level}, {}: the {} was expected to survive, as documented",
            blow.name(),
            TREE[i]
        );
        cgroups.extend(cgroup_dir_of(*pid));
        support::signal_pid(*pid, Signal::SIGKILL);
    }
    // With every elect process gone nobody removes the command's cgroup:
    // the test does, once its survivors are dead.
    for dir in cgroups.iter().filter(|d| {
        d.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("elect-"))
    }) {
        eventually("the survivors' cgroup removed", SOON, || {
            std::fs::remove_dir(dir)
                .is_ok()
                .then_some(())
                .or_else(|| (!dir.exists()).then_some(()))
        });
    }
    let margin = elected_at - *died.iter().max().unwrap();
    eprintln!(
        "{backend} {level} {}: tree dead {margin:?} before the successor's election{}",
        blow.name(),
        if survivors.is_empty() {
            ""
        } else {
            " (but for the documented survivors)"
        }
    );
    let code = runners[leader].proc.wait_exit(SOON);
    let expected = match blow {
        // elect exits with the command's code: sh dies of the forwarded
        // signal (Ctrl-Z's SIGTSTP is forwarded as SIGTERM).
        Blow::Key(_, Signal::SIGTSTP) => 128 + 15,
        Blow::Key(_, sig) => 128 + sig as i32,
        Blow::KillGroup | Blow::KillAll => 128 + 9,
        Blow::KillWatchdog | Blow::KillWatchdogGuardStopped => 1,
    };
    assert_eq!(
        code,
        expected,
        "{blow:?}: elect's exit; stderr:\n{}",
        runners[leader].proc.stderr()
    );
    for (what, pid) in [("watchdog", watchdog), ("guard or init", helper)] {
        eventually(&format!("the {what} gone"), SOON, || {
            (!alive(pid)).then_some(())
        });
    }
    margin
}

/// The cgroup v2 directory `pid` is in: the `0::` line of its
/// `/proc/<pid>/cgroup` below where cgroup2 is mounted.
fn cgroup_dir_of(pid: i32) -> Option<std::path::PathBuf> {
    let own = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let path = own.lines().find_map(|l| l.strip_prefix("0::"))?;
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mount = mounts.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        let fields: Vec<&str> = left.split_whitespace().collect();
        (right.starts_with("cgroup2 ") && fields.get(3) == Some(&"/")).then(|| fields[4].to_owned())
    })?;
    Some(std::path::Path::new(&mount).join(path.trim_start_matches('/')))
}

/// Stops everyone cleanly and checks their trees are gone (the one `dealt`
/// a blow is already checked).
fn stop_all(runners: Vec<Runner>, dealt: usize) {
    let pids: Vec<i32> = runners
        .iter()
        .enumerate()
        .filter(|(i, r)| *i != dealt && r.pids_file.exists())
        .flat_map(|(_, r)| read_pids(&r.pids_file, TREE.len()))
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
    (level, blow): (&str, Blow),
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
        runner(id, cmd, &dir, level)
    };
    let mut runners = vec![start("a")];
    runners[0].proc.wait_event("elected", SOON);
    runners.push(start("b"));
    eventually("b's candidacy", SOON, || (candidates() == 2).then_some(()));
    deal(&mut runners, 0, blow, backend, level);
    stop_all(runners, 0);
    eventually("no candidacy left", SOON, || {
        (candidates() == 0).then_some(())
    });
}

#[test]
fn etcd_terminal_signals_and_kills_never_leave_a_command_behind_its_leadership() {
    let cluster = etcd::Cluster::start();
    for (i, case) in cases().into_iter().enumerate() {
        let election = format!("sig{i}");
        queued_case(
            "etcd",
            case,
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
    for (i, case) in cases().into_iter().enumerate() {
        let election = format!("/sig{i}");
        let flags = ["--backend", "zk", "--endpoints", &ensemble.endpoints];
        queued_case("zk", case, &election, &flags, || {
            ensemble.children(&election).len()
        });
    }
}

#[test]
fn raft_terminal_signals_and_kills_never_leave_a_command_behind_its_leadership() {
    for (i, (level, blow)) in cases().into_iter().enumerate() {
        let cluster = raft::Cluster::new(3, "500ms");
        let dir = scratch(&format!("raft-sig{i}"));
        let mut runners: Vec<Runner> = cluster
            .ids
            .iter()
            .map(|id| runner(id, cluster.command(id, &["run"]), &dir, level))
            .collect();
        let (leader, _) = next_elected(&mut runners, usize::MAX);
        deal(&mut runners, leader, blow, "raft", level);
        stop_all(runners, leader);
    }
}
