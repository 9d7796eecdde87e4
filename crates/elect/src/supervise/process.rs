//! Small facts about processes that elect, the watchdog and the PID
//! namespace's init all use: which signals the keepers ignore, how a
//! command is shown, how an end is reported, how fds are put in place
//! for an exec.

use std::ffi::OsString;
use std::os::fd::RawFd;

use nix::sys::signal::{SigHandler, Signal, signal};
use nix::sys::wait::WaitStatus;

/// Signals the watchdog and the guard ignore: what a terminal, a hang-up, a
/// plain `kill` or job control would send. They act on `elect`'s word and
/// the deadline only.
pub(crate) const DEAF_TO: [Signal; 8] = [
    Signal::SIGINT,
    Signal::SIGQUIT,
    Signal::SIGHUP,
    Signal::SIGTERM,
    Signal::SIGTSTP,
    Signal::SIGTTIN,
    Signal::SIGTTOU,
    Signal::SIGPIPE,
];

/// `CMD ARGS...` for messages.
pub fn display_command(command: &[OsString]) -> String {
    command
        .iter()
        .map(|a| a.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ")
}

/// How a process ended, as a shell would report it.
pub fn exit_code(status: WaitStatus) -> Option<i32> {
    match status {
        WaitStatus::Exited(_, code) => Some(code),
        WaitStatus::Signaled(_, sig, _) => Some(128 + sig as i32),
        _ => None,
    }
}

/// Gives the calling process the nice value `nice` back: the command's own
/// priority, below a watchdog or init that raised theirs. Between fork and
/// exec of the command: async-signal-safe.
pub(crate) fn restore_priority(nice: i32) {
    // SAFETY: setpriority takes plain integers.
    unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) };
}

/// Makes the calling process run ahead of ordinary ones, for the
/// watchdog and the guard, whose whole job is to act on time on a busy
/// machine; returns the nice value it had, which the command gets back.
///
/// Nice -20 alone is not enough: with the scheduler's autogroups (the
/// default on desktop and many server kernels) CPU time is shared between
/// sessions first, and a nice value counts only within its session. The
/// watchdog leads a session of its own with the command in it; a
/// watchdog asleep on one core while its command spun on another waited
/// up to 300 ms for the CPU at nice -20. So it takes `SCHED_FIFO` (the
/// lowest real-time priority) where it may, with `SCHED_RESET_ON_FORK`
/// so nothing it starts inherits it; nice -20 where it may not.
pub(crate) fn take_precedence() -> i32 {
    // SAFETY: getpriority and setpriority take plain integers.
    unsafe {
        *libc::__errno_location() = 0;
        let was = libc::getpriority(libc::PRIO_PROCESS, 0);
        let was = if *libc::__errno_location() == 0 {
            was
        } else {
            0
        };
        if !take_real_time() {
            libc::setpriority(libc::PRIO_PROCESS, 0, -20);
        }
        was
    }
}

/// The real-time part of [`take_precedence`]: whether the calling process
/// now runs `SCHED_FIFO` (it may already have). Async-signal-safe: elect
/// calls it between fork and exec of the watchdog, so that the watchdog's
/// own start is not what comes late; it leaves the nice value alone, which
/// the watchdog reads as the command's.
pub(crate) fn take_real_time() -> bool {
    // SAFETY: sched_getscheduler and sched_setscheduler take plain
    // integers and a pointer to a local.
    unsafe {
        if libc::sched_getscheduler(0) & !libc::SCHED_RESET_ON_FORK == libc::SCHED_FIFO {
            return true;
        }
        let param = libc::sched_param { sched_priority: 1 };
        libc::sched_setscheduler(0, libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK, &param) == 0
    }
}

/// Whether this process may take a real-time priority: it has
/// `CAP_SYS_NICE`, or a real-time priority limit above zero. (A kernel
/// with real-time group scheduling may still refuse in a cgroup with no
/// real-time budget.)
pub fn real_time_allowed() -> bool {
    const CAP_SYS_NICE: u32 = 23;
    let capable = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let hex = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?;
            u64::from_str_radix(hex.trim(), 16).ok()
        })
        .is_some_and(|caps| caps & (1 << CAP_SYS_NICE) != 0);
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the local it is given.
    let limited = unsafe { libc::getrlimit(libc::RLIMIT_RTPRIO, &mut limit) } == 0;
    capable || (limited && limit.rlim_cur > 0)
}

/// Ignores the signals a supervising process must outlive (Ctrl-C, a
/// terminal's hang-up...): it ends when its command's group is gone.
pub(crate) fn ignore_signals() {
    for sig in DEAF_TO {
        // SAFETY: SIG_IGN installs no handler code.
        let _ = unsafe { signal(sig, SigHandler::SigIgn) };
    }
}

/// Puts two fds on their targets without close-on-exec, for the exec that
/// follows: out of the way first, so the two moves cannot clobber each
/// other whatever numbers the fds have. Async-signal-safe: used between
/// fork and exec.
pub(crate) fn move_fds([(a, a_target), (b, b_target)]: [(RawFd, RawFd); 2]) -> std::io::Result<()> {
    // SAFETY: fcntl on fd numbers.
    let (a, b) = unsafe {
        (
            libc::fcntl(a, libc::F_DUPFD_CLOEXEC, 10),
            libc::fcntl(b, libc::F_DUPFD_CLOEXEC, 10),
        )
    };
    if a < 0 || b < 0 {
        return Err(std::io::Error::last_os_error());
    }
    move_fd(a, a_target)?;
    move_fd(b, b_target)
}

/// Puts `fd` on `target` without close-on-exec, for the exec that follows.
/// Async-signal-safe: used between fork and exec.
pub(crate) fn move_fd(fd: RawFd, target: RawFd) -> std::io::Result<()> {
    // SAFETY: fcntl and dup2 on fd numbers.
    let ok = unsafe {
        if fd == target {
            libc::fcntl(target, libc::F_SETFD, 0) >= 0
        } else {
            libc::dup2(fd, target) >= 0
        }
    };
    if ok {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}
