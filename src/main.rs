//! The `elect` binary: parses and validates the command line, wires a
//! backend to the exporters and the supervisor, and maps outcomes to the
//! exit codes of the contract (0 ok, 1 runtime failure, 2 bad usage, 3 no
//! leader, or the wrapped command's code).

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::Context as _;
use elect::backend;
use elect::config::ElectionConfig;
use elect::export::{self, Exports, Format, OutputConfig, lines};
use elect::supervise::{self, ChildConfig, ChildEnv, Finish};
use nix::sys::signal::Signal;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::{mpsc, watch};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::prelude::*;

mod cli;
mod compare;
mod demo;
mod lab_cli;
mod simulate_cli;

use cli::Command;

const NO_LEADER: u8 = 3;
const USAGE: u8 = 2;

fn main() -> ExitCode {
    if let Some(code) = supervise::dispatch_hidden() {
        return ExitCode::from(code.clamp(0, 255) as u8);
    }
    let validated = cli::parse();
    // `lab` and `compare` run the library in-process for many candidates:
    // their own progress is what the user reads, not each candidate's.
    let quiet = matches!(
        validated,
        Ok(cli::Validated {
            command: Command::Lab(_) | Command::Compare(_) | Command::Simulate(_),
            ..
        })
    );
    let default_filter = if quiet { "warn" } else { "warn,elect=info" };
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter));
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(std::io::stderr().is_terminal())
                .with_filter(filter),
        )
        // Unfiltered: RUST_LOG must not change what the metrics count.
        .with(export::metrics::BackendErrors)
        .with(compare::scale::WakeupCounter)
        .init();
    let command = match validated {
        Ok(v) => {
            for warning in &v.warnings {
                eprintln!("elect: warning: {warning}");
            }
            v.command
        }
        Err(e) => {
            eprintln!("elect: {e}");
            return ExitCode::from(USAGE);
        }
    };
    // Threads and processes of their own: no async runtime around them.
    let command = match command {
        Command::Lab(request) => return exit_with("elect lab", lab_cli::run(request)),
        Command::Compare(plan) => return exit_with("elect compare", compare::run(plan)),
        Command::Simulate(request) => {
            return exit_with("elect simulate", simulate_cli::run(request));
        }
        other => other,
    };
    if let Command::Demo = command {
        // Plain processes and threads: the demo needs no async runtime.
        return match demo::run() {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("elect demo: {e:#}");
                ExitCode::FAILURE
            }
        };
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    // The command runs as a task on the workers, not on this thread: the
    // way from a signal to the campaign it ends (signal task, command,
    // driver) then stays on the workers, where a task wakes a task in
    // microseconds; a thread parked in `block_on` must be woken by the
    // kernel, which took a tenth of a millisecond of a handover.
    let outcome = runtime.block_on(async {
        match tokio::spawn(execute(command)).await {
            Ok(outcome) => outcome,
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    });
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("elect: {e:#}");
            let code = e
                .downcast_ref::<elect::Error>()
                .map_or(1, elect::Error::exit_code);
            ExitCode::from(code as u8)
        }
    }
}

