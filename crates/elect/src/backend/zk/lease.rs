//! How long a ZooKeeper session provably lives: the rule that lets a leader
//! lead on through a disconnection, and its argument.
//!
//! A session dies only when the ZooKeeper *leader's* session tracker
//! expires it: at `roundUp(last touch + timeout)`, the touch being the
//! leader's record that the session was heard from (`touchSession`, expiry
//! buckets of one tick). A follower does not touch the leader's tracker per
//! request: it notes the sessions it heard from, and sends that note in its
//! reply to the leader's next PING; the leader pings every follower each
//! tick/2. So the member we talk to answering us proves nothing by itself
//! about the leader's clock: it may die, or be cut off from the leader,
//! with our touches still in its note. What we can prove:
//!
//! 1. **Session creation and revalidation touch the leader directly.** A
//!    new session is created by the leader; a reconnection to any member is
//!    validated with the leader (`REVALIDATE`, which touches) before the
//!    member answers. The handshake was sent after we started it, so the
//!    leader touched at or after that instant.
//! 2. **Renewals: a `sync` forwarded to the leader is answered only after
//!    the leader processed it.** The follower forwards our sync on its one
//!    ordered stream to the leader, the same stream that carries its PING
//!    replies. Take answered renewals `j`, `i`, `k` (sent in that order,
//!    each after the previous was answered) where `i` was sent at least
//!    `Q` after `j`'s *answer arrived*: `s_i >= r_j + Q`. The leader
//!    answered `j` before `r_j`, and pinged the follower at least once in
//!    the `Q` before it answered `i` (pings every tick/2 <= timeout/4,
//!    since ZooKeeper grants no session shorter than two ticks), so after
//!    it answered `j`. On the leader's ordered stream that ping arrived
//!    after the answer to `j`, so after the follower had heard renewal
//!    `j`, and before the answer to `i`; the follower's reply to it (or
//!    an earlier one, already carrying `j`'s touch) left before our
//!    renewal `k` was even sent. The leader answered sync `k`, so it had
//!    read everything the follower sent before it: it touched our session
//!    at or after `s_j`. If the connection changed anywhere between `j`
//!    and `k`, the reconnection's revalidation (1) touched at or after the
//!    last answer on the old connection, which is after `s_j` too.
//!    (Counting `Q` from `j`'s send time instead, as elect did first, is
//!    not enough: a renewal slow to reach the follower misses the ping
//!    that `Q` guarantees. The model checker in `model::lease` found it.)
//! 3. **A ZooKeeper leader change or a lost quorum never shortens a
//!    session**: without a leader nothing expires, and a new leader's
//!    tracker starts every session afresh with a whole timeout.
//!
//! So the session lives at least until `proven + timeout` (in the leader's
//! clock, which our margin covers for rate error), where `proven` is the
//! latest of: the handshake's start, and the send time of the latest
//! renewal whose answer arrived at least `Q` before the second-latest
//! answered one was sent.
//! `Q = timeout / 3`: the ping interval (<= timeout/4) plus timeout/12 for
//! a late ping loop and uneven delivery. Renewals are syncs every
//! timeout/20, so in steady state the deadline stays about 0.57 timeout
//! ahead of the last renewal: time for the client to notice a silent
//! member (elect gives the library a connection timeout of timeout/5) and
//! to move to another, even past a second frozen one. Counting from the last
//! answered renewal, as elect did before (and as the member's answer seems
//! to allow), is what CURATOR-460 did in another form; the test below
//! replays the follower's note being lost and finds that rule unsafe.

use std::collections::VecDeque;
use std::time::Duration;

#[cfg(test)]
use super::recipe::Mutation;
use crate::backend::cadence::Cadence;
use crate::clock::BootInstant;
use crate::leadership::deadline_after;

/// Renewals kept: enough to span `Q` at the renewal cadence, with room for
/// renewals that are answered late.
const KEPT: usize = 64;

