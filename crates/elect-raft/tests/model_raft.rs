//! Every interleaving, up to a bound, of Raft-vote peers running the
//! production core (`elect_raft::Node`, unchanged: time and messages
//! in, `Ready` out), under stateright's model checker.
//!
//! The model is the driver's contract, not a re-implementation of the
//! protocol: a `Ready`'s vote requests leave at once, everything else
//! waits until its `persist` is written, and the node takes nothing else
//! in meanwhile (the driver awaits the write). What varies is what the
//! world may do at each step:
//! - deliver any message in flight (so in any order), lose it, deliver it
//!   twice, or cut a link for good;
//! - fire a node's timer once it is due, or let time pass to the next
//!   timer of any node (messages in flight wait, so they arrive late);
//! - crash a node at any point, a write under way included (it is then
//!   not on disk), and restart it from what its disk holds (a stale peer
//!   rejoining);
//! - ask the leader to hand over (`transfer_leadership`) at any moment.
//!
//! The order of succession changes as the followers' answers arrive in
//! one order or another; nothing in the model fixes it.
//!
//! Time is explicit: every peer has its own clock, the fastest 2.4% fast
//! and the slowest 2.4% slow against global time (4.8% apart at most,
//! inside the 5% the lease gives up for rate error); a timer fires when
//! its peer's clock reaches it.
//!
//! Invariants, in every state: at most one leader per term, counting each
//! run of a peer apart (over the whole history); no two peers believe they
//! lead at the same global instant, each judging its lease on its own
//! clock; no peer gives two candidates its vote in one term, on disk, in a
//! reply, or used by leading on it (a pledge's vote included), across
//! restarts; a leader's term only grows; a leader within its lease leaves
//! its term only by its own hand-over; a leader that has heard no majority
//! for T steps down at its next tick; and, where every message arrives at
//! once, a follower cut off from its leader does not campaign while the
//! leader holds its lease. Liveness, in a prompt world without faults: a
//! leader is elected, and a hand-over asked for at any moment completes.
//!
//! Searches: breadth first, every interleaving up to a bound (0.3 s of
//! model time, one crash, one duplicate, one transfer, any message lost;
//! a prompt world of five election timeouts with crashes, a cut and a
//! transfer; and a prompt world where the first leader, on the slowest
//! clock, falls silent: the world of the lease's clock-rate margin);
//! seeded random traces through deeper worlds (losses and two crashes; a
//! cut link and late messages; a cut-off follower; leaders crashing; five
//! peers).
//!
//! Teeth: each rule of the safety argument, switched off
//! (`Config::mutation`, the lease's margin `Config::lease_drift` set to
//! 0, or the driver's write of a granted vote), is
//! caught, and its counterexample printed as a message-sequence trace cut
//! at the first state that breaks an invariant.
//!
//! Symmetry reduction is not used: the peers are not interchangeable in
//! this model (each has its own clock rate and random seed, and ties in
//! the order of succession go by id), so no state has a permuted twin.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use elect_raft::{Config, HardState, Message, Mutation, Node, Ready, Role, Time};
use stateright::{Checker, Expectation, Model, Property};

/// The peers' names; a model uses the first three or all five.
const NAMES: [&str; 5] = ["a", "b", "c", "d", "e"];
const T: Duration = Duration::from_millis(100);

/// The fastest and the slowest clock's rate against global time: 2.4%
/// fast and 2.4% slow, so two clocks differ by up to 4.8%, inside the 5%
/// of T the lease gives up for clock-rate error. The others lie evenly
/// between (with three peers: one exact).
const FASTEST: f64 = 1.024;
const SLOWEST: f64 = 0.976;

