//! `elect simulate`: the classical election algorithms in the
//! deterministic simulator (`elect_sim`), one at a time or side by side.

use elect_sim::run::{Algorithm, Case, Options, Report, reacts_to_suspicion, simulate};

use clap::{Args, ValueEnum};

use crate::args::ResultsFormat;
use crate::usage::UsageError;

#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// Output: a table for people, or one JSON row per line (an
    /// algorithm each).
    #[arg(long, env = "ELECT_FORMAT", value_enum, default_value = "text")]
    pub format: ResultsFormat,

    /// ring, chang-roberts, hirschberg-sinclair, peterson, bully,
    /// bully-modified, next-in-line, candidate-ordinary, invitation or
    /// raft.
    #[arg(long)]
    pub algorithm: Option<String>,

    /// Every algorithm on the same scenario, side by side.
    #[arg(long)]
    pub compare: bool,

    /// Processes (bully: the failed coordinator included), 2 to 4096.
    #[arg(long, default_value_t = 16)]
    pub nodes: usize,

    /// The textbook arrangement of ids and initiators, or one drawn from
    /// the seed.
    #[arg(long, value_enum, default_value = "worst")]
    pub case: CaseArg,

    /// Runs to average (with --case random, each its own draw), 1 to
    /// 100000.
    #[arg(long, default_value_t = 1)]
    pub runs: usize,

    /// The first run's seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,

    /// Print every message of the first run as it arrives.
    #[arg(long)]
    pub trace: bool,

    /// After the first election, split the processes into a majority and
    /// a minority holding the leader (ring, bully, invitation, raft).
    #[arg(long)]
    pub partition: bool,

    /// After the first election, crash the leader and have its ring
    /// successor notice; count only the election that follows (ring,
    /// bully, invitation, raft).
    #[arg(long)]
    pub crash_leader: bool,

    /// After the first election, for 200 time units, each follower's
    /// failure detector wrongly suspects the live leader with probability P
    /// per heartbeat (ring, bully); Raft loses each message with P instead.
    /// Counts only what follows.
    #[arg(long, value_name = "P")]
    pub false_suspicion: Option<f64>,

    /// Run at each of these sizes (e.g. 4,8,16,...,1024) instead of
    /// --nodes.
    #[arg(long, value_name = "N,N,...", conflicts_with = "nodes")]
    pub sweep: Option<String>,

    /// With --sweep: draw messages and time against N, beside the
    /// textbook formulas, into this SVG file.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<std::path::PathBuf>,
}

/// `simulate --case`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CaseArg {
    /// ring: the would-be leader initiates; the other rings: ids increase
    /// along the ring; bully: the second-highest detects the failure.
    Best,
    /// ring: the would-be leader's successor initiates; the other rings:
    /// ids decrease along the ring; bully: the lowest detects.
    Worst,
    /// Ids and initiator drawn from the seed.
    Random,
}

/// The most processes a simulation takes.
const MAX_NODES: usize = 4096;

/// A validated `elect simulate`.
#[derive(Debug)]
pub struct Request {
    algorithms: Vec<Algorithm>,
    options: Options,
    /// The sizes to run at (one: --nodes).
    sizes: Vec<usize>,
    plot: Option<std::path::PathBuf>,
    json: bool,
}

/// The most runs one invocation averages: beyond it the mean moves by
/// less than it can show, and the run takes hours at the larger sizes.
const MAX_RUNS: usize = 100_000;

impl SimulateArgs {
    pub fn validate(self) -> Result<Request, UsageError> {
        let algorithms = self.fault_tolerant(self.algorithms()?)?;
        let sizes = self.sizes()?;
        if self.plot.is_some() && self.sweep.is_none() {
            return Err(UsageError::new("--plot", "draws a --sweep; give one"));
        }
        if let Some(plot) = &self.plot {
            // Written at the end: a FIFO there would block, a device
            // would be written over.
            elect::input::check_writable_file(plot)
                .map_err(|e| UsageError::new("--plot", e.to_string()))?;
        }
        if self.runs == 0 {
            return Err(UsageError::new("--runs", "0 runs simulate nothing"));
        }
        if self.runs > MAX_RUNS {
            return Err(UsageError::new(
                "--runs",
                format!("{}: at most {MAX_RUNS} runs", self.runs),
            ));
        }
        Ok(Request {
            algorithms,
            options: Options {
                algorithm: Algorithm::Ring,
                nodes: self.nodes,
                case: match self.case {
                    CaseArg::Best => Case::Best,
                    CaseArg::Worst => Case::Worst,
                    CaseArg::Random => Case::Random,
                },
                runs: self.runs,
                seed: self.seed,
                trace: self.trace,
                partition: self.partition,
                crash_leader: self.crash_leader,
                false_suspicion: self.false_suspicion,
            },
            sizes,
            plot: self.plot.clone(),
            json: self.format == ResultsFormat::Json,
        })
    }

