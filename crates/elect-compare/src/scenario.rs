//! The scenarios, each a loop of trials on one [`Arena`]. Every sample is
//! the time from the blow (a signal, a cut, a kill) to the instant the
//! successor's `elected` line was read.

use std::cell::RefCell;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use elect_lab::fault::check;
use elect_lab::{Fault, Lab, Role};
use nix::sys::signal::Signal;

use crate::arena::{Arena, CampaignCounts, Reach, SOON};
use crate::contender::{Contender, Implementation};
use crate::probe::{Counters, Probe};
use crate::progress::Progress;
use crate::random::Xorshift;
use elect::Backend;
use elect_lab::peers::Peer;

/// The scenarios, in the order they run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scenario {
    /// First leader from a cold start: candidates spawned together.
    Election,
    /// SIGTERM to the leader: it resigns.
    Handover,
    /// SIGKILL to the leader: its session, lease or heartbeats run out.
    Failover,
    /// SIGKILL to the leader and, at once, to the first in line (Raft: the
    /// order of succession its heartbeats carry; etcd and ZooKeeper: the
    /// next in the queue).
    FailoverNext,
    /// The leader's whole tree SIGSTOPped past the TTL, its command
    /// writing through the fenced store.
    Freeze,
    /// The leader cut off from the ensemble (or the other peers) past the TTL.
    Cutoff,
    /// The ensemble member the leader lists first is killed, and started
    /// again once the window to lose leadership has passed (Raft-vote: a
    /// follower).
    MemberKill,
    /// Every member restarted in turn, each rejoining before the next
    /// goes (Raft-vote: the followers first, the leader last).
    RollingRestart,
    /// The ensemble's own leader killed and started again (Raft-vote: not
    /// applicable, the peers are the service).
    ServiceLeaderKill,
    /// etcd: the keyspace compacted to its current revision and every
    /// member defragmented while candidates wait; then the leader hands
    /// over, timed.
    Compaction,
    /// Candidates come and go at random; the leader among them.
    Churn,
    /// Many candidates in one process, through the library.
    Scale,
    /// Many candidates as separate `elect campaign` processes, as a fleet
    /// of sidecars runs them: the handover at each size.
    ScaleProcesses,
    /// Many elections in one process on one session, through the library.
    Elections,
    /// `elect switchover` to the second in line: from the request to the
    /// target's `elected`, and the gap between the old leader's
    /// `demoted` and it.
    Switchover,
    /// The same, to the last in line (the candidates between step aside).
    SwitchoverLast,
    /// The leader's health check starts failing (`--health-cmd`, every
    /// 200 ms, unhealthy at the first failure): from the failure's cause
    /// to the healthy successor's `elected`, and the leaderless gap.
    Health,
    /// Nothing happens: what the leader and each follower cost the
    /// servers, in requests per second, at each of [`STEADY_SIZES`]
    /// (see `steady.rs`).
    Steady,
}

/// The candidate processes the steady scenario counts at each TTL.
pub const STEADY_SIZES: [usize; 3] = [1, 3, 30];

