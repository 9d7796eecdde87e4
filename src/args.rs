//! The argument groups several subcommands share (which election, who we
//! are, where to export, how to print) and their translation into the
//! library's checked configuration. Each subcommand flattens the groups
//! that apply to it, so its `--help` lists only what it takes.

use std::path::PathBuf;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{ArgMatches, Args, ValueEnum};
use elect::Backend;
use elect::config::{ElectionConfig, Service};
use elect::credentials::{PASSWORD_VAR, Password, Tls, User};
use elect::export::{Format, OutputConfig};
use elect::health::{Check, HealthConfig, HttpUrl};

use crate::usage::{Result, UsageError, parse_duration, refuse_unused_flag};

/// `--backend`: the library's own names, listed in `--help`.
fn backend_parser() -> impl TypedValueParser<Value = Backend> {
    PossibleValuesParser::new(Backend::ALL.map(Backend::name))
        .map(|name| name.parse::<Backend>().expect("a listed name"))
}

/// The variable `elect lab up --format env` exports for `backend`'s
/// endpoints, read when neither `--endpoints` nor ELECT_ENDPOINTS is set:
/// the lab's output is used as it is printed.
pub fn backend_endpoints_var(backend: Backend) -> &'static str {
    match backend {
        Backend::Etcd => "ELECT_ETCD_ENDPOINTS",
        Backend::Zk => "ELECT_ZK_ENDPOINTS",
        Backend::Raft => "ELECT_RAFT_ENDPOINTS",
    }
}

/// Which election, on which service, with which credentials.
#[derive(Debug, Args)]
pub struct ElectionArgs {
    /// Who decides who leads: etcd, ZooKeeper, or the elect peers themselves.
    #[arg(long, env = "ELECT_BACKEND", default_value = "etcd", value_parser = backend_parser())]
    pub backend: Backend,

    /// etcd: host:port,... (an http:// scheme is accepted);
    /// zk: host:port,...[/chroot]; raft: id=host:port,... for every peer,
    /// this one included. Without it (or ELECT_ENDPOINTS), the backend's
    /// own variable, as `elect lab up --format env` prints it:
    /// ELECT_ETCD_ENDPOINTS, ELECT_ZK_ENDPOINTS or ELECT_RAFT_ENDPOINTS
    /// [default: 127.0.0.1:2379 for etcd, 127.0.0.1:2181 for zk; none for
    /// raft].
    #[arg(long, env = "ELECT_ENDPOINTS")]
    pub endpoints: Option<String>,

    /// Name of the election (etcd: the key prefix, as `etcdctl elect` takes
    /// it; zk: the absolute path of the election's znode; raft: the cluster
    /// name every peer must share).
    #[arg(long, env = "ELECT_ELECTION")]
    pub election: Option<String>,

    /// Time after which a silent leader is replaced (etcd: lease TTL, whole
    /// seconds up to 9000000000s; zk: requested session timeout; raft:
    /// election timeout, 10ms to 24h) [default: 10s for etcd and zk, 1s for
    /// raft].
    #[arg(long, env = "ELECT_TTL", allow_hyphen_values = true)]
    pub ttl: Option<String>,

    /// How long to wait for the first answer of the service (10ms to 24h).
    #[arg(
        long,
        env = "ELECT_CONNECT_TIMEOUT",
        default_value = "5s",
        allow_hyphen_values = true
    )]
    pub connect_timeout: String,

    /// Talk TLS, trusting the CA certificates in this PEM file (etcd:
    /// https; zk: its TLS client port; raft: mutual TLS between peers).
    #[arg(long, env = "ELECT_CACERT", value_name = "FILE")]
    pub cacert: Option<PathBuf>,

    /// This process's certificate (PEM), signed by the CA; raft: its DNS
    /// name must be the peer's id (readers: any name).
    #[arg(long, env = "ELECT_CERT", value_name = "FILE")]
    pub cert: Option<PathBuf>,

    /// The private key of --cert (PEM).
    #[arg(long, env = "ELECT_KEY", value_name = "FILE")]
    pub key: Option<PathBuf>,

    /// The name the servers' certificates carry, when it is not the host
    /// of the endpoints (e.g. endpoints given as IP addresses).
    #[arg(long, env = "ELECT_SERVER_NAME", value_name = "NAME")]
    pub server_name: Option<String>,

    /// etcd: the user to authenticate as; zk: the digest user, and elect's
    /// znodes then let only this user write or delete them. The password
    /// comes from --password-file or ELECT_PASSWORD, never the command line.
    #[arg(long, env = "ELECT_USER", value_name = "NAME")]
    pub user: Option<String>,

    /// The password of --user: the first line of this file.
    #[arg(long, env = "ELECT_PASSWORD_FILE", value_name = "FILE")]
    pub password_file: Option<PathBuf>,
}

