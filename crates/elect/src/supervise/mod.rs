//! Running a command only while this process leads.
//!
//! The supervisor reads [`Leadership`] snapshots and nothing else: it starts
//! the command when a snapshot says we lead, and stops its whole process
//! group when a snapshot says we no longer do, when the fencing token
//! changes, or when the leadership deadline passes without a renewal, even
//! if the backend has said nothing (it may be stuck). SIGKILL lands no later
//! than the deadline whatever `--grace` says.
//!
//! The command runs under a watchdog process (`elect __watchdog`), in a
//! session of its own, that holds the deadline itself, so a frozen or
//! killed `elect` still cannot outlive its leadership through the command.
//!
//! # Who can reach the command's tree
//!
//! The command must never outlive our leadership, whatever happens to
//! `elect`, the watchdog or their process group:
//!
//! - **Own session.** `elect` starts the watchdog with `setsid()`, so the
//!   watchdog and the command live in a session of their own with no
//!   controlling terminal. A terminal's Ctrl-C, Ctrl-\ and Ctrl-Z, a
//!   hang-up, and `kill -SIG -- -PGID` aimed at `elect`'s group reach
//!   `elect` alone, which handles them deliberately (stop the command, wait
//!   for its group to die, then resign). The watchdog also ignores the
//!   keyboard, hang-up, termination and job-control signals, so only
//!   SIGKILL (or SIGSTOP sent to its pid by hand) can stop it.
//! - **`elect` gone.** End of file on fd 3 means `elect` died or was
//!   killed: the watchdog sends SIGTERM to the group and SIGKILL within
//!   `min(grace, 1 s)`, never after the deadline. `elect` did not resign,
//!   so nobody else can be elected before that deadline.
//! - **Watchdog gone.** The command runs with `PR_SET_PDEATHSIG` = SIGKILL
//!   bound to the watchdog, and a **guard** process (`elect __guard`, also
//!   in a session of its own and deaf to every catchable signal) holds the
//!   other end of a pipe only the watchdog writes to: when the watchdog
//!   dies, the pipe closes and the guard SIGKILLs the command's whole group.
//!   `elect` sees the watchdog end by a signal and kills the group too
//!   before it resigns.
//! - **Both gone** (e.g. `pkill -9 -x elect` hitting `elect` and the
//!   watchdog together): the guard still kills the group.
//! - **The command leaves its group** (`setsid`, `setpgid`, a program that
//!   daemonizes itself): [containment](contain) holds the whole tree, not
//!   the group. Under `pidns` (a PID namespace whose init dies with the
//!   watchdog) nothing of the tree outlives the watchdog, whatever kills
//!   it and everything else of `elect`'s; `cgroup` and `subreaper` hold
//!   it while the watchdog (and, for `cgroup`, the guard) lives. The table
//!   in [`contain`] says which deaths and escapes each level survives; the
//!   fencing token is the defence beyond them.
//!
//!
//! # Embedding
//!
//! [`run`] starts the watchdog by executing [`ChildEnv::watchdog`] with a
//! hidden first argument. A host binary other than `elect` must therefore
//! hand those invocations over before doing anything else, as the first
//! lines of its `main`:
//!
//! ```no_run
//! // First thing in main():
//! if let Some(code) = elect::supervise::dispatch_hidden() {
//!     std::process::exit(code);
//! }
//! // ... then the program itself, which may call elect::supervise::run
//! // with ChildEnv::watchdog = std::env::current_exe()
//! ```
//!
//! `examples/run_while_leading.rs` is a whole program that does so.
//!
//! It reports on a [`Work`] whether the command's group
//! is alive, so the backend can hold on to what keeps successors out until
//! the work is gone.

pub(crate) mod child;
pub mod contain;
pub(crate) mod init;
mod process;
pub(crate) mod watchdog;

pub use contain::{Containment, Level, Resolved};
pub use process::real_time_allowed;
pub use watchdog::KILL_MARGIN;

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, sleep_until};
use tracing::{info, warn};

use crate::clock::MAX_DURATION;
use crate::clock::{self, BootInstant};
use crate::error::{Error, Result};
use crate::leadership::Leadership;
use crate::work::Work;
use child::{Child, Ended};

