//! `elect lab soak`: the flags of a soak -> `elect_soak::Options`, or a
//! recorded history to judge again (`--check`). Everything is checked
//! before anything starts (exit 2, naming the flag).

use std::path::PathBuf;

use clap::Args;
use elect_lab::Mode;
use elect_soak::{Backend, Options, Schedule};

use crate::usage::{UsageError, parse_duration};

#[derive(Debug, Args)]
pub struct SoakArgs {
    /// The backends to soak, side by side: etcd, zk, raft, or several
    /// (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "etcd,zk,raft")]
    backend: Vec<String>,

    /// How long faults are dealt (at least 30s), e.g. 1h.
    #[arg(long, default_value = "10m", allow_hyphen_values = true)]
    duration: String,

    /// The seed every fault is drawn from [default: one drawn now, and
    /// printed].
    #[arg(long)]
    seed: Option<u64>,

    /// elect candidates per backend (3 to 7): separate `elect run`
    /// processes, or the Raft-vote peers.
    #[arg(long, default_value_t = 3)]
    candidates: usize,

    /// Run the peers' tools beside elect, on the same ensembles, in
    /// elections of their own: `etcdctl elect`, kazoo's Election and
    /// Curator's LeaderLatch (both error policies), each wrapping the same
    /// fenced writer.
    #[arg(long)]
    peers: bool,

    /// Let the peers' violations change the exit code too (by default
    /// they are counted and reported only).
    #[arg(long, requires = "peers")]
    peers_decide: bool,

    /// Run the ensembles as containers (deploy/images): members can then
    /// also be cut off the network.
    #[arg(long)]
    containers: bool,

    /// Where the history (history/, with the schedule.json that
    /// --schedule replays) and the report (report.html, report.md,
    /// book-soak.md for the book, verdict.json) go.
    #[arg(long, default_value = "soak-report")]
    report: PathBuf,

    /// Replay the faults of a recorded schedule (a soak's schedule.json)
    /// at the same instants and targets, with its seed, backends,
    /// candidates, peers and duration.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["seed", "backend", "candidates", "duration", "peers"])]
    schedule: Option<PathBuf>,

    /// Judge a recorded history again (a soak's report directory, or its
    /// history/ folder) and write its report beside it; nothing starts.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["seed", "backend", "candidates", "duration", "peers", "schedule", "containers"])]
    check: Option<PathBuf>,
}

/// A validated `elect lab soak`.
#[derive(Debug)]
pub enum Request {
    Soak(Box<Options>),
    /// The history read whole, its directory, and where its report goes.
    Check(Box<elect_judge::history::History>, PathBuf, PathBuf),
}

impl SoakArgs {
    pub fn validate(self) -> Result<Request, UsageError> {
        if let Some(dir) = self.check {
            let history = if dir.join("meta.json").exists() {
                dir.clone()
            } else {
                dir.join("history")
            };
            if !history.join("meta.json").exists() {
                return Err(UsageError::new(
                    "--check",
                    format!(
                        "{} holds no recorded history (no meta.json in it or in its history/)",
                        dir.display()
                    ),
                ));
            }
            let report = history.parent().map_or(dir.clone(), |p| {
                if history.ends_with("history") {
                    p.to_owned()
                } else {
                    history.clone()
                }
            });
            // Read whole now: a torn or garbled history is bad input
            // (exit 2, naming its file and line), never judged.
            let read = elect_judge::history::History::read(&history)
                .map_err(|e| UsageError::new("--check", e.to_string()))?;
            return Ok(Request::Check(Box::new(read), history, report));
        }
        let bin = std::env::current_exe().map_err(|e| {
            UsageError::new("elect", format!("finding elect's own executable: {e}"))
        })?;
        let mode = if self.containers {
            Mode::Containers
        } else {
            Mode::Processes
        };
        let options = match self.schedule {
            Some(path) => {
                let s = Schedule::read(&path).map_err(|e| match e {
                    elect_soak::Error::Input { flag, why } => UsageError::new(flag, why),
                    other => UsageError::new("--schedule", other.to_string()),
                })?;
                Options {
                    backends: s.backends,
                    duration: std::time::Duration::from_micros(s.duration),
                    seed: s.seed,
                    candidates: s.candidates,
                    peers: s.peers,
                    peers_decide: self.peers_decide,
                    report: self.report,
                    replay: Some(s.faults),
                    mode,
                    bin,
                }
            }
            None => {
                let mut backends = Vec::new();
                for name in &self.backend {
                    let b: Backend = name.trim().parse().map_err(|_| {
                        UsageError::new(
                            "--backend",
                            format!("{name:?} is not a backend: use etcd, zk or raft"),
                        )
                    })?;
                    if !backends.contains(&b) {
                        backends.push(b);
                    }
                }
                Options {
                    backends,
                    duration: parse_duration("--duration", &self.duration)?,
                    seed: self.seed.unwrap_or_else(drawn_seed),
                    candidates: self.candidates,
                    peers: self.peers,
                    peers_decide: self.peers_decide,
                    report: self.report,
                    replay: None,
                    mode,
                    bin,
                }
            }
        };
        options.check().map_err(|e| match e {
            elect_soak::Error::Input { flag, why } => UsageError::new(flag, why),
            other => UsageError::new("elect lab soak", other.to_string()),
        })?;
        Ok(Request::Soak(Box::new(options)))
    }
}

/// A seed from the clock, for a soak not given one.
fn drawn_seed() -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    (now.as_nanos() as u64 ^ u64::from(std::process::id())) % 1_000_000_000
}

/// Runs the request; the exit code: 0 when every check held,
/// [`elect_compare::SAFETY_FAILED`] when any failed.
pub fn run(request: Request) -> anyhow::Result<u8> {
    let (outcome, history) = match request {
        Request::Check(read, history, report) => (elect_soak::check(&read, &report)?, history),
        Request::Soak(options) => {
            if options
                .backends
                .contains(&elect_soak::options::Backend::Etcd)
            {
                elect_lab::EtcdRelease::chosen().map_err(crate::usage::release_refused)?;
            }
            let outcome = elect_soak::run(&options, &mut |line| eprintln!("{line}"))?;
            let history = outcome.report.join("history");
            (outcome, history)
        }
    };
    let j = &outcome.judgement;
    println!("{}", elect_judge::report::headline(j));
    for e in &j.elections {
        for v in &e.violations {
            println!(
                "{} {} at {}: {} (seed {})",
                v.election,
                v.kind.name(),
                elect_judge::checks::ms(v.at),
                v.detail,
                j.seed
            );
            for f in &v.faults {
                println!("  in effect: {f}");
            }
            for line in &v.around {
                println!("    {line}");
            }
        }
    }
    // A history written before schedules were recorded, or copied
    // without it, has none to replay.
    let schedule = history.join("schedule.json");
    let replay = if schedule.is_file() {
        format!("; replay with --schedule {}", schedule.display())
    } else {
        String::new()
    };
    eprintln!(
        "report: {} (report.html, report.md, verdict.json{replay})",
        outcome.report.display(),
    );
    Ok(if j.held {
        0
    } else {
        elect_compare::SAFETY_FAILED
    })
}
