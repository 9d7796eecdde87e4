//! Scenarios of the textbooks, run and averaged: which ids sit where, who
//! initiates, who has failed; one run per seed, means over runs.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;

use super::bully::Bully;
use super::bully_variants::{BullyVariant, Variant};
use super::chang_roberts::ChangRoberts;
use super::engine::{Config, Sim};
use super::hirschberg_sinclair::HirschbergSinclair;
use super::invitation::Invitation;
use super::peterson::Peterson;
use super::raft::{ELECTION_TIMEOUT, RaftProcess};
use super::ring::Ring;
use super::trace::Delivery;
use crate::process::{Pid, Process};
use crate::random::splitmix64;

/// The algorithms the simulator runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Algorithm {
    /// [`super::ring`]: one initiator, Election and Elected.
    Ring,
    /// [`super::chang_roberts`]: everyone initiates.
    ChangRoberts,
    /// [`super::hirschberg_sinclair`]: bidirectional, phases of 2^k hops.
    HirschbergSinclair,
    /// [`super::peterson`]: unidirectional, O(n log n).
    Peterson,
    /// [`super::bully`]: the coordinator has failed; one process detects it.
    Bully,
    /// [`super::bully_variants`]: the detector collects OKs, names the highest.
    BullyModified,
    /// [`super::bully_variants`]: the detector names the first live alternative.
    NextInLine,
    /// [`super::bully_variants`]: only candidates are asked.
    CandidateOrdinary,
    /// [`super::invitation`]: groups that invite and merge.
    Invitation,
    /// [`super::raft`]: the production Raft-vote core, from a cold start.
    Raft,
}

impl Algorithm {
    /// Every algorithm, in the order tables list them.
    pub const ALL: [Algorithm; 10] = [
        Algorithm::Ring,
        Algorithm::ChangRoberts,
        Algorithm::HirschbergSinclair,
        Algorithm::Peterson,
        Algorithm::Bully,
        Algorithm::BullyModified,
        Algorithm::NextInLine,
        Algorithm::CandidateOrdinary,
        Algorithm::Invitation,
        Algorithm::Raft,
    ];

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Ring => "ring",
            Algorithm::ChangRoberts => "chang-roberts",
            Algorithm::HirschbergSinclair => "hirschberg-sinclair",
            Algorithm::Peterson => "peterson",
            Algorithm::Bully => "bully",
            Algorithm::BullyModified => "bully-modified",
            Algorithm::NextInLine => "next-in-line",
            Algorithm::CandidateOrdinary => "candidate-ordinary",
            Algorithm::Invitation => "invitation",
            Algorithm::Raft => "raft",
        }
    }

    /// The algorithm called `name`.
    pub fn parse(name: &str) -> Option<Algorithm> {
        Algorithm::ALL.into_iter().find(|a| a.name() == name)
    }
}

/// Which arrangement of ids and initiators.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Case {
    /// ring: the would-be leader initiates; chang-roberts,
    /// hirschberg-sinclair, peterson: ids increase along the ring; bully:
    /// the second-highest detects the failure.
    Best,
    /// ring: the would-be leader's successor initiates; chang-roberts,
    /// hirschberg-sinclair, peterson: ids decrease along the ring; bully:
    /// the lowest detects.
    Worst,
    /// Ids and the initiator (detector) drawn from the seed.
    Random,
}

/// What to simulate.
#[derive(Clone, Debug)]
pub struct Options {
    /// The algorithm.
    pub algorithm: Algorithm,
    /// Processes (for bully, the failed coordinator included).
    pub nodes: usize,
    /// The arrangement.
    pub case: Case,
    /// Runs to average (with `Random`, each with its own draw).
    pub runs: usize,
    /// The first run's seed; run k uses `seed + k`.
    pub seed: u64,
    /// Keep every message of the first run.
    pub trace: bool,
    /// After the first election, split the processes into a majority and a
    /// minority holding the leader, and have a majority process suspect
    /// the leader (ring, bully, raft).
    pub partition: bool,
    /// After the first election, crash the leader and have its ring
    /// successor suspect it; count only what follows (ring, bully, raft).
    pub crash_leader: bool,
    /// After the first election, for [`SUSPICION_WINDOW`] time units, each
    /// follower's failure detector wrongly suspects the live leader with
    /// this probability at every heartbeat (ring, bully); Raft instead
    /// loses each message with it, the usual cause of false suspicion.
    /// Counts only what follows, and the leader changes it caused.
    pub false_suspicion: Option<f64>,
}

