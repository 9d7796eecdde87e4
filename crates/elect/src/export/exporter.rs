//! The exporter's loop: every change of view as a line on stdout, in the
//! leader file, in the metrics, and in the state the HTTP server shows.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::SystemTime;

use tokio::sync::watch;

#[cfg(feature = "metrics")]
use super::metrics::Metrics;
#[cfg(not(feature = "metrics"))]
use super::no_metrics::Metrics;
use super::view::{Context, Exported, Format};
use super::{leader_file, lines, stdout};
use crate::clock::BootInstant;
use crate::leadership::Leadership;
use crate::steer::Standing;
use crate::work::Work;

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
/// With `work`, the lines are the leader-only work (`elect campaign`'s,
/// whose job is to say who leads): it runs from the line saying we lead
/// until the line saying we no longer do is written, with the leader file,
/// so a campaign that gives way waits for it, and no reader of two
/// candidates' lines sees the successor lead before the predecessor says
/// it stopped.
///
/// # Cancel safety
/// Dropping the future stops reporting; lines already handed to the
/// writing thread are still written.
pub async fn run(
    mut rx: watch::Receiver<Leadership>,
    mut health: Option<watch::Receiver<Standing>>,
    ctx: Context,
    output: OutputConfig,
    metrics: Arc<Metrics>,
    state: watch::Sender<Exported>,
    work: Option<Work>,
) {
    // Each change: the line unless already written, the leader the file
    // names (None: empty), and whether the work stops once both are out.
    let (writes, pending) = std::sync::mpsc::channel::<Change>();
    let work = work.map(Arc::new);
    let leader_file = output.leader_file.clone();
    let has_file = leader_file.is_some();
    // Lines handed to the thread and not yet written: a line goes out
    // here only when none is, so lines keep their order.
    let queued = Arc::new(AtomicUsize::new(0));
    let writer = {
        let queued = queued.clone();
        let work = work.clone();
        std::thread::spawn(move || {
            let mut file = leader_file.map(leader_file::LeaderFile::new);
            for Change { line, shown, stops } in pending {
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
                if let (true, Some(work)) = (stops, &work) {
                    work.stopped();
                }
            }
        })
    };
    let direct = stdout::NonBlocking::open();
    let mut shown = Leadership::unknown();
    let mut next = rx.borrow_and_update().clone().as_of(BootInstant::now());
    // With a health check: whether it passes, as last shown and now.
    let healthy_now = |h: &mut Option<watch::Receiver<Standing>>| {
        h.as_mut().map(|h| h.borrow_and_update().healthy)
    };
    let mut healthy = healthy_now(&mut health);
    let mut shown_healthy = healthy;
    if let Some(h) = healthy {
        metrics.set_healthy(h);
    }
    // Armed anew on every renewal: one timer for the loop's life.
    let mut deadline_timer = crate::clock::BootTimer::new();
    loop {
        state.send_modify(|exported| {
            if !next.same_leader(&shown) {
                exported.since = next.leader.as_ref().map(|_| SystemTime::now());
            }
            exported.leadership = next.clone();
            exported.healthy = healthy;
        });
        let health_changed = healthy != shown_healthy;
        if !next.same_view(&shown) || health_changed {
            let event = match next.same_view(&shown) {
                true => crate::leadership::Event::Health,
                false => next.event_since(&shown),
            };
            metrics.record(&shown, &next, BootInstant::now());
            if let Some(h) = healthy {
                metrics.set_healthy(h);
            }
            let line = lines::render(
                output.format,
                &ctx,
                &next,
                event,
                healthy,
                std::time::SystemTime::now(),
            );
            let in_file = next.leader.clone().filter(|_| next.current);
            let leads = next.is_self && next.current;
            if let (true, Some(work)) = (leads, &work) {
                work.running();
            }
            let stops = !leads && work.as_ref().is_some_and(|w| w.is_running());
            let line = if queued.load(Ordering::Acquire) == 0 && direct.try_write(&line) {
                None
            } else {
                queued.fetch_add(1, Ordering::Release);
                Some(line)
            };
            if line.is_some() || has_file || stops {
                let _ = writes.send(Change {
                    line,
                    shown: in_file,
                    stops,
                });
            }
            shown = next.clone();
            shown_healthy = healthy;
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
            Some(Ok(())) = async {
                match health.as_mut() {
                    Some(h) => Some(h.changed().await),
                    None => std::future::pending().await,
                }
            } => {
                healthy = healthy_now(&mut health);
            }
        }
    }
    drop(writes);
    let _ = tokio::task::spawn_blocking(move || writer.join()).await;
}

/// One change for the writing thread.
struct Change {
    /// The line, unless already written.
    line: Option<String>,
    /// The leader the file names (None: empty).
    shown: Option<String>,
    /// Whether the work stops once both are out.
    stops: bool,
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
        let exporter = tokio::spawn(run(rx, None, ctx, output, metrics, state, None));
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

    /// `elect campaign`'s lines are its work: it runs from the line that
    /// says we lead, and stops only once what says we no longer do is out
    /// (here the leader file, written after the line), so a campaign that
    /// gives way waits for it.
    #[tokio::test]
    async fn the_work_stops_once_the_demotion_is_written() {
        let dir = std::env::temp_dir().join(format!("elect-export-work-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("leader");
        let deadline = BootInstant::now() + Duration::from_secs(60);
        let (backend, rx) = watch::channel(Leadership::elected("me".into(), 7, deadline));
        let (state, _exported) = Exported::channel();
        let ctx = Context {
            backend: Backend::Etcd,
            election: "work".into(),
            containment: None,
        };
        let output = OutputConfig {
            format: Format::Json,
            leader_file: Some(file.clone()),
            #[cfg(feature = "http")]
            http: None,
        };
        let metrics = Arc::new(Metrics::with_containment(None));
        let (work, mut watch) = crate::work::channel();
        let exporter = tokio::spawn(run(rx, None, ctx, output, metrics, state, Some(work)));
        tokio::time::timeout(Duration::from_secs(5), watch.started())
            .await
            .expect("the work runs once we are shown leading");
        backend.send_replace(Leadership::observed(Some(("other".into(), 8))));
        tokio::time::timeout(Duration::from_secs(5), watch.stopped())
            .await
            .expect("the work stops once the demotion is out");
        let named = std::fs::read_to_string(&file).unwrap();
        assert_eq!(named.trim(), "other", "written before the work stopped");
        drop(backend);
        exporter.await.unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
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