/// `Q` for a session of `timeout`: a third of it (see the module doc).
pub fn settle_for(timeout: Duration) -> Duration {
    timeout / 3
}

/// A session's handshake, from the moment it is sent to its answer. The
/// lease's first bound is decided here, from what the driver saw, so that
/// the model checker (`model::lease`) runs the decision the driver runs:
///
/// - **from the handshake's start**, not its answer: the ZooKeeper leader
///   created (or revalidated) the session somewhere between the two, and
///   counting from an answer that was slow to come back would put the
///   expiry we assume after the leader's;
/// - **for the negotiated timeout**, not the requested one: servers clamp
///   the request to 2..20 ticks, and expire the session on what they
///   granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Handshake {
    started: BootInstant,
    requested: Duration,
    #[cfg(test)]
    mutation: Option<Mutation>,
}

impl Handshake {
    /// A handshake asking for a session of `requested`, sent from `now` on.
    pub fn start(now: BootInstant, requested: Duration) -> Handshake {
        Handshake {
            started: now,
            requested,
            #[cfg(test)]
            mutation: None,
        }
    }

    /// The same handshake with one of its rules switched off (the model
    /// checker's teeth).
    #[cfg(test)]
    pub fn mutated(mut self, mutation: Option<Mutation>) -> Handshake {
        self.mutation = mutation;
        self
    }

    /// The server answered at `now`, granting a session of `negotiated`:
    /// what the session's life is proven to be so far.
    pub fn answered(self, now: BootInstant, negotiated: Duration) -> SessionLease {
        #[cfg(test)]
        match self.mutation {
            Some(Mutation::LeaseFromHandshakeAnswer) => return SessionLease::new(negotiated, now),
            Some(Mutation::LeaseForRequestedTimeout) => {
                return SessionLease::new(self.requested, self.started);
            }
            _ => {}
        }
        tracing::debug!(
            round_trip = ?now.saturating_duration_since(self.started),
            requested = ?self.requested,
            granted = ?negotiated,
            "the session's lease counts from its handshake's start"
        );
        SessionLease::new(negotiated, self.started)
    }
}

/// What a session's renewals prove about its life on the ZooKeeper leader.
#[derive(Debug, Clone)]
pub struct SessionLease {
    timeout: Duration,
    /// `Q` (see [`SessionLease::settle`]).
    settle: Duration,
    /// Answered renewals, oldest first: when each was sent, and when its
    /// answer arrived.
    answered: VecDeque<(BootInstant, BootInstant)>,
    /// The latest instant at which the leader provably touched the session.
    proven: Option<BootInstant>,
}

impl SessionLease {
    /// A lease for a session with the negotiated `timeout`, whose handshake
    /// was started at `handshake` (the leader created or revalidated the
    /// session after that).
    pub fn new(timeout: Duration, handshake: BootInstant) -> Self {
        SessionLease {
            timeout,
            settle: settle_for(timeout),
            answered: VecDeque::new(),
            proven: Some(handshake),
        }
    }

    /// The same lease with another `Q`: the model checker's teeth.
    #[cfg(test)]
    pub(crate) fn with_settle(mut self, settle: Duration) -> Self {
        self.settle = settle;
        self
    }

    /// How often a session syncs to keep its lease proven: T/20 for a
    /// leader and the next in line; T/16 for a follower, just inside the
    /// interval at which the library pings an idle session (3/8 of our
    /// connection timeout of T/5: 3T/40), so its syncs take the pings'
    /// place and it costs the servers what an idle session does, its
    /// proof ready all the same (about 0.5 T ahead) should its turn come.
    pub fn renew_every(&self, cadence: Cadence) -> Duration {
        match cadence {
            Cadence::Leading => self.timeout / 20,
            Cadence::Following => self.timeout / 16,
        }
    }

    /// `Q`: how long before the second-latest answered renewal was sent a
    /// renewal's answer must have arrived for its touch to be proven (see
    /// the module doc).
    pub fn settle(&self) -> Duration {
        self.settle
    }

