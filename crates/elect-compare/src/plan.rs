//! What a comparison will run, checked before anything starts: which
//! backends and scenarios, how many trials and candidates, where the
//! ensembles are. The command line's flags become [`Options`]; a
//! [`Plan`] is options that passed every check, each refusal naming the
//! flag it came from ([`PlanError`]).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use elect::Backend;
use elect_lab::Mode;

use crate::scenario::Scenario;

/// The most candidates run as separate processes beside a scenario's
/// faults; `scale-processes` runs up to [`MAX_SCALE_PROCESSES`] of them
/// (handovers alone), and `scale` up to [`MAX_SCALE_CANDIDATES`] through
/// the library in one process.
const MAX_PROCESS_CANDIDATES: usize = 50;
const MAX_SCALE_PROCESSES: usize = 200;
const MAX_SCALE_CANDIDATES: usize = 1000;

/// The most elections the elections scenario runs on one session.
const MAX_ELECTIONS: usize = 100_000;

/// What to compare, as the command line gives it.
#[derive(Debug, Clone)]
pub struct Options {
    /// The backends, in any order, repeats allowed.
    pub backends: Vec<Backend>,
    /// The scenarios; `None` for all of them.
    pub scenarios: Option<Vec<Scenario>>,
    /// TTLs that replace the defaults (etcd 2 s, ZooKeeper 2 s, Raft-vote
    /// 150 ms).
    pub ttl: Vec<(Backend, Duration)>,
    /// Trials per scenario; `None` for each scenario's default.
    pub trials: Option<usize>,
    /// Few trials, a short scale curve.
    pub quick: bool,
    /// Raft-vote peers: 3 or 5.
    pub raft_peers: usize,
    /// Candidates per election; `None` for 3 (scale: a curve).
    pub candidates: Option<usize>,
    /// Elections on one session in the elections scenario.
    pub elections: Option<usize>,
    /// Also the peers' own tools (etcdctl, kazoo, Curator).
    pub baselines: bool,
    /// Ensembles as local processes or containers.
    pub mode: Mode,
    /// A secured lab, and mutual TLS between Raft-vote peers.
    pub secure: bool,
    /// An etcd cluster to use instead of starting one.
    pub etcd_endpoints: Option<String>,
    /// A ZooKeeper ensemble to use instead of starting one.
    pub zk_endpoints: Option<String>,
    /// One JSON row per line instead of a table.
    pub json: bool,
    /// Where to write the report.
    pub report: Option<PathBuf>,
    /// With stress-ng on every core and an fsync writer.
    pub under_load: bool,
    /// The command line, for the report.
    pub command_line: String,
}

/// A refused option: the flag, and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{flag}: {reason}")]
pub struct PlanError {
    /// The flag, as the command line spells it (`--ttl`).
    pub flag: &'static str,
    /// What is wrong, and what would do.
    pub reason: String,
}

impl PlanError {
    fn new(flag: &'static str, reason: impl Into<String>) -> PlanError {
        PlanError {
            flag,
            reason: reason.into(),
        }
    }
}

/// A checked comparison: what [`run`](crate::run) runs.
#[derive(Debug)]
pub struct Plan {
    pub(crate) backends: Vec<Backend>,
    pub(crate) scenarios: Vec<Scenario>,
    trials: Option<usize>,
    quick: bool,
    pub(crate) ttl: BTreeMap<Backend, Duration>,
    pub(crate) raft_peers: usize,
    pub(crate) candidates: Option<usize>,
    pub(crate) elections: usize,
    pub(crate) baselines: bool,
    pub(crate) mode: Mode,
    pub(crate) secure: bool,
    pub(crate) etcd_endpoints: Option<String>,
    pub(crate) zk_endpoints: Option<String>,
    pub(crate) json: bool,
    pub(crate) report: Option<PathBuf>,
    pub(crate) under_load: bool,
    pub(crate) command_line: String,
}

