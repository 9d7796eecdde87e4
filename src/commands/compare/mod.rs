//! `elect compare`: the same scenarios on every backend, side by side, and
//! the peers' own tools beside elect on the same ensembles.
//!
//! - [`contender`]: who campaigns (elect on a backend, `etcdctl elect`,
//!   kazoo, Curator) and how each says it was elected;
//! - [`arena`]: one election's candidates as real processes;
//! - [`scenario`]: the trials (handover, failover, freeze...);
//! - [`scale`]: many candidates in one process, through the library;
//! - [`probe`]: what the servers count (queued candidates, notifications,
//!   requests);
//! - [`output`] and [`report`]: the table, JSON lines, charts and page.
//!
//! Ensembles come from the lab (local processes, or `--containers`) unless
//! the user names them; whatever compare started is gone when it ends,
//! also on Ctrl-C (the lab's interrupt flag ends every wait, and the
//! `Drop`s of arenas and the lab tear down).

pub mod arena;
pub mod contender;
pub mod elections;
pub mod floor;
pub mod output;
pub mod probe;
pub mod progress;
pub mod report;
pub mod scale;
pub mod scenario;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use elect_lab::{self, Lab, Mode, Role, Spec};

use clap::Args;

use crate::args::ResultsFormat;
use crate::usage::{UsageError, parse_duration};
use contender::{Contender, Implementation, baseline_available};
use elect::Backend;
use output::Row;
use probe::Probe;
use progress::Progress;
use scenario::{Scenario, Setup};

/// Exit code when a safety check failed: an overlap outside `freeze`, or a
/// stale write accepted. 0 when every check held; 1 when compare itself
/// could not run; 2 for bad usage.
pub const SAFETY_FAILED: u8 = 4;

/// The most candidates run as separate processes; more go through the
/// library in one process (`scale`).
const MAX_PROCESS_CANDIDATES: usize = 50;
const MAX_SCALE_CANDIDATES: usize = 1000;
/// The shortest etcd TTL the scale scenario runs with.
const SCALE_ETCD_TTL: Duration = Duration::from_secs(10);

/// The most elections the elections scenario runs on one session.
const MAX_ELECTIONS: usize = 100_000;

/// A validated `elect compare`.
#[derive(Debug)]
pub struct Plan {
    backends: Vec<Backend>,
    scenarios: Vec<Scenario>,
    trials: Option<usize>,
    quick: bool,
    ttl: BTreeMap<Backend, Duration>,
    raft_peers: usize,
    candidates: Option<usize>,
    elections: usize,
    baselines: bool,
    mode: Mode,
    secure: bool,
    etcd_endpoints: Option<String>,
    zk_endpoints: Option<String>,
    json: bool,
    report: Option<PathBuf>,
    under_load: bool,
    command_line: String,
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

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Which backends, comma-separated: etcd, zk, raft.
    #[arg(long, env = "ELECT_COMPARE_BACKENDS", default_value = "etcd,zk,raft")]
    pub backends: String,

    /// Which scenarios, comma-separated: election, handover, failover,
    /// failover-next, freeze, cutoff, member-kill, rolling-restart, service-leader-kill, compaction, churn, scale, elections [default:
    /// all].
    #[arg(long, env = "ELECT_COMPARE_SCENARIOS")]
    pub scenarios: Option<String>,

    /// The TTL per backend, e.g. etcd=2s,zk=2s,raft=150ms [default: those].
    #[arg(long, value_name = "BACKEND=DURATION,...")]
    pub ttl: Option<String>,

    /// Output: a table for people, or one JSON row per line (a
    /// backend, implementation and scenario each).
    #[arg(long, env = "ELECT_FORMAT", value_enum, default_value = "text")]
    pub format: ResultsFormat,

    /// Trials per scenario [default: depends on the scenario; see README].
    #[arg(long)]
    pub trials: Option<usize>,

    /// A small run for a first look: few trials, scale up to 30.
    #[arg(long)]
    pub quick: bool,