    /// A sync sent at `sent` was answered at `answered` (and every earlier
    /// one was answered or given up before it was sent).
    pub fn renewed(&mut self, sent: BootInstant, answered: BootInstant) {
        if let Some(&(previous, _)) = self.answered.back() {
            let settle = self.settle();
            if let Some(&(touched, _)) = self
                .answered
                .iter()
                .rev()
                .find(|&&(_, got)| got + settle <= previous)
            {
                self.prove(touched);
            }
        }
        self.answered.push_back((sent, answered));
        if self.answered.len() > KEPT {
            self.answered.pop_front();
        }
    }

    fn prove(&mut self, touched: BootInstant) {
        self.proven = Some(self.proven.map_or(touched, |p| p.max(touched)));
    }

    /// The latest instant at which the leader provably touched the session.
    #[cfg(test)]
    pub fn proven(&self) -> Option<BootInstant> {
        self.proven
    }

    /// Our leadership deadline: the session provably lives until
    /// `proven + timeout`; the margin covers clock-rate error and the time
    /// to kill the work.
    pub fn deadline(&self) -> Option<BootInstant> {
        self.proven.map(|p| deadline_after(p, self.timeout))
    }
}

#[cfg(test)]
mod tests {
    use std::cmp::Reverse;
    use std::collections::{BinaryHeap, HashSet};

    use super::*;

    const T: Duration = Duration::from_secs(4);

    #[test]
    fn the_handshake_is_proven_at_once() {
        let start = BootInstant::now();
        let lease = SessionLease::new(T, start);
        assert_eq!(lease.proven(), Some(start));
        assert_eq!(lease.deadline(), Some(deadline_after(start, T)));
    }

    #[test]
    fn a_renewal_counts_once_a_later_one_is_settle_younger_and_another_answered() {
        let start = BootInstant::now();
        let mut lease = SessionLease::new(T, start);
        let step = lease.renew_every(Cadence::Leading);
        let at = |n: u32| start + step * n;
        // Renewals every T/20; settle = T/3 is 6.67 steps.
        for n in 1..=8 {
            lease.renewed(at(n), at(n));
        }
        // The second-latest is renewal 7: only renewals at or before
        // 7 - 6.67 steps count, so renewal 0's handshake is still the bound.
        assert_eq!(lease.proven(), Some(start));
        lease.renewed(at(9), at(9));
        // Second-latest 8: renewal 1 (at 1 step) is settle older.
        assert_eq!(lease.proven(), Some(at(1)));
        for n in 10..=40 {
            lease.renewed(at(n), at(n));
        }
        assert_eq!(lease.proven(), Some(at(32)));
        // In steady state the deadline is ~0.57 T ahead of the last send.
        let ahead = lease.deadline().unwrap() - at(40);
        assert!(ahead > T / 2 && ahead < T * 6 / 10, "{ahead:?}");
    }

    /// A small world in microseconds: a ZooKeeper leader pinging one
    /// follower every tick/2 (sometimes late), ordered streams both ways
    /// with random delays, our client syncing through the follower, and
    /// the follower dying (with whatever it had in flight) right after any
    /// of its answers. Whatever the follower managed to tell the leader
    /// before dying must cover the bound the client derived.
    struct World {
        seed: u64,
        tick: u64,
        timeout: u64,
        /// The ping loop's lateness and each hop's delay, at most.
        late: u64,
        hop: u64,
        /// The client sends its next sync at any moment within a renewal
        /// period of an answer, not a period after it: the lease's rule
        /// must not lean on the cadence, and this gives a sync chain
        /// room to outrun the pings.
        eager: bool,
    }