/// The command [`run`] wraps, and how. Built with [`ChildConfig::new`] and
/// the `with_*` methods, which check every value.
#[derive(Debug, Clone)]
pub struct ChildConfig {
    command: Vec<OsString>,
    grace: Duration,
    restart: Restart,
    exit_on_loss: bool,
    containment: Containment,
}

/// The grace unless one is set.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(5);

impl ChildConfig {
    /// The program and its arguments, passed to `execve` as they are (not
    /// necessarily UTF-8). Grace 5 s, no restart, campaign again after a
    /// loss.
    ///
    /// Errors: [`Error::Config`] naming `command` when it is empty.
    pub fn new<I, S>(command: I) -> Result<Self>
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        let command: Vec<OsString> = command.into_iter().map(Into::into).collect();
        if command.first().is_none_or(|program| program.is_empty()) {
            return Err(Error::config("command", "the command to run is empty"));
        }
        Ok(ChildConfig {
            command,
            grace: DEFAULT_GRACE,
            restart: Restart::Never,
            exit_on_loss: false,
            containment: Containment::Auto,
        })
    }

    /// Time between SIGTERM and SIGKILL when leadership is lost; never
    /// extends past the leadership deadline.
    ///
    /// Errors: [`Error::Config`] naming `grace` above 24 h.
    pub fn with_grace(mut self, grace: Duration) -> Result<Self> {
        if grace > MAX_DURATION {
            return Err(Error::config("grace", "must be at most 24h"));
        }
        self.grace = grace;
        Ok(self)
    }

    /// Whether a command that exits while we lead is started again.
    pub fn with_restart(mut self, restart: Restart) -> Self {
        self.restart = restart;
        self
    }

    /// Stop supervising once leadership is lost (and the command is dead)
    /// instead of waiting to lead again.
    pub fn with_exit_on_loss(mut self, exit_on_loss: bool) -> Self {
        self.exit_on_loss = exit_on_loss;
        self
    }

    /// How the command's whole tree is held (see [`contain`] for what each
    /// level survives); [`run`] resolves it once, at its start.
    pub fn with_containment(mut self, containment: Containment) -> Self {
        self.containment = containment;
        self
    }

    /// The containment asked for.
    pub fn containment(&self) -> Containment {
        self.containment
    }

    /// The program and its arguments.
    pub fn command(&self) -> &[OsString] {
        &self.command
    }

    /// Time between SIGTERM and SIGKILL.
    pub fn grace(&self) -> Duration {
        self.grace
    }
}

/// What happens when the command exits while we lead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restart {
    /// Supervision ends with the command's code (and `elect run` resigns).
    Never,
    /// Start it again, with backoff, if it exited with a non-zero code or
    /// by a signal.
    OnFailure,
    /// Start it again, with backoff, whatever its code.
    Always,
}

impl Restart {
    /// Whether a command that exited with `code` is started again.
    pub fn restarts(self, code: i32) -> bool {
        match self {
            Restart::Never => false,
            Restart::OnFailure => code != 0,
            Restart::Always => true,
        }
    }
}

/// Why supervision ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    /// The command exited by itself (or after a forwarded signal) while we
    /// led; its exit code, 128+N for signal N.
    Exited(i32),
    /// A shutdown signal arrived while no command was running.
    Signalled(Signal),
    /// The backend stopped publishing.
    BackendGone,
    /// Leadership was lost and `--exit-on-loss` asked to stop there; the
    /// command's group is dead.
    Lost,
    /// The watchdog was killed (by signal N); the command's group has been
    /// killed from here and is gone. Nothing supervises a command any more,
    /// so this ends supervision.
    WatchdogKilled(i32),
}

/// The signals that end `elect run` (and `campaign`, `observe`): SIGINT,
/// SIGTERM, SIGQUIT, SIGHUP (a terminal's Ctrl-C, Ctrl-\\, hang-up) and
/// SIGTSTP (Ctrl-Z: a leader that stopped would keep a leadership it cannot
/// use, so it stops the work and resigns instead). The others (SIGUSR1,
/// SIGUSR2) are only forwarded.
pub fn is_shutdown(sig: Signal) -> bool {
    matches!(
        sig,
        Signal::SIGINT | Signal::SIGTERM | Signal::SIGQUIT | Signal::SIGHUP | Signal::SIGTSTP
    )
}

/// The signal the command's group gets for a shutdown signal `elect`
/// received: the same one, except that Ctrl-Z's SIGTSTP becomes SIGTERM (a
/// stopped command would outlive our leadership).
pub fn forwarded(sig: Signal) -> Signal {
    match sig {
        Signal::SIGTSTP => Signal::SIGTERM,
        other => other,
    }
}

