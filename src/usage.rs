//! Refusing a command line: the error that names the flag, and the small
//! parsers and checks every subcommand's validation shares. Nothing here
//! performs I/O, so bad input is refused (exit 2, naming the flag) before
//! any connection is made.

use std::time::Duration;

use clap::ArgMatches;
use clap::parser::ValueSource;

/// A command line we refuse: the flag and what is wrong with its value.
#[derive(Debug, thiserror::Error)]
#[error("{flag}: {reason}")]
pub struct UsageError {
    pub flag: String,
    pub reason: String,
}

impl UsageError {
    pub fn new(flag: impl Into<String>, reason: impl Into<String>) -> Self {
        UsageError {
            flag: flag.into(),
            reason: reason.into(),
        }
    }
}

/// The flag of the library's configuration field `field`.
pub fn flag_of_field(field: &str) -> String {
    format!("--{}", field.replace('_', "-"))
}

/// The library names a configuration field; the user typed its flag.
impl From<elect::Error> for UsageError {
    fn from(e: elect::Error) -> Self {
        match e {
            elect::Error::Config { field, reason } => UsageError::new(flag_of_field(field), reason),
            other => UsageError::new("elect", other.to_string()),
        }
    }
}

pub type Result<T> = std::result::Result<T, UsageError>;

/// Parses `10s`, `1500ms`, `1m30s`, or a bare number of seconds (see
/// [`elect::config::parse_duration`]), the error naming `flag`.
pub fn parse_duration(flag: &str, text: &str) -> Result<Duration> {
    elect::config::parse_duration(text).map_err(|why| UsageError::new(flag, why))
}

/// Where a flag's value came from, when not from its default.
pub fn source(matches: &ArgMatches, id: &str) -> Option<ValueSource> {
    matches
        .try_get_raw(id)
        .ok()
        .flatten()
        .and_then(|_| matches.value_source(id))
        .filter(|s| *s != ValueSource::DefaultValue)
}

/// A flag that would do nothing in this invocation: refused when typed
/// (exit 2), a warning when it comes from its environment variable, which
/// other commands may share.
pub fn refuse_unused_flag(
    matches: &ArgMatches,
    id: &str,
    flag: &str,
    why: &str,
    warnings: &mut Vec<String>,
) -> Result<()> {
    match source(matches, id) {
        Some(ValueSource::CommandLine) => {
            Err(UsageError::new(flag, format!("does nothing here: {why}")))
        }
        Some(ValueSource::EnvVariable) => {
            warnings.push(format!(
                "{flag} (from ELECT_{}) is ignored: {why}",
                id.to_uppercase()
            ));
            Ok(())
        }
        _ => Ok(()),
    }
}

/// A wrong `ELECT_ETCD_BIN` is the user's input: named, and exit 2.
pub fn release_refused(e: elect_lab::Error) -> anyhow::Error {
    match e {
        elect_lab::Error::EtcdRelease { dir, why } => UsageError::new(
            format!("{}={}", elect_lab::etcd_release::ENV, dir.display()),
            why,
        )
        .into(),
        other => other.into(),
    }
}
