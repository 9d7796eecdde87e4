//! Running a plan: for each backend its ensemble and probe, for each
//! implementation its contender, for each scenario a row; then the table,
//! the report, and the exit code.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use elect::Backend;

use crate::contender::{Contender, Credentials, Implementation};
use crate::ensembles::Ensembles;
use crate::measure;
use crate::plan::Plan;
use crate::probe::Probe;
use crate::progress::Progress;
use crate::report;
use crate::row::{Row, Unavailable};
use crate::scenario::{Scenario, Setup};
use crate::table;
use elect_lab::peers::{self, Peer};

/// Exit code when a safety check failed: an overlap outside `freeze`, or a
/// stale write accepted. 0 when every check held; 1 when compare itself
/// could not run; 2 for bad usage.
pub const SAFETY_FAILED: u8 = 4;

/// Runs the plan and prints what it found; the exit code: 0, or
/// [`SAFETY_FAILED`].
///
/// # Errors
/// Compare itself could not run (an ensemble of elect's, the binary, the
/// report's directory), or was interrupted: everything it started is
/// stopped and removed by then.
pub fn run(plan: Plan) -> anyhow::Result<u8> {
    elect_lab::interrupt::install();
    let started = std::time::Instant::now();
    let bin = std::env::current_exe().context("locating the elect binary")?;
    let work = std::env::temp_dir().join(format!("elect-compare-work-{}", std::process::id()));
    let outcome = Runner::new(&plan, &bin, &work).and_then(Runner::run);
    let _ = std::fs::remove_dir_all(&work);
    // Whatever wait the interrupt cut short failed on its own terms; say
    // what happened (everything started is torn down by now).
    if elect_lab::interrupt::requested() {
        anyhow::bail!("interrupted; everything it started is stopped and removed");
    }
    let (rows, unavailable) = outcome?;
    if !plan.json {
        println!("{}", table::text_table(&rows));
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

/// One run of a plan: what every row needs, and the rows so far.
struct Runner<'a> {
    plan: &'a Plan,
    bin: &'a Path,
    work: &'a Path,
    ensembles: Ensembles,
    credentials: Option<Arc<Credentials>>,
    /// Curator's classes, compiled once for every ZooKeeper baseline.
    curator_classes: Option<PathBuf>,
    rows: Vec<Row>,
    unavailable: Vec<Unavailable>,
    /// Started once the ensembles are up and healthy; held until the end.
    _load: Option<elect_lab::load::Held>,
}

impl<'a> Runner<'a> {
    /// The ensembles up, the load (`--under-load`) and the credentials
    /// (`--secure`) ready.
    fn new(plan: &'a Plan, bin: &'a Path, work: &'a Path) -> anyhow::Result<Runner<'a>> {
        let ensembles = Ensembles::prepare(plan)?;
        let load = match plan.under_load {
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
            true => Some(Arc::new(Credentials::new(
                ensembles.security.clone(),
                &work.join("raft-pki"),
            )?)),
            false => None,
        };
        Ok(Runner {
            plan,
            bin,
            work,
            ensembles,
            credentials,
            curator_classes: None,
            rows: Vec::new(),
            unavailable: Vec::new(),
            _load: load,
        })
    }

    fn run(mut self) -> anyhow::Result<(Vec<Row>, Vec<Unavailable>)> {
        for &backend in &self.plan.backends {
            self.backend(backend)?;
        }
        Ok((self.rows, self.unavailable))
    }

    /// Records what could not run, and says so at once in JSON mode.
    fn not_run(
        &mut self,
        backend: Backend,
        imp: Implementation,
        scenario: Option<Scenario>,
        reason: String,
    ) {
        let u = Unavailable {
            backend: backend.name(),
            implementation: imp.name(),
            scenario: scenario.map(Scenario::name),
            reason,
        };
        if self.plan.json {
            eprintln!(
                "compare: not run: {}",
                serde_json::to_string(&u).unwrap_or_default()
            );
        }
        self.unavailable.push(u);
    }

    /// Prints a row (JSON mode) and keeps it.
    fn keep(&mut self, row: Row) {
        if self.plan.json {
            println!("{}", serde_json::to_string(&row).expect("rows serialize"));
        }
        self.rows.push(row);
    }

    /// Every implementation on `backend`, once its ensemble and probe are
    /// there.
    fn backend(&mut self, backend: Backend) -> anyhow::Result<()> {
        let endpoints = match self.ensembles.endpoints(backend) {
            Ok(e) => e,
            Err(reason) => {
                self.not_run(backend, Implementation::Elect, None, reason);
                return Ok(());
            }
        };
        let probe = match backend {
            Backend::Raft => None,
            _ => match Probe::new(
                backend,
                &endpoints,
                self.ensembles.plain(backend).unwrap_or(&endpoints),
                self.ensembles.security.as_ref(),
            ) {
                Ok(p) => Some(p),
                Err(e) => {
                    self.not_run(backend, Implementation::Elect, None, format!("{e:#}"));
                    return Ok(());
                }
            },
        };
        for imp in implementations(backend, self.plan.baselines) {
            if let Some(contender) = self.contender(backend, imp) {
                self.scenarios(&contender, &endpoints, probe.as_ref())?;
            }
        }
        Ok(())
    }

    /// `imp` on `backend`, or `None` (reported) where it is not installed.
    fn contender(&mut self, backend: Backend, imp: Implementation) -> Option<Contender> {
        if let Err(reason) = imp.available() {
            self.not_run(backend, imp, None, reason);
            return None;
        }
        if matches!(
            imp,
            Implementation::Peer(Peer::Curator | Peer::CuratorSession)
        ) && self.curator_classes.is_none()
        {
            match peers::compile_curator(&self.work.join("curator")) {
                Ok(dir) => self.curator_classes = Some(dir),
                Err(e) => {
                    self.not_run(backend, imp, None, format!("{e:#}"));
                    return None;
                }
            }
        }
        Some(Contender {
            backend,
            imp,
            ttl: self.plan.ttl[&backend],
            bin: self.bin.to_owned(),
            curator_classes: self.curator_classes.clone(),
            credentials: self.credentials.clone(),
        })
    }

    /// Every scenario of the plan that `contender` can run, a row or more
    /// each, and the floors beside elect's handover, failover and
    /// elections.
    fn scenarios(
        &mut self,
        contender: &Contender,
        endpoints: &str,
        probe: Option<&Probe>,
    ) -> anyhow::Result<()> {
        let (backend, imp) = (contender.backend, contender.imp);
        for &scenario in &self.plan.scenarios {
            if let Err(reason) = runnable(
                contender,
                scenario,
                self.ensembles.lab.is_some(),
                self.plan.raft_peers,
            ) {
                if let Some(reason) = reason {
                    self.not_run(backend, imp, Some(scenario), reason.into());
                }
                continue;
            }
            for row in self.scenario(contender, scenario, endpoints, probe)? {
                self.keep(row);
            }
            if matches!(
                scenario,
                Scenario::Handover | Scenario::Failover | Scenario::Elections | Scenario::Scale
            ) && imp == Implementation::Elect
                && backend != Backend::Raft
            {
                if self.plan.secure {
                    self.not_run(
                        backend,
                        imp,
                        Some(scenario),
                        "--secure: the floor's clients run without TLS".into(),
                    );
                    continue;
                }
                for row in measure::floor(self.plan, contender, scenario, endpoints)? {
                    self.keep(row);
                }
            }
        }
        Ok(())
    }

    /// The rows of one scenario: none where a peer's tool failed it
    /// (reported), an error where elect did.
    fn scenario(
        &mut self,
        contender: &Contender,
        scenario: Scenario,
        endpoints: &str,
        probe: Option<&Probe>,
    ) -> anyhow::Result<Vec<Row>> {
        let (backend, imp, plan) = (contender.backend, contender.imp, self.plan);
        match scenario {
            Scenario::Scale => {
                let probe = probe.expect("etcd and zk have a probe");
                return measure::scale(plan, contender, endpoints, probe);
            }
            Scenario::Elections => {
                let probe = probe.expect("etcd and zk have a probe");
                return Ok(vec![measure::elections(plan, contender, endpoints, probe)?]);
            }
            _ => {}
        }
        let trials = plan.trials(scenario);
        let sizes = match (scenario, backend) {
            (Scenario::ScaleProcesses, _) => plan.scale_process_sizes(),
            (_, Backend::Raft) => vec![plan.raft_peers],
            _ => vec![plan.candidates.unwrap_or(3)],
        };
        let rows = sizes.into_iter().map(|candidates| {
            let sized = match scenario {
                Scenario::ScaleProcesses => format!(" n={candidates}"),
                _ => String::new(),
            };
            let setup = Setup {
                contender,
                endpoints,
                probe,
                lab: self.ensembles.lab.as_ref(),
                raft_peers: plan.raft_peers,
                candidates,
                trials,
                progress: &Progress::start(
                    format!(
                        "{} {} {}{sized}",
                        backend.name(),
                        imp.name(),
                        scenario.name()
                    ),
                    trials,
                ),
                seed: 0x5eed ^ trials as u64,
                steady_in_full: plan.steady_in_full(),
            };
            measure::rows(scenario, &setup)
        });
        match rows.collect::<anyhow::Result<Vec<Vec<Row>>>>() {
            Ok(rows) => Ok(rows.into_iter().flatten().collect()),
            // A peer's tool that fails a scenario (say, a recipe that does
            // not rejoin after a rolling restart) is a finding about that
            // tool; the run goes on and reports it. elect's own failures
            // end the run.
            Err(e) if imp != Implementation::Elect => {
                self.not_run(backend, imp, Some(scenario), format!("failed: {e:#}"));
                Ok(Vec::new())
            }
            Err(e) => Err(e),
        }
    }
}

fn implementations(backend: Backend, baselines: bool) -> Vec<Implementation> {
    let mut out = vec![Implementation::Elect];
    if baselines {
        out.extend(Peer::on(backend).map(Implementation::Peer));
    }
    out
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
    if scenario == Scenario::Steady && backend == Backend::Raft {
        return Err(Some(
            "counts what candidates cost the servers (the Raft-vote peers are the service)",
        ));
    }
    if scenario == Scenario::ScaleProcesses && backend == Backend::Raft {
        return Err(Some(
            "runs on etcd and ZooKeeper (the Raft-vote peers are the service: 3 or 5)",
        ));
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