    /// Raft-vote peers: 3 or 5.
    #[arg(long, default_value_t = 3)]
    pub raft_peers: usize,

    /// Candidates per election (scale: one process, through the library;
    /// up to 1000 on etcd and ZooKeeper) [default: 3; scale: 3,30,300,1000].
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
    /// report.md (the same as text), the charts as SVG, and rows.json
    /// (the rows as printed).
    #[arg(long, value_name = "DIR")]
    pub report: Option<PathBuf>,

    /// Run every scenario with the machine under load, as busy hosts are:
    /// stress-ng with a CPU worker on every core and an fsync writer
    /// (needs stress-ng).
    #[arg(long)]
    pub under_load: bool,
}

impl CompareArgs {
    pub fn validate(self, warnings: &mut Vec<String>) -> Result<Plan, UsageError> {
        let (args, ttl, format) = (&self, self.ttl.as_deref(), self.format);
        let mut backends = list(
            "--backends",
            &args.backends,
            |name| name.parse::<Backend>().ok(),
            "etcd, zk, raft",
        )?;
        backends.sort();
        backends.dedup();
        let mut scenarios = match &args.scenarios {
            None => Scenario::ALL.to_vec(),
            Some(text) => list(
                "--scenarios",
                text,
                Scenario::parse,
                "election, handover, failover, failover-next, freeze, cutoff, member-kill, rolling-restart, service-leader-kill, compaction, churn, scale, elections",
            )?,
        };
        scenarios.sort();
        scenarios.dedup();
        let mut ttls = BTreeMap::from([
            (Backend::Etcd, Duration::from_secs(2)),
            (Backend::Zk, Duration::from_secs(2)),
            (Backend::Raft, Duration::from_millis(150)),
        ]);
        if let Some(text) = ttl {
            for item in text.split(',').map(str::trim) {
                let (name, value) = item.split_once('=').ok_or_else(|| {
                    UsageError::new(
                        "--ttl",
                        format!(
                            "{item:?}: expected BACKEND=DURATION, e.g. etcd=2s,zk=2s,raft=150ms"
                        ),
                    )
                })?;
                let backend = name.parse::<Backend>().ok().ok_or_else(|| {
                    UsageError::new("--ttl", format!("{name:?} is not one of etcd, zk, raft"))
                })?;
                let d = parse_duration("--ttl", value)?;
                let ok = match backend {
                    Backend::Etcd => d.as_secs() >= 1 && d.subsec_nanos() == 0,
                    Backend::Zk => d >= Duration::from_millis(400),
                    Backend::Raft => d >= Duration::from_millis(10),
                };
                if !ok || d > Duration::from_secs(3600) {
                    return Err(UsageError::new(
                        "--ttl",
                        format!(
                            "{name}={value}: etcd takes whole seconds, zk at least 400ms (2 ticks of \
                             the lab's ensemble), raft at least 10ms; none more than 1h"
                        ),
                    ));
                }
                ttls.insert(backend, d);
            }
        }
        if !matches!(args.raft_peers, 3 | 5) {
            return Err(UsageError::new(
                "--raft-peers",
                format!("{}: compare runs 3 or 5 peers", args.raft_peers),
            ));
        }
        if let Some(n) = args.candidates {
            let only_scale = scenarios.iter().all(|s| *s == Scenario::Scale);
            let max = if only_scale {
                MAX_SCALE_CANDIDATES
            } else {
                MAX_PROCESS_CANDIDATES
            };
            if n < 2 || n > max {
                return Err(UsageError::new(
                    "--candidates",
                    format!(
                        "{n}: use 2 to {max}{}",
                        if only_scale {
                            ""
                        } else {
                            " (up to 1000 with --scenarios scale, which runs them in one process)"
                        }
                    ),
                ));
            }
        }
        if let Some(e) = args.elections
            && !(1..=MAX_ELECTIONS).contains(&e)
        {
            return Err(UsageError::new(
                "--elections",
                format!("{e}: use 1 to {MAX_ELECTIONS}"),
            ));
        }
        if args.trials == Some(0) {
            return Err(UsageError::new("--trials", "0 trials measure nothing"));
        }
        if args.quick && args.trials.is_some() {
            warnings.push("--quick sets few trials; --trials overrides them".into());
        }
        for (flag, value) in [
            ("--etcd-endpoints", &args.etcd_endpoints),
            ("--zk-endpoints", &args.zk_endpoints),
        ] {
            if let Some(v) = value {
                if v.split(',').any(|e| e.trim().is_empty()) {
                    return Err(UsageError::new(
                        flag,
                        format!("{v:?} has an empty endpoint"),
                    ));
                }
                if v.contains("https://") {
                    return Err(UsageError::new(
                        flag,
                        "TLS endpoints are not supported by compare yet",
                    ));
                }
            }
        }
        let mode = if args.containers {
            Mode::Containers
        } else {
            Mode::Processes
        };
        if args.secure {
            for (flag, given) in [
                ("--etcd-endpoints", args.etcd_endpoints.is_some()),
                ("--zk-endpoints", args.zk_endpoints.is_some()),
            ] {
                if given {
                    return Err(UsageError::new(
                        flag,
                        "cannot be secured by compare: --secure starts a secured lab of its own",
                    ));
                }
            }
        }
        Ok(Plan {
            backends,
            scenarios,
            trials: args.trials,
            quick: args.quick,
            ttl: ttls,
            raft_peers: args.raft_peers,
            candidates: args.candidates,
            elections: args
                .elections
                .unwrap_or(if args.quick { 100 } else { 1000 }),
            baselines: args.baselines,
            mode,
            secure: args.secure,
            etcd_endpoints: args
                .etcd_endpoints
                .as_ref()
                .map(|e| e.replace("http://", "")),
            zk_endpoints: args.zk_endpoints.clone(),
            json: format == ResultsFormat::Json,
            report: args.report.clone(),
            under_load: args.under_load,
            command_line: std::env::args().collect::<Vec<_>>().join(" "),
        })
    }
}

