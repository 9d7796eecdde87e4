//! The supervisor driven by a `watch::Sender` by hand, with real processes
//! and the real watchdog (the `elect` binary).

use std::time::Duration;

use elect::supervise::{ChildConfig, ChildEnv, Finish, KILL_MARGIN, Restart, run};
use elect::{BootInstant, Leadership};
use nix::sys::signal::Signal;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

fn sh(script: &str) -> ChildConfig {
    ChildConfig::new(["sh", "-c", script]).unwrap()
}

fn env() -> ChildEnv {
    ChildEnv {
        election: "e".into(),
        backend: "test",
        period_start: None,
        watchdog: env!("CARGO_BIN_EXE_elect").into(),
    }
}

fn lead(token: u64, for_: Duration) -> Leadership {
    Leadership::elected("me".into(), token, BootInstant::now() + for_)
}

#[tokio::test]
async fn runs_only_while_leading_and_reports_exit() {
    let (tx, rx) = watch::channel(Leadership::unknown());
    let (busy, busy_rx) = elect::work::channel();
    let (_sig_tx, mut sigs) = mpsc::unbounded_channel();
    let cfg = sh("test \"$ELECT_FENCING_TOKEN\" = 7 && test \"$ELECT_LEADER_ID\" = me && exit 3");
    let env = env();
    let sup = run(&cfg, &env, rx, &busy, &mut sigs);
    tokio::pin!(sup);
    // Not leading: nothing runs.
    tokio::select! {
        _ = &mut sup => panic!("finished without leading"),
        _ = tokio::time::sleep(Duration::from_millis(100)) => {}
    }
    tx.send_replace(lead(7, Duration::from_secs(30)));
    assert_eq!(sup.await.unwrap(), Finish::Exited(3));
    assert!(!busy_rx.is_running());
}

#[tokio::test]
async fn demotion_kills_the_group_including_ignorers_by_the_deadline() {
    let (tx, rx) = watch::channel(lead(1, Duration::from_secs(30)));
    let (busy, mut busy_rx) = elect::work::channel();
    let (_sig_tx, mut sigs) = mpsc::unbounded_channel();
    // The grandchild ignores SIGTERM; only SIGKILL at the deadline ends
    // it, long before the 30 s grace would.
    let cfg = sh("trap '' TERM; sleep 1000 & wait")
        .with_grace(Duration::from_secs(30))
        .unwrap();
    let env = env();
    let task = async {
        busy_rx.started().await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut demoted = Leadership::unknown();
        let kill_by = BootInstant::now() + Duration::from_millis(300);
        demoted.deadline = Some(kill_by);
        tx.send_replace(demoted);
        busy_rx.stopped().await;
        let gone_at = BootInstant::now();
        assert!(
            gone_at >= kill_by - KILL_MARGIN,
            "killed before the deadline"
        );
        assert!(gone_at <= kill_by, "the tree outlived the deadline");
        assert!(
            gone_at < kill_by + Duration::from_secs(5),
            "killed by the grace, not the deadline"
        );
        drop(tx);
    };
    let (finish, ()) = tokio::join!(run(&cfg, &env, rx, &busy, &mut sigs), task);
    assert_eq!(finish.unwrap(), Finish::BackendGone);
}

#[tokio::test]
async fn an_unrenewed_deadline_stops_the_command_without_word_from_the_backend() {
    let (tx, rx) = watch::channel(lead(1, Duration::from_millis(300)));
    let (busy, mut busy_rx) = elect::work::channel();
    let (_sig_tx, mut sigs) = mpsc::unbounded_channel();
    let cfg = sh("sleep 1000");
    let env = env();
    let started = Instant::now();
    let task = async {
        busy_rx.started().await;
        busy_rx.stopped().await;
        assert!(started.elapsed() < Duration::from_secs(3));
        drop(tx);
    };
    let (finish, ()) = tokio::join!(run(&cfg, &env, rx, &busy, &mut sigs), task);
    assert_eq!(finish.unwrap(), Finish::BackendGone);
}