fn exit_with(what: &str, outcome: anyhow::Result<u8>) -> ExitCode {
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("{what}: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn execute(command: Command) -> anyhow::Result<u8> {
    match command {
        Command::Leader(cfg, format) => leader(cfg, format).await,
        Command::Observe(cfg, output) => observe(cfg, output).await,
        Command::Campaign(cfg, output) => campaign(cfg, output).await,
        Command::Run(cfg, output, child) => run(cfg, output, child).await,
        Command::Demo | Command::Lab(_) | Command::Compare(_) | Command::Simulate(_) => {
            unreachable!("runs without the runtime")
        }
    }
}

fn context(cfg: &ElectionConfig) -> export::Context {
    export::Context {
        backend: cfg.backend().name(),
        election: cfg.election().to_owned(),
        containment: None,
    }
}

async fn leader(cfg: ElectionConfig, format: Format) -> anyhow::Result<u8> {
    let snapshot = backend::leader(&cfg).await?;
    let event = snapshot.event_since(&elect::Leadership::unknown());
    match format {
        Format::Text => {
            if let Some(id) = &snapshot.leader {
                println!("{id}");
            }
        }
        Format::Json => println!(
            "{}",
            lines::render(
                format,
                &context(&cfg),
                &snapshot,
                event,
                std::time::SystemTime::now()
            )
        ),
    }
    Ok(if snapshot.leader.is_some() {
        0
    } else {
        NO_LEADER
    })
}

async fn observe(cfg: ElectionConfig, output: OutputConfig) -> anyhow::Result<u8> {
    let mut shutdown = shutdown_signals()?;
    let exports = Exports::prepare(context(&cfg), output).await?;
    let observation = backend::observe(&cfg).await?;
    let running = exports.start(observation.leadership());
    shutdown.recv().await;
    drop(observation);
    running.abort();
    Ok(0)
}

/// Resigns, timing the handover when we were leading.
async fn resign(campaign: backend::Campaign, metrics: &export::Metrics) -> anyhow::Result<()> {
    let leading = campaign.leadership().borrow().is_self;
    let started = std::time::Instant::now();
    campaign.resign().await?;
    if leading {
        metrics.record_handover(started.elapsed());
    }
    Ok(())
}

async fn campaign(cfg: ElectionConfig, output: OutputConfig) -> anyhow::Result<u8> {
    let mut shutdown = shutdown_signals()?;
    let exports = Exports::prepare(context(&cfg), output).await?;
    // No work runs under our leadership, so nothing ever keeps us busy.
    let (_idle, busy) = watch::channel(false);
    let campaign = backend::campaign(&cfg, busy).await?;
    let running = exports.start(campaign.leadership());
    let mut leadership = campaign.leadership();
    tokio::select! {
        sig = shutdown.recv() => tracing::info!("{:?}: resigning", sig),
        // The campaign task publishes until it ends; ending by itself is a failure.
        _ = async { while leadership.changed().await.is_ok() {} } => {}
    }
    resign(campaign, running.metrics()).await?;
    running.finish().await.context("exporter")?;
    Ok(0)
}

async fn run(cfg: ElectionConfig, output: OutputConfig, child: ChildConfig) -> anyhow::Result<u8> {
    // The shutdown signals stop the command, then us; these are only
    // passed on to the command.
    let forwarded = [
        (SignalKind::user_defined1(), Signal::SIGUSR1),
        (SignalKind::user_defined2(), Signal::SIGUSR2),
    ];
    let mut shutdown = signals(&[SHUTDOWN_SIGNALS.as_slice(), &forwarded].concat())?;
    let env = ChildEnv {
        election: cfg.election().to_owned(),
        backend: cfg.backend().name(),
        watchdog: std::env::current_exe().context("finding elect's own executable")?,
    };
    // Before anything else: a containment that does not work here is bad
    // usage (exit 2), and nothing has been campaigned for yet.
    let resolved = child.containment().resolve(&env.watchdog)?;
    tracing::info!("{}", resolved.describe());
    let child = child.with_containment(resolved.level.into());
    let exports = Exports::prepare(
        export::Context {
            containment: Some(resolved.level.name()),
            ..context(&cfg)
        },
        output,
    )
    .await?;
    let (busy_tx, busy) = watch::channel(false);
    let campaign = backend::campaign(&cfg, busy).await?;
    let running = exports.start(campaign.leadership());
    let finish = supervise::run(&child, &env, campaign.leadership(), &busy_tx, &mut shutdown).await;
    // The command's group is gone by now on every path; resigning is safe.
    resign(campaign, running.metrics()).await?;
    running.finish().await.context("exporter")?;
    match finish? {
        Finish::Exited(code) => Ok(code.clamp(0, 255) as u8),
        Finish::Signalled(_) => Ok(0),
        Finish::BackendGone => anyhow::bail!("the {} backend stopped", cfg.backend().name()),
        Finish::Lost => anyhow::bail!("leadership lost; the command is dead (--exit-on-loss)"),
        Finish::WatchdogKilled(sig) => anyhow::bail!(
            "the watchdog was killed by signal {sig}; the command's group was killed, and we resigned"
        ),
    }
}

/// What ends `campaign`, `observe` and `run` cleanly (resigning): a
/// terminal's Ctrl-C, Ctrl-\\ and Ctrl-Z, a hang-up, and SIGTERM. Ctrl-Z
/// does not suspend: a suspended leader would keep a leadership it cannot
/// use, so elect resigns instead (see `supervise::is_shutdown`).
const SHUTDOWN_SIGNALS: [(SignalKind, Signal); 5] = [
    (SignalKind::interrupt(), Signal::SIGINT),
    (SignalKind::terminate(), Signal::SIGTERM),
    (SignalKind::quit(), Signal::SIGQUIT),
    (SignalKind::hangup(), Signal::SIGHUP),
    (SignalKind::from_raw(libc::SIGTSTP), Signal::SIGTSTP),
];

/// The shutdown signals, as one stream.
fn shutdown_signals() -> anyhow::Result<mpsc::UnboundedReceiver<Signal>> {
    signals(&SHUTDOWN_SIGNALS)
}

/// `wanted` signals, as one stream.
fn signals(wanted: &[(SignalKind, Signal)]) -> anyhow::Result<mpsc::UnboundedReceiver<Signal>> {
    let (tx, rx) = mpsc::unbounded_channel();
    for &(kind, sig) in wanted {
        let mut stream = signal(kind).context("installing signal handlers")?;
        let tx = tx.clone();
        tokio::spawn(async move {
            while stream.recv().await.is_some() {
                if tx.send(sig).is_err() {
                    return;
                }
            }
        });
    }
    Ok(rx)
}