/// One peer: its running core (none while crashed), its disk, and a write
/// under way with the messages that wait for it; and what the model
/// watches of it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Peer {
    node: Option<Node>,
    disk: HardState,
    writing: Option<(HardState, Vec<(String, Message)>)>,
    /// Which run of the peer this is (restarts so far).
    run: u8,
    /// While the node is in the leader role: its term and when (on its
    /// clock) it took the role.
    leading: Option<(u64, Time)>,
    /// While it leads: when (on its clock) each follower's heartbeat
    /// reply of its term last arrived.
    heard: BTreeMap<usize, Time>,
    /// The leader it followed in its current term, if any: (term, leader).
    followed: Option<(u64, usize)>,
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
    /// Links (from, to) that lose everything.
    cut: BTreeSet<(usize, usize)>,
    /// (term, peer, run) for every run of a peer that ever believed it
    /// led.
    leaders: BTreeSet<(u64, usize, u8)>,
    /// The candidate each peer granted its vote in each term.
    votes: BTreeMap<(usize, u64), usize>,
    /// A peer granted a second candidate in a term.
    double_vote: bool,
    /// The highest term each peer led in; a lower one later is a fault.
    led: Vec<u64>,
    token_went_back: bool,
    /// A peer leading within its lease was made to leave its term by
    /// another than itself (a transfer of its own is the one way out).
    disrupted: bool,
    /// A leader that had heard no majority for T was still leading after
    /// its timer fired.
    overstayed: bool,
    /// A follower campaigned while the leader it followed held its lease.
    inflated: bool,
    /// The term a transfer was asked for in.
    handed_over_from: Option<u64>,
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
    /// From now on, everything from the first peer to the second is lost.
    Cut(usize, usize),
    /// From now on, everything the peer sends is lost.
    Silence(usize),
}

/// The bounds of the exploration, and the one mutation.
#[derive(Clone)]
struct Raft {
    /// 3 or 5.
    peers: usize,
    horizon: Time,
    max_crashes: u8,
    max_duplicates: u8,
    max_transfers: u8,
    max_cuts: usize,
    /// Only a peer that has led may crash, and links are cut only once
    /// someone has led: faults early in a run find nothing that pledges,
    /// PreVote or a transfer guard, and random traces spend their faults
    /// there.
    crash_after_leading: bool,
    max_in_flight: usize,
    /// How long a random trace runs, in steps.
    trace_depth: usize,
    /// The search must reach this term (some peer enters it).
    reach_term: u64,
    /// Whether messages may be lost at all.
    lossy: bool,
    /// The liveness world: no time passes while a timer is due, a
    /// message in flight or a write under way (every step is prompt),
    /// and a leader is asked to hand over by `transfer_by`.
    prompt: bool,
    transfer_by: Time,
    /// Check that a leader is elected and a transfer completes (in a
    /// prompt world without faults).
    liveness: bool,
    /// A mutation of the driver: a granted vote is not written before
    /// its reply.
    skip_vote_persist: bool,
    /// A rule of the core switched off.
    mutation: Option<Mutation>,
    /// The lease's clock-rate margin, where not the production one.
    lease_drift: Option<f64>,
    /// The slowest clock is the first peer's, the fastest the last's.
    slowest_first: bool,
    /// A leader may be silenced (once): everything it sends is lost.
    silence_a_leader: bool,
}

impl Raft {
    fn ids(&self) -> &'static [&'static str] {
        &NAMES[..self.peers]
    }

    fn config(&self, i: usize) -> Config {
        let ids: Vec<String> = self.ids().iter().map(|s| s.to_string()).collect();
        let mut cfg = Config::new(NAMES[i], &ids, T, 7 + i as u64);
        cfg.mutation = self.mutation;
        if let Some(drift) = self.lease_drift {
            cfg.lease_drift = drift;
        }
        cfg
    }

    fn rate(&self, i: usize) -> f64 {
        let place = if self.slowest_first {
            self.peers - 1 - i
        } else {
            i
        };
        FASTEST - (FASTEST - SLOWEST) * place as f64 / (self.peers - 1) as f64
    }

    /// Peer `i`'s clock at global instant `now`.
    fn local(&self, i: usize, now: Time) -> Time {
        Duration::from_nanos((now.as_nanos() as f64 * self.rate(i)) as u64)
    }

    /// The first global instant at which peer `i`'s clock reads `at`.
    fn global(&self, i: usize, at: Time) -> Time {
        let mut g = Duration::from_nanos((at.as_nanos() as f64 / self.rate(i)) as u64);
        while self.local(i, g) < at {
            g += Duration::from_nanos(1);
        }
        g
    }

    fn majority(&self) -> usize {
        self.peers / 2 + 1
    }
}

