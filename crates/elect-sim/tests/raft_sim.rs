//! The Raft-vote core in the shared simulator (`elect_sim`): seeded
//! message drops, delays, partitions, crashes and restarts over thousands
//! of seeds, checking after every event that there is at most one leader
//! per term, that leader leases never overlap in simulated time, and that
//! no peer votes twice in a term. Then the election scenarios of
//! go.etcd.io/raft, adapted to an election without a log.
//!
//! Time here is in microseconds (T = 100 ms = 100 000 units), so delays
//! can be a fraction of a millisecond as on a LAN.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use elect_raft::{HardState, Role};
use elect_sim::Process;
use elect_sim::engine::{Config, Delay, Sim};
use elect_sim::raft::{RaftProcess, Timing};

/// One millisecond, in time units (microseconds).
const MS: u64 = 1_000;
/// The election timeout.
const T: u64 = 100 * MS;

const TIMING: Timing = Timing {
    election_timeout: Duration::from_millis(100),
    unit: Duration::from_micros(1),
};

/// Test-side randomness for the fault schedule (the simulator has its own).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n.max(1)
    }
}

/// A LAN: 200 µs plus up to `jitter` more.
fn lan(jitter: u64) -> Delay {
    Delay::Uniform {
        min: 200,
        max: 200 + jitter.max(1) - 1,
    }
}

/// A Raft cluster in the simulator, and what the invariants remember.
struct Cluster {
    sim: Sim<RaftProcess>,
    seed: u64,
    /// Term -> (id, incarnation) that were Leader in it: a term is one
    /// leadership, so a peer that led in a term must not lead in it again
    /// after a restart (its fencing token would repeat).
    leaders: BTreeMap<u64, BTreeSet<(u64, u64)>>,
    /// How often each peer has been restarted.
    incarnations: Vec<u64>,
    /// (id, term) -> whom it voted for.
    votes: BTreeMap<(u64, u64), String>,
    /// Some peer restarted without its disk: terms may repeat, so only the
    /// lease invariant holds from then on.
    amnesia: bool,
}

impl Cluster {
    fn new(n: usize, seed: u64, delay: Delay, drop_rate: f64) -> Cluster {
        let ids: Vec<u64> = (1..=n as u64).collect();
        let procs = (0..n)
            .map(|i| RaftProcess::with_timing(&ids, i, seed, TIMING))
            .collect();
        let cfg = Config {
            seed,
            delay,
            drop_rate,
            ..Config::default()
        };
        Cluster {
            sim: Sim::new(procs, cfg),
            seed,
            leaders: BTreeMap::new(),
            incarnations: vec![0; n],
            votes: BTreeMap::new(),
            amnesia: false,
        }
    }

    fn now(&self) -> u64 {
        self.sim.now()
    }

    fn n(&self) -> usize {
        self.sim.len()
    }

    fn live(&self) -> impl Iterator<Item = (usize, &RaftProcess)> {
        (0..self.n())
            .filter(|&i| self.sim.is_up(i))
            .map(|i| (i, self.sim.process(i)))
    }

    /// Runs to time `at`, checking the invariants after every event.
    fn run_to(&mut self, at: u64) {
        let seed = self.seed;
        let amnesia = self.amnesia;
        let (leaders, votes) = (&mut self.leaders, &mut self.votes);
        let incarnations = &self.incarnations;
        self.sim.run_to(at, |sim| {
            check(sim, seed, amnesia, incarnations, leaders, votes);
        });
    }

    fn run_for(&mut self, units: u64) {
        self.run_to(self.now() + units);
    }

    /// The peer holding a lease now.
    fn leader(&self) -> Option<usize> {
        let now = self.now();
        self.live().find(|(_, p)| p.leads(now)).map(|(i, _)| i)
    }

    fn max_term(&self) -> u64 {
        self.live().map(|(_, p)| p.node().term()).max().unwrap_or(0)
    }

