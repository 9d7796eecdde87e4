//! The wrapped command, seen from `elect`: a [watchdog](super::watchdog)
//! process, in a session of its own, that owns the command's process group
//! and enforces the deadline even when `elect` cannot.
//!
//! `elect` talks to it over a pipe (deadline extensions, forwarded signals,
//! stop requests) and learns the command's end from the watchdog's exit,
//! which comes only once the command's whole group is gone. The watchdog
//! tells `elect` the command's process group, so that `elect` can kill the
//! group itself if the watchdog dies or cannot act (stopped by hand).

use crate::credentials::PASSWORD_VAR;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::time::Duration;

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::signal::{Signal, killpg};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use tokio::signal::unix::{SignalKind, signal};
use tokio::time::sleep;
use tracing::{debug, error, info, warn};

use super::contain::{Cgroup, Level, group_lives};
use super::process::move_fds;
use super::process::{display_command, exit_code, take_real_time};
use super::watchdog::{self, Control};
use crate::clock::BootInstant;
use crate::error::{Error, Result};

/// How often the watchdog's exit is checked when no SIGCHLD arrives.
const POLL: Duration = Duration::from_millis(20);

/// How the command's supervision ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The watchdog saw the command's group gone; the command's exit code
    /// (128+N for signal N; [`watchdog::REFUSED`] if it was never started).
    Command(i32),
    /// The watchdog itself died of signal N; `elect` has killed the
    /// command's group and seen it gone.
    WatchdogKilled(i32),
}

pub struct Child {
    /// The watchdog's pid.
    pid: Pid,
    /// The command's process group, once the watchdog has said it.
    pgid: Option<Pid>,
    /// The command's cgroup, at that level of containment: what `setsid`
    /// took out of the group is still in it.
    cgroup: Option<Cgroup>,
    control: std::fs::File,
    ended: Option<Ended>,
    sigchld: tokio::signal::unix::Signal,
    /// Whether a full control pipe has been reported already.
    warned_full: bool,
    /// A health check's: its end is logged at debug, not info.
    quiet: bool,
}

impl Child {
    /// Starts `command` under a watchdog (`watchdog` is the `elect`
    /// executable) that kills its group at `deadline` unless extended.
    ///
    /// `quiet`: its start and end are logged at debug level (a health
    /// check's, every interval), not info.
    ///
    /// Errors: the watchdog could not be started. A command that cannot be
    /// started makes the watchdog exit with 127.
    pub async fn spawn(
        watchdog: &Path,
        command: &[OsString],
        env: &[(&str, String)],
        grace: Duration,
        level: Level,
        deadline: BootInstant,
        quiet: bool,
    ) -> Result<Child> {
        // Registered before the fork so no SIGCHLD can be missed.
        let sigchld =
            signal(SignalKind::child()).map_err(|e| Error::io("listening for SIGCHLD", e))?;
        let pipe = || {
            nix::unistd::pipe2(OFlag::O_CLOEXEC)
                .map_err(|e| Error::io("creating the watchdog's pipes", e.into()))
        };
        let (control_read, control_write) = pipe()?;
        let (status_read, status_write) = pipe()?;
        let (control_fd, status_fd) = (control_read.as_raw_fd(), status_write.as_raw_fd());
        let mut cmd = std::process::Command::new(watchdog);
        cmd.arg(watchdog::SUBCOMMAND)
            .args(["--grace", &grace.as_nanos().to_string()])
            .args(["--deadline", &deadline.as_nanos().to_string()])
            .args(["--contain", level.name()])
            .arg("--")
            .args(command)
            // The password is elect's, not the command's.
            .env_remove(PASSWORD_VAR)
            .envs(env.iter().map(|(k, v)| (k, v)));
        // SAFETY: setsid, sched_setscheduler, fcntl, dup2 and close are
        // async-signal-safe; this
        // runs in the forked child before exec.
        unsafe {
            cmd.pre_exec(move || {
                // A session of its own: no terminal signal, and no signal
                // aimed at elect's process group, reaches the watchdog.
                if libc::setsid() < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // Real-time from its first instruction (see
                // `take_precedence`): a watchdog started in a session of
                // its own on a busy machine took longer to start than
                // some leaderships last.
                take_real_time();
                move_fds([
                    (control_fd, watchdog::CONTROL_FD),
                    (status_fd, watchdog::STATUS_FD),
                ])
            });
        }
        let child = cmd.spawn().map_err(|source| Error::Spawn {
            command: display_command(command),
            source,
        })?;
        drop((control_read, status_write));
        let pid = Pid::from_raw(child.id() as i32);
        // Reaped with waitpid below; std's handle is not needed.
        drop(child);
        // The group, or end of file if the watchdog refused or failed to
        // start the command (its exit says which).
        let status = std::fs::File::from(status_read);
        let (pgid, cgroup) = tokio::task::spawn_blocking(move || {
            let mut line = String::new();
            BufReader::new(status).read_line(&mut line).ok()?;
            parse_started(&line)
        })
        .await
        .ok()
        .flatten()
        .map_or((None, None), |(pgid, cgroup)| (Some(pgid), cgroup));
        // Writes must never block the runtime, nor elect on a stuck
        // watchdog: a full pipe drops the message (see `send`).
        let _ = nix::fcntl::fcntl(
            &control_write,
            nix::fcntl::FcntlArg::F_SETFL(OFlag::O_NONBLOCK),
        );
        let started = format!("started {}", display_command(command));
        match quiet {
            true => debug!(
                watchdog = pid.as_raw(),
                group = pgid.map(Pid::as_raw),
                "{started}"
            ),
            false => info!(
                watchdog = pid.as_raw(),
                group = pgid.map(Pid::as_raw),
                "{started}"
            ),
        }
        Ok(Child {
            pid,
            pgid,
            cgroup,
            control: std::fs::File::from(control_write),
            ended: None,
            sigchld,
            warned_full: false,
            quiet,
        })
    }