impl Plan {
    fn trials(&self, s: Scenario) -> usize {
        self.trials.unwrap_or_else(|| s.default_trials(self.quick))
    }

    /// Candidate counts for the scale curve.
    fn scale_sizes(&self) -> Vec<usize> {
        match (self.candidates, self.quick) {
            (Some(n), _) => vec![n],
            (None, true) => vec![3, 30],
            (None, false) => vec![3, 30, 300, 1000],
        }
    }
}

/// A backend that cannot run, and how to enable it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Unavailable {
    pub backend: &'static str,
    pub implementation: &'static str,
    pub scenario: Option<&'static str>,
    pub reason: String,
}

/// Where the backends run.
struct Ensembles {
    lab: Option<RefCell<Lab>>,
    etcd: Result<String, String>,
    zk: Result<String, String>,
    /// The members' plain addresses (health, metrics, four-letter words),
    /// where they differ from the client endpoints (a secured lab).
    etcd_plain: Option<String>,
    zk_plain: Option<String>,
    /// A secured lab's credentials.
    security: Option<elect_lab::Security>,
}

impl Ensembles {
    fn prepare(plan: &Plan) -> anyhow::Result<Ensembles> {
        let wants = |b| plan.backends.contains(&b);
        let start_etcd = wants(Backend::Etcd) && plan.etcd_endpoints.is_none();
        let start_zk = wants(Backend::Zk) && plan.zk_endpoints.is_none();
        let mut ens = Ensembles {
            etcd_plain: None,
            zk_plain: None,
            security: None,
            lab: None,
            etcd: plan
                .etcd_endpoints
                .clone()
                .ok_or_else(|| "not started".to_owned()),
            zk: plan
                .zk_endpoints
                .clone()
                .ok_or_else(|| "not started".to_owned()),
        };
        if !(start_etcd || start_zk) {
            return Ok(ens);
        }
        let mut etcd = usize::from(start_etcd) * 3;
        let mut zk = usize::from(start_zk) * 3;
        // Process mode needs the programs; say what is missing per backend
        // rather than giving up on both.
        if plan.mode == Mode::Processes {
            if etcd > 0 && elect_lab::which("etcd").is_none() {
                ens.etcd = Err(format!(
                    "etcd is not installed: {}, or pass --etcd-endpoints",
                    "apt-get install etcd-server, or use --containers"
                ));
                etcd = 0;
            }
            if zk > 0
                && (elect_lab::which("java").is_none()
                    || !std::path::Path::new(elect_lab::zk::JAR).exists())
            {
                ens.zk = Err(
                    "ZooKeeper is not installed: apt-get install zookeeper (and a Java runtime), \
                     or use --containers, or pass --zk-endpoints"
                        .into(),
                );
                zk = 0;
            }
        }
        if etcd + zk == 0 {
            return Ok(ens);
        }
        let mut spec = Spec::new(plan.mode, etcd, zk);
        spec.dir = std::env::temp_dir().join(format!("elect-compare-{}", std::process::id()));
        spec.secure = plan.secure;
        // etcd's default: tokens that expire between trials would put a
        // password check (bcrypt) on the measured path.
        spec.etcd_auth_token_ttl = 300;
        eprintln!(
            "compare: starting {}{}{} as {}",
            if etcd > 0 {
                "a 3-member etcd cluster"
            } else {
                ""
            },
            if etcd > 0 && zk > 0 { " and " } else { "" },
            if zk > 0 {
                "a 3-server ZooKeeper ensemble"
            } else {
                ""
            },
            match plan.mode {
                Mode::Processes => "local processes",
                Mode::Containers => "containers",
            }
        );
        match Lab::up(&spec) {
            Ok(lab) => {
                let plain = |role: Role| {
                    let list: Vec<&str> = lab
                        .members()
                        .iter()
                        .filter(|m| m.role == role)
                        .map(|m| m.health_address())
                        .collect();
                    (!list.is_empty()).then(|| list.join(","))
                };
                if etcd > 0 {
                    ens.etcd = Ok(lab.endpoints(Role::Etcd).expect("started"));
                    ens.etcd_plain = plain(Role::Etcd);
                }
                if zk > 0 {
                    ens.zk = Ok(lab.endpoints(Role::Zk).expect("started"));
                    ens.zk_plain = plain(Role::Zk);
                }
                ens.security = lab.security.clone();
                ens.lab = Some(RefCell::new(lab));
            }
            Err(elect_lab::Error::Interrupted) => anyhow::bail!("interrupted"),
            Err(e) => {
                let reason = format!("the lab could not start it: {e}");
                if etcd > 0 {
                    ens.etcd = Err(reason.clone());
                }
                if zk > 0 {
                    ens.zk = Err(reason);
                }
            }
        }
        Ok(ens)
    }

