//! The command-line surface: clap structs, then one validation step that
//! turns them into [`Command`], built from the library's checked
//! configuration types. Nothing here performs I/O, so bad input is refused
//! (exit 2, naming the flag) before any connection is made.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::parser::ValueSource;
use clap::{ArgMatches, Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use elect::config::{BackendKind, ElectionConfig};
use elect::credentials::{PASSWORD_VAR, Password, Tls, User};
use elect::export::{Format, OutputConfig};
use elect::supervise::{ChildConfig, Containment, Restart};

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

type Result<T> = std::result::Result<T, UsageError>;

/// Leader election on etcd, ZooKeeper, or among the elect processes
/// themselves (Raft's vote): as a sidecar, a wrapper, or a one-shot query.
#[derive(Debug, Parser)]
#[command(name = "elect", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: CliCommand,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `--backend`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BackendArg {
    /// Lease-bound keys in etcd, in the layout of Go's `concurrency.Election`.
    Etcd,
    /// Ephemeral-sequential znodes in ZooKeeper, named as Curator's `LeaderLatch`.
    Zk,
    /// The elect peers elect a leader among themselves with Raft's vote.
    Raft,
}

/// `--format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FormatArg {
    /// Sentences for people.
    Text,
    /// One JSON object per line, each a full snapshot.
    Json,
    /// `lab up` and `lab status` only: shell lines to eval.
    Env,
}

/// `run --contain`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ContainArg {
    /// The strongest that works here.
    Auto,
    /// A PID namespace whose init is ours.
    Pidns,
    /// A cgroup v2 of the command's own.
    Cgroup,
    /// The watchdog as subreaper, killing every descendant.
    Subreaper,
}

impl From<ContainArg> for Containment {
    fn from(arg: ContainArg) -> Containment {
        match arg {
            ContainArg::Auto => Containment::Auto,
            ContainArg::Pidns => Containment::PidNamespace,
            ContainArg::Cgroup => Containment::Cgroup,
            ContainArg::Subreaper => Containment::Subreaper,
        }
    }
}

/// `run --restart`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RestartArg {
    /// Exit with the command's code (and resign).
    Never,
    /// Start it again, with backoff, after a non-zero exit or a signal.
    OnFailure,
    /// Start it again, with backoff, whatever its code.
    Always,
}