impl Scenario {
    pub const ALL: [Scenario; 18] = [
        Scenario::Election,
        Scenario::Handover,
        Scenario::Failover,
        Scenario::FailoverNext,
        Scenario::Freeze,
        Scenario::Cutoff,
        Scenario::MemberKill,
        Scenario::RollingRestart,
        Scenario::ServiceLeaderKill,
        Scenario::Compaction,
        Scenario::Churn,
        Scenario::Scale,
        Scenario::ScaleProcesses,
        Scenario::Elections,
        Scenario::Switchover,
        Scenario::SwitchoverLast,
        Scenario::Health,
        Scenario::Steady,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Scenario::Election => "election",
            Scenario::Handover => "handover",
            Scenario::Failover => "failover",
            Scenario::FailoverNext => "failover-next",
            Scenario::Freeze => "freeze",
            Scenario::Cutoff => "cutoff",
            Scenario::MemberKill => "member-kill",
            Scenario::RollingRestart => "rolling-restart",
            Scenario::ServiceLeaderKill => "service-leader-kill",
            Scenario::Compaction => "compaction",
            Scenario::Churn => "churn",
            Scenario::Scale => "scale",
            Scenario::ScaleProcesses => "scale-processes",
            Scenario::Elections => "elections",
            Scenario::Switchover => "switchover",
            Scenario::SwitchoverLast => "switchover-last",
            Scenario::Health => "health",
            Scenario::Steady => "steady",
        }
    }

    pub fn parse(text: &str) -> Option<Scenario> {
        Scenario::ALL.into_iter().find(|s| s.name() == text)
    }

    /// Trials when `--trials` is not given: many where a trial takes
    /// milliseconds, few where it waits out a TTL.
    pub fn default_trials(self, quick: bool) -> usize {
        match (self, quick) {
            (Scenario::Handover, false) => 200,
            (Scenario::Handover, true) => 10,
            (Scenario::Switchover | Scenario::SwitchoverLast, false) => 50,
            (Scenario::Switchover | Scenario::SwitchoverLast, true) => 5,
            (Scenario::Health, false) => 20,
            (Scenario::Health, true) => 3,
            (Scenario::Election | Scenario::Churn, false) => 20,
            (Scenario::Election | Scenario::Churn, true) => 3,
            (
                Scenario::Failover | Scenario::FailoverNext | Scenario::Freeze | Scenario::Cutoff,
                false,
            ) => 10,
            (
                Scenario::Failover | Scenario::FailoverNext | Scenario::Freeze | Scenario::Cutoff,
                true,
            ) => 2,
            (Scenario::Scale | Scenario::ScaleProcesses, false) => 20,
            (Scenario::Scale, true) => 5,
            (Scenario::ScaleProcesses, true) => 3,
            // One run of --elections elections.
            (Scenario::Elections, _) => 1,
            // A count per size and TTL (see steady.rs): not trials.
            (Scenario::Steady, _) => STEADY_SIZES.len(),
            (_, false) => 3,
            (_, true) => 1,
        }
    }

    /// Whether `imp` can take part: the peers' tools hold leadership but run
    /// no command, so the fenced-store scenarios are elect's alone, and
    /// `etcdctl elect`'s 60 s session makes its failover a minute a trial.
    pub fn supports(self, imp: Implementation) -> Result<(), &'static str> {
        match (self, imp) {
            (_, Implementation::Elect) => Ok(()),
            (s, _) if s.operates() => Ok(()),
            (_, Implementation::Peer(Peer::CuratorSession)) => Err(
                "measured in the operations scenarios (member-kill, rolling-restart, service-leader-kill)",
            ),
            (Scenario::Election | Scenario::Handover | Scenario::Steady, _) => Ok(()),
            (Scenario::Switchover | Scenario::SwitchoverLast, _) => Err(
                "no switchover on this service: its users SIGTERM the leader and hope the next is the one (the handover row)",
            ),
            (Scenario::Health, _) => Err(
                "no health gate in this tool: its users stop the leader when its check fails (the handover row)",
            ),
            (Scenario::ScaleProcesses, _) => {
                Err("elect's candidates only (the peers' tools hand over in handover)")
            }
            (Scenario::Failover | Scenario::FailoverNext, Implementation::Peer(Peer::Etcdctl)) => {
                Err("etcdctl elect's session TTL is fixed at 60 s")
            }
            (Scenario::Failover | Scenario::FailoverNext, _) => Ok(()),
            _ => Err("runs elect's wrapped command against the fenced store (elect only)"),
        }
    }

    /// Whether a command writing through the fenced store runs under each
    /// leader of `imp`, so overlap, stale writes and restarts are checked.
    pub fn fenced(self, imp: Implementation) -> bool {
        matches!(self, Scenario::Freeze | Scenario::Cutoff | Scenario::Churn)
            || (self.operates() && imp == Implementation::Elect)
    }

    /// Whether it runs elect's library in this process (scale, elections)
    /// rather than candidate processes.
    pub fn in_process(self) -> bool {
        matches!(self, Scenario::Scale | Scenario::Elections)
    }

    /// Whether members of the service restart during it.
    pub fn restarts_members(self) -> bool {
        matches!(
            self,
            Scenario::MemberKill | Scenario::RollingRestart | Scenario::ServiceLeaderKill
        )
    }

    /// Whether it is one of the operations on the service (member restarts
    /// and kills) that should cost no leadership.
    pub fn operates(self) -> bool {
        matches!(
            self,
            Scenario::MemberKill
                | Scenario::RollingRestart
                | Scenario::ServiceLeaderKill
                | Scenario::Compaction
        )
    }
}

/// What the scenario needs.
pub struct Setup<'a> {
    pub contender: &'a Contender,
    /// etcd or ZooKeeper members.
    pub endpoints: &'a str,
    pub probe: Option<&'a Probe>,
    /// The lab, when compare started it (member-kill needs one).
    pub lab: Option<&'a RefCell<Lab>>,
    pub raft_peers: usize,
    pub candidates: usize,
    pub trials: usize,
    pub progress: &'a Progress,
    pub seed: u64,
    /// The steady scenario's long TTL and thousand candidates are
    /// counted (not in a quick run).
    pub steady_in_full: bool,
}

/// What one scenario measured.
#[derive(Default)]
pub struct Outcome {
    pub samples: Vec<Duration>,
    /// Leader changes the scenario caused.
    pub changes: usize,
    /// The largest overlap of two tenures, when a fenced command ran.
    pub max_overlap: Option<Duration>,
    /// Stale writes the fenced store accepted, when a fenced command ran.
    pub stale_accepted: Option<usize>,
    /// Server counters over the scenario (etcd and ZooKeeper).
    pub counters: Option<Counters>,
    /// The counters when the measured part began, if not at the start.
    pub counters_from: Option<Counters>,
    /// The counters when the measured part ended, if not at the end: the
    /// candidates' leaving afterwards is no leader change (with N
    /// followers each seeing every key go, it would cost N²/2).
    pub counters_to: Option<(Counters, Instant)>,
    /// The steady state's counts per second (every candidate's renewals),
    /// and when the measured part began: the counters are net of it
    /// (`scale-processes`, where N candidates' renewals would outnumber
    /// a change's own requests).
    pub idle: Option<(Counters, Instant)>,
    /// Campaign wake-ups elect candidates logged (etcd and ZooKeeper).
    pub wakeups: Option<usize>,
    /// Terms elect candidates began with no read of their own after
    /// their predecessor's end (etcd and ZooKeeper).
    pub led_without_read: Option<usize>,
    /// Raft terms per leader change, where tokens are terms.
    pub terms_per_change: Option<f64>,
    /// What the operations scenarios count.
    pub operations: Option<Operations>,
    /// Said beside the row.
    pub notes: Vec<String>,
}

