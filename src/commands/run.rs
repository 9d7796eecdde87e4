//! `elect run -- CMD`: run CMD only while this process leads; kill its
//! whole tree when leadership may be lost.

use std::ffi::OsString;
use std::time::Duration;

use anyhow::Context as _;
use clap::{ArgMatches, Args, ValueEnum};
use elect::Backend;
use elect::backend;
use elect::config::ElectionConfig;
use elect::export::{self, Exports, OutputConfig};
use elect::once::PeriodicJob;
use elect::periodic::{Period, Turn};
use elect::supervise::{self, ChildConfig, ChildEnv, Containment, Finish, Restart};
use nix::sys::signal::Signal;
use tokio::signal::unix::SignalKind;
use tracing::{info, warn};

use crate::args::{CandidateArgs, ElectionArgs, ExportArgs, FormatArgs};
use crate::runtime::{SHUTDOWN_SIGNALS, context, on_workers, resign, signals, unless_stopped};
use crate::usage::{Result, UsageError, parse_duration};

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    election: ElectionArgs,
    #[command(flatten)]
    candidate: CandidateArgs,
    #[command(flatten)]
    export: ExportArgs,
    #[command(flatten)]
    format: FormatArgs,

    /// Time between SIGTERM and SIGKILL when leadership is lost or elect is
    /// stopped (at most 24h); never extends past the leadership deadline.
    #[arg(
        long,
        env = "ELECT_GRACE",
        default_value = "5s",
        allow_hyphen_values = true
    )]
    grace: String,

    /// Whether the command is started again when it exits while this
    /// process leads (with backoff from 100 ms to 10 s).
    #[arg(long, env = "ELECT_RESTART", value_enum, default_value = "never")]
    restart: RestartArg,

    /// Exit (code 1) once leadership is lost and the command is dead,
    /// instead of campaigning again.
    #[arg(long, env = "ELECT_EXIT_ON_LOSS")]
    exit_on_loss: bool,

    /// How the command's whole tree is held, daemons included: pidns (a
    /// PID namespace whose init is ours: everything dies with it), cgroup
    /// (a cgroup v2 of its own), subreaper (the watchdog kills every
    /// descendant); auto takes the strongest that works here and says why
    /// it passed the others over. One that does not work here is exit 2.
    #[arg(long, env = "ELECT_CONTAIN", value_enum, default_value = "auto")]
    contain: ContainArg,

    /// Run the command once per PERIOD (e.g. 1h, 1d) across every host
    /// started for that period: the first leader runs it and, once it
    /// exits 0, records the period as done; later candidates of the same
    /// period see the record and exit 0 without running it. A failed run,
    /// or one whose leader dies, is run again by the next candidate within
    /// the period. Periods start at multiples of PERIOD since the Unix
    /// epoch (UTC). etcd and ZooKeeper only; implies --exit-on-loss.
    #[arg(
        long,
        env = "ELECT_ONCE",
        value_name = "PERIOD",
        allow_hyphen_values = true
    )]
    once: Option<String>,

    /// The command and its arguments (any bytes, passed as they are). The
    /// command must resolve before the campaign starts: a path to an
    /// executable file, or a name found on PATH.
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<OsString>,
}

