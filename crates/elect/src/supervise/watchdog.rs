//! The watchdog: a small process between `elect` and the wrapped command
//! that holds the leadership deadline itself.
//!
//! `elect` runs `elect __watchdog --grace <ns> --deadline <ns> -- CMD...`
//! (its own executable) with the read end of a control pipe on fd 3 and the
//! write end of a status pipe on fd 4. The watchdog refuses to start CMD if
//! the deadline has already passed; otherwise it starts CMD as the leader of
//! a new process group, reports that group on fd 4 (`started <pgid>`, and
//! the command's cgroup at that level: `started <pgid> <dir>`), is
//! the subreaper of its tree, and kills the whole group with SIGKILL the
//! moment the deadline passes, on its own. `elect` moves the deadline
//! forward with each renewal.
//!
//! Who can reach the command's tree, and what happens when `elect`, the
//! watchdog or both die, is told in the [`supervise`](super) module doc.
//!
//! Control lines on fd 3 (times are CLOCK_BOOTTIME nanoseconds, the same
//! clock in every process on the host, and one that keeps counting while
//! the machine is suspended: a laptop or VM resumed past the deadline has
//! its command killed within one tick of waking, not a suspend later, as
//! with CLOCK_MONOTONIC, which stops during a suspend):
//! - `deadline <ns>`: the command may run until then;
//! - `signal <n>`: forward signal `n` to the group;
//! - `stop <grace ns> <kill by ns> <signal n>`: signal `n` now (none if
//!   `n` is 0), SIGKILL at the earlier of now + grace and kill-by. A later
//!   stop still delivers its signal; its SIGKILL can only come closer.
//!
//! The watchdog exits once the group is gone, with CMD's exit code (128+N
//! if it died of signal N), 127 if CMD could not be started, and
//! [`REFUSED`] if the deadline had passed before CMD was started.
//!
//! # On a busy machine
//!
//! The promise is that the tree is *dead* by the deadline, not that a
//! SIGKILL was sent then. So the watchdog:
//! - runs at the lowest real-time priority (`SCHED_FIFO` 1, from before
//!   its exec; nice -20 where real time is not allowed; either needs
//!   `CAP_SYS_NICE`), so a machine whose cores are all busy still wakes it
//!   on time, whatever sessions share the cores (see
//!   `process::take_precedence`); nothing it starts inherits that, and the
//!   command gets its own priority back;
//! - kills [`KILL_MARGIN`] before the deadline, which covers its own
//!   wake-up and the victims' exit under load (measured: see the book's
//!   safety section);
//! - raises each victim to a real-time priority right after its SIGKILL,
//!   since a process killed on a busy core still needs the CPU to exit
//!   (see `contain::hasten`);
//! - counts a process as dead only once it is a zombie or gone, and kills
//!   again on every pass until nothing of the tree lives; only then does
//!   it exit, and only then does `elect` resign.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::Duration;

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::Signal;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use super::contain::{Cgroup, Level, Tree, why_alive};
use super::guard::Guard;
use super::init;
use super::process::{
    DEAF_TO, display_command, exit_code, ignore_signals, move_fds, restore_priority,
    take_precedence,
};
use crate::clock::BootInstant;

/// The hidden subcommand that runs the watchdog.
pub const SUBCOMMAND: &str = "__watchdog";

/// The fd the control pipe arrives on.
pub const CONTROL_FD: RawFd = 3;

/// The fd the status pipe (watchdog to `elect`) arrives on.
pub const STATUS_FD: RawFd = 4;

/// The watchdog's exit code when the deadline had passed before the
/// command could be started.
pub const REFUSED: i32 = 125;

/// How long before the deadline the watchdog sends SIGKILL: what its own
/// wake-up and the tree's exit take on a busy machine. Under `stress-ng
/// --cpu 0` on two cores, with the watchdog at nice -20 (now real time)
/// and its victims raised to a real-time priority, a tree killed 10 ms ahead was dead
/// 2-9 ms after the kill when the test ran alone, but up to 23 ms after it
/// in one run of ten beside the rest of the suite; 25 ms covers both
/// (`tests/supervise.rs`, `the_tree_is_dead_by_the_deadline_on_a_busy_machine`).
pub const KILL_MARGIN: Duration = Duration::from_millis(25);