/// Hands over the hidden subcommands of the watchdog and its guard, which
/// [`run`] starts by executing the host binary again: call it first in
/// `main` and exit with the code it returns, if any.
pub fn dispatch_hidden() -> Option<i32> {
    let args: Vec<OsString> = std::env::args_os().collect();
    let which = args.get(1)?;
    if which == watchdog::SUBCOMMAND {
        Some(watchdog::main(&args[2..]))
    } else if which == watchdog::GUARD_SUBCOMMAND {
        Some(watchdog::guard_main(&args[2..]))
    } else if which == init::SUBCOMMAND {
        Some(init::main(&args[2..]))
    } else if which == contain::PROBE_SUBCOMMAND {
        Some(contain::probe_main(&args[2..]))
    } else {
        None
    }
}

/// The wait before starting a command again after `failures` quick exits
/// in a row: 100 ms, doubling, at most 10 s.
pub fn restart_delay(failures: u32) -> Duration {
    let ceiling = Duration::from_secs(10);
    Duration::from_millis(100)
        .checked_mul(1 << failures.min(16))
        .map_or(ceiling, |d| d.min(ceiling))
}

/// A command that ran at least this long before exiting resets the backoff.
const STEADY: Duration = Duration::from_secs(10);

/// What the command is told about its election, and where the watchdog
/// executable is (`elect` itself, or a host binary that calls
/// [`dispatch_hidden`] first).
#[derive(Debug, Clone)]
pub struct ChildEnv {
    /// `ELECT_ELECTION` for the command.
    pub election: String,
    /// `ELECT_BACKEND` for the command.
    pub backend: &'static str,
    /// `ELECT_PERIOD_START` for a periodic job (`run --once`): the start
    /// of the period it runs for, in seconds since the Unix epoch.
    pub period_start: Option<u64>,
    /// The executable that runs the watchdog.
    pub watchdog: PathBuf,
}

/// Why a running command has to stop.
enum End {
    Exited(i32),
    WatchdogKilled(i32),
    /// Leadership is lost; the group must be dead by the instant given.
    Lost(BootInstant),
    BackendGone,
}

