//! The first process of the command's PID namespace (`elect __init`), under
//! the `pidns` level of [containment](super::contain).
//!
//! The watchdog starts it as its child right after moving its children
//! into a new PID namespace, so this process is that namespace's init:
//! when it dies, by any signal, the kernel kills every other process in the
//! namespace. It dies with the watchdog (`PR_SET_PDEATHSIG`, set before its
//! exec), so the whole tree goes with the watchdog, whatever killed it.
//!
//! Meanwhile it does an init's work: starts the command (in a process
//! group of its own), reaps every orphan, passes the signals it gets on to
//! every process of the namespace (the watchdog signals the tree through
//! it), reports the command's exit code to the watchdog on fd 3 as soon as
//! the command ends (what the command left behind then gets the grace),
//! and exits, with that code, once nothing else is left.

use std::ffi::OsString;
use std::io::Write;
use std::os::fd::{AsFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SigHandler, SigSet, Signal, kill, signal};
use nix::sys::signalfd::SignalFd;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use super::contain;
use super::process::{DEAF_TO, display_command, exit_code, restore_priority};

/// The hidden subcommand that runs the init.
pub(crate) const SUBCOMMAND: &str = "__init";

/// Where the init writes `exited <code>` for the watchdog.
pub(crate) const REPORT_FD: RawFd = 3;

/// The read end of a pipe only the watchdog holds open: end of file means
/// the watchdog died before this process could bind its death to it.
pub(crate) const LIFELINE_FD: RawFd = 4;

/// What the init passes on to the whole namespace.
const FORWARDED: [Signal; 8] = [
    Signal::SIGHUP,
    Signal::SIGINT,
    Signal::SIGQUIT,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
    Signal::SIGTERM,
    Signal::SIGCONT,
    Signal::SIGWINCH,
];

fn forwarded_mask() -> SigSet {
    let mut mask = SigSet::empty();
    FORWARDED.into_iter().for_each(|sig| mask.add(sig));
    mask
}

/// Blocks what the init forwards, in the watchdog's child before it
/// becomes the init: a signal sent before the init is ready then waits
/// for it instead of being dropped (a namespace's init drops what it has
/// no handler for). Async-signal-safe.
pub(crate) fn block_forwarded() -> nix::Result<()> {
    forwarded_mask().thread_block()
}

/// The report line for the command's exit `code`.
pub(crate) fn report_line(code: i32) -> String {
    format!("exited {code}\n")
}

/// The code in a report line.
pub(crate) fn parse_report(line: &str) -> Option<i32> {
    line.trim().strip_prefix("exited ")?.parse().ok()
}

/// Runs the init; returns its exit code: the command's (128+N for signal
/// N), 127 if it could not be started.
pub(crate) fn main(args: &[OsString]) -> i32 {
    let command: Vec<OsString> = args
        .iter()
        .skip_while(|a| *a != "--")
        .skip(1)
        .cloned()
        .collect();
    if command.is_empty() {
        eprintln!("elect {SUBCOMMAND}: no command");
        return 2;
    }
    // The watchdog's priority, which we inherited, is not the command's:
    // the command gets the one the watchdog had at its start.
    let nice: i32 = args
        .iter()
        .position(|a| a == "--nice")
        .and_then(|i| args.get(i + 1)?.to_str()?.parse().ok())
        .unwrap_or(0);
    // SAFETY: the watchdog passes the report pipe's write end as fd 3 and
    // the lifeline's read end as fd 4; nothing else here owns them. Both
    // are marked close-on-exec for the command by the watchdog.
    let (mut report, lifeline) = unsafe {
        (
            std::fs::File::from(OwnedFd::from_raw_fd(REPORT_FD)),
            OwnedFd::from_raw_fd(LIFELINE_FD),
        )
    };
    if watchdog_gone(&lifeline) {
        return 1;
    }
    drop(lifeline);
    // A /proc of our namespace, in a mount namespace of our own, where we
    // may; else the host's (see the module doc of `contain`).
    let _ = contain::mount_own_proc();

    let signals = match signal_fd() {
        Ok(fd) => fd,
        Err(e) => {
            eprintln!("elect {SUBCOMMAND}: {e}");
            return 1;
        }
    };
    let child = match spawn(&command, nice) {
        Ok(child) => child,
        Err(e) => {
            eprintln!("elect: cannot start {}: {e}", display_command(&command));
            let _ = report.write_all(report_line(127).as_bytes());
            return 127;
        }
    };
    reap(&signals, child, &mut report)
}

