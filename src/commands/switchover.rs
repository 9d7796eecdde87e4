//! `elect switchover --to ID`: move leadership to a named candidate (or
//! `any`, the next in line), within `--timeout`, and say what happened.
//! `elect candidates`: the line an operator checks before and after.

use std::time::Duration;

use clap::Args;
use elect::backend;
use elect::config::ElectionConfig;
use elect::export::Format;
use elect::steer::{Line, Outcome, Report, Target};

use crate::args::{ElectionArgs, FormatArgs};
use crate::runtime::{SHUTDOWN_SIGNALS, on_workers, signals, unless_stopped};
use crate::usage::{Result, UsageError, parse_duration};

/// The exit code of a switchover that started but did not end with the
/// target leading (its timeout ran out, or the target left). A refused
/// one exits with the library's code for a refusal, 5.
pub const NOT_DONE: u8 = 6;

#[derive(Debug, Args)]
pub struct SwitchoverArgs {
    #[command(flatten)]
    election: ElectionArgs,
    /// The candidate to lead (its id), or `any` for the next in line.
    #[arg(long, value_name = "ID")]
    to: String,
    /// How long the switchover may take, from the request to the
    /// target's lead; it is withdrawn after that, and never acts later.
    #[arg(long, value_name = "DURATION", default_value = "5s")]
    timeout: String,
    #[command(flatten)]
    format: FormatArgs,
}

/// A validated `elect switchover`.
#[derive(Debug)]
pub struct Request {
    pub election: ElectionConfig,
    pub to: Target,
    pub timeout: Duration,
    pub format: Format,
}

impl SwitchoverArgs {
    pub fn validate(self) -> Result<Request> {
        let to = self
            .to
            .parse()
            .map_err(|why| UsageError::new("--to", why))?;
        let timeout = parse_duration("--timeout", &self.timeout)?;
        if timeout < Duration::from_millis(100) || timeout > Duration::from_secs(600) {
            return Err(UsageError::new(
                "--timeout",
                format!("{}: give between 100ms and 10m", self.timeout),
            ));
        }
        Ok(Request {
            election: self.election.follower_config()?,
            to,
            timeout,
            format: self.format.format.into(),
        })
    }
}

pub fn run(request: Request) -> anyhow::Result<u8> {
    on_workers(switchover(request))
}

async fn switchover(request: Request) -> anyhow::Result<u8> {
    let mut shutdown = signals(&SHUTDOWN_SIGNALS)?;
    let asked = backend::switchover(&request.election, &request.to, request.timeout);
    let report = match unless_stopped(&mut shutdown, asked).await {
        Ok(report) => report?,
        // Stopped: the record goes with the command's lease or session,
        // and never acts after its timeout.
        Err(sig) => return Ok(128 + sig as u8),
    };
    print_report(&report, request.format);
    Ok(if report.done() { 0 } else { NOT_DONE })
}

fn print_report(report: &Report, format: Format) {
    match format {
        Format::Json => println!(
            "{}",
            serde_json::to_string(report).expect("a report serializes")
        ),
        Format::Text => match &report.outcome {
            Outcome::Done {
                leader,
                token,
                changed: true,
            } => println!(
                "switchover {}: done in {:.1} ms: {leader} leads (token {token}), after {}",
                report.switchover,
                report.took.as_secs_f64() * 1000.0,
                report.from
            ),
            Outcome::Done { leader, token, .. } => {
                println!("{leader} leads already (token {token}): nothing to do")
            }
            Outcome::NotDone {
                reason,
                leader,
                token,
            } => {
                let now = match (leader, token) {
                    (Some(l), Some(t)) => format!("{l} leads (token {t})"),
                    _ => "nobody leads".to_owned(),
                };
                println!(
                    "switchover {} to {}: not done: {reason}; {now}",
                    report.switchover, report.to
                )
            }
        },
    }
}

#[derive(Debug, Args)]
pub struct CandidatesArgs {
    #[command(flatten)]
    election: ElectionArgs,
    #[command(flatten)]
    format: FormatArgs,
}

/// A validated `elect candidates`.
#[derive(Debug)]
pub struct CandidatesRequest {
    pub election: ElectionConfig,
    pub format: Format,
}

impl CandidatesArgs {
    pub fn validate(self) -> Result<CandidatesRequest> {
        Ok(CandidatesRequest {
            election: self.election.follower_config()?,
            format: self.format.format.into(),
        })
    }
}

pub fn run_candidates(request: CandidatesRequest) -> anyhow::Result<u8> {
    on_workers(candidates(request))
}

async fn candidates(request: CandidatesRequest) -> anyhow::Result<u8> {
    let mut shutdown = signals(&SHUTDOWN_SIGNALS)?;
    let line = match unless_stopped(&mut shutdown, backend::line(&request.election)).await {
        Ok(line) => line?,
        Err(sig) => return Ok(128 + sig as u8),
    };
    print_line(&line, request.format);
    Ok(if line.leader().is_some() {
        0
    } else {
        crate::commands::leader::NO_LEADER
    })
}

fn print_line(line: &Line, format: Format) {
    match format {
        Format::Json => println!(
            "{}",
            serde_json::to_string(line).expect("a line serializes")
        ),
        Format::Text => {
            println!(
                "{:<5} {:<24} {:>12} {:>8}  {:<7} {:<7} ROLE",
                "PLACE", "ID", "TOKEN", "PRIORITY", "HEALTH", "BY"
            );
            for (place, c) in line.candidates.iter().enumerate() {
                let role = match (c.leads, c.live) {
                    (true, _) => "leader",
                    (false, true) => "waiting",
                    (false, false) => "silent",
                };
                let token = c.token.map_or_else(|| "-".to_owned(), |t| t.to_string());
                let health = if c.healthy { "ok" } else { "failing" };
                println!(
                    "{:<5} {:<24} {:>12} {:>8}  {:<7} {:<7} {role}",
                    place + 1,
                    c.id,
                    token,
                    c.priority,
                    health,
                    c.by
                );
            }
        }
    }
}
