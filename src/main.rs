//! The `elect` binary: gathers the subcommands (each in `commands/`, with
//! its own arguments and their translation into library types), sets up
//! logging, and maps outcomes to the exit codes of the contract (0 ok, 1
//! runtime failure, 2 bad usage, 3 no leader, or the wrapped command's
//! code).

use std::io::IsTerminal;
use std::process::ExitCode;

use elect::supervise;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::prelude::*;

mod args;
mod commands;
mod runtime;
mod usage;

/// Bad usage or configuration.
const USAGE: u8 = 2;

fn main() -> ExitCode {
    // The watchdog and the PID namespace's init are this same executable.
    if let Some(code) = supervise::dispatch_hidden() {
        return ExitCode::from(code.clamp(0, 255) as u8);
    }
    let validated = commands::parse();
    // `lab`, `compare` and `simulate` run the library in-process for many
    // candidates: their own progress is what the user reads.
    let quiet = matches!(&validated, Ok(v) if v.command.runs_many());
    let default_filter = if quiet { "warn" } else { "warn,elect=info" };
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter));
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(std::io::stderr().is_terminal())
                .with_filter(filter),
        )
        .init();
    let validated = match validated {
        Ok(v) => v,
        Err(e) => {
            eprintln!("elect: {e}");
            return ExitCode::from(USAGE);
        }
    };
    for warning in &validated.warnings {
        eprintln!("elect: warning: {warning}");
    }
    match validated.command.execute() {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            match e.downcast_ref::<elect::Error>() {
                // Found at run time (a data directory's torn state), but
                // still the user's input: named by its flag.
                Some(elect::Error::Config { field, reason }) => {
                    eprintln!("elect: {}: {reason}", usage::flag_of_field(field));
                }
                _ => eprintln!("elect: {}", message(&e)),
            }
            let code = if e.downcast_ref::<usage::UsageError>().is_some() {
                i32::from(USAGE)
            } else {
                e.downcast_ref::<elect::Error>()
                    .map_or(1, elect::Error::exit_code)
            };
            ExitCode::from(code as u8)
        }
    }
}

/// `e` and its causes, each said once: the library's errors name their
/// cause in their own message and also hand it on as their source, so
/// `{e:#}` said an OS error twice ("Address already in use (os error 98):
/// Address already in use (os error 98)").
fn message(e: &anyhow::Error) -> String {
    let mut said = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if said.is_empty() {
            said = text;
        } else if !said.ends_with(&text) {
            said = format!("{said}: {text}");
        }
    }
    said
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_cause_is_said_once() {
        let os = std::io::Error::from(std::io::ErrorKind::AddrInUse);
        let e = anyhow::Error::new(elect::Error::Io {
            action: "--http: cannot listen on 127.0.0.1:1".into(),
            source: os,
        });
        assert_eq!(
            message(&e),
            format!(
                "--http: cannot listen on 127.0.0.1:1: {}",
                std::io::Error::from(std::io::ErrorKind::AddrInUse)
            )
        );
        let e = anyhow::anyhow!("inner").context("outer");
        assert_eq!(message(&e), "outer: inner");
    }
}
