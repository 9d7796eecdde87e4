//! What the four election subcommands (`campaign`, `observe`, `leader`,
//! `run`) share at run time: the async runtime they run on, the signals
//! that end them, the context their output names, and a timed
//! resignation.

use std::future::Future;

use anyhow::Context as _;
use elect::backend::Campaign;
use elect::config::ElectionConfig;
use elect::export;
use nix::sys::signal::Signal;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;

/// Runs `work` as a task on a multi-threaded runtime's workers, not on
/// this thread: the way from a signal to the campaign it ends (signal
/// task, command, driver) then stays on the workers, where a task wakes a
/// task in microseconds; a thread parked in `block_on` must be woken by
/// the kernel, which took a tenth of a millisecond of a handover.
pub fn on_workers<F>(work: F) -> F::Output
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(async {
        match tokio::spawn(work).await {
            Ok(outcome) => outcome,
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    })
}

/// What every output line of `cfg`'s election names.
pub fn context(cfg: &ElectionConfig) -> export::Context {
    export::Context {
        backend: cfg.backend(),
        election: cfg.election().to_owned(),
        containment: None,
    }
}

/// Resigns, timing the handover when we were leading.
pub async fn resign(campaign: Campaign, metrics: &export::Metrics) -> anyhow::Result<()> {
    let leading = campaign.leadership().borrow().is_self;
    let started = std::time::Instant::now();
    campaign.resign().await?;
    if leading {
        metrics.record_handover(started.elapsed());
    }
    Ok(())
}

/// What ends `campaign`, `observe` and `run` cleanly (resigning): a
/// terminal's Ctrl-C, Ctrl-\\ and Ctrl-Z, a hang-up, and SIGTERM. Ctrl-Z
/// does not suspend: a suspended leader would keep a leadership it cannot
/// use, so elect resigns instead (see `supervise::is_shutdown`).
pub const SHUTDOWN_SIGNALS: [(SignalKind, Signal); 5] = [
    (SignalKind::interrupt(), Signal::SIGINT),
    (SignalKind::terminate(), Signal::SIGTERM),
    (SignalKind::quit(), Signal::SIGQUIT),
    (SignalKind::hangup(), Signal::SIGHUP),
    (SignalKind::from_raw(libc::SIGTSTP), Signal::SIGTSTP),
];

/// The shutdown signals, as one stream.
pub fn shutdown_signals() -> anyhow::Result<mpsc::UnboundedReceiver<Signal>> {
    signals(&SHUTDOWN_SIGNALS)
}

/// `connecting` (a first contact with the service, which may wait out the
/// whole connect timeout), unless a shutdown signal comes first: then
/// the signal, and the attempt is dropped. A user's Ctrl-C or a
/// supervisor's stop is obeyed at once, not after the connect timeout.
/// The library's first contacts are cancel safe: nothing is held yet but
/// what the service ends by itself (see `elect::backend::campaign`).
pub async fn unless_stopped<T>(
    shutdown: &mut mpsc::UnboundedReceiver<Signal>,
    connecting: impl Future<Output = T>,
) -> std::result::Result<T, Signal> {
    tokio::select! {
        done = connecting => Ok(done),
        sig = shutdown.recv() => {
            let sig = sig.unwrap_or(Signal::SIGTERM);
            tracing::info!("{sig} while connecting: stopping, nothing was held");
            Err(sig)
        }
    }
}

/// `wanted` signals, as one stream.
pub fn signals(wanted: &[(SignalKind, Signal)]) -> anyhow::Result<mpsc::UnboundedReceiver<Signal>> {
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