/// The promise on a busy machine: with every core taken by `stress-ng`
/// (and its fsync writer), a tree whose deadline is not renewed is dead
/// by that deadline, every time, at every level of containment this
/// machine has. Dead: gone or a zombie, as a thread of this test sees it
/// by polling the tree's processes (which can only make it look later
/// than it was).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tree_is_dead_by_the_deadline_on_a_busy_machine() {
    let _load = Load::start();
    let env = env();
    let mut late = Vec::new();
    let mut early = Vec::new();
    let mut tried = 0;
    for level in [
        elect::supervise::Level::PidNamespace,
        elect::supervise::Level::Subreaper,
    ] {
        let containment = elect::supervise::Containment::from(level);
        if containment.resolve(&env.watchdog).is_err() {
            eprintln!("{} is not available here; not tried", level.name());
            continue;
        }
        for _ in 0..15 {
            // Long enough to start the tree on a machine this busy.
            let deadline = BootInstant::now() + Duration::from_millis(600);
            let (tx, rx) = watch::channel(Leadership::elected("me".into(), 1, deadline));
            let (busy, mut busy_rx) = elect::work::channel();
            let (_sig_tx, mut sigs) = mpsc::unbounded_channel();
            // A tree that keeps forking and keeps a core busy, all of it
            // deaf to SIGTERM. The busy core matters: the watchdog shares
            // the command's session, and under the scheduler's autogroups
            // a session's CPU time is split by where its load is, so a
            // watchdog that sleeps on one core while its command spins on
            // another got almost none (it woke up to 300 ms late).
            let cfg = sh(
                "trap '' TERM; sleep 1000 & (while :; do sleep 0.01; done) & \
                          (while :; do :; done) & wait",
            )
            .with_containment(containment);
            let given_up = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let poller = std::thread::spawn({
                let given_up = given_up.clone();
                move || dead_at(&given_up)
            });
            let task = async {
                busy_rx.started().await;
                busy_rx.stopped().await;
                drop(tx);
            };
            let (finish, ()) = tokio::join!(run(&cfg, &env, rx, &busy, &mut sigs), task);
            finish.unwrap();
            given_up.store(true, std::sync::atomic::Ordering::Relaxed);
            let Some(dead) = poller.join().unwrap() else {
                eprintln!("the tree never started before its deadline");
                continue;
            };
            // How long before the deadline the tree was dead (negative:
            // after it).
            let early_ms = deadline.as_nanos() as f64 / 1e6 - dead.as_nanos() as f64 / 1e6;
            early.push((level, early_ms));
            late.push((level, dead.saturating_duration_since(deadline)));
            tried += 1;
        }
    }
    assert!(tried > 0, "no level of containment to try");
    for level in [
        elect::supervise::Level::PidNamespace,
        elect::supervise::Level::Subreaper,
    ] {
        let mut ms: Vec<f64> = early
            .iter()
            .filter(|(l, _)| *l == level)
            .map(|(_, ms)| *ms)
            .collect();
        ms.sort_by(f64::total_cmp);
        if let (Some(least), Some(most)) = (ms.first(), ms.last()) {
            eprintln!(
                "{}: dead {least:.1} to {most:.1} ms before the deadline (median {:.1}), {} trees",
                level.name(),
                ms[ms.len() / 2],
                ms.len()
            );
        }
    }
    let over: Vec<_> = late.iter().filter(|(_, by)| !by.is_zero()).collect();
    assert!(
        over.is_empty(),
        "trees that outlived their deadline: {over:?}"
    );
}

