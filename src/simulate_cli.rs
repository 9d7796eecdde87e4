//! `elect simulate`: the classical election algorithms in the
//! deterministic simulator (`elect::sim`), one at a time or side by side.

use elect::sim::run::{Algorithm, Case, Options, Report, partitions, simulate};

use crate::cli::{CaseArg, FormatArg, SimulateArgs, UsageError};

/// The most processes a simulation takes.
const MAX_NODES: usize = 4096;

/// A validated `elect simulate`.
#[derive(Debug)]
pub struct Request {
    algorithms: Vec<Algorithm>,
    options: Options,
    json: bool,
}

impl Request {
    pub fn validate(args: &SimulateArgs, format: FormatArg) -> Result<Request, UsageError> {
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
        let algorithms = if args.partition {
            let (kept, left): (Vec<Algorithm>, Vec<Algorithm>) =
                algorithms.into_iter().partition(|&a| partitions(a));
            if kept.is_empty() {
                return Err(UsageError::new(
                    "--partition",
                    format!(
                        "{} has no failure detector to react to a partition; ring, bully and \
                         raft do",
                        left[0].name()
                    ),
                ));
            }
            kept
        } else {
            algorithms
        };
        if !(2..=MAX_NODES).contains(&args.nodes) {
            return Err(UsageError::new(
                "--nodes",
                format!("{}: use 2 to {MAX_NODES}", args.nodes),
            ));
        }
        if args.runs == 0 {
            return Err(UsageError::new("--runs", "0 runs simulate nothing"));
        }
        if format == FormatArg::Env {
            return Err(UsageError::new("--format", "use text or json"));
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
            },
            json: format == FormatArg::Json,
        })
    }
}

/// Runs the request; the exit code.
pub fn run(request: Request) -> anyhow::Result<u8> {
    let reports: Vec<Report> = request
        .algorithms
        .iter()
        .map(|&algorithm| {
            simulate(&Options {
                algorithm,
                ..request.options.clone()
            })
        })
        .collect();
    if request.json {
        for r in &reports {
            println!("{}", serde_json::to_string(r)?);
        }
        return Ok(0);
    }
    for r in &reports {
        for line in &r.trace {
            println!("{line}");
        }
    }
    println!(
        "{:<20} {:>6} {:>7} {:>5} {:>10} {:>10}  {:<40} {:<10} agreed",
        "algorithm", "nodes", "case", "runs", "messages", "time", "by kind", "leaders"
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
            "{:<20} {:>6} {:>7} {:>5} {:>10} {:>10}  {:<40} {:<10} {}{}",
            r.algorithm.name(),
            r.nodes,
            format!("{:?}", r.case).to_lowercase(),
            r.runs,
            number(r.messages),
            number(r.time_units),
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