/// Supervises `cfg.command` under `leadership` until it exits by itself
/// (and `--restart` does not start it again), a shutdown signal arrives
/// while it is not running, or leadership is lost with `--exit-on-loss`.
/// Signals received while it runs are forwarded to its group; SIGINT and
/// SIGTERM also mean that it is not restarted.
///
/// The containment asked for is resolved first (a throwaway process tries
/// it) and logged.
///
/// # Errors
/// The containment asked for does not work here ([`Error::Config`] naming
/// `contain`); the watchdog could not be started.
///
/// # Cancel safety
/// Dropping the future kills the command's group at once.
pub async fn run(
    cfg: &ChildConfig,
    env: &ChildEnv,
    mut leadership: watch::Receiver<Leadership>,
    work: &Work,
    signals: &mut mpsc::UnboundedReceiver<Signal>,
) -> Result<Finish> {
    let (containment, exe) = (cfg.containment, env.watchdog.clone());
    let resolved = tokio::task::spawn_blocking(move || containment.resolve(&exe))
        .await
        .map_err(|e| Error::io("resolving the containment", std::io::Error::other(e)))??;
    // `elect run` resolved `auto` already and said so; a library caller
    // hears it here.
    if containment == Containment::Auto {
        info!("{}", resolved.describe());
    }
    let level = resolved.level;
    let mut quick_exits: u32 = 0;
    // The shutdown signal that arrived while a command ran: once the
    // command is gone, whatever else happened meanwhile, we exit.
    let mut shutting_down: Option<Signal> = None;
    loop {
        let snapshot = loop {
            tokio::select! {
                s = wait_to_lead(&mut leadership) => match s {
                    Some(s) => break s,
                    None => return Ok(Finish::BackendGone),
                },
                Some(sig) = signals.recv() => {
                    if is_shutdown(sig) {
                        return Ok(Finish::Signalled(sig));
                    }
                    info!("{sig} while no command runs: ignored");
                }
            }
        };
        let started = Instant::now();
        let token = snapshot.token;
        let mut deadline = snapshot
            .deadline
            .expect("a leading snapshot has a deadline");
        work.running();
        // The exporters were woken by the same snapshot: let them report
        // the election before the fork and exec below take a core.
        tokio::task::yield_now().await;
        let spawned = Child::spawn(
            &env.watchdog,
            &cfg.command,
            &child_env(env, &snapshot),
            cfg.grace,
            level,
            deadline,
        )
        .await;
        let mut child = match spawned {
            Ok(child) => child,
            Err(e) => {
                work.stopped();
                return Err(e);
            }
        };
        let end = loop {
            tokio::select! {
                ended = child.ended() => {
                    let code = match ended {
                        Ended::Command(code) => code,
                        Ended::WatchdogKilled(sig) => break End::WatchdogKilled(sig),
                    };
                    // The watchdog kills the group at the deadline (less
                    // its margin) on its own, and refuses to start past
                    // it; an end from then on is that, not an exit.
                    if BootInstant::now() + KILL_MARGIN >= deadline {
                        warn!("leadership deadline passed without renewal");
                        break End::Lost(deadline);
                    }
                    break End::Exited(code);
                }
                () = clock::sleep_until(deadline) => {
                    warn!("leadership deadline passed without renewal");
                    break End::Lost(deadline);
                }
                changed = leadership.changed() => {
                    if changed.is_err() {
                        break End::BackendGone;
                    }
                    let next = leadership.borrow_and_update().clone();
                    let now = BootInstant::now();
                    if next.leads_at(now) && next.token == token {
                        deadline = next.deadline.expect("leading");
                        child.extend(deadline);
                    } else {
                        // A demotion carries how long the work may take to
                        // stop; a snapshot that does not say means now.
                        break End::Lost(next.deadline.map_or(now, |d| d.min(deadline)));
                    }
                }
                Some(sig) = signals.recv() => {
                    if is_shutdown(sig) {
                        // Stop the work; we resign only once its group is
                        // gone (the exit arm above sees that).
                        let to = forwarded(sig);
                        info!("{sig}: stopping the command ({to}, SIGKILL after the grace)");
                        shutting_down = Some(sig);
                        child.stop(Some(to), cfg.grace, deadline);
                    } else {
                        info!("forwarding {sig} to the command");
                        child.forward(sig);
                    }
                }
            }
        };
        match end {
            End::Exited(code) => {
                // The watchdog has already ended whatever the command left
                // in its group: it exits only once the group is gone.
                work.stopped();
                if shutting_down.is_some() || !cfg.restart.restarts(code) {
                    return Ok(Finish::Exited(code));
                }
                quick_exits = if started.elapsed() >= STEADY {
                    0
                } else {
                    quick_exits + 1
                };
                let delay = restart_delay(quick_exits.saturating_sub(1));
                warn!(
                    code,
                    "the command exited; starting it again in {delay:?} (--restart {:?})",
                    cfg.restart
                );
                let resume = Instant::now() + delay;
                loop {
                    tokio::select! {
                        () = sleep_until(resume) => break,
                        Some(sig) = signals.recv() => if is_shutdown(sig) {
                            return Ok(Finish::Exited(code));
                        },
                    }
                }
            }
            End::Lost(kill_by) => {
                info!("leadership lost: stopping the command");
                stop(&mut child, cfg.grace, kill_by, &mut leadership).await;
                work.stopped();
                // Leadership lost while a shutdown was under way: the
                // shutdown still stands (it used to be forgotten, and elect
                // campaigned again after SIGTERM).
                if let Some(sig) = shutting_down {
                    return Ok(Finish::Signalled(sig));
                }
                if cfg.exit_on_loss {
                    return Ok(Finish::Lost);
                }
            }
            End::BackendGone => {
                stop(
                    &mut child,
                    Duration::ZERO,
                    BootInstant::now(),
                    &mut leadership,
                )
                .await;
                work.stopped();
                return Ok(Finish::BackendGone);
            }
            End::WatchdogKilled(sig) => {
                work.stopped();
                return Ok(Finish::WatchdogKilled(sig));
            }
        }
    }
}

