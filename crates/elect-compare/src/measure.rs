//! One scenario's measurements as the rows of the table: the process
//! scenarios, the floor beside a handover, the scale curve, the
//! elections on one session.

use anyhow::Context as _;
use elect::Backend;

use crate::contender::Contender;
use crate::plan::Plan;
use crate::probe::Probe;
use crate::progress::Progress;
use crate::row::Row;
use crate::scenario::{self, Scenario, Setup};
use crate::{elections, floor, scale};

/// The shortest etcd TTL the scale and elections scenarios run with.
const SCALE_ETCD_TTL: std::time::Duration = std::time::Duration::from_secs(10);

/// The TTL of the in-process scenarios (scale, elections): a thousand
/// etcd leases renewed every TTL/3 from one process over three
/// connections each overload two cores at a 2 s TTL, so etcd runs at
/// [`SCALE_ETCD_TTL`] or more; the others as asked.
fn in_process_ttl(contender: &Contender) -> std::time::Duration {
    match contender.backend {
        Backend::Etcd => contender.ttl.max(SCALE_ETCD_TTL),
        _ => contender.ttl,
    }
}

/// The TTL of the elections scenario: every backend at
/// [`SCALE_ETCD_TTL`] or more, so the etcd and ZooKeeper rows, there to
/// be compared, are like for like. (At 2 s a ZooKeeper session of a
/// thousand new elections holds its own syncs behind their requests, in
/// the session's one ordered queue, longer than its lease can wait, about
/// a third of the TTL: every leader steps down until the queue drains,
/// which is the lease's rule working, not the elections' cost.)
fn elections_ttl(contender: &Contender) -> std::time::Duration {
    contender.ttl.max(SCALE_ETCD_TTL)
}

/// The row of the elections scenario: `plan.elections` elections on one
/// session, one process.
pub(crate) fn elections(
    plan: &Plan,
    contender: &Contender,
    endpoints: &str,
    probe: &Probe,
) -> anyhow::Result<Row> {
    let backend = contender.backend;
    let e = plan.elections;
    let ttl = elections_ttl(contender);
    let progress = Progress::start(format!("{} elect elections e={e}", backend.name()), e);
    let point = elections::run(
        backend,
        endpoints,
        ttl,
        e,
        plan.renewal_window_ttls(),
        probe,
        &progress,
    )
    .with_context(|| format!("{} elections on one session ({e})", backend.name()))?;
    let mut row = Row::new(
        backend.name(),
        contender.imp.name(),
        Scenario::Elections.name(),
        ttl,
        e,
        &point.samples,
        1,
        None,
    );
    row.memory_kib_per_candidate = Some((point.memory_kib_per_election * 10.0).round() / 10.0);
    row.renewals_per_ttl = Some((point.renewals_per_ttl * 10.0).round() / 10.0);
    row.set_wakeups(point.wakeups as f64, 1);
    row.notes.push(format!(
        "{e} elections on one session; samples: each election's time to elect from the \
         start; renewals per TTL for all of them; wake-ups of one leader change across \
         every election"
    ));
    progress.finish(&summary(&row));
    Ok(row)
}

/// The floor beside a backend's handover, failover, elections or scale
/// rows (see [`floor`]): one row, or one per candidate count for scale.
pub(crate) fn floor(
    plan: &Plan,
    c: &Contender,
    scenario: Scenario,
    endpoints: &str,
) -> anyhow::Result<Vec<Row>> {
    if scenario == Scenario::Scale {
        return scale_floor(plan, c, endpoints);
    }
    let trials = match scenario {
        Scenario::Elections => plan.elections,
        _ => plan.trials(scenario),
    };
    let progress = Progress::start(
        format!("{} floor {}", c.backend.name(), scenario.name()),
        trials,
    );
    let (samples, note) = match scenario {
        Scenario::Elections => (
            floor::elections_samples(c.backend, endpoints, trials, &progress),
            "the requests any recipe makes to learn it leads a new election (ZooKeeper: the \
             election's znode, an ephemeral sequential one under it, the listing; etcd: one \
             transaction putting the key on the lease and reading the oldest), every election \
             at once on one session: what many elections on one session wait for",
        ),
        Scenario::Failover => (
            floor::failover_samples(c.backend, endpoints, c.ttl, trials, &progress),
            "a bare holder's host silenced at a random point of its renewal cycle, and the \
             service's expiry of its key seen by a watcher: what any failover waits for when \
             the holder renews as the peers' libraries do",
        ),
        _ => (
            floor::samples(c.backend, endpoints, trials, &progress),
            "one delete committed and its watch event seen, in one process through the same \
             client library: what any handover waits for",
        ),
    };
    let samples = samples.with_context(|| format!("{} floor", c.backend.name()))?;
    let n = match scenario {
        Scenario::Elections => trials,
        _ => 1,
    };
    let mut row = Row::new(
        c.backend.name(),
        "floor",
        scenario.name(),
        c.ttl,
        n,
        &samples,
        samples.len(),
        None,
    );
    row.notes.push(note.into());
    progress.finish(&summary(&row));
    Ok(vec![row])
}