/// Who this candidate is, for the subcommands that campaign.
#[derive(Debug, Args)]
pub struct CandidateArgs {
    /// Value published while this process leads [default: hostname-pid];
    /// raft: which of the peers this process is (required).
    #[arg(long, env = "ELECT_ID")]
    pub id: Option<String>,

    /// raft only: keep term and vote in this directory (fsynced before any
    /// vote is sent). Without it a restarted peer does not vote for one
    /// election timeout.
    #[arg(long, env = "ELECT_DATA_DIR")]
    pub data_dir: Option<PathBuf>,

    /// Among live candidates the highest priority leads, once it has been
    /// there for --failback-delay; equal priorities keep the line's order.
    /// 0 (or `never`): lead only when no candidate of positive priority is
    /// live.
    #[arg(
        long,
        env = "ELECT_PRIORITY",
        value_name = "N",
        default_value = "1",
        allow_negative_numbers = true
    )]
    pub priority: String,

    /// How long a candidate of higher priority must have been there
    /// before the leader hands over to it (failbacks change the leader at
    /// most once per delay).
    #[arg(
        long,
        env = "ELECT_FAILBACK_DELAY",
        value_name = "DURATION",
        default_value = "10s"
    )]
    pub failback_delay: String,

    /// Gate leadership on this shell command (`sh -c`), run every
    /// --health-interval under the watchdog and killed whole by its end:
    /// exit 0 is healthy. An unhealthy candidate does not lead while a
    /// healthy one is live; an unhealthy leader hands over at once, and
    /// leads again only after passing for --failback-delay.
    #[arg(
        long,
        env = "ELECT_HEALTH_CMD",
        value_name = "CMD",
        conflicts_with = "health_url"
    )]
    pub health_cmd: Option<String>,

    /// Gate leadership on this http:// URL, as --health-cmd: an answer
    /// with a 2xx status within --health-interval is healthy.
    #[arg(long, env = "ELECT_HEALTH_URL", value_name = "URL")]
    pub health_url: Option<String>,

    /// How often the health check runs, and how long one may take (a
    /// check that hangs fails at its end).
    #[arg(
        long,
        env = "ELECT_HEALTH_INTERVAL",
        value_name = "DURATION",
        default_value = "5s"
    )]
    pub health_interval: String,

    /// How many failed health checks in a row make this candidate
    /// unhealthy.
    #[arg(
        long,
        env = "ELECT_HEALTH_FAILURES",
        value_name = "N",
        default_value = "3",
        allow_negative_numbers = true
    )]
    pub health_failures: String,
}

/// Where the current leader is exported besides stdout.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Keep the current leader's id in this file (replaced atomically;
    /// empty while no leader is known).
    #[arg(long, env = "ELECT_LEADER_FILE")]
    pub leader_file: Option<PathBuf>,

    /// Serve /leader, /healthz, /readyz and /metrics on this address
    /// (IP:PORT, e.g. 0.0.0.0:4040).
    #[arg(long, env = "ELECT_HTTP", value_name = "ADDR")]
    pub http: Option<String>,
}

/// `--format` of the election subcommands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FormatArg {
    /// Sentences for people.
    Text,
    /// One JSON object per line, each a full snapshot.
    Json,
}

/// `--format` of `compare` and `simulate`, which print results, not
/// snapshots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ResultsFormat {
    /// A table for people.
    Text,
    /// One JSON object per line for programs: a row of results each.
    Json,
}