#[derive(Debug, Args)]
pub struct CommonArgs {
    /// Who decides who leads: etcd, ZooKeeper, or the elect peers themselves.
    #[arg(
        long,
        env = "ELECT_BACKEND",
        value_enum,
        default_value = "etcd",
        global = true
    )]
    pub backend: BackendArg,

    /// etcd: host:port,... (an http:// scheme is accepted);
    /// zk: host:port,...[/chroot]; raft: id=host:port,... for every peer,
    /// this one included [default: 127.0.0.1:2379 for etcd, 127.0.0.1:2181
    /// for zk; none for raft].
    #[arg(long, env = "ELECT_ENDPOINTS", global = true)]
    pub endpoints: Option<String>,

    /// Name of the election (etcd: the key prefix, as `etcdctl elect` takes
    /// it; zk: the absolute path of the election's znode; raft: the cluster
    /// name every peer must share).
    #[arg(long, env = "ELECT_ELECTION", global = true)]
    pub election: Option<String>,

    /// Value published while this process leads [default: hostname-pid];
    /// raft: which of the peers this process is (required to campaign).
    #[arg(long, env = "ELECT_ID", global = true)]
    pub id: Option<String>,

    /// Time after which a silent leader is replaced (etcd: lease TTL, whole
    /// seconds up to 9000000000s; zk: requested session timeout; raft:
    /// election timeout, 10ms to 24h) [default: 10s for etcd and zk, 1s for
    /// raft].
    #[arg(long, env = "ELECT_TTL", global = true)]
    pub ttl: Option<String>,

    /// How long to wait for the first answer of the service (10ms to 24h).
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
    pub format: FormatArg,

    /// raft only, campaign and run: keep term and vote in this directory
    /// (fsynced before any vote is sent). Without it a restarted peer does
    /// not vote for one election timeout.
    #[arg(long, env = "ELECT_DATA_DIR", global = true)]
    pub data_dir: Option<PathBuf>,

    /// campaign, observe and run: keep the current leader's id in this file
    /// (replaced atomically; empty while no leader is known).
    #[arg(long, env = "ELECT_LEADER_FILE", global = true)]
    pub leader_file: Option<PathBuf>,

    /// campaign, observe and run: serve /leader, /healthz, /readyz and
    /// /metrics on this address (IP:PORT, e.g. 0.0.0.0:4040).
    #[arg(long, env = "ELECT_HTTP", global = true, value_name = "ADDR")]
    pub http: Option<String>,

    /// Talk TLS, trusting the CA certificates in this PEM file (etcd:
    /// https; zk: its TLS client port; raft: mutual TLS between peers).
    #[arg(long, env = "ELECT_CACERT", global = true, value_name = "FILE")]
    pub cacert: Option<PathBuf>,

    /// This process's certificate (PEM), signed by the CA; raft: its DNS
    /// name must be the peer's id (readers: any name).
    #[arg(long, env = "ELECT_CERT", global = true, value_name = "FILE")]
    pub cert: Option<PathBuf>,

    /// The private key of --cert (PEM).
    #[arg(long, env = "ELECT_KEY", global = true, value_name = "FILE")]
    pub key: Option<PathBuf>,

    /// The name the servers' certificates carry, when it is not the host
    /// of the endpoints (e.g. endpoints given as IP addresses).
    #[arg(long, env = "ELECT_SERVER_NAME", global = true, value_name = "NAME")]
    pub server_name: Option<String>,

    /// etcd: the user to authenticate as; zk: the digest user, and elect's
    /// znodes then let only this user write or delete them. The password
    /// comes from --password-file or ELECT_PASSWORD, never the command line.
    #[arg(long, env = "ELECT_USER", global = true, value_name = "NAME")]
    pub user: Option<String>,

    /// The password of --user: the first line of this file.
    #[arg(long, env = "ELECT_PASSWORD_FILE", global = true, value_name = "FILE")]
    pub password_file: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum CliCommand {
    /// Campaign for leadership and report changes; resign on SIGINT,
    /// SIGTERM, SIGHUP, SIGQUIT or SIGTSTP.
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
    /// Real etcd clusters and ZooKeeper ensembles on this machine, in the
    /// background, and faults on their members.
    Lab(LabArgs),
    /// The three backends (and the peers' own tools) through the same
    /// scenarios, side by side, on ensembles it starts or that you name.
    Compare(CompareArgs),
    /// The classical election algorithms in a deterministic simulator:
    /// messages, time and outcome, one algorithm or all side by side.
    Simulate(SimulateArgs),
}

#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// ring, chang-roberts, hirschberg-sinclair, peterson, bully,
    /// bully-modified, next-in-line, candidate-ordinary, invitation or
    /// raft.
    #[arg(long)]
    pub algorithm: Option<String>,

    /// Every algorithm on the same scenario, side by side.
    #[arg(long)]
    pub compare: bool,

    /// Processes (bully: the failed coordinator included), 2 to 4096.
    #[arg(long, default_value_t = 16)]
    pub nodes: usize,

    /// The textbook arrangement of ids and initiators, or one drawn from
    /// the seed.
    #[arg(long, value_enum, default_value = "worst")]
    pub case: CaseArg,

    /// Runs to average (with --case random, each its own draw).
    #[arg(long, default_value_t = 1)]
    pub runs: usize,

    /// The first run's seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,

    /// Print every message of the first run as it arrives.
    #[arg(long)]
    pub trace: bool,

    /// After the first election, split the processes into a majority and
    /// a minority holding the leader (ring, bully, invitation, raft).
    #[arg(long)]
    pub partition: bool,

    /// After the first election, crash the leader and have its ring
    /// successor notice; count only the election that follows (ring,
    /// bully, invitation, raft).
    #[arg(long)]
    pub crash_leader: bool,

    /// After the first election, for 200 time units, each follower's
    /// failure detector wrongly suspects the live leader with probability P
    /// per heartbeat (ring, bully); Raft loses each message with P instead.
    /// Counts only what follows.
    #[arg(long, value_name = "P")]
    pub false_suspicion: Option<f64>,

    /// Run at each of these sizes (e.g. 4,8,16,...,1024) instead of
    /// --nodes.
    #[arg(long, value_name = "N,N,...")]
    pub sweep: Option<String>,

    /// With --sweep: draw messages and time against N, beside the
    /// textbook formulas, into this SVG file.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<std::path::PathBuf>,
}

