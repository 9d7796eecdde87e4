//! Running a command only while this process leads.
//!
//! The supervisor reads [`Leadership`](crate::Leadership) snapshots and nothing else: it starts
//! the command when a snapshot says we lead, and stops its whole process
//! group when a snapshot says we no longer do, when the fencing token
//! changes, or when the leadership deadline passes without a renewal, even
//! if the backend has said nothing (it may be stuck). SIGKILL lands no later
//! than the deadline whatever `--grace` says.
//!
//! The command runs under a watchdog process (`elect __watchdog`), in a
//! session of its own, that holds the deadline itself, so a frozen or
//! killed `elect` still cannot outlive its leadership through the command.
//!
//! # Who can reach the command's tree
//!
//! The command must never outlive our leadership, whatever happens to
//! `elect`, the watchdog or their process group:
//!
//! - **Own session.** `elect` starts the watchdog with `setsid()`, so the
//!   watchdog and the command live in a session of their own with no
//!   controlling terminal. A terminal's Ctrl-C, Ctrl-\ and Ctrl-Z, a
//!   hang-up, and `kill -SIG -- -PGID` aimed at `elect`'s group reach
//!   `elect` alone, which handles them deliberately (stop the command, wait
//!   for its group to die, then resign). The watchdog also ignores the
//!   keyboard, hang-up, termination and job-control signals, so only
//!   SIGKILL (or SIGSTOP sent to its pid by hand) can stop it.
//! - **`elect` gone.** End of file on fd 3 means `elect` died or was
//!   killed: the watchdog sends SIGTERM to the group and SIGKILL within
//!   `min(grace, 1 s)`, never after the deadline. `elect` did not resign,
//!   so nobody else can be elected before that deadline.
//! - **Watchdog gone.** The command runs with `PR_SET_PDEATHSIG` = SIGKILL
//!   bound to the watchdog, and a **guard** process (`elect __guard`, also
//!   in a session of its own and deaf to every catchable signal) holds the
//!   other end of a pipe only the watchdog writes to: when the watchdog
//!   dies, the pipe closes and the guard SIGKILLs the command's whole group.
//!   `elect` sees the watchdog end by a signal and kills the group too
//!   before it resigns.
//! - **Both gone** (e.g. `pkill -9 -x elect` hitting `elect` and the
//!   watchdog together): the guard still kills the group.
//! - **The command leaves its group** (`setsid`, `setpgid`, a program that
//!   daemonizes itself): [containment](contain) holds the whole tree, not
//!   the group. Under `pidns` (a PID namespace whose init dies with the
//!   watchdog) nothing of the tree outlives the watchdog, whatever kills
//!   it and everything else of `elect`'s; `cgroup` and `subreaper` hold
//!   it while the watchdog (and, for `cgroup`, the guard) lives. The table
//!   in [`contain`] says which deaths and escapes each level survives; the
//!   fencing token is the defence beyond them.
//!
//!
//! # Embedding
//!
//! [`run`] starts the watchdog by executing [`ChildEnv::watchdog`] with a
//! hidden first argument. A host binary other than `elect` must therefore
//! hand those invocations over before doing anything else, as the first
//! lines of its `main`:
//!
//! ```no_run
//! // First thing in main():
//! if let Some(code) = elect::supervise::dispatch_hidden() {
//!     std::process::exit(code);
//! }
//! // ... then the program itself, which may call elect::supervise::run
//! // with ChildEnv::watchdog = std::env::current_exe()
//! ```
//!
//! `examples/run_while_leading.rs` is a whole program that does so.
//!
//! It reports on a [`Work`](crate::work::Work) whether the command's group
//! is alive, so the backend can hold on to what keeps successors out until
//! the work is gone.
//!
//! # Containment, resolved once
//!
//! [`resolve`] tries the containment asked for in a throwaway process, on
//! a blocking thread. A caller that must refuse an unavailable level
//! before campaigning (as `elect run` does, exit 2) resolves it first and
//! hands the level on with [`ChildConfig::with_resolved`]; [`run`] then
//! probes nothing. Otherwise [`run`] resolves it at its start.
//!
//! # Periodic jobs
//!
//! `once::PeriodicJob` (etcd and ZooKeeper) runs the command once per
//! period across every host started for it (`elect run --once`), around
//! [`run`]: opened before campaigning, its turn decided in the term that
//! runs it, the period recorded as done before resigning. It lives above
//! both this module and the backends, whose records it reads.

pub(crate) mod child;
mod command;
pub mod contain;
mod guard;
pub(crate) mod init;
mod process;
pub(crate) mod run;
pub(crate) mod watchdog;

pub use command::{ChildConfig, ChildEnv, DEFAULT_GRACE, Finish, Restart};
pub use contain::{Containment, Level, Resolved};
pub use process::real_time_allowed;
pub use run::{forwarded, is_shutdown, resolve, restart_delay, run};
pub use watchdog::KILL_MARGIN;

use std::ffi::OsString;

/// Hands over the hidden subcommands of the watchdog and its guard, which
/// [`run`] starts by executing the host binary again: call it first in
/// `main` and exit with the code it returns, if any.
pub fn dispatch_hidden() -> Option<i32> {
    let args: Vec<OsString> = std::env::args_os().collect();
    let which = args.get(1)?;
    if which == watchdog::SUBCOMMAND {
        Some(watchdog::main(&args[2..]))
    } else if which == guard::SUBCOMMAND {
        Some(guard::main(&args[2..]))
    } else if which == init::SUBCOMMAND {
        Some(init::main(&args[2..]))
    } else if which == contain::PROBE_SUBCOMMAND {
        Some(contain::probe_main(&args[2..]))
    } else {
        None
    }
}
