//! Making the current leader visible: lines on stdout, a leader file, and
//! over HTTP with Prometheus metrics.
//!
//! Export only reads [`Leadership`] snapshots. A snapshot that tells the
//! same story as the previous one (a renewal moving the deadline) is not
//! reported again; the HTTP side always sees the latest one.

pub mod http;
pub mod leader_file;
pub mod lines;
pub mod metrics;

use std::io::Write;
use std::sync::Arc;
use std::time::SystemTime;

use tokio::time::Instant;

use tokio::sync::watch;

use crate::config::OutputConfig;
use crate::leadership::Leadership;
pub use metrics::Metrics;

impl Exported {
    pub fn channel() -> (watch::Sender<Exported>, watch::Receiver<Exported>) {
        watch::channel(Exported {
            leadership: Leadership::unknown(),
            since: None,
        })
    }
}

/// What every output line names besides the snapshot.
#[derive(Debug, Clone)]
pub struct Context {
    pub backend: &'static str,
    pub election: String,
}

/// The latest snapshot with what the exporters add to it.
#[derive(Debug, Clone)]
pub struct Exported {
    pub leadership: Leadership,
    /// When this process first saw the current leader (and term).
    pub since: Option<SystemTime>,
}

/// Reports every change of view until the sender is dropped: a line on
/// stdout, the leader file, the metrics, and `state` for the HTTP server.
pub async fn run(
    mut rx: watch::Receiver<Leadership>,
    ctx: Context,
    output: OutputConfig,
    metrics: Arc<Metrics>,
    state: watch::Sender<Exported>,
) {
    let mut shown = Leadership::unknown();
    let mut file = output.leader_file.map(leader_file::LeaderFile::new);
    loop {
        let next = rx.borrow_and_update().clone();
        state.send_modify(|exported| {
            if !next.same_leader(&shown) {
                exported.since = next.leader.as_ref().map(|_| SystemTime::now());
            }
            exported.leadership = next.clone();
        });
        if !next.same_view(&shown) {
            metrics.record(&shown, &next, Instant::now());
            let event = next.event_since(&shown);
            let line = lines::render(
                output.format,
                &ctx,
                &next,
                event,
                std::time::SystemTime::now(),
            );
            let mut stdout = std::io::stdout().lock();
            // A closed stdout must not stop the election; the line is lost.
            let _ = writeln!(stdout, "{line}").and_then(|()| stdout.flush());
            drop(stdout);
            if let Some(file) = file.as_mut() {
                file.show(next.leader.as_deref().filter(|_| next.current));
            }
            shown = next;
        }
        if rx.changed().await.is_err() {
            // The backend is gone: whatever it last said is no longer fresh.
            state.send_modify(|exported| exported.leadership.current = false);
            return;
        }
    }
}