/// How often a killed tree is looked at again (and killed again) until
/// nothing of it may run.
const KILLED_TICK: Duration = Duration::from_millis(2);

/// How long a killed tree may take to die before the watchdog says which
/// processes live on, and why.
const STUCK_AFTER: Duration = Duration::from_secs(1);

/// How often the group is reaped and checked when nothing else happens.
/// The command's own end wakes the watchdog at once (see
/// [`Watchdog::supervise`]); what it left behind is checked every tick.
const TICK: Duration = Duration::from_millis(20);

/// The boot clock in the nanoseconds the control messages carry (see
/// [`crate::clock`]: it counts through a suspend, so a machine resumed
/// past the deadline kills the group within a tick).
fn boottime_now() -> u64 {
    BootInstant::now().as_nanos()
}

/// One control message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    Deadline(u64),
    Signal(i32),
    Stop {
        grace: u64,
        kill_by: u64,
        /// Sent at once; `None` only moves SIGKILL's time.
        signal: Option<Signal>,
    },
}

impl Control {
    pub fn encode(self) -> String {
        match self {
            Control::Deadline(at) => format!("deadline {at}\n"),
            Control::Signal(n) => format!("signal {n}\n"),
            Control::Stop {
                grace,
                kill_by,
                signal,
            } => format!(
                "stop {grace} {kill_by} {}\n",
                signal.map_or(0, |s| s as i32)
            ),
        }
    }

    pub fn decode(line: &str) -> Option<Control> {
        let mut words = line.split_whitespace();
        let kind = words.next()?;
        let numbers: Vec<u64> = words.map(|w| w.parse().ok()).collect::<Option<_>>()?;
        match (kind, numbers.as_slice()) {
            ("deadline", &[at]) => Some(Control::Deadline(at)),
            ("signal", &[n]) => Some(Control::Signal(i32::try_from(n).ok()?)),
            ("stop", &[grace, kill_by, n]) => Some(Control::Stop {
                grace,
                kill_by,
                signal: match n {
                    0 => None,
                    n => Some(Signal::try_from(i32::try_from(n).ok()?).ok()?),
                },
            }),
            _ => None,
        }
    }
}

/// What the watchdog is doing to the group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Running,
    /// The stop signal sent; SIGKILL at this instant.
    Stopping {
        kill_at: u64,
    },
    /// SIGKILL sent (first at this instant), and again on every pass.
    Killed {
        at: u64,
    },
}

/// The instant the watchdog kills at: [`KILL_MARGIN`] before `deadline`.
fn kill_time(deadline: u64) -> u64 {
    deadline.saturating_sub(KILL_MARGIN.as_nanos() as u64)
}

fn set_cloexec(fd: RawFd) {
    // SAFETY: fcntl on an fd number; a closed fd only yields EBADF.
    unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
}

