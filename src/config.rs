//! Validated configuration: what the CLI hands to the library.
//!
//! Every value here has already been checked, so the backends never see a
//! malformed endpoint or election name and never half-create anything
//! because of one. The checks are pure functions, tested below; each error
//! names the flag the user has to change.

use std::path::PathBuf;
use std::time::Duration;

use crate::error::{Error, Result};

/// Which service decides who leads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendKind {
    /// Lease-bound keys in etcd, in the layout of Go's `concurrency.Election`.
    Etcd,
}

impl BackendKind {
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Etcd => "etcd",
        }
    }

    /// The TTL used when `--ttl` is not given.
    pub fn default_ttl(self) -> Duration {
        match self {
            BackendKind::Etcd => Duration::from_secs(10),
        }
    }
}

/// Where and how to take part in (or watch) one election.
#[derive(Debug, Clone)]
pub struct ElectionConfig {
    pub backend: BackendKind,
    /// etcd: `http://host:port` URLs.
    pub endpoints: Vec<String>,
    /// etcd: the key prefix, without the trailing `/`.
    pub election: String,
    /// The value published while this process leads.
    pub id: String,
    /// How long a silent leader keeps its leadership.
    pub ttl: Duration,
    /// How long to wait for the first answer of the service.
    pub connect_timeout: Duration,
}

/// How changes are reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Sentences for people.
    Text,
    /// One JSON object per line, each a full snapshot.
    Json,
}

#[derive(Debug, Clone)]
pub struct OutputConfig {
    pub format: Format,
    pub leader_file: Option<PathBuf>,
}

/// The command `run` wraps.
#[derive(Debug, Clone)]
pub struct ChildConfig {
    pub command: Vec<String>,
    /// Time between SIGTERM and SIGKILL when leadership is lost (capped by
    /// the leadership deadline).
    pub grace: Duration,
}

/// Longest id we accept: ids are published in keys' values, output lines,
/// environment variables and file names of operators' scripts.
pub const MAX_ID_BYTES: usize = 1024;

/// Parses `10s`, `1500ms`, `1m30s`, or a bare number of seconds.
pub fn parse_duration(flag: &'static str, text: &str) -> Result<Duration> {
    let text = text.trim();
    if let Ok(secs) = text.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    humantime::parse_duration(text).map_err(|e| {
        Error::usage(
            flag,
            format!("{text:?} is not a duration like 10s or 500ms ({e})"),
        )
    })
}

/// Checks `host:port,...` (an `http://` scheme is accepted) and returns
/// `http://host:port` URLs.
pub fn etcd_endpoints(text: &str) -> Result<Vec<String>> {
    const FLAG: &str = "--endpoints";
    let mut urls = Vec::new();
    for raw in text.split(',').map(str::trim) {
        if raw.is_empty() {
            return Err(Error::usage(FLAG, format!("empty entry in {text:?}")));
        }
        if raw.starts_with("https://") {
            return Err(Error::usage(
                FLAG,
                format!("{raw:?}: TLS endpoints are not supported yet; use http://"),
            ));
        }
        let hostport = raw.strip_prefix("http://").unwrap_or(raw);
        let hostport = hostport.strip_suffix('/').unwrap_or(hostport);
        let (host, port) = hostport
            .rsplit_once(':')
            .ok_or_else(|| Error::usage(FLAG, format!("{raw:?} is not host:port")))?;
        let host_ok = !host.is_empty()
            && !host.contains(['/', ' ', '@', '?', '#'])
            && (host.starts_with('[') == host.ends_with(']'));
        if !host_ok {
            return Err(Error::usage(
                FLAG,
                format!("{raw:?} has no valid host before the port"),
            ));
        }
        match port.parse::<u16>() {
            Ok(p) if p > 0 => {}
            _ => {
                return Err(Error::usage(
                    FLAG,
                    format!("{raw:?}: port {port:?} is not a number from 1 to 65535"),
                ));
            }
        }
        urls.push(format!("http://{host}:{port}"));
    }
    Ok(urls)
}

