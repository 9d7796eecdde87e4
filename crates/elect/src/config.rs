//! Validated configuration of an election, for the library and the CLI.
//!
//! An [`ElectionConfig`] is built by one constructor per backend
//! ([`ElectionConfig::etcd`], [`ElectionConfig::zk`],
//! [`ElectionConfig::raft`]) and refined with `with_*` methods; every value
//! is checked once, there, so the backends never see a malformed endpoint
//! or election name and never half-create anything because of one. Errors
//! are [`Error::Config`] naming the field (`endpoints`, `election`, `id`,
//! `ttl`, `connect_timeout`, `data_dir`); the `elect` binary reports them as
//! the flag of the same name.
//!
//! # Bounds
//!
//! | field | etcd | zk | raft |
//! |---|---|---|---|
//! | `ttl` | 1 s to 9,000,000,000 s (etcd's maximum lease TTL), whole seconds | 100 ms to 2^31-1 ms (the server clamps it to 2 to 20 ticks) | 10 ms to 24 h |
//! | `connect_timeout` | 10 ms to 24 h | same | same |
//!
//! ```
//! use std::time::Duration;
//! use elect::config::ElectionConfig;
//!
//! let cfg = ElectionConfig::etcd(["127.0.0.1:2379"], "jobs")?
//!     .with_id("node-a")?
//!     .with_ttl(Duration::from_secs(5))?;
//! assert_eq!(cfg.endpoints(), ["http://127.0.0.1:2379"]);
//!
//! let err = ElectionConfig::zk("127.0.0.1:2181", "jobs").unwrap_err();
//! assert_eq!(err.to_string(), "election: \"jobs\" is not an absolute ZooKeeper path (it must start with '/')");
//! # Ok::<(), elect::Error>(())
//! ```

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::backend_kind::Backend;
use crate::credentials::{Tls, User};
use crate::error::{Error, Result};

/// The longest duration accepted for `connect_timeout`, a raft `ttl` and a
/// `run` grace: anything longer is a mistake, and would overflow clocks.
pub const MAX_DURATION: Duration = Duration::from_secs(24 * 3600);

/// etcd's maximum lease TTL (`lease.MaxLeaseTTL`), in seconds.
pub const ETCD_MAX_TTL_SECS: u64 = 9_000_000_000;

/// Where and how to take part in (or watch) one election. Built only
/// through the validating constructors; read through the accessors.
#[derive(Debug, Clone)]
pub struct ElectionConfig {
    pub(crate) backend: Backend,
    /// etcd: `http://host:port` URLs; zk: one connect string
    /// `host:port,...[/chroot]`; raft: `id=host:port` for every peer.
    pub(crate) endpoints: Vec<String>,
    /// etcd: the key prefix, without the trailing `/`; zk: the absolute
    /// path of the election's znode; raft: the cluster name.
    pub(crate) election: String,
    pub(crate) id: String,
    pub(crate) ttl: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) data_dir: Option<PathBuf>,
    pub(crate) tls: Option<Tls>,
    pub(crate) user: Option<User>,
}

impl ElectionConfig {
    /// The error saying this election's service did not answer within its
    /// connect timeout.
    pub(crate) fn unreachable(&self, detail: impl std::fmt::Display) -> Error {
        Error::Unreachable {
            backend: self.backend,
            endpoints: self.endpoints.join(","),
            timeout: self.connect_timeout,
            detail: detail.to_string(),
        }
    }

    fn new(backend: Backend, endpoints: Vec<String>, election: String) -> Self {
        ElectionConfig {
            backend,
            endpoints,
            election,
            id: default_id(),
            ttl: backend.default_ttl(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            data_dir: None,
            tls: None,
            user: None,
        }
    }

    /// An etcd election: `endpoints` as `host:port` (an `http://` or
    /// `https://` scheme is accepted; see [`with_tls`](Self::with_tls)), `election` the key prefix as `etcdctl elect` takes it.
    ///
    /// Errors: [`Error::Config`] naming `endpoints` or `election`.
    pub fn etcd<I, S>(endpoints: I, election: &str) -> Result<Self>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let endpoints: Vec<String> = endpoints
            .into_iter()
            .map(|e| e.as_ref().to_owned())
            .collect();
        Ok(Self::new(
            Backend::Etcd,
            etcd_endpoints(&endpoints.join(","))?,
            etcd_election(election)?,
        ))
    }