impl Plan {
    /// Whether it starts an etcd cluster of its own (the release
    /// [`elect_lab::EtcdRelease::chosen`] names), rather than using the
    /// user's.
    pub fn starts_etcd(&self) -> bool {
        self.backends.contains(&Backend::Etcd) && self.etcd_endpoints.is_none()
    }

    /// Checks `options`.
    ///
    /// # Errors
    /// [`PlanError`] naming the first flag whose value cannot run.
    pub fn new(options: Options) -> Result<Plan, PlanError> {
        let mut backends = options.backends.clone();
        backends.sort();
        backends.dedup();
        let mut scenarios = options
            .scenarios
            .clone()
            .unwrap_or_else(|| Scenario::ALL.to_vec());
        scenarios.sort();
        scenarios.dedup();
        let ttl = ttls(&options.ttl)?;
        check_sizes(&options, &scenarios)?;
        check_ensembles(&options)?;
        if let Some(dir) = &options.report {
            check_report(dir)?;
        }
        Ok(Plan {
            backends,
            scenarios,
            trials: options.trials,
            quick: options.quick,
            ttl,
            raft_peers: options.raft_peers,
            candidates: options.candidates,
            elections: options
                .elections
                .unwrap_or(if options.quick { 100 } else { 1000 }),
            baselines: options.baselines,
            mode: options.mode,
            secure: options.secure,
            etcd_endpoints: options.etcd_endpoints.map(|e| e.replace("http://", "")),
            zk_endpoints: options.zk_endpoints,
            json: options.json,
            report: options.report,
            under_load: options.under_load,
            command_line: options.command_line,
        })
    }

    /// Trials of `s`: as asked, or the scenario's default.
    pub(crate) fn trials(&self, s: Scenario) -> usize {
        self.trials.unwrap_or_else(|| s.default_trials(self.quick))
    }

    /// Candidate counts for the scale curve.
    pub(crate) fn scale_sizes(&self) -> Vec<usize> {
        match (self.candidates, self.quick) {
            (Some(n), _) => vec![n],
            (None, true) => vec![3, 30],
            (None, false) => vec![3, 30, 300, 1000],
        }
    }

    /// TTLs over which the elections scenario counts the session's
    /// renewals: three for the book's figures, one in a quick run (the
    /// TTL there is 10 s: the two extra windows were 40 s of CI).
    pub(crate) fn renewal_window_ttls(&self) -> u32 {
        if self.quick { 1 } else { 3 }
    }

    /// Whether the steady scenario counts its long TTL and a thousand
    /// candidates in one process: not in a quick run (they were about
    /// five minutes of CI).
    pub(crate) fn steady_in_full(&self) -> bool {
        !self.quick
    }

    /// Candidate counts for the curve of separate processes.
    pub(crate) fn scale_process_sizes(&self) -> Vec<usize> {
        match (self.candidates, self.quick) {
            (Some(n), _) => vec![n],
            (None, true) => vec![10],
            (None, false) => vec![3, 30, 100, 200],
        }
    }
}

/// The default TTLs with `overrides`, each within what its backend and
/// the lab's ensembles take.
fn ttls(overrides: &[(Backend, Duration)]) -> Result<BTreeMap<Backend, Duration>, PlanError> {
    let mut ttls = BTreeMap::from([
        (Backend::Etcd, Duration::from_secs(2)),
        (Backend::Zk, Duration::from_secs(2)),
        (Backend::Raft, Duration::from_millis(150)),
    ]);
    for &(backend, d) in overrides {
        let ok = match backend {
            Backend::Etcd => d.as_secs() >= 1 && d.subsec_nanos() == 0,
            Backend::Zk => d >= Duration::from_millis(400),
            Backend::Raft => d >= Duration::from_millis(10),
        };
        if !ok || d > Duration::from_secs(3600) {
            return Err(PlanError::new(
                "--ttl",
                format!(
                    "{backend}={}: etcd takes whole seconds, zk at least 400ms (2 ticks of \
                     the lab's ensemble), raft at least 10ms; none more than 1h",
                    humantime::format_duration(d)
                ),
            ));
        }
        ttls.insert(backend, d);
    }
    Ok(ttls)
}

