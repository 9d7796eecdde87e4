//! The Raft-vote core in a deterministic simulator: seeded message drops,
//! delays, partitions and crashes over thousands of seeds, checking that
//! there is at most one leader per term, that leader leases never overlap
//! in simulated time, and that no node votes twice in a term. Then the
//! election scenarios of go.etcd.io/raft, adapted to an election without a
//! log.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};
use std::time::Duration;

use elect::backend::raft::core::{Config, HardState, Message, Node, Role, Time};

const T: Duration = Duration::from_millis(100);

fn ms(n: u64) -> Time {
    Duration::from_millis(n)
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, p: f64) -> bool {
        (self.next() as f64 / u64::MAX as f64) < p
    }
}

#[derive(Default, Clone)]
struct Faults {
    drop: f64,
    max_delay: Duration,
}

impl Faults {
    /// Every message arrives, within `max_delay`.
    fn lossless(max_delay: Duration) -> Faults {
        Faults {
            drop: 0.0,
            max_delay,
        }
    }
}

struct Sim {
    ids: Vec<String>,
    nodes: Vec<Option<Node>>,
    disks: Vec<Option<HardState>>,
    now: Time,
    queue: BinaryHeap<Reverse<(Time, u64, usize, usize)>>,
    in_flight: BTreeMap<u64, Message>,
    seq: u64,
    rng: Rng,
    faults: Faults,
    /// Pairs that cannot talk.
    cut: BTreeSet<(usize, usize)>,
    /// term -> ids that were Leader in it.
    leaders: BTreeMap<u64, BTreeSet<String>>,
    /// (node, term) -> whom it voted for.
    votes: BTreeMap<(String, u64), String>,
    seed: u64,
    /// Some node restarted without its disk: terms may repeat, so only the
    /// lease invariant can be checked from then on.
    amnesia: bool,
}

impl Sim {
    fn new(n: usize, seed: u64, faults: Faults) -> Sim {
        let ids: Vec<String> = (0..n).map(|i| format!("n{i}")).collect();
        let nodes = (0..n)
            .map(|i| {
                let cfg = Config::new(&ids[i], &ids, T, seed * 31 + i as u64);
                Some(Node::new(cfg, Some(HardState::default()), Time::ZERO))
            })
            .collect();
        Sim {
            disks: vec![Some(HardState::default()); n],
            ids,
            nodes,
            now: Time::ZERO,
            queue: BinaryHeap::new(),
            in_flight: BTreeMap::new(),
            seq: 0,
            rng: Rng(seed),
            faults,
            cut: BTreeSet::new(),
            leaders: BTreeMap::new(),
            votes: BTreeMap::new(),
            seed,
            amnesia: false,
        }
    }

    fn apply(&mut self, from: usize, ready: elect::backend::raft::core::Ready) {
        if let Some(hard) = ready.persist {
            if let Some(v) = hard.voted_for.as_ref().filter(|_| !self.amnesia) {
                let key = (self.ids[from].clone(), hard.term);
                if let Some(before) = self.votes.insert(key, v.clone()) {
                    assert_eq!(
                        &before, v,
                        "seed {}: {} voted twice in term {}",
                        self.seed, self.ids[from], hard.term
                    );
                }
            }
            self.disks[from] = Some(hard);
        }
        for (to, msg) in ready.messages {
            let to = self.ids.iter().position(|i| *i == to).unwrap();
            if self.cut.contains(&(from, to)) || self.rng.chance(self.faults.drop) {
                continue;
            }
            let delay = Duration::from_micros(200)
                + Duration::from_nanos(self.rng.below(self.faults.max_delay.as_nanos() as u64));
            self.seq += 1;
            self.in_flight.insert(self.seq, msg);
            self.queue
                .push(Reverse((self.now + delay, self.seq, from, to)));
        }
    }

    /// Runs until `until`, checking the invariants at every event.
    fn run_until(&mut self, until: Time) {
        loop {
            let next_msg = self.queue.peek().map(|Reverse((at, ..))| *at);
            let next_tick = self.nodes.iter().flatten().map(|n| n.next_deadline()).min();
            let next = [next_msg, next_tick].into_iter().flatten().min();
            let Some(next) = next.filter(|t| *t <= until) else {
                self.now = until;
                return;
            };
            self.now = next.max(self.now);
            if next_msg == Some(next) {
                let Reverse((_, seq, from, to)) = self.queue.pop().unwrap();
                let msg = self.in_flight.remove(&seq).unwrap();
                let from_id = self.ids[from].clone();
                if let Some(node) = self.nodes[to].as_mut() {
                    let ready = node.step(self.now, &from_id, msg);
                    self.apply(to, ready);
                }
            } else {
                for i in 0..self.nodes.len() {
                    let due = self.nodes[i]
                        .as_ref()
                        .is_some_and(|n| n.next_deadline() <= self.now);
                    if due {
                        let ready = self.nodes[i].as_mut().unwrap().tick(self.now);
                        self.apply(i, ready);
                    }
                }
            }
            self.check();
        }
    }