    fn node(&self, i: usize) -> &RaftProcess {
        self.sim.process(i)
    }

    /// Restarts every crashed peer on its disk.
    fn restart_all(&mut self) {
        for i in 0..self.n() {
            if !self.sim.is_up(i) {
                self.restart(i, true);
            }
        }
    }

    fn restart(&mut self, i: usize, keep_disk: bool) {
        self.amnesia |= !keep_disk;
        self.incarnations[i] += 1;
        let now = self.now();
        let process = self
            .sim
            .process(i)
            .restarted(now, self.seed * 97 + now, keep_disk);
        self.sim.restart(i, process);
    }
}

/// The invariants, after every event.
fn check(
    sim: &Sim<RaftProcess>,
    seed: u64,
    amnesia: bool,
    incarnations: &[u64],
    leaders: &mut BTreeMap<u64, BTreeSet<(u64, u64)>>,
    votes: &mut BTreeMap<(u64, u64), String>,
) {
    let now = sim.now();
    let mut leasing = Vec::new();
    for i in (0..sim.len()).filter(|&i| sim.is_up(i)) {
        let p = sim.process(i);
        let node = p.node();
        if !amnesia {
            if node.role() == Role::Leader {
                let set = leaders.entry(node.term()).or_default();
                set.insert((p.id(), incarnations[i]));
                assert!(
                    set.len() <= 1,
                    "seed {seed}: two leaderships in term {} (id, incarnation): {set:?}",
                    node.term()
                );
            }
            // The votes on disk, and those held in memory: a vote cast
            // by a pledge is on disk only as the pledge, which may be
            // moved until it is used, so pledges themselves are not votes
            // here; a vote that relied on one shows in memory, and again
            // after a restart if the pledge was honoured.
            let vote = |h: &HardState| h.voted_for.clone().map(|v| (h.term, v));
            let on_disk = p.disk().and_then(vote);
            let held = vote(node.hard_state());
            for (term, vote) in on_disk.into_iter().chain(held) {
                let before = votes.entry((p.id(), term)).or_insert(vote.clone());
                assert_eq!(
                    *before,
                    vote,
                    "seed {seed}: {} voted twice in term {term}",
                    p.id(),
                );
            }
        }
        if p.leads(now) {
            leasing.push(p.id());
        }
    }
    assert!(
        leasing.len() <= 1,
        "seed {seed}: overlapping leases at {now} µs: {leasing:?}"
    );
}

#[test]
fn safety_holds_over_thousands_of_seeds_with_faults() {
    for seed in 0..2000u64 {
        let n = if seed % 2 == 0 { 3 } else { 5 };
        let drop = (seed % 4) as f64 * 0.08;
        let mut c = Cluster::new(n, seed, lan(1 + (seed % 20) * MS), drop);
        let mut rng = Rng(seed ^ 0xabcdef);
        for _ in 0..12 {
            match rng.below(6) {
                0 => {
                    let i = rng.below(n as u64) as usize;
                    c.sim.isolate(i);
                }
                1 => c.sim.heal(),
                2 => {
                    let i = rng.below(n as u64) as usize;
                    c.sim.crash(i);
                }
                3 => c.restart_all(),
                4 => {
                    // A graceful exit (the old leader then stops) or a
                    // transfer it stays behind from.
                    if let Some(leader) = c.leader() {
                        c.sim.act(leader, |p, io| p.transfer_leadership(io));
                        if rng.below(2) == 0 {
                            c.sim.crash(leader);
                        }
                    }
                }
                _ => {}
            }
            c.run_for((50 + rng.below(400)) * MS);
        }
        // Liveness once the faults stop: a leader with a lease.
        c.sim.heal();
        c.sim.set_drop_rate(0.0);
        c.sim.set_delay(lan(2 * MS));
        c.restart_all();
        c.run_for(20 * T);
        assert!(
            c.leader().is_some(),
            "seed {seed}: no leader after the faults stopped"
        );
    }
}

