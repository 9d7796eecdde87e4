//! `elect` (and `etcdctl elect`) as real child processes of a test.

use std::process::Command;
use std::time::{Duration, Instant};

use elect_lab::process::Watched;
use nix::sys::signal::Signal;
use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_elect");

pub use elect_lab::process::Line;

/// A running process whose stdout is read line by line as it comes: the
/// lab's [`Watched`], with waits that fail the test instead of returning
/// errors.
pub struct Proc {
    inner: Watched,
    pub name: String,
}

impl Proc {
    pub fn spawn(name: &str, cmd: Command) -> Proc {
        let inner = Watched::spawn(name, cmd).unwrap_or_else(|e| panic!("spawning {name}: {e}"));
        Proc {
            inner,
            name: name.to_owned(),
        }
    }

    pub fn pid(&self) -> i32 {
        self.inner.pid()
    }

    pub fn stderr(&self) -> String {
        self.inner.stderr()
    }

    /// The next line satisfying `pred`, skipping others.
    pub fn wait_line(
        &mut self,
        what: &str,
        within: Duration,
        pred: impl Fn(&Line) -> bool,
    ) -> Line {
        self.inner.name.clone_from(&self.name);
        self.inner
            .wait_line(what, within, pred)
            .unwrap_or_else(|e| panic!("{e}"))
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
        self.inner.drain().into_iter().find_map(|line| {
            line.json()
                .filter(|v| v["event"] == event)
                .map(|v| (line.at, v))
        })
    }

    /// Whether a line with `event` arrives within `within`.
    pub fn sees_event(&mut self, event: &str, within: Duration) -> bool {
        self.inner
            .wait_line(event, within, |l| {
                l.json().is_some_and(|v| v["event"] == event)
            })
            .is_ok()
    }

    pub fn signal(&self, sig: Signal) {
        self.inner.signal(sig);
    }

    /// Waits for the exit code (128+N when killed by signal N).
    /// The exit code if it has exited, without waiting.
    pub fn try_exit(&mut self) -> Option<i32> {
        self.inner.wait_exit(Duration::ZERO)
    }

    pub fn wait_exit(&mut self, within: Duration) -> i32 {
        match self.inner.wait_exit(within) {
            Some(code) => code,
            None => panic!(
                "{} did not exit within {within:?}; stderr:\n{}",
                self.name,
                self.stderr()
            ),
        }
    }
}

/// `elect <flags> --format json <args>`, logging at debug, with the
/// election and id only from the arguments.
pub fn elect_with(name: &str, flags: &[String], args: &[&str]) -> Proc {
    let mut cmd = Command::new(BIN);
    // Global flags first: `run` ends with `-- CMD...`.
    cmd.args(flags)
        .args(["--format", "json"])
        .args(args)
        .env("RUST_LOG", "elect=debug,warn")
        .env_remove("ELECT_ELECTION")
        .env_remove("ELECT_ID");
    Proc::spawn(name, cmd)
}

/// `elect <args> --format json` against `endpoints`.
pub fn elect(name: &str, endpoints: &str, args: &[&str]) -> Proc {
    elect_with(name, &["--endpoints".into(), endpoints.into()], args)
}

/// `elect --backend zk <args> --format json` against `endpoints`.
pub fn elect_zk(name: &str, endpoints: &str, args: &[&str]) -> Proc {
    let flags = ["--backend", "zk", "--endpoints", endpoints].map(String::from);
    elect_with(name, &flags, args)
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

/// `elect <command> --backend B --endpoints E --election X <args>` to
/// completion: exit code, stdout, stderr.
pub fn elect_at(
    backend: &str,
    endpoints: &str,
    command: &str,
    election: &str,
    args: &[&str],
) -> (i32, String, String) {
    let base = [
        command,
        "--backend",
        backend,
        "--endpoints",
        endpoints,
        "--election",
        election,
    ];
    let (code, out, err, _) = elect_once(&[&base[..], args].concat());
    (code, out, err)
}

/// `elect leader` once; returns its exit code and stdout.
pub fn leader_once(backend: &str, endpoints: &str, election: &str, format: &str) -> (i32, String) {
    let (code, out, _) = elect_at(
        backend,
        endpoints,
        "leader",
        election,
        &["--format", format],
    );
    (code, out)
}

/// `etcdctl elect <election> <proposal>` (or `-l` to observe).
pub fn etcdctl_elect(endpoints: &str, args: &[&str]) -> Proc {
    let mut cmd = Command::new(elect_lab::etcd_release::program("etcdctl"));
    cmd.env("ETCDCTL_API", "3")
        .args(["--endpoints", endpoints, "elect"])
        .args(args);
    Proc::spawn(&format!("etcdctl elect {args:?}"), cmd)
}