/// Notes that `voter` gave `candidate` its vote in `term`; a second
/// candidate is a double vote.
fn record_vote(
    votes: &mut BTreeMap<(usize, u64), usize>,
    double_vote: &mut bool,
    voter: usize,
    term: u64,
    candidate: usize,
) {
    match votes.get(&(voter, term)) {
        Some(&c) if c != candidate => *double_vote = true,
        _ => {
            votes.insert((voter, term), candidate);
        }
    }
}

fn index(id: &str) -> usize {
    NAMES.iter().position(|p| *p == id).expect("a peer")
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
                record_vote(&mut w.votes, &mut w.double_vote, from, term, index(&to));
            }
            // A crashed peer's connections are closed: nothing reaches it.
            let to = index(&to);
            if w.peers[to].node.is_some() && !w.cut.contains(&(from, to)) {
                w.net.push((from, to, msg));
            }
        }
        w.net.sort();
    }

    /// Records who believes it leads now, and every vote a peer holds,
    /// in memory or on disk: one cast on the strength of a pledge
    /// included.
    fn observe(&self, w: &mut World) {
        let now = w.now;
        for (i, peer) in w.peers.iter_mut().enumerate() {
            let Some(node) = &peer.node else {
                peer.leading = None;
                peer.heard.clear();
                peer.followed = None;
                continue;
            };
            let local = self.local(i, now);
            let term = node.term();
            let status = node.status(local);
            match (node.role(), &status.leader) {
                (Role::Follower, Some(leader)) => peer.followed = Some((term, index(leader))),
                _ if peer.followed.is_some_and(|(t, _)| t != term) => peer.followed = None,
                _ => {}
            }
            if node.role() == Role::Leader {
                if peer.leading.is_none_or(|(t, _)| t != term) {
                    peer.leading = Some((term, local));
                    peer.heard.clear();
                }
            } else {
                peer.leading = None;
                peer.heard.clear();
            }
            if status.is_self {
                w.leaders.insert((status.term, i, peer.run));
                if status.term < w.led[i] {
                    w.token_went_back = true;
                }
                w.led[i] = w.led[i].max(status.term);
            }
            // A leader has used its own vote (durable, or held on the
            // strength of a pledge on disk); a disk's vote is one too. A
            // vote only in memory and never used (a candidate that
            // crashed before its write) counts for nobody.
            let mut used = Vec::new();
            if node.role() == Role::Leader {
                used.push((term, i));
            }
            if let Some(candidate) = &peer.disk.voted_for {
                used.push((peer.disk.term, index(candidate)));
            }
            for (term, candidate) in used {
                record_vote(&mut w.votes, &mut w.double_vote, i, term, candidate);
            }
        }
    }

    /// Whether peer `i`, leading, has heard no majority for T (and has
    /// led for T): CheckQuorum says it must not lead past its next tick.
    fn lost_its_quorum(&self, w: &World, i: usize) -> bool {
        let peer = &w.peers[i];
        let Some((_, since)) = peer.leading else {
            return false;
        };
        let now = self.local(i, w.now);
        let recent = peer.heard.values().filter(|&&at| at + T > now).count() + 1;
        now >= since + T && recent < self.majority()
    }

    fn ready_to_act(peer: &Peer) -> Option<&Node> {
        peer.node.as_ref().filter(|_| peer.writing.is_none())
    }
}

impl Model for Raft {
    type State = World;
    type Action = Action;

