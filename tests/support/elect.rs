//! `elect` (and `etcdctl elect`) as real child processes of a test.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_elect");

/// A line a process printed, with the instant the test read it.
pub struct Line {
    pub at: Instant,
    pub text: String,
}

impl Line {
    pub fn json(&self) -> Option<Value> {
        serde_json::from_str(&self.text)
            .ok()
            .filter(|v: &Value| v.get("event").is_some())
    }
}

/// A running process whose stdout is read line by line as it comes.
pub struct Proc {
    child: Child,
    lines: Receiver<Line>,
    stderr: Arc<Mutex<String>>,
    pub name: String,
}

impl Proc {
    pub fn spawn(name: &str, mut cmd: Command) -> Proc {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {name}: {e}"));
        let (tx, lines) = channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for text in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx
                    .send(Line {
                        at: Instant::now(),
                        text,
                    })
                    .is_err()
                {
                    return;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = stderr.clone();
        let mut pipe = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    return;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Proc {
            child,
            lines,
            stderr,
            name: name.to_owned(),
        }
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// The next line satisfying `pred`, skipping others.
    pub fn wait_line(
        &mut self,
        what: &str,
        within: Duration,
        pred: impl Fn(&Line) -> bool,
    ) -> Line {
        let until = Instant::now() + within;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if pred(&line) => return line,
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) => panic!(
                    "{}: no {what} within {within:?}; stderr:\n{}",
                    self.name,
                    self.stderr()
                ),
                Err(RecvTimeoutError::Disconnected) => panic!(
                    "{}: exited before {what}; stderr:\n{}",
                    self.name,
                    self.stderr()
                ),
            }
        }
    }

    /// The next JSON line with `event`, and the instant it was read.
    pub fn wait_event(&mut self, event: &str, within: Duration) -> (Instant, Value) {
        let line = self.wait_line(&format!("{event:?} event"), within, |l| {
            l.json().is_some_and(|v| v["event"] == event)
        });
        (line.at, line.json().unwrap())
    }

    /// The next `leader` event naming `id`.
    pub fn wait_leader(&mut self, id: &str, within: Duration) -> Value {
        let line = self.wait_line(&format!("{id} as leader"), within, |l| {
            l.json()
                .is_some_and(|v| v["event"] == "leader" && v["leader"] == id)
        });
        line.json().unwrap()
    }

    /// A JSON line with `event` already received, without waiting.
    pub fn try_event(&mut self, event: &str) -> Option<(Instant, Value)> {
        while let Ok(line) = self.lines.try_recv() {
            if let Some(v) = line.json().filter(|v| v["event"] == event) {
                return Some((line.at, v));
            }
        }
        None
    }

    /// Whether a line with `event` arrives within `within`.
    pub fn sees_event(&mut self, event: &str, within: Duration) -> bool {
        let until = Instant::now() + within;
        while let Ok(line) = self
            .lines
            .recv_timeout(until.saturating_duration_since(Instant::now()))
        {
            if line.json().is_some_and(|v| v["event"] == event) {
                return true;
            }
        }
        false
    }

    pub fn signal(&self, sig: Signal) {
        let _ = kill(Pid::from_raw(self.pid()), sig);
    }

    /// Waits for the exit code (128+N when killed by signal N).
    pub fn wait_exit(&mut self, within: Duration) -> i32 {
        use std::os::unix::process::ExitStatusExt;
        let until = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status
                    .code()
                    .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
            }
            assert!(
                Instant::now() < until,
                "{} did not exit within {within:?}; stderr:\n{}",
                self.name,
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            // A clean stop first, so a wrapped command is not orphaned.
            self.signal(Signal::SIGTERM);
            let until = Instant::now() + Duration::from_secs(3);
            while self.child.try_wait().ok().flatten().is_none() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `elect <args> --format json` against `endpoints`.
pub fn elect(name: &str, endpoints: &str, args: &[&str]) -> Proc {
    let mut cmd = Command::new(BIN);
    // Global flags first: `run` ends with `-- CMD...`.
    cmd.args(["--endpoints", endpoints, "--format", "json"])
        .args(args)
        .env("RUST_LOG", "elect=debug,warn")
        .env_remove("ELECT_ELECTION")
        .env_remove("ELECT_ID");
    Proc::spawn(name, cmd)
}

/// `elect --backend zk <args> --format json` against `endpoints`.
pub fn elect_zk(name: &str, endpoints: &str, args: &[&str]) -> Proc {
    let mut cmd = Command::new(BIN);
    cmd.args([
        "--backend",
        "zk",
        "--endpoints",
        endpoints,
        "--format",
        "json",
    ])
    .args(args)
    .env("RUST_LOG", "elect=debug,warn")
    .env_remove("ELECT_ELECTION")
    .env_remove("ELECT_ID");
    Proc::spawn(name, cmd)
}

/// `elect --backend zk campaign` with an id and TTL.
pub fn campaign_zk(endpoints: &str, election: &str, id: &str, ttl: &str) -> Proc {
    elect_zk(
        id,
        endpoints,
        &["campaign", "--election", election, "--id", id, "--ttl", ttl],
    )
}

/// `elect campaign` with an id and TTL in `election`.
pub fn campaign(endpoints: &str, election: &str, id: &str, ttl: &str) -> Proc {
    elect(
        id,
        endpoints,
        &["campaign", "--election", election, "--id", id, "--ttl", ttl],
    )
}

/// Runs `elect` to completion; returns (exit code, stdout, stderr, time taken).
pub fn elect_once(args: &[&str]) -> (i32, String, String, Duration) {
    let started = Instant::now();
    let out = Command::new(BIN)
        .args(args)
        .env_remove("ELECT_ELECTION")
        .output()
        .expect("running elect");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        started.elapsed(),
    )
}

/// `elect leader` once; returns its exit code and stdout.
pub fn leader_once(backend: &str, endpoints: &str, election: &str, format: &str) -> (i32, String) {
    let args = [
        "leader",
        "--backend",
        backend,
        "--endpoints",
        endpoints,
        "--election",
        election,
    ];
    let (code, out, _, _) = elect_once(&[&args[..], &["--format", format]].concat());
    (code, out)
}

/// `etcdctl elect <election> <proposal>` (or `-l` to observe).
pub fn etcdctl_elect(endpoints: &str, args: &[&str]) -> Proc {
    let mut cmd = Command::new("etcdctl");
    cmd.env("ETCDCTL_API", "3")
        .args(["--endpoints", endpoints, "elect"])
        .args(args);
    Proc::spawn(&format!("etcdctl elect {args:?}"), cmd)
}