/// `simulate --case`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CaseArg {
    /// ring: the would-be leader initiates; the other rings: ids increase
    /// along the ring; bully: the second-highest detects the failure.
    Best,
    /// ring: the would-be leader's successor initiates; the other rings:
    /// ids decrease along the ring; bully: the lowest detects.
    Worst,
    /// Ids and initiator drawn from the seed.
    Random,
}

#[derive(Debug, Args)]
pub struct LabArgs {
    #[command(subcommand)]
    pub action: LabAction,

    /// The lab's directory: its state, member data and logs [default:
    /// elect-lab-UID in the temporary directory].
    #[arg(long, env = "ELECT_LAB_DIR", global = true)]
    pub dir: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum LabAction {
    /// Start an etcd cluster and a ZooKeeper ensemble (3 members each, or
    /// what --etcd, --zk and --raft say), wait until healthy, print the
    /// endpoints. `--format env` prints lines a shell can eval.
    Up {
        /// etcd members (0, 1, 3, 5 or 7); with only --zk given, none.
        #[arg(long)]
        etcd: Option<usize>,
        /// ZooKeeper servers (0, 1, 3, 5 or 7); with only --etcd given, none.
        #[arg(long)]
        zk: Option<usize>,
        /// Raft-vote peers, `elect campaign` processes electing among
        /// themselves (0, 1, 3, 5 or 7) [default: 0].
        #[arg(long)]
        raft: Option<usize>,
        /// Run members as containers (deploy/images) instead of local
        /// processes.
        #[arg(long)]
        containers: bool,
        /// Secure them: a CA made now; etcd with client TLS, client
        /// certificates and auth (root, and a user limited to `secured/`).
        /// Prints the files to pass as --cacert, --cert, --key, --user and
        /// --password-file.
        #[arg(long)]
        secure: bool,
    },
    /// Each member's address and state, and whether it is healthy.
    Status,
    /// Deal a fault to one member (named like etcd-2 or zk-1).
    Fault {
        /// kill (SIGKILL), restart (on its data), pause (SIGSTOP), resume,
        /// cut (off the network; containers), heal.
        #[arg(value_enum)]
        fault: FaultArg,
        /// The member, as `elect lab status` names it.
        member: String,
    },
    /// Stop every member; remove containers, network and directory.
    Down,
}

/// `elect lab fault`'s faults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FaultArg {
    /// SIGKILL, as a crash would.
    Kill,
    /// Start a killed member again on its data.
    Restart,
    /// Freeze it (SIGSTOP or docker pause).
    Pause,
    /// Let a paused member go on.
    Resume,
    /// Take its container off the network.
    Cut,
    /// Put it back.
    Heal,
}

impl From<FaultArg> for elect::lab::Fault {
    fn from(f: FaultArg) -> Self {
        use elect::lab::Fault;
        match f {
            FaultArg::Kill => Fault::Kill,
            FaultArg::Restart => Fault::Restart,
            FaultArg::Pause => Fault::Pause,
            FaultArg::Resume => Fault::Resume,
            FaultArg::Cut => Fault::Cut,
            FaultArg::Heal => Fault::Heal,
        }
    }
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Which backends, comma-separated: etcd, zk, raft.
    #[arg(long, env = "ELECT_COMPARE_BACKENDS", default_value = "etcd,zk,raft")]
    pub backends: String,

    /// Which scenarios, comma-separated: election, handover, failover,
    /// failover-next, freeze, cutoff, member-kill, rolling-restart, service-leader-kill, compaction, churn, scale [default:
    /// all].
    #[arg(long, env = "ELECT_COMPARE_SCENARIOS")]
    pub scenarios: Option<String>,