/// Runs the watchdog; returns its exit code. `args` follow the subcommand.
pub fn main(args: &[OsString]) -> i32 {
    ignore_signals();
    // The pipes are ours alone: the command must not inherit them.
    set_cloexec(CONTROL_FD);
    set_cloexec(STATUS_FD);
    let args = match Args::parse(args) {
        Ok(args) => args,
        Err(why) => {
            eprintln!("elect {SUBCOMMAND}: {why}");
            return 2;
        }
    };
    // SAFETY: elect passes the read end of the control pipe as fd 3 and the
    // write end of the status pipe as fd 4; nothing else here owns them.
    let (control, status) = unsafe {
        (
            OwnedFd::from_raw_fd(CONTROL_FD),
            std::fs::File::from(OwnedFd::from_raw_fd(STATUS_FD)),
        )
    };
    if boottime_now() >= kill_time(args.deadline) {
        eprintln!("elect: leadership ended before the command could start; not starting it");
        return REFUSED;
    }
    let nice = take_precedence();
    if let Err(e) = nix::sys::prctl::set_child_subreaper(true) {
        eprintln!("elect {SUBCOMMAND}: cannot become a subreaper: {e}");
    }
    let started = match args.level {
        Level::PidNamespace => start_in_namespace(&args.command, nice),
        Level::Cgroup => Cgroup::create("cmd")
            .map_err(|why| format!("no cgroup for the command: {why}"))
            .and_then(|cgroup| start_in_group(&args.command, Some(cgroup), nice)),
        Level::Subreaper => start_in_group(&args.command, None, nice),
    };
    let (tree, pid, report) = match started {
        Ok(started) => started,
        Err(why) => {
            eprintln!(
                "elect: cannot start {}: {why}",
                display_command(&args.command)
            );
            return 127;
        }
    };
    let (tree, guard) = guarded(tree, args.level, status);
    let code = Watchdog {
        tree,
        command: pid,
        ended: pidfd_open(pid),
        report,
        grace: args.grace,
        deadline: args.deadline,
        phase: Phase::Running,
        exit: None,
        stuck_said: false,
    }
    .supervise(control);
    if let Some(guard) = guard {
        guard.release();
    }
    code
}

/// The watchdog's arguments: `--grace <ns> --deadline <ns> [--contain
/// <level>] -- CMD...`.
struct Args {
    grace: u64,
    deadline: u64,
    level: Level,
    command: Vec<OsString>,
}

impl Args {
    /// Reads `args`; what is wrong with them, if anything.
    fn parse(args: &[OsString]) -> Result<Args, &'static str> {
        let mut parsed = Args {
            grace: 0,
            deadline: 0,
            level: Level::Subreaper,
            command: Vec::new(),
        };
        let mut rest = args.iter();
        let number = |v: Option<&OsString>| v.and_then(|v| v.to_str()?.parse().ok()).unwrap_or(0);
        while let Some(arg) = rest.next() {
            match arg.to_str() {
                Some("--grace") => parsed.grace = number(rest.next()),
                Some("--deadline") => parsed.deadline = number(rest.next()),
                Some("--contain") => {
                    parsed.level = rest
                        .next()
                        .and_then(|l| l.to_str())
                        .and_then(Level::from_name)
                        .ok_or("--contain takes pidns, cgroup or subreaper")?;
                }
                Some("--") => {
                    parsed.command = rest.by_ref().cloned().collect();
                    break;
                }
                _ => {}
            }
        }
        if parsed.command.is_empty() {
            return Err("no command");
        }
        Ok(parsed)
    }
}

/// Starts the guard over the started `tree` (none for a PID namespace:
/// its init dies with us, and the namespace with it), and tells elect on
/// `status` the group (and the cgroup) it may have to kill itself; if
/// elect is gone, the control pipe's end of file says so too.
fn guarded(tree: Tree, level: Level, mut status: std::fs::File) -> (Tree, Option<Guard>) {
    let (pgid, cgroup) = match &tree {
        Tree::Namespace { init } => (*init, None),
        Tree::Cgroup { cgroup, pgid } => (*pgid, Some(cgroup.dir().to_owned())),
        Tree::Descendants { pgid, .. } => (*pgid, None),
    };
    let guard = match level {
        Level::PidNamespace => None,
        _ => match Guard::start(pgid, cgroup.as_deref()) {
            Ok(guard) => Some(guard),
            Err(e) => {
                eprintln!("elect {SUBCOMMAND}: cannot start the guard: {e}");
                None
            }
        },
    };
    let tree = match (tree, &guard) {
        (Tree::Descendants { pgid, .. }, Some(guard)) => Tree::Descendants {
            pgid,
            spare: vec![guard.pid],
        },
        (tree, _) => tree,
    };
    let _ = match &cgroup {
        Some(dir) => writeln!(status, "started {pgid} {}", dir.display()),
        None => writeln!(status, "started {pgid}"),
    };
    (tree, guard)
}