    /// The plain addresses of `backend`'s members (for probes).
    fn plain(&self, backend: Backend) -> Option<&str> {
        match backend {
            Backend::Etcd => self.etcd_plain.as_deref(),
            Backend::Zk => self.zk_plain.as_deref(),
            Backend::Raft => None,
        }
    }

    fn endpoints(&self, backend: Backend) -> Result<String, String> {
        match backend {
            Backend::Etcd => self.etcd.clone(),
            Backend::Zk => self.zk.clone(),
            Backend::Raft => Ok(String::new()),
        }
    }
}

fn implementations(backend: Backend, baselines: bool) -> Vec<Implementation> {
    let mut out = vec![Implementation::Elect];
    if baselines {
        match backend {
            Backend::Etcd => out.push(Implementation::Etcdctl),
            Backend::Zk => out.extend([
                Implementation::Kazoo,
                Implementation::Curator,
                Implementation::CuratorSession,
            ]),
            Backend::Raft => {}
        }
    }
    out
}

/// Runs the plan; the exit code.
pub fn run(plan: Plan) -> anyhow::Result<u8> {
    elect_lab::interrupt::install();
    let started = std::time::Instant::now();
    let bin = std::env::current_exe().context("locating the elect binary")?;
    let work = std::env::temp_dir().join(format!("elect-compare-work-{}", std::process::id()));
    let outcome = run_plan(&plan, &bin, &work);
    let _ = std::fs::remove_dir_all(&work);
    // Whatever wait the interrupt cut short failed on its own terms; say
    // what happened (everything started is torn down by now).
    if elect_lab::interrupt::requested() {
        anyhow::bail!("interrupted; everything it started is stopped and removed");
    }
    let (rows, unavailable) = outcome?;
    if !plan.json {
        println!("{}", output::text_table(&rows));
        for u in &unavailable {
            println!(
                "not run: {} {}{}: {}",
                u.backend,
                u.implementation,
                u.scenario.map(|s| format!(" {s}")).unwrap_or_default(),
                u.reason
            );
        }
        for r in rows.iter().filter(|r| !r.notes.is_empty()) {
            println!(
                "note: {} {} {}: {}",
                r.backend,
                r.implementation,
                r.scenario,
                r.notes.join("; ")
            );
        }
        println!("compare took {:.0}s", started.elapsed().as_secs_f64());
    }
    if let Some(dir) = &plan.report {
        let page = report::write(dir, &rows, &unavailable, &plan.command_line)
            .with_context(|| format!("writing the report to {}", dir.display()))?;
        eprintln!("compare: report in {}", page.display());
    }
    let violations: Vec<&Row> = rows
        .iter()
        .filter(|r| r.safety_violation.is_some())
        .collect();
    for r in &violations {
        eprintln!(
            "compare: SAFETY: {} {} {}: {}",
            r.backend,
            r.implementation,
            r.scenario,
            r.safety_violation.as_deref().unwrap_or_default()
        );
    }
    Ok(if violations.is_empty() {
        0
    } else {
        SAFETY_FAILED
    })
}