    /// `--algorithm`'s one, or `--compare`'s all.
    fn algorithms(&self) -> Result<Vec<Algorithm>, UsageError> {
        let names = || Algorithm::ALL.map(Algorithm::name).join(", ");
        match (&self.algorithm, self.compare) {
            (Some(_), true) => Err(UsageError::new(
                "--compare",
                "runs every algorithm: leave out --algorithm",
            )),
            (None, true) => Ok(Algorithm::ALL.to_vec()),
            (Some(name), false) => Ok(vec![Algorithm::parse(name).ok_or_else(|| {
                UsageError::new("--algorithm", format!("{name:?} is not one of {}", names()))
            })?]),
            (None, false) => Err(UsageError::new(
                "--algorithm",
                format!("is required (one of {}), or --compare for all", names()),
            )),
        }
    }

    /// Partitions and crashes need an algorithm that notices a missing
    /// leader: of `algorithms`, those that do when a fault is asked for.
    fn fault_tolerant(&self, algorithms: Vec<Algorithm>) -> Result<Vec<Algorithm>, UsageError> {
        if let Some(p) = self.false_suspicion
            && !(p > 0.0 && p <= 1.0)
        {
            return Err(UsageError::new(
                "--false-suspicion",
                format!("{p}: a probability above 0, at most 1"),
            ));
        }
        let fault = [
            ("--partition", self.partition),
            ("--crash-leader", self.crash_leader),
            ("--false-suspicion", self.false_suspicion.is_some()),
        ]
        .into_iter()
        .find_map(|(flag, on)| on.then_some(flag));
        let Some(flag) = fault else {
            return Ok(algorithms);
        };
        let (kept, left): (Vec<Algorithm>, Vec<Algorithm>) = algorithms
            .into_iter()
            .partition(|&a| reacts_to_suspicion(a));
        if kept.is_empty() {
            return Err(UsageError::new(
                flag,
                format!(
                    "{} has no failure detector to notice a missing leader; ring, \
                     bully, invitation and raft do",
                    left[0].name()
                ),
            ));
        }
        Ok(kept)
    }

    /// The sizes to run at: `--sweep`'s list, or `--nodes`.
    fn sizes(&self) -> Result<Vec<usize>, UsageError> {
        let sizes = match &self.sweep {
            None => vec![self.nodes],
            Some(list) => list
                .split(',')
                .map(|n| {
                    n.trim().parse::<usize>().map_err(|_| {
                        UsageError::new("--sweep", format!("{n:?} is not a number of nodes"))
                    })
                })
                .collect::<Result<Vec<_>, _>>()?,
        };
        let flag = if self.sweep.is_some() {
            "--sweep"
        } else {
            "--nodes"
        };
        if let Some(bad) = sizes.iter().find(|n| !(2..=MAX_NODES).contains(*n)) {
            return Err(UsageError::new(
                flag,
                format!("{bad}: use 2 to {MAX_NODES}"),
            ));
        }
        Ok(sizes)
    }
}

/// Runs the request; the exit code.
pub fn run(request: Request) -> anyhow::Result<u8> {
    let mut reports: Vec<Report> = Vec::new();
    for &nodes in &request.sizes {
        for &algorithm in &request.algorithms {
            reports.push(simulate(&Options {
                algorithm,
                nodes,
                ..request.options.clone()
            }));
        }
    }
    if let Some(file) = &request.plot {
        elect_sim::chart::sweep(file, &reports, &elect_compare::palette::COLORS)
            .map_err(|e| anyhow::anyhow!("drawing {}: {e}", file.display()))?;
        eprintln!("elect simulate: chart in {}", file.display());
    }
    if request.json {
        for r in &reports {
            println!("{}", serde_json::to_string(r)?);
        }
        return Ok(0);
    }
    for r in reports.iter().filter(|r| !r.trace.is_empty()) {
        for line in elect_sim::trace::draw(&r.trace, &r.lanes) {
            println!("{line}");
        }
    }
    println!(
        "{:<20} {:>6} {:>7} {:>5} {:>10} {:>10} {:>6}  {:<40} {:<10} agreed",
        "algorithm", "nodes", "case", "runs", "messages", "time", "takes", "by kind", "leaders"
    );
    for r in &reports {
        let kinds = r
            .messages_by_kind
            .iter()
            .map(|(k, v)| format!("{k} {}", number(*v)))
            .collect::<Vec<_>>()
            .join(", ");
        let leaders = r
            .leaders
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(",");
        println!(
            "{:<20} {:>6} {:>7} {:>5} {:>10} {:>10} {:>6}  {:<40} {:<10} {}{}",
            r.algorithm.name(),
            r.nodes,
            format!("{:?}", r.case).to_lowercase(),
            r.runs,
            number(r.messages),
            number(r.time_units),
            number(r.leader_changes),
            kinds,
            leaders,
            if r.agreed { "yes" } else { "no" },
            if r.split_brain { " (split brain)" } else { "" }
        );
    }
    Ok(0)
}

/// Whole numbers as such, means with two decimals.
fn number(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}