    fn check(&mut self) {
        let mut leasing = Vec::new();
        for node in self.nodes.iter().flatten() {
            if node.role() == Role::Leader && !self.amnesia {
                let set = self.leaders.entry(node.term()).or_default();
                set.insert(node.id().to_owned());
                assert!(
                    set.len() <= 1,
                    "seed {}: two leaders in term {}: {set:?}",
                    self.seed,
                    node.term()
                );
            }
            if node.status(self.now).is_self {
                leasing.push(node.id().to_owned());
            }
        }
        assert!(
            leasing.len() <= 1,
            "seed {}: overlapping leases at {:?}: {leasing:?}",
            self.seed,
            self.now
        );
    }

    fn leader(&self) -> Option<usize> {
        self.nodes
            .iter()
            .position(|n| n.as_ref().is_some_and(|n| n.status(self.now).is_self))
    }

    fn isolate(&mut self, i: usize) {
        for j in 0..self.ids.len() {
            if i != j {
                self.cut.insert((i, j));
                self.cut.insert((j, i));
            }
        }
    }

    fn heal(&mut self) {
        self.cut.clear();
    }

    fn crash(&mut self, i: usize) {
        self.nodes[i] = None;
    }

    /// Restarts node `i`, with its disk or without one.
    fn restart(&mut self, i: usize, keep_disk: bool) {
        self.amnesia |= !keep_disk;
        let hard = if keep_disk {
            self.disks[i].clone()
        } else {
            None
        };
        let cfg = Config::new(
            &self.ids[i],
            &self.ids,
            T,
            self.seed * 97 + self.now.as_nanos() as u64,
        );
        self.nodes[i] = Some(Node::new(cfg, hard, self.now));
    }

    fn max_term(&self) -> u64 {
        self.nodes
            .iter()
            .flatten()
            .map(Node::term)
            .max()
            .unwrap_or(0)
    }

    fn node(&self, i: usize) -> &Node {
        self.nodes[i].as_ref().unwrap()
    }
}