    /// A ZooKeeper election: `connect_string` as `host:port,...[/chroot]`,
    /// `path` the absolute path of the election's znode.
    ///
    /// Errors: [`Error::Config`] naming `endpoints` or `election`.
    pub fn zk(connect_string: &str, path: &str) -> Result<Self> {
        Ok(Self::new(
            Backend::Zk,
            vec![zk_connect_string(connect_string)?],
            zk_path(path)?,
        ))
    }

    /// A Raft-vote cluster: every peer as `(id, "host:port")`, this one
    /// included, and the cluster's name. A candidate must then say which
    /// peer it is with [`with_id`](Self::with_id); an observer need not.
    ///
    /// Errors: [`Error::Config`] naming `endpoints` (no peers, a bad or
    /// repeated id or address) or `election`.
    pub fn raft<I, A, B>(peers: I, cluster: &str) -> Result<Self>
    where
        I: IntoIterator<Item = (A, B)>,
        A: AsRef<str>,
        B: AsRef<str>,
    {
        let list: Vec<String> = peers
            .into_iter()
            .map(|(id, addr)| format!("{}={}", id.as_ref(), addr.as_ref()))
            .collect();
        Ok(Self::new(
            Backend::Raft,
            raft_peers(&list.join(","))?,
            raft_cluster(cluster)?,
        ))
    }

    /// The same service and settings for another election (etcd: a key
    /// prefix; zk: a znode path; raft: a cluster name): how one
    /// `backend::Session` serves many elections.
    ///
    /// Errors: [`Error::Config`] naming `election`.
    pub fn with_election(mut self, election: &str) -> Result<Self> {
        self.election = match self.backend {
            Backend::Etcd => etcd_election(election)?,
            Backend::Zk => zk_path(election)?,
            Backend::Raft => raft_cluster(election)?,
        };
        Ok(self)
    }

    /// The value published while this process leads (default
    /// `hostname-pid`); for raft, the id of this peer.
    ///
    /// Errors: [`Error::Config`] naming `id`: empty, over 1024 bytes,
    /// control characters, or (raft) not one of the peers.
    pub fn with_id(mut self, id: &str) -> Result<Self> {
        self.id = candidate_id(id)?;
        self.check_raft_membership()?;
        Ok(self)
    }

    /// A Raft candidate must be one of the peers; other backends take any
    /// id.
    ///
    /// Errors: [`Error::Config`] naming `id`.
    pub(crate) fn check_raft_membership(&self) -> Result<()> {
        if self.backend == Backend::Raft && !self.peer_ids().any(|p| p == self.id) {
            return Err(Error::config(
                "id",
                format!(
                    "{:?} is not one of the peers ({})",
                    self.id,
                    self.peer_ids().collect::<Vec<_>>().join(", ")
                ),
            ));
        }
        Ok(())
    }

    /// How long a silent leader keeps its leadership (etcd: lease TTL; zk:
    /// requested session timeout; raft: election timeout). See the bounds
    /// in the [module doc](self).
    ///
    /// Errors: [`Error::Config`] naming `ttl`.
    pub fn with_ttl(mut self, ttl: Duration) -> Result<Self> {
        self.ttl = match self.backend {
            Backend::Etcd => etcd_ttl(ttl)?,
            Backend::Zk => zk_ttl(ttl)?,
            Backend::Raft => raft_ttl(ttl)?,
        };
        Ok(self)
    }

    /// How long to wait for the first answer of the service (default 5 s).
    ///
    /// Errors: [`Error::Config`] naming `connect_timeout` below 10 ms or
    /// above 24 h.
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Result<Self> {
        if timeout < Duration::from_millis(10) {
            return Err(Error::config("connect_timeout", "must be at least 10ms"));
        }
        if timeout > MAX_DURATION {
            return Err(Error::config("connect_timeout", "must be at most 24h"));
        }
        self.connect_timeout = timeout;
        Ok(self)
    }

    /// raft: keep term and vote in `dir` (fsynced before any vote is
    /// sent). Without it a restarted peer does not vote for one election
    /// timeout.
    ///
    /// Errors: [`Error::Config`] naming `data_dir` for etcd and ZooKeeper,
    /// which keep no local state.
    pub fn with_data_dir(mut self, dir: impl AsRef<Path>) -> Result<Self> {
        if self.backend != Backend::Raft {
            return Err(Error::config(
                "data_dir",
                format!(
                    "only the raft backend keeps state; {} keeps none",
                    self.backend.name()
                ),
            ));
        }
        self.data_dir = Some(dir.as_ref().to_owned());
        Ok(self)
    }