/// How long false suspicion lasts, in time units.
pub const SUSPICION_WINDOW: u64 = 200;
/// How often a failure detector checks (a heartbeat period).
const HEARTBEAT: u64 = 2;

/// Means over the runs, as `elect simulate` prints them.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The algorithm.
    pub algorithm: Algorithm,
    /// Processes.
    pub nodes: usize,
    /// The arrangement.
    pub case: Case,
    /// Runs averaged.
    pub runs: usize,
    /// Messages sent, mean over runs.
    pub messages: f64,
    /// Messages by kind, means.
    pub messages_by_kind: BTreeMap<&'static str, f64>,
    /// Completion, in message transmission times, mean.
    pub time_units: f64,
    /// Ids of the processes that believe they lead at the end of the last run.
    pub leaders: Vec<u64>,
    /// Whether every live process named the same leader in every run.
    pub agreed: bool,
    /// Whether any run ended with more than one leader.
    pub split_brain: bool,
    /// How often a process took leadership after the first election,
    /// mean (with false suspicion): re-elections.
    pub leader_changes: f64,
    /// The first run's messages, with `trace`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub trace: Vec<Delivery>,
    /// The first run's ids in process (ring) order: the trace's lanes.
    #[serde(skip)]
    pub lanes: Vec<u64>,
}

/// The textbooks' three arrangements of ids 1..=n around a ring:
/// increasing, decreasing, and shuffled by `seed`.
#[cfg(test)]
pub(crate) fn arrangements(n: usize, seed: &mut u64) -> [Vec<u64>; 3] {
    let increasing: Vec<u64> = (1..=n as u64).collect();
    let decreasing = increasing.iter().rev().copied().collect();
    [increasing, decreasing, shuffled(n, seed)]
}

/// Ids 1..=n, shuffled by `state` (Fisher-Yates over splitmix64).
pub fn shuffled(n: usize, state: &mut u64) -> Vec<u64> {
    let mut ids: Vec<u64> = (1..=n as u64).collect();
    for i in (1..n).rev() {
        ids.swap(i, (splitmix64(state) % (i as u64 + 1)) as usize);
    }
    ids
}

/// Runs `options.runs` simulations and averages them.
pub fn simulate(options: &Options) -> Report {
    let mut report = Report {
        algorithm: options.algorithm,
        nodes: options.nodes,
        case: options.case,
        runs: options.runs,
        messages: 0.0,
        messages_by_kind: BTreeMap::new(),
        time_units: 0.0,
        leaders: Vec::new(),
        agreed: true,
        split_brain: false,
        leader_changes: 0.0,
        trace: Vec::new(),
        lanes: Vec::new(),
    };
    for run in 0..options.runs {
        let one = run_once(options, run);
        report.add(one, run == 0);
    }
    report.average();
    report
}

impl Report {
    /// Adds one run's numbers; the first run's trace is the one kept.
    fn add(&mut self, one: One, first: bool) {
        self.messages += one.messages as f64;
        for (kind, count) in one.by_kind {
            *self.messages_by_kind.entry(kind).or_default() += count as f64;
        }
        self.time_units += one.completion as f64;
        self.leader_changes += one.leader_changes as f64;
        self.agreed &= one.agreed;
        self.split_brain |= one.split_brain;
        self.leaders = one.leaders;
        if first {
            self.trace = one.trace;
            self.lanes = one.lanes;
        }
    }

    /// The sums of every run, as means.
    fn average(&mut self) {
        let runs = self.runs.max(1) as f64;
        self.messages /= runs;
        self.time_units /= runs;
        self.leader_changes /= runs;
        for v in self.messages_by_kind.values_mut() {
            *v /= runs;
        }
    }
}

