//! Every interleaving, up to a bound, of three Raft-vote peers running the
//! production core (`elect::backend::raft::core::Node`, unchanged: time
//! and messages in, `Ready` out), checked with stateright's breadth-first
//! model checker.
//!
//! The model is the driver's contract, not a re-implementation of the
//! protocol: a `Ready`'s vote requests leave at once, everything else
//! waits until its `persist` is written, and the node takes nothing else
//! in meanwhile (the driver awaits the write). What varies is what the
//! world may do at each step:
//! - deliver any message in flight (so in any order), lose it, or deliver
//!   it twice;
//! - fire a node's timer once it is due, or let time pass to the next
//!   timer of any node (messages in flight wait, so they arrive late);
//! - crash a node at any point, a write under way included (it is then
//!   not on disk), and restart it from what its disk holds;
//! - ask the leader to hand over (`transfer_leadership`) at any moment.
//!
//! Time is explicit: every peer has its own clock, running 2.4% fast,
//! exact or 2.4% slow against global time (4.8% apart at most, inside the
//! 5% the lease gives up for rate error); a timer fires when its peer's
//! clock reaches it.
//!
//! Invariants, in every state: at most one leader per term (over the whole
//! history); no two peers believe they lead at the same global instant,
//! each judging its lease on its own clock; no peer grants two candidates
//! its vote in one term, across restarts; a leader's term only grows.
//!
//! Two searches: every interleaving breadth first up to a bound (three
//! tenths of a second of model time, one crash, one duplicate, one
//! transfer; about 140,000 distinct states, depth 11), and seeded random
//! traces through a deeper world (four election timeouts, two crashes).
//!
//! Teeth, each printed as a message-sequence trace: with the persist of a
//! granted vote skipped (the reply leaves at once, the disk keeps the old
//! vote), the random traces find a double vote: the write is not made
//! redundant by the quiet period after a restart. With the core's double
//! vote check or its voter-side lease switched off (`Config::mutation`),
//! they find two leaders in a term, or two at once.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use elect::backend::raft::core::{Config, HardState, Message, Mutation, Node, Ready, Time};
use stateright::{Checker, Model, Path, Property};

const IDS: [&str; 3] = ["a", "b", "c"];
const T: Duration = Duration::from_millis(100);

/// Each peer's clock rate against global time: 2.4% fast, exact, 2.4%
/// slow, so two clocks differ by up to 4.8%, inside the 5% of T the lease
/// gives up for clock-rate error.
const RATES: [f64; 3] = [1.024, 1.0, 0.976];

/// Peer `i`'s clock at global instant `now`.
fn local(i: usize, now: Time) -> Time {
    Duration::from_nanos((now.as_nanos() as f64 * RATES[i]) as u64)
}

/// The first global instant at which peer `i`'s clock reads `at`.
fn global(i: usize, at: Time) -> Time {
    let mut g = Duration::from_nanos((at.as_nanos() as f64 / RATES[i]) as u64);
    while local(i, g) < at {
        g += Duration::from_nanos(1);
    }
    g
}