/// What a level's start gives the watchdog: the tree, the child whose exit
/// is the command's (the command, or the namespace's init), and the init's
/// report pipe.
type Started = (Tree, Pid, Option<std::fs::File>);

/// `subreaper` and `cgroup`: the command as the leader of a new process
/// group, our child, in `cgroup` if given.
fn start_in_group(
    command: &[OsString],
    cgroup: Option<Cgroup>,
    nice: i32,
) -> Result<Started, String> {
    let watchdog = std::process::id() as libc::pid_t;
    let procs = cgroup.as_ref().map(Cgroup::procs_path);
    let mut cmd = Command::new(&command[0]);
    cmd.args(&command[1..]).process_group(0);
    // SAFETY: only async-signal-safe calls (prctl, getppid, raise, signal,
    // open, write, close) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            // Into the command's cgroup first: what it forks is in it.
            if let Some(procs) = &procs {
                let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd < 0 || libc::write(fd, b"0\n".as_ptr().cast(), 2) != 2 {
                    return Err(std::io::Error::last_os_error());
                }
                libc::close(fd);
            }
            // Dies with the watchdog; if it is already gone, die now.
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() != watchdog {
                libc::raise(libc::SIGKILL);
            }
            // Ignored signals survive exec: give the command the defaults,
            // and its own priority.
            for sig in DEAF_TO {
                libc::signal(sig as i32, libc::SIG_DFL);
            }
            restore_priority(nice);
            Ok(())
        });
    }
    let child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => {
            if let Some(cgroup) = &cgroup {
                cgroup.remove();
            }
            return Err(e.to_string());
        }
    };
    let pgid = Pid::from_raw(child.id() as i32);
    drop(child);
    let tree = match cgroup {
        Some(cgroup) => Tree::Cgroup { cgroup, pgid },
        None => Tree::Descendants {
            pgid,
            spare: Vec::new(),
        },
    };
    Ok((tree, pgid, None))
}

/// `pidns`: our next child, `elect __init -- CMD...`, is the first process
/// of a new PID namespace, bound to die with us.
fn start_in_namespace(command: &[OsString], nice: i32) -> Result<Started, String> {
    super::contain::enter_new_pid_namespace()?;
    let pipe = || nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| e.to_string());
    let (report_read, report_write) = pipe()?;
    // We hold the lifeline's write end until we exit, and never write.
    let (lifeline_read, lifeline_write) = pipe()?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut cmd = Command::new(exe);
    cmd.arg(init::SUBCOMMAND)
        .args(["--nice", &nice.to_string()])
        .arg("--")
        .args(command)
        .process_group(0);
    let (report_fd, lifeline_fd) = (report_write.as_raw_fd(), lifeline_read.as_raw_fd());
    // SAFETY: only async-signal-safe calls (prctl, sigprocmask, fcntl,
    // dup2) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // A namespace's init drops the signals it has no handler for,
            // and the init sets up its signalfd only after exec and a
            // mount: a SIGTERM forwarded in between (elect told to stop
            // just after the command started) was lost, and the command
            // ran on until the grace was over. Blocked, they wait for the
            // signalfd. Nothing else signals the init before this point:
            // `spawn` returns only after the exec, and we forward nothing
            // before it returns.
            init::block_forwarded().map_err(std::io::Error::from)?;
            move_fds([
                (report_fd, init::REPORT_FD),
                (lifeline_fd, init::LIFELINE_FD),
            ])
        });
    }
    let child = cmd.spawn().map_err(|e| e.to_string())?;
    drop((report_write, lifeline_read));
    // Held open for the watchdog's life: closed only by its death.
    std::mem::forget(lifeline_write);
    let init = Pid::from_raw(child.id() as i32);
    drop(child);
    let report = std::fs::File::from(report_read);
    let _ = nix::fcntl::fcntl(
        &report,
        nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
    );
    Ok((Tree::Namespace { init }, init, Some(report)))
}