/// The `run`-th run (its seed the options' plus `run`; traced if asked,
/// and the first).
fn run_once(options: &Options, run: usize) -> One {
    let seed = options.seed.wrapping_add(run as u64);
    let mut state = seed;
    let cfg = Config {
        seed,
        trace: options.trace && run == 0,
        ..Config::default()
    };
    match options.algorithm {
        Algorithm::Ring => ring(options, cfg, &mut state),
        Algorithm::ChangRoberts | Algorithm::HirschbergSinclair | Algorithm::Peterson => {
            one_way_ring(options, cfg, &mut state)
        }
        Algorithm::Invitation => {
            let n = options.nodes;
            let ids: Arc<[u64]> = match options.case {
                Case::Random => shuffled(n, &mut state).into(),
                _ => (1..=n as u64).collect(),
            };
            let procs = (0..n).map(|i| Invitation::new(ids.clone(), i)).collect();
            finish(Sim::new(procs, cfg), options)
        }
        Algorithm::Raft => raft(options, cfg, seed, &mut state),
        Algorithm::Bully
        | Algorithm::BullyModified
        | Algorithm::NextInLine
        | Algorithm::CandidateOrdinary => bully(options, cfg, &mut state),
    }
}

/// The plain ring: one initiator, the case deciding which.
fn ring(options: &Options, cfg: Config, state: &mut u64) -> One {
    let n = options.nodes;
    let (ids, initiator) = match options.case {
        // The leader (largest id) at the end; its successor is 0.
        Case::Best => ((1..=n as u64).collect(), n - 1),
        Case::Worst => ((1..=n as u64).collect(), 0),
        Case::Random => {
            let ids = shuffled(n, state);
            (ids, (splitmix64(state) % n as u64) as usize)
        }
    };
    let procs = ids
        .iter()
        .enumerate()
        .map(|(i, &id)| Ring::new(id, i == initiator))
        .collect();
    finish(Sim::new(procs, cfg), options)
}

/// Chang-Roberts, Hirschberg-Sinclair and Peterson: every node starts,
/// the case ordering the ids around the ring.
fn one_way_ring(options: &Options, cfg: Config, state: &mut u64) -> One {
    let n = options.nodes;
    let ids: Vec<u64> = match options.case {
        Case::Best => (1..=n as u64).collect(),
        Case::Worst => (1..=n as u64).rev().collect(),
        Case::Random => shuffled(n, state),
    };
    match options.algorithm {
        Algorithm::ChangRoberts => {
            let procs = ids.into_iter().map(ChangRoberts::new).collect();
            finish(Sim::new(procs, cfg), &Options::plain())
        }
        Algorithm::HirschbergSinclair => {
            let procs = ids.into_iter().map(HirschbergSinclair::new).collect();
            finish(Sim::new(procs, cfg), &Options::plain())
        }
        _ => {
            let procs = ids.into_iter().map(Peterson::new).collect();
            finish(Sim::new(procs, cfg), &Options::plain())
        }
    }
}

/// elect's Raft core: settled, then the fault the options ask for.
fn raft(options: &Options, cfg: Config, seed: u64, state: &mut u64) -> One {
    let n = options.nodes;
    // No textbook case: the timeouts are drawn from the seed.
    let ids: Vec<u64> = match options.case {
        Case::Random => shuffled(n, state),
        _ => (1..=n as u64).collect(),
    };
    let procs = (0..n).map(|i| RaftProcess::new(&ids, i, seed)).collect();
    let mut sim = Sim::new(procs, cfg);
    sim.run_until_settled();
    if options.partition && split(&mut sim) {
        sim.run_for(20 * ELECTION_TIMEOUT);
    }
    if let Some(p) = options.false_suspicion {
        let before = (sim.stats().clone(), sim.now());
        sim.set_drop_rate(p);
        sim.track_leader();
        sim.run_for(SUSPICION_WINDOW);
        // Whatever the drops did, let it settle again.
        sim.set_drop_rate(0.0);
        sim.run_until_settled();
        return_since(&mut sim, before)
    } else if options.crash_leader {
        let old = sim.outcome().leaders;
        match crash_leader(&mut sim) {
            Some(before) => {
                sim.run_until(|out| out.agreed && out.leaders.len() == 1 && out.leaders != old);
                return_since(&mut sim, before)
            }
            None => summarize(&sim),
        }
    } else {
        summarize(&sim)
    }
}

