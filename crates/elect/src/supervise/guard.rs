//! The guard: a second small process that kills the command's group if
//! the watchdog dies first.
//!
//! The watchdog starts `elect __guard <pgid> [<cgroup>]` in a session of
//! its own, with the read end of a pipe on fd 3 that only the watchdog
//! writes. The guard waits on it: `done` means the group is gone and it
//! leaves; anything else (the pipe closed by the watchdog's death, however
//! it died) and it SIGKILLs the group (and the cgroup, where there is
//! one), then removes the cgroup. Like the watchdog it runs at a real-time
//! priority, so it kills on time on a busy machine. Why the tree needs
//! two processes is told in the [`supervise`](super) module doc.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use super::contain::Cgroup;
use super::process::{ignore_signals, move_fd, take_precedence, take_real_time};

/// The hidden subcommand that runs the guard.
pub const SUBCOMMAND: &str = "__guard";

/// The fd the guard reads the watchdog's word on.
const PIPE_FD: RawFd = 3;

/// The watchdog's end of the guard's pipe.
pub(super) struct Guard {
    pipe: std::fs::File,
    pub(super) pid: Pid,
}

impl Guard {
    /// Starts `elect __guard <pgid> [<cgroup>]` with the read end of a
    /// pipe on fd 3.
    pub(super) fn start(pgid: Pid, cgroup: Option<&std::path::Path>) -> std::io::Result<Guard> {
        let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
        let exe = std::env::current_exe()?;
        let mut cmd = Command::new(exe);
        cmd.arg(SUBCOMMAND).arg(pgid.to_string());
        if let Some(cgroup) = cgroup {
            cmd.arg(cgroup);
        }
        let read_fd = read.as_raw_fd();
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                libc::setsid();
                // Real time from its start, as the watchdog: nothing
                // inherits ours.
                take_real_time();
                move_fd(read_fd, PIPE_FD)
            });
        }
        let child = cmd.stdin(std::process::Stdio::null()).spawn()?;
        drop(read);
        Ok(Guard {
            pipe: std::fs::File::from(write),
            pid: Pid::from_raw(child.id() as i32),
        })
    }

    /// The group is gone: the guard may leave without killing anything.
    pub(super) fn release(mut self) {
        let _ = self.pipe.write_all(b"done\n");
    }
}

/// Runs the guard: waits until the watchdog says the group is gone, or
/// dies; in the second case SIGKILLs the group. Returns its exit code.
pub fn main(args: &[OsString]) -> i32 {
    ignore_signals();
    // It must kill on time too; the watchdog's priority is not inherited.
    take_precedence();
    let Some(pgid) = args
        .first()
        .and_then(|a| a.to_str())
        .and_then(|a| a.parse::<i32>().ok())
        .filter(|p| *p > 1)
    else {
        eprintln!("elect {SUBCOMMAND}: expected a process group id");
        return 2;
    };
    // SAFETY: the watchdog passes the read end of the guard's pipe as fd 3.
    let mut pipe = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(PIPE_FD) });
    let mut said = Vec::new();
    let _ = pipe.read_to_end(&mut said);
    let cgroup = args.get(1).map(|dir| Cgroup::at(dir.into()));
    if said != b"done\n" {
        if let Some(cgroup) = &cgroup {
            cgroup.signal(Signal::SIGKILL);
        }
        match killpg(Pid::from_raw(pgid), Signal::SIGKILL) {
            Ok(()) => eprintln!("elect: the watchdog died; killed the command's group {pgid}"),
            Err(Errno::ESRCH) => {}
            Err(e) => eprintln!("elect {SUBCOMMAND}: killing group {pgid}: {e}"),
        }
    }
    if let Some(cgroup) = cgroup {
        // Empty within moments of the kill; removed so nothing is left.
        for _ in 0..200 {
            if !cgroup.populated() {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        cgroup.remove();
    }
    0
}