    #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
    enum Event {
        /// The leader's ping loop fires.
        LeaderPings,
        /// A ping reaches the follower (leader -> follower stream).
        PingArrives,
        /// Our sync `k` reaches the follower.
        SyncAtFollower { k: usize },
        /// The forwarded sync reaches the leader.
        SyncAtLeader { k: usize },
        /// The leader's sync answer reaches the follower.
        SyncBack { k: usize },
        /// The follower's answer reaches the client.
        Answered { k: usize },
        /// The client sends its next sync.
        ClientSends,
    }

    impl World {
        fn random(&mut self, below: u64) -> u64 {
            self.seed ^= self.seed << 13;
            self.seed ^= self.seed >> 7;
            self.seed ^= self.seed << 17;
            if below == 0 { 0 } else { self.seed % below }
        }

        /// Runs the world for `horizon`; returns the worst `leader touch -
        /// proven bound` seen (negative would be unsafe), in microseconds,
        /// for the rule given.
        fn run(&mut self, horizon: u64, rule: Rule) -> i64 {
            let mut queue: BinaryHeap<Reverse<(u64, u64, Event)>> = BinaryHeap::new();
            let mut seq = 0;
            let mut push = |q: &mut BinaryHeap<_>, at: u64, e: Event| {
                seq += 1;
                q.push(Reverse((at, seq, e)));
            };
            // Ordered streams: an arrival is never before the previous one.
            let (mut to_follower, mut to_leader, mut to_client) = (0u64, 0u64, 0u64);
            let mut touched_since_reply = false;
            // The leader's touches of our session: when each ping reply
            // carrying it arrived.
            let mut touches: Vec<u64> = Vec::new();
            let mut sent_at: Vec<u64> = Vec::new();
            let mut answered: Vec<(u64, u64)> = Vec::new();
            let mut worst = i64::MAX;
            push(&mut queue, 0, Event::LeaderPings);
            push(&mut queue, 0, Event::ClientSends);
            while let Some(Reverse((now, _, event))) = queue.pop() {
                if now > horizon {
                    break;
                }
                match event {
                    Event::LeaderPings => {
                        let at = (now + self.random(self.hop)).max(to_follower);
                        to_follower = at;
                        push(&mut queue, at, Event::PingArrives);
                        let next = now + self.tick / 2 + self.random(self.late);
                        push(&mut queue, next, Event::LeaderPings);
                    }
                    Event::PingArrives => {
                        let at = (now + self.random(self.hop)).max(to_leader);
                        to_leader = at;
                        if std::mem::take(&mut touched_since_reply) {
                            touches.push(at);
                        }
                    }
                    Event::ClientSends => {
                        let k = sent_at.len();
                        sent_at.push(now);
                        push(
                            &mut queue,
                            now + self.random(self.hop),
                            Event::SyncAtFollower { k },
                        );
                    }
                    Event::SyncAtFollower { k } => {
                        touched_since_reply = true;
                        let at = (now + self.random(self.hop)).max(to_leader);
                        to_leader = at;
                        push(&mut queue, at, Event::SyncAtLeader { k });
                    }
                    Event::SyncAtLeader { k } => {
                        let at = (now + self.random(self.hop)).max(to_follower);
                        to_follower = at;
                        push(&mut queue, at, Event::SyncBack { k });
                    }
                    Event::SyncBack { k } => {
                        let at = (now + self.random(self.hop)).max(to_client);
                        to_client = at;
                        // The follower dies right after sending this answer:
                        // what it sent to the leader and has not arrived is
                        // lost. The leader keeps the touches that arrived.
                        let kept = touches
                            .iter()
                            .filter(|&&arrival| arrival <= now)
                            .max()
                            .copied()
                            .unwrap_or(0);
                        // The client gets the answer (in the world where the
                        // follower lives on, the same answer), and derives
                        // its bound from it.
                        answered.push((sent_at[k], at));
                        if let Some(proven) = rule(&answered, self.timeout) {
                            worst = worst.min(kept as i64 - proven as i64);
                        }
                        push(&mut queue, at, Event::Answered { k });
                    }
                    Event::Answered { .. } => {
                        let every = self.timeout / 20;
                        let wait = if self.eager { 0 } else { every };
                        push(
                            &mut queue,
                            now + wait + self.random(every),
                            Event::ClientSends,
                        );
                    }
                }
            }
            worst
        }
    }