/// What an operation on the service cost the election.
#[derive(Default, Debug, Clone)]
pub struct Operations {
    /// Leadership lost while every session or lease lived.
    pub spurious_losses: usize,
    /// The leader's command started again (elect, from the fenced store).
    pub command_restarts: Option<usize>,
    /// Time without a known leader.
    pub leaderless: Duration,
}

/// Runs `scenario`.
pub fn run(scenario: Scenario, setup: &Setup<'_>) -> anyhow::Result<Outcome> {
    let before = setup.probe.map(Probe::counters);
    let mut outcome = match scenario {
        Scenario::Election => election(setup)?,
        Scenario::Handover => succession(setup, Scenario::Handover, Signal::SIGTERM)?,
        Scenario::ScaleProcesses => succession(setup, Scenario::ScaleProcesses, Signal::SIGTERM)?,
        Scenario::Failover => succession(setup, Scenario::Failover, Signal::SIGKILL)?,
        Scenario::FailoverNext => succession(setup, Scenario::FailoverNext, Signal::SIGKILL)?,
        Scenario::Freeze => freeze(setup)?,
        Scenario::Cutoff => cutoff(setup)?,
        Scenario::MemberKill
        | Scenario::RollingRestart
        | Scenario::ServiceLeaderKill
        | Scenario::Compaction => operation(setup, scenario)?,
        Scenario::Churn => churn(setup)?,
        Scenario::Switchover => switchover(setup, Place::Second)?,
        Scenario::SwitchoverLast => switchover(setup, Place::Last)?,
        Scenario::Health => health(setup)?,
        Scenario::Scale => unreachable!("scale runs in-process: see scale.rs"),
        Scenario::Elections => unreachable!("elections runs in-process: see elections.rs"),
        Scenario::Steady => unreachable!("steady counts rates: see steady.rs"),
    };
    if let (Some(probe), Some(before)) = (setup.probe, before) {
        let from = outcome.counters_from.take().unwrap_or(before);
        // A member that restarts counts from zero again, and one that does
        // not answer counts for nothing: the difference would not be what
        // the scenario cost.
        outcome.counters = if scenario.restarts_members() {
            None
        } else {
            let (to, ended) = outcome
                .counters_to
                .take()
                .unwrap_or_else(|| (probe.counters(), Instant::now()));
            let counted = to.since(from);
            match outcome.idle {
                Some((rate, from)) => counted.map(|c| c.net_of(rate, ended - from)),
                None => counted,
            }
        };
        if outcome.counters.is_none() {
            outcome.notes.push(
                "notif/chg and req/chg not measured: the servers' counters start again \
                 from zero when a member restarts (or count nothing when one does not answer)"
                    .into(),
            );
        }
    }
    Ok(outcome)
}

fn arena<'a>(
    setup: &'a Setup<'a>,
    scenario: Scenario,
    n: usize,
    reach: Reach,
) -> anyhow::Result<Arena<'a>> {
    Arena::new(
        setup.contender,
        setup.contender.election(scenario.name(), n),
        setup.endpoints,
        setup.probe,
        setup.raft_peers,
        scenario.fenced(setup.contender.imp),
        reach,
        scenario.operates(),
    )
}

/// How many candidates take part: the Raft peers, or `--candidates`.
fn size(setup: &Setup<'_>) -> usize {
    match setup.contender.backend {
        Backend::Raft => setup.raft_peers,
        _ => setup.candidates,
    }
}

/// Starts every candidate and waits until one leads and all are queued.
/// etcd and ZooKeeper candidates start one at a time, so that the queue
/// keeps the order of the slots (failover-next's first in line is the
/// next live slot after the leader's).
pub(crate) fn populate(a: &mut Arena<'_>, n: usize) -> anyhow::Result<(usize, Option<u64>)> {
    for queued in 1..=n {
        a.spawn()?;
        // (For Raft peers, which have no queue, this returns at once.)
        a.wait_queued(queued)?;
    }
    let (leader, _, token) = a.wait_elected(None, SOON)?;
    written(a, token);
    let leader = queue_all(a, n, leader)?;
    Ok((leader, token))
}

/// Waits until all `n` candidates are queued; for Raft until every peer
/// names one leader. Who leads: `leader`, or for Raft whoever the peers
/// agree on (see `Arena::wait_agreed`).
fn queue_all(a: &mut Arena<'_>, n: usize, leader: usize) -> anyhow::Result<usize> {
    a.wait_queued(n)?;
    a.wait_agreed(leader)
}

/// How long candidates that were told to leave (SIGTERM) may take to
/// remove their keys or znodes.
const LEAVE_WITHIN: Duration = Duration::from_secs(10);

