//! Making the current leader visible: lines on stdout, a leader file, and
//! over HTTP with Prometheus metrics.
//!
//! Export only reads [`Leadership`] snapshots. A snapshot that tells the
//! same story as the previous one (a renewal moving the deadline) is not
//! reported again; the HTTP side always sees the latest one.

#[cfg(feature = "http")]
pub mod http;
pub(crate) mod leader_file;
pub mod lines;
#[cfg(feature = "metrics")]
pub mod metrics;
#[cfg(not(feature = "metrics"))]
mod no_metrics;
mod stdout;
mod view;

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::SystemTime;

use tokio::sync::watch;

use crate::clock::BootInstant;
use crate::leadership::Leadership;
#[cfg(feature = "metrics")]
pub use metrics::Metrics;
#[cfg(not(feature = "metrics"))]
pub use no_metrics::Metrics;
pub use view::{Context, Exported, Format};

/// Where leadership is exported.
#[derive(Debug, Clone)]
pub struct OutputConfig {
    /// The format of the lines on stdout.
    pub format: Format,
    /// Keep the current leader's id in this file.
    pub leader_file: Option<std::path::PathBuf>,
    /// Where to serve the HTTP endpoints, if anywhere.
    #[cfg(feature = "http")]
    pub http: Option<std::net::SocketAddr>,
}

/// Reports every change of view until the sender is dropped: a line on
/// stdout, the leader file, the metrics, and `state` for the HTTP server.
///
/// Writing stdout and the leader file (an fsync and a rename) blocks, so
/// they are written by a thread of their own, in order; a slow terminal or
/// disk delays the line, never the election's runtime. A line that stdout's
/// pipe can take at once, with none waiting before it, is written here
/// instead, without waking that thread (the private `stdout` module says
/// when). Returns once the last line and file update are written.
///
/// # Cancel safety
/// Dropping the future stops reporting; lines already handed to the
/// writing thread are still written.
pub async fn run(
    mut rx: watch::Receiver<Leadership>,
    ctx: Context,
    output: OutputConfig,
    metrics: Arc<Metrics>,
    state: watch::Sender<Exported>,
) {
    // Each change: the line unless already written, and the leader the
    // file names (None: empty).
    let (writes, pending) = std::sync::mpsc::channel::<(Option<String>, Option<String>)>();
    let leader_file = output.leader_file.clone();
    let has_file = leader_file.is_some();
    // Lines handed to the thread and not yet written: a line goes out
    // here only when none is, so lines keep their order.
    let queued = Arc::new(AtomicUsize::new(0));
    let writer = {
        let queued = queued.clone();
        std::thread::spawn(move || {
            let mut file = leader_file.map(leader_file::LeaderFile::new);
            for (line, shown) in pending {
                if let Some(line) = line {
                    let mut stdout = std::io::stdout().lock();
                    // A closed stdout must not stop the election; the line is lost.
                    let _ = writeln!(stdout, "{line}").and_then(|()| stdout.flush());
                    drop(stdout);
                    queued.fetch_sub(1, Ordering::Release);
                }
                if let Some(file) = file.as_mut() {
                    file.show(shown.as_deref());
                }
            }
        })
    };
    let direct = stdout::NonBlocking::open();
    let mut shown = Leadership::unknown();
    let mut next = rx.borrow_and_update().clone().as_of(BootInstant::now());
    // Armed anew on every renewal: one timer for the loop's life.
    let mut deadline_timer = crate::clock::BootTimer::new();
    loop {
        state.send_modify(|exported| {
            if !next.same_leader(&shown) {
                exported.since = next.leader.as_ref().map(|_| SystemTime::now());
            }
            exported.leadership = next.clone();
        });
        if !next.same_view(&shown) {
            metrics.record(&shown, &next, BootInstant::now());
            let event = next.event_since(&shown);
            let line = lines::render(
                output.format,
                &ctx,
                &next,
                event,
                std::time::SystemTime::now(),
            );
            let in_file = next.leader.clone().filter(|_| next.current);
            let line = if queued.load(Ordering::Acquire) == 0 && direct.try_write(&line) {
                None
            } else {
                queued.fetch_add(1, Ordering::Release);
                Some(line)
            };
            if line.is_some() || has_file {
                let _ = writes.send((line, in_file));
            }
            shown = next.clone();
        }
        // While we lead, our deadline ends it unless the backend renews it
        // first: a backend that is late to say so (stalled) must not keep
        // us shown as the leader past it.
        let expires = next.is_self.then_some(next.deadline).flatten();
        tokio::select! {
            changed = rx.changed() => {
                if changed.is_err() {
                    // The backend is gone: whatever it last said is no longer fresh.
                    state.send_modify(|exported| exported.leadership.current = false);
                    break;
                }
                next = rx.borrow_and_update().clone().as_of(BootInstant::now());
            }
            () = deadline_timer.sleep_until(expires.unwrap_or(BootInstant::now())), if expires.is_some() => {
                next = next.as_of(BootInstant::now());
            }
        }
    }
    drop(writes);
    let _ = tokio::task::spawn_blocking(move || writer.join()).await;
}