/// TestLeaderElection(PreVote): a leader with all up or a minority down;
/// none with a majority down.
#[test]
fn leader_election_with_prevote() {
    for (n, down, elected) in [
        (3, 0, true),
        (3, 1, true),
        (5, 2, true),
        (3, 2, false),
        (5, 3, false),
    ] {
        let mut c = Cluster::new(n, 7, lan(MS), 0.0);
        for i in 0..down {
            c.sim.crash(n - 1 - i);
        }
        c.run_to(10 * T);
        assert_eq!(c.leader().is_some(), elected, "{n} nodes, {down} down");
        if !elected {
            assert_eq!(
                c.max_term(),
                0,
                "PreVote keeps terms from rising without a quorum"
            );
        }
    }
}

/// TestDuelingCandidates: peers 0 and 2 cannot talk; both can reach 1. One
/// of them wins; after healing there is one leader and terms settle.
#[test]
fn dueling_candidates() {
    for seed in 0..50 {
        let mut c = Cluster::new(3, seed, lan(2 * MS), 0.0);
        c.sim.cut(0, 2);
        c.run_to(10 * T);
        let first = c.leader().expect("a leader despite the cut");
        let term = c.node(first).node().term();
        c.sim.heal();
        c.run_to(30 * T);
        assert!(c.leader().is_some());
        assert!(
            c.max_term() <= term + 1,
            "seed {seed}: healing churned terms"
        );
    }
}

/// TestPreVoteWithSplitVote: simultaneous candidates split the vote; the
/// randomized timeouts elect someone soon after.
#[test]
fn prevote_with_split_vote() {
    for seed in 0..100 {
        let mut c = Cluster::new(5, seed, lan(5 * MS), 0.0);
        c.run_to(10 * T);
        let leader = c.leader().expect("a leader");
        // Kill it so the followers race again.
        c.sim.crash(leader);
        c.run_for(10 * T);
        assert!(
            c.leader().is_some(),
            "seed {seed}: split votes never resolved"
        );
    }
}

/// TestLeaderStepdownWhenQuorumLost: a leader cut off from everyone loses
/// its lease within T and steps down (CheckQuorum) within 3T; the others
/// elect a new leader (within 5T, allowing for one split vote).
#[test]
fn leader_steps_down_when_quorum_is_lost() {
    for seed in 0..50 {
        let mut c = Cluster::new(3, seed, lan(MS), 0.0);
        c.run_to(10 * T);
        let leader = c.leader().unwrap();
        c.sim.isolate(leader);
        let cut_at = c.now();
        c.run_to(cut_at + T);
        assert!(
            !c.node(leader).leads(c.now()),
            "seed {seed}: lease outlived T"
        );
        c.run_to(cut_at + 3 * T);
        assert_ne!(
            c.node(leader).node().role(),
            Role::Leader,
            "seed {seed}: no step-down"
        );
        // A split vote between the two others costs another timeout.
        c.run_to(cut_at + 5 * T);
        let new = c
            .leader()
            .unwrap_or_else(|| panic!("seed {seed}: the majority elects no new leader"));
        assert_ne!(new, leader);
    }
}

/// TestFreeStuckCandidateWithCheckQuorum and TestDisruptiveFollower: a peer
/// partitioned away keeps timing out but, with PreVote, never raises its
/// term; when it rejoins it neither disrupts the leader nor the term.
#[test]
fn a_rejoining_node_does_not_disrupt_the_leader() {
    for seed in 0..50 {
        let mut c = Cluster::new(3, seed, lan(MS), 0.0);
        c.run_to(10 * T);
        let leader = c.leader().unwrap();
        let term = c.node(leader).node().term();
        let loner = (leader + 1) % 3;
        c.sim.isolate(loner);
        c.run_for(20 * T);
        assert_eq!(
            c.node(loner).node().term(),
            term,
            "seed {seed}: the loner raised its term"
        );
        c.sim.heal();
        c.run_for(10 * T);
        assert_eq!(
            c.leader(),
            Some(leader),
            "seed {seed}: the leader was deposed"
        );
        assert_eq!(c.max_term(), term, "seed {seed}: term inflation");
    }
}