    /// Talks TLS with `tls`: etcd endpoints become `https://`; ZooKeeper
    /// connects to its TLS port; Raft-vote peers authenticate each other
    /// (mutual TLS: every peer's certificate must name its id), which
    /// needs a certificate and key.
    ///
    /// Errors: [`Error::Config`] naming `cert` for a Raft-vote election
    /// without a certificate.
    pub fn with_tls(mut self, tls: Tls) -> Result<Self> {
        if self.backend == Backend::Raft && !tls.has_identity() {
            return Err(Error::config(
                "cert",
                "is required with raft and --cacert: peers and readers alike prove who \
                 they are with a certificate from the CA",
            ));
        }
        if self.backend == Backend::Raft {
            // A peer's certificate names its id: the id must be a DNS name.
            for id in self.peer_ids() {
                let dns = matches!(
                    rustls::pki_types::ServerName::try_from(id),
                    Ok(rustls::pki_types::ServerName::DnsName(_))
                );
                if !dns {
                    return Err(Error::config(
                        "endpoints",
                        format!(
                            "peer id {id:?} is not a DNS name, which TLS needs: certificates \
                             name a peer by its id (letters, digits, '-' and '.')"
                        ),
                    ));
                }
            }
        }
        if self.backend == Backend::Etcd {
            for url in &mut self.endpoints {
                if let Some(rest) = url.strip_prefix("http://") {
                    *url = format!("https://{rest}");
                }
            }
        }
        self.tls = Some(tls);
        Ok(self)
    }

    /// Authenticates as `user`: etcd's user and password auth; ZooKeeper's
    /// digest scheme, and elect's znodes then carry an ACL that lets anyone
    /// read but only this user write or delete.
    ///
    /// Errors: [`Error::Config`] naming `user` with raft, whose peers
    /// authenticate with certificates.
    pub fn with_user(mut self, user: User) -> Result<Self> {
        if self.backend == Backend::Raft {
            return Err(Error::config(
                "user",
                "raft peers authenticate with certificates (--cacert, --cert, --key), not \
                 passwords",
            ));
        }
        self.user = Some(user);
        Ok(self)
    }

    /// Checks what only the whole configuration can tell.
    ///
    /// Errors: [`Error::Config`] naming `cacert` when an etcd endpoint is
    /// `https://` but no TLS material was given.
    pub fn validate(&self) -> Result<()> {
        let https = self.endpoints.iter().any(|e| e.starts_with("https://"));
        if https && self.tls.is_none() {
            return Err(Error::config(
                "cacert",
                "is required with https:// endpoints: the CA that signed etcd's certificate",
            ));
        }
        Ok(())
    }

    /// The TLS material, if any.
    pub fn tls(&self) -> Option<&Tls> {
        self.tls.as_ref()
    }

    /// The user, if any.
    pub fn user(&self) -> Option<&User> {
        self.user.as_ref()
    }

    /// The backend this election runs on.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// etcd: `http://host:port` (or `https://`) URLs; zk: one connect
    /// string; raft: `id=host:port` per peer.
    pub fn endpoints(&self) -> &[String] {
        &self.endpoints
    }

    /// etcd: the key prefix; zk: the election's znode; raft: the cluster.
    pub fn election(&self) -> &str {
        &self.election
    }

    /// The value published while this process leads.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// How long a silent leader keeps its leadership.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// How long to wait for the first answer of the service.
    pub fn connect_timeout(&self) -> Duration {
        self.connect_timeout
    }

    /// raft: where term and vote are kept.
    pub fn data_dir(&self) -> Option<&Path> {
        self.data_dir.as_deref()
    }

    /// raft: the peers' ids (empty for other backends).
    pub fn peer_ids(&self) -> impl Iterator<Item = &str> {
        self.endpoints
            .iter()
            .filter(|_| self.backend == Backend::Raft)
            .filter_map(|e| e.split_once('=').map(|(id, _)| id))
    }
}

/// The connect timeout unless one is set.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Longest id we accept: ids are published in keys' values, output lines,
/// environment variables and file names of operators' scripts.
pub const MAX_ID_BYTES: usize = 1024;

