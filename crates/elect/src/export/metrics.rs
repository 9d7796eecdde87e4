//! Prometheus metrics of one `elect` process.
//!
//! The export loop feeds every snapshot transition to [`Metrics::record`],
//! so what is counted is plain code over [`Leadership`] values, tested
//! below without a server. What the backends did (renewals, errors,
//! wake-ups) comes from their counters ([`crate::counters`]),
//! read at each scrape.

use std::sync::Mutex;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Metric, Registry};

use crate::clock::BootInstant;
use crate::leadership::Leadership;

/// Buckets from 1 ms to ~65 s: handovers take milliseconds, failovers a
/// TTL or two.
fn duration_buckets() -> impl Iterator<Item = f64> {
    prometheus_client::metrics::histogram::exponential_buckets(0.001, 2.0, 17)
}

/// The Prometheus metrics of one election, as `/metrics` serves them.
pub struct Metrics {
    registry: Registry,
    is_leader: Gauge,
    healthy: Gauge,
    view_current: Gauge,
    leader_changes: Counter,
    failover: Histogram,
    handover: Histogram,
    deadline_margin: Gauge<f64, AtomicU64>,
    leaderless: Mutex<Leaderless>,
    backend_renewals: Counter,
    backend_errors: Counter,
    backend_wakeups: Counter,
    backend_led_without_read: Counter,
    durable_writes: Counter,
    durable_write_seconds: Counter<f64, AtomicU64>,
    slow_durable_writes: Counter,
    catch_up: Mutex<()>,
}

/// What the failover histogram needs to remember between snapshots.
#[derive(Default)]
struct Leaderless {
    /// A leader has been seen: later changes are failovers.
    had_leader: bool,
    /// Since when no leader is known, once one had been.
    since: Option<BootInstant>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A registry with every metric at zero.
    pub fn new() -> Metrics {
        Self::with_containment(None)
    }

    /// The same, and under `run` the containment level holding the
    /// command's tree, as `elect_containment_info{level="..."} 1`.
    pub fn with_containment(containment: Option<&'static str>) -> Metrics {
        let mut registry = Registry::with_prefix("elect");
        if let Some(level) = containment {
            registry.register(
                "containment",
                "How the command's whole tree is held under run: pidns, cgroup or subreaper",
                prometheus_client::metrics::info::Info::new(vec![("level", level)]),
            );
        }
        let is_leader = registered(
            &mut registry,
            "is_leader",
            "1 while this process leads, else 0",
            Gauge::default(),
        );
        let healthy = registered(
            &mut registry,
            "healthy",
            "0 while this candidate's health check fails (--health-cmd, --health-url), else 1",
            Gauge::default(),
        );
        healthy.set(1);
        let view_current = registered(
            &mut registry,
            "view_current",
            "1 while in contact with the backend (the leader shown is fresh), else 0",
            Gauge::default(),
        );
        let leader_changes = registered(
            &mut registry,
            "leader_changes",
            "Times a new leader (or a new term of the same leader) was seen",
            Counter::default(),
        );
        let failover = registered(
            &mut registry,
            "failover_seconds",
            "Per change of leader: how long this process knew of no leader before the new one (0 when it was next in line)",
            Histogram::new(duration_buckets()),
        );
        let handover = registered(
            &mut registry,
            "handover_seconds",
            "How long this process took to give up leadership when asked to resign",
            Histogram::new(duration_buckets()),
        );
        let backend_renewals = registered(
            &mut registry,
            "backend_renewals",
            "Renewals the backend answered (etcd keepalives, ZooKeeper syncs, Raft heartbeat rounds a majority acknowledged)",
            Counter::default(),
        );
        let backend_errors = registered(
            &mut registry,
            "backend_errors",
            "Failed requests and lost connections of the backend",
            Counter::default(),
        );
        let backend_wakeups = registered(
            &mut registry,
            "backend_wakeups",
            "Times a waiting candidate was woken by a change of its predecessor",
            Counter::default(),
        );
        let backend_led_without_read = registered(
            &mut registry,
            "backend_led_without_read",
            "Terms of ours that began at the event that ended our predecessor's, with no request of our own after it",
            Counter::default(),
        );
        let (durable_writes, durable_write_seconds, slow_durable_writes) =
            register_durable_writes(&mut registry);
        let deadline_margin = registered(
            &mut registry,
            "deadline_margin_seconds",
            "While leading: time left before the leadership deadline, at scrape time; else 0",
            Gauge::<f64, AtomicU64>::default(),
        );
        Metrics {
            registry,
            is_leader,
            healthy,
            view_current,
            leader_changes,
            failover,
            handover,
            deadline_margin,
            leaderless: Mutex::default(),
            backend_renewals,
            backend_errors,
            backend_wakeups,
            backend_led_without_read,
            durable_writes,
            durable_write_seconds,
            slow_durable_writes,
            catch_up: Mutex::default(),
        }
    }