    /// Trials per scenario [default: depends on the scenario; see README].
    #[arg(long)]
    pub trials: Option<usize>,

    /// A small run for a first look: few trials, scale up to 30.
    #[arg(long)]
    pub quick: bool,

    /// Raft-vote peers: 3 or 5.
    #[arg(long, default_value_t = 3)]
    pub raft_peers: usize,

    /// Candidates per election (scale: one process, through the library;
    /// up to 1000 on etcd and ZooKeeper) [default: 3; scale: 3,30,300,1000].
    #[arg(long)]
    pub candidates: Option<usize>,

    /// Also run the peers' own tools where installed: `etcdctl elect`,
    /// kazoo's Election, Curator's LeaderLatch.
    #[arg(long)]
    pub baselines: bool,

    /// Start the ensembles as containers (deploy/images) instead of local
    /// processes.
    #[arg(long)]
    pub containers: bool,

    /// Secure everything: a secured lab (etcd: TLS, client certificates,
    /// auth; ZooKeeper: its TLS port, digest credentials) and mutual TLS
    /// between Raft-vote peers. Run once with and once without to see what
    /// TLS costs.
    #[arg(long)]
    pub secure: bool,

    /// Use this etcd cluster (host:port,...) instead of starting one.
    #[arg(long, env = "ELECT_ETCD_ENDPOINTS")]
    pub etcd_endpoints: Option<String>,

    /// Use this ZooKeeper ensemble (host:port,...) instead of starting one.
    #[arg(long, env = "ELECT_ZK_ENDPOINTS")]
    pub zk_endpoints: Option<String>,

    /// Write charts (SVG) and a page (report.md) with the table, the
    /// command and the versions into this directory.
    #[arg(long, value_name = "DIR")]
    pub report: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Time between SIGTERM and SIGKILL when leadership is lost or elect is
    /// stopped (at most 24h); never extends past the leadership deadline.
    #[arg(long, env = "ELECT_GRACE", default_value = "5s")]
    pub grace: String,

    /// Whether the command is started again when it exits while this
    /// process leads (with backoff from 100 ms to 10 s).
    #[arg(long, env = "ELECT_RESTART", value_enum, default_value = "never")]
    pub restart: RestartArg,

    /// Exit (code 1) once leadership is lost and the command is dead,
    /// instead of campaigning again.
    #[arg(long, env = "ELECT_EXIT_ON_LOSS")]
    pub exit_on_loss: bool,

    /// How the command's whole tree is held, daemons included: pidns (a
    /// PID namespace whose init is ours: everything dies with it), cgroup
    /// (a cgroup v2 of its own), subreaper (the watchdog kills every
    /// descendant); auto takes the strongest that works here and says why
    /// it passed the others over. One that does not work here is exit 2.
    #[arg(long, env = "ELECT_CONTAIN", value_enum, default_value = "auto")]
    pub contain: ContainArg,