/// Checks `host:port,...` (an `http://` or `https://` scheme is accepted)
/// and returns URLs, `http://` unless `https://` was given.
pub(crate) fn etcd_endpoints(text: &str) -> Result<Vec<String>> {
    const FLAG: &str = "endpoints";
    let mut urls = Vec::new();
    for raw in text.split(',').map(str::trim) {
        if raw.is_empty() {
            return Err(Error::config(FLAG, format!("empty entry in {text:?}")));
        }
        let (scheme, hostport) = match raw.strip_prefix("https://") {
            Some(rest) => ("https", rest),
            None => ("http", raw.strip_prefix("http://").unwrap_or(raw)),
        };
        let hostport = hostport.strip_suffix('/').unwrap_or(hostport);
        let (host, port) = hostport
            .rsplit_once(':')
            .ok_or_else(|| Error::config(FLAG, format!("{raw:?} is not host:port")))?;
        let host_ok = !host.is_empty()
            && !host.contains(['/', ' ', '@', '?', '#'])
            && (host.starts_with('[') == host.ends_with(']'));
        if !host_ok {
            return Err(Error::config(
                FLAG,
                format!("{raw:?} has no valid host before the port"),
            ));
        }
        match port.parse::<u16>() {
            Ok(p) if p > 0 => {}
            _ => {
                return Err(Error::config(
                    FLAG,
                    format!("{raw:?}: port {port:?} is not a number from 1 to 65535"),
                ));
            }
        }
        let url = format!("{scheme}://{host}:{port}");
        if urls.contains(&url) {
            return Err(Error::config(FLAG, format!("{raw:?} is listed twice")));
        }
        urls.push(url);
    }
    Ok(urls)
}

/// Checks an etcd election name (the key prefix Go's `NewElection` takes).
pub(crate) fn etcd_election(name: &str) -> Result<String> {
    const FLAG: &str = "election";
    if name.is_empty() {
        return Err(Error::config(FLAG, "must not be empty"));
    }
    if name.chars().any(char::is_control) {
        return Err(Error::config(
            FLAG,
            format!("{name:?} contains control characters"),
        ));
    }
    if name.ends_with('/') {
        return Err(Error::config(
            FLAG,
            format!(
                "{name:?} ends with '/'; give the name without it (keys are <name>/<lease id>)"
            ),
        ));
    }
    Ok(name.to_owned())
}

/// Checks a ZooKeeper connect string `host:port,...[/chroot]`.
pub(crate) fn zk_connect_string(text: &str) -> Result<String> {
    const FLAG: &str = "endpoints";
    let (hosts, chroot) = match text.find('/') {
        Some(i) => (&text[..i], Some(&text[i..])),
        None => (text, None),
    };
    let mut seen = std::collections::BTreeSet::new();
    for hostport in hosts.split(',').map(str::trim) {
        if !seen.insert(hostport) {
            return Err(Error::config(FLAG, format!("{hostport:?} is listed twice")));
        }
        let (host, port) = hostport
            .rsplit_once(':')
            .ok_or_else(|| Error::config(FLAG, format!("{hostport:?} is not host:port")))?;
        if host.is_empty() || host.contains([' ', '@']) {
            return Err(Error::config(
                FLAG,
                format!("{hostport:?} has no valid host"),
            ));
        }
        if !matches!(port.parse::<u16>(), Ok(p) if p > 0) {
            return Err(Error::config(
                FLAG,
                format!("{hostport:?}: port {port:?} is not a number from 1 to 65535"),
            ));
        }
    }
    if let Some(chroot) = chroot
        && chroot != "/"
    {
        zk_path(chroot).map_err(|e| match e {
            Error::Config { reason, .. } => Error::config(FLAG, format!("chroot {reason}")),
            other => other,
        })?;
    }
    Ok(text.trim().to_owned())
}