fn run_plan(
    plan: &Plan,
    bin: &std::path::Path,
    work: &std::path::Path,
) -> anyhow::Result<(Vec<Row>, Vec<Unavailable>)> {
    let ensembles = Ensembles::prepare(plan)?;
    // Started once the ensembles are up and healthy; held until the end.
    let _load = match plan.under_load {
        true => {
            eprintln!(
                "compare: under load: stress-ng {}",
                elect_lab::load::STRESS_ARGS.join(" ")
            );
            Some(elect_lab::load::Held::start(&work.join("load")).context("--under-load")?)
        }
        false => None,
    };
    let credentials = match plan.secure {
        true => Some(std::sync::Arc::new(contender::Credentials::new(
            ensembles.security.clone(),
            &work.join("raft-pki"),
        )?)),
        false => None,
    };
    let mut rows = Vec::new();
    let mut unavailable = Vec::new();
    let mut not_run =
        |backend: Backend, imp: Implementation, scenario: Option<Scenario>, reason: String| {
            let u = Unavailable {
                backend: backend.name(),
                implementation: imp.name(),
                scenario: scenario.map(Scenario::name),
                reason,
            };
            if plan.json {
                eprintln!(
                    "compare: not run: {}",
                    serde_json::to_string(&u).unwrap_or_default()
                );
            }
            unavailable.push(u);
        };
    let mut curator_classes = None;
    for &backend in &plan.backends {
        let endpoints = match ensembles.endpoints(backend) {
            Ok(e) => e,
            Err(reason) => {
                not_run(backend, Implementation::Elect, None, reason);
                continue;
            }
        };
        let probe = match backend {
            Backend::Raft => None,
            _ => match Probe::new(
                backend,
                &endpoints,
                ensembles.plain(backend).unwrap_or(&endpoints),
                ensembles.security.as_ref(),
            ) {
                Ok(p) => Some(p),
                Err(e) => {
                    not_run(backend, Implementation::Elect, None, format!("{e:#}"));
                    continue;
                }
            },
        };
        for imp in implementations(backend, plan.baselines) {
            if let Err(reason) = baseline_available(imp) {
                not_run(backend, imp, None, reason);
                continue;
            }
            if matches!(
                imp,
                Implementation::Curator | Implementation::CuratorSession
            ) && curator_classes.is_none()
            {
                match contender::compile_curator(&work.join("curator")) {
                    Ok(dir) => curator_classes = Some(dir),
                    Err(e) => {
                        not_run(backend, imp, None, format!("{e:#}"));
                        continue;
                    }
                }
            }
            let contender = Contender {
                backend,
                imp,
                ttl: plan.ttl[&backend],
                bin: bin.to_owned(),
                curator_classes: curator_classes.clone(),
                credentials: credentials.clone(),
            };
            for &scenario in &plan.scenarios {
                if let Err(reason) = runnable(
                    &contender,
                    scenario,
                    ensembles.lab.is_some(),
                    plan.raft_peers,
                ) {
                    if let Some(reason) = reason {
                        not_run(backend, imp, Some(scenario), reason.into());
                    }
                    continue;
                }
                let new_rows = if scenario == Scenario::Scale {
                    let probe = probe.as_ref().expect("etcd and zk have a probe");
                    scale_rows(plan, &contender, &endpoints, probe)?
                } else if scenario == Scenario::Elections {
                    let probe = probe.as_ref().expect("etcd and zk have a probe");
                    vec![elections_row(plan, &contender, &endpoints, probe)?]
                } else {
                    let setup = Setup {
                        contender: &contender,
                        endpoints: &endpoints,
                        probe: probe.as_ref(),
                        lab: ensembles.lab.as_ref(),
                        raft_peers: plan.raft_peers,
                        candidates: match backend {
                            Backend::Raft => plan.raft_peers,
                            _ => plan.candidates.unwrap_or(3),
                        },
                        trials: plan.trials(scenario),
                        progress: &Progress::start(
                            format!("{} {} {}", backend.name(), imp.name(), scenario.name()),
                            plan.trials(scenario),
                        ),
                        seed: 0x5eed ^ plan.trials(scenario) as u64,
                    };
                    match scenario_row(scenario, &setup) {
                        Ok(row) => vec![row],
                        // A peer's tool that fails a scenario (say, a
                        // recipe that does not rejoin after a rolling
                        // restart) is a finding about that tool; the run
                        // goes on and reports it. elect's own failures
                        // end the run.
                        Err(e) if imp != Implementation::Elect => {
                            not_run(backend, imp, Some(scenario), format!("failed: {e:#}"));
                            continue;
                        }
                        Err(e) => return Err(e),
                    }
                };
                for row in new_rows {
                    emit(plan, &row);
                    rows.push(row);
                }
                if scenario == Scenario::Handover
                    && imp == Implementation::Elect
                    && backend != Backend::Raft
                {
                    if plan.secure {
                        not_run(
                            backend,
                            imp,
                            Some(scenario),
                            "--secure: the floor's clients run without TLS".into(),
                        );
                        continue;
                    }
                    let row = floor_row(plan, &contender, &endpoints)?;
                    emit(plan, &row);
                    rows.push(row);
                }
            }
        }
    }
    Ok((rows, unavailable))
}