/// When the command's tree (this test's descendants named `sh` or
/// `sleep`: nextest runs each test in a process of its own), having
/// started, has nothing left that may run; polled every 200 us at the
/// priority the watchdog has (so the poller is no later than what it
/// measures). `None` if the tree never started.
fn dead_at(given_up: &std::sync::atomic::AtomicBool) -> Option<BootInstant> {
    // SAFETY: setpriority on this thread's id, plain integers.
    unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, -20) };
    let me = std::process::id() as i32;
    while running_commands(me) < 3 {
        if given_up.load(std::sync::atomic::Ordering::Relaxed) {
            return None;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    while running_commands(me) > 0 {
        std::thread::sleep(Duration::from_micros(200));
    }
    Some(BootInstant::now())
}

/// The watchdog and its guard wake before every ordinary process on a
/// busy machine; the command runs as it would without elect. Real time is
/// what holds across sessions: with the scheduler's autogroups a nice -20
/// watchdog in a session of its own, beside a command that kept a core
/// busy, woke up to 300 ms late under `elect compare --under-load`
/// (`process::take_precedence`). Needs `CAP_SYS_NICE`; without it,
/// nothing is raised and there is nothing to check.
#[tokio::test]
async fn the_watchdog_and_its_guard_run_real_time_and_the_command_does_not() {
    if !elect::supervise::real_time_allowed() {
        eprintln!("no CAP_SYS_NICE here: the watchdog cannot take a real-time priority");
        return;
    }
    let (tx, rx) = watch::channel(lead(1, Duration::from_secs(30)));
    let (busy, mut busy_rx) = elect::work::channel();
    let (_sig_tx, mut sigs) = mpsc::unbounded_channel();
    let cfg = sh("sleep 1000 & wait").with_containment(elect::supervise::Level::Subreaper.into());
    let env = env();
    let task = async {
        busy_rx.started().await;
        let me = std::process::id() as i32;
        let found = eventually(Duration::from_secs(10), || {
            let tree = scheduling_of_descendants(me);
            let of = |pick: &dyn Fn(&str) -> bool| {
                tree.iter()
                    .find(|(cmdline, _)| pick(cmdline))
                    .map(|(_, s)| *s)
            };
            Some((
                of(&|c| c.contains("__watchdog"))?,
                of(&|c| c.contains("__guard"))?,
                of(&|c| c.starts_with("sleep"))?,
            ))
        })
        .await;
        let (watchdog, guard, command) = found.expect("the watchdog, its guard and the command");
        const SCHED_OTHER: u32 = 0;
        const SCHED_FIFO: u32 = 1;
        assert_eq!(watchdog.0, SCHED_FIFO, "the watchdog's policy");
        assert_eq!(guard.0, SCHED_FIFO, "the guard's policy");
        // SAFETY: getpriority takes plain integers.
        let ours = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) } as i64;
        assert_eq!(
            command,
            (SCHED_OTHER, ours),
            "the command's policy and nice"
        );
        drop(tx);
    };
    let (finish, ()) = tokio::join!(run(&cfg, &env, rx, &busy, &mut sigs), task);
    assert_eq!(finish.unwrap(), Finish::BackendGone);
}

/// Every live descendant of `root`: its command line, and its scheduling
/// policy and nice value from `/proc/PID/stat`.
fn scheduling_of_descendants(root: i32) -> Vec<(String, (u32, i64))> {
    elect_lab::process::descendants(root)
        .into_iter()
        .filter_map(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
                .ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // Fields from the state on (field 3): nice is field 19, the
            // policy field 41.
            let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
            let nice = fields.get(16)?.parse().ok()?;
            let policy = fields.get(38)?.parse().ok()?;
            Some((cmdline, (policy, nice)))
        })
        .collect()
}