/// A pidfd of `pid`: readable once the process has exited. `None` where
/// the kernel has none (before Linux 5.3).
fn pidfd_open(pid: Pid) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid.as_raw(), 0) };
    // SAFETY: a non-negative return is a fresh fd that only we own.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

struct Watchdog {
    tree: Tree,
    /// The child whose exit is the command's: the command itself, or the
    /// namespace's init (which exits with the command's code).
    command: Pid,
    /// A pidfd of `command`, readable once it has exited, until it is
    /// reaped (`None` where the kernel has none: the tick then notices).
    ended: Option<OwnedFd>,
    /// The init's reports (`pidns`): the command's code as soon as it ends.
    report: Option<std::fs::File>,
    grace: u64,
    deadline: u64,
    phase: Phase,
    exit: Option<i32>,
    /// Whether [`Watchdog::say_if_stuck`] has spoken.
    stuck_said: bool,
}

impl Watchdog {
    fn supervise(mut self, control: OwnedFd) -> i32 {
        let mut control = Some(ControlPipe::new(control));
        let mut ended_ready = false;
        loop {
            self.reap();
            if ended_ready && self.ended.is_some() {
                // The pidfd says the child exited, yet it could not be
                // reaped (a tracer, such as `strace -f` on elect, holds
                // it first). Polled on, it would spin at a real-time
                // priority; the tick reaps it once it can be.
                self.ended = None;
            }
            let now = boottime_now();
            if self.exit.is_some() && self.phase == Phase::Running {
                // The command ended by itself: what it left in its group
                // gets the grace, bounded by the deadline.
                self.stop(now, self.grace, self.deadline, Some(Signal::SIGTERM));
            }
            self.enforce(now);
            if !self.group_alive() {
                // Zombies do not count as alive: the command may have
                // become one since the reap above, and its code is ours.
                self.reap();
                // Reaped by us (exit known) or, oddly, by someone else.
                if let Tree::Cgroup { cgroup, .. } = &self.tree {
                    cgroup.remove();
                }
                return self.exit.unwrap_or(1);
            }
            self.say_if_stuck(now);
            let wait = self.next_wake(now);
            // Woken by a control message, or by the command's end, not a
            // tick later: a resignation waits for that end. The pidfd
            // until the command (or the init) is reaped; under pidns the
            // init's report until it has said the code.
            let mut fds = Vec::with_capacity(3);
            if let Some(c) = control.as_ref() {
                fds.push(PollFd::new(c.fd(), PollFlags::POLLIN));
            }
            let report = self.report.as_ref().filter(|_| self.exit.is_none());
            let ends = [
                self.ended.as_ref().map(AsFd::as_fd),
                report.map(AsFd::as_fd),
            ];
            fds.extend(
                ends.into_iter()
                    .flatten()
                    .map(|fd| PollFd::new(fd, PollFlags::POLLIN)),
            );
            let timeout =
                PollTimeout::try_from(wait.as_millis().max(1) as i32).unwrap_or(PollTimeout::MAX);
            if poll(&mut fds, timeout).is_err() {
                continue;
            }
            let control_ready = control.is_some()
                && fds[0]
                    .revents()
                    .is_some_and(|r| r.intersects(PollFlags::POLLIN | PollFlags::POLLHUP));
            let ended_at = usize::from(control.is_some());
            ended_ready = self.ended.is_some()
                && fds[ended_at]
                    .revents()
                    .is_some_and(|r| r.intersects(PollFlags::POLLIN | PollFlags::POLLHUP));
            drop(fds);
            let Some(pipe) = control.as_mut().filter(|_| control_ready) else {
                continue;
            };
            // Every whole line that arrived, not only the first: a line
            // left in a buffer would wait for the next write, and a stop
            // would wait with it.
            let (lines, open) = pipe.read_lines();
            for line in lines {
                match Control::decode(&line) {
                    Some(Control::Deadline(at)) => self.deadline = at,
                    Some(Control::Signal(n)) => {
                        if let Ok(sig) = Signal::try_from(n) {
                            self.signal(sig);
                        }
                    }
                    Some(Control::Stop {
                        grace,
                        kill_by,
                        signal,
                    }) => self.stop(boottime_now(), grace, kill_by.min(self.deadline), signal),
                    None => eprintln!("elect {SUBCOMMAND}: ignoring {line:?}"),
                }
            }
            if !open {
                // elect is gone: nobody will renew the deadline.
                control = None;
                let now = boottime_now();
                let grace = self.grace.min(1_000_000_000);
                self.stop(now, grace, self.deadline, Some(Signal::SIGTERM));
            }
        }
    }