/// How lines on stdout are written.
#[derive(Debug, Args)]
pub struct FormatArgs {
    /// Output lines on stdout: `text` for people, `json` for programs.
    #[arg(long, env = "ELECT_FORMAT", value_enum, default_value = "text")]
    pub format: FormatArg,
}

impl From<FormatArg> for Format {
    fn from(f: FormatArg) -> Self {
        match f {
            FormatArg::Text => Format::Text,
            FormatArg::Json => Format::Json,
        }
    }
}

impl ExportArgs {
    /// The exporters' configuration.
    pub fn output(&self, format: FormatArg) -> Result<OutputConfig> {
        if let Some(path) = &self.leader_file {
            elect::export::check_leader_file(path)?;
        }
        Ok(OutputConfig {
            format: format.into(),
            leader_file: self.leader_file.clone(),
            http: self.http.as_deref().map(http_addr).transpose()?,
        })
    }
}

/// Checks `--http`: an IP address and a port.
fn http_addr(text: &str) -> Result<std::net::SocketAddr> {
    text.trim().parse().map_err(|_| {
        UsageError::new(
            "--http",
            format!("{text:?} is not IP:PORT (e.g. 0.0.0.0:4040 or [::1]:4040)"),
        )
    })
}

impl ElectionArgs {
    /// The election to follow, without taking part.
    pub fn follower_config(&self) -> Result<ElectionConfig> {
        self.config(None, &ArgMatches::default(), &mut Vec::new())
    }

    /// The election to campaign in as `candidate`. `matches` (the
    /// subcommand's) tells typed flags from inherited environment.
    pub fn candidate_config(
        &self,
        candidate: &CandidateArgs,
        matches: &ArgMatches,
        warnings: &mut Vec<String>,
    ) -> Result<ElectionConfig> {
        let cfg = self.config(Some(candidate), matches, warnings)?;
        if let Some(peers) = cfg.raft_peers() {
            let n = peers.len();
            if n % 2 == 0 {
                warnings.push(format!(
                    "--endpoints: a Raft-vote cluster of {n} peers needs {} of them to elect a \
                     leader and tolerates {} down, no more than {} peers would: an odd size \
                     is better",
                    n / 2 + 1,
                    (n - 1) / 2,
                    n - 1
                ));
            }
        }
        Ok(cfg)
    }

    fn config(
        &self,
        candidate: Option<&CandidateArgs>,
        matches: &ArgMatches,
        warnings: &mut Vec<String>,
    ) -> Result<ElectionConfig> {
        let backend = self.backend;
        let election = self
            .election
            .as_deref()
            .ok_or_else(|| UsageError::new("--election", "is required (or set ELECT_ELECTION)"))?;
        let from_lab = std::env::var(backend_endpoints_var(backend))
            .ok()
            .filter(|v| !v.is_empty());
        let endpoints = self
            .endpoints
            .as_deref()
            .or(from_lab.as_deref())
            .unwrap_or(backend.default_endpoints());
        let mut cfg = ElectionConfig::new(Service::parse(backend, endpoints)?, election)?;
        if let Some(ttl) = &self.ttl {
            cfg = cfg.with_ttl(parse_duration("--ttl", ttl)?)?;
        }
        cfg =
            cfg.with_connect_timeout(parse_duration("--connect-timeout", &self.connect_timeout)?)?;
        if let Some(candidate) = candidate {
            match (&candidate.id, backend) {
                (Some(id), _) => cfg = cfg.with_id(id)?,
                (None, Backend::Raft) => {
                    let ids: Vec<&str> =
                        cfg.raft_peers().into_iter().flat_map(|p| p.ids()).collect();
                    return Err(UsageError::new(
                        "--id",
                        format!("is required with --backend raft: one of {}", ids.join(", ")),
                    ));
                }
                (None, _) => {}
            }
            match (&candidate.data_dir, backend) {
                (Some(dir), Backend::Raft) => cfg = cfg.with_data_dir(dir)?,
                (Some(_), _) => refuse_unused_flag(
                    matches,
                    "data_dir",
                    "--data-dir",
                    &format!("only the raft backend keeps state; {backend} keeps none"),
                    warnings,
                )?,
                (None, _) => {}
            }
            let priority = candidate
                .priority
                .parse()
                .map_err(|why| UsageError::new("--priority", why))?;
            cfg = cfg.with_priority(priority);
            let delay = parse_duration("--failback-delay", &candidate.failback_delay)?;
            cfg = cfg.with_failback_delay(delay)?;
            if let Some(health) = health_config(candidate, delay, matches, warnings)? {
                cfg = cfg.with_health(health);
            }
        }
        cfg = self.credentials(cfg)?;
        // Checked again by the library; here so bad input exits 2 first.
        cfg.validate()?;
        Ok(cfg)
    }

