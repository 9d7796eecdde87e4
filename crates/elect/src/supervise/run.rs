//! The supervision itself: the command started when a snapshot says we
//! lead, stopped (its whole tree, by the deadline) when one says we no
//! longer do, restarted with a backoff, and the signals `elect` receives
//! forwarded to it.

use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, sleep_until};
use tracing::{info, warn};

use super::child::{Child, Ended};
use super::command::{ChildConfig, ChildEnv, Finish};
use super::contain::{Containment, Level, Resolved};
use super::watchdog::KILL_MARGIN;
use crate::clock::{self, BootInstant};
use crate::error::{Error, Result};
use crate::leadership::Leadership;
use crate::work::Work;

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
/// it, see [`resolve`]) and logged, unless the config carries the level
/// already ([`ChildConfig::with_resolved`]).
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
    leadership: watch::Receiver<Leadership>,
    work: &Work,
    signals: &mut mpsc::UnboundedReceiver<Signal>,
) -> Result<Finish> {
    let level = match cfg.resolved {
        Some(level) => level,
        None => {
            let resolved = resolve(cfg, env).await?;
            if cfg.containment == Containment::Auto {
                info!("{}", resolved.describe());
            }
            resolved.level
        }
    };
    let mut supervision = Supervision {
        cfg,
        env,
        leadership,
        work,
        signals,
        level,
        quick_exits: 0,
        shutting_down: None,
    };
    loop {
        let snapshot = match supervision.until_leading().await {
            Ok(snapshot) => snapshot,
            Err(finish) => return Ok(finish),
        };
        let started = Instant::now();
        let (mut child, deadline) = supervision.start(&snapshot).await?;
        let end = supervision
            .while_running(&mut child, snapshot.token, deadline)
            .await;
        if let Some(finish) = supervision.after(end, &mut child, started).await {
            return Ok(finish);
        }
    }
}

/// Resolves the containment `cfg` asks for: a throwaway process started
/// from `env`'s watchdog executable tries it (for `auto`, each level from
/// the strongest), on a blocking thread, off the async workers.
///
/// # Errors
/// The level asked for does not work here ([`Error::Config`] naming
/// `contain`, with the reason).
///
/// # Cancel safety
/// The probe runs to its end on its thread; dropping the future only
/// drops its answer.
pub async fn resolve(cfg: &ChildConfig, env: &ChildEnv) -> Result<Resolved> {
    resolve_containment(cfg.containment, env.watchdog.clone()).await
}

/// [`resolve`] for `containment` with the watchdog executable `exe`
/// (a health check's, too).
pub(crate) async fn resolve_containment(
    containment: Containment,
    exe: std::path::PathBuf,
) -> Result<Resolved> {
    tokio::task::spawn_blocking(move || containment.resolve(&exe))
        .await
        .map_err(|e| Error::io("resolving the containment", std::io::Error::other(e)))?
}

/// One supervision's state across the command's runs.
struct Supervision<'a> {
    cfg: &'a ChildConfig,
    env: &'a ChildEnv,
    leadership: watch::Receiver<Leadership>,
    work: &'a Work,
    signals: &'a mut mpsc::UnboundedReceiver<Signal>,
    level: Level,
    /// Runs in a row that ended before [`STEADY`].
    quick_exits: u32,
    /// The shutdown signal that arrived while a command ran: once the
    /// command is gone, whatever else happened meanwhile, we exit.
    shutting_down: Option<Signal>,
}

