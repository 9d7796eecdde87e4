//! The wrapped command, seen from `elect`: a [watchdog](super::watchdog)
//! process that owns the command's process group and enforces the deadline
//! even when `elect` cannot.
//!
//! `elect` talks to it over a pipe (deadline extensions, forwarded signals,
//! stop requests) and learns the command's end from the watchdog's exit,
//! which comes only once the command's whole group is gone.

use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use nix::fcntl::OFlag;
use nix::sys::signal::Signal;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use tokio::signal::unix::{SignalKind, signal};
use tokio::time::{Instant, sleep};
use tracing::{debug, info, warn};

use super::watchdog::{self, Control, to_monotonic};
use crate::error::{Error, Result};

/// How often the watchdog's exit is checked when no SIGCHLD arrives.
const POLL: Duration = Duration::from_millis(20);

/// How a process ended, as a shell would report it.
pub fn exit_code(status: WaitStatus) -> Option<i32> {
    match status {
        WaitStatus::Exited(_, code) => Some(code),
        WaitStatus::Signaled(_, sig, _) => Some(128 + sig as i32),
        _ => None,
    }
}

pub struct Child {
    /// The watchdog's pid.
    pid: Pid,
    control: std::fs::File,
    exit: Option<i32>,
    sigchld: tokio::signal::unix::Signal,
}

impl Child {
    /// Starts `command` under a watchdog (`watchdog` is the `elect`
    /// executable) that kills its group at `deadline` unless extended.
    ///
    /// Errors: the watchdog could not be started. A command that cannot be
    /// started makes the watchdog exit with 127.
    pub fn spawn(
        watchdog: &Path,
        command: &[String],
        env: &[(&str, String)],
        grace: Duration,
        deadline: Instant,
    ) -> Result<Child> {
        // Registered before the fork so no SIGCHLD can be missed.
        let sigchld =
            signal(SignalKind::child()).map_err(|e| Error::io("listening for SIGCHLD", e))?;
        let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC)
            .map_err(|e| Error::io("creating the watchdog's pipe", e.into()))?;
        let read_fd = read.as_raw_fd();
        let mut cmd = Command::new(watchdog);
        cmd.arg(watchdog::SUBCOMMAND)
            .args(["--grace", &grace.as_nanos().to_string()])
            .args(["--deadline", &to_monotonic(deadline).to_string()])
            .arg("--")
            .args(command)
            .envs(env.iter().map(|(k, v)| (k, v)));
        // SAFETY: dup2 and fcntl are async-signal-safe; this runs in the
        // forked child before exec. The duplicate on fd 3 has close-on-exec
        // cleared (dup2 does not clear it when the fds are equal).
        unsafe {
            cmd.pre_exec(move || {
                let target = watchdog::CONTROL_FD;
                let ok = if read_fd == target {
                    libc::fcntl(target, libc::F_SETFD, 0) >= 0
                } else {
                    libc::dup2(read_fd, target) >= 0
                };
                if ok {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            });
        }
        let child = cmd.spawn().map_err(|source| Error::Spawn {
            command: command.join(" "),
            source,
        })?;
        drop(read);
        let pid = Pid::from_raw(child.id() as i32);
        // Reaped with waitpid below; std's handle is not needed.
        drop(child);
        info!(watchdog = pid.as_raw(), "started {}", command.join(" "));
        Ok(Child {
            pid,
            control: std::fs::File::from(write),
            exit: None,
            sigchld,
        })
    }

    fn send(&mut self, message: Control) {
        // A closed pipe means the watchdog is gone, which `exited` reports.
        if let Err(e) = self.control.write_all(message.encode().as_bytes()) {
            debug!("watchdog control: {e}");
        }
    }

    /// Lets the command run until `deadline`.
    pub fn extend(&mut self, deadline: Instant) {
        self.send(Control::Deadline(to_monotonic(deadline)));
    }

    /// Forwards `sig` to the command's group.
    pub fn forward(&mut self, sig: Signal) {
        self.send(Control::Signal(sig as i32));
    }

    /// Asks for the group to stop: SIGTERM now, SIGKILL once `grace` has
    /// passed or at `kill_by`, whichever is first. Asking again can only
    /// bring SIGKILL closer.
    pub fn stop(&mut self, grace: Duration, kill_by: Instant) {
        self.send(Control::Stop {
            grace: grace.as_nanos() as u64,
            kill_by: to_monotonic(kill_by),
        });
    }

    /// Waits until the command's whole group is gone; returns the command's
    /// exit code. Cancel safe.
    pub async fn exited(&mut self) -> i32 {
        loop {
            if let Some(code) = self.exit {
                return code;
            }
            match waitpid(self.pid, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) => {}
                Ok(status) => {
                    self.exit = exit_code(status);
                    info!(code = ?self.exit, "command ended");
                    continue;
                }
                Err(e) => {
                    warn!("waiting for the watchdog: {e}");
                    self.exit = Some(1);
                    continue;
                }
            }
            tokio::select! {
                _ = self.sigchld.recv() => {}
                () = sleep(POLL) => {}
            }
        }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if self.exit.is_none() {
            // Whatever path got here, the work must not outlive us: kill now.
            self.send(Control::Stop {
                grace: 0,
                kill_by: 0,
            });
        }
    }
}