/// Checks a ZooKeeper election path: absolute, no trailing `/`, no empty,
/// `.` or `..` segments, no control characters.
pub(crate) fn zk_path(path: &str) -> Result<String> {
    const FLAG: &str = "election";
    let bad = |why: &str| Err(Error::config(FLAG, format!("{path:?} {why}")));
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
pub(crate) fn zk_ttl(ttl: Duration) -> Result<Duration> {
    ttl_at_least(
        ttl,
        Duration::from_millis(100),
        "is too short for a ZooKeeper session",
    )?;
    if ttl > Duration::from_secs(i32::MAX as u64 / 1000) {
        return Err(Error::config("ttl", "is too long for a ZooKeeper session"));
    }
    Ok(ttl)
}

/// Checks raft peers `id=host:port,...`: every entry has an id, ids are
/// unique, addresses are host:port.
pub(crate) fn raft_peers(text: &str) -> Result<Vec<String>> {
    const FLAG: &str = "endpoints";
    if text.trim().is_empty() {
        return Err(Error::config(
            FLAG,
            "lists no peers; give id=host:port,... for every peer, this one included",
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut addresses = std::collections::BTreeSet::new();
    let mut peers = Vec::new();
    for entry in text.split(',').map(str::trim) {
        let (id, addr) = entry.split_once('=').ok_or_else(|| {
            Error::config(
                FLAG,
                format!("{entry:?} has no peer id; write id=host:port"),
            )
        })?;
        let id = candidate_id(id).map_err(|_| {
            Error::config(FLAG, format!("{entry:?} has an empty or invalid peer id"))
        })?;
        let (host, port) = addr
            .rsplit_once(':')
            .ok_or_else(|| Error::config(FLAG, format!("{entry:?}: {addr:?} is not host:port")))?;
        if host.is_empty()
            || host.contains([' ', '/', '='])
            || !matches!(port.parse::<u16>(), Ok(p) if p > 0)
        {
            return Err(Error::config(
                FLAG,
                format!("{entry:?}: {addr:?} is not host:port"),
            ));
        }
        if !seen.insert(id.clone()) {
            return Err(Error::config(FLAG, format!("peer id {id:?} appears twice")));
        }
        if !addresses.insert(addr.to_owned()) {
            return Err(Error::config(
                FLAG,
                format!("address {addr:?} is given to two peers"),
            ));
        }
        peers.push(format!("{id}={addr}"));
    }
    Ok(peers)
}

/// Checks a raft cluster name (`--election`).
pub(crate) fn raft_cluster(name: &str) -> Result<String> {
    if name.is_empty() || name.chars().any(char::is_control) {
        return Err(Error::config(
            "election",
            format!("{name:?} is not a cluster name"),
        ));
    }
    Ok(name.to_owned())
}

/// Checks a raft election timeout.
pub(crate) fn raft_ttl(ttl: Duration) -> Result<Duration> {
    ttl_at_least(
        ttl,
        Duration::from_millis(10),
        "is below the 10ms minimum election timeout",
    )?;
    if ttl > MAX_DURATION {
        return Err(Error::config(
            "ttl",
            format!(
                "{} is above the 24h maximum election timeout",
                humantime::format_duration(ttl)
            ),
        ));
    }
    Ok(ttl)
}

/// `--ttl` below `min` is refused with "<ttl> <why>".
fn ttl_at_least(ttl: Duration, min: Duration, why: &str) -> Result<()> {
    if ttl < min {
        return Err(Error::config(
            "ttl",
            format!("{} {why}", humantime::format_duration(ttl)),
        ));
    }
    Ok(())
}

/// Checks the id published as leader.
pub(crate) fn candidate_id(id: &str) -> Result<String> {
    const FLAG: &str = "id";
    if id.is_empty() {
        return Err(Error::config(FLAG, "must not be empty"));
    }
    if id.len() > MAX_ID_BYTES {
        return Err(Error::config(
            FLAG,
            format!("is {} bytes long; the limit is {MAX_ID_BYTES}", id.len()),
        ));
    }
    if id.chars().any(char::is_control) {
        return Err(Error::config(
            FLAG,
            format!("{id:?} contains control characters"),
        ));
    }
    Ok(id.to_owned())
}

/// Checks an etcd TTL: leases are granted in whole seconds, at least one.
pub(crate) fn etcd_ttl(ttl: Duration) -> Result<Duration> {
    ttl_at_least(
        ttl,
        Duration::from_secs(1),
        "is below etcd's lease granularity of 1s",
    )?;
    if ttl.as_secs() > ETCD_MAX_TTL_SECS {
        return Err(Error::config(
            "ttl",
            format!("is above etcd's maximum lease TTL of {ETCD_MAX_TTL_SECS}s"),
        ));
    }
    if ttl.subsec_nanos() != 0 {
        return Err(Error::config(
            "ttl",
            format!(
                "{}: etcd leases are granted in whole seconds",
                humantime::format_duration(ttl)
            ),
        ));
    }
    Ok(ttl)
}

/// The default id: `hostname-pid`, unique per process on one host.
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
            Error::Config { field, .. } => field,
            other => panic!("not a configuration error: {other}"),
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
            "https://h",
            "h/x:1",
        ] {
            let err = etcd_endpoints(bad).expect_err(bad);
            assert_eq!(flag_of(err), "endpoints", "{bad}");
        }
        // https is accepted; TLS material is then required (validate).
        assert_eq!(etcd_endpoints("https://h:1").unwrap(), ["https://h:1"]);
        let cfg = ElectionConfig::etcd(["https://h:1"], "e").unwrap();
        assert_eq!(flag_of(cfg.validate().unwrap_err()), "cacert");
    }

    #[test]
    fn etcd_ttls_are_whole_seconds() {
        assert!(etcd_ttl(Duration::from_secs(2)).is_ok());
        assert!(etcd_ttl(Duration::from_millis(500)).is_err());
        assert!(etcd_ttl(Duration::from_millis(1500)).is_err());
        assert!(etcd_ttl(Duration::from_secs(ETCD_MAX_TTL_SECS)).is_ok());
        assert!(etcd_ttl(Duration::from_secs(ETCD_MAX_TTL_SECS + 1)).is_err());
        assert!(etcd_ttl(Duration::MAX).is_err());
    }

    #[test]
    fn absurd_durations_are_refused_with_their_field() {
        let etcd = ElectionConfig::etcd(["h:1"], "e").unwrap();
        assert_eq!(
            flag_of(etcd.clone().with_ttl(Duration::MAX).unwrap_err()),
            "ttl"
        );
        assert_eq!(
            flag_of(etcd.with_connect_timeout(Duration::MAX).unwrap_err()),
            "connect_timeout"
        );
        let zk = ElectionConfig::zk("h:1", "/e").unwrap();
        assert_eq!(flag_of(zk.with_ttl(Duration::MAX).unwrap_err()), "ttl");
        let raft = ElectionConfig::raft([("a", "h:1")], "c").unwrap();
        assert_eq!(
            flag_of(raft.with_ttl(Duration::from_secs(86401)).unwrap_err()),
            "ttl"
        );
    }

    #[test]
    fn duplicates_are_refused() {
        assert_eq!(
            flag_of(etcd_endpoints("h:1,http://h:1").unwrap_err()),
            "endpoints"
        );
        assert_eq!(
            flag_of(zk_connect_string("h:1,h:1/x").unwrap_err()),
            "endpoints"
        );
        assert_eq!(flag_of(raft_peers("a=h:1,b=h:1").unwrap_err()), "endpoints");
    }

    #[test]
    fn raft_ids_must_be_peers_and_state_is_raft_only() {
        let raft = ElectionConfig::raft([("a", "h:1"), ("b", "h:2"), ("c", "h:3")], "c").unwrap();
        assert_eq!(raft.clone().with_id("b").unwrap().id(), "b");
        assert_eq!(flag_of(raft.with_id("z").unwrap_err()), "id");
        let etcd = ElectionConfig::etcd(["h:1"], "e").unwrap();
        assert_eq!(flag_of(etcd.with_data_dir("/tmp").unwrap_err()), "data_dir");
    }

    #[test]
    fn election_names() {
        assert_eq!(etcd_election("jobs/cron").unwrap(), "jobs/cron");
        for bad in ["", "a/", "a\nb", "\u{7f}"] {
            assert_eq!(flag_of(etcd_election(bad).unwrap_err()), "election");
        }
    }

    #[test]
    fn zk_connect_strings() {
        assert!(zk_connect_string("a:2181,b:2181/apps/x").is_ok());
        assert!(zk_connect_string("a:2181/").is_ok());
        for bad in ["a", "a:0", "a:2181//x", "a:2181/x/", ":1"] {
            assert_eq!(
                flag_of(zk_connect_string(bad).unwrap_err()),
                "endpoints",
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
            assert_eq!(flag_of(zk_path(bad).unwrap_err()), "election", "{bad}");
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
            assert_eq!(flag_of(raft_peers(bad).unwrap_err()), "endpoints", "{bad}");
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
