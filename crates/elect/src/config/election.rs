//! [`ElectionConfig`]: where and how to take part in one election, each
//! value checked as it is set (see the [module doc](super)).

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::limits::{election_for, etcd_ttl, raft_ttl, zk_ttl};
use super::service::{EtcdEndpoints, RaftPeers, Service, ZkEnsemble, candidate_id};
use crate::backend_kind::Backend;
use crate::clock::MAX_DURATION;
use crate::credentials::{Tls, User};
use crate::error::{Error, Result};
use crate::health::HealthConfig;
use crate::steer::Priority;

/// Where and how to take part in (or watch) one election. Built only
/// through the validating constructors; read through the accessors.
#[derive(Debug, Clone)]
pub struct ElectionConfig {
    pub(crate) service: Service,
    /// etcd: the key prefix, without the trailing `/`; zk: the absolute
    /// path of the election's znode; raft: the cluster name.
    pub(crate) election: String,
    pub(crate) id: String,
    pub(crate) ttl: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) data_dir: Option<PathBuf>,
    pub(crate) tls: Option<Tls>,
    pub(crate) user: Option<User>,
    /// How much this candidate wants to lead (see [`crate::steer`]).
    pub(crate) priority: Priority,
    /// How long a candidate of higher priority must be there before the
    /// leader hands over to it.
    pub(crate) failback_delay: Duration,
    /// The health check that gates this candidate (see [`crate::health`]).
    pub(crate) health: Option<HealthConfig>,
}

/// The failback delay unless told otherwise: long enough that a
/// candidate restarting in a crash loop never gets leadership handed to
/// it, short enough that a preferred leader is back within a minute.
pub const DEFAULT_FAILBACK_DELAY: Duration = Duration::from_secs(10);

impl ElectionConfig {
    /// The error saying this election's service did not answer within its
    /// connect timeout.
    pub(crate) fn unreachable(&self, detail: impl std::fmt::Display) -> Error {
        self.refused_after(self.connect_timeout, detail)
    }

    /// The error saying this election's service refused us after `tried`,
    /// before the connect timeout ran out.
    pub(crate) fn refused_after(&self, tried: Duration, detail: impl std::fmt::Display) -> Error {
        Error::Unreachable {
            backend: self.backend(),
            endpoints: self.service.to_string(),
            // Whole milliseconds: "tried for 10ms", not its nanoseconds.
            timeout: Duration::from_millis(tried.as_millis() as u64),
            detail: detail.to_string(),
        }
    }