fn election(setup: &Setup<'_>) -> anyhow::Result<Outcome> {
    let mut out = Outcome::default();
    let n = size(setup);
    let mut left_behind = 0;
    for t in 0..setup.trials {
        let mut a = arena(setup, Scenario::Election, t, Reach::Direct)?;
        let start = Instant::now();
        for _ in 0..n {
            a.spawn()?;
        }
        let (leader, at, _) = a.wait_elected(None, SOON)?;
        out.samples.push(at - start);
        // Everyone in place before they leave, so each resigns cleanly
        // (a tool signalled while still connecting may leave its session
        // to expire).
        queue_all(&mut a, n, leader)?;
        drop(a);
        if let Some(probe) = setup.probe {
            // Each trial has an election of its own, so what a candidate
            // leaves behind only costs the server until its lease or
            // session ends: said beside the row, not fatal to the run.
            let election = setup.contender.election(Scenario::Election.name(), t);
            let cleared = elect_lab::poll(LEAVE_WITHIN, || {
                (probe.queued(&election) == Some(0)).then_some(())
            });
            left_behind += usize::from(cleared.is_none());
        }
        setup.progress.inc();
    }
    if left_behind > 0 {
        out.notes.push(format!(
            "in {left_behind} of {} trials a candidate's key or znode outlived it by more than \
             {LEAVE_WITHIN:?} after SIGTERM (left to its lease or session)",
            setup.trials
        ));
    }
    out.changes = setup.trials;
    Ok(out)
}

/// Unmeasured handovers before the measured ones: the first after an
/// ensemble starts run on cold servers (a JVM not yet compiled, caches
/// empty) and would bill whoever goes first. Failovers, which take a TTL,
/// are not warmed.
pub(super) const HANDOVER_WARMUP: usize = 10;

/// Handover and failover: signal the leader (and for failover-next the
/// first in line), time the successor, bring the numbers back up (new
/// candidates; the same Raft peers on their data), repeat.
fn succession(setup: &Setup<'_>, scenario: Scenario, sig: Signal) -> anyhow::Result<Outcome> {
    let mut out = Outcome::default();
    let n = size(setup);
    let mut a = arena(setup, scenario, 0, Reach::Direct)?;
    let (mut leader, mut token) = populate(&mut a, n)?;
    let mut terms = 0u64;
    let warmup = match scenario {
        Scenario::Handover | Scenario::ScaleProcesses if setup.trials > 0 => HANDOVER_WARMUP,
        _ => 0,
    };
    let mut counted_before = CampaignCounts::default();
    let crash = matches!(scenario, Scenario::Failover | Scenario::FailoverNext);
    let mut phase = Xorshift::seeded(setup.seed);
    for trial in 0..warmup + setup.trials {
        let measured = trial >= warmup;
        if trial == warmup && warmup > 0 {
            if scenario == Scenario::ScaleProcesses
                && let Some(probe) = setup.probe
            {
                out.idle = probe.idle_rate().map(|rate| (rate, Instant::now()));
            }
            out.counters_from = setup.probe.map(Probe::counters);
            counted_before = a.campaign_counts();
        }
        let first_in_line = match scenario {
            Scenario::FailoverNext => Some(a.first_in_line(leader)?),
            _ => None,
        };
        if crash {
            // A host dies at any point of its renewal cycle. Killed as soon
            // as the candidates are back, the leader would die at the same
            // point of it every trial (the trials follow each other at the
            // server's own expiry ticks), and the samples would measure that
            // point, not a crash.
            std::thread::sleep(phase.within(setup.contender.ttl));
        }
        let sent = Instant::now();
        a.signal(leader, sig);
        if let Some(first) = first_in_line {
            a.signal(first, sig);
        }
        let (next, at, next_token) = a.wait_elected(Some(leader), SOON)?;
        if measured {
            out.samples.push(at - sent);
            if let (Some(t0), Some(t1)) = (token, next_token) {
                terms += t1.saturating_sub(t0);
            }
        }
        a.reap(leader)?;
        if let Some(first) = first_in_line {
            a.reap(first)?;
            // One at a time, so the queue keeps the order of the slots.
            a.spawn()?;
            a.wait_queued(n - 1)?;
        }
        a.spawn()?;
        leader = queue_all(&mut a, n, next)?;
        token = next_token;
        if measured {
            setup.progress.inc();
        }
    }
    out.counters_to = setup.probe.map(|p| (p.counters(), Instant::now()));
    out.changes = setup.trials;
    if setup.contender.backend == Backend::Raft && setup.trials > 0 {
        out.terms_per_change = Some(terms as f64 / setup.trials as f64);
    }
    count_campaigns_since(&mut a, &mut out, counted_before);
    Ok(out)
}

/// Where a switchover's target stands in line.
#[derive(Clone, Copy)]
enum Place {
    Second,
    Last,
}