/// The bully and its variants: the largest id has failed before the
/// start, and one node (the case says which) detects it.
fn bully(options: &Options, cfg: Config, state: &mut u64) -> One {
    let n = options.nodes;
    let ids: Arc<[u64]> = match options.case {
        Case::Random => shuffled(n, state).into(),
        _ => (1..=n as u64).collect(),
    };
    let failed = ids.iter().position(|&i| i == n as u64).expect("1..=n");
    let detector = match options.case {
        Case::Best => ids.iter().position(|&i| i == n as u64 - 1),
        Case::Worst => ids.iter().position(|&i| i == 1),
        Case::Random => {
            let k = splitmix64(state) % (n as u64 - 1);
            (0..n).filter(|&p| p != failed).nth(k as usize)
        }
    }
    .expect("n >= 2");
    let detects = |i: usize| (i == detector).then_some(failed);
    let variant = match options.algorithm {
        Algorithm::BullyModified => Some(Variant::Modified),
        Algorithm::NextInLine => Some(Variant::NextInLine),
        Algorithm::CandidateOrdinary => Some(Variant::CandidateOrdinary),
        _ => None,
    };
    if let Some(variant) = variant {
        let procs = (0..n)
            .map(|i| BullyVariant::new(ids.clone(), i, variant, detects(i)))
            .collect();
        let mut sim = Sim::new(procs, cfg);
        sim.crash_before_start(failed);
        finish(sim, &Options::plain())
    } else {
        let procs = (0..n)
            .map(|i| Bully::new(ids.clone(), i, detects(i)))
            .collect();
        let mut sim = Sim::new(procs, cfg);
        sim.crash_before_start(failed);
        finish(sim, options)
    }
}

/// One run's numbers.
struct One {
    messages: u64,
    by_kind: BTreeMap<&'static str, u64>,
    completion: u64,
    leaders: Vec<u64>,
    agreed: bool,
    split_brain: bool,
    leader_changes: u64,
    trace: Vec<Delivery>,
    lanes: Vec<u64>,
}

fn finish<P: Process>(mut sim: Sim<P>, options: &Options) -> One {
    sim.run();
    if options.partition && split(&mut sim) {
        sim.run();
    }
    if options.crash_leader
        && let Some(before) = crash_leader(&mut sim)
    {
        sim.run();
        return return_since(&mut sim, before);
    }
    if let Some(p) = options.false_suspicion
        && let Some(before) = suspect_falsely(&mut sim, p, options.seed)
    {
        sim.run();
        return return_since(&mut sim, before);
    }
    summarize(&sim)
}

/// Schedules false suspicions of the live leader: at every heartbeat of
/// the window, each other live process with probability `p`.
fn suspect_falsely<P: Process>(
    sim: &mut Sim<P>,
    p: f64,
    seed: u64,
) -> Option<(super::engine::Stats, u64)> {
    let n = sim.len();
    let [leader_id] = sim.outcome().leaders[..] else {
        return None;
    };
    let leader = (0..n).find(|&i| sim.is_up(i) && sim.process(i).id() == leader_id)?;
    let start = sim.now() + 1;
    let mut state = seed ^ 0x5EED;
    let observers: Vec<Pid> = (0..n).filter(|&i| i != leader && sim.is_up(i)).collect();
    for t in (start..start + SUSPICION_WINDOW).step_by(HEARTBEAT as usize) {
        for &observer in &observers {
            if (splitmix64(&mut state) as f64 / u64::MAX as f64) < p {
                sim.suspect_at(t, observer, leader);
            }
        }
    }
    sim.track_leader();
    Some((sim.stats().clone(), start))
}

impl Options {
    /// One run of `algorithm` on `nodes` in `case`, seed 1, no faults.
    pub fn new(algorithm: Algorithm, nodes: usize, case: Case) -> Options {
        Options {
            algorithm,
            nodes,
            case,
            runs: 1,
            seed: 1,
            trace: false,
            partition: false,
            crash_leader: false,
            false_suspicion: None,
        }
    }

    /// No partition, no crash: what algorithms without a failure detector
    /// run.
    fn plain() -> Options {
        Options::new(Algorithm::Ring, 0, Case::Worst)
    }
}

