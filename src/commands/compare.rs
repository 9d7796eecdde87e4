//! `elect compare`: its flags, and their translation into the options
//! `elect-compare` checks and runs (see that crate for the scenarios).

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use elect::Backend;
use elect_compare::{Options, Scenario};
use elect_lab::Mode;

use crate::args::ResultsFormat;
use crate::usage::{UsageError, parse_duration};

pub use elect_compare::{Plan, run};

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Which backends, comma-separated: etcd, zk, raft.
    #[arg(long, env = "ELECT_COMPARE_BACKENDS", default_value = "etcd,zk,raft")]
    pub backends: String,

    /// Which scenarios, comma-separated: election, handover, failover,
    /// failover-next, freeze, cutoff, member-kill, rolling-restart,
    /// service-leader-kill, compaction, churn, scale, scale-processes,
    /// elections, switchover, switchover-last, health, steady [default:
    /// all].
    #[arg(long, env = "ELECT_COMPARE_SCENARIOS")]
    pub scenarios: Option<String>,

    /// The TTL per backend, e.g. etcd=2s,zk=2s,raft=150ms [default: those].
    #[arg(long, value_name = "BACKEND=DURATION,...", allow_hyphen_values = true)]
    pub ttl: Option<String>,

    /// Output: a table for people, or one JSON row per line (a
    /// backend, implementation and scenario each).
    #[arg(long, env = "ELECT_FORMAT", value_enum, default_value = "text")]
    pub format: ResultsFormat,

    /// Trials per scenario [default: depends on the scenario; see the compare guide in docs/].
    #[arg(long)]
    pub trials: Option<usize>,

    /// A small run for a first look: few trials, scale up to 30.
    #[arg(long)]
    pub quick: bool,

    /// Raft-vote peers: 3 or 5.
    #[arg(long, default_value_t = 3)]
    pub raft_peers: usize,

    /// Candidates per election: up to 50 processes; scale-processes: up to
    /// 200; scale: one process, through the library, up to 1000 on etcd and
    /// ZooKeeper [default: 3; scale-processes: 3,30,100,200; scale:
    /// 3,30,300,1000].
    #[arg(long)]
    pub candidates: Option<usize>,

    /// Elections on one session in the elections scenario (one process,
    /// through the library), 1 to 100000 [default: 1000; --quick: 100].
    #[arg(long)]
    pub elections: Option<usize>,

    /// Also run the peers' own tools where installed: `etcdctl elect`,
    /// kazoo's Election, Curator's LeaderLatch.
    #[arg(long)]
    pub baselines: bool,

    /// Start the ensembles as containers (deploy/images) instead of local
    /// processes.
    #[arg(long)]
    pub containers: bool,

    /// Secure everything: a secured lab (etcd: TLS, client certificates,
    /// auth; ZooKeeper: its TLS port, digest credentials) and mutual TLS
    /// between Raft-vote peers. Run once with and once without to see what
    /// TLS costs.
    #[arg(long)]
    pub secure: bool,

    /// Use this etcd cluster (host:port,...) instead of starting one.
    #[arg(long, env = "ELECT_ETCD_ENDPOINTS")]
    pub etcd_endpoints: Option<String>,

    /// Use this ZooKeeper ensemble (host:port,...) instead of starting one.
    #[arg(long, env = "ELECT_ZK_ENDPOINTS")]
    pub zk_endpoints: Option<String>,

    /// Write the report into this directory: report.html (one page, the
    /// charts inlined beside the table, the command and the versions),
    /// report.md (the same as text), the charts as SVG, rows.json (the
    /// rows as printed), and book-performance.md, book-faults.md and
    /// book-operations.md (the book's results pages, for the scenarios
    /// that ran).
    #[arg(long, value_name = "DIR")]
    pub report: Option<PathBuf>,

    /// Run every scenario with the machine under load, as busy hosts are:
    /// stress-ng with a CPU worker on every core and an fsync writer
    /// (needs stress-ng).
    #[arg(long)]
    pub under_load: bool,
}

impl CompareArgs {
    /// The plan these flags describe, or the flag that is wrong.
    pub fn validate(self, warnings: &mut Vec<String>) -> Result<Plan, UsageError> {
        let backends = list(
            "--backends",
            &self.backends,
            |name| name.parse::<Backend>().ok(),
            "etcd, zk, raft",
        )?;
        let scenarios = match &self.scenarios {
            None => None,
            Some(text) => Some(list(
                "--scenarios",
                text,
                Scenario::parse,
                &scenario_names(),
            )?),
        };
        let ttl = match &self.ttl {
            None => Vec::new(),
            Some(text) => ttls(text)?,
        };
        if self.quick && self.trials.is_some() {
            warnings.push("--quick sets few trials; --trials overrides them".into());
        }
        let options = Options {
            backends,
            scenarios,
            ttl,
            trials: self.trials,
            quick: self.quick,
            raft_peers: self.raft_peers,
            candidates: self.candidates,
            elections: self.elections,
            baselines: self.baselines,
            mode: if self.containers {
                Mode::Containers
            } else {
                Mode::Processes
            },
            secure: self.secure,
            etcd_endpoints: self.etcd_endpoints,
            zk_endpoints: self.zk_endpoints,
            json: self.format == ResultsFormat::Json,
            report: self.report,
            under_load: self.under_load,
            command_line: std::env::args().collect::<Vec<_>>().join(" "),
        };
        Plan::new(options).map_err(|e| UsageError::new(e.flag, e.reason))
    }
}

/// Every scenario's name, as `--scenarios` takes them.
fn scenario_names() -> String {
    let names: Vec<&str> = Scenario::ALL.iter().map(|s| s.name()).collect();
    names.join(", ")
}

/// `--ttl etcd=2s,zk=2s,raft=150ms`.
fn ttls(text: &str) -> Result<Vec<(Backend, Duration)>, UsageError> {
    let mut out = Vec::new();
    for item in text.split(',').map(str::trim) {
        let (name, value) = item.split_once('=').ok_or_else(|| {
            UsageError::new(
                "--ttl",
                format!("{item:?}: expected BACKEND=DURATION, e.g. etcd=2s,zk=2s,raft=150ms"),
            )
        })?;
        let backend = name.parse::<Backend>().ok().ok_or_else(|| {
            UsageError::new("--ttl", format!("{name:?} is not one of etcd, zk, raft"))
        })?;
        out.push((backend, parse_duration("--ttl", value)?));
    }
    Ok(out)
}

fn list<T>(
    flag: &str,
    text: &str,
    parse: impl Fn(&str) -> Option<T>,
    known: &str,
) -> Result<Vec<T>, UsageError> {
    let mut out = Vec::new();
    for item in text.split(',').map(str::trim) {
        let value = parse(item)
            .ok_or_else(|| UsageError::new(flag, format!("{item:?} is not one of {known}")))?;
        out.push(value);
    }
    Ok(out)
}