/// Switchover: each trial reads the line (`elect candidates`), asks for
/// a switchover to the candidate at `place`, and times the target's
/// `elected` from the request; the old leader's `demoted` to it is the
/// leaderless gap. Everyone stays: the old leader queues again.
fn switchover(setup: &Setup<'_>, place: Place) -> anyhow::Result<Outcome> {
    let mut out = Outcome::default();
    let n = size(setup).max(3);
    let scenario = match place {
        Place::Second => Scenario::Switchover,
        Place::Last => Scenario::SwitchoverLast,
    };
    let mut a = arena(setup, scenario, 0, Reach::Direct)?;
    let (mut leader, _) = populate(&mut a, n)?;
    let mut gaps = Vec::new();
    for trial in 0..HANDOVER_WARMUP.min(3) + setup.trials {
        let measured = trial >= HANDOVER_WARMUP.min(3);
        let line = a.line()?;
        let target_id = match place {
            Place::Second => line.get(1),
            Place::Last => line.last(),
        }
        .context("nobody in line behind the leader")?
        .clone();
        let target = a
            .slot_of(&target_id)
            .with_context(|| format!("{target_id} is in line but not ours"))?;
        let sent = Instant::now();
        let mut asked = a.switchover(&target_id)?;
        let (next, at, _) = a.wait_elected(Some(leader), SOON)?;
        let status = asked.wait()?;
        anyhow::ensure!(
            status.success(),
            "elect switchover to {target_id} failed: {status}"
        );
        anyhow::ensure!(
            next == target,
            "{} led, not the target {target_id}",
            a.slots[next].as_ref().map_or("?", |s| s.id.as_str())
        );
        if measured {
            out.samples.push(at - sent);
            if let Some(demoted) = a.said_demoted_after(leader, sent) {
                gaps.push(at.saturating_duration_since(demoted));
            }
            setup.progress.inc();
        }
        leader = next;
        a.wait_queued(n)?;
    }
    if !gaps.is_empty() {
        gaps.sort();
        let p = |q: f64| gaps[((gaps.len() - 1) as f64 * q).round() as usize];
        out.notes.push(format!(
            "leaderless gap (the old leader's demoted to the target's elected): p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
            p(0.5).as_secs_f64() * 1e3,
            p(0.99).as_secs_f64() * 1e3,
            gaps[gaps.len() - 1].as_secs_f64() * 1e3
        ));
    }
    out.changes = setup.trials;
    Ok(out)
}