    fn init_states(&self) -> Vec<World> {
        let peers = (0..self.peers)
            .map(|i| Peer {
                node: Some(Node::new(
                    self.config(i),
                    Some(HardState::default()),
                    Time::ZERO,
                )),
                disk: HardState::default(),
                writing: None,
                run: 0,
                leading: None,
                heard: BTreeMap::new(),
                followed: None,
            })
            .collect();
        vec![World {
            now: Time::ZERO,
            peers,
            net: Vec::new(),
            crashes: 0,
            duplicates: 0,
            transfers: 0,
            cut: BTreeSet::new(),
            leaders: BTreeSet::new(),
            votes: BTreeMap::new(),
            double_vote: false,
            led: vec![0; self.peers],
            token_went_back: false,
            disrupted: false,
            overstayed: false,
            inflated: false,
            handed_over_from: None,
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
            if self.lossy {
                actions.push(Action::Lose(k));
            }
            if w.duplicates < self.max_duplicates {
                actions.push(Action::Duplicate(k));
            }
        }
        let mut next_timer = None::<Time>;
        // In the prompt world, time waits for whatever can happen now.
        let mut busy = !w.net.is_empty();
        let mut transfer_pending = false;
        for (i, peer) in w.peers.iter().enumerate() {
            if peer.writing.is_some() {
                actions.push(Action::Flush(i));
                busy = true;
            }
            if let Some(node) = Self::ready_to_act(peer) {
                let due = node.next_deadline();
                if due <= self.local(i, w.now) {
                    actions.push(Action::Fire(i));
                    busy = true;
                } else {
                    let at = self.global(i, due);
                    next_timer = Some(next_timer.map_or(at, |t| t.min(at)));
                }
                let leads = node.status(self.local(i, w.now)).is_self;
                if w.transfers < self.max_transfers && leads {
                    actions.push(Action::Transfer(i));
                    transfer_pending |= w.now >= self.transfer_by;
                }
                if self.silence_a_leader && leads && w.cut.is_empty() {
                    actions.push(Action::Silence(i));
                }
            }
            let may_crash =
                w.crashes < self.max_crashes && (!self.crash_after_leading || w.led[i] > 0);
            match &peer.node {
                Some(_) if may_crash => actions.push(Action::Crash(i)),
                None => actions.push(Action::Restart(i)),
                _ => {}
            }
        }
        let waits = self.prompt && (busy || transfer_pending);
        if next_timer.is_some_and(|t| t <= self.horizon) && !waits {
            actions.push(Action::Advance);
        }
        if w.cut.len() < self.max_cuts && (!self.crash_after_leading || !w.leaders.is_empty()) {
            for from in 0..self.peers {
                for to in (0..self.peers).filter(|&to| to != from) {
                    actions.push(Action::Cut(from, to));
                }
            }
        }
    }

    fn next_state(&self, last: &World, action: Action) -> Option<World> {
        let mut w = last.clone();
        // Who leads within its lease before the step, and in which term.
        let leading_before: Vec<Option<u64>> = (0..self.peers)
            .map(|i| {
                let node = w.peers[i].node.as_ref()?;
                node.status(self.local(i, w.now))
                    .is_self
                    .then(|| node.term())
            })
            .collect();
        match action {
            Action::Deliver(k) => {
                let (from, to, msg) = w.net.remove(k);
                let now = self.local(to, w.now);
                if let Message::HeartbeatReply { term, .. } = msg
                    && w.peers[to].leading.is_some_and(|(t, _)| t == term)
                {
                    w.peers[to].heard.insert(from, now);
                }
                let node = w.peers[to].node.as_mut()?;
                let ready = node.step(now, NAMES[from], msg);
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
                let now = self.local(i, w.now);
                let must_step_down = self.lost_its_quorum(&w, i);
                let node = w.peers[i].node.as_mut()?;
                let ready = node.tick(now);
                if must_step_down && node.role() == Role::Leader {
                    w.overstayed = true;
                }
                self.apply(&mut w, i, ready);
            }
            Action::Advance => {
                w.now = w
                    .peers
                    .iter()
                    .enumerate()
                    .filter_map(|(i, p)| {
                        Some(self.global(i, Self::ready_to_act(p)?.next_deadline()))
                    })
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
                let now = self.local(i, w.now);
                w.peers[i].node = Some(Node::new(self.config(i), Some(disk), now));
                w.peers[i].run += 1;
            }
            Action::Transfer(i) => {
                let now = self.local(i, w.now);
                let node = w.peers[i].node.as_mut()?;
                w.handed_over_from = Some(node.term());
                let ready = node.transfer_leadership(now);
                self.apply(&mut w, i, ready);
                w.transfers += 1;
            }
            Action::Cut(from, to) => {
                w.cut.insert((from, to));
                w.net.retain(|&(f, t, _)| (f, t) != (from, to));
            }
            Action::Silence(from) => {
                w.cut.extend(
                    (0..self.peers)
                        .filter(|&to| to != from)
                        .map(|to| (from, to)),
                );
                w.net.retain(|&(f, _, _)| f != from);
            }
        }
        // A follower cut off from its leader that campaigns while the
        // leader holds its lease: the PreVotes it needed came from peers
        // that had heard that leader. (Not so in general: a follower's
        // PreVotes may be granted an instant before the leader's next
        // heartbeat reaches the voters; only its campaign is late, and
        // it cannot win. Nor in a world where a heartbeat may arrive T
        // late: its voters then granted out of lease.)
        for i in 0..self.peers {
            let (Some(before), Some(after)) = (&last.peers[i].node, &w.peers[i].node) else {
                continue;
            };
            let Some((term, leader)) = last.peers[i].followed else {
                continue;
            };
            let leader_leads = w.cut.contains(&(leader, i))
                && term == before.term()
                && leading_before[leader] == Some(before.term())
                && w.peers[leader].node.as_ref().is_some_and(|l| {
                    l.term() == before.term() && l.status(self.local(leader, w.now)).is_self
                });
            if after.role() == Role::Candidate && after.term() > before.term() && leader_leads {
                w.inflated = true;
            }
        }
        for (i, before) in leading_before.into_iter().enumerate() {
            let term_now = w.peers[i].node.as_ref().map(Node::term);
            let own_doing = matches!(action, Action::Transfer(j) | Action::Crash(j) if j == i);
            if before.zip(term_now).is_some_and(|(b, n)| n > b) && !own_doing {
                w.disrupted = true;
            }
        }
        self.observe(&mut w);
        Some(w)
    }

    fn within_boundary(&self, w: &World) -> bool {
        w.now <= self.horizon && w.net.len() <= self.max_in_flight
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut properties = vec![
            // One run of one peer per term: a peer that led a term must
            // not lead it again after a restart either.
            Property::always("at most one leader per term", |_, w: &World| {
                let mut terms = BTreeSet::new();
                w.leaders.iter().all(|(term, _, _)| terms.insert(*term))
            }),
            // Each judges its lease on its own clock; the instant is global.
            Property::always("no two peers lead at once", |model: &Raft, w: &World| {
                w.peers
                    .iter()
                    .enumerate()
                    .filter(|(i, p)| {
                        p.node
                            .as_ref()
                            .is_some_and(|n| n.status(model.local(*i, w.now)).is_self)
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
            // PreVote and the voter-side lease: nobody raises the term
            // past a leader that holds its lease.
            Property::always(
                "a leader within its lease is not deposed",
                |_, w: &World| !w.disrupted,
            ),
            Property::always(
                "a leader that hears no majority for T steps down",
                |_, w: &World| !w.overstayed,
            ),
            // Why `tick` never finds its own campaign inside its promise
            // (see `Node::promised_until`): no timer is drawn that early.
            Property::always(
                "no peer's timer falls due inside its promise",
                |_, w: &World| {
                    w.peers.iter().filter_map(|p| p.node.as_ref()).all(|n| {
                        n.role() == Role::Leader || n.next_deadline() >= n.promised_until()
                    })
                },
            ),
        ];
        if self.prompt {
            // Only where every message arrives at once: a heartbeat that
            // arrives T late makes its voters grant out of lease first.
            properties.push(Property::always(
                "no follower cut off from its leader campaigns in its lease",
                |_, w: &World| !w.inflated,
            ));
        }
        if self.liveness {
            properties.push(Property::eventually(
                "a leader is elected, and a transfer completes",
                |_, w: &World| {
                    w.handed_over_from
                        .is_some_and(|from| w.leaders.iter().any(|(term, _, _)| *term > from))
                },
            ));
        } else {
            properties.push(Property::sometimes("someone leads", |_, w: &World| {
                !w.leaders.is_empty()
            }));
        }
        properties.push(Property::sometimes(
            "the term to reach is reached",
            |m: &Raft, w: &World| {
                w.peers
                    .iter()
                    .filter_map(|p| p.node.as_ref())
                    .any(|n| n.term() >= m.reach_term)
            },
        ));
        properties
    }
}

/// A counterexample as a message-sequence trace: global time, then what
/// happened, a line a step.
fn trace(steps: &[(World, Option<Action>)]) -> String {
    let mut lines = Vec::new();
    for (w, action) in steps {
        let Some(action) = action.clone() else { break };
        let at = format!("{:>9.3} ms", w.now.as_secs_f64() * 1e3);
        let line = match action {
            Action::Deliver(k) | Action::Lose(k) | Action::Duplicate(k) => {
                let (from, to, msg) = &w.net[k];
                let verb = match action {
                    Action::Deliver(_) => "",
                    Action::Lose(_) => "lost: ",
                    _ => "duplicated: ",
                };
                format!("{verb}{} -> {}  {msg:?}", NAMES[*from], NAMES[*to])
            }
            Action::Fire(i) => format!("{}'s timer fires", NAMES[i]),
            Action::Advance => "time passes".to_owned(),
            Action::Flush(i) => {
                let hard = &w.peers[i].writing.as_ref().expect("a write").0;
                format!("{}'s write is done: {hard:?}", NAMES[i])
            }
            Action::Crash(i) => format!("{} crashes", NAMES[i]),
            Action::Restart(i) => format!("{} restarts from {:?}", NAMES[i], w.peers[i].disk),
            Action::Transfer(i) => format!("{} is asked to hand over", NAMES[i]),
            Action::Cut(from, to) => format!("the link {} -> {} is cut", NAMES[from], NAMES[to]),
            Action::Silence(i) => format!("everything {} sends is lost from now on", NAMES[i]),
        };
        lines.push(format!("{at}  {line}"));
    }
    lines.join("\n")
}

/// The bounds CI checks exhaustively: three peers, three election
/// timeouts of model time, one crash, one duplicate, one transfer, any
/// message lost.
fn bounded() -> Raft {
    Raft {
        peers: 3,
        horizon: T * 3,
        max_crashes: 1,
        max_duplicates: 1,
        max_transfers: 1,
        max_cuts: 0,
        crash_after_leading: false,
        max_in_flight: 4,
        trace_depth: 60,
        reach_term: 2,
        lossy: true,
        prompt: false,
        transfer_by: Time::MAX,
        liveness: false,
        skip_vote_persist: false,
        mutation: None,
        lease_drift: None,
        slowest_first: false,
        silence_a_leader: false,
    }
}

/// A deeper world than breadth-first search can cover: four election
/// timeouts, two crashes, any message lost or late. Searched by random
/// traces.
fn deep() -> Raft {
    Raft {
        horizon: T * 4,
        max_crashes: 2,
        max_duplicates: 0,
        max_transfers: 0,
        reach_term: 3,
        ..bounded()
    }
}

/// Nothing lost, but messages may be late; once someone has led, one
/// link may be cut for good, a peer that has led may crash (twice), and
/// a leader may be asked to hand over. Six election timeouts.
fn cut_and_late() -> Raft {
    Raft {
        horizon: T * 6,
        max_crashes: 2,
        max_duplicates: 0,
        max_transfers: 1,
        max_cuts: 1,
        crash_after_leading: true,
        max_in_flight: 10,
        trace_depth: 150,
        lossy: false,
        reach_term: 4,
        ..bounded()
    }
}

/// A prompt world (time passes only when nothing else can happen: every
/// message arrives at once) where, once someone has led, one link is cut
/// for good. The world of PreVote: a follower cut off from its leader.
fn prompt_cut() -> Raft {
    Raft {
        max_crashes: 0,
        max_transfers: 0,
        trace_depth: 200,
        prompt: true,
        reach_term: 1,
        ..cut_and_late()
    }
}

/// The world of pledges: prompt, a peer that has led may crash (twice)
/// and restart from its disk, one hand-over, one cut link. Five election
/// timeouts.
fn prompt_crashes() -> Raft {
    Raft {
        horizon: T * 5,
        trace_depth: 60,
        prompt: true,
        reach_term: 4,
        ..cut_and_late()
    }
}

/// The world of the liveness check: prompt, no faults, a hand-over asked
/// for at some moment before 2.5 T (if anyone leads by then).
fn prompt_without_faults() -> Raft {
    Raft {
        horizon: T * 4,
        max_crashes: 0,
        max_duplicates: 0,
        max_cuts: 0,
        max_in_flight: 10,
        lossy: false,
        prompt: true,
        transfer_by: T * 5 / 2,
        liveness: true,
        ..bounded()
    }
}

/// The world of the lease's clock-rate margin: prompt (no message takes
/// any time, so a follower's promise starts the instant the leader's
/// lease does), no losses or crashes, the slowest clock the first peer's
/// (the first to lead), and a leader may fall silent once: everything it
/// sends is lost from then on, so that its followers time out at the end
/// of their promise while it judges its lease on its slow clock.
fn silenced_leader() -> Raft {
    Raft {
        horizon: T * 5,
        max_crashes: 0,
        max_duplicates: 0,
        max_transfers: 0,
        max_in_flight: 10,
        trace_depth: 300,
        lossy: false,
        prompt: true,
        reach_term: 2,
        slowest_first: true,
        silence_a_leader: true,
        ..bounded()
    }
}

/// Every interleaving of `model`, up to `states`.
fn search_breadth_first(model: Raft, states: usize) -> impl Checker<Raft> {
    model
        .checker()
        .threads(2)
        .target_state_count(states)
        .spawn_bfs()
        .join()
}

fn breadth_first(model: Raft, states: usize) {
    let started = std::time::Instant::now();
    let checker = search_breadth_first(model, states);
    eprintln!(
        "raft-vote model, breadth first: {} states, {} distinct, depth {}, {:.1?}",
        checker.state_count(),
        checker.unique_state_count(),
        checker.max_depth(),
        started.elapsed()
    );
    assert_safe(&checker);
}

/// How many states each random search visits: `ELECT_MODEL_STATES`, by
/// default 600,000 (what CI runs; the book's figures are for
/// `ELECT_MODEL_STATES=3000000`).
fn budget() -> usize {
    std::env::var("ELECT_MODEL_STATES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(600_000)
}

/// Seeded random traces through `model` (stateright's simulation
/// checker), `budget()` states.
fn random_traces(model: Raft, seed: u64) -> impl Checker<Raft> {
    let depth = model.trace_depth;
    // One thread: the same seed walks the same traces, so a counterexample
    // found once is found on every run.
    model
        .checker()
        .threads(1)
        .target_max_depth(depth)
        .target_state_count(budget())
        .spawn_simulation(seed, stateright::UniformChooser)
        .join()
}

fn random_traces_keep_safe(what: &str, model: Raft) {
    let started = std::time::Instant::now();
    let checker = random_traces(model, 1);
    eprintln!(
        "raft-vote model, random traces, {what}: {} states, depth {}, {:.1?}",
        checker.state_count(),
        checker.max_depth(),
        started.elapsed()
    );
    assert_safe(&checker);
}

/// The first safety property `checker` found broken: its name, the length
/// of the trace up to the first state that breaks it, and that trace.
fn broken(checker: &impl Checker<Raft>) -> Option<(&'static str, usize, String)> {
    let model = checker.model();
    model.properties().into_iter().find_map(|property| {
        if property.expectation != Expectation::Always {
            return None;
        }
        let path = checker.discovery(property.name)?.into_vec();
        let first_bad = path
            .iter()
            .position(|(w, _)| !(property.condition)(model, w))
            .unwrap_or(path.len() - 1);
        Some((property.name, first_bad, trace(&path[..first_bad])))
    })
}

/// Panics with the trace of the first safety property `checker` found
/// broken, then checks the rest (the sometimes and eventually ones).
fn assert_safe(checker: &impl Checker<Raft>) {
    if let Some((property, steps, trace)) = broken(checker) {
        panic!("\"{property}\" broken in {steps} steps:\n{trace}");
    }
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

#[test]
fn every_interleaving_of_a_prompt_world_keeps_raft_vote_safe() {
    let world = Raft {
        reach_term: 2,
        ..prompt_crashes()
    };
    breadth_first(world, 1_000_000);
}

#[test]
fn without_faults_a_leader_is_elected_and_a_transfer_completes() {
    breadth_first(prompt_without_faults(), 2_000_000);
}

#[test]
fn deep_random_traces_keep_raft_vote_safe() {
    random_traces_keep_safe("losses and two crashes", deep());
}

#[test]
fn random_traces_with_a_cut_link_and_late_messages_keep_raft_vote_safe() {
    random_traces_keep_safe("a cut link, late messages", cut_and_late());
}

#[test]
fn random_traces_of_a_cut_off_follower_keep_raft_vote_safe() {
    random_traces_keep_safe("a cut-off follower", prompt_cut());
}

#[test]
fn random_traces_with_crashes_of_leaders_keep_raft_vote_safe() {
    random_traces_keep_safe("leaders crash", prompt_crashes());
}

#[test]
fn five_peers_keep_raft_vote_safe() {
    let world = Raft {
        peers: 5,
        reach_term: 1,
        ..deep()
    };
    random_traces_keep_safe("five peers", world);
}

/// Asserts that `what` is caught in `model`, by the random traces of
/// seed 1, 2, ... (the first five), and prints how.
fn caught(what: &str, model: Raft) {
    let found = (1..=5).find_map(|seed| broken(&random_traces(model.clone(), seed)));
    let (property, steps, trace) = found.unwrap_or_else(|| {
        panic!("{what}: the checker must find what this rule prevents (five seeds)")
    });
    eprintln!("{what}: \"{property}\" broken in {steps} steps:\n{trace}");
}

/// `world` with one rule of the core switched off.
fn mutant(mutation: Mutation, world: Raft) -> Raft {
    Raft {
        mutation: Some(mutation),
        ..world
    }
}

/// The question of issue 24: is the write of a granted vote redundant,
/// given the voter's quiet period after a restart? No: the same traces
/// that keep the production core safe find, without it, a restarted voter
/// that has forgotten its vote and grants (or takes) the term again.
#[test]
fn without_the_persist_of_a_granted_vote_a_peer_votes_twice() {
    let world = Raft {
        skip_vote_persist: true,
        ..deep()
    };
    caught("no persist of a granted vote", world);
}

#[test]
fn without_the_double_vote_check_a_peer_votes_twice() {
    let world = mutant(Mutation::NoDoubleVoteCheck, deep());
    caught("no double-vote check", world);
}

#[test]
fn without_the_voter_side_lease_two_peers_lead_at_once() {
    let world = mutant(Mutation::NoVoterLease, deep());
    caught("no voter-side lease", world);
}

#[test]
fn without_checkquorum_a_leader_that_hears_nobody_leads_on() {
    let world = mutant(Mutation::NoCheckQuorum, deep());
    caught("no CheckQuorum step-down", world);
}

#[test]
fn without_prevotes_lease_check_a_cut_off_follower_raises_the_term() {
    let world = mutant(Mutation::NoPreVoteLease, prompt_cut());
    caught("no PreVote lease check", world);
}

#[test]
fn a_leader_stepping_down_on_any_higher_term_is_deposed_within_its_lease() {
    let world = mutant(Mutation::DeposedInLease, deep());
    caught("deposed within the lease", world);
}

#[test]
fn a_prevote_round_outliving_our_vote_lets_two_peers_lead_at_once() {
    let world = mutant(Mutation::PreVoteRoundOutlivesVote, cut_and_late());
    caught("PreVote round outlives a vote", world);
}

#[test]
fn without_a_pledge_binding_as_a_vote_a_term_has_two_leaders() {
    let world = mutant(Mutation::PledgeNotBinding, prompt_crashes());
    caught("pledge not binding", world);
}

#[test]
fn without_a_pledge_on_disk_standing_a_term_has_two_leaders() {
    let world = mutant(Mutation::DiskPledgeAsOwn, prompt_crashes());
    caught("pledge on disk taken for this run's", world);
}

/// Asserts that `what` is caught in `model` by a search of every
/// interleaving (so by a shortest counterexample), and prints how.
fn caught_breadth_first(what: &str, model: Raft, states: usize) {
    let checker = search_breadth_first(model, states);
    let (property, steps, trace) = broken(&checker)
        .unwrap_or_else(|| panic!("{what}: the checker must find what this rule prevents"));
    eprintln!("{what}: \"{property}\" broken in {steps} steps:\n{trace}");
}

/// The world in which the lease's clock-rate margin matters: every
/// interleaving keeps the production core safe there...
#[test]
fn a_silenced_leader_on_the_slowest_clock_keeps_raft_vote_safe() {
    breadth_first(silenced_leader(), 1_000_000);
}

/// ...and without the margin (`lease_drift` 0), its followers, on
/// faster clocks, time out at the end of their promise and elect a
/// successor while it still judges its lease unexpired on its slow clock.
#[test]
fn without_the_lease_drift_margin_two_peers_lead_at_once() {
    let world = Raft {
        lease_drift: Some(0.0),
        ..silenced_leader()
    };
    caught_breadth_first("no lease drift margin", world, 1_000_000);
}