    /// `sig` now (then SIGCONT: a stopped group would sit on it), SIGKILL
    /// at the earlier of now + grace and `kill_by` (less [`KILL_MARGIN`]:
    /// the tree must be dead by then), or sooner if an earlier stop said
    /// so.
    fn stop(&mut self, now: u64, grace: u64, kill_by: u64, sig: Option<Signal>) {
        let kill_at = now.saturating_add(grace).min(kill_time(kill_by));
        let kill_at = match self.phase {
            Phase::Killed { .. } => return,
            Phase::Running => kill_at,
            Phase::Stopping { kill_at: was } => was.min(kill_at),
        };
        if let Some(sig) = sig {
            self.signal(sig);
            self.signal(Signal::SIGCONT);
        }
        self.phase = Phase::Stopping { kill_at };
    }

    /// SIGKILL [`KILL_MARGIN`] before the deadline, or when the grace ran
    /// out; once killed, again on every pass, for whatever forked while
    /// the kill went on.
    fn enforce(&mut self, now: u64) {
        let deadline = kill_time(self.deadline);
        let kill = match self.phase {
            Phase::Running => now >= deadline,
            Phase::Stopping { kill_at } => now >= kill_at || now >= deadline,
            Phase::Killed { .. } => true,
        };
        if kill {
            self.signal(Signal::SIGKILL);
            if !matches!(self.phase, Phase::Killed { .. }) {
                self.phase = Phase::Killed { at: now };
            }
        }
    }

    /// Says, once, which processes outlive their SIGKILL by
    /// [`STUCK_AFTER`]: a process in an uninterruptible sleep (a hung disk)
    /// dies only when the kernel lets it, and until then the watchdog does
    /// not exit, so `elect` does not resign and keeps renewing what it
    /// still holds; the user should know why.
    fn say_if_stuck(&mut self, now: u64) {
        let Phase::Killed { at } = self.phase else {
            return;
        };
        if self.stuck_said || now < at.saturating_add(STUCK_AFTER.as_nanos() as u64) {
            return;
        }
        self.stuck_said = true;
        let survivors: Vec<String> = self
            .tree
            .survivors()
            .into_iter()
            .map(|(pid, name, state)| {
                format!("{pid} ({name}, state {state}: {})", why_alive(state))
            })
            .collect();
        if !survivors.is_empty() {
            eprintln!(
                "elect: the command's tree outlives its SIGKILL by {STUCK_AFTER:?}: {}; elect \
                 does not resign until it is gone (a lease that lapses meanwhile cannot be kept: \
                 the fencing token is what protects your data)",
                survivors.join(", ")
            );
        }
    }

    fn next_wake(&self, now: u64) -> Duration {
        let deadline = kill_time(self.deadline);
        let next = match self.phase {
            Phase::Running => deadline,
            Phase::Stopping { kill_at } => kill_at.min(deadline),
            Phase::Killed { .. } => return KILLED_TICK,
        };
        Duration::from_nanos(next.saturating_sub(now)).min(TICK)
    }

    fn signal(&self, sig: Signal) {
        self.tree.signal(sig);
    }

    fn group_alive(&self) -> bool {
        self.tree.alive()
    }