/// Stops the command's whole group: SIGTERM now, SIGKILL once `grace` has
/// passed or at `kill_by`, whichever comes first. A later snapshot may only
/// bring `kill_by` closer (the backend learned that leadership is gone for
/// good, e.g. a revoked lease). Returns once the group is gone.
///
/// The watchdog does the killing; should it not have acted shortly after
/// `kill_by` (stopped by hand), `elect` kills the group itself.
async fn stop(
    child: &mut Child,
    grace: Duration,
    kill_by: BootInstant,
    leadership: &mut watch::Receiver<Leadership>,
) {
    let now = BootInstant::now();
    if kill_by < now + grace {
        warn!(
            "grace shortened to {:?} to end the command before the leadership deadline",
            kill_by.saturating_duration_since(now)
        );
    }
    child.stop(Some(Signal::SIGTERM), grace, kill_by);
    let mut kill_by = kill_by;
    loop {
        let backstop = kill_by.min(now + grace) + WATCHDOG_SLACK;
        tokio::select! {
            // The watchdog's end first: an elect that was frozen past the
            // backstop finds both ready when it wakes, and the watchdog
            // did its job.
            biased;
            _ = child.ended() => return,
            Ok(()) = leadership.changed() => {
                if let Some(d) = leadership.borrow_and_update().deadline
                    && d < kill_by
                {
                    kill_by = d;
                    child.stop(None, Duration::ZERO, d);
                }
            }
            () = clock::sleep_until(backstop) => {
                warn!("the watchdog has not ended the command's group; killing it from here");
                child.kill_group_and_wait().await;
                return;
            }
        }
    }
}

/// How long after its kill time `elect` leaves the group to the watchdog.
const WATCHDOG_SLACK: Duration = Duration::from_millis(200);

/// Waits for a snapshot in which we lead; `None` if the sender is gone.
async fn wait_to_lead(rx: &mut watch::Receiver<Leadership>) -> Option<Leadership> {
    loop {
        {
            let s = rx.borrow_and_update();
            // Not within KILL_MARGIN of the deadline either: the watchdog
            // would refuse the command at once (125), and we would start
            // it again and again until the snapshot changed.
            if s.leads_at(BootInstant::now() + KILL_MARGIN) {
                return Some(s.clone());
            }
        }
        rx.changed().await.ok()?;
    }
}

fn child_env(env: &ChildEnv, s: &Leadership) -> Vec<(&'static str, String)> {
    [
        ("ELECT_LEADER_ID", s.leader.clone().unwrap_or_default()),
        (
            "ELECT_FENCING_TOKEN",
            s.token.map(|t| t.to_string()).unwrap_or_default(),
        ),
        ("ELECT_ELECTION", env.election.clone()),
        ("ELECT_BACKEND", env.backend.to_owned()),
    ]
    .into_iter()
    .chain(
        env.period_start
            .map(|start| ("ELECT_PERIOD_START", start.to_string())),
    )
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn child_configs_are_checked() {
        use std::os::unix::ffi::OsStringExt;
        let raw = OsString::from_vec(vec![b'%', 0xff]);
        let cfg = ChildConfig::new([OsString::from("printf"), raw.clone()]).unwrap();
        assert_eq!(cfg.command()[1], raw);
        assert!(ChildConfig::new(Vec::<String>::new()).is_err());
        assert!(ChildConfig::new([""]).is_err());
        let err = ChildConfig::new(["true"])
            .unwrap()
            .with_grace(Duration::MAX)
            .unwrap_err();
        assert!(err.to_string().starts_with("grace:"), "{err}");
    }

    #[test]
    fn restarts_back_off_from_100ms_to_10s() {
        let delays: Vec<u128> = (0..9).map(|n| restart_delay(n).as_millis()).collect();
        assert_eq!(delays, [100, 200, 400, 800, 1600, 3200, 6400, 10000, 10000]);
        assert_eq!(restart_delay(u32::MAX), Duration::from_secs(10));
    }

    #[test]
    fn terminal_signals_shut_down_and_user_signals_are_forwarded() {
        for sig in [
            Signal::SIGTERM,
            Signal::SIGINT,
            Signal::SIGQUIT,
            Signal::SIGHUP,
            Signal::SIGTSTP,
        ] {
            assert!(is_shutdown(sig), "{sig}");
        }
        for sig in [Signal::SIGUSR1, Signal::SIGUSR2] {
            assert!(!is_shutdown(sig), "{sig}");
        }
        assert_eq!(forwarded(Signal::SIGTSTP), Signal::SIGTERM);
        assert_eq!(forwarded(Signal::SIGINT), Signal::SIGINT);
    }
}