/// The exporters of one election: lines, leader file, metrics and, when
/// asked, the HTTP server. [`Exports::prepare`] binds the HTTP port before
/// the backend is contacted, so a taken port fails before anything is
/// created; [`Exports::start`] follows a backend's snapshots.
pub struct Exports {
    metrics: Arc<Metrics>,
    #[cfg(feature = "http")]
    listener: Option<tokio::net::TcpListener>,
    ctx: Context,
    output: OutputConfig,
}

/// The running exporters of [`Exports::start`].
pub struct Running {
    exporter: tokio::task::JoinHandle<()>,
    #[cfg(feature = "http")]
    server: Option<tokio::task::JoinHandle<()>>,
    metrics: Arc<Metrics>,
}

impl Exports {
    /// Prepares the exporters of `output` for the election `ctx` names.
    ///
    /// # Errors
    /// The HTTP address cannot be bound.
    ///
    /// # Cancel safety
    /// Cancel safe: nothing is left behind.
    pub async fn prepare(ctx: Context, output: OutputConfig) -> crate::Result<Exports> {
        #[cfg(feature = "http")]
        let listener = match output.http {
            Some(addr) => Some(http::bind(addr).await?),
            None => None,
        };
        Ok(Exports {
            metrics: Arc::new(Metrics::with_containment(ctx.containment)),
            #[cfg(feature = "http")]
            listener,
            ctx,
            output,
        })
    }

    /// Starts exporting what `leadership` says.
    pub fn start(self, leadership: watch::Receiver<Leadership>) -> Running {
        #[cfg_attr(not(feature = "http"), allow(unused_variables))]
        let (state, exported) = Exported::channel();
        #[cfg(feature = "http")]
        let server = self.listener.map(|listener| {
            tokio::spawn(http::serve(
                listener,
                exported,
                self.metrics.clone(),
                self.ctx.clone(),
            ))
        });
        let exporter = tokio::spawn(run(
            leadership,
            self.ctx,
            self.output,
            self.metrics.clone(),
            state,
        ));
        Running {
            exporter,
            #[cfg(feature = "http")]
            server,
            metrics: self.metrics,
        }
    }
}

impl Running {
    /// The metrics being exported (e.g. to record a handover's time).
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Waits for the exporter to write what the backend last said (it ends
    /// when the backend's sender is gone), then stops serving HTTP.
    ///
    /// # Errors
    /// The exporter panicked.
    ///
    /// # Cancel safety
    /// Cancel safe: the exporter goes on (dropping [`Running`] does not
    /// stop it; [`Running::abort`] does).
    pub async fn finish(self) -> Result<(), tokio::task::JoinError> {
        let result = self.exporter.await;
        #[cfg(feature = "http")]
        if let Some(server) = self.server {
            server.abort();
        }
        result
    }

    /// Stops at once.
    pub fn abort(self) {
        self.exporter.abort();
        #[cfg(feature = "http")]
        if let Some(server) = self.server {
            server.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::backend_kind::Backend;

    /// The soak's seed 4105 (Raft-vote, 1,370 s): a leader whose driver
    /// waited on a stalled fsync said `demoted` only when the disk came
    /// back, a second after its successor was elected (its command had
    /// been stopped on time). The deadline alone now ends what is shown.
    #[tokio::test]
    async fn a_leader_is_shown_demoted_at_its_deadline_though_its_backend_is_silent() {
        let deadline = BootInstant::now() + Duration::from_millis(150);
        let (_backend, rx) = watch::channel(Leadership::elected("me".into(), 7, deadline));
        let (state, mut exported) = Exported::channel();
        let ctx = Context {
            backend: Backend::Raft,
            election: "stalled".into(),
            containment: None,
        };
        let output = OutputConfig {
            format: Format::Json,
            leader_file: None,
            #[cfg(feature = "http")]
            http: None,
        };
        let metrics = Arc::new(Metrics::with_containment(None));
        let exporter = tokio::spawn(run(rx, ctx, output, metrics, state));
        let shown = exported
            .wait_for(|e| e.leadership.is_self)
            .await
            .unwrap()
            .leadership
            .clone();
        assert_eq!(shown.token, Some(7));
        let demoted = tokio::time::timeout(
            Duration::from_secs(5),
            exported.wait_for(|e| !e.leadership.is_self),
        )
        .await
        .expect("shown demoted by the deadline, with no word from the backend")
        .unwrap()
        .leadership
        .clone();
        assert!(BootInstant::now() >= deadline);
        assert!(!demoted.current, "nobody is known to lead: {demoted:?}");
        exporter.abort();
    }

    #[test]
    fn a_snapshot_past_its_deadline_is_a_demotion() {
        let now = BootInstant::now();
        let leading = Leadership::elected("me".into(), 3, now + Duration::from_secs(1));
        assert_eq!(leading.clone().as_of(now), leading);
        let late = leading.clone().as_of(now + Duration::from_secs(2));
        assert!(!late.is_self && !late.current && late.leader.is_none());
        assert_eq!(
            late.event_since(&leading),
            crate::leadership::Event::Demoted
        );
        let follower = Leadership::observed(Some(("other".into(), 3)));
        assert_eq!(
            follower.clone().as_of(now + Duration::from_secs(9)),
            follower
        );
    }
}