/// Health: each trial makes the leader's health check fail (its marker
/// file created) and times the healthy successor's `elected` from then:
/// up to one check interval (200 ms) to the check that fails, then the
/// leader's hand-over. The old leader's marker is removed, and it counts
/// as healthy again a second later (its backoff), before the next trial;
/// with equal priorities nothing moves back to it.
fn health(setup: &Setup<'_>) -> anyhow::Result<Outcome> {
    let mut out = Outcome::default();
    let n = size(setup).max(3);
    let mut a = arena(setup, Scenario::Health, 0, Reach::Direct)?;
    let dir = std::env::temp_dir().join(format!(
        "elect-compare-health-{}-{}",
        setup.contender.backend.name(),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).context("creating the health markers' directory")?;
    a.health = Some(dir.clone());
    let (mut leader, _) = populate(&mut a, n)?;
    let mut gaps = Vec::new();
    let warmup = HANDOVER_WARMUP.min(2);
    // Where in its check interval the leader's check is made to fail:
    // anywhere. Raft-vote's peers start together, their checks in step,
    // and a fixed pause between trials would put every marker just after
    // a check (a whole interval's wait each time).
    let mut from_check = Vec::new();
    let mut phase = Xorshift::seeded(setup.seed);
    let interval = humantime::parse_duration(crate::arena::HEALTH_INTERVAL).expect("a duration");
    for trial in 0..warmup + setup.trials {
        let marker = a
            .health_marker(leader)
            .context("the leader has no marker")?;
        let failed = Instant::now();
        std::fs::write(&marker, b"").context("creating a health marker")?;
        let waited = a.wait_elected(Some(leader), SOON);
        let _ = std::fs::remove_file(&marker);
        let (next, at, _) = waited?;
        if trial >= warmup {
            out.samples.push(at - failed);
            if let Some(demoted) = a.said_demoted_after(leader, failed) {
                gaps.push(at.saturating_duration_since(demoted));
            }
            if let Some(seen) = a.said_unhealthy_after(leader, failed) {
                from_check.push(at.saturating_duration_since(seen));
            }
            setup.progress.inc();
        }
        leader = next;
        a.wait_queued(n)?;
        // The old leader's backoff (its failback delay), a check, and
        // the next marker's place in the interval.
        std::thread::sleep(Duration::from_millis(1_400) + phase.within(interval));
    }
    let _ = std::fs::remove_dir_all(&dir);
    for (what, mut spans) in [
        (
            "from the failed check (the leader's health line) to the healthy successor's elected",
            from_check,
        ),
        (
            "leaderless gap (the old leader's demoted to the successor's elected)",
            gaps,
        ),
    ] {
        if spans.is_empty() {
            continue;
        }
        spans.sort();
        let p = |q: f64| spans[((spans.len() - 1) as f64 * q).round() as usize];
        out.notes.push(format!(
            "{what}: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms (samples: from the marker, a check every {})",
            p(0.5).as_secs_f64() * 1e3,
            p(0.99).as_secs_f64() * 1e3,
            spans[spans.len() - 1].as_secs_f64() * 1e3,
            crate::arena::HEALTH_INTERVAL,
        ));
    }
    out.changes = setup.trials;
    Ok(out)
}

/// Wake-ups the arena's elect candidates counted (etcd and ZooKeeper).
fn count_wakeups(a: &mut Arena<'_>, out: &mut Outcome) {
    count_campaigns_since(a, out, CampaignCounts::default());
}

/// What the arena's elect candidates counted since `before` (etcd and
/// ZooKeeper): wake-ups, and terms begun without a read.
fn count_campaigns_since(a: &mut Arena<'_>, out: &mut Outcome, before: CampaignCounts) {
    if a.contender.imp == Implementation::Elect && a.peers().is_none() {
        let counted = a.campaign_counts() - before;
        out.wakeups = Some(counted.wakeups);
        out.led_without_read = Some(counted.led_without_read);
    }
}

/// Fills in overlap and stale writes from the fenced store's history.
fn judge(a: &Arena<'_>, out: &mut Outcome) -> anyhow::Result<()> {
    if let Some(store) = &a.store {
        let intervals = store.intervals();
        // A check of nothing would pass: the leaders' commands must have
        // written, one tenure per leader at least.
        if intervals.len() <= out.changes {
            anyhow::bail!(
                "the fenced store saw {} tenures ({}) for {} leader changes: the leaders' \
                 commands did not write",
                intervals.len(),
                intervals
                    .iter()
                    .map(|i| format!("{} token {}", i.id, i.token))
                    .collect::<Vec<_>>()
                    .join(", "),
                out.changes
            );
        }
        let verdict = check(&intervals, Instant::now());
        out.max_overlap = Some(verdict.max_overlap);
        out.stale_accepted = Some(store.stale_accepted());
    }
    Ok(())
}

fn freeze(setup: &Setup<'_>) -> anyhow::Result<Outcome> {
    let mut out = Outcome::default();
    let n = size(setup).max(2);
    let mut a = arena(setup, Scenario::Freeze, 0, Reach::Direct)?;
    let (mut leader, _) = populate(&mut a, n)?;
    for _ in 0..setup.trials {
        let tree = a.tree(leader);
        let stopped = Instant::now();
        for &pid in &tree {
            signal_pid(pid, Signal::SIGSTOP);
        }
        let waited = a.wait_elected(Some(leader), SOON);
        // The new leader writes before the old one thaws: the worst case,
        // where only fencing stops the old command's next write.
        if let (Ok((_, _, Some(token))), Some(store)) = (&waited, &a.store) {
            store.wait_written(*token, SOON);
        }
        for &pid in &tree {
            signal_pid(pid, Signal::SIGCONT);
        }
        let (next, at, _) = waited?;
        out.samples.push(at - stopped);
        // The thawed leader finds its deadline passed, kills its command
        // and campaigns again behind the new leader.
        leader = queue_all(&mut a, n, next)?;
        setup.progress.inc();
    }
    out.changes = setup.trials;
    judge(&a, &mut out)?;
    count_wakeups(&mut a, &mut out);
    Ok(out)
}

fn cutoff(setup: &Setup<'_>) -> anyhow::Result<Outcome> {
    let mut out = Outcome::default();
    let n = size(setup).max(2);
    let mut a = arena(setup, Scenario::Cutoff, 0, Reach::Proxied)?;
    let (mut leader, _) = populate(&mut a, n)?;
    for _ in 0..setup.trials {
        let cut = Instant::now();
        a.cut(leader, true);
        let waited = a.wait_elected(Some(leader), SOON);
        let (next, at, token) = match waited {
            Ok(v) => v,
            Err(e) => {
                a.cut(leader, false);
                return Err(e);
            }
        };
        out.samples.push(at - cut);
        a.cut(leader, false);
        written(&a, token);
        leader = queue_all(&mut a, n, next)?;
        setup.progress.inc();
    }
    out.changes = setup.trials;
    judge(&a, &mut out)?;
    count_wakeups(&mut a, &mut out);
    Ok(out)
}

/// An operation on the service, `trials` times: members killed or
/// restarted while `--candidates` candidates (elect: running a command
/// through the fenced store) campaign. What it cost is read from the
/// candidates' lines over the operation and one TTL after; then the
/// leader resigns, and a sample is that handover, right after the
/// operation, when connections to restarted members may fail on first use.
fn operation(setup: &Setup<'_>, scenario: Scenario) -> anyhow::Result<Outcome> {
    let mut out = Outcome::default();
    let mut ops = Operations {
        command_restarts: a_store(setup, scenario).then_some(0),
        ..Operations::default()
    };
    let n = size(setup);
    let mut a = arena(setup, scenario, 0, Reach::Direct)?;
    let (mut leader, _) = populate(&mut a, n)?;
    let ttl = setup.contender.ttl;
    for _ in 0..setup.trials {
        let started = Instant::now();
        let tenures = a.store.as_ref().map(|s| s.intervals().len());
        let expected_handovers = match scenario {
            Scenario::Compaction => {
                compact_and_defragment(setup.endpoints)?;
                0
            }
            _ if a.peers().is_some() => raft_operation(&mut a, scenario, leader)?,
            _ => {
                service_operation(setup, &mut a, scenario, leader)?;
                0
            }
        };
        // One TTL more: a loss the operation caused shows by then.
        std::thread::sleep(ttl);
        leader = ops
            .count(&mut a, started, leader, tenures, expected_handovers)
            .unwrap_or(leader);
        leader = hand_over(&mut a, &mut out, leader)?;
        // A waiter whose wait started below a compacted revision may give
        // up (`etcdctl elect` exits: "required revision has been
        // compacted"): a loss of candidacy, said beside the row, and
        // replaced so the queue is whole again.
        for exited in a.reap_exited() {
            ops.spurious_losses += 1;
            out.notes.push(exited);
        }
        while a.peers().is_none() && a.live().len() < n {
            a.spawn()?;
        }
        if a.peers().is_none() {
            a.wait_queued(n)?;
        }
        setup.progress.inc();
    }
    finish_operations(&mut a, out, ops)
}

/// SIGTERM to the leader: the time to its successor's `elected` is a
/// sample; the leader comes back as a candidate (Raft: the peer restarts
/// and follows). The new leader.
fn hand_over(a: &mut Arena<'_>, out: &mut Outcome, leader: usize) -> anyhow::Result<usize> {
    let resigned = Instant::now();
    a.signal(leader, Signal::SIGTERM);
    a.reap(leader)?;
    let (next, at, token) = a.wait_elected(Some(leader), SOON)?;
    out.samples.push(at - resigned);
    out.changes += 1;
    written(a, token);
    if a.peers().is_some() {
        a.spawn()?;
    }
    a.wait_agreed(next)
}

impl Operations {
    /// Adds what the time since `started` cost, `leader` leading then,
    /// `expected` handovers being the operation's own; who leads now.
    fn count(
        &mut self,
        a: &mut Arena<'_>,
        started: Instant,
        leader: usize,
        tenures_before: Option<usize>,
        expected: usize,
    ) -> Option<usize> {
        let cost = a.cost_since(started, leader);
        self.spurious_losses += cost.losses.saturating_sub(expected);
        self.leaderless += cost.leaderless;
        if let (Some(restarts), Some(before)) = (self.command_restarts.as_mut(), tenures_before) {
            let after = a.store.as_ref().map_or(0, |s| s.intervals().len());
            *restarts += after.saturating_sub(before + expected);
        }
        cost.leader
    }
}

/// The fenced store's verdict and the wake-ups, with what the operations
/// cost.
fn finish_operations(
    a: &mut Arena<'_>,
    mut out: Outcome,
    ops: Operations,
) -> anyhow::Result<Outcome> {
    if a.store.is_some() {
        judge(a, &mut out)?;
    }
    count_wakeups(a, &mut out);
    out.operations = Some(ops);
    Ok(out)
}

/// Compacts etcd's keyspace to its current revision (physically) and
/// defragments every member, with `etcdctl` as an operator would.
fn compact_and_defragment(endpoints: &str) -> anyhow::Result<()> {
    let etcdctl = |args: &[&str]| -> anyhow::Result<String> {
        let out = std::process::Command::new(elect_lab::etcd_release::program("etcdctl"))
            .env("ETCDCTL_API", "3")
            .arg("--endpoints")
            .arg(endpoints)
            .args(args)
            .output()
            .context("running etcdctl (apt-get install etcd-client)")?;
        anyhow::ensure!(
            out.status.success(),
            "etcdctl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let status: serde_json::Value =
        serde_json::from_str(&etcdctl(&["endpoint", "status", "-w", "json"])?)
            .context("etcdctl endpoint status")?;
    let revision = status
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["Status"]["header"]["revision"].as_i64())
        .max()
        .context("no revision in etcdctl endpoint status")?;
    etcdctl(&["compact", &revision.to_string(), "--physical"])?;
    etcdctl(&["defrag"])?;
    Ok(())
}

/// Whether elect's candidates run a command through the fenced store.
fn a_store(setup: &Setup<'_>, scenario: Scenario) -> bool {
    scenario.fenced(setup.contender.imp)
}

/// Kills or restarts etcd or ZooKeeper members as `scenario` says.
fn service_operation(
    setup: &Setup<'_>,
    a: &mut Arena<'_>,
    scenario: Scenario,
    leader: usize,
) -> anyhow::Result<()> {
    let lab = setup
        .lab
        .context("operations need a lab that compare started")?;
    let role = if setup.contender.backend == Backend::Etcd {
        Role::Etcd
    } else {
        Role::Zk
    };
    let members: Vec<(String, String)> = lab
        .borrow()
        .members()
        .iter()
        .filter(|m| m.role == role)
        .map(|m| (m.name.clone(), m.client.clone()))
        .collect();
    let victims: Vec<String> = match scenario {
        Scenario::RollingRestart => members.iter().map(|(name, _)| name.clone()).collect(),
        Scenario::MemberKill => {
            let first = a.first_member(leader).context("the leader's member")?;
            let name = members
                .iter()
                .find(|(_, client)| *client == first)
                .map(|(name, _)| name.clone())
                .with_context(|| format!("no lab member serves {first}"))?;
            vec![name]
        }
        Scenario::ServiceLeaderKill => {
            let led = elect_lab::poll(SOON, || {
                members
                    .iter()
                    .find(|(_, client)| elect_lab::is_service_leader(role, client))
                    .map(|(name, _)| name.clone())
            })
            .context("the ensemble has no leader")?;
            vec![led]
        }
        _ => unreachable!("not an operation"),
    };
    for name in victims {
        lab.borrow_mut().fault(Fault::Kill, &name)?;
        if scenario == Scenario::MemberKill {
            // Down for longer than the TTL: a leader that needs this member
            // would lose its session or lease meanwhile.
            std::thread::sleep(setup.contender.ttl + Duration::from_millis(500));
        }
        lab.borrow_mut().fault(Fault::Restart, &name)?;
        wait_member_healthy(lab, &name, role)?;
    }
    Ok(())
}

/// Restarts Raft-vote peers as `scenario` says; how many handovers that
/// needs (the leader's own clean exit hands over once).
fn raft_operation(a: &mut Arena<'_>, scenario: Scenario, leader: usize) -> anyhow::Result<usize> {
    let followers: Vec<usize> = a.live().into_iter().filter(|&i| i != leader).collect();
    let (victims, handovers) = match scenario {
        Scenario::RollingRestart => {
            let mut all = followers;
            all.push(leader);
            (all, 1)
        }
        Scenario::MemberKill => (followers.into_iter().take(1).collect(), 0),
        _ => bail!("the Raft-vote peers are the service: no other leader to kill"),
    };
    let mut leads = leader;
    for i in victims {
        let sig = if scenario == Scenario::RollingRestart {
            Signal::SIGTERM
        } else {
            Signal::SIGKILL
        };
        a.signal(i, sig);
        a.reap(i)?;
        if i == leads {
            leads = a.wait_elected(Some(i), SOON)?.0;
        }
        a.spawn()?;
        leads = a.wait_agreed(leads)?;
    }
    Ok(handovers)
}

fn wait_member_healthy(lab: &RefCell<Lab>, name: &str, role: Role) -> anyhow::Result<()> {
    let address = lab.borrow().member(name)?.health_address().to_owned();
    elect_lab::poll(SOON, || elect_lab::healthy(role, &address).then_some(()))
        .with_context(|| format!("{name} did not come back within {SOON:?}"))
}

/// `trials` departures of a random candidate (SIGTERM; the leader at
/// least every third time), each replaced by a newcomer; the leader's
/// departures are timed.
fn churn(setup: &Setup<'_>) -> anyhow::Result<Outcome> {
    let mut out = Outcome::default();
    let n = size(setup).max(2);
    let mut a = arena(setup, Scenario::Churn, 0, Reach::Direct)?;
    let (mut leader, _) = populate(&mut a, n)?;
    let mut rng = Xorshift::seeded(setup.seed);
    for step in 0..setup.trials {
        let live = a.live();
        // At random, but the leader at least every third step, so even a
        // short run times some handovers.
        let victim = if step % 3 == 2 {
            leader
        } else {
            live[rng.below(live.len() as u64) as usize]
        };
        let sent = Instant::now();
        a.signal(victim, Signal::SIGTERM);
        if victim == leader {
            let (next, at, token) = a.wait_elected(Some(leader), SOON)?;
            out.samples.push(at - sent);
            written(&a, token);
            out.changes += 1;
            leader = next;
        }
        a.reap(victim)?;
        a.spawn()?;
        leader = queue_all(&mut a, n, leader)?;
        setup.progress.inc();
    }
    if out.samples.is_empty() {
        out.notes
            .push("the leader was never among those who left".into());
    }
    judge(&a, &mut out)?;
    count_wakeups(&mut a, &mut out);
    Ok(out)
}

/// Waits until the new leader's command wrote with its token, so its
/// tenure is on record before the next blow (or the verdict).
fn written(a: &Arena<'_>, token: Option<u64>) {
    if let (Some(store), Some(token)) = (&a.store, token) {
        store.wait_written(token, SOON);
    }
}

fn signal_pid(pid: i32, sig: Signal) {
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig);
}

/// Fails unless `out` is safe: no stale write accepted, and no overlap
/// outside `freeze` (where the frozen leader's connection stays open while
/// it cannot act: the store's fencing is what keeps it harmless).
pub fn safety_violation(scenario: Scenario, out: &Outcome) -> Option<String> {
    if let Some(n) = out.stale_accepted.filter(|&n| n > 0) {
        return Some(format!("{n} stale writes accepted"));
    }
    match out.max_overlap {
        Some(d) if scenario != Scenario::Freeze && !d.is_zero() => {
            Some(format!("tenures overlapped by {d:?}"))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlap_outside_freeze_and_any_stale_write_are_violations() {
        let overlapping = Outcome {
            max_overlap: Some(Duration::from_millis(3)),
            stale_accepted: Some(0),
            ..Outcome::default()
        };
        assert!(safety_violation(Scenario::Cutoff, &overlapping).is_some());
        // A frozen leader cannot close its connection: fencing is what counts.
        assert!(safety_violation(Scenario::Freeze, &overlapping).is_none());
        let stale = Outcome {
            max_overlap: Some(Duration::ZERO),
            stale_accepted: Some(1),
            ..Outcome::default()
        };
        assert!(safety_violation(Scenario::Freeze, &stale).is_some());
        assert!(safety_violation(Scenario::Handover, &Outcome::default()).is_none());
    }

    #[test]
    fn scenarios_parse_by_their_names() {
        for s in Scenario::ALL {
            assert_eq!(Scenario::parse(s.name()), Some(s));
        }
        assert_eq!(Scenario::parse("crash"), None);
    }
}