/// `run --contain`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ContainArg {
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
enum RestartArg {
    /// Exit with the command's code (and resign).
    Never,
    /// Start it again, with backoff, after a non-zero exit or a signal.
    OnFailure,
    /// Start it again, with backoff, whatever its code.
    Always,
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

/// A validated `elect run`.
#[derive(Debug)]
pub struct Request {
    pub election: ElectionConfig,
    pub output: OutputConfig,
    pub child: ChildConfig,
    /// `--once`: the length of a period.
    pub once: Option<Duration>,
}

impl RunArgs {
    pub fn validate(self, matches: &ArgMatches, warnings: &mut Vec<String>) -> Result<Request> {
        let election = self
            .election
            .candidate_config(&self.candidate, matches, warnings)?;
        let output = self.export.output(self.format.format)?;
        let grace = parse_duration("--grace", &self.grace)?;
        let once = self
            .once
            .map(|text| once_period(&text, &election, self.restart))
            .transpose()?;
        let program = self.command.first().cloned();
        let child = ChildConfig::new(self.command)
            .map_err(|_| UsageError::new("CMD", "the command to run is empty"))?
            .with_grace(grace)?
            .with_restart(self.restart.into())
            .with_exit_on_loss(self.exit_on_loss || once.is_some())
            .with_containment(self.contain.into());
        if let Some(program) = program {
            resolve_program(&program)?;
        }
        Ok(Request {
            election,
            output,
            child,
            once,
        })
    }
}

/// Checks, before campaigning, that CMD names a program that can be
/// started: a path to an executable file, or a name found on PATH as
/// `execvp` would find it. A typo is then exit 2 at once, not a failure
/// found only after winning an election.
fn resolve_program(program: &std::ffi::OsStr) -> Result<()> {
    use nix::unistd::{AccessFlags, access};
    let runnable = |path: &std::path::Path| {
        path.metadata().is_ok_and(|m| m.is_file()) && access(path, AccessFlags::X_OK).is_ok()
    };
    let shown = program.to_string_lossy();
    if program.as_encoded_bytes().contains(&b'/') {
        let path = std::path::Path::new(program);
        return match path.metadata() {
            Err(e) => Err(UsageError::new("CMD", format!("{shown}: {e}"))),
            Ok(m) if !m.is_file() => Err(UsageError::new("CMD", format!("{shown} is not a file"))),
            Ok(_) if !runnable(path) => {
                Err(UsageError::new("CMD", format!("{shown} is not executable")))
            }
            Ok(_) => Ok(()),
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    if std::env::split_paths(&path).any(|dir| runnable(&dir.join(program))) {
        return Ok(());
    }
    Err(UsageError::new(
        "CMD",
        format!("{shown:?} is not an executable found on PATH"),
    ))
}

/// `--once`'s period, checked against what else was asked.
fn once_period(text: &str, election: &ElectionConfig, restart: RestartArg) -> Result<Duration> {
    let length = parse_duration("--once", text)?;
    Period::check_length(length).map_err(UsageError::from)?;
    if election.backend() == Backend::Raft {
        return Err(UsageError::new(
            "--once",
            "the raft backend has no shared store for a completion record; use etcd or \
             ZooKeeper, or a long-lived `elect run` whose command schedules the job",
        ));
    }
    if restart == RestartArg::Always {
        return Err(UsageError::new(
            "--once",
            "a command restarted whatever its code never completes; use --restart on-failure \
             or never",
        ));
    }
    Ok(length)
}

pub fn run(request: Request) -> anyhow::Result<u8> {
    on_workers(run_while_leading(request))
}

async fn run_while_leading(
    Request {
        election,
        output,
        child,
        once,
    }: Request,
) -> anyhow::Result<u8> {
    // The shutdown signals stop the command, then us; these are only
    // passed on to the command.
    let forwarded = [
        (SignalKind::user_defined1(), Signal::SIGUSR1),
        (SignalKind::user_defined2(), Signal::SIGUSR2),
    ];
    let mut shutdown = signals(&[SHUTDOWN_SIGNALS.as_slice(), &forwarded].concat())?;
    let mut env = ChildEnv {
        election: election.election().to_owned(),
        backend: election.backend().name(),
        period_start: None,
        watchdog: std::env::current_exe().context("finding elect's own executable")?,
    };
    // Before anything else: a containment that does not work here is bad
    // usage (exit 2), and nothing has been campaigned for yet. Resolved
    // once: supervise::run takes the level as it is.
    let resolved = supervise::resolve(&child, &env).await?;
    info!("{}", resolved.describe());
    if !supervise::real_time_allowed() {
        warn!(
            "no CAP_SYS_NICE: the watchdog cannot take a real-time priority, and on a busy \
             machine its kill at the deadline may come late (grant CAP_SYS_NICE, or \
             LimitRTPRIO=1 in a systemd unit)"
        );
    }
    let child = child.with_resolved(&resolved);
    let exports = Exports::prepare(
        export::Context {
            containment: Some(resolved.level.name()),
            ..context(&election)
        },
        output,
    )
    .await?;
    let job = match once {
        Some(length) => {
            let Ok(opened) =
                unless_stopped(&mut shutdown, PeriodicJob::open(&election, length)).await
            else {
                return Ok(0);
            };
            let Some(job) = opened? else {
                return Ok(0);
            };
            env.period_start = job.start_secs();
            Some(job)
        }
        None => None,
    };
    let (work, work_watch) = elect::work::channel();
    let Ok(campaign) =
        unless_stopped(&mut shutdown, backend::campaign(&election, work_watch)).await
    else {
        return Ok(0);
    };
    let campaign = campaign?;
    let running = exports.start_with_health(campaign.leadership(), campaign.health());
    if let Some(job) = &job
        && job.turn(&campaign.leadership(), &mut shutdown).await? != Some(Turn::Run)
    {
        resign(campaign, running.metrics()).await?;
        running.finish().await.context("exporter")?;
        return Ok(0);
    }
    let finish = supervise::run(&child, &env, campaign.leadership(), &work, &mut shutdown).await;
    if let (Some(job), Ok(finish)) = (&job, &finish) {
        job.complete(finish).await;
    }
    // The command's group is gone on every path; resigning is safe.
    resign(campaign, running.metrics()).await?;
    running.finish().await.context("exporter")?;
    match finish? {
        Finish::Exited(code) => Ok(code.clamp(0, 255) as u8),
        Finish::Signalled(_) => Ok(0),
        Finish::BackendGone => anyhow::bail!("the {} backend stopped", election.backend()),
        Finish::Lost => anyhow::bail!("leadership lost; the command is dead (--exit-on-loss)"),
        Finish::WatchdogKilled(sig) => anyhow::bail!(
            "the watchdog was killed by signal {sig}; the command's group was killed, and we resigned"
        ),
    }
}