/// Crashes the elected leader one time unit after the first election and
/// has its ring successor suspect it a unit later. The counts and the time
/// then, to count only what follows; `None` without a single leader.
fn crash_leader<P: Process>(sim: &mut Sim<P>) -> Option<(super::engine::Stats, u64)> {
    let n = sim.len();
    let [leader_id] = sim.outcome().leaders[..] else {
        return None;
    };
    let leader = (0..n).find(|&i| sim.is_up(i) && sim.process(i).id() == leader_id)?;
    let observer = (1..n).map(|k| (leader + k) % n).find(|&i| sim.is_up(i))?;
    let at = sim.now() + 1;
    let before = (sim.stats().clone(), at);
    sim.crash_at(leader, at);
    sim.suspect_at(at + 1, observer, leader);
    Some(before)
}

/// What happened since `before`: messages, kinds, and the time from the
/// crash to the last delivery (or to settling, for Raft).
fn return_since<P: Process>(sim: &mut Sim<P>, before: (super::engine::Stats, u64)) -> One {
    let (stats, crashed) = before;
    let mut one = summarize(sim);
    one.messages -= stats.messages;
    for (kind, count) in stats.by_kind {
        if let Some(v) = one.by_kind.get_mut(kind) {
            *v -= count;
        }
    }
    one.by_kind.retain(|_, v| *v > 0);
    one.completion = one.completion.saturating_sub(crashed);
    one
}

/// Whether `algorithm` holds a new election when its failure detector
/// suspects the leader (or, for Raft, needs no detector): what
/// `--partition` and `--crash-leader` need.
pub fn reacts_to_suspicion(algorithm: Algorithm) -> bool {
    matches!(
        algorithm,
        Algorithm::Ring | Algorithm::Bully | Algorithm::Invitation | Algorithm::Raft
    )
}

/// Splits the processes after the first election: the leader and the
/// next (n-1)/2 - 1 processes by index on one side (a minority), the rest
/// on the other; one time unit later the first majority process suspects
/// the leader. False when there was no single leader to split off.
fn split<P: Process>(sim: &mut Sim<P>) -> bool {
    let n = sim.len();
    let minority = (n - 1) / 2;
    let [leader_id] = sim.outcome().leaders[..] else {
        return false;
    };
    let Some(leader) = (0..n).find(|&i| sim.is_up(i) && sim.process(i).id() == leader_id) else {
        return false;
    };
    if minority == 0 {
        return false;
    }
    let groups: Vec<u8> = (0..n)
        .map(|i| u8::from((i + n - leader) % n < minority))
        .collect();
    let Some(observer) = (0..n).find(|&i| groups[i] == 0 && sim.is_up(i)) else {
        return false;
    };
    let at = sim.now() + 1;
    sim.partition_at(at, groups);
    sim.suspect_at(at + 1, observer, leader);
    true
}