/// Whether `scenario` runs for `contender`: `Err(Some(reason))` to report,
/// `Err(None)` for combinations that make no sense to list (the recipes'
/// scale: scale is elect's library).
fn runnable(
    contender: &Contender,
    scenario: Scenario,
    have_lab: bool,
    raft_peers: usize,
) -> Result<(), Option<&'static str>> {
    let (backend, imp) = (contender.backend, contender.imp);
    if let Err(reason) = scenario.supports(imp) {
        return Err((!scenario.in_process()).then_some(reason));
    }
    if scenario == Scenario::FailoverNext && backend == Backend::Raft {
        if raft_peers < 5 {
            return Err(Some(
                "kills two peers: needs --raft-peers 5 (two of three leave no majority)",
            ));
        }
        if contender.credentials.is_some() {
            return Err(Some(
                "--secure: compare asks the leader for its order of succession without TLS",
            ));
        }
    }
    if scenario.operates() && backend != Backend::Raft && !have_lab {
        return Err(Some(
            "kills and restarts ensemble members: needs an ensemble compare starts \
             (not --etcd-endpoints/--zk-endpoints)",
        ));
    }
    if contender.credentials.is_some() {
        if imp != Implementation::Elect {
            return Err(Some(
                "--secure runs elect only: the recipes run here without TLS",
            ));
        }
        if scenario.in_process() {
            return Err(Some(
                "--secure: scale and elections run their candidates in-process without TLS",
            ));
        }
        if scenario == Scenario::Cutoff && backend == Backend::Zk {
            return Err(Some(
                "--secure: the fault proxies' addresses are not in ZooKeeper's certificates",
            ));
        }
    }
    if scenario == Scenario::Compaction && backend != Backend::Etcd {
        return Err(Some("etcd's compaction and defragmentation"));
    }
    if scenario == Scenario::Compaction && contender.credentials.is_some() {
        return Err(Some(
            "--secure: compaction runs etcdctl without the lab's credentials",
        ));
    }
    if scenario == Scenario::ServiceLeaderKill && backend == Backend::Raft {
        return Err(Some(
            "the Raft-vote peers are the service: rolling-restart and member-kill cover them",
        ));
    }
    if scenario == Scenario::Scale && backend == Backend::Raft {
        return Err(Some(
            "the Raft-vote cluster is its peers: it does not grow with candidates",
        ));
    }
    if scenario == Scenario::Elections && backend == Backend::Raft {
        return Err(Some(
            "a Raft-vote cluster serves one election: there is no session to share",
        ));
    }
    Ok(())
}