/// One peer: its running core (none while crashed), its disk, and a write
/// under way with the messages that wait for it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Peer {
    node: Option<Node>,
    disk: HardState,
    writing: Option<(HardState, Vec<(String, Message)>)>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct World {
    now: Time,
    peers: Vec<Peer>,
    /// In flight, sorted: (from, to, message).
    net: Vec<(usize, usize, Message)>,
    crashes: u8,
    duplicates: u8,
    transfers: u8,
    /// (term, peer) for every peer that ever believed it led.
    leaders: BTreeSet<(u64, usize)>,
    /// The candidate each peer granted its vote in each term.
    votes: BTreeMap<(usize, u64), usize>,
    /// A peer granted a second candidate in a term.
    double_vote: bool,
    /// The highest term each peer led in; a lower one later is a fault.
    led: Vec<u64>,
    token_went_back: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Action {
    Deliver(usize),
    Lose(usize),
    Duplicate(usize),
    Fire(usize),
    Advance,
    Flush(usize),
    Crash(usize),
    Restart(usize),
    Transfer(usize),
}

/// The bounds of the exploration, and the one mutation.
#[derive(Clone)]
struct Raft {
    horizon: Time,
    max_crashes: u8,
    max_duplicates: u8,
    max_transfers: u8,
    max_in_flight: usize,
    /// Only this link (from, to) loses messages; `None`: every link.
    lossy_link: Option<(usize, usize)>,
    /// A mutation of the driver: a granted vote is not written before
    /// its reply.
    skip_vote_persist: bool,
    /// A rule of the core switched off.
    mutation: Option<Mutation>,
}

impl Raft {
    fn config(&self, i: usize) -> Config {
        let ids: Vec<String> = IDS.iter().map(|s| s.to_string()).collect();
        let mut cfg = Config::new(IDS[i], &ids, T, 7 + i as u64);
        cfg.mutation = self.mutation;
        cfg
    }
}

fn index(id: &str) -> usize {
    IDS.iter().position(|p| *p == id).expect("a peer")
}

impl Raft {
    /// Applies a `Ready` of peer `i` as the driver does.
    fn apply(&self, w: &mut World, i: usize, ready: Ready) {
        let Some(hard) = ready.persist else {
            self.send(w, i, ready.messages);
            return;
        };
        let grants = ready
            .messages
            .iter()
            .any(|(_, m)| matches!(m, Message::VoteReply { granted: true, .. }));
        if self.skip_vote_persist && grants {
            self.send(w, i, ready.messages);
            return;
        }
        let (requests, rest): (Vec<_>, Vec<_>) = ready
            .messages
            .into_iter()
            .partition(|(_, m)| matches!(m, Message::PreVote { .. } | Message::Vote { .. }));
        self.send(w, i, requests);
        w.peers[i].writing = Some((hard, rest));
    }

    fn send(&self, w: &mut World, from: usize, messages: Vec<(String, Message)>) {
        for (to, msg) in messages {
            if let Message::VoteReply {
                term,
                granted: true,
            } = msg
            {
                let candidate = index(&to);
                match w.votes.get(&(from, term)) {
                    Some(&c) if c != candidate => w.double_vote = true,
                    _ => {
                        w.votes.insert((from, term), candidate);
                    }
                }
            }
            // A crashed peer's connections are closed: nothing reaches it.
            let to = index(&to);
            if w.peers[to].node.is_some() {
                w.net.push((from, to, msg));
            }
        }
        w.net.sort();
    }

    /// Records who believes it leads now.
    fn observe(&self, w: &mut World) {
        for (i, peer) in w.peers.iter().enumerate() {
            let Some(node) = &peer.node else { continue };
            let status = node.status(local(i, w.now));
            if status.is_self {
                w.leaders.insert((status.term, i));
                if status.term < w.led[i] {
                    w.token_went_back = true;
                }
                w.led[i] = w.led[i].max(status.term);
            }
        }
    }

    fn ready_to_act(peer: &Peer) -> Option<&Node> {
        peer.node.as_ref().filter(|_| peer.writing.is_none())
    }
}

impl Model for Raft {
    type State = World;
    type Action = Action;

    fn init_states(&self) -> Vec<World> {
        let peers = (0..IDS.len())
            .map(|i| Peer {
                node: Some(Node::new(
                    self.config(i),
                    Some(HardState::default()),
                    Time::ZERO,
                )),
                disk: HardState::default(),
                writing: None,
            })
            .collect();
        vec![World {
            now: Time::ZERO,
            peers,
            net: Vec::new(),
            crashes: 0,
            duplicates: 0,
            transfers: 0,
            leaders: BTreeSet::new(),
            votes: BTreeMap::new(),
            double_vote: false,
            led: vec![0; IDS.len()],
            token_went_back: false,
        }]
    }

    fn actions(&self, w: &World, actions: &mut Vec<Action>) {
        for (k, &(_, to, _)) in w.net.iter().enumerate() {
            if k > 0 && w.net[k - 1] == w.net[k] {
                continue;
            }
            if Self::ready_to_act(&w.peers[to]).is_some() {
                actions.push(Action::Deliver(k));
            }
            let (from, to) = (w.net[k].0, w.net[k].1);
            if self.lossy_link.is_none_or(|link| link == (from, to)) {
                actions.push(Action::Lose(k));
            }
            if w.duplicates < self.max_duplicates {
                actions.push(Action::Duplicate(k));
            }
        }
        let mut next_timer = None::<Time>;
        for (i, peer) in w.peers.iter().enumerate() {
            if peer.writing.is_some() {
                actions.push(Action::Flush(i));
            }
            if let Some(node) = Self::ready_to_act(peer) {
                let due = node.next_deadline();
                if due <= local(i, w.now) {
                    actions.push(Action::Fire(i));
                } else {
                    let at = global(i, due);
                    next_timer = Some(next_timer.map_or(at, |t| t.min(at)));
                }
                if w.transfers < self.max_transfers && node.status(local(i, w.now)).is_self {
                    actions.push(Action::Transfer(i));
                }
            }
            match &peer.node {
                Some(_) if w.crashes < self.max_crashes => actions.push(Action::Crash(i)),
                None => actions.push(Action::Restart(i)),
                _ => {}
            }
        }
        if next_timer.is_some_and(|t| t <= self.horizon) {
            actions.push(Action::Advance);
        }
    }

    fn next_state(&self, last: &World, action: Action) -> Option<World> {
        let mut w = last.clone();
        match action {
            Action::Deliver(k) => {
                let (from, to, msg) = w.net.remove(k);
                let now = local(to, w.now);
                let node = w.peers[to].node.as_mut()?;
                let ready = node.step(now, IDS[from], msg);
                self.apply(&mut w, to, ready);
            }
            Action::Lose(k) => {
                w.net.remove(k);
            }
            Action::Duplicate(k) => {
                let copy = w.net[k].clone();
                w.net.push(copy);
                w.net.sort();
                w.duplicates += 1;
            }
            Action::Fire(i) => {
                let now = local(i, w.now);
                let ready = w.peers[i].node.as_mut()?.tick(now);
                self.apply(&mut w, i, ready);
            }
            Action::Advance => {
                w.now = w
                    .peers
                    .iter()
                    .enumerate()
                    .filter_map(|(i, p)| Some(global(i, Self::ready_to_act(p)?.next_deadline())))
                    .filter(|&at| at > w.now)
                    .min()?;
            }
            Action::Flush(i) => {
                let (hard, rest) = w.peers[i].writing.take()?;
                w.peers[i].disk = hard;
                self.send(&mut w, i, rest);
            }
            Action::Crash(i) => {
                w.peers[i].node = None;
                w.peers[i].writing = None;
                w.net.retain(|&(_, to, _)| to != i);
                w.crashes += 1;
            }
            Action::Restart(i) => {
                let disk = w.peers[i].disk.clone();
                w.peers[i].node = Some(Node::new(self.config(i), Some(disk), local(i, w.now)));
            }
            Action::Transfer(i) => {
                let now = local(i, w.now);
                let ready = w.peers[i].node.as_mut()?.transfer_leadership(now);
                self.apply(&mut w, i, ready);
                w.transfers += 1;
            }
        }
        self.observe(&mut w);
        Some(w)
    }

    fn within_boundary(&self, w: &World) -> bool {
        w.now <= self.horizon && w.net.len() <= self.max_in_flight
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always("at most one leader per term", |_, w: &World| {
                let mut terms = BTreeSet::new();
                w.leaders.iter().all(|(term, _)| terms.insert(*term))
            }),
            // Each judges its lease on its own clock; the instant is global.
            Property::always("no two peers lead at once", |_, w: &World| {
                w.peers
                    .iter()
                    .enumerate()
                    .filter(|(i, p)| {
                        p.node
                            .as_ref()
                            .is_some_and(|n| n.status(local(*i, w.now)).is_self)
                    })
                    .count()
                    <= 1
            }),
            Property::always("no vote for two candidates in a term", |_, w: &World| {
                !w.double_vote
            }),
            Property::always("a leader's token only grows", |_, w: &World| {
                !w.token_went_back
            }),
            Property::sometimes("someone leads", |_, w: &World| !w.leaders.is_empty()),
        ]
    }
}