/// Probes every 10 ms until `probe` returns `Some`, for at most `within`,
/// sleeping between probes without holding the thread.
///
/// The supervisor and the checks run as one task (`tokio::join!`): the
/// supervisor says the work has started just before it spawns the
/// watchdog, and yields there. A check that then blocked its thread while
/// it waited for the watchdog (as `elect_lab::poll` does) would hold up
/// the very spawn it waits for: CI saw a tree never appear, whenever the
/// join polled the check right after that yield.
async fn eventually<T>(within: Duration, mut probe: impl FnMut() -> Option<T>) -> Option<T> {
    let until = Instant::now() + within;
    loop {
        if let Some(found) = probe() {
            return Some(found);
        }
        if Instant::now() >= until {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// How many descendants of `root` named `sh` or `sleep` live (zombies do
/// not count).
fn running_commands(root: i32) -> usize {
    elect_lab::process::descendants(root)
        .into_iter()
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|name| matches!(name.trim_end(), "sh" | "sleep"))
        })
        .count()
}

/// `stress-ng` on every core, CPU and fsync (the lab's load), for as
/// long as it is held; nothing where stress-ng is missing, except in CI.
struct Load(#[allow(dead_code)] Option<elect_lab::load::Held>);

impl Load {
    fn start() -> Load {
        let dir = std::env::temp_dir().join(format!("elect-load-{}", std::process::id()));
        match elect_lab::load::Held::start(&dir) {
            Ok(held) => Load(Some(held)),
            Err(e) => {
                assert!(
                    std::env::var_os("CI").is_none(),
                    "stress-ng is needed in CI (deploy/test.sh installs it): {e}"
                );
                eprintln!("no stress-ng ({e}): the machine is only as busy as it is");
                Load(None)
            }
        }
    }
}

#[tokio::test]
async fn a_new_token_restarts_the_command() {
    let (tx, rx) = watch::channel(lead(1, Duration::from_secs(30)));
    let (busy, mut busy_rx) = elect::work::channel();
    let (_sig_tx, mut sigs) = mpsc::unbounded_channel();
    let cfg = sh("test \"$ELECT_FENCING_TOKEN\" = 2 && exit 0; sleep 1000");
    let env = env();
    let task = async {
        busy_rx.started().await;
        tx.send_replace(lead(2, Duration::from_secs(30)));
    };
    let (finish, ()) = tokio::join!(run(&cfg, &env, rx, &busy, &mut sigs), task);
    assert_eq!(finish.unwrap(), Finish::Exited(0));
}

#[tokio::test]
async fn signals_are_forwarded_and_the_code_is_128_plus_n() {
    let (_tx, rx) = watch::channel(lead(1, Duration::from_secs(30)));
    let (busy, mut busy_rx) = elect::work::channel();
    let (sig_tx, mut sigs) = mpsc::unbounded_channel();
    let cfg = sh("exec sleep 1000");
    let env = env();
    let task = async {
        busy_rx.started().await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        sig_tx.send(Signal::SIGTERM).unwrap();
    };
    let (finish, ()) = tokio::join!(run(&cfg, &env, rx, &busy, &mut sigs), task);
    assert_eq!(finish.unwrap(), Finish::Exited(128 + 15));
}

#[tokio::test]
async fn a_command_that_cannot_start_exits_127() {
    let (_tx, rx) = watch::channel(lead(1, Duration::from_secs(30)));
    let (busy, _busy_rx) = elect::work::channel();
    let (_sig_tx, mut sigs) = mpsc::unbounded_channel();
    let cfg = ChildConfig::new(["/nonexistent/command"]).unwrap();
    assert_eq!(
        run(&cfg, &env(), rx, &busy, &mut sigs).await.unwrap(),
        Finish::Exited(127)
    );
}

/// Counts the lines a command appended to a file.
fn runs(path: &std::path::Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |t| t.lines().count())
}

