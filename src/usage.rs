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

/// The library names a configuration field; the user typed its flag.
impl From<elect::Error> for UsageError {
    fn from(e: elect::Error) -> Self {
        match e {
            elect::Error::Config { field, reason } => {
                UsageError::new(format!("--{}", field.replace('_', "-")), reason)
            }
            other => UsageError::new("elect", other.to_string()),
        }
    }
}

pub type Result<T> = std::result::Result<T, UsageError>;

/// Parses `10s`, `1500ms`, `1m30s`, or a bare number of seconds.
pub fn parse_duration(flag: &str, text: &str) -> Result<Duration> {
    let text = text.trim();
    if let Ok(secs) = text.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    humantime::parse_duration(text).map_err(|e| {
        UsageError::new(
            flag,
            format!("{text:?} is not a duration like 10s or 500ms ({e})"),
        )
    })
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