/// Forwarded signals and SIGCHLD, on a signalfd: blocked (the forwarded
/// ones since before our exec, see `block_forwarded`), at their default
/// disposition (the watchdog ignored some, and ignored signals would not
/// queue).
fn signal_fd() -> Result<SignalFd, String> {
    let mut mask = forwarded_mask();
    mask.add(Signal::SIGCHLD);
    for sig in mask.iter() {
        // SAFETY: SIG_DFL installs no handler code.
        let _ = unsafe { signal(sig, SigHandler::SigDfl) };
    }
    mask.thread_block()
        .map_err(|e| format!("blocking signals: {e}"))?;
    SignalFd::new(&mask).map_err(|e| format!("signalfd: {e}"))
}

/// Starts the command in a group of its own, its signals unblocked and
/// at their defaults, with the priority `nice` the watchdog had.
fn spawn(command: &[OsString], nice: i32) -> std::io::Result<Pid> {
    let mut cmd = Command::new(&command[0]);
    cmd.args(&command[1..]).process_group(0);
    // SAFETY: only async-signal-safe calls (sigprocmask, signal) between
    // fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            SigSet::all()
                .thread_unblock()
                .map_err(std::io::Error::from)?;
            for sig in DEAF_TO {
                libc::signal(sig as i32, libc::SIG_DFL);
            }
            restore_priority(nice);
            Ok(())
        });
    }
    cmd.spawn().map(|child| Pid::from_raw(child.id() as i32))
}

/// The init's life once the command runs: forwards signals to every
/// process of the namespace, reaps whatever dies, reports the command's
/// end on `report`, and returns once nothing is left in the namespace:
/// the command's code, or 1 if signals could not be read.
fn reap(signals: &SignalFd, child: Pid, report: &mut std::fs::File) -> i32 {
    let mut code = None;
    loop {
        match signals.read_signal() {
            Ok(Some(info)) => {
                let Ok(sig) = Signal::try_from(info.ssi_signo as i32) else {
                    continue;
                };
                if sig != Signal::SIGCHLD {
                    // Every process of the namespace but ourselves.
                    let _ = kill(Pid::from_raw(-1), sig);
                    continue;
                }
            }
            Ok(None) | Err(Errno::EINTR) => continue,
            Err(e) => {
                eprintln!("elect {SUBCOMMAND}: reading signals: {e}");
                return 1;
            }
        }
        loop {
            match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) => break,
                Ok(status) => {
                    if status.pid() == Some(child) {
                        let exited = exit_code(status).unwrap_or(1);
                        code = Some(exited);
                        let _ = report.write_all(report_line(exited).as_bytes());
                    }
                }
                // Nothing left in the namespace.
                Err(Errno::ECHILD) => return code.unwrap_or(0),
                Err(_) => break,
            }
        }
    }
}

/// Whether the lifeline reads end of file: the watchdog is gone.
fn watchdog_gone(lifeline: &OwnedFd) -> bool {
    let mut fds = [PollFd::new(lifeline.as_fd(), PollFlags::POLLIN)];
    matches!(poll(&mut fds, PollTimeout::ZERO), Ok(n) if n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_round_trip() {
        for code in [0, 1, 127, 137] {
            assert_eq!(parse_report(&report_line(code)), Some(code));
        }
        assert_eq!(parse_report("started 3"), None);
    }
}