    /// Reaps every exited descendant (all are ours: we are their
    /// subreaper), remembering the command's code, which the namespace's
    /// init reports as soon as the command ends.
    fn reap(&mut self) {
        if let Some(report) = self.report.as_mut() {
            // Non-blocking: what is there now, up to WouldBlock or the end.
            let mut said = Vec::new();
            let read = report.read_to_end(&mut said);
            if let Some(code) = String::from_utf8_lossy(&said)
                .lines()
                .find_map(init::parse_report)
            {
                self.exit = Some(code);
            }
            // End of file (`Ok`; `WouldBlock` is an `Err`): the init is
            // gone or going without a word, killed before the command
            // ended. A pipe at its end polls ready forever, and this loop
            // runs at a real-time priority: polled on, it would spin and
            // starve every process of normal priority on its core (other
            // watchdogs' kills included) while the init's exit lasts. Its
            // pidfd and the tick see that exit instead.
            if read.is_ok() {
                self.report = None;
            }
        }
        loop {
            match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) | Err(_) => return,
                Ok(status) if status.pid() == Some(self.command) => {
                    if self.exit.is_none() {
                        self.exit = exit_code(status);
                    }
                    // Reaped: its pidfd would read ready from now on.
                    self.ended = None;
                }
                Ok(_) => {}
            }
        }
    }
}

/// The watchdog's end of the control pipe: reads whatever has arrived
/// and hands out every whole line of it.
struct ControlPipe {
    file: std::fs::File,
    pending: Vec<u8>,
}

impl ControlPipe {
    fn new(fd: OwnedFd) -> ControlPipe {
        // Non-blocking: a read takes what is there and never waits.
        let _ = nix::fcntl::fcntl(
            &fd,
            nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
        );
        ControlPipe {
            file: std::fs::File::from(fd),
            pending: Vec::new(),
        }
    }

    fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.file.as_fd()
    }

    /// Every whole line that has arrived, and whether the pipe is still
    /// open (end of file: `elect` is gone).
    fn read_lines(&mut self) -> (Vec<String>, bool) {
        let mut chunk = [0u8; 4096];
        let open = loop {
            match self.file.read(&mut chunk) {
                Ok(0) => break false,
                Ok(n) => self.pending.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break true,
                Err(_) => break false,
            }
        };
        let whole = self
            .pending
            .iter()
            .rposition(|b| *b == b'\n')
            .map_or(0, |i| i + 1);
        let lines = String::from_utf8_lossy(&self.pending[..whole])
            .lines()
            .map(str::to_owned)
            .collect();
        self.pending.drain(..whole);
        (lines, open)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_that_arrived_is_read_at_once() {
        let (read, write) = nix::unistd::pipe().unwrap();
        let mut write = std::fs::File::from(write);
        let mut pipe = ControlPipe::new(read);
        write
            .write_all(b"deadline 1\ndeadline 2\nstop 0 3 15\ndead")
            .unwrap();
        let (lines, open) = pipe.read_lines();
        assert_eq!(lines, ["deadline 1", "deadline 2", "stop 0 3 15"]);
        assert!(open);
        write.write_all(b"line 4\n").unwrap();
        drop(write);
        let (lines, open) = pipe.read_lines();
        assert_eq!(lines, ["deadline 4"]);
        assert!(!open, "end of file once elect is gone");
    }

    #[test]
    fn control_lines_round_trip() {
        for c in [
            Control::Deadline(123),
            Control::Signal(15),
            Control::Stop {
                grace: 5,
                kill_by: 9,
                signal: Some(Signal::SIGINT),
            },
            Control::Stop {
                grace: 0,
                kill_by: 0,
                signal: None,
            },
        ] {
            assert_eq!(Control::decode(&c.encode()), Some(c));
        }
        assert_eq!(Control::decode("bogus 1"), None);
        assert_eq!(Control::decode("deadline x"), None);
        assert_eq!(Control::decode("stop 1 2"), None);
    }

    #[test]
    fn commands_display_lossily() {
        use std::os::unix::ffi::OsStringExt;
        let cmd = [OsString::from("printf"), OsString::from_vec(vec![0xff])];
        assert_eq!(display_command(&cmd), "printf \u{fffd}");
    }
}