    /// An election on `service`: `election` is the etcd key prefix, the
    /// ZooKeeper znode path or the Raft-vote cluster's name.
    ///
    /// Errors: [`Error::Config`] naming `election`.
    pub fn new(service: Service, election: &str) -> Result<Self> {
        let backend = service.backend();
        Ok(ElectionConfig {
            election: election_for(backend, election)?,
            service,
            id: default_id(),
            ttl: backend.default_ttl(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            data_dir: None,
            tls: None,
            user: None,
            priority: Priority::DEFAULT,
            failback_delay: DEFAULT_FAILBACK_DELAY,
            health: None,
        })
    }

    /// This candidate's priority: among live candidates the highest leads,
    /// once there for the failback delay; 0 leads only when no candidate
    /// of positive priority is live (see [`crate::steer`]). Changeable
    /// while campaigning ([`Campaign::set_priority`](crate::backend::Campaign::set_priority)).
    pub fn with_priority(mut self, priority: Priority) -> Self {
        self.priority = priority;
        self
    }

    /// How long a candidate of higher priority must have been there
    /// before the leader hands over to it; failbacks change the leader at
    /// most once per delay.
    ///
    /// Errors: [`Error::Config`] naming `failback_delay` below 100 ms or
    /// above a day.
    pub fn with_failback_delay(mut self, delay: Duration) -> Result<Self> {
        if delay < Duration::from_millis(100) || delay > Duration::from_secs(86_400) {
            return Err(Error::config(
                "failback_delay",
                format!(
                    "{}: give between 100ms and 24h",
                    humantime::format_duration(delay)
                ),
            ));
        }
        self.failback_delay = delay;
        Ok(self)
    }

    /// Gates this candidate's leadership on `health`'s check (see
    /// [`crate::health`]): [`backend::campaign`](crate::backend::campaign)
    /// runs it once before joining, then every interval; an unhealthy
    /// candidate is passed over while a healthy one is live, and an
    /// unhealthy leader hands over to one at once.
    ///
    /// ```no_run
    /// # async fn f() -> elect::Result<()> {
    /// use std::time::Duration;
    /// use elect::health::{Check, HealthConfig, HttpUrl};
    /// use elect::{backend, config::ElectionConfig, work::WorkWatch};
    ///
    /// let check = Check::Url(HttpUrl::parse("http://127.0.0.1:8080/healthz")?);
    /// let health = HealthConfig::new(check)
    ///     .with_interval(Duration::from_secs(2))?
    ///     .with_failures(2)?;
    /// let cfg = ElectionConfig::etcd(["127.0.0.1:2379"], "jobs")?.with_health(health);
    /// let campaign = backend::campaign(&cfg, WorkWatch::none()).await?;
    /// # Ok(()) }
    /// ```
    pub fn with_health(mut self, health: HealthConfig) -> Self {
        self.health = Some(health);
        self
    }

    /// The health check, if any.
    pub fn health(&self) -> Option<&HealthConfig> {
        self.health.as_ref()
    }

    /// This candidate's priority.
    pub fn priority(&self) -> Priority {
        self.priority
    }

    /// The failback delay.
    pub fn failback_delay(&self) -> Duration {
        self.failback_delay
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
        Self::new(Service::Etcd(EtcdEndpoints::new(endpoints)?), election)
    }

    /// A ZooKeeper election: `connect_string` as `host:port,...[/chroot]`,
    /// `path` the absolute path of the election's znode.
    ///
    /// Errors: [`Error::Config`] naming `endpoints` or `election`.
    pub fn zk(connect_string: &str, path: &str) -> Result<Self> {
        Self::new(Service::Zk(ZkEnsemble::parse(connect_string)?), path)
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
        Self::new(Service::Raft(RaftPeers::new(peers)?), cluster)
    }

    /// The same service and settings for another election (etcd: a key
    /// prefix; zk: a znode path; raft: a cluster name): how one
    /// `backend::Session` serves many elections.
    ///
    /// Errors: [`Error::Config`] naming `election`.
    pub fn with_election(mut self, election: &str) -> Result<Self> {
        self.election = election_for(self.backend(), election)?;
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
        if let Service::Raft(peers) = &self.service
            && peers.address_of(&self.id).is_none()
        {
            return Err(Error::config(
                "id",
                format!(
                    "{:?} is not one of the peers ({})",
                    self.id,
                    peers.ids().collect::<Vec<_>>().join(", ")
                ),
            ));
        }
        Ok(())
    }

    /// How long a silent leader keeps its leadership (etcd: lease TTL; zk:
    /// requested session timeout; raft: election timeout). See the bounds
    /// in the [module doc](crate::config).
    ///
    /// Errors: [`Error::Config`] naming `ttl`.
    pub fn with_ttl(mut self, ttl: Duration) -> Result<Self> {
        self.ttl = match self.backend() {
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
        let shown = humantime::format_duration(timeout);
        if timeout < Duration::from_millis(10) {
            return Err(Error::config(
                "connect_timeout",
                format!("{shown}: must be at least 10ms"),
            ));
        }
        if timeout > MAX_DURATION {
            return Err(Error::config(
                "connect_timeout",
                format!("{shown}: must be at most 24h"),
            ));
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
        if self.backend() != Backend::Raft {
            return Err(Error::config(
                "data_dir",
                format!(
                    "only the raft backend keeps state; {} keeps none",
                    self.backend().name()
                ),
            ));
        }
        let dir = dir.as_ref();
        if let Ok(meta) = std::fs::metadata(dir)
            && !meta.is_dir()
        {
            return Err(Error::config(
                "data_dir",
                format!("{} exists and is not a directory", dir.display()),
            ));
        }
        self.data_dir = Some(dir.to_owned());
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
        if self.backend() == Backend::Raft && !tls.has_identity() {
            return Err(Error::config(
                "cert",
                "is required with raft and --cacert: peers and readers alike prove who \
                 they are with a certificate from the CA",
            ));
        }
        if let Service::Raft(peers) = &self.service {
            // A peer's certificate names its id: the id must be a DNS name.
            for id in peers.ids() {
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
        if let Service::Etcd(endpoints) = &mut self.service {
            endpoints.upgrade_to_https();
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
        if self.backend() == Backend::Raft {
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
        let https = matches!(&self.service, Service::Etcd(e) if e.wants_tls());
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
        self.service.backend()
    }

    /// Where the service is: etcd's URLs, ZooKeeper's connect string, the
    /// Raft-vote peers.
    pub fn service(&self) -> &Service {
        &self.service
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

    /// raft: the peers (`None` for other backends).
    pub fn raft_peers(&self) -> Option<&RaftPeers> {
        match &self.service {
            Service::Raft(peers) => Some(peers),
            _ => None,
        }
    }

    /// etcd: the members' URLs (empty for other backends).
    pub(crate) fn etcd_urls(&self) -> &[String] {
        match &self.service {
            Service::Etcd(endpoints) => endpoints.urls(),
            _ => &[],
        }
    }

    /// zk: the connect string (empty for other backends).
    pub(crate) fn zk_connect_string(&self) -> &str {
        match &self.service {
            Service::Zk(ensemble) => ensemble.connect_string(),
            _ => "",
        }
    }
}

/// The connect timeout unless one is set.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

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
    use super::super::limits::{ETCD_MAX_TTL_SECS, etcd_election};
    use super::super::service::tests::flag_of;
    use super::*;

    #[test]
    fn https_endpoints_want_tls_material() {
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
    fn the_default_id_names_the_process() {
        assert!(default_id().ends_with(&std::process::id().to_string()));
    }
}
