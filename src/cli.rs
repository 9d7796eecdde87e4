//! Command-line surface: clap structs, then one validation step that turns
//! them into [`Command`], a fully checked configuration. Nothing here
//! performs I/O, so bad input is refused before any connection is made.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::config::{
    self, BackendKind, ChildConfig, ElectionConfig, Format, OutputConfig, Restart, parse_duration,
};
use crate::error::{Error, Result};

/// Leader election on etcd or ZooKeeper, as a sidecar, a wrapper, or a one-shot query.
#[derive(Debug, Parser)]
#[command(name = "elect", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: CliCommand,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(Debug, Args)]
pub struct CommonArgs {
    /// Which service decides who leads.
    #[arg(
        long,
        env = "ELECT_BACKEND",
        value_enum,
        default_value = "etcd",
        global = true
    )]
    pub backend: BackendKind,

    /// etcd: host:port,... (an http:// scheme is accepted);
    /// zk: host:port,...[/chroot]; raft: id=host:port,... for every peer
    /// [default: 127.0.0.1:2379 for etcd, 127.0.0.1:2181 for zk].
    #[arg(long, env = "ELECT_ENDPOINTS", global = true)]
    pub endpoints: Option<String>,

    /// Name of the election (etcd: the key prefix, as `etcdctl elect` takes
    /// it; zk: the absolute path of the election's znode).
    #[arg(long, env = "ELECT_ELECTION", global = true)]
    pub election: Option<String>,

    /// Value published while this process leads [default: hostname-pid].
    #[arg(long, env = "ELECT_ID", global = true)]
    pub id: Option<String>,

    /// Time after which a silent leader is replaced (etcd: lease TTL; zk:
    /// requested session timeout) [default: 10s].
    #[arg(long, env = "ELECT_TTL", global = true)]
    pub ttl: Option<String>,

    /// How long to wait for the first answer of the service.
    #[arg(
        long,
        env = "ELECT_CONNECT_TIMEOUT",
        default_value = "5s",
        global = true
    )]
    pub connect_timeout: String,

    /// Output lines on stdout: `text` for people, `json` for programs.
    #[arg(
        long,
        env = "ELECT_FORMAT",
        value_enum,
        default_value = "text",
        global = true
    )]
    pub format: Format,

    /// raft: keep term and vote in this directory (fsynced before any vote
    /// is sent). Without it a restarted peer does not vote for one election
    /// timeout.
    #[arg(long, env = "ELECT_DATA_DIR", global = true)]
    pub data_dir: Option<PathBuf>,

    /// Keep the current leader's id in this file (replaced atomically; empty
    /// while no leader is known).
    #[arg(long, env = "ELECT_LEADER_FILE", global = true)]
    pub leader_file: Option<PathBuf>,

    /// Serve /leader, /healthz, /readyz and /metrics on this address
    /// (IP:PORT, e.g. 0.0.0.0:4040).
    #[arg(long, env = "ELECT_HTTP", global = true, value_name = "ADDR")]
    pub http: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum CliCommand {
    /// Campaign for leadership and report changes; resign on SIGINT/SIGTERM.
    Campaign,
    /// Report leadership changes without campaigning.
    Observe,
    /// Print the current leader once; exit 3 when there is none.
    Leader,
    /// Run CMD only while this process leads; kill its process group when
    /// leadership may be lost.
    Run(RunArgs),
    /// A local 3-peer Raft-vote cluster of real elect processes: election,
    /// crash failover and graceful handover, timed. Needs no service.
    Demo,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Time between SIGTERM and SIGKILL when leadership is lost; never
    /// extends past the leadership deadline.
    #[arg(long, env = "ELECT_GRACE", default_value = "5s")]
    pub grace: String,

    /// Whether the command is started again when it exits while this
    /// process leads (with backoff from 100 ms to 10 s).
    #[arg(long, env = "ELECT_RESTART", value_enum, default_value = "never")]
    pub restart: Restart,

    /// Exit (code 1) once leadership is lost and the command is dead,
    /// instead of campaigning again.
    #[arg(long, env = "ELECT_EXIT_ON_LOSS")]
    pub exit_on_loss: bool,

    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// A validated invocation.
#[derive(Debug)]
pub enum Command {
    Campaign(ElectionConfig, OutputConfig),
    Observe(ElectionConfig, OutputConfig),
    Leader(ElectionConfig, Format),
    Run(ElectionConfig, OutputConfig, ChildConfig),
    Demo,
}

impl Cli {
    /// Checks every value; the first bad one is reported with its flag.
    pub fn validate(self) -> Result<Command> {
        if matches!(self.command, CliCommand::Demo) {
            // The demo picks its own cluster; it takes no election flags.
            return Ok(Command::Demo);
        }
        let election = self.common.election_config()?;
        let campaigns = matches!(self.command, CliCommand::Campaign | CliCommand::Run(_));
        if campaigns && election.backend == BackendKind::Raft {
            raft_membership(&election, self.common.id.is_some())?;
        }
        let output = OutputConfig {
            format: self.common.format,
            leader_file: self.common.leader_file,
            http: self
                .common
                .http
                .as_deref()
                .map(config::http_addr)
                .transpose()?,
        };
        Ok(match self.command {
            CliCommand::Campaign => Command::Campaign(election, output),
            CliCommand::Observe => Command::Observe(election, output),
            CliCommand::Leader => Command::Leader(election, output.format),
            CliCommand::Demo => unreachable!("handled above"),
            CliCommand::Run(run) => {
                let grace = parse_duration("--grace", &run.grace)?;
                if run.command.iter().all(|a| a.is_empty()) {
                    return Err(Error::usage("CMD", "the command to run is empty"));
                }
                Command::Run(
                    election,
                    output,
                    ChildConfig {
                        command: run.command,
                        grace,
                        restart: run.restart,
                        exit_on_loss: run.exit_on_loss,
                    },
                )
            }
        })
    }
}

/// A raft candidate must be one of the peers.
fn raft_membership(cfg: &ElectionConfig, id_given: bool) -> Result<()> {
    let ids: Vec<&str> = cfg
        .endpoints
        .iter()
        .filter_map(|e| e.split_once('='))
        .map(|(id, _)| id)
        .collect();
    if !id_given {
        return Err(Error::usage(
            "--id",
            format!("is required with --backend raft: one of {}", ids.join(", ")),
        ));
    }
    if !ids.contains(&cfg.id.as_str()) {
        return Err(Error::usage(
            "--id",
            format!(
                "{:?} is not one of the peers in --endpoints ({})",
                cfg.id,
                ids.join(", ")
            ),
        ));
    }
    Ok(())
}

impl CommonArgs {
    fn election_config(&self) -> Result<ElectionConfig> {
        let backend = self.backend;
        let election = self
            .election
            .as_deref()
            .ok_or_else(|| Error::usage("--election", "is required (or set ELECT_ELECTION)"))?;
        let ttl = match &self.ttl {
            Some(text) => parse_duration("--ttl", text)?,
            None => backend.default_ttl(),
        };
        let connect_timeout = parse_duration("--connect-timeout", &self.connect_timeout)?;
        if connect_timeout < Duration::from_millis(10) {
            return Err(Error::usage("--connect-timeout", "must be at least 10ms"));
        }
        let id = match &self.id {
            Some(id) => config::candidate_id(id)?,
            None => config::default_id(),
        };
        let endpoints = self
            .endpoints
            .as_deref()
            .unwrap_or(backend.default_endpoints());
        let (endpoints, election, ttl) = match backend {
            BackendKind::Etcd => (
                config::etcd_endpoints(endpoints)?,
                config::etcd_election(election)?,
                config::etcd_ttl(ttl)?,
            ),
            BackendKind::Zk => (
                vec![config::zk_connect_string(endpoints)?],
                config::zk_path(election)?,
                config::zk_ttl(ttl)?,
            ),
            BackendKind::Raft => (
                config::raft_peers(endpoints)?,
                config::raft_cluster(election)?,
                config::raft_ttl(ttl)?,
            ),
        };
        Ok(ElectionConfig {
            backend,
            endpoints,
            election,
            id,
            ttl,
            connect_timeout,
            data_dir: self.data_dir.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Command> {
        Cli::try_parse_from(std::iter::once("elect").chain(args.iter().copied()))
            .expect("clap accepts")
            .validate()
    }

    #[test]
    fn flags_may_follow_the_subcommand() {
        let cmd = parse(&["campaign", "--election", "e", "--ttl", "3", "--id", "a"]).unwrap();
        let Command::Campaign(cfg, _) = cmd else {
            panic!("not campaign")
        };
        assert_eq!(cfg.ttl, Duration::from_secs(3));
        assert_eq!(cfg.id, "a");
        assert_eq!(cfg.endpoints, vec!["http://127.0.0.1:2379"]);
    }

    #[test]
    fn run_takes_the_command_after_dashes() {
        let cmd = parse(&[
            "--election",
            "e",
            "run",
            "--grace",
            "1s",
            "--",
            "sh",
            "-c",
            "x",
        ])
        .unwrap();
        let Command::Run(_, _, child) = cmd else {
            panic!("not run")
        };
        assert_eq!(child.command, vec!["sh", "-c", "x"]);
        assert_eq!(child.grace, Duration::from_secs(1));
    }

    #[test]
    fn missing_election_names_the_flag() {
        let err = parse(&["leader"]).unwrap_err();
        assert!(err.to_string().starts_with("--election"), "{err}");
        assert_eq!(err.exit_code(), 2);
    }
}
