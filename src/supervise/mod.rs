//! Running a command only while this process leads.
//!
//! The supervisor reads [`Leadership`] snapshots and nothing else: it starts
//! the command when a snapshot says we lead, and stops its whole process
//! group when a snapshot says we no longer do, when the fencing token
//! changes, or when the leadership deadline passes without a renewal, even
//! if the backend has said nothing (it may be stuck). SIGKILL lands no later
//! than the deadline whatever `--grace` says.
//!
//! The command runs under a [`watchdog`] process that holds the deadline
//! itself, so a frozen or killed `elect` still cannot outlive its
//! leadership through the command.
//!
//! It publishes `busy` (whether the command's group is alive) so the
//! backend can hold on to what keeps successors out until the work is gone.

pub mod child;
pub mod watchdog;

use std::path::PathBuf;
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, sleep_until};
use tracing::{info, warn};

use crate::config::ChildConfig;
use crate::error::Result;
use crate::leadership::Leadership;
use child::Child;

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
}

/// SIGINT and SIGTERM end `elect run`; the others are only forwarded.
pub fn is_shutdown(sig: Signal) -> bool {
    matches!(sig, Signal::SIGINT | Signal::SIGTERM)
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
/// executable is (`elect` itself).
#[derive(Debug, Clone)]
pub struct ChildEnv {
    pub election: String,
    pub backend: &'static str,
    pub watchdog: PathBuf,
}

/// Why a running command has to stop.
enum End {
    Exited(i32),
    /// Leadership is lost; the group must be dead by the instant given.
    Lost(Instant),
    BackendGone,
}

/// Supervises `cfg.command` under `leadership` until it exits by itself
/// (and `--restart` does not start it again), a shutdown signal arrives
/// while it is not running, or leadership is lost with `--exit-on-loss`.
/// Signals received while it runs are forwarded to its group; SIGINT and
/// SIGTERM also mean that it is not restarted.
///
/// Errors: the watchdog could not be started. Cancel safety: dropping the
/// future kills the command's group at once.
pub async fn run(
    cfg: &ChildConfig,
    env: &ChildEnv,
    mut leadership: watch::Receiver<Leadership>,
    busy: &watch::Sender<bool>,
    signals: &mut mpsc::UnboundedReceiver<Signal>,
) -> Result<Finish> {
    let mut quick_exits: u32 = 0;
    let mut shutting_down = false;
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
        busy.send_replace(true);
        let spawned = Child::spawn(
            &env.watchdog,
            &cfg.command,
            &child_env(env, &snapshot),
            cfg.grace,
            deadline,
        );
        let mut child = match spawned {
            Ok(child) => child,
            Err(e) => {
                busy.send_replace(false);
                return Err(e);
            }
        };
        let end = loop {
            tokio::select! {
                code = child.exited() => {
                    // The watchdog kills the group at the deadline on its
                    // own; an end past the deadline is that, not an exit.
                    if Instant::now() >= deadline {
                        warn!("leadership deadline passed without renewal");
                        break End::Lost(deadline);
                    }
                    break End::Exited(code);
                }
                () = sleep_until(deadline) => {
                    warn!("leadership deadline passed without renewal");
                    break End::Lost(deadline);
                }
                changed = leadership.changed() => {
                    if changed.is_err() {
                        break End::BackendGone;
                    }
                    let next = leadership.borrow_and_update().clone();
                    let now = Instant::now();
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
                    info!("forwarding {sig} to the command");
                    shutting_down |= is_shutdown(sig);
                    child.forward(sig);
                }
            }
        };
        match end {
            End::Exited(code) => {
                // The watchdog has already ended whatever the command left
                // in its group: it exits only once the group is gone.
                busy.send_replace(false);
                if shutting_down || !cfg.restart.restarts(code) {
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
                busy.send_replace(false);
                if cfg.exit_on_loss {
                    return Ok(Finish::Lost);
                }
            }
            End::BackendGone => {
                stop(&mut child, Duration::ZERO, Instant::now(), &mut leadership).await;
                busy.send_replace(false);
                return Ok(Finish::BackendGone);
            }
        }
    }
}

/// Stops the command's whole group: SIGTERM now, SIGKILL once `grace` has
/// passed or at `kill_by`, whichever comes first. A later snapshot may only
/// bring `kill_by` closer (the backend learned that leadership is gone for
/// good, e.g. a revoked lease). Returns once the group is gone.
async fn stop(
    child: &mut Child,
    grace: Duration,
    kill_by: Instant,
    leadership: &mut watch::Receiver<Leadership>,
) {
    let now = Instant::now();
    if kill_by < now + grace {
        warn!(
            "grace shortened to {:?} to end the command before the leadership deadline",
            kill_by.saturating_duration_since(now)
        );
    }
    child.stop(grace, kill_by);
    let mut kill_by = kill_by;
    loop {
        tokio::select! {
            _ = child.exited() => return,
            Ok(()) = leadership.changed() => {
                if let Some(d) = leadership.borrow_and_update().deadline
                    && d < kill_by
                {
                    kill_by = d;
                    child.stop(Duration::ZERO, d);
                }
            }
        }
    }
}

/// Waits for a snapshot in which we lead; `None` if the sender is gone.
async fn wait_to_lead(rx: &mut watch::Receiver<Leadership>) -> Option<Leadership> {
    loop {
        {
            let s = rx.borrow_and_update();
            if s.leads_at(Instant::now()) {
                return Some(s.clone());
            }
        }
        rx.changed().await.ok()?;
    }
}

fn child_env(env: &ChildEnv, s: &Leadership) -> Vec<(&'static str, String)> {
    vec![
        ("ELECT_LEADER_ID", s.leader.clone().unwrap_or_default()),
        (
            "ELECT_FENCING_TOKEN",
            s.token.map(|t| t.to_string()).unwrap_or_default(),
        ),
        ("ELECT_ELECTION", env.election.clone()),
        ("ELECT_BACKEND", env.backend.to_owned()),
    ]
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
    fn only_sigint_and_sigterm_shut_down() {
        assert!(is_shutdown(Signal::SIGTERM) && is_shutdown(Signal::SIGINT));
        for sig in [
            Signal::SIGHUP,
            Signal::SIGQUIT,
            Signal::SIGUSR1,
            Signal::SIGUSR2,
        ] {
            assert!(!is_shutdown(sig));
        }
    }
}
