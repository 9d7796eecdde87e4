//! The steady scenario: what waiting and leading cost the servers while
//! nothing happens, counted on the servers' own counters (etcd's
//! `grpc_server_msg_received_total`, ZooKeeper's `mntr`
//! `zk_packets_received`), so that the peers' tools are measured exactly
//! as elect is.
//!
//! For each contender and TTL (the run's, and 10 s unless `--quick`),
//! the ensemble is counted empty, then with 1, 3 and 30 candidate
//! processes (and, for elect and unless `--quick`, 1000 candidates of
//! one election in this process, through the library), each counted
//! once every candidate is queued and has settled into its cadence. From
//! the same run:
//! - **per candidate** at N: (rate(N) - rate(empty)) / N;
//! - **the leader**: rate(1) - rate(empty), a lone candidate leads;
//! - **a follower**: (rate(30) - rate(3)) / 27: candidates behind the
//!   leader and the next in line.

use std::time::Duration;

use anyhow::Context as _;
use elect_lab::peers::Peer;

use crate::arena::Reach;
use crate::contender::{Contender, Implementation};
use crate::probe::Probe;
use crate::progress::Progress;
use crate::row::Row;
use crate::scenario::{STEADY_SIZES as SIZES, Scenario, Setup, populate};

/// Candidates of one election in this process (elect's library).
pub const LIBRARY_SIZE: usize = 1000;
/// The second TTL, beside the run's.
pub const LONG_TTL: Duration = Duration::from_secs(10);
/// After the last candidate is queued, before counting: cadences settle
/// (a candidate that falls back from next in line renews as a follower).
const SETTLE: Duration = Duration::from_secs(2);
/// `etcdctl elect`'s session TTL: it has no flag for it.
const ETCDCTL_TTL: Duration = Duration::from_secs(60);

/// What one contender's candidates cost at one TTL.
struct Costs {
    ttl: Duration,
    /// (N, requests per second net of the empty ensemble's).
    points: Vec<(usize, f64)>,
}

impl Costs {
    fn at(&self, n: usize) -> Option<f64> {
        self.points.iter().find(|(m, _)| *m == n).map(|(_, r)| *r)
    }
}

/// The TTLs `contender` is counted at: the run's and, `in_full`,
/// [`LONG_TTL`]; `etcdctl elect`'s own only.
pub fn ttls(contender: &Contender, in_full: bool) -> Vec<Duration> {
    match contender.imp {
        Implementation::Peer(Peer::Etcdctl) => vec![ETCDCTL_TTL],
        _ if contender.ttl == LONG_TTL || !in_full => vec![contender.ttl],
        _ => vec![contender.ttl, LONG_TTL],
    }
}

/// How long a rate is counted: a whole TTL (three renewals of every
/// candidate, at least), at least 5 s; `etcdctl elect` one keepalive
/// period, 20 s.
fn window(ttl: Duration) -> Duration {
    if ttl == ETCDCTL_TTL {
        return ttl / 3;
    }
    ttl.max(Duration::from_secs(5))
}

/// The servers' requests per second over `window`.
fn rate(probe: &Probe, window: Duration) -> anyhow::Result<f64> {
    let counted = probe
        .rate_over(window)
        .context("a member restarted or did not answer while the steady state was counted")?;
    Ok(counted.requests)
}

/// The steady rows of `setup`'s contender: per candidate at each N, the
/// leader's, and a follower's, at each of its TTLs.
pub fn rows(setup: &Setup<'_>) -> anyhow::Result<Vec<Row>> {
    let probe = setup.probe.context("steady counts on etcd or ZooKeeper")?;
    let mut rows = Vec::new();
    for ttl in ttls(setup.contender, setup.steady_in_full) {
        let contender = Contender {
            ttl,
            ..setup.contender.clone()
        };
        let progress = Progress::start(
            format!(
                "{} {} steady ttl={}",
                contender.backend.name(),
                contender.imp.name(),
                humantime::format_duration(ttl)
            ),
            SIZES.len(),
        );
        let at_ttl = Setup {
            contender: &contender,
            progress: &progress,
            ..*setup
        };
        let costs = count(&at_ttl, probe)?;
        progress.finish("counted");
        rows.extend(costs_rows(&contender, &costs));
    }
    Ok(rows)
}

fn count(setup: &Setup<'_>, probe: &Probe) -> anyhow::Result<Costs> {
    let c = setup.contender;
    let window = window(c.ttl);
    let empty = rate(probe, window)?;
    let mut points = Vec::new();
    for n in SIZES {
        let election = c.election(&format!("steady-{}ms", c.ttl.as_millis()), n);
        let mut arena = crate::arena::Arena::new(
            c,
            election,
            setup.endpoints,
            setup.probe,
            setup.raft_peers,
            false,
            Reach::Direct,
            false,
        )?;
        populate(&mut arena, n)?;
        std::thread::sleep(SETTLE);
        let counted = rate(probe, window)? - empty;
        setup.progress.inc();
        points.push((n, counted.max(0.0)));
        drop(arena);
    }
    if c.imp == Implementation::Elect && setup.steady_in_full && library_runs(c) {
        let name = format!("steady-library-{}ms", c.ttl.as_millis());
        let held = (name.as_str(), LIBRARY_SIZE);
        let counted = crate::scale::holding(
            c.backend,
            setup.endpoints,
            c.ttl,
            held,
            probe,
            SETTLE,
            || rate(probe, window),
        )? - empty;
        points.push((LIBRARY_SIZE, counted.max(0.0)));
    }
    Ok(Costs { ttl: c.ttl, points })
}

/// Whether [`LIBRARY_SIZE`] candidates are counted at `c`'s TTL: on etcd
/// from 10 s only. Before followers renewed as Go's session does, a
/// thousand etcd candidates at 2 s (every one through every member with
/// the term proof: 13,500 requests/s) overloaded the two cores that run
/// them and the ensemble, and the counts need a like-for-like row.
fn library_runs(c: &Contender) -> bool {
    c.backend != elect::Backend::Etcd || c.ttl >= LONG_TTL
}

fn costs_rows(c: &Contender, costs: &Costs) -> Vec<Row> {
    let row = |scenario: &'static str, n: usize, per_s: f64, note: String| {
        let mut row = Row::new(
            c.backend.name(),
            c.imp.name(),
            scenario,
            costs.ttl,
            n,
            &[],
            0,
            None,
        );
        row.idle_requests_per_s = Some((per_s * 1000.0).round() / 1000.0);
        row.notes.push(note);
        row
    };
    let mut rows = Vec::new();
    for &(n, total) in &costs.points {
        let how = if n == LIBRARY_SIZE {
            "in one process"
        } else {
            "processes"
        };
        rows.push(row(
            Scenario::Steady.name(),
            n,
            total / n as f64,
            format!(
                "requests/s per candidate, {n} candidates ({how}), net of the empty ensemble's: {total:.2}/s in all"
            ),
        ));
    }
    if let Some(leader) = costs.at(1) {
        rows.push(row(
            "steady-leader",
            1,
            leader,
            "requests/s of a lone candidate, which leads".into(),
        ));
    }
    if let (Some(three), Some(thirty)) = (costs.at(3), costs.at(30)) {
        rows.push(row(
            "steady-follower",
            30,
            ((thirty - three) / 27.0).max(0.0),
            "requests/s of a follower behind the next in line: (rate(30) - rate(3)) / 27".into(),
        ));
    }
    rows
}