    /// The production rule, on microsecond send times.
    /// A rule: answered renewals (send, answer's arrival) to the proven
    /// bound.
    type Rule = fn(&[(u64, u64)], u64) -> Option<u64>;

    fn production(answered: &[(u64, u64)], timeout: u64) -> Option<u64> {
        with_settle(answered, timeout, timeout / 3)
    }

    /// The rule with another `Q`.
    fn with_settle(answered: &[(u64, u64)], timeout: u64, settle: u64) -> Option<u64> {
        let base = BootInstant::now();
        let mut lease = SessionLease::new(Duration::from_micros(timeout), base);
        lease.settle = Duration::from_micros(settle);
        let at = |t: u64| base + Duration::from_micros(t + 1);
        for &(sent, got) in answered {
            lease.renewed(at(sent), at(got));
        }
        let proven = lease
            .proven()
            .unwrap()
            .saturating_duration_since(base)
            .as_micros() as u64;
        // The handshake (at 0) is not part of this world.
        (proven > 0).then(|| proven - 1)
    }

    /// The rule elect had before: the last answered renewal.
    fn last_answered(answered: &[(u64, u64)], _timeout: u64) -> Option<u64> {
        answered.last().map(|&(sent, _)| sent)
    }

    fn worlds() -> impl Iterator<Item = World> {
        (1..=300u64).map(|seed| {
            let tick = [200_000, 500_000, 2_000_000][(seed % 3) as usize];
            // The shortest session ZooKeeper grants (two ticks) and longer.
            let timeout = tick * (2 + seed % 4);
            World {
                seed: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
                tick,
                timeout,
                late: timeout / 24,
                hop: timeout / 48,
                eager: false,
            }
        })
    }

    /// At the production cadence, and with syncs sent at any moment.
    #[test]
    fn the_bound_never_passes_what_the_leader_touched() {
        let mut seen = HashSet::new();
        let eager = worlds().map(|w| World { eager: true, ..w });
        for mut world in worlds().chain(eager) {
            seen.insert(world.tick);
            let horizon = world.timeout * 20;
            let worst = world.run(horizon, production);
            assert!(
                worst >= 0,
                "tick {} timeout {}: the bound passed the leader's touch by {} us",
                world.tick,
                world.timeout,
                -worst
            );
        }
        assert_eq!(seen.len(), 3);
    }

    /// The exhaustive model's whole steps of T/4 cannot tell a settle
    /// time of T/6 from one of T/8; this world's microseconds can. A `Q`
    /// shorter than the ping interval (tick/2, T/4 at the shortest
    /// session) lets a renewal count whose touch no ping carried yet.
    /// Only with eager syncs: at the production cadence a chain of three
    /// syncs takes longer than a ping interval, and only a `Q` of T/12
    /// or less shows.
    #[test]
    fn a_settle_shorter_than_the_ping_interval_is_unsafe() {
        let sixth: Rule = |answered, timeout| with_settle(answered, timeout, timeout / 6);
        let unsafe_worlds = worlds()
            .filter(|w| w.timeout == w.tick * 2)
            .map(|w| World { eager: true, ..w })
            .filter_map(|mut w| (w.run(w.timeout * 20, sixth) < 0).then_some(()))
            .count();
        assert!(unsafe_worlds > 0, "a settle of T/6 must be shown unsafe");
    }

    #[test]
    fn counting_from_the_last_answer_is_unsafe() {
        let unsafe_worlds = worlds()
            .filter(|w| w.timeout == w.tick * 2)
            .filter_map(|mut w| (w.run(w.timeout * 20, last_answered) < 0).then_some(()))
            .count();
        assert!(unsafe_worlds > 0, "the old rule must be shown unsafe");
    }
}