impl Supervision<'_> {
    /// Waits until a snapshot says we lead; a shutdown signal meanwhile,
    /// or the backend gone, finishes the supervision.
    async fn until_leading(&mut self) -> std::result::Result<Leadership, Finish> {
        loop {
            tokio::select! {
                s = wait_to_lead(&mut self.leadership) => match s {
                    Some(s) => return Ok(s),
                    None => return Err(Finish::BackendGone),
                },
                Some(sig) = self.signals.recv() => {
                    if is_shutdown(sig) {
                        return Err(Finish::Signalled(sig));
                    }
                    info!("{sig} while no command runs: ignored");
                }
            }
        }
    }

    /// Starts the command under its watchdog for the leadership `snapshot`
    /// tells of: the child, and its deadline.
    async fn start(&mut self, snapshot: &Leadership) -> Result<(Child, BootInstant)> {
        let deadline = snapshot
            .deadline
            .expect("a leading snapshot has a deadline");
        self.work.running();
        // The exporters were woken by the same snapshot: let them report
        // the election before the fork and exec below take a core.
        tokio::task::yield_now().await;
        let spawned = Child::spawn(
            &self.env.watchdog,
            &self.cfg.command,
            &child_env(self.env, snapshot),
            self.cfg.grace,
            self.level,
            deadline,
            false,
        )
        .await;
        match spawned {
            Ok(child) => Ok((child, deadline)),
            Err(e) => {
                self.work.stopped();
                Err(e)
            }
        }
    }

    /// While the command runs: moves its deadline on with each renewal of
    /// the term `token`, forwards signals, and says why it has to stop.
    async fn while_running(
        &mut self,
        child: &mut Child,
        token: Option<u64>,
        mut deadline: BootInstant,
    ) -> End {
        loop {
            tokio::select! {
                ended = child.ended() => {
                    let code = match ended {
                        Ended::Command(code) => code,
                        Ended::WatchdogKilled(sig) => return End::WatchdogKilled(sig),
                    };
                    // The watchdog kills the group at the deadline (less
                    // its margin) on its own, and refuses to start past
                    // it; an end from then on is that, not an exit.
                    if BootInstant::now() + KILL_MARGIN >= deadline {
                        warn!("leadership deadline passed without renewal");
                        return End::Lost(deadline);
                    }
                    return End::Exited(code);
                }
                () = clock::sleep_until(deadline) => {
                    warn!("leadership deadline passed without renewal");
                    return End::Lost(deadline);
                }
                changed = self.leadership.changed() => {
                    if changed.is_err() {
                        return End::BackendGone;
                    }
                    let next = self.leadership.borrow_and_update().clone();
                    let now = BootInstant::now();
                    if next.leads_at(now) && next.token == token {
                        deadline = next.deadline.expect("leading");
                        child.extend(deadline);
                    } else {
                        // A demotion carries how long the work may take to
                        // stop; a snapshot that does not say means now.
                        return End::Lost(next.deadline.map_or(now, |d| d.min(deadline)));
                    }
                }
                Some(sig) = self.signals.recv() => {
                    if is_shutdown(sig) {
                        // Stop the work; we resign only once its group is
                        // gone (the exit arm above sees that).
                        let to = forwarded(sig);
                        info!("{sig}: stopping the command ({to}, SIGKILL after the grace)");
                        self.shutting_down = Some(sig);
                        child.stop(Some(to), self.cfg.grace, deadline);
                    } else {
                        info!("forwarding {sig} to the command");
                        child.forward(sig);
                    }
                }
            }
        }
    }

    /// What follows the command's `end`: the supervision's finish, or
    /// `None` to wait for leadership again (after a restart's pause, or a
    /// loss).
    async fn after(&mut self, end: End, child: &mut Child, started: Instant) -> Option<Finish> {
        match end {
            End::Exited(code) => {
                // The watchdog has already ended whatever the command left
                // in its group: it exits only once the group is gone.
                self.work.stopped();
                self.restart_or_finish(code, started).await
            }
            End::Lost(kill_by) => {
                info!("leadership lost: stopping the command");
                stop(child, self.cfg.grace, kill_by, &mut self.leadership).await;
                self.work.stopped();
                // Leadership lost while a shutdown was under way: the
                // shutdown still stands (it used to be forgotten, and elect
                // campaigned again after SIGTERM).
                if let Some(sig) = self.shutting_down {
                    return Some(Finish::Signalled(sig));
                }
                self.cfg.exit_on_loss.then_some(Finish::Lost)
            }
            End::BackendGone => {
                stop(
                    child,
                    Duration::ZERO,
                    BootInstant::now(),
                    &mut self.leadership,
                )
                .await;
                self.work.stopped();
                Some(Finish::BackendGone)
            }
            End::WatchdogKilled(sig) => {
                self.work.stopped();
                Some(Finish::WatchdogKilled(sig))
            }
        }
    }

    /// The command exited with `code`: finish, or wait out the restart's
    /// backoff (a shutdown signal meanwhile finishes) and go on.
    async fn restart_or_finish(&mut self, code: i32, started: Instant) -> Option<Finish> {
        if self.shutting_down.is_some() || !self.cfg.restart.restarts(code) {
            return Some(Finish::Exited(code));
        }
        self.quick_exits = if started.elapsed() >= STEADY {
            0
        } else {
            self.quick_exits + 1
        };
        let delay = restart_delay(self.quick_exits.saturating_sub(1));
        warn!(
            code,
            "the command exited; starting it again in {delay:?} (--restart {:?})", self.cfg.restart
        );
        let resume = Instant::now() + delay;
        loop {
            tokio::select! {
                () = sleep_until(resume) => return None,
                Some(sig) = self.signals.recv() => if is_shutdown(sig) {
                    return Some(Finish::Exited(code));
                },
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