fn summarize<P: Process>(sim: &Sim<P>) -> One {
    let stats = sim.stats().clone();
    let outcome = sim.outcome();
    One {
        messages: stats.messages,
        by_kind: stats.by_kind,
        completion: stats.completion,
        leaders: outcome.leaders,
        agreed: outcome.agreed,
        split_brain: outcome.split_brain,
        leader_changes: stats.leader_changes,
        trace: sim.trace().to_vec(),
        lanes: (0..sim.len()).map(|i| sim.process(i).id()).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(algorithm: Algorithm, nodes: usize, case: Case) -> Options {
        Options::new(algorithm, nodes, case)
    }

    #[test]
    fn with_false_suspicion_bully_keeps_re_electing_and_raft_keeps_its_leader() {
        for n in [5usize, 16] {
            let mut bully = options(Algorithm::Bully, n, Case::Random);
            bully.false_suspicion = Some(0.05);
            bully.runs = 5;
            let r = simulate(&bully);
            // Every suspicion is an election; the highest announces itself
            // again and again (at least twice per run on average).
            let rounds = r.messages_by_kind["coordinator"] / (n as f64 - 2.0);
            assert!(rounds >= 2.0, "bully n={n}: {r:?}");
            let mut raft = options(Algorithm::Raft, n, Case::Random);
            raft.false_suspicion = Some(0.05);
            raft.runs = 5;
            let r = simulate(&raft);
            // Lost heartbeats may start pre-votes, which the others refuse
            // while they hear from the leader: no vote, no new leader.
            assert_eq!(r.messages_by_kind.get("vote"), None, "raft n={n}: {r:?}");
            assert_eq!(r.leader_changes, 0.0, "raft n={n}: {r:?}");
            assert!(r.agreed, "raft n={n}: {r:?}");
        }
    }

    #[test]
    fn after_the_leader_crashes_the_next_highest_leads() {
        for algorithm in [Algorithm::Ring, Algorithm::Bully, Algorithm::Raft] {
            for n in [5usize, 16] {
                let mut o = options(algorithm, n, Case::Worst);
                o.crash_leader = true;
                let r = simulate(&o);
                assert!(r.agreed, "{algorithm:?} n={n}: {r:?}");
                assert_eq!(r.leaders.len(), 1, "{algorithm:?}");
                if algorithm != Algorithm::Raft {
                    let second = if algorithm == Algorithm::Bully {
                        n - 2
                    } else {
                        n - 1
                    };
                    assert_eq!(r.leaders, vec![second as u64], "{algorithm:?}");
                }
                assert!(r.messages > 0.0 && r.time_units > 0.0, "{r:?}");
            }
        }
        // The ring's second election starts at the crashed leader's
        // successor: the new maximum is its predecessor, the worst place.
        let mut o = options(Algorithm::Ring, 16, Case::Worst);
        o.crash_leader = true;
        assert_eq!(simulate(&o).messages, 3.0 * 15.0 - 1.0);
    }

    #[test]
    fn the_cases_reproduce_the_textbook_counts() {
        let n = 16;
        let ring = |case| simulate(&options(Algorithm::Ring, n, case));
        assert_eq!(ring(Case::Worst).messages, (3 * n - 1) as f64);
        assert_eq!(ring(Case::Best).messages, (2 * n) as f64);
        let cr = |case| simulate(&options(Algorithm::ChangRoberts, n, case)).messages_by_kind["election"];
        assert_eq!(cr(Case::Worst), (n * (n + 1) / 2) as f64);
        assert_eq!(cr(Case::Best), (2 * n - 1) as f64);
        let bully = |case| simulate(&options(Algorithm::Bully, n, case));
        assert_eq!(
            bully(Case::Worst).messages_by_kind["election"],
            (n * (n - 1) / 2) as f64
        );
        assert_eq!(bully(Case::Best).messages, (n - 2) as f64);
    }

    #[test]
    fn random_arrangements_elect_the_largest_id_and_agree() {
        for algorithm in Algorithm::ALL {
            let mut o = options(algorithm, 33, Case::Random);
            o.runs = 20;
            let r = simulate(&o);
            assert!(r.agreed, "{algorithm:?}");
            assert!(!r.split_brain, "{algorithm:?}");
            // Peterson's winner holds the largest id but is some process.
            match algorithm {
                Algorithm::Bully
                | Algorithm::BullyModified
                | Algorithm::NextInLine
                | Algorithm::CandidateOrdinary => assert_eq!(r.leaders, vec![32]),
                Algorithm::Peterson | Algorithm::Raft => assert_eq!(r.leaders.len(), 1),
                _ => assert_eq!(r.leaders, vec![33], "{algorithm:?}"),
            }
        }
    }

    #[test]
    fn a_partition_splits_the_brain_of_ring_and_bully_but_not_raft() {
        for algorithm in [
            Algorithm::Ring,
            Algorithm::Bully,
            Algorithm::Invitation,
            Algorithm::Raft,
        ] {
            for n in [5, 16, 33] {
                let mut o = options(algorithm, n, Case::Random);
                o.partition = true;
                o.runs = 10;
                let r = simulate(&o);
                if algorithm == Algorithm::Raft {
                    assert!(!r.split_brain, "{algorithm:?} n={n}: {r:?}");
                    assert_eq!(r.leaders.len(), 1, "{algorithm:?} n={n}");
                } else {
                    assert!(r.split_brain, "{algorithm:?} n={n}: {r:?}");
                    assert_eq!(r.leaders.len(), 2, "{algorithm:?} n={n}");
                }
            }
        }
    }

    #[test]
    fn a_trace_draws_each_message() {
        let mut o = options(Algorithm::Ring, 5, Case::Worst);
        o.trace = true;
        let r = simulate(&o);
        assert_eq!(r.trace.len(), 14);
        assert_eq!((r.trace[0].from, r.trace[0].to), (1, 2));
        assert_eq!(r.trace[0].message, "Election(1)");
    }
}