/// The row of the elections scenario: `plan.elections` elections on one
/// session, one process.
fn elections_row(
    plan: &Plan,
    contender: &Contender,
    endpoints: &str,
    probe: &Probe,
) -> anyhow::Result<Row> {
    let backend = contender.backend;
    let e = plan.elections;
    // As in scale: thousands of etcd candidates set up at once starve a
    // 2 s lease's keepalives on two cores; etcd runs at 10 s or more.
    let ttl = match backend {
        Backend::Etcd => contender.ttl.max(SCALE_ETCD_TTL),
        _ => contender.ttl,
    };
    let progress = Progress::start(format!("{} elect elections e={e}", backend.name()), e);
    let point = elections::run(backend, endpoints, ttl, e, probe, &progress)
        .with_context(|| format!("{} elections on one session ({e})", backend.name()))?;
    let mut row = Row::new(
        backend.name(),
        contender.imp.name(),
        Scenario::Elections.name(),
        ttl,
        e,
        &point.samples,
        1,
        None,
    );
    row.memory_kib_per_candidate = Some((point.memory_kib_per_election * 10.0).round() / 10.0);
    row.renewals_per_ttl = Some((point.renewals_per_ttl * 10.0).round() / 10.0);
    row.set_wakeups(point.wakeups as f64, 1);
    row.notes.push(format!(
        "{e} elections on one session; samples: each election's time to elect from the \
         start; renewals per TTL for all of them; wake-ups of one leader change across \
         every election"
    ));
    progress.finish(&summary(&row));
    Ok(row)
}

/// The floor beside a backend's handover rows (see [`floor`]).
fn floor_row(plan: &Plan, c: &Contender, endpoints: &str) -> anyhow::Result<Row> {
    let trials = plan.trials(Scenario::Handover);
    let progress = Progress::start(format!("{} floor handover", c.backend.name()), trials);
    let samples = floor::samples(c.backend, endpoints, trials, &progress)
        .with_context(|| format!("{} floor", c.backend.name()))?;
    let mut row = Row::new(
        c.backend.name(),
        "floor",
        Scenario::Handover.name(),
        c.ttl,
        1,
        &samples,
        samples.len(),
        None,
    );
    row.notes.push(
        "one delete committed and its watch event seen, in one process through the same \
         client library: what any handover waits for"
            .into(),
    );
    progress.finish(&summary(&row));
    Ok(row)
}

