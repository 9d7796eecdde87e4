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
    /// Ephemeral-sequential znodes in ZooKeeper, named as Curator's `LeaderLatch`.
    Zk,
    /// The `elect` peers elect a leader among themselves with Raft's vote.
    Raft,
}

impl BackendKind {
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Etcd => "etcd",
            BackendKind::Zk => "zk",
            BackendKind::Raft => "raft",
        }
    }

    /// Where the service is looked for when `--endpoints` is not given.
    pub fn default_endpoints(self) -> &'static str {
        match self {
            BackendKind::Etcd => "127.0.0.1:2379",
            BackendKind::Zk => "127.0.0.1:2181",
            BackendKind::Raft => "",
        }
    }

    /// The TTL used when `--ttl` is not given.
    pub fn default_ttl(self) -> Duration {
        match self {
            BackendKind::Etcd | BackendKind::Zk => Duration::from_secs(10),
            BackendKind::Raft => Duration::from_secs(1),
        }
    }
}

/// Where and how to take part in (or watch) one election.
#[derive(Debug, Clone)]
pub struct ElectionConfig {
    pub backend: BackendKind,
    /// etcd: `http://host:port` URLs; zk: one connect string
    /// `host:port,...[/chroot]`.
    pub endpoints: Vec<String>,
    /// etcd: the key prefix, without the trailing `/`; zk: the absolute
    /// path of the election's znode.
    pub election: String,
    /// The value published while this process leads.
    pub id: String,
    /// How long a silent leader keeps its leadership.
    pub ttl: Duration,
    /// How long to wait for the first answer of the service.
    pub connect_timeout: Duration,
    /// raft: where term and vote are kept.
    pub data_dir: Option<PathBuf>,
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
    /// Where to serve the HTTP endpoints, if anywhere.
    pub http: Option<std::net::SocketAddr>,
}

/// The command `run` wraps.
#[derive(Debug, Clone)]
pub struct ChildConfig {
    pub command: Vec<String>,
    /// Time between SIGTERM and SIGKILL when leadership is lost (capped by
    /// the leadership deadline).
    pub grace: Duration,
    /// Whether a command that exits while we lead is started again.
    pub restart: Restart,
    /// Exit once leadership is lost instead of campaigning again.
    pub exit_on_loss: bool,
}

/// `run --restart`: what happens when the command exits while we lead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Restart {
    /// `elect run` exits with the command's code (and resigns).
    Never,
    /// Start it again, with backoff, if it exited with a non-zero code or
    /// by a signal; exit with code 0 like `never`.
    OnFailure,
    /// Start it again, with backoff, whatever its code.
    Always,
}