    /// Adds TLS material and the user, read now so a bad file is refused
    /// before anything connects.
    fn credentials(&self, mut cfg: ElectionConfig) -> Result<ElectionConfig> {
        match (&self.cacert, &self.cert, &self.key) {
            (Some(ca), cert, key) => {
                let mut tls = Tls::from_files(ca, cert.as_deref(), key.as_deref())?;
                if let Some(name) = &self.server_name {
                    tls = tls.with_server_name(name)?;
                }
                cfg = cfg.with_tls(tls)?;
            }
            (None, Some(_), _) | (None, _, Some(_)) => {
                return Err(UsageError::new(
                    "--cacert",
                    "is required with --cert and --key: the CA that signed the servers' certificates",
                ));
            }
            (None, None, None) if self.server_name.is_some() => {
                return Err(UsageError::new("--server-name", "needs --cacert"));
            }
            (None, None, None) => {}
        }
        let env_password = std::env::var(PASSWORD_VAR).ok().filter(|p| !p.is_empty());
        let password = match (&self.password_file, env_password) {
            (Some(_), Some(_)) => {
                return Err(UsageError::new(
                    "--password-file",
                    format!("{PASSWORD_VAR} is set too; give the password one way"),
                ));
            }
            (Some(file), None) => Some(Password::from_file(file)?),
            (None, Some(p)) => Some(Password::new(p)),
            (None, None) => None,
        };
        match (&self.user, password) {
            (Some(name), Some(password)) => cfg = cfg.with_user(User::new(name, password)?)?,
            (Some(_), None) => {
                return Err(UsageError::new(
                    "--user",
                    format!("needs a password: --password-file FILE or {PASSWORD_VAR}"),
                ));
            }
            (None, Some(_)) if self.password_file.is_some() => {
                return Err(UsageError::new("--password-file", "needs --user"));
            }
            // ELECT_PASSWORD alone may be meant for another command.
            (None, _) => {}
        }
        Ok(cfg)
    }
}

/// The health check `candidate`'s flags ask for, if any; its backoff is
/// the failback delay.
fn health_config(
    candidate: &CandidateArgs,
    failback_delay: std::time::Duration,
    matches: &ArgMatches,
    warnings: &mut Vec<String>,
) -> Result<Option<HealthConfig>> {
    let check = match (&candidate.health_cmd, &candidate.health_url) {
        (Some(cmd), _) if cmd.trim().is_empty() => {
            return Err(UsageError::new(
                "--health-cmd",
                "is empty: give a shell command whose exit status 0 means healthy",
            ));
        }
        (Some(cmd), _) => {
            Check::command(cmd).map_err(|e| UsageError::new("--health-cmd", e.to_string()))?
        }
        (None, Some(url)) => Check::Url(
            HttpUrl::parse(url).map_err(|e| UsageError::new("--health-url", e.to_string()))?,
        ),
        (None, None) => {
            for (id, flag) in [
                ("health_interval", "--health-interval"),
                ("health_failures", "--health-failures"),
            ] {
                refuse_unused_flag(
                    matches,
                    id,
                    flag,
                    "there is no health check (give --health-cmd or --health-url)",
                    warnings,
                )?;
            }
            return Ok(None);
        }
    };
    let interval = parse_duration("--health-interval", &candidate.health_interval)?;
    let failures = candidate.health_failures.parse::<u32>().map_err(|_| {
        UsageError::new(
            "--health-failures",
            format!(
                "{:?}: give a whole number from 1 to 100",
                candidate.health_failures
            ),
        )
    })?;
    Ok(Some(
        HealthConfig::new(check)
            .with_interval(interval)?
            .with_failures(failures)?
            .with_backoff(failback_delay),
    ))
}
