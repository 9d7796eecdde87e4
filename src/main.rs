//! The `elect` binary: parses and validates the command line, wires a
//! backend to the exporters and the supervisor, and maps outcomes to the
//! exit codes of the contract (0 ok, 1 runtime failure, 2 bad usage, 3 no
//! leader, or the wrapped command's code).

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use clap::Parser;
use elect::backend;
use elect::cli::{Cli, Command};
use elect::config::{ElectionConfig, Format, OutputConfig};
use elect::export::{self, Exported, Metrics, lines};
use elect::supervise::{self, ChildEnv, Finish};
use nix::sys::signal::Signal;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::{mpsc, watch};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::prelude::*;

mod demo;

const NO_LEADER: u8 = 3;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(supervise::watchdog::SUBCOMMAND) {
        let code = supervise::watchdog::main(&args[2..]);
        return ExitCode::from(code.clamp(0, 255) as u8);
    }
    let cli = Cli::parse();
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn,elect=info"));
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(std::io::stderr().is_terminal())
                .with_filter(filter),
        )
        // Unfiltered: RUST_LOG must not change what the metrics count.
        .with(export::metrics::BackendErrors)
        .init();
    let command = match cli.validate() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("elect: {e}");
            return ExitCode::from(e.exit_code() as u8);
        }
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
    match runtime.block_on(execute(command)) {
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

async fn execute(command: Command) -> anyhow::Result<u8> {
    match command {
        Command::Leader(cfg, format) => leader(cfg, format).await,
        Command::Observe(cfg, output) => observe(cfg, output).await,
        Command::Campaign(cfg, output) => campaign(cfg, output).await,
        Command::Run(cfg, output, child) => run(cfg, output, child).await,
        Command::Demo => unreachable!("runs without the runtime"),
    }
}

fn context(cfg: &ElectionConfig) -> export::Context {
    export::Context {
        backend: cfg.backend.name(),
        election: cfg.election.clone(),
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

/// The exporters of one command: lines, leader file, metrics and, with
/// `--http`, the HTTP server (bound before the backend is contacted, so a
/// taken port fails the command before it campaigns).
struct Exports {
    metrics: Arc<Metrics>,
    listener: Option<tokio::net::TcpListener>,
    ctx: export::Context,
    output: OutputConfig,
}

/// The running exporters; [`Running::finish`] waits for the last line.
struct Running {
    exporter: tokio::task::JoinHandle<()>,
    server: Option<tokio::task::JoinHandle<()>>,
    metrics: Arc<Metrics>,
}

impl Exports {
    async fn prepare(cfg: &ElectionConfig, output: OutputConfig) -> anyhow::Result<Exports> {
        let listener = match output.http {
            Some(addr) => Some(export::http::bind(addr).await?),
            None => None,
        };
        Ok(Exports {
            metrics: Arc::new(Metrics::new()),
            listener,
            ctx: context(cfg),
            output,
        })
    }

    fn start(self, leadership: watch::Receiver<elect::Leadership>) -> Running {
        let (state, exported) = Exported::channel();
        let server = self.listener.map(|listener| {
            tokio::spawn(export::http::serve(
                listener,
                exported,
                self.metrics.clone(),
                self.ctx.clone(),
            ))
        });
        let exporter = tokio::spawn(export::run(
            leadership,
            self.ctx,
            self.output,
            self.metrics.clone(),
            state,
        ));
        Running {
            exporter,
            server,
            metrics: self.metrics,
        }
    }
}

impl Running {
    /// Waits for the exporter to write what the backend last said, then
    /// stops serving.
    async fn finish(self) -> anyhow::Result<()> {
        let result = self.exporter.await.context("exporter");
        if let Some(server) = self.server {
            server.abort();
        }
        result
    }

    /// Stops at once.
    fn abort(self) {
        self.exporter.abort();
        if let Some(server) = self.server {
            server.abort();
        }
    }
}

async fn observe(cfg: ElectionConfig, output: OutputConfig) -> anyhow::Result<u8> {
    let mut shutdown = shutdown_signals()?;
    let exports = Exports::prepare(&cfg, output).await?;
    let observation = backend::observe(&cfg).await?;
    let running = exports.start(observation.leadership());
    shutdown.recv().await;
    drop(observation);
    running.abort();
    Ok(0)
}

/// Resigns, timing the handover when we were leading.
async fn resign(campaign: backend::Campaign, metrics: &Metrics) -> anyhow::Result<()> {
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
    let exports = Exports::prepare(&cfg, output).await?;
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
    resign(campaign, &running.metrics).await?;
    running.finish().await?;
    Ok(0)
}

async fn run(
    cfg: ElectionConfig,
    output: OutputConfig,
    child: elect::config::ChildConfig,
) -> anyhow::Result<u8> {
    // SIGINT and SIGTERM stop us; these are only passed on to the command.
    let forwarded = [
        (SignalKind::hangup(), Signal::SIGHUP),
        (SignalKind::quit(), Signal::SIGQUIT),
        (SignalKind::user_defined1(), Signal::SIGUSR1),
        (SignalKind::user_defined2(), Signal::SIGUSR2),
    ];
    let mut shutdown = signals(&[SHUTDOWN_SIGNALS.as_slice(), &forwarded].concat())?;
    let exports = Exports::prepare(&cfg, output).await?;
    let (busy_tx, busy) = watch::channel(false);
    let campaign = backend::campaign(&cfg, busy).await?;
    let running = exports.start(campaign.leadership());
    let env = ChildEnv {
        election: cfg.election.clone(),
        backend: cfg.backend.name(),
        watchdog: std::env::current_exe().context("finding elect's own executable")?,
    };
    let finish = supervise::run(&child, &env, campaign.leadership(), &busy_tx, &mut shutdown).await;
    // The command's group is gone by now on every path; resigning is safe.
    resign(campaign, &running.metrics).await?;
    running.finish().await?;
    match finish? {
        Finish::Exited(code) => Ok(code.clamp(0, 255) as u8),
        Finish::Signalled(_) => Ok(0),
        Finish::BackendGone => anyhow::bail!("the {} backend stopped", cfg.backend.name()),
        Finish::Lost => anyhow::bail!("leadership lost; the command is dead (--exit-on-loss)"),
    }
}

const SHUTDOWN_SIGNALS: [(SignalKind, Signal); 2] = [
    (SignalKind::interrupt(), Signal::SIGINT),
    (SignalKind::terminate(), Signal::SIGTERM),
];

/// SIGINT and SIGTERM, as one stream.
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