/// A counterexample as a message-sequence trace: global time, then what
/// happened, a line a step.
fn trace(path: Path<World, Action>) -> String {
    let mut lines = Vec::new();
    for (w, action) in path.into_vec() {
        let Some(action) = action else { break };
        let at = format!("{:>9.3} ms", w.now.as_secs_f64() * 1e3);
        let line = match action {
            Action::Deliver(k) | Action::Lose(k) | Action::Duplicate(k) => {
                let (from, to, msg) = &w.net[k];
                let verb = match action {
                    Action::Deliver(_) => "",
                    Action::Lose(_) => "lost: ",
                    _ => "duplicated: ",
                };
                format!("{verb}{} -> {}  {msg:?}", IDS[*from], IDS[*to])
            }
            Action::Fire(i) => format!("{}'s timer fires", IDS[i]),
            Action::Advance => "time passes".to_owned(),
            Action::Flush(i) => {
                let hard = &w.peers[i].writing.as_ref().expect("a write").0;
                format!("{}'s write is done: {hard:?}", IDS[i])
            }
            Action::Crash(i) => format!("{} crashes", IDS[i]),
            Action::Restart(i) => format!("{} restarts from {:?}", IDS[i], w.peers[i].disk),
            Action::Transfer(i) => format!("{} is asked to hand over", IDS[i]),
        };
        lines.push(format!("{at}  {line}"));
    }
    lines.join("\n")
}