#[tokio::test]
async fn on_failure_restarts_a_failing_command_with_backoff_and_stops_on_success() {
    let (_tx, rx) = watch::channel(lead(1, Duration::from_secs(60)));
    let (busy, _busy_rx) = elect::work::channel();
    let (_sig_tx, mut sigs) = mpsc::unbounded_channel();
    let dir = std::env::temp_dir().join(format!("elect-restart-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("runs");
    // Fails twice, then succeeds.
    let cfg = sh(&format!(
        "echo run >> {0}; test $(wc -l < {0}) -ge 3 || exit 5",
        log.display()
    ));
    let cfg = cfg.with_restart(Restart::OnFailure);
    let started = Instant::now();
    let finish = run(&cfg, &env(), rx, &busy, &mut sigs).await.unwrap();
    assert_eq!(finish, Finish::Exited(0));
    assert_eq!(runs(&log), 3);
    // Backoff: 100 ms, then 200 ms.
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "{:?}",
        started.elapsed()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn always_restarts_until_sigterm_which_is_forwarded_and_ends_it() {
    let (_tx, rx) = watch::channel(lead(1, Duration::from_secs(60)));
    let (busy, mut busy_rx) = elect::work::channel();
    let (sig_tx, mut sigs) = mpsc::unbounded_channel();
    let dir = std::env::temp_dir().join(format!("elect-always-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("runs");
    let cfg = sh(&format!(
        "trap 'exit 0' TERM; echo run >> {0}; sleep 0.05 & wait",
        log.display()
    ));
    let cfg = cfg.with_restart(Restart::Always);
    let task = async {
        for _ in 0..3 {
            busy_rx.started().await;
            busy_rx.stopped().await;
        }
        busy_rx.started().await;
        // The fourth run has set its trap once it has written its line.
        while runs(&log) < 4 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        sig_tx.send(Signal::SIGTERM).unwrap();
    };
    let env = env();
    let (finish, ()) = tokio::join!(run(&cfg, &env, rx, &busy, &mut sigs), task);
    assert_eq!(finish.unwrap(), Finish::Exited(0));
    assert!(runs(&log) >= 4, "{} runs", runs(&log));
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn usr1_usr2_reach_the_command_and_hup_quit_term_stop_it() {
    let (_tx, rx) = watch::channel(lead(1, Duration::from_secs(60)));
    let (busy, mut busy_rx) = elect::work::channel();
    let (sig_tx, mut sigs) = mpsc::unbounded_channel();
    let dir = std::env::temp_dir().join(format!("elect-fwd-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("signals");
    let cfg = sh(&format!(
        "for s in HUP QUIT USR1 USR2; do trap \"echo $s >> {0}\" $s; done; \
         trap 'exit 9' TERM; touch {0}.ready; while :; do sleep 0.01; done",
        log.display()
    ));
    let ready = dir.join("signals.ready");
    let task = async {
        busy_rx.started().await;
        // Every trap is set once the command has said so.
        while !ready.exists() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // USR1 and USR2 are only forwarded; HUP and QUIT stop the command
        // (it ignores them here), and each reaches it; TERM ends it.
        for sig in [
            Signal::SIGUSR1,
            Signal::SIGUSR2,
            Signal::SIGHUP,
            Signal::SIGQUIT,
        ] {
            sig_tx.send(sig).unwrap();
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        sig_tx.send(Signal::SIGTERM).unwrap();
    };
    let env = env();
    let (finish, ()) = tokio::join!(run(&cfg, &env, rx, &busy, &mut sigs), task);
    assert_eq!(finish.unwrap(), Finish::Exited(9));
    let seen = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        seen.split_whitespace().collect::<Vec<_>>(),
        ["USR1", "USR2", "HUP", "QUIT"]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn exit_on_loss_ends_supervision_once_the_command_is_dead() {
    let (tx, rx) = watch::channel(lead(1, Duration::from_secs(60)));
    let (busy, mut busy_rx) = elect::work::channel();
    let (_sig_tx, mut sigs) = mpsc::unbounded_channel();
    let cfg = sh("sleep 1000");
    let cfg = cfg.with_exit_on_loss(true);
    let task = async {
        busy_rx.started().await;
        tx.send_replace(Leadership::unknown());
        busy_rx.stopped().await;
        // Leading again must not start anything: supervision is over.
        tx.send_replace(lead(2, Duration::from_secs(60)));
    };
    let env = env();
    let (finish, ()) = tokio::join!(run(&cfg, &env, rx, &busy, &mut sigs), task);
    assert_eq!(finish.unwrap(), Finish::Lost);
    assert!(!busy_rx.is_running());
}

/// A SIGTERM that elect forwards the moment the command has started, in a
/// PID namespace, before the namespace's init is ready for signals: it
/// used to be dropped (an init drops what it has no handler for), and the
/// command ran on until the grace was over. It waits for the init now.
#[tokio::test]
async fn a_sigterm_at_once_reaches_a_command_in_a_pid_namespace() {
    let env = env();
    let level = elect::supervise::Level::PidNamespace;
    let containment = elect::supervise::Containment::from(level);
    if containment.resolve(&env.watchdog).is_err() {
        eprintln!("{} is not available here; not tried", level.name());
        return;
    }
    for _ in 0..10 {
        let (_tx, rx) = watch::channel(lead(1, Duration::from_secs(60)));
        let (busy, mut busy_rx) = elect::work::channel();
        let (sig_tx, mut sigs) = mpsc::unbounded_channel();
        let cfg = sh("sleep 1000")
            .with_grace(Duration::from_secs(30))
            .unwrap()
            .with_containment(containment);
        let sent = std::sync::OnceLock::new();
        let task = async {
            busy_rx.started().await;
            sent.set(Instant::now()).unwrap();
            sig_tx.send(Signal::SIGTERM).unwrap();
        };
        let (finish, ()) = tokio::join!(run(&cfg, &env, rx, &busy, &mut sigs), task);
        let took = sent.get().unwrap().elapsed();
        assert_eq!(finish.unwrap(), Finish::Exited(128 + 15));
        assert!(
            took < Duration::from_secs(10),
            "the command ended {took:?} after the SIGTERM, not at once"
        );
    }
}

/// A child of the watchdog that has exited but cannot be reaped yet: the
/// watchdog must sleep until it can be, not spin. The watchdog runs at a
/// real-time priority, so a spin starves every process of normal
/// priority on its core, other watchdogs' kills included (the soak found
/// it: a watchdog spun for minutes, and a demoted leader's command on the
/// same core outlived its deadline).
/// - `pidns`: a killed init exits only once every process of its
///   namespace has been reaped, and has closed its report pipe meanwhile;
///   the soak's case was a tree member in an uninterruptible sleep on a
///   loaded disk. The watchdog polled the pipe at its end.
/// - `subreaper`: the command's zombie, held by a tracer (`strace -f` on
///   elect follows into the command) while the rest of its group lives.
///   The watchdog polled the command's pidfd, ready and never reaped.
///
/// Here a tracer holds a zombie: the command's, with the init killed under
/// `pidns`; the command itself killed under `subreaper`.
// Two workers: the checks below block one (polling /proc, joining the
// tracer) while the supervisor runs on the other. One test per level:
// each in a process of its own, as nextest runs them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_sleeps_while_a_child_cannot_be_reaped_pidns() {
    sleeps_while_a_child_cannot_be_reaped(elect::supervise::Level::PidNamespace).await;
}

/// See [`the_watchdog_sleeps_while_a_child_cannot_be_reaped_pidns`].
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_sleeps_while_a_child_cannot_be_reaped_subreaper() {
    sleeps_while_a_child_cannot_be_reaped(elect::supervise::Level::Subreaper).await;
}

async fn sleeps_while_a_child_cannot_be_reaped(level: elect::supervise::Level) {
    let env = env();
    let containment = elect::supervise::Containment::from(level);
    if containment.resolve(&env.watchdog).is_err() {
        eprintln!("{} is not available here: nothing to check", level.name());
        return;
    }
    let pidns = level == elect::supervise::Level::PidNamespace;
    let (tx, rx) = watch::channel(lead(1, Duration::from_secs(60)));
    let (busy, mut busy_rx) = elect::work::channel();
    let (_sig_tx, mut sigs) = mpsc::unbounded_channel();
    let cfg = sh("sleep 1000 & exec sleep 1001").with_containment(containment);
    let task = async {
        busy_rx.started().await;
        let me = std::process::id() as i32;
        let tree = eventually(Duration::from_secs(10), || {
            let pid_of = |pick: &dyn Fn(&str) -> bool| {
                elect_lab::process::descendants(me).into_iter().find(|pid| {
                    std::fs::read(format!("/proc/{pid}/cmdline"))
                        .is_ok_and(|b| pick(&String::from_utf8_lossy(&b).replace('\0', " ")))
                })
            };
            Some((
                pid_of(&|c| c.contains("__watchdog"))?,
                if pidns {
                    pid_of(&|c| c.contains("__init"))?
                } else {
                    0
                },
                pid_of(&|c| c.starts_with("sleep 1001"))?,
                pid_of(&|c| c.starts_with("sleep 1000"))?,
            ))
        })
        .await;
        let (watchdog, init, command, _) = tree.unwrap_or_else(|| {
            panic!(
                "{}: the watchdog, the init and the command: {:?}",
                level.name(),
                scheduling_of_descendants(me)
            )
        });
        // The tracer is one thread: it seizes the command, and, once the
        // watchdog has been measured, reaps its zombie, which lets the
        // watchdog (or the init's exit) go on.
        let (measured, wait_measured) = std::sync::mpsc::channel::<()>();
        let (seized, wait_seized) = std::sync::mpsc::channel::<bool>();
        let tracer = std::thread::spawn(move || {
            // SAFETY: plain ptrace requests on a pid; no memory is passed.
            let ok = unsafe { libc::ptrace(libc::PTRACE_SEIZE, command, 0, 0) == 0 };
            seized.send(ok).unwrap();
            if ok {
                let _ = wait_measured.recv();
                let mut status = 0;
                // SAFETY: waitpid on the tracee, status into a local.
                unsafe { libc::waitpid(command, &mut status, libc::__WALL) };
            }
        });
        if !wait_seized.recv().unwrap() {
            eprintln!("ptrace is not allowed here: nothing to check");
        } else {
            let victim = if pidns { init } else { command };
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(victim), Signal::SIGKILL).unwrap();
            // The kill has landed once the command is a zombie the tracer
            // holds: from then on nothing the watchdog polls is news.
            eventually(Duration::from_secs(10), || {
                std::fs::read_to_string(format!("/proc/{command}/stat"))
                    .ok()
                    .filter(|s| {
                        s.rsplit_once(')')
                            .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
                    })
            })
            .await
            .expect("the command a zombie held by its tracer");
            let before = elect_lab::process::cpu_ticks(watchdog).unwrap();
            tokio::time::sleep(Duration::from_secs(1)).await;
            let used = elect_lab::process::cpu_ticks(watchdog).unwrap() - before;
            // SAFETY: sysconf takes a constant.
            let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
            eprintln!(
                "{}: the watchdog used {used} of {per_second} clock ticks in that second",
                level.name()
            );
            assert!(
                used < per_second / 4,
                "{}: the watchdog used {used} of {per_second} clock ticks in a second while a \
                 child could not be reaped: it spins",
                level.name()
            );
        }
        drop(measured);
        tracer.join().unwrap();
        if !pidns {
            // What the command left behind gets the grace, then goes.
            drop(tx);
        }
        busy_rx.stopped().await;
    };
    let (finish, ()) = tokio::join!(run(&cfg, &env, rx, &busy, &mut sigs), task);
    finish.unwrap();
}