/// Leadership transfer: the leader gives its lease up and the target wins
/// within a few round trips, well before any timeout.
#[test]
fn transfer_hands_over_in_round_trips() {
    for seed in 0..50 {
        let mut c = Cluster::new(3, seed, lan(MS), 0.0);
        c.run_to(10 * T);
        let leader = c.leader().unwrap();
        c.sim.act(leader, |p, io| p.transfer_leadership(io));
        c.sim.crash(leader);
        c.run_for(10 * MS);
        let new = c.leader().expect("a successor within 10 ms");
        assert_ne!(new, leader, "seed {seed}");
    }
}

/// Peers restarted without their disks: terms (and so fencing tokens) can
/// repeat once a peer forgets its term, which is why `--data-dir` matters;
/// but a peer that lost its disk stays quiet for T, at least T after it
/// last heard any leader, so leader leases still never overlap (checked
/// after every event).
#[test]
fn restarts_without_a_disk_keep_leases_apart() {
    for seed in 0..300 {
        let mut c = Cluster::new(3, seed, lan(10 * MS), 0.1);
        let mut rng = Rng(seed);
        for _ in 0..20 {
            let i = rng.below(3) as usize;
            c.sim.crash(i);
            c.run_for(rng.below(150) * MS);
            c.restart(i, false);
            c.run_for(rng.below(300) * MS);
        }
    }
}

/// The peer ids (1-based) as their index (0-based).
fn index_of(id: &str) -> usize {
    id.parse::<usize>().expect("numeric ids") - 1
}

/// Runs until a leader other than `old` holds a lease, or `within` passes;
/// the new leader's index and when it took over.
fn successor(c: &mut Cluster, old: usize, within: u64) -> Option<(usize, u64)> {
    let until = c.now() + within;
    while c.now() < until {
        c.run_for(100);
        if let Some(new) = c.leader().filter(|&l| l != old) {
            return Some((new, c.now()));
        }
    }
    None
}

/// Crash failover with next-in-line succession: the first in line takes
/// over about T after the last heartbeat it heard (the voters' lease
/// floor), in one term, almost always; safety is checked throughout.
#[test]
fn the_first_in_line_takes_over_at_the_lease_floor_in_one_term() {
    for n in [3, 5] {
        let (mut times, mut extra_terms, mut by_first) = (Vec::new(), 0, 0);
        let runs = 300;
        for seed in 0..runs {
            let mut c = Cluster::new(n, seed, lan(MS / 2), 0.0);
            c.run_to(10 * T);
            let leader = c.leader().expect("a leader");
            // Crash at a random point between two heartbeats.
            c.run_for(Rng(seed).below(T / 10));
            let order = c.node(leader).node().successors();
            let term = c.node(leader).node().term();
            c.sim.crash(leader);
            let crashed = c.now();
            let (new, at) = successor(&mut c, leader, 5 * T)
                .unwrap_or_else(|| panic!("seed {seed}: no successor"));
            times.push(at - crashed);
            by_first += usize::from(new == index_of(&order[0]));
            extra_terms += c.node(new).node().term() - term - 1;
        }
        times.sort_unstable();
        let mean = times.iter().sum::<u64>() as f64 / times.len() as f64 / T as f64;
        let p99 = times[times.len() * 99 / 100] as f64 / T as f64;
        eprintln!(
            "n={n}: failover mean {mean:.3} T, p99 {p99:.3} T, first in line won {by_first}/{runs}, extra terms {extra_terms}"
        );
        // Generous bounds: the benchmark (elect compare) reports the real figures.
        assert!(mean < 1.2, "n={n}: mean {mean} T");
        assert!(
            by_first as u64 >= runs * 95 / 100,
            "n={n}: {by_first}/{runs}"
        );
        assert!(extra_terms <= runs / 10, "n={n}: {extra_terms} extra terms");
    }
}