    /// The command and its arguments (any bytes, passed as they are).
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

/// A validated invocation.
#[derive(Debug)]
pub enum Command {
    Campaign(ElectionConfig, OutputConfig),
    Observe(ElectionConfig, OutputConfig),
    Leader(ElectionConfig, Format),
    Run(ElectionConfig, OutputConfig, ChildConfig),
    Demo,
    Lab(crate::lab_cli::Request),
    Compare(crate::compare::Plan),
    Simulate(crate::simulate_cli::Request),
}

/// A validated invocation and what the user should be told about it.
#[derive(Debug)]
pub struct Validated {
    pub command: Command,
    /// Said on stderr before anything starts.
    pub warnings: Vec<String>,
}

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

/// Parses the process's arguments (clap prints help, version and its own
/// errors and exits), then validates them.
pub fn parse() -> Result<Validated> {
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    cli.validate(&matches)
}

/// Where a flag's value came from, wherever clap put it (global flags may
/// sit in the subcommand's matches).
fn source(matches: &ArgMatches, id: &str) -> Option<ValueSource> {
    matches
        .value_source(id)
        .filter(|s| *s != ValueSource::DefaultValue)
        .or_else(|| {
            let (_, sub) = matches.subcommand()?;
            sub.value_source(id)
                .filter(|s| *s != ValueSource::DefaultValue)
        })
}

impl Cli {
    /// Checks every value; the first bad one is reported with its flag.
    /// `matches` tells which flags were typed and which came from the
    /// environment.
    pub fn validate(self, matches: &ArgMatches) -> Result<Validated> {
        let mut warnings = Vec::new();
        let format = self.common.format;
        let standalone = match &self.command {
            // The demo picks its own cluster; it takes no election flags.
            CliCommand::Demo => Some(Command::Demo),
            CliCommand::Lab(lab) => {
                self.refuse_election_flags(matches, "lab", &mut warnings)?;
                Some(Command::Lab(crate::lab_cli::Request::validate(
                    lab, format,
                )?))
            }
            CliCommand::Simulate(args) => {
                self.refuse_election_flags(matches, "simulate", &mut warnings)?;
                Some(Command::Simulate(crate::simulate_cli::Request::validate(
                    args, format,
                )?))
            }
            CliCommand::Compare(compare) => {
                self.refuse_election_flags(matches, "compare", &mut warnings)?;
                let ttl = match source(matches, "ttl") {
                    Some(ValueSource::CommandLine) => self.common.ttl.as_deref(),
                    _ => None,
                };
                Some(Command::Compare(crate::compare::Plan::validate(
                    compare,
                    ttl,
                    format,
                    &mut warnings,
                )?))
            }
            _ => None,
        };
        if let Some(command) = standalone {
            return Ok(Validated { command, warnings });
        }
        if format == FormatArg::Env {
            return Err(UsageError::new(
                "--format",
                "env is for `elect lab up` and `elect lab status`; use text or json",
            ));
        }
        self.refuse_unused(matches, &mut warnings)?;
        let campaigns = matches!(self.command, CliCommand::Campaign | CliCommand::Run(_));
        let election = self.common.election_config(campaigns)?;
        if election.backend() == BackendKind::Raft && campaigns {
            let n = election.peer_ids().count();
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
        let output = OutputConfig {
            format: self.common.format.into(),
            leader_file: self.common.leader_file,
            http: self.common.http.as_deref().map(http_addr).transpose()?,
        };
        let command = match self.command {
            CliCommand::Campaign => Command::Campaign(election, output),
            CliCommand::Observe => Command::Observe(election, output),
            CliCommand::Leader => Command::Leader(election, output.format),
            CliCommand::Demo
            | CliCommand::Lab(_)
            | CliCommand::Compare(_)
            | CliCommand::Simulate(_) => unreachable!("handled above"),
            CliCommand::Run(run) => {
                let grace = parse_duration("--grace", &run.grace)?;
                let child = ChildConfig::new(run.command)
                    .map_err(|_| UsageError::new("CMD", "the command to run is empty"))?
                    .with_grace(grace)?
                    .with_restart(run.restart.into())
                    .with_exit_on_loss(run.exit_on_loss)
                    .with_containment(run.contain.into());
                Command::Run(election, output, child)
            }
        };
        Ok(Validated { command, warnings })
    }

    /// Flags that would do nothing here: refused when typed (exit 2), a
    /// warning when they come from the environment, which other commands
    /// may share.
    fn refuse_unused(&self, matches: &ArgMatches, warnings: &mut Vec<String>) -> Result<()> {
        let (subcommand, campaigns) = match self.command {
            CliCommand::Campaign => ("campaign", true),
            CliCommand::Observe => ("observe", false),
            CliCommand::Leader => ("leader", false),
            CliCommand::Run(_) => ("run", true),
            CliCommand::Demo
            | CliCommand::Lab(_)
            | CliCommand::Compare(_)
            | CliCommand::Simulate(_) => unreachable!("validated apart"),
        };
        let backend = BackendKind::from(self.common.backend).name();
        let mut unused: Vec<(&str, &str, String)> = Vec::new();
        if self.common.backend != BackendArg::Raft {
            unused.push((
                "data_dir",
                "--data-dir",
                format!("only the raft backend keeps state; {backend} keeps none"),
            ));
        } else if !campaigns {
            unused.push((
                "data_dir",
                "--data-dir",
                format!("`{subcommand}` does not vote, so it keeps no state"),
            ));
        }
        if subcommand == "leader" {
            for (id, flag) in [("http", "--http"), ("leader_file", "--leader-file")] {
                unused.push((
                    id,
                    flag,
                    "`leader` prints once and exits; use `observe` to export".into(),
                ));
            }
        }
        if !campaigns {
            unused.push((
                "id",
                "--id",
                format!("`{subcommand}` does not campaign, so it publishes no id"),
            ));
        }
        for (id, flag, why) in unused {
            refuse_unused_flag(matches, id, flag, &why, warnings)?;
        }
        Ok(())
    }
}

impl Cli {
    /// `lab` and `compare` choose their own elections: the election flags
    /// would do nothing (compare reads `--ttl` itself, in its own syntax).
    fn refuse_election_flags(
        &self,
        matches: &ArgMatches,
        subcommand: &str,
        warnings: &mut Vec<String>,
    ) -> Result<()> {
        let flags = [
            ("backend", "--backend"),
            ("endpoints", "--endpoints"),
            ("election", "--election"),
            ("id", "--id"),
            ("ttl", "--ttl"),
            ("connect_timeout", "--connect-timeout"),
            ("data_dir", "--data-dir"),
            ("leader_file", "--leader-file"),
            ("http", "--http"),
            ("cacert", "--cacert"),
            ("cert", "--cert"),
            ("key", "--key"),
            ("server_name", "--server-name"),
            ("user", "--user"),
            ("password_file", "--password-file"),
        ];
        for (id, flag) in flags {
            if subcommand == "compare" && id == "ttl" {
                if source(matches, id) == Some(ValueSource::EnvVariable) {
                    warnings.push(
                        "--ttl (from ELECT_TTL) is ignored: compare takes --ttl only as typed, \
                         e.g. --ttl etcd=2s,zk=2s,raft=150ms"
                            .into(),
                    );
                }
                continue;
            }
            let why = match subcommand {
                "lab" => "`lab` starts ensembles; it takes part in no election",
                "simulate" => "`simulate` runs simulated processes, not a backend",
                _ => "`compare` runs its own elections (see --backends, --ttl, --etcd-endpoints)",
            };
            refuse_unused_flag(matches, id, flag, why, warnings)?;
        }
        Ok(())
    }
}

/// A flag that would do nothing: refused when typed (exit 2), a warning
/// when it comes from its environment variable, which other commands may
/// share.
fn refuse_unused_flag(
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

impl CommonArgs {
    fn election_config(&self, campaigns: bool) -> Result<ElectionConfig> {
        let backend = BackendKind::from(self.backend);
        let election = self
            .election
            .as_deref()
            .ok_or_else(|| UsageError::new("--election", "is required (or set ELECT_ELECTION)"))?;
        let endpoints = self
            .endpoints
            .as_deref()
            .unwrap_or(backend.default_endpoints());
        let mut cfg = match backend {
            BackendKind::Zk => ElectionConfig::zk(endpoints, election)?,
            BackendKind::Raft => {
                // An empty list is no peers (the library says so), not one
                // empty entry.
                let peers = endpoints
                    .split(',')
                    .filter(|_| !endpoints.trim().is_empty())
                    .map(|entry| entry.split_once('=').unwrap_or(("", entry)));
                ElectionConfig::raft(peers, election)?
            }
            _ => ElectionConfig::etcd(endpoints.split(','), election)?,
        };
        if let Some(ttl) = &self.ttl {
            cfg = cfg.with_ttl(parse_duration("--ttl", ttl)?)?;
        }
        cfg =
            cfg.with_connect_timeout(parse_duration("--connect-timeout", &self.connect_timeout)?)?;
        match (&self.id, backend) {
            (Some(id), _) => cfg = cfg.with_id(id)?,
            (None, BackendKind::Raft) if campaigns => {
                let ids: Vec<&str> = cfg.peer_ids().collect();
                return Err(UsageError::new(
                    "--id",
                    format!("is required with --backend raft: one of {}", ids.join(", ")),
                ));
            }
            (None, _) => {}
        }
        if let (Some(dir), BackendKind::Raft) = (&self.data_dir, backend) {
            cfg = cfg.with_data_dir(dir)?;
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

/// Checks `--http`: an IP address and a port.
fn http_addr(text: &str) -> Result<std::net::SocketAddr> {
    text.trim().parse().map_err(|_| {
        UsageError::new(
            "--http",
            format!("{text:?} is not IP:PORT (e.g. 0.0.0.0:4040 or [::1]:4040)"),
        )
    })
}

impl From<BackendArg> for BackendKind {
    fn from(b: BackendArg) -> Self {
        match b {
            BackendArg::Etcd => BackendKind::Etcd,
            BackendArg::Zk => BackendKind::Zk,
            BackendArg::Raft => BackendKind::Raft,
        }
    }
}

impl From<FormatArg> for Format {
    fn from(f: FormatArg) -> Self {
        match f {
            FormatArg::Text => Format::Text,
            FormatArg::Json => Format::Json,
            // Refused for everything but `lab`, which prints on its own.
            FormatArg::Env => Format::Text,
        }
    }
}

impl From<RestartArg> for Restart {
    fn from(r: RestartArg) -> Self {
        match r {
            RestartArg::Never => Restart::Never,
            RestartArg::OnFailure => Restart::OnFailure,
            RestartArg::Always => Restart::Always,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Validated> {
        let matches = Cli::command()
            .try_get_matches_from(std::iter::once("elect").chain(args.iter().copied()))
            .expect("clap accepts");
        Cli::from_arg_matches(&matches).unwrap().validate(&matches)
    }

    #[test]
    fn flags_may_follow_the_subcommand() {
        let cmd = parse(&["campaign", "--election", "e", "--ttl", "3", "--id", "a"]).unwrap();
        let Command::Campaign(cfg, _) = cmd.command else {
            panic!("not campaign")
        };
        assert_eq!(cfg.ttl(), Duration::from_secs(3));
        assert_eq!(cfg.id(), "a");
        assert_eq!(cfg.endpoints(), vec!["http://127.0.0.1:2379"]);
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
        let Command::Run(_, _, child) = cmd.command else {
            panic!("not run")
        };
        assert_eq!(child.command(), ["sh", "-c", "x"]);
        assert_eq!(child.grace(), Duration::from_secs(1));
    }

    #[test]
    fn missing_election_names_the_flag() {
        let err = parse(&["leader"]).unwrap_err();
        assert_eq!(err.flag, "--election");
    }

    #[test]
    fn library_fields_are_reported_as_flags() {
        let err = parse(&["leader", "--election", "e", "--connect-timeout", "1ms"]).unwrap_err();
        assert_eq!(err.flag, "--connect-timeout");
        let err = parse(&["leader", "--election", "e", "--ttl", "99999999999999"]).unwrap_err();
        assert_eq!(err.flag, "--ttl");
        let err = parse(&["--election", "e", "run", "--grace", "9999999h", "--", "x"]).unwrap_err();
        assert_eq!(err.flag, "--grace");
    }

    #[test]
    fn typed_flags_that_do_nothing_are_refused() {
        let err = parse(&["campaign", "--election", "e", "--data-dir", "/tmp"]).unwrap_err();
        assert_eq!(err.flag, "--data-dir");
        let err = parse(&["leader", "--election", "e", "--http", "127.0.0.1:1"]).unwrap_err();
        assert_eq!(err.flag, "--http");
        let err = parse(&["observe", "--election", "e", "--id", "a"]).unwrap_err();
        assert_eq!(err.flag, "--id");
    }

    #[test]
    fn even_raft_clusters_are_accepted_with_a_warning() {
        let args = [
            "--backend",
            "raft",
            "--endpoints",
            "a=127.0.0.1:1,b=127.0.0.1:2",
            "--election",
            "c",
            "--id",
            "a",
            "campaign",
        ];
        let v = parse(&args).unwrap();
        assert_eq!(v.warnings.len(), 1, "{:?}", v.warnings);
        assert!(
            v.warnings[0].contains("tolerates 0 down"),
            "{:?}",
            v.warnings
        );
    }
}