#[test]
fn safety_holds_over_thousands_of_seeds_with_faults() {
    for seed in 0..2000u64 {
        let n = if seed % 2 == 0 { 3 } else { 5 };
        let faults = Faults {
            drop: (seed % 4) as f64 * 0.08,
            max_delay: Duration::from_millis(1 + seed % 20),
        };
        let mut sim = Sim::new(n, seed, faults);
        let mut rng = Rng(seed ^ 0xabcdef);
        for _ in 0..12 {
            match rng.below(5) {
                0 => {
                    let i = rng.below(n as u64) as usize;
                    sim.isolate(i);
                }
                1 => sim.heal(),
                2 => {
                    let i = rng.below(n as u64) as usize;
                    sim.crash(i);
                }
                3 => {
                    for i in 0..n {
                        if sim.nodes[i].is_none() {
                            sim.restart(i, true);
                        }
                    }
                }
                _ => {}
            }
            let until = sim.now + ms(50 + rng.below(400));
            sim.run_until(until);
        }
        // Liveness once the faults stop: a leader with a lease.
        sim.heal();
        sim.faults = Faults::lossless(Duration::from_millis(2));
        for i in 0..n {
            if sim.nodes[i].is_none() {
                sim.restart(i, true);
            }
        }
        let until = sim.now + T * 20;
        sim.run_until(until);
        assert!(
            sim.leader().is_some(),
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
        let mut sim = Sim::new(n, 7, Faults::lossless(ms(1)));
        for i in 0..down {
            sim.crash(n - 1 - i);
        }
        sim.run_until(T * 10);
        assert_eq!(sim.leader().is_some(), elected, "{n} nodes, {down} down");
        if !elected {
            assert_eq!(
                sim.max_term(),
                0,
                "PreVote keeps terms from rising without a quorum"
            );
        }
    }
}

/// TestDuelingCandidates: n0 and n2 cannot talk; both can reach n1. One of
/// them wins; after healing there is one leader and terms settle.
#[test]
fn dueling_candidates() {
    for seed in 0..50 {
        let mut sim = Sim::new(3, seed, Faults::lossless(ms(2)));
        sim.cut.insert((0, 2));
        sim.cut.insert((2, 0));
        sim.run_until(T * 10);
        let first = sim.leader().expect("a leader despite the cut");
        let term = sim.node(first).term();
        sim.heal();
        sim.run_until(T * 30);
        assert!(sim.leader().is_some());
        assert!(
            sim.max_term() <= term + 1,
            "seed {seed}: healing churned terms"
        );
    }
}

/// TestPreVoteWithSplitVote: simultaneous candidates split the vote; the
/// randomized timeouts elect someone soon after.
#[test]
fn prevote_with_split_vote() {
    for seed in 0..100 {
        let mut sim = Sim::new(5, seed, Faults::lossless(ms(5)));
        sim.run_until(T * 10);
        let leader = sim.leader().expect("a leader");
        // Kill it so the followers race again.
        sim.crash(leader);
        let crashed_at = sim.now;
        sim.run_until(crashed_at + T * 10);
        assert!(
            sim.leader().is_some(),
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
        let mut sim = Sim::new(3, seed, Faults::lossless(ms(1)));
        sim.run_until(T * 10);
        let leader = sim.leader().unwrap();
        sim.isolate(leader);
        let cut_at = sim.now;
        sim.run_until(cut_at + T);
        assert!(
            !sim.node(leader).status(sim.now).is_self,
            "seed {seed}: lease outlived T"
        );
        sim.run_until(cut_at + T * 3);
        assert_ne!(
            sim.node(leader).role(),
            Role::Leader,
            "seed {seed}: no step-down"
        );
        // A split vote between the two others costs another timeout.
        sim.run_until(cut_at + T * 5);
        let new = sim
            .leader()
            .unwrap_or_else(|| panic!("seed {seed}: the majority elects no new leader"));
        assert_ne!(new, leader);
    }
}

/// TestFreeStuckCandidateWithCheckQuorum and TestDisruptiveFollower: a node
/// partitioned away keeps timing out but, with PreVote, never raises its
/// term; when it rejoins it neither disrupts the leader nor the term.
#[test]
fn a_rejoining_node_does_not_disrupt_the_leader() {
    for seed in 0..50 {
        let mut sim = Sim::new(3, seed, Faults::lossless(ms(1)));
        sim.run_until(T * 10);
        let leader = sim.leader().unwrap();
        let term = sim.node(leader).term();
        let loner = (leader + 1) % 3;
        sim.isolate(loner);
        sim.run_until(sim.now + T * 20);
        assert_eq!(
            sim.node(loner).term(),
            term,
            "seed {seed}: the loner raised its term"
        );
        sim.heal();
        sim.run_until(sim.now + T * 10);
        assert_eq!(
            sim.leader(),
            Some(leader),
            "seed {seed}: the leader was deposed"
        );
        assert_eq!(sim.max_term(), term, "seed {seed}: term inflation");
    }
}

/// Leadership transfer: the leader gives its lease up and the target wins
/// within a few round trips, well before any timeout.
#[test]
fn transfer_hands_over_in_round_trips() {
    for seed in 0..50 {
        let mut sim = Sim::new(3, seed, Faults::lossless(ms(1)));
        sim.run_until(T * 10);
        let leader = sim.leader().unwrap();
        let now = sim.now;
        let ready = sim.nodes[leader].as_mut().unwrap().transfer_leadership(now);
        sim.apply(leader, ready);
        sim.crash(leader);
        sim.run_until(now + ms(10));
        let new = sim.leader().expect("a successor within 10 ms");
        assert_ne!(new, leader, "seed {seed}");
    }
}

/// Nodes restarted without their disks: terms (and so fencing tokens) can
/// repeat once a node forgets its term, which is why `--data-dir` matters;
/// but a node that lost its disk stays quiet for T, at least T after it
/// last heard any leader, so leader leases still never overlap (checked at
/// every event).
#[test]
fn restarts_without_a_disk_keep_leases_apart() {
    for seed in 0..300 {
        let mut sim = Sim::new(
            3,
            seed,
            Faults {
                drop: 0.1,
                max_delay: ms(10),
            },
        );
        let mut rng = Rng(seed);
        for _ in 0..20 {
            let i = rng.below(3) as usize;
            sim.crash(i);
            sim.run_until(sim.now + ms(rng.below(150)));
            sim.restart(i, false);
            sim.run_until(sim.now + ms(rng.below(300)));
        }
    }
}