/// Peers, candidates, elections and trials within what compare runs.
fn check_sizes(options: &Options, scenarios: &[Scenario]) -> Result<(), PlanError> {
    if !matches!(options.raft_peers, 3 | 5) {
        return Err(PlanError::new(
            "--raft-peers",
            format!("{}: compare runs 3 or 5 peers", options.raft_peers),
        ));
    }
    if let Some(n) = options.candidates {
        let max = scenarios
            .iter()
            .map(|s| match s {
                Scenario::Scale => MAX_SCALE_CANDIDATES,
                Scenario::ScaleProcesses => MAX_SCALE_PROCESSES,
                _ => MAX_PROCESS_CANDIDATES,
            })
            .min()
            .unwrap_or(MAX_PROCESS_CANDIDATES);
        if n < 2 || n > max {
            let hint = if max == MAX_PROCESS_CANDIDATES {
                " (up to 200 with --scenarios scale-processes, 1000 with --scenarios scale, \
                 which runs them in one process)"
            } else {
                ""
            };
            return Err(PlanError::new(
                "--candidates",
                format!("{n}: use 2 to {max}{hint}"),
            ));
        }
    }
    if let Some(e) = options.elections
        && !(1..=MAX_ELECTIONS).contains(&e)
    {
        return Err(PlanError::new(
            "--elections",
            format!("{e}: use 1 to {MAX_ELECTIONS}"),
        ));
    }
    if options.trials == Some(0) {
        return Err(PlanError::new("--trials", "0 trials measure nothing"));
    }
    Ok(())
}

/// `--report DIR` can be written, checked before a run of many minutes
/// rather than after it: an existing, writable directory, or a path
/// whose parent is one (the directory is made at the end).
fn check_report(dir: &std::path::Path) -> Result<(), PlanError> {
    use nix::unistd::{AccessFlags, access};
    let writable = |d: &std::path::Path| access(d, AccessFlags::W_OK | AccessFlags::X_OK).is_ok();
    let refuse = |why: String| {
        Err(PlanError::new(
            "--report",
            format!("{}: {why}", dir.display()),
        ))
    };
    match std::fs::metadata(dir) {
        Ok(m) if !m.is_dir() => refuse("exists and is not a directory".into()),
        Ok(_) if !writable(dir) => refuse("is not writable".into()),
        Ok(_) => Ok(()),
        Err(_) => {
            let parent = match dir.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => std::path::Path::new("."),
            };
            match std::fs::metadata(parent) {
                Ok(m) if m.is_dir() && writable(parent) => Ok(()),
                Ok(m) if m.is_dir() => refuse(format!("{} is not writable", parent.display())),
                Ok(_) => refuse(format!("{} is not a directory", parent.display())),
                Err(e) => refuse(format!("{}: {e}", parent.display())),
            }
        }
    }
}

