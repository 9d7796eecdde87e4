//! Small facts about processes that elect, the watchdog and the PID
//! namespace's init all use: which signals the keepers ignore, how a
//! command is shown, how an end is reported.

use std::ffi::OsString;

use nix::sys::signal::Signal;
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