/// Checks an etcd election name (the key prefix Go's `NewElection` takes).
pub fn etcd_election(name: &str) -> Result<String> {
    const FLAG: &str = "--election";
    if name.is_empty() {
        return Err(Error::usage(FLAG, "must not be empty"));
    }
    if name.chars().any(char::is_control) {
        return Err(Error::usage(
            FLAG,
            format!("{name:?} contains control characters"),
        ));
    }
    if name.ends_with('/') {
        return Err(Error::usage(
            FLAG,
            format!(
                "{name:?} ends with '/'; give the name without it (keys are <name>/<lease id>)"
            ),
        ));
    }
    Ok(name.to_owned())
}

/// Checks the id published as leader.
pub fn candidate_id(id: &str) -> Result<String> {
    const FLAG: &str = "--id";
    if id.is_empty() {
        return Err(Error::usage(FLAG, "must not be empty"));
    }
    if id.len() > MAX_ID_BYTES {
        return Err(Error::usage(
            FLAG,
            format!("is {} bytes long; the limit is {MAX_ID_BYTES}", id.len()),
        ));
    }
    if id.chars().any(char::is_control) {
        return Err(Error::usage(
            FLAG,
            format!("{id:?} contains control characters"),
        ));
    }
    Ok(id.to_owned())
}

/// Checks an etcd TTL: leases are granted in whole seconds, at least one.
pub fn etcd_ttl(ttl: Duration) -> Result<Duration> {
    if ttl < Duration::from_secs(1) {
        return Err(Error::usage(
            "--ttl",
            format!(
                "{} is below etcd's lease granularity of 1s",
                humantime::format_duration(ttl)
            ),
        ));
    }
    if ttl.subsec_nanos() != 0 {
        return Err(Error::usage(
            "--ttl",
            format!(
                "{}: etcd leases are granted in whole seconds",
                humantime::format_duration(ttl)
            ),
        ));
    }
    Ok(ttl)
}

/// The default `--id`: `hostname-pid`, unique per process on one host.
pub fn default_id() -> String {
    let host = nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "localhost".to_owned());
    format!("{host}-{}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flag_of(e: Error) -> &'static str {
        match e {
            Error::Usage { flag, .. } => flag,
            other => panic!("not a usage error: {other}"),
        }
    }

    #[test]
    fn endpoints_are_normalised() {
        assert_eq!(
            etcd_endpoints("127.0.0.1:2379, http://h:1/").unwrap(),
            vec!["http://127.0.0.1:2379", "http://h:1"]
        );
        assert_eq!(
            etcd_endpoints("[::1]:2379").unwrap(),
            vec!["http://[::1]:2379"]
        );
    }

    #[test]
    fn malformed_endpoints_name_the_flag() {
        for bad in [
            "",
            "localhost",
            "host:",
            "host:0",
            "host:99999",
            ":2379",
            "a:1,,b:2",
            "https://h:1",
            "h/x:1",
        ] {
            let err = etcd_endpoints(bad).expect_err(bad);
            assert_eq!(flag_of(err), "--endpoints", "{bad}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(
            parse_duration("--ttl", "10").unwrap(),
            Duration::from_secs(10)
        );
        assert_eq!(
            parse_duration("--ttl", "1500ms").unwrap(),
            Duration::from_millis(1500)
        );
        assert_eq!(
            flag_of(parse_duration("--ttl", "ten").unwrap_err()),
            "--ttl"
        );
        assert_eq!(
            flag_of(parse_duration("--grace", "-1s").unwrap_err()),
            "--grace"
        );
    }

    #[test]
    fn etcd_ttls_are_whole_seconds() {
        assert!(etcd_ttl(Duration::from_secs(2)).is_ok());
        assert!(etcd_ttl(Duration::from_millis(500)).is_err());
        assert!(etcd_ttl(Duration::from_millis(1500)).is_err());
    }

    #[test]
    fn election_names() {
        assert_eq!(etcd_election("jobs/cron").unwrap(), "jobs/cron");
        for bad in ["", "a/", "a\nb", "\u{7f}"] {
            assert_eq!(flag_of(etcd_election(bad).unwrap_err()), "--election");
        }
    }

    #[test]
    fn ids() {
        assert!(candidate_id("node-a").is_ok());
        assert!(candidate_id("").is_err());
        assert!(candidate_id("a\tb").is_err());
        assert!(candidate_id(&"x".repeat(MAX_ID_BYTES + 1)).is_err());
        assert!(default_id().ends_with(&std::process::id().to_string()));
    }
}