/// Ensembles the user names: plain `host:port` lists, never with
/// `--secure` (which starts a secured lab of its own).
fn check_ensembles(options: &Options) -> Result<(), PlanError> {
    for (flag, value) in [
        ("--etcd-endpoints", &options.etcd_endpoints),
        ("--zk-endpoints", &options.zk_endpoints),
    ] {
        let Some(v) = value else { continue };
        if v.split(',').any(|e| e.trim().is_empty()) {
            return Err(PlanError::new(flag, format!("{v:?} has an empty endpoint")));
        }
        if v.contains("https://") {
            return Err(PlanError::new(
                flag,
                "TLS endpoints are not supported by compare yet",
            ));
        }
        // The library's own checks, as `--endpoints` has them.
        let parsed = if flag == "--etcd-endpoints" {
            elect::config::EtcdEndpoints::parse(v).map(drop)
        } else {
            elect::config::ZkEnsemble::parse(v).map(drop)
        };
        if let Err(e) = parsed {
            let reason = match e {
                elect::Error::Config { reason, .. } => reason,
                other => other.to_string(),
            };
            return Err(PlanError::new(flag, reason));
        }
        if options.secure {
            return Err(PlanError::new(
                flag,
                "cannot be secured by compare: --secure starts a secured lab of its own",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> Options {
        Options {
            backends: vec![Backend::Zk, Backend::Etcd, Backend::Zk],
            scenarios: None,
            ttl: Vec::new(),
            trials: None,
            quick: true,
            raft_peers: 3,
            candidates: None,
            elections: None,
            baselines: false,
            mode: Mode::Processes,
            secure: false,
            etcd_endpoints: None,
            zk_endpoints: None,
            json: false,
            report: None,
            under_load: false,
            command_line: "elect compare".into(),
        }
    }

    fn refused(options: Options) -> &'static str {
        Plan::new(options).expect_err("refused").flag
    }

    #[test]
    fn a_plan_orders_its_backends_and_takes_the_defaults() {
        let mut o = options();
        o.ttl = vec![(Backend::Raft, Duration::from_millis(50))];
        o.etcd_endpoints = Some("http://127.0.0.1:2379".into());
        let plan = Plan::new(o).unwrap();
        assert_eq!(plan.backends, [Backend::Etcd, Backend::Zk]);
        assert_eq!(plan.scenarios, Scenario::ALL);
        assert_eq!(plan.ttl[&Backend::Raft], Duration::from_millis(50));
        assert_eq!(plan.ttl[&Backend::Etcd], Duration::from_secs(2));
        assert_eq!(plan.elections, 100);
        assert_eq!(plan.scale_sizes(), [3, 30]);
        assert_eq!(plan.etcd_endpoints.as_deref(), Some("127.0.0.1:2379"));
    }

    #[test]
    fn each_refusal_names_its_flag() {
        type Change = fn(&mut Options);
        let with = |f: Change| {
            let mut o = options();
            f(&mut o);
            o
        };
        let cases: [(Change, &str); 13] = [
            (
                |o| o.ttl = vec![(Backend::Etcd, Duration::from_millis(1500))],
                "--ttl",
            ),
            (
                |o| o.ttl = vec![(Backend::Zk, Duration::from_millis(100))],
                "--ttl",
            ),
            (|o| o.raft_peers = 4, "--raft-peers"),
            (|o| o.candidates = Some(51), "--candidates"),
            (|o| o.elections = Some(0), "--elections"),
            (|o| o.trials = Some(0), "--trials"),
            (
                |o| o.zk_endpoints = Some("a:2181,,b:2181".into()),
                "--zk-endpoints",
            ),
            (
                |o| o.zk_endpoints = Some("127.0.0.1".into()),
                "--zk-endpoints",
            ),
            (
                |o| o.etcd_endpoints = Some("ftp://x".into()),
                "--etcd-endpoints",
            ),
            (
                |o| o.etcd_endpoints = Some("127.0.0.1:99999".into()),
                "--etcd-endpoints",
            ),
            (|o| o.report = Some("/dev/null/r".into()), "--report"),
            (|o| o.report = Some("/nonexistent/dir/r".into()), "--report"),
            (
                |o| {
                    o.secure = true;
                    o.etcd_endpoints = Some("h:2379".into());
                },
                "--etcd-endpoints",
            ),
        ];
        for (change, flag) in cases {
            assert_eq!(refused(with(change)), flag);
        }
        // Scale alone runs its candidates in one process: up to 1000;
        // scale-processes up to 200.
        let mut o = options();
        o.scenarios = Some(vec![Scenario::Scale]);
        o.candidates = Some(1000);
        assert!(Plan::new(o).is_ok());
        let mut o = options();
        o.scenarios = Some(vec![Scenario::ScaleProcesses]);
        o.candidates = Some(200);
        assert!(Plan::new(o.clone()).is_ok());
        o.candidates = Some(201);
        assert_eq!(refused(o), "--candidates");
    }
}
