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

    /// Runs to average (with --case random, each its own draw).
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
    #[arg(long, value_name = "N,N,...")]
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

impl SimulateArgs {
    pub fn validate(self) -> Result<Request, UsageError> {
        let (args, format) = (&self, self.format);
        let algorithms = match (&args.algorithm, args.compare) {
            (Some(_), true) => {
                return Err(UsageError::new(
                    "--compare",
                    "runs every algorithm: leave out --algorithm",
                ));
            }
            (None, true) => Algorithm::ALL.to_vec(),
            (Some(name), false) => vec![Algorithm::parse(name).ok_or_else(|| {
                UsageError::new(
                    "--algorithm",
                    format!(
                        "{name:?} is not one of {}",
                        Algorithm::ALL.map(Algorithm::name).join(", ")
                    ),
                )
            })?],
            (None, false) => {
                return Err(UsageError::new(
                    "--algorithm",
                    format!(
                        "is required (one of {}), or --compare for all",
                        Algorithm::ALL.map(Algorithm::name).join(", ")
                    ),
                ));
            }
        };
        // Partitions and crashes need an algorithm that notices a missing
        // leader; --compare keeps those that do.
        if let Some(p) = args.false_suspicion
            && !(p > 0.0 && p <= 1.0)
        {
            return Err(UsageError::new(
                "--false-suspicion",
                format!("{p}: a probability above 0, at most 1"),
            ));
        }
        let fault = [
            ("--partition", args.partition),
            ("--crash-leader", args.crash_leader),
            ("--false-suspicion", args.false_suspicion.is_some()),
        ]
        .into_iter()
        .find_map(|(flag, on)| on.then_some(flag));
        let algorithms = match fault {
            None => algorithms,
            Some(flag) => {
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
                kept
            }
        };
        let sizes = match &args.sweep {
            None => vec![args.nodes],
            Some(list) => list
                .split(',')
                .map(|n| {
                    n.trim().parse::<usize>().map_err(|_| {
                        UsageError::new("--sweep", format!("{n:?} is not a number of nodes"))
                    })
                })
                .collect::<Result<Vec<_>, _>>()?,
        };
        let flag = if args.sweep.is_some() {
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
        if args.plot.is_some() && args.sweep.is_none() {
            return Err(UsageError::new("--plot", "draws a --sweep; give one"));
        }
        if args.runs == 0 {
            return Err(UsageError::new("--runs", "0 runs simulate nothing"));
        }
        Ok(Request {
            algorithms,
            options: Options {
                algorithm: Algorithm::Ring,
                nodes: args.nodes,
                case: match args.case {
                    CaseArg::Best => Case::Best,
                    CaseArg::Worst => Case::Worst,
                    CaseArg::Random => Case::Random,
                },
                runs: args.runs,
                seed: args.seed,
                trace: args.trace,
                partition: args.partition,
                crash_leader: args.crash_leader,
                false_suspicion: args.false_suspicion,
            },
            sizes,
            plot: args.plot.clone(),
            json: format == ResultsFormat::Json,
        })
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
        plot::sweep(file, &reports)?;
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

mod plot {
    //! The sweep chart: messages and time against N on log-log axes, each
    //! measured curve beside its textbook formula (dashed).

    use elect_sim::run::{Algorithm, Case, Report};
    use plotters::prelude::*;

    use elect_compare::palette::COLORS;

    /// The textbook's message count (Elected rounds included; bounds for
    /// Hirschberg-Sinclair and Peterson), where there is one.
    pub fn formula(algorithm: Algorithm, case: Case, n: f64) -> Option<f64> {
        let log2 = n.log2();
        let harmonic: f64 = (1..=n as u64).map(|k| 1.0 / k as f64).sum();
        Some(match (algorithm, case) {
            (Algorithm::Ring, Case::Worst) => 3.0 * n - 1.0,
            (Algorithm::Ring, Case::Best) => 2.0 * n,
            (Algorithm::ChangRoberts, Case::Worst) => n * (n + 1.0) / 2.0 + n,
            (Algorithm::ChangRoberts, Case::Best) => 2.0 * n - 1.0 + n,
            (Algorithm::ChangRoberts, Case::Random) => n * harmonic + n,
            (Algorithm::HirschbergSinclair, _) => 8.0 * n * (1.0 + log2.ceil()) + n,
            (Algorithm::Peterson, _) => 2.0 * n * (log2.floor() + 1.0) + 2.0 * n,
            (Algorithm::Bully, Case::Worst) => {
                n * (n - 1.0) / 2.0 + (n - 1.0) * (n - 2.0) / 2.0 + n - 2.0
            }
            (Algorithm::Bully, Case::Best) => n - 2.0,
            _ => return None,
        })
    }

    pub fn sweep(file: &std::path::Path, reports: &[Report]) -> anyhow::Result<()> {
        let root = SVGBackend::new(file, (1100, 460)).into_drawing_area();
        root.fill(&WHITE)?;
        let (left, right) = root.split_horizontally(550);
        let max_n = reports.iter().map(|r| r.nodes).max().unwrap_or(4) as f64;
        let mut algorithms: Vec<Algorithm> = reports.iter().map(|r| r.algorithm).collect();
        algorithms.dedup();
        algorithms.sort_by_key(|a| Algorithm::ALL.iter().position(|x| x == a));
        algorithms.dedup();
        let panels: [(&DrawingArea<SVGBackend, plotters::coord::Shift>, &str, bool); 2] =
            [(&left, "messages", true), (&right, "time units", false)];
        for (area, title, messages) in panels {
            let value = |r: &Report| if messages { r.messages } else { r.time_units };
            let ymax = reports.iter().map(value).fold(1.0, f64::max) * 2.0;
            let mut chart = ChartBuilder::on(area)
                .caption(format!("{title} against N"), ("sans-serif", 18))
                .margin(12)
                .x_label_area_size(36)
                .y_label_area_size(60)
                .build_cartesian_2d((2f64..max_n * 1.5).log_scale(), (0.5f64..ymax).log_scale())?;
            chart.configure_mesh().x_desc("N").draw()?;
            for (i, &algorithm) in algorithms.iter().enumerate() {
                let color = COLORS[i % COLORS.len()];
                let points: Vec<(f64, f64)> = reports
                    .iter()
                    .filter(|r| r.algorithm == algorithm)
                    .map(|r| (r.nodes as f64, value(r).max(0.5)))
                    .collect();
                chart
                    .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))?
                    .label(algorithm.name())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                    });
                chart.draw_series(points.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
                if messages {
                    let case = reports[0].case;
                    let formula: Vec<(f64, f64)> = points
                        .iter()
                        .filter_map(|&(n, _)| Some((n, formula(algorithm, case, n)?.max(0.5))))
                        .collect();
                    // Dashes: short segments between neighbouring points.
                    for pair in formula.windows(2) {
                        let (a, b) = (pair[0], pair[1]);
                        for k in 0..6 {
                            let t0 = k as f64 / 6.0;
                            let t1 = t0 + 0.5 / 6.0;
                            let at = |t: f64| {
                                (
                                    (a.0.ln() + t * (b.0.ln() - a.0.ln())).exp(),
                                    (a.1.ln() + t * (b.1.ln() - a.1.ln())).exp(),
                                )
                            };
                            chart.draw_series(LineSeries::new(
                                [at(t0), at(t1)],
                                color.mix(0.6).stroke_width(1),
                            ))?;
                        }
                    }
                }
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .position(SeriesLabelPosition::UpperLeft)
                .draw()?;
        }
        root.present()?;
        Ok(())
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn formulas_match_the_measured_cases() {
            use elect_sim::run::{Options, simulate};
            for algorithm in [Algorithm::Ring, Algorithm::ChangRoberts, Algorithm::Bully] {
                for case in [Case::Worst, Case::Best] {
                    for n in [4usize, 16, 64] {
                        let r = simulate(&Options::new(algorithm, n, case));
                        let f = formula(algorithm, case, n as f64).unwrap();
                        assert_eq!(r.messages, f, "{algorithm:?} {case:?} n={n}");
                    }
                }
            }
        }
    }
}

/// Whole numbers as such, means with two decimals.
fn number(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}