    fn send(&mut self, message: Control) {
        match self.control.write_all(message.encode().as_bytes()) {
            Ok(()) => {}
            // The watchdog reads at once unless it is stopped; elect then
            // kills the group itself at the deadline (see `kill_group`).
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if !std::mem::replace(&mut self.warned_full, true) {
                    warn!("the watchdog does not read its control pipe; is it stopped?");
                }
            }
            // A closed pipe means the watchdog is gone, which `exited` reports.
            Err(e) => debug!("watchdog control: {e}"),
        }
    }

    /// Lets the command run until `deadline`.
    pub fn extend(&mut self, deadline: BootInstant) {
        self.send(Control::Deadline(deadline.as_nanos()));
    }

    /// Forwards `sig` to the command's group.
    pub fn forward(&mut self, sig: Signal) {
        self.send(Control::Signal(sig as i32));
    }

    /// Asks for the group to stop: `sig` now (if any), SIGKILL once `grace`
    /// has passed or at `kill_by`, whichever is first. Asking again
    /// delivers the new signal and can only bring SIGKILL closer.
    pub fn stop(&mut self, sig: Option<Signal>, grace: Duration, kill_by: BootInstant) {
        self.send(Control::Stop {
            grace: grace.as_nanos() as u64,
            kill_by: kill_by.as_nanos(),
            signal: sig,
        });
    }

    /// SIGKILLs the command's group from here, without the watchdog (for
    /// when the watchdog has died or does not act), and waits until no
    /// live process is left in it. Cancel safe.
    ///
    /// At the cgroup level, the cgroup too, killed again until it is empty
    /// (a process that left the group with `setsid` is still in it): we
    /// resign only after that, never on a timer.
    pub async fn kill_group_and_wait(&self) {
        self.kill_group();
        loop {
            let group = self.pgid.is_some_and(group_lives);
            let cgroup = self.cgroup.as_ref().is_some_and(Cgroup::populated);
            if !group && !cgroup {
                break;
            }
            sleep(Duration::from_millis(5)).await;
            if let Some(cgroup) = self.cgroup.as_ref().filter(|_| cgroup) {
                // What forked between the kill and the freeze of a kernel
                // without `cgroup.kill`.
                cgroup.signal(Signal::SIGKILL);
            }
        }
        if let Some(cgroup) = &self.cgroup {
            cgroup.remove();
        }
    }

    fn kill_group(&self) {
        if let Some(pgid) = self.pgid {
            match killpg(pgid, Signal::SIGKILL) {
                Ok(()) => warn!(group = pgid.as_raw(), "killed the command's group directly"),
                Err(Errno::ESRCH) => {}
                Err(e) => error!(group = pgid.as_raw(), "killing the command's group: {e}"),
            }
        }
        if let Some(cgroup) = &self.cgroup {
            cgroup.signal(Signal::SIGKILL);
        }
    }

    /// Waits until the command's whole group is gone. Cancel safe.
    pub async fn ended(&mut self) -> Ended {
        loop {
            if let Some(ended) = self.ended {
                return ended;
            }
            match waitpid(self.pid, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) => {}
                Ok(WaitStatus::Signaled(_, sig, _)) => {
                    // The watchdog did not finish its job: finish it here,
                    // before anyone may resign.
                    error!("the watchdog died of {sig}");
                    self.kill_group_and_wait().await;
                    self.ended = Some(Ended::WatchdogKilled(sig as i32));
                    continue;
                }
                Ok(status) => {
                    let code = exit_code(status).unwrap_or(1);
                    match self.quiet {
                        true => debug!(code, "command ended"),
                        false => info!(code, "command ended"),
                    }
                    self.ended = Some(Ended::Command(code));
                    continue;
                }
                Err(e) => {
                    warn!("waiting for the watchdog: {e}");
                    self.kill_group_and_wait().await;
                    self.ended = Some(Ended::Command(1));
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
        if self.ended.is_none() {
            // Whatever path got here, the work must not outlive us: kill now.
            self.send(Control::Stop {
                grace: 0,
                kill_by: 0,
                signal: None,
            });
            self.kill_group();
        }
    }
}

/// The watchdog's `started <pgid> [<cgroup dir>]`.
fn parse_started(line: &str) -> Option<(Pid, Option<Cgroup>)> {
    let rest = line.trim_end_matches('\n').strip_prefix("started ")?;
    let (pgid, dir) = match rest.split_once(' ') {
        Some((pgid, dir)) => (pgid, Some(dir)),
        None => (rest, None),
    };
    let pgid = pgid.parse::<i32>().ok().filter(|p| *p > 1)?;
    let cgroup = dir.map(|d| Cgroup::at(std::path::PathBuf::from(d)));
    Some((Pid::from_raw(pgid), cgroup))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_started_line_names_the_group_and_the_cgroup_if_any() {
        let (pgid, cgroup) = parse_started("started 42\n").unwrap();
        assert_eq!((pgid.as_raw(), cgroup.is_none()), (42, true));
        let (pgid, cgroup) = parse_started("started 7 /sys/fs/cgroup/a b/elect-cmd-9\n").unwrap();
        assert_eq!(pgid.as_raw(), 7);
        assert_eq!(
            cgroup.unwrap().dir(),
            std::path::Path::new("/sys/fs/cgroup/a b/elect-cmd-9")
        );
        assert!(parse_started("started 1\n").is_none(), "never init's group");
        assert!(parse_started("refused\n").is_none());
    }
}