    /// Accounts for the transition from `previous` to `next` seen at `now`.
    pub fn record(&self, previous: &Leadership, next: &Leadership, now: BootInstant) {
        self.is_leader.set(i64::from(next.is_self));
        self.view_current.set(i64::from(next.current));
        let known = |s: &Leadership| s.current && s.leader.is_some();
        let mut leaderless = self.leaderless.lock().expect("not poisoned");
        if known(next) {
            if !next.same_leader(previous) {
                self.leader_changes.inc();
                // A direct change (the next candidate already in line) is
                // a failover that left no leaderless time to see.
                if leaderless.had_leader {
                    let gap = leaderless.since.map_or(Duration::ZERO, |s| now - s);
                    self.failover.observe(gap.as_secs_f64());
                }
            }
            leaderless.had_leader = true;
            leaderless.since = None;
        } else if known(previous) && leaderless.since.is_none() {
            leaderless.since = Some(now);
        }
    }

    /// Our health check passes, or not.
    pub fn set_healthy(&self, healthy: bool) {
        self.healthy.set(i64::from(healthy));
    }

    /// Accounts for one resignation of ours that took `took`.
    pub fn record_handover(&self, took: Duration) {
        self.handover.observe(took.as_secs_f64());
    }

    /// The text exposition, with the deadline margin of `now`.
    pub fn render(&self, current: &Leadership, now: BootInstant) -> String {
        let margin = current
            .deadline
            .filter(|_| current.is_self)
            .map_or(0.0, |d| d.saturating_duration_since(now).as_secs_f64());
        self.deadline_margin.set(margin);
        let counts = crate::counters::snapshot();
        // Concurrent scrapes must not both add the same difference.
        let _one_at_a_time = self.catch_up.lock().expect("not poisoned");
        for (counter, total) in [
            (&self.backend_renewals, counts.renewals),
            (&self.backend_errors, counts.errors),
            (&self.backend_wakeups, counts.wakeups),
            (&self.backend_led_without_read, counts.led_without_read),
            (&self.durable_writes, counts.durable_writes),
            (&self.slow_durable_writes, counts.slow_durable_writes),
        ] {
            // The counts only grow; catch the exported counter up.
            counter.inc_by(total.saturating_sub(counter.get()));
        }
        let took = counts.durable_write_time.as_secs_f64();
        self.durable_write_seconds
            .inc_by((took - self.durable_write_seconds.get()).max(0.0));
        let mut text = String::new();
        encode(&mut text, &self.registry).expect("writing to a String cannot fail");
        text
    }
}

/// Raft-vote's fsynced writes of term and vote: their count, their time,
/// and the slow ones.
fn register_durable_writes(registry: &mut Registry) -> (Counter, Counter<f64, AtomicU64>, Counter) {
    let durable_writes = registered(
        registry,
        "raft_durable_writes",
        "Raft-vote: writes of term and vote to --data-dir, each ending in an fsync",
        Counter::default(),
    );
    let durable_write_seconds = registered(
        registry,
        "raft_durable_write_seconds",
        "Raft-vote: the time those writes took, in all",
        Counter::<f64, AtomicU64>::default(),
    );
    let slow_durable_writes = registered(
        registry,
        "raft_slow_durable_writes",
        "Raft-vote: those writes that took more than a quarter of the election timeout T; each costs or delays an election (raise --ttl, or give --data-dir a faster disk)",
        Counter::default(),
    );
    (durable_writes, durable_write_seconds, slow_durable_writes)
}