/// One row of a process-based scenario.
fn scenario_row(scenario: Scenario, setup: &Setup<'_>) -> anyhow::Result<Row> {
    let c = setup.contender;
    let out = scenario::run(scenario, setup)
        .with_context(|| format!("{} {} {}", c.backend.name(), c.imp.name(), scenario.name()))?;
    let mut row = Row::new(
        c.backend.name(),
        c.imp.name(),
        scenario.name(),
        c.ttl,
        setup.candidates,
        &out.samples,
        out.changes,
        out.counters,
    );
    if let Some(w) = out.wakeups {
        row.set_wakeups(w as f64, out.changes);
    }
    row.fenced = scenario.fenced(c.imp);
    row.max_overlap_ms = out
        .max_overlap
        .filter(|d| !d.is_zero())
        .map(|d| (d.as_secs_f64() * 1e6).round() / 1e3);
    row.stale_writes_accepted = out.stale_accepted;
    row.terms_per_change = out.terms_per_change;
    row.safety_violation = scenario::safety_violation(scenario, &out);
    row.notes = out.notes;
    if scenario == Scenario::Handover
        && let Some(n) = out.led_without_read.filter(|_| out.changes > 0)
    {
        let share = n as f64 / out.changes as f64;
        row.led_without_read_per_change = Some((share * 100.0).round() / 100.0);
        row.notes.push(format!(
            "{n} of {} successors led without a read of their own",
            out.changes
        ));
    }
    if let Some(ops) = &out.operations {
        row.spurious_losses = Some(ops.spurious_losses);
        row.command_restarts = ops.command_restarts;
        row.leaderless_ms = Some((ops.leaderless.as_secs_f64() * 1e6).round() / 1e3);
        row.notes.push(
            "a sample is a graceful handover right after the operation; spurious_losses \
             counts leadership lost while every session or lease lived"
                .into(),
        );
    }
    setup.progress.finish(&summary(&row));
    Ok(row)
}

/// The scale curve: one row per candidate count.
fn scale_rows(
    plan: &Plan,
    contender: &Contender,
    endpoints: &str,
    probe: &Probe,
) -> anyhow::Result<Vec<Row>> {
    let backend = contender.backend;
    // A thousand etcd leases renewed every TTL/3 from one process over three
    // connections each overload two cores at a 2 s TTL: scale runs etcd at
    // 10 s or more.
    let ttl = match backend {
        Backend::Etcd => contender.ttl.max(SCALE_ETCD_TTL),
        _ => contender.ttl,
    };
    let trials = plan.trials(Scenario::Scale);
    let mut rows = Vec::new();
    for n in plan.scale_sizes() {
        let progress = Progress::start(format!("{} elect scale n={n}", backend.name()), trials);
        let point = scale::run(backend, endpoints, ttl, n, trials, probe, &progress)
            .with_context(|| format!("{} scale with {n} candidates", backend.name()))?;
        let mut row = Row::new(
            backend.name(),
            contender.imp.name(),
            Scenario::Scale.name(),
            ttl,
            n,
            &point.samples,
            point.changes,
            point.counters,
        );
        row.memory_kib_per_candidate = Some((point.memory_kib_per_candidate * 10.0).round() / 10.0);
        row.connections_per_candidate = Some((point.sockets_per_candidate * 10.0).round() / 10.0);
        row.set_wakeups(point.wakeups as f64, point.changes);
        progress.finish(&summary(&row));
        rows.push(row);
    }
    Ok(rows)
}

fn emit(plan: &Plan, row: &Row) {
    if plan.json {
        println!("{}", serde_json::to_string(row).expect("rows serialize"));
    }
}

fn summary(row: &Row) -> String {
    match (row.p50_ms, row.p99_ms) {
        (Some(p50), Some(p99)) => format!("p50 {p50:.2}ms p99 {p99:.2}ms"),
        _ => "no samples".into(),
    }
}
