//! The watchdog: a small process between `elect` and the wrapped command
//! that holds the leadership deadline itself.
//!
//! `elect` runs `elect __watchdog --grace <ns> --deadline <ns> -- CMD...`
//! (its own executable) with a pipe on fd 3. The watchdog starts CMD as the
//! leader of a new process group, becomes the subreaper of its tree, and
//! kills the whole group with SIGKILL the moment the deadline passes, on
//! its own. `elect` moves the deadline forward with each renewal. So if
//! `elect` is frozen (SIGSTOP, a stuck runtime) or killed, the command is
//! still dead by the deadline, before anyone else can be elected.
//!
//! Control lines on fd 3 (times are CLOCK_MONOTONIC nanoseconds, the same
//! clock in every process on the host):
//! - `deadline <ns>`: the command may run until then;
//! - `signal <n>`: forward signal `n` to the group;
//! - `stop <grace ns> <kill by ns>`: SIGTERM now, SIGKILL at the earlier of
//!   now + grace and kill-by.
//!
//! End of file on fd 3 means `elect` is gone: SIGTERM now, SIGKILL within
//! `min(grace, 1 s)` and never after the deadline.
//!
//! The watchdog exits once the group is gone, with CMD's exit code (128+N
//! if it died of signal N), 127 if CMD could not be started.

use std::io::{BufRead, BufReader};
use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::Duration;

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{Signal, killpg};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::time::{ClockId, clock_gettime};
use nix::unistd::Pid;

/// The hidden subcommand that runs the watchdog.
pub const SUBCOMMAND: &str = "__watchdog";

/// The fd the control pipe arrives on.
pub const CONTROL_FD: i32 = 3;

/// How often the group is reaped and checked when nothing else happens.
const TICK: Duration = Duration::from_millis(20);

/// Nanoseconds of CLOCK_MONOTONIC now.
pub fn monotonic_now() -> u64 {
    let t = clock_gettime(ClockId::CLOCK_MONOTONIC).expect("CLOCK_MONOTONIC");
    t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64
}

/// One control message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    Deadline(u64),
    Signal(i32),
    Stop { grace: u64, kill_by: u64 },
}

impl Control {
    pub fn encode(self) -> String {
        match self {
            Control::Deadline(at) => format!("deadline {at}\n"),
            Control::Signal(n) => format!("signal {n}\n"),
            Control::Stop { grace, kill_by } => format!("stop {grace} {kill_by}\n"),
        }
    }

    pub fn decode(line: &str) -> Option<Control> {
        let mut words = line.split_whitespace();
        let kind = words.next()?;
        let numbers: Vec<u64> = words.map(|w| w.parse().ok()).collect::<Option<_>>()?;
        match (kind, numbers.as_slice()) {
            ("deadline", &[at]) => Some(Control::Deadline(at)),
            ("signal", &[n]) => Some(Control::Signal(i32::try_from(n).ok()?)),
            ("stop", &[grace, kill_by]) => Some(Control::Stop { grace, kill_by }),
            _ => None,
        }
    }
}

/// The CLOCK_MONOTONIC nanoseconds of a tokio instant (both read the same
/// clock; only their origins differ).
pub fn to_monotonic(at: tokio::time::Instant) -> u64 {
    let (now, mono) = (tokio::time::Instant::now(), monotonic_now());
    if at >= now {
        mono.saturating_add((at - now).as_nanos() as u64)
    } else {
        mono.saturating_sub((now - at).as_nanos() as u64)
    }
}

/// What the watchdog is doing to the group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Running,
    /// SIGTERM sent; SIGKILL at this instant.
    Stopping {
        kill_at: u64,
    },
    Killed,
}

/// Runs the watchdog; returns its exit code. `args` follow the subcommand.
pub fn main(args: &[String]) -> i32 {
    let mut grace = 0u64;
    let mut deadline = 0u64;
    let mut rest = args.iter();
    let mut command = Vec::new();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--grace" => grace = rest.next().and_then(|v| v.parse().ok()).unwrap_or(0),
            "--deadline" => deadline = rest.next().and_then(|v| v.parse().ok()).unwrap_or(0),
            "--" => {
                command = rest.by_ref().cloned().collect();
                break;
            }
            _ => {}
        }
    }
    if command.is_empty() {
        eprintln!("elect {SUBCOMMAND}: no command");
        return 2;
    }
    // SAFETY: elect passes the read end of the control pipe as fd 3, and
    // nothing else in this process owns it.
    let control = unsafe { OwnedFd::from_raw_fd(CONTROL_FD) };
    if let Err(e) = nix::sys::prctl::set_child_subreaper(true) {
        eprintln!("elect {SUBCOMMAND}: cannot become a subreaper: {e}");
    }
    let child = match Command::new(&command[0])
        .args(&command[1..])
        .process_group(0)
        .spawn()
    {
        Ok(child) => child,
        Err(e) => {
            eprintln!("elect: cannot start {:?}: {e}", command.join(" "));
            return 127;
        }
    };
    let pgid = Pid::from_raw(child.id() as i32);
    drop(child);
    Watchdog {
        pgid,
        grace,
        deadline,
        phase: Phase::Running,
        exit: None,
    }
    .supervise(control)
}

