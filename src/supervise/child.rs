//! The wrapped command as a process group we can signal, reap and prove
//! empty.
//!
//! The child leads its own process group, so one `killpg` reaches every
//! descendant that stayed in it (a shell's background jobs, for example;
//! consul #2022 is what happens when only the child's pid is signalled).
//! `elect` is a child subreaper, so grandchildren orphaned by the child are
//! re-parented to us, stay in the group, and are reaped here with
//! `waitid(P_PGID)`, which touches no other process of ours.

use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
use nix::unistd::Pid;
use tokio::signal::unix::{SignalKind, signal};
use tokio::time::sleep;
use tracing::{debug, info, warn};

use crate::error::{Error, Result};

/// How often group membership is re-checked when no SIGCHLD arrives
/// (a grandchild that dies while its parent lives signals its parent, not us).
const POLL: Duration = Duration::from_millis(10);

/// Makes this process the reaper of its orphaned descendants.
///
/// Errors: the `prctl` call failed.
pub fn become_subreaper() -> Result<()> {
    nix::sys::prctl::set_child_subreaper(true)
        .map_err(|e| Error::io("becoming a child subreaper", e.into()))
}

/// How the child ended, as a shell would report it.
pub fn exit_code(status: WaitStatus) -> Option<i32> {
    match status {
        WaitStatus::Exited(_, code) => Some(code),
        WaitStatus::Signaled(_, sig, _) => Some(128 + sig as i32),
        _ => None,
    }
}

pub struct Child {
    pid: Pid,
    exit: Option<i32>,
    sigchld: tokio::signal::unix::Signal,
}

impl Child {
    /// Starts `command` as the leader of a new process group.
    ///
    /// Errors: [`Error::Spawn`] when the command cannot be started.
    pub fn spawn(command: &[String], env: &[(&str, String)]) -> Result<Child> {
        // Registered before the fork so no SIGCHLD can be missed.
        let sigchld =
            signal(SignalKind::child()).map_err(|e| Error::io("listening for SIGCHLD", e))?;
        let child = Command::new(&command[0])
            .args(&command[1..])
            .envs(env.iter().map(|(k, v)| (k, v)))
            .process_group(0)
            .spawn()
            .map_err(|source| Error::Spawn {
                command: command.join(" "),
                source,
            })?;
        let pid = Pid::from_raw(child.id() as i32);
        // We reap it ourselves (waitid on its group); std's handle is not needed.
        drop(child);
        info!(pid = pid.as_raw(), "started {}", command.join(" "));
        Ok(Child {
            pid,
            exit: None,
            sigchld,
        })
    }

    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// Sends `sig` to the whole group. A group already gone is not an error.
    pub fn signal_group(&self, sig: Signal) {
        match killpg(self.pid, sig) {
            Ok(()) | Err(Errno::ESRCH) => {}
            Err(e) => warn!("signalling process group {}: {e}", self.pid),
        }
    }

    /// Whether any process of the group is still alive (zombies we have not
    /// reaped yet count as alive).
    pub fn group_alive(&self) -> bool {
        !matches!(killpg(self.pid, None), Err(Errno::ESRCH))
    }

    /// Reaps every exited member of the group, remembering the child's code.
    fn reap(&mut self) {
        loop {
            match waitid(
                Id::PGid(self.pid),
                WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG,
            ) {
                Ok(WaitStatus::StillAlive) | Err(_) => return,
                Ok(status) => {
                    if status.pid() == Some(self.pid) {
                        self.exit = exit_code(status);
                        info!(code = ?self.exit, "command exited");
                    } else {
                        debug!(?status, "reaped a descendant");
                    }
                }
            }
        }
    }

    /// Waits for the child itself to exit; returns its exit code.
    /// Cancel safe.
    pub async fn exited(&mut self) -> i32 {
        loop {
            self.reap();
            if let Some(code) = self.exit {
                return code;
            }
            self.next_event().await;
        }
    }

    /// Waits until no process of the group is left. Cancel safe.
    pub async fn group_gone(&mut self) {
        loop {
            self.reap();
            if !self.group_alive() {
                return;
            }
            self.next_event().await;
        }
    }

    async fn next_event(&mut self) {
        tokio::select! {
            _ = self.sigchld.recv() => {}
            _ = sleep(POLL) => {}
        }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        // Never leave the work running behind us, whatever path got here.
        if self.group_alive() {
            self.signal_group(Signal::SIGKILL);
        }
    }
}
