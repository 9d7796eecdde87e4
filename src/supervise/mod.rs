//! Running a command only while this process leads.
//!
//! The supervisor reads [`Leadership`] snapshots and nothing else: it starts
//! the command when a snapshot says we lead, and stops its whole process
//! group when a snapshot says we no longer do, when the fencing token
//! changes, or when the leadership deadline passes without a renewal, even
//! if the backend has said nothing (it may be stuck). SIGKILL lands no later
//! than the deadline whatever `--grace` says.
//!
//! It publishes `busy` (whether the command's group is alive) so the
//! backend can hold on to what keeps successors out until the work is gone.

pub mod child;

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
}

/// What the command is told about its election.
#[derive(Debug, Clone)]
pub struct ChildEnv {
    pub election: String,
    pub backend: &'static str,
}

/// Why a running command has to stop.
enum End {
    Exited(i32),
    /// Leadership is lost; the group must be dead by the instant given.
    Lost(Instant),
    BackendGone(Instant),
}

/// Supervises `cfg.command` under `leadership` until it exits by itself or
/// a shutdown signal arrives while it is not running. Signals received
/// while it runs are forwarded to its group.
///
/// Errors: the command could not be started. Cancel safety: dropping the
/// future kills the command's group (SIGKILL).
pub async fn run(
    cfg: &ChildConfig,
    env: &ChildEnv,
    mut leadership: watch::Receiver<Leadership>,
    busy: &watch::Sender<bool>,
    signals: &mut mpsc::UnboundedReceiver<Signal>,
) -> Result<Finish> {
    loop {
        let snapshot = tokio::select! {
            s = wait_to_lead(&mut leadership) => match s {
                Some(s) => s,
                None => return Ok(Finish::BackendGone),
            },
            Some(sig) = signals.recv() => return Ok(Finish::Signalled(sig)),
        };
        let token = snapshot.token;
        let mut deadline = snapshot
            .deadline
            .expect("a leading snapshot has a deadline");
        busy.send_replace(true);
        let mut child = match Child::spawn(&cfg.command, &child_env(env, &snapshot)) {
            Ok(child) => child,
            Err(e) => {
                busy.send_replace(false);
                return Err(e);
            }
        };
        let end = loop {
            tokio::select! {
                code = child.exited() => break End::Exited(code),
                _ = sleep_until(deadline) => {
                    warn!("leadership deadline passed without renewal");
                    break End::Lost(deadline);
                }
                changed = leadership.changed() => {
                    if changed.is_err() {
                        break End::BackendGone(Instant::now());
                    }
                    let next = leadership.borrow_and_update().clone();
                    let now = Instant::now();
                    if next.leads_at(now) && next.token == token {
                        deadline = next.deadline.expect("leading");
                    } else {
                        // A demotion carries how long the work may take to
                        // stop; a snapshot that does not say means now.
                        break End::Lost(next.deadline.map_or(now, |d| d.min(deadline)));
                    }
                }
                Some(sig) = signals.recv() => {
                    info!("forwarding {sig} to the command");
                    child.signal_group(sig);
                }
            }
        };
        match end {
            End::Exited(code) => {
                // Whatever it left behind in its group must not outlive our
                // leadership: stop it before we resign.
                stop(&mut child, cfg.grace, deadline, &mut leadership).await;
                busy.send_replace(false);
                return Ok(Finish::Exited(code));
            }
            End::Lost(kill_by) => {
                info!("leadership lost: stopping the command");
                stop(&mut child, cfg.grace, kill_by, &mut leadership).await;
                busy.send_replace(false);
            }
            End::BackendGone(kill_by) => {
                stop(&mut child, Duration::ZERO, kill_by, &mut leadership).await;
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
    if !child.group_alive() {
        return;
    }
    let now = Instant::now();
    let mut kill_at = (now + grace).min(kill_by);
    if kill_at < now + grace {
        warn!(
            "grace shortened to {:?} to end the command before the leadership deadline",
            kill_at.saturating_duration_since(now)
        );
    }
    child.signal_group(Signal::SIGTERM);
    loop {
        tokio::select! {
            () = child.group_gone() => return,
            () = sleep_until(kill_at) => break,
            Ok(()) = leadership.changed() => {
                if let Some(d) = leadership.borrow_and_update().deadline
                    && d < kill_at
                {
                    kill_at = d;
                }
            }
        }
    }
    warn!(
        pgid = child.pid().as_raw(),
        "killing the command's process group"
    );
    child.signal_group(Signal::SIGKILL);
    child.group_gone().await;
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
    //! Driven by a `watch::Sender` by hand, with real processes.
    use super::*;
    use std::time::Duration;

    fn sh(script: &str) -> ChildConfig {
        // As in `elect run`: orphaned grandchildren come back to us.
        child::become_subreaper().unwrap();
        ChildConfig {
            command: vec!["sh".into(), "-c".into(), script.into()],
            grace: Duration::from_secs(5),
        }
    }

    fn env() -> ChildEnv {
        ChildEnv {
            election: "e".into(),
            backend: "test",
        }
    }

    fn lead(token: u64, for_: Duration) -> Leadership {
        Leadership::elected("me".into(), token, Instant::now() + for_)
    }

    #[tokio::test]
    async fn runs_only_while_leading_and_reports_exit() {
        let (tx, rx) = watch::channel(Leadership::unknown());
        let (busy, busy_rx) = watch::channel(false);
        let (_sig_tx, mut sigs) = mpsc::unbounded_channel();
        let cfg =
            sh("test \"$ELECT_FENCING_TOKEN\" = 7 && test \"$ELECT_LEADER_ID\" = me && exit 3");
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
        assert!(!*busy_rx.borrow());
    }

    #[tokio::test]
    async fn demotion_kills_the_group_including_ignorers_by_the_deadline() {
        let (tx, rx) = watch::channel(lead(1, Duration::from_secs(30)));
        let (busy, mut busy_rx) = watch::channel(false);
        let (_sig_tx, mut sigs) = mpsc::unbounded_channel();
        // The grandchild ignores SIGTERM; only SIGKILL at the deadline ends
        // it, long before the 30 s grace would.
        let mut cfg = sh("trap '' TERM; sleep 1000 & wait");
        cfg.grace = Duration::from_secs(30);
        let env = env();
        let task = async {
            busy_rx.wait_for(|b| *b).await.unwrap();
            tokio::time::sleep(Duration::from_millis(100)).await;
            let mut demoted = Leadership::unknown();
            let kill_by = Instant::now() + Duration::from_millis(300);
            demoted.deadline = Some(kill_by);
            tx.send_replace(demoted);
            busy_rx.wait_for(|b| !*b).await.unwrap();
            let gone_at = Instant::now();
            assert!(gone_at >= kill_by, "killed before the deadline");
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
        let (busy, mut busy_rx) = watch::channel(false);
        let (_sig_tx, mut sigs) = mpsc::unbounded_channel();
        let cfg = sh("sleep 1000");
        let env = env();
        let started = Instant::now();
        let task = async {
            busy_rx.wait_for(|b| *b).await.unwrap();
            busy_rx.wait_for(|b| !*b).await.unwrap();
            assert!(started.elapsed() < Duration::from_secs(2));
            drop(tx);
        };
        let (finish, ()) = tokio::join!(run(&cfg, &env, rx, &busy, &mut sigs), task);
        assert_eq!(finish.unwrap(), Finish::BackendGone);
    }

    #[tokio::test]
    async fn a_new_token_restarts_the_command() {
        let (tx, rx) = watch::channel(lead(1, Duration::from_secs(30)));
        let (busy, mut busy_rx) = watch::channel(false);
        let (_sig_tx, mut sigs) = mpsc::unbounded_channel();
        let cfg = sh("test \"$ELECT_FENCING_TOKEN\" = 2 && exit 0; sleep 1000");
        let env = env();
        let task = async {
            busy_rx.wait_for(|b| *b).await.unwrap();
            tx.send_replace(lead(2, Duration::from_secs(30)));
        };
        let (finish, ()) = tokio::join!(run(&cfg, &env, rx, &busy, &mut sigs), task);
        assert_eq!(finish.unwrap(), Finish::Exited(0));
    }

    #[tokio::test]
    async fn signals_are_forwarded_and_the_code_is_128_plus_n() {
        let (_tx, rx) = watch::channel(lead(1, Duration::from_secs(30)));
        let (busy, mut busy_rx) = watch::channel(false);
        let (sig_tx, mut sigs) = mpsc::unbounded_channel();
        let cfg = sh("exec sleep 1000");
        let env = env();
        let task = async {
            busy_rx.wait_for(|b| *b).await.unwrap();
            tokio::time::sleep(Duration::from_millis(50)).await;
            sig_tx.send(Signal::SIGTERM).unwrap();
        };
        let (finish, ()) = tokio::join!(run(&cfg, &env, rx, &busy, &mut sigs), task);
        assert_eq!(finish.unwrap(), Finish::Exited(128 + 15));
    }
}