/// Five peers on a quiet LAN after their first election: the cluster, its
/// leader and the order of succession the leader publishes.
fn five_with_a_leader(seed: u64) -> (Cluster, usize, Vec<String>) {
    let mut c = Cluster::new(5, seed, lan(MS / 2), 0.0);
    c.run_to(10 * T);
    let leader = c.leader().expect("a leader");
    let order = c.node(leader).node().successors();
    (c, leader, order)
}

/// The leader and its first in line die together: the second in line
/// takes over one stagger later.
#[test]
fn a_dead_first_in_line_leaves_it_to_the_second() {
    for seed in 0..200 {
        let (mut c, leader, order) = five_with_a_leader(seed);
        c.sim.crash(leader);
        c.sim.crash(index_of(&order[0]));
        let crashed = c.now();
        let (new, at) =
            successor(&mut c, leader, 5 * T).unwrap_or_else(|| panic!("seed {seed}: no successor"));
        assert_eq!(new, index_of(&order[1]), "seed {seed}: {order:?}");
        assert!(
            at - crashed < T + T / 2,
            "seed {seed}: took {} µs",
            at - crashed
        );
    }
}

/// The first in line is cut off when the leader dies: it cannot win (it
/// reaches no voter), and the others elect one of themselves.
#[test]
fn a_partitioned_first_in_line_does_not_stall_the_election() {
    for seed in 0..200 {
        let (mut c, leader, order) = five_with_a_leader(seed);
        let first = index_of(&order[0]);
        c.sim.isolate(first);
        c.sim.crash(leader);
        let (new, _) =
            successor(&mut c, leader, 5 * T).unwrap_or_else(|| panic!("seed {seed}: no successor"));
        assert_ne!(new, first, "seed {seed}");
        // Healed, the loner rejoins without deposing anyone.
        c.sim.heal();
        c.run_for(5 * T);
        assert_eq!(c.leader(), Some(new), "seed {seed}");
    }
}

/// Leaders crash at random instants on a lossy (10%), jittery network, so the
/// followers may hold different orders (one just changed, one lost): at
/// worst a split vote, never two leaders; someone leads soon after.
#[test]
fn a_leader_crashing_mid_change_of_order_costs_at_most_a_split_vote() {
    for seed in 0..500 {
        let mut c = Cluster::new(5, seed, lan(5 * MS), 0.1);
        c.run_to(10 * T);
        let mut rng = Rng(seed ^ 0x0dd);
        for _ in 0..3 {
            let Some(leader) = c.leader() else {
                c.run_for(5 * T);
                continue;
            };
            c.run_for(rng.below(T / 10));
            c.sim.crash(leader);
            // Raft's own liveness on a lossy network (with or without an
            // order of succession): usually a few T, now and then more.
            if successor(&mut c, leader, 30 * T).is_none() {
                panic!("seed {seed}: no leader within 30 T");
            }
            c.restart(leader, true);
            c.run_for(2 * T);
        }
    }
}

/// A voter that restarts on its disk forgets when it last heard the leader,
/// but the leader's lease still counts on that voter's promise: a peer cut
/// off from the leader must not win its vote before the promise runs out.
#[test]
fn a_quickly_restarted_voter_keeps_the_leaders_lease() {
    for seed in 0..200 {
        let mut c = Cluster::new(3, seed, lan(MS / 2), 0.0);
        c.run_to(10 * T);
        let leader = c.leader().expect("a leader");
        let (voter, cut_off) = ((leader + 1) % 3, (leader + 2) % 3);
        // The third peer hears nothing from the leader from now on, so it
        // campaigns about T later; the voter restarts at that moment.
        c.sim.cut(leader, cut_off);
        c.run_for(T - T / 20 + Rng(seed).below(T / 10));
        c.sim.crash(voter);
        c.restart(voter, true);
        c.run_for(3 * T);
    }
}