struct Watchdog {
    pgid: Pid,
    grace: u64,
    deadline: u64,
    phase: Phase,
    exit: Option<i32>,
}

impl Watchdog {
    fn supervise(mut self, control: OwnedFd) -> i32 {
        let mut reader = Some(BufReader::new(std::fs::File::from(control)));
        let mut line = String::new();
        loop {
            self.reap();
            let now = monotonic_now();
            if self.exit.is_some() && self.phase == Phase::Running {
                // The command ended by itself: what it left in its group
                // gets the grace, bounded by the deadline.
                self.stop(now, self.grace, self.deadline);
            }
            self.enforce(now);
            if self.exit.is_some() && !self.group_alive() {
                return self.exit.unwrap_or(0);
            }
            if !self.group_alive() && self.exit.is_none() {
                // Reaped by someone else: nothing left to watch.
                return self.exit.unwrap_or(1);
            }
            let wait = self.next_wake(now);
            let Some(r) = reader.as_mut() else {
                std::thread::sleep(wait);
                continue;
            };
            let ready = {
                let mut fds = [PollFd::new(r.get_ref().as_fd(), PollFlags::POLLIN)];
                let timeout = PollTimeout::try_from(wait.as_millis().max(1) as i32)
                    .unwrap_or(PollTimeout::MAX);
                matches!(poll(&mut fds, timeout), Ok(n) if n > 0)
            };
            if !ready {
                continue;
            }
            line.clear();
            match r.read_line(&mut line) {
                Ok(0) | Err(_) => {
                    // elect is gone: nobody will renew the deadline.
                    reader = None;
                    let now = monotonic_now();
                    let grace = self.grace.min(1_000_000_000);
                    self.stop(now, grace, self.deadline);
                }
                Ok(_) => match Control::decode(&line) {
                    Some(Control::Deadline(at)) => self.deadline = at,
                    Some(Control::Signal(n)) => {
                        if let Ok(sig) = Signal::try_from(n) {
                            self.signal(sig);
                        }
                    }
                    Some(Control::Stop { grace, kill_by }) => {
                        self.stop(monotonic_now(), grace, kill_by.min(self.deadline));
                    }
                    None => eprintln!("elect {SUBCOMMAND}: ignoring {line:?}"),
                },
            }
        }
    }

    fn stop(&mut self, now: u64, grace: u64, kill_by: u64) {
        let kill_at = now.saturating_add(grace).min(kill_by);
        match self.phase {
            Phase::Running => {
                self.signal(Signal::SIGTERM);
                self.phase = Phase::Stopping { kill_at };
            }
            Phase::Stopping { kill_at: was } => {
                self.phase = Phase::Stopping {
                    kill_at: was.min(kill_at),
                };
            }
            Phase::Killed => {}
        }
    }

    /// SIGKILL at the deadline or when the grace ran out.
    fn enforce(&mut self, now: u64) {
        let kill = match self.phase {
            Phase::Running => now >= self.deadline,
            Phase::Stopping { kill_at } => now >= kill_at || now >= self.deadline,
            Phase::Killed => false,
        };
        if kill {
            self.signal(Signal::SIGKILL);
            self.phase = Phase::Killed;
        }
    }

    fn next_wake(&self, now: u64) -> Duration {
        let next = match self.phase {
            Phase::Running => self.deadline,
            Phase::Stopping { kill_at } => kill_at.min(self.deadline),
            Phase::Killed => now,
        };
        Duration::from_nanos(next.saturating_sub(now)).min(TICK)
    }

    fn signal(&self, sig: Signal) {
        match killpg(self.pgid, sig) {
            Ok(()) | Err(Errno::ESRCH) => {}
            Err(e) => eprintln!("elect {SUBCOMMAND}: signalling group {}: {e}", self.pgid),
        }
    }

    fn group_alive(&self) -> bool {
        !matches!(killpg(self.pgid, None), Err(Errno::ESRCH))
    }

    /// Reaps every exited descendant (all are ours: we are their
    /// subreaper), remembering the command's code.
    fn reap(&mut self) {
        loop {
            match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) | Err(_) => return,
                Ok(status) => {
                    if status.pid() == Some(self.pgid) {
                        self.exit = super::child::exit_code(status);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_lines_round_trip() {
        for c in [
            Control::Deadline(123),
            Control::Signal(15),
            Control::Stop {
                grace: 5,
                kill_by: 9,
            },
        ] {
            assert_eq!(Control::decode(&c.encode()), Some(c));
        }
        assert_eq!(Control::decode("bogus 1"), None);
        assert_eq!(Control::decode("deadline x"), None);
    }
}
