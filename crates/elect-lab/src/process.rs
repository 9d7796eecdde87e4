//! A child process whose output lines are read as they come, each stamped
//! with the instant it arrived: how experiments learn when a candidate
//! reported `elected`.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::Value;

/// A line a process printed, with the instant it was read.
#[derive(Clone, Debug)]
pub struct Line {
    /// When it was read.
    pub at: Instant,
    /// The line, without its newline.
    pub text: String,
}

impl Line {
    /// The line as one of elect's JSON events, if it is one.
    pub fn json(&self) -> Option<Value> {
        serde_json::from_str(&self.text)
            .ok()
            .filter(|v: &Value| v.get("event").is_some())
    }
}

/// Why a wait ended without the line.
#[derive(Debug, thiserror::Error)]
pub enum WaitError {
    /// Nothing matching within the time allowed.
    #[error("{name}: no {what} within {within:?}; its stderr:\n{stderr}")]
    Timeout {
        /// The process's name.
        name: String,
        /// What was awaited.
        what: String,
        /// How long.
        within: Duration,
        /// What it wrote to stderr so far.
        stderr: String,
    },
    /// It closed its stdout (exited) first.
    #[error("{name}: exited before {what}; its stderr:\n{stderr}")]
    Exited {
        /// The process's name.
        name: String,
        /// What was awaited.
        what: String,
        /// What it wrote to stderr.
        stderr: String,
    },
}

/// A running child; SIGTERM then SIGKILL when dropped.
pub struct Watched {
    child: Child,
    lines: Receiver<Line>,
    stderr: Arc<Mutex<String>>,
    /// Closed (its sender dropped) once stderr reached its end.
    stderr_done: Receiver<()>,
    /// A name for messages.
    pub name: String,
}

impl Watched {
    /// Spawns `cmd` with stdout and stderr piped.
    pub fn spawn(name: &str, mut cmd: Command) -> std::io::Result<Watched> {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let (tx, lines) = channel();
        let stdout = child.stdout.take().expect("piped");
        std::thread::spawn(move || {
            for text in BufReader::new(stdout).lines().map_while(Result::ok) {
                let line = Line {
                    at: Instant::now(),
                    text,
                };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = stderr.clone();
        let mut pipe = child.stderr.take().expect("piped");
        let (done, stderr_done) = channel::<()>();
        std::thread::spawn(move || {
            let _done = done;
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = pipe.read(&mut buf) {
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Ok(Watched {
            child,
            lines,
            stderr,
            stderr_done,
            name: name.to_owned(),
        })
    }

    /// Waits (at most `within`) until everything it wrote to stderr has
    /// been read: after it exited, its last lines may still be in the pipe.
    /// False if the pipe is still open (a descendant holds it).
    pub fn wait_stderr_read(&self, within: Duration) -> bool {
        matches!(
            self.stderr_done.recv_timeout(within),
            Err(RecvTimeoutError::Disconnected)
        )
    }

    /// Its pid.
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// What it wrote to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// The next line satisfying `pred`, skipping others.
    pub fn wait_line(
        &mut self,
        what: &str,
        within: Duration,
        pred: impl Fn(&Line) -> bool,
    ) -> Result<Line, WaitError> {
        let until = Instant::now() + within;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if pred(&line) => return Ok(line),
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) => {
                    return Err(WaitError::Timeout {
                        name: self.name.clone(),
                        what: what.to_owned(),
                        within,
                        stderr: self.stderr(),
                    });
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(WaitError::Exited {
                        name: self.name.clone(),
                        what: what.to_owned(),
                        stderr: self.stderr(),
                    });
                }
            }
        }
    }

    /// The next JSON line with `event`, and the instant it was read.
    pub fn wait_event(
        &mut self,
        event: &str,
        within: Duration,
    ) -> Result<(Instant, Value), WaitError> {
        let line = self.wait_line(&format!("{event:?} event"), within, |l| {
            l.json().is_some_and(|v| v["event"] == event)
        })?;
        let value = line.json().expect("matched as JSON");
        Ok((line.at, value))
    }

    /// Lines already received, without waiting.
    pub fn drain(&mut self) -> Vec<Line> {
        self.lines.try_iter().collect()
    }

    /// Sends `sig` to it.
    pub fn signal(&self, sig: Signal) {
        let _ = kill(Pid::from_raw(self.pid()), sig);
    }

    /// Its exit code (128+N when killed by signal N), if it has exited.
    pub fn try_exit(&mut self) -> Option<i32> {
        use std::os::unix::process::ExitStatusExt;
        let status = self.child.try_wait().ok().flatten()?;
        Some(
            status
                .code()
                .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)),
        )
    }

    /// Waits for its exit code; `None` if it still runs after `within`.
    pub fn wait_exit(&mut self, within: Duration) -> Option<i32> {
        let until = Instant::now() + within;
        loop {
            if let Some(code) = self.try_exit() {
                return Some(code);
            }
            if Instant::now() >= until {
                return None;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        if self.try_exit().is_none() {
            // A clean stop first, so a wrapped command is not orphaned.
            self.signal(Signal::SIGCONT);
            self.signal(Signal::SIGTERM);
            if self.wait_exit(Duration::from_secs(3)).is_none() {
                let _ = self.child.kill();
                let _ = self.child.wait();
            }
        }
    }
}

/// Whether `pid` is alive (a zombie counts as dead: it runs nothing).
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            // The state follows the parenthesised command name.
            let state = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.trim_start().chars().next());
            !matches!(state, Some('Z') | Some('X') | None)
        }
        Err(_) => false,
    }
}

/// The parent of `pid`, if it is alive.
pub fn parent(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The parent pid is the second field after the parenthesised name.
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// The user and system CPU time `pid` has used, in clock ticks
/// (`sysconf(_SC_CLK_TCK)` a second), if it lives.
pub fn cpu_ticks(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // utime and stime: fields 14 and 15, the 12th and 13th after the name.
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// Every living descendant of `pid` (not `pid` itself), parents first.
pub fn descendants(pid: i32) -> Vec<i32> {
    elect::supervise::contain::descendants(nix::unistd::Pid::from_raw(pid), &[])
        .into_iter()
        .map(nix::unistd::Pid::as_raw)
        .collect()
}
