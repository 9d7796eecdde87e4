//! A row: one measured combination of backend x implementation x
//! scenario (x candidates, for scale), as the tables show it and as the
//! JSON line `--format json` prints; and a combination that cannot run.

use std::time::Duration;

use elect_lab::stats::{Summary, ms};
use serde::Serialize;

use crate::probe::Counters;

/// One measured combination; the JSON line `--format json` prints.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub backend: &'static str,
    pub implementation: &'static str,
    pub scenario: &'static str,
    pub trials: usize,
    pub ttl_ms: f64,
    pub candidates: usize,
    /// Every sample, in the order taken.
    pub samples_ms: Vec<f64>,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub max_ms: Option<f64>,
    pub mean_ms: Option<f64>,
    /// The mean as a multiple of the TTL.
    pub mean_ttl: Option<f64>,
    /// The p99 as a multiple of the TTL.
    pub p99_ttl: Option<f64>,
    /// Leader changes the scenario caused.
    pub failovers: usize,
    /// The largest overlap of two leaders' tenures in the fenced store
    /// (`null` when no overlap was seen, or no fenced command ran).
    pub max_overlap_ms: Option<f64>,
    /// Whether a fenced command ran, so overlap and stale writes were checked.
    pub fenced: bool,
    /// Writes from a deposed leader the fenced store accepted (`null` when
    /// no fenced command ran).
    pub stale_writes_accepted: Option<usize>,
    /// Waiting candidates woken per leader change: for elect, the campaign
    /// wake-ups its candidates logged; for the peers' recipes (whose
    /// waiters are all their watchers), the servers' notifications.
    pub wakeups_per_change: Option<f64>,
    /// The share of leader changes in which the successor led with no
    /// read of its own after its predecessor's end (elect).
    pub led_without_read_per_change: Option<f64>,
    /// Watch notifications the servers delivered per leader change, to
    /// waiters and to everyone who follows the leader.
    pub notifications_per_change: Option<f64>,
    /// Requests the servers received per leader change: in scale, net of
    /// the steady state's renewals (`idle_requests_per_s`); elsewhere
    /// keepalives in the same window included.
    pub requests_per_change: Option<f64>,
    /// Scale: requests per second the servers received with no leader
    /// change, the candidates' renewals, counted before the handovers.
    pub idle_requests_per_s: Option<f64>,
    /// Raft terms per leader change.
    pub terms_per_change: Option<f64>,
    /// Operations scenarios: times leadership was lost (or handed over
    /// beyond the one a Raft-vote leader's own restart needs) while the
    /// leader's session or lease lived.
    pub spurious_losses: Option<usize>,
    /// Operations scenarios, elect: times the leader's command was started
    /// again (from the fenced store's tenures).
    pub command_restarts: Option<usize>,
    /// Operations scenarios: time spent without a known leader (elect: as
    /// the waiting candidates reported it; the recipes: from a loss to the
    /// next election).
    pub leaderless_ms: Option<f64>,
    /// Private resident memory per candidate (scale), or per election
    /// (elections), in KiB: allocations, not the shared code pages.
    pub memory_kib_per_candidate: Option<f64>,
    /// Renewals answered per TTL (elections: the one session's, for every
    /// election on it).
    pub renewals_per_ttl: Option<f64>,
    /// Connections (sockets) per candidate (scale).
    pub connections_per_candidate: Option<f64>,
    /// `null`, or what broke safety.
    pub safety_violation: Option<String>,
    pub notes: Vec<String>,
}

impl Row {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        backend: &'static str,
        implementation: &'static str,
        scenario: &'static str,
        ttl: Duration,
        candidates: usize,
        samples: &[Duration],
        changes: usize,
        counters: Option<Counters>,
    ) -> Row {
        let summary = Summary::of(samples);
        let t = ttl.as_secs_f64();
        let per_change = |v: f64| (changes > 0).then(|| round(v / changes as f64, 2));
        Row {
            backend,
            implementation,
            scenario,
            trials: samples.len(),
            ttl_ms: ms(ttl),
            candidates,
            samples_ms: samples.iter().map(|d| round(ms(*d), 3)).collect(),
            p50_ms: summary.map(|s| round(ms(s.p50), 3)),
            p99_ms: summary.map(|s| round(ms(s.p99), 3)),
            max_ms: summary.map(|s| round(ms(s.max), 3)),
            mean_ms: summary.map(|s| round(ms(s.mean), 3)),
            mean_ttl: summary.map(|s| round(s.mean.as_secs_f64() / t, 3)),
            p99_ttl: summary.map(|s| round(s.p99.as_secs_f64() / t, 3)),
            failovers: changes,
            max_overlap_ms: None,
            fenced: false,
            stale_writes_accepted: None,
            wakeups_per_change: counters.and_then(|c| per_change(c.notifications)),
            led_without_read_per_change: None,
            notifications_per_change: counters.and_then(|c| per_change(c.notifications)),
            requests_per_change: counters.and_then(|c| per_change(c.requests)),
            idle_requests_per_s: None,
            terms_per_change: None,
            spurious_losses: None,
            command_restarts: None,
            leaderless_ms: None,
            memory_kib_per_candidate: None,
            renewals_per_ttl: None,
            connections_per_candidate: None,
            safety_violation: None,
            notes: Vec::new(),
        }
    }
}

impl Row {
    /// Sets wake-ups per change from a count of campaign wake-ups.
    pub fn set_wakeups(&mut self, wakeups: f64, changes: usize) {
        self.wakeups_per_change = (changes > 0).then(|| round(wakeups / changes as f64, 2));
    }

    /// The steady state's rate (see [`crate::probe::Probe::idle_rate`]),
    /// which this row's counts are net of, and a note saying so; `keeper`
    /// is what each change includes to keep N candidates.
    pub fn set_idle(&mut self, idle: crate::probe::Counters, keeper: &str) {
        self.idle_requests_per_s = Some(idle.requests.round());
        self.notes.push(format!(
            "req/chg and notif/chg net of the steady state's {:.0} requests/s (every \
             candidate's renewals, counted for {} s before the measured handovers); each \
             change includes {keeper}, which keeps N",
            idle.requests,
            crate::probe::IDLE_WINDOW.as_secs()
        ));
    }
}

fn round(v: f64, places: i32) -> f64 {
    let f = 10f64.powi(places);
    (v * f).round() / f
}

/// A backend that cannot run, and how to enable it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Unavailable {
    /// The backend's name.
    pub backend: &'static str,
    /// The implementation's name (elect, etcdctl, kazoo, curator...).
    pub implementation: &'static str,
    /// The scenario, where only that one cannot run.
    pub scenario: Option<&'static str>,
    /// Why, and how to enable it.
    pub reason: String,
}