/// The bounds CI checks: about a second of model time (ten election
/// timeouts would not fit), one crash, one duplicate, one transfer.
fn bounded() -> Raft {
    Raft {
        horizon: T * 3,
        max_crashes: 1,
        max_duplicates: 1,
        max_transfers: 1,
        max_in_flight: 4,
        lossy_link: None,
        skip_vote_persist: false,
        mutation: None,
    }
}

fn breadth_first(model: Raft, states: usize) {
    let started = std::time::Instant::now();
    let checker = model
        .checker()
        .threads(2)
        .target_state_count(states)
        .spawn_bfs()
        .join();
    eprintln!(
        "raft-vote model, breadth first: {} states, {} distinct, depth {}, {:.1?}",
        checker.state_count(),
        checker.unique_state_count(),
        checker.max_depth(),
        started.elapsed()
    );
    checker.assert_properties();
}

#[test]
fn every_interleaving_up_to_the_bound_keeps_raft_vote_safe() {
    breadth_first(bounded(), 400_000);
}

/// The deeper configuration, by hand (minutes):
/// `cargo test --release --test model_raft -- --ignored`.
#[test]
#[ignore]
fn deeper_every_interleaving_keeps_raft_vote_safe() {
    breadth_first(bounded(), 20_000_000);
}

/// A deeper world than breadth-first search can cover: four election
/// timeouts, two crashes. Searched by random traces (stateright's
/// simulation checker, seeded), not exhaustively.
fn deep() -> Raft {
    Raft {
        horizon: T * 4,
        max_crashes: 2,
        max_duplicates: 0,
        max_transfers: 0,
        ..bounded()
    }
}

fn random_traces(model: Raft, seed: u64) -> impl Checker<Raft> {
    model
        .checker()
        .threads(2)
        .target_max_depth(60)
        .target_state_count(3_000_000)
        .spawn_simulation(seed, stateright::UniformChooser)
        .join()
}

#[test]
fn deep_random_traces_keep_raft_vote_safe() {
    let started = std::time::Instant::now();
    let checker = random_traces(deep(), 1);
    eprintln!(
        "raft-vote model, random traces: {} states, depth {}, {:.1?}",
        checker.state_count(),
        checker.max_depth(),
        started.elapsed()
    );
    checker.assert_properties();
}

/// Runs `model` and returns the first always-property it breaks, with the
/// counterexample's length and trace.
fn broken(checker: &impl Checker<Raft>) -> Option<(&'static str, usize, String)> {
    [
        "at most one leader per term",
        "no two peers lead at once",
        "no vote for two candidates in a term",
        "a leader's token only grows",
    ]
    .into_iter()
    .find_map(|property| {
        let path = checker.discovery(property)?;
        let steps = path.clone().into_actions().len();
        Some((property, steps, trace(path)))
    })
}

/// Asserts that `what` is caught, and prints how.
fn caught(what: &str, checker: &impl Checker<Raft>) {
    let (property, steps, trace) = broken(checker).unwrap_or_else(|| {
        panic!(
            "{what}: the checker must find what this rule prevents ({} states)",
            checker.unique_state_count()
        )
    });
    eprintln!("{what}: \"{property}\" broken in {steps} steps:\n{trace}");
}

/// The question of issue 24: is the write of a granted vote redundant,
/// given the voter's quiet period after a restart? No: the same traces
/// that keep the production core safe find, without it, a restarted voter
/// that has forgotten its vote and grants (or takes) the term again.
#[test]
fn without_the_persist_of_a_granted_vote_a_peer_votes_twice() {
    let mutant = Raft {
        skip_vote_persist: true,
        ..deep()
    };
    caught("no persist of a granted vote", &random_traces(mutant, 1));
}

/// The deep world with one rule of the core switched off.
fn core_mutant(mutation: Mutation) -> Raft {
    Raft {
        mutation: Some(mutation),
        ..deep()
    }
}

#[test]
fn without_the_double_vote_check_a_peer_votes_twice() {
    let checker = random_traces(core_mutant(Mutation::NoDoubleVoteCheck), 1);
    caught("no double-vote check", &checker);
}

#[test]
fn without_the_voter_side_lease_two_peers_lead_at_once() {
    let checker = random_traces(core_mutant(Mutation::NoVoterLease), 1);
    caught("no voter-side lease", &checker);
}