/// The scale curve's floor: a row per candidate count, beside elect's.
fn scale_floor(plan: &Plan, c: &Contender, endpoints: &str) -> anyhow::Result<Vec<Row>> {
    let trials = plan.trials(Scenario::Scale);
    let mut rows = Vec::new();
    for n in plan.scale_sizes() {
        let progress = Progress::start(format!("{} floor scale n={n}", c.backend.name()), trials);
        let samples = floor::scale_samples(c.backend, endpoints, n, trials, &progress)
            .with_context(|| format!("{} scale floor with {n} watchers", c.backend.name()))?;
        let mut row = Row::new(
            c.backend.name(),
            "floor",
            Scenario::Scale.name(),
            in_process_ttl(c),
            n,
            &samples,
            samples.len(),
            None,
        );
        row.notes.push(format!(
            "{n} bare watchers in one process, a client or session each, watching as elect's \
             followers do; a sample is one delete committed and its notification seen by one \
             of them, each in turn, once all {n} saw it: where a successor's wake-up falls \
             among the notifications any leader change sends its followers"
        ));
        progress.finish(&summary(&row));
        rows.push(row);
    }
    Ok(rows)
}

/// The rows of a process-based scenario: one, or steady's several.
pub(crate) fn rows(scenario: Scenario, setup: &Setup<'_>) -> anyhow::Result<Vec<Row>> {
    if scenario == Scenario::Steady {
        let c = setup.contender;
        return crate::steady::rows(setup)
            .with_context(|| format!("{} {} steady", c.backend.name(), c.imp.name()));
    }
    Ok(vec![self::scenario(scenario, setup)?])
}

/// One row of a process-based scenario.
pub(crate) fn scenario(scenario: Scenario, setup: &Setup<'_>) -> anyhow::Result<Row> {
    let c = setup.contender;
    let out = scenario::run(scenario, setup)
        .with_context(|| format!("{} {} {}", c.backend.name(), c.imp.name(), scenario.name()))?;
    let mut row = Row::new(
        c.backend.name(),
        c.imp.name(),
        scenario.name(),
        c.ttl,
        setup.candidates,
        &out.samples,
        out.changes,
        out.counters,
    );
    if let Some(w) = out.wakeups {
        row.set_wakeups(w as f64, out.changes);
    }
    row.fenced = scenario.fenced(c.imp);
    row.max_overlap_ms = out
        .max_overlap
        .filter(|d| !d.is_zero())
        .map(|d| (d.as_secs_f64() * 1e6).round() / 1e3);
    row.stale_writes_accepted = out.stale_accepted;
    row.terms_per_change = out.terms_per_change;
    row.safety_violation = scenario::safety_violation(scenario, &out);
    row.notes = out.notes;
    if let Some((idle, _)) = out.idle {
        row.set_idle(idle, "the start of one candidate process");
    }
    if matches!(scenario, Scenario::Handover | Scenario::ScaleProcesses)
        && let Some(n) = out.led_without_read.filter(|_| out.changes > 0)
    {
        let share = n as f64 / out.changes as f64;
        row.led_without_read_per_change = Some((share * 100.0).round() / 100.0);
        row.notes.push(format!(
            "{n} of {} successors led without a read of their own",
            out.changes
        ));
    }
    if let Some(ops) = &out.operations {
        row.spurious_losses = Some(ops.spurious_losses);
        row.command_restarts = ops.command_restarts;
        row.leaderless_ms = Some((ops.leaderless.as_secs_f64() * 1e6).round() / 1e3);
        row.notes.push(
            "a sample is a graceful handover right after the operation; spurious_losses \
             counts leadership lost while every session or lease lived"
                .into(),
        );
    }
    setup.progress.finish(&summary(&row));
    Ok(row)
}

/// The scale curve: one row per candidate count.
pub(crate) fn scale(
    plan: &Plan,
    contender: &Contender,
    endpoints: &str,
    probe: &Probe,
) -> anyhow::Result<Vec<Row>> {
    let backend = contender.backend;
    let ttl = in_process_ttl(contender);
    let trials = plan.trials(Scenario::Scale);
    let mut rows = Vec::new();
    for n in plan.scale_sizes() {
        let progress = Progress::start(format!("{} elect scale n={n}", backend.name()), trials);
        let point = scale::run(backend, endpoints, ttl, n, trials, probe, &progress)
            .with_context(|| format!("{} scale with {n} candidates", backend.name()))?;
        let mut row = Row::new(
            backend.name(),
            contender.imp.name(),
            Scenario::Scale.name(),
            ttl,
            n,
            &point.samples,
            point.changes,
            point.counters,
        );
        row.memory_kib_per_candidate = Some((point.memory_kib_per_candidate * 10.0).round() / 10.0);
        row.connections_per_candidate = Some((point.sockets_per_candidate * 10.0).round() / 10.0);
        if let Some(idle) = point.idle {
            row.set_idle(idle, "the join of one candidate");
        }
        row.set_wakeups(point.wakeups as f64, point.changes);
        progress.finish(&summary(&row));
        rows.push(row);
    }
    Ok(rows)
}

fn summary(row: &Row) -> String {
    match (row.p50_ms, row.p99_ms) {
        (Some(p50), Some(p99)) => format!("p50 {p50:.2}ms p99 {p99:.2}ms"),
        _ => "no samples".into(),
    }
}