impl Restart {
    /// Whether a command that exited with `code` is started again.
    pub fn restarts(self, code: i32) -> bool {
        match self {
            Restart::Never => false,
            Restart::OnFailure => code != 0,
            Restart::Always => true,
        }
    }
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

/// Checks a ZooKeeper connect string `host:port,...[/chroot]`.
pub fn zk_connect_string(text: &str) -> Result<String> {
    const FLAG: &str = "--endpoints";
    let (hosts, chroot) = match text.find('/') {
        Some(i) => (&text[..i], Some(&text[i..])),
        None => (text, None),
    };
    for hostport in hosts.split(',').map(str::trim) {
        let (host, port) = hostport
            .rsplit_once(':')
            .ok_or_else(|| Error::usage(FLAG, format!("{hostport:?} is not host:port")))?;
        if host.is_empty() || host.contains([' ', '@']) {
            return Err(Error::usage(
                FLAG,
                format!("{hostport:?} has no valid host"),
            ));
        }
        if !matches!(port.parse::<u16>(), Ok(p) if p > 0) {
            return Err(Error::usage(
                FLAG,
                format!("{hostport:?}: port {port:?} is not a number from 1 to 65535"),
            ));
        }
    }
    if let Some(chroot) = chroot
        && chroot != "/"
    {
        zk_path(chroot).map_err(|e| match e {
            Error::Usage { reason, .. } => Error::usage(FLAG, format!("chroot {reason}")),
            other => other,
        })?;
    }
    Ok(text.trim().to_owned())
}

/// Checks a ZooKeeper election path: absolute, no trailing `/`, no empty,
/// `.` or `..` segments, no control characters.
pub fn zk_path(path: &str) -> Result<String> {
    const FLAG: &str = "--election";
    let bad = |why: &str| Err(Error::usage(FLAG, format!("{path:?} {why}")));
    if !path.starts_with('/') {
        return bad("is not an absolute ZooKeeper path (it must start with '/')");
    }
    if path == "/" {
        return bad("is the root; give the election its own znode");
    }
    if path.ends_with('/') {
        return bad("ends with '/'");
    }
    let reserved = |c: char| matches!(c, '\u{e000}'..='\u{f8ff}' | '\u{fff0}'..='\u{ffff}');
    if path.chars().any(|c| c.is_control() || reserved(c)) {
        return bad("contains control or reserved characters");
    }
    for segment in path[1..].split('/') {
        match segment {
            "" => return bad("contains an empty segment ('//')"),
            "." | ".." => return bad("contains a '.' or '..' segment"),
            "zookeeper" if path.starts_with("/zookeeper") => {
                return bad("is under /zookeeper, which ZooKeeper reserves");
            }
            _ => {}
        }
    }
    Ok(path.to_owned())
}

/// Checks a ZooKeeper session timeout: ZooKeeper counts in milliseconds.
pub fn zk_ttl(ttl: Duration) -> Result<Duration> {
    ttl_at_least(
        ttl,
        Duration::from_millis(100),
        "is too short for a ZooKeeper session",
    )?;
    if ttl > Duration::from_secs(i32::MAX as u64 / 1000) {
        return Err(Error::usage("--ttl", "is too long for a ZooKeeper session"));
    }
    Ok(ttl)
}

/// Checks raft peers `id=host:port,...`: every entry has an id, ids are
/// unique, addresses are host:port.
pub fn raft_peers(text: &str) -> Result<Vec<String>> {
    const FLAG: &str = "--endpoints";
    if text.trim().is_empty() {
        return Err(Error::usage(
            FLAG,
            "lists no peers; give id=host:port,... for every peer, this one included",
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut peers = Vec::new();
    for entry in text.split(',').map(str::trim) {
        let (id, addr) = entry.split_once('=').ok_or_else(|| {
            Error::usage(
                FLAG,
                format!("{entry:?} has no peer id; write id=host:port"),
            )
        })?;
        let id = candidate_id(id).map_err(|_| {
            Error::usage(FLAG, format!("{entry:?} has an empty or invalid peer id"))
        })?;
        let (host, port) = addr
            .rsplit_once(':')
            .ok_or_else(|| Error::usage(FLAG, format!("{entry:?}: {addr:?} is not host:port")))?;
        if host.is_empty()
            || host.contains([' ', '/', '='])
            || !matches!(port.parse::<u16>(), Ok(p) if p > 0)
        {
            return Err(Error::usage(
                FLAG,
                format!("{entry:?}: {addr:?} is not host:port"),
            ));
        }
        if !seen.insert(id.clone()) {
            return Err(Error::usage(FLAG, format!("peer id {id:?} appears twice")));
        }
        peers.push(format!("{id}={addr}"));
    }
    Ok(peers)
}

/// Checks a raft cluster name (`--election`).
pub fn raft_cluster(name: &str) -> Result<String> {
    if name.is_empty() || name.chars().any(char::is_control) {
        return Err(Error::usage(
            "--election",
            format!("{name:?} is not a cluster name"),
        ));
    }
    Ok(name.to_owned())
}

/// Checks a raft election timeout.
pub fn raft_ttl(ttl: Duration) -> Result<Duration> {
    ttl_at_least(
        ttl,
        Duration::from_millis(10),
        "is below the 10ms minimum election timeout",
    )?;
    Ok(ttl)
}

/// `--ttl` below `min` is refused with "<ttl> <why>".
fn ttl_at_least(ttl: Duration, min: Duration, why: &str) -> Result<()> {
    if ttl < min {
        return Err(Error::usage(
            "--ttl",
            format!("{} {why}", humantime::format_duration(ttl)),
        ));
    }
    Ok(())
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
    ttl_at_least(
        ttl,
        Duration::from_secs(1),
        "is below etcd's lease granularity of 1s",
    )?;
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

/// Checks `--http`: an IP address and a port.
pub fn http_addr(text: &str) -> Result<std::net::SocketAddr> {
    text.trim().parse().map_err(|_| {
        Error::usage(
            "--http",
            format!("{text:?} is not IP:PORT (e.g. 0.0.0.0:4040 or [::1]:4040)"),
        )
    })
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
    fn zk_connect_strings() {
        assert!(zk_connect_string("a:2181,b:2181/apps/x").is_ok());
        assert!(zk_connect_string("a:2181/").is_ok());
        for bad in ["a", "a:0", "a:2181//x", "a:2181/x/", ":1"] {
            assert_eq!(
                flag_of(zk_connect_string(bad).unwrap_err()),
                "--endpoints",
                "{bad}"
            );
        }
    }

    #[test]
    fn zk_paths() {
        assert!(zk_path("/elections/jobs").is_ok());
        for bad in [
            "jobs",
            "/",
            "/a/",
            "/a//b",
            "/a/./b",
            "/a/..",
            "/a\nb",
            "/zookeeper/x",
        ] {
            assert_eq!(flag_of(zk_path(bad).unwrap_err()), "--election", "{bad}");
        }
    }

    #[test]
    fn raft_peer_lists() {
        assert_eq!(
            raft_peers("a=127.0.0.1:7001, b=h:2").unwrap(),
            vec!["a=127.0.0.1:7001", "b=h:2"]
        );
        for bad in [
            "",
            "127.0.0.1:7001",
            "=h:1",
            "a=h",
            "a=h:0",
            "a=h:1,a=h:2",
            "a=:1",
        ] {
            assert_eq!(
                flag_of(raft_peers(bad).unwrap_err()),
                "--endpoints",
                "{bad}"
            );
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