/// Registers `metric` under `name` and hands it back, to be updated.
fn registered<M: Metric + Clone>(registry: &mut Registry, name: &str, help: &str, metric: M) -> M {
    registry.register(name, help, metric.clone());
    metric
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(text: &str, name: &str) -> f64 {
        text.lines()
            .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{name} in\n{text}"))
    }

    #[test]
    fn a_failover_is_timed_from_losing_the_leader_to_the_next() {
        let m = Metrics::new();
        let t0 = BootInstant::now();
        let a = Leadership::observed(Some(("a".into(), 1)));
        let none = Leadership::observed(None);
        let b = Leadership::observed(Some(("b".into(), 2)));
        m.record(&Leadership::unknown(), &a, t0);
        m.record(&a, &none, t0 + Duration::from_millis(100));
        m.record(
            &none,
            &Leadership::unknown(),
            t0 + Duration::from_millis(200),
        );
        m.record(&Leadership::unknown(), &b, t0 + Duration::from_millis(350));
        let text = m.render(&b, t0);
        assert_eq!(value(&text, "elect_leader_changes_total"), 2.0);
        assert_eq!(value(&text, "elect_failover_seconds_count"), 1.0);
        assert!((value(&text, "elect_failover_seconds_sum") - 0.25).abs() < 1e-9);
        assert_eq!(value(&text, "elect_is_leader"), 0.0);
        assert_eq!(value(&text, "elect_view_current"), 1.0);
    }

    #[test]
    fn a_direct_change_is_a_failover_without_leaderless_time() {
        let m = Metrics::new();
        let t0 = BootInstant::now();
        let a = Leadership::observed(Some(("a".into(), 1)));
        let b = Leadership::observed(Some(("b".into(), 2)));
        m.record(&Leadership::unknown(), &a, t0);
        m.record(&a, &b, t0 + Duration::from_millis(5));
        let text = m.render(&b, t0);
        assert_eq!(value(&text, "elect_failover_seconds_count"), 1.0);
        assert_eq!(value(&text, "elect_failover_seconds_sum"), 0.0);
    }

    #[test]
    fn the_first_leader_seen_is_no_failover_and_renewals_are_no_change() {
        let m = Metrics::new();
        let t0 = BootInstant::now();
        let us = Leadership::elected("a".into(), 3, t0 + Duration::from_secs(2));
        let renewed = Leadership::elected("a".into(), 3, t0 + Duration::from_secs(3));
        m.record(&Leadership::unknown(), &us, t0);
        m.record(&us, &renewed, t0 + Duration::from_secs(1));
        let text = m.render(&renewed, t0 + Duration::from_millis(2500));
        assert_eq!(value(&text, "elect_leader_changes_total"), 1.0);
        assert_eq!(value(&text, "elect_failover_seconds_count"), 0.0);
        assert_eq!(value(&text, "elect_is_leader"), 1.0);
        assert!((value(&text, "elect_deadline_margin_seconds") - 0.5).abs() < 1e-9);
    }

    #[test]
    fn handovers_are_recorded() {
        let m = Metrics::new();
        m.record_handover(Duration::from_millis(3));
        let text = m.render(&Leadership::unknown(), BootInstant::now());
        assert_eq!(value(&text, "elect_handover_seconds_count"), 1.0);
        assert!(text.contains("# HELP elect_backend_errors"));
    }

    #[test]
    fn the_containment_level_is_an_info_metric_under_run_only() {
        let text = Metrics::with_containment(Some("pidns"))
            .render(&Leadership::unknown(), BootInstant::now());
        assert!(
            text.lines()
                .any(|l| l == "elect_containment_info{level=\"pidns\"} 1"),
            "{text}"
        );
        let text = Metrics::new().render(&Leadership::unknown(), BootInstant::now());
        assert!(!text.contains("containment"), "{text}");
    }
}
