//! One peer's election state machine.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::config::{Config, switched_off};
use crate::message::{HardState, Message, Pledge};

/// Time since an arbitrary, fixed origin.
pub type Time = Duration;

/// Where a node stands in the election.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Follows a leader, or waits for one.
    Follower,
    /// Asks for pre-votes before raising its term.
    PreCandidate,
    /// Asks for votes in a new term.
    Candidate,
    /// Leads (within its lease).
    Leader,
}

/// What the driver must do after a call: persist first, then send.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Ready {
    /// State to make durable before any message is sent. Requests
    /// (PreVote, Vote, TimeoutNow) may leave while it is written: a
    /// request promises nothing; what answers to it waits for the disk.
    pub persist: Option<HardState>,
    /// Messages to send, with their recipient.
    pub messages: Vec<(String, Message)>,
}

/// Who leads, as this node sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// The leader this node knows of.
    pub leader: Option<String>,
    /// The leader's term: the fencing token.
    pub term: u64,
    /// This node leads, until `lease_until`.
    pub is_self: bool,
    /// The end of our lease, while we lead.
    pub lease_until: Option<Time>,
}

/// One peer's election state machine: fed time and messages, it returns
/// what to persist and send ([`Ready`]) and who leads ([`Status`]).
/// Cloned, compared and hashed whole, so that a model checker can hold
/// nodes in its states.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Node {
    cfg: Config,
    hard: HardState,
    role: Role,
    leader: Option<String>,
    rng: u64,
    /// Followers and candidates time out at this instant.
    election_due: Time,
    /// Last time a leader of the current term was heard.
    heard_leader_at: Option<Time>,
    /// No vote is cast, not even for a transfer, before this instant: a
    /// peer that lost its hard state must not vote twice in a term. (It
    /// never ends after the promise of our start, `promised_until`.)
    quiet_until: Time,
    /// (Pre)votes are refused before this instant, whoever leads: we may
    /// have promised a leader its lease, by granting it our vote or (before
    /// a restart, which forgets whom we heard) by acknowledging it.
    promised_until: Time,
    /// When our latest campaign's vote requests left: a leader's lease
    /// starts there (see [`Node::step`] on votes).
    campaigned_at: Time,
    /// Granted (pre)votes in the current campaign.
    votes: BTreeSet<String>,
    /// `hard.pledge` was made by this run of the node and not used yet
    /// (using it means entering its term, which folds it into the vote),
    /// so we may rely on it, move it or take it back. A pledge found on
    /// disk at start may have been used before the restart.
    pledge_unused: bool,
    /// The term we handed leadership over into: we claim nothing in it
    /// (see [`Node::pledge_next_term`]).
    handed_over_into: Option<u64>,
    leader_state: Option<LeaderState>,
    /// The order of succession the current leader last published.
    successors: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct LeaderState {
    round: u64,
    heartbeat_due: Time,
    /// Send time of each round that may still extend the lease.
    sent_at: BTreeMap<u64, Time>,
    /// Highest round each peer acknowledged, and when.
    acked: BTreeMap<String, (u64, Time)>,
    since: Time,
    lease_until: Option<Time>,
    /// The order of succession sent with the latest heartbeats.
    published: Vec<String>,
    /// The peers that granted us this term: alive a moment ago, so a
    /// transfer asked for before any heartbeat is answered goes to one.
    voters: BTreeSet<String>,
    /// The follower an operator's switchover chose: first in the order of
    /// succession while it is set (see [`Node::prefer`]).
    preferred: Option<String>,
}

impl Node {
    /// A node at `now`. `hard` is what was persisted; `None` when there is
    /// no durable state (no data dir), which keeps the node from voting at
    /// all, or campaigning, for one election timeout. Either way it refuses
    /// (pre)votes for one election timeout: before this start it may have
    /// promised a leader its lease.
    pub fn new(cfg: Config, hard: Option<HardState>, now: Time) -> Node {
        let quiet_until = if hard.is_none() {
            now + cfg.election_timeout
        } else {
            now
        };
        let mut node = Node {
            rng: cfg.seed ^ 0x9e37_79b9_7f4a_7c15,
            role: Role::Follower,
            leader: None,
            election_due: now,
            heard_leader_at: None,
            quiet_until,
            promised_until: now + cfg.election_timeout,
            campaigned_at: now,
            votes: BTreeSet::new(),
            // (The mutation: as if this run had made the pledge.)
            pledge_unused: switched_off!(cfg, DiskPledgeAsOwn)
                && hard.as_ref().is_some_and(|h| h.pledge.is_some()),
            handed_over_into: None,
            leader_state: None,
            successors: Vec::new(),
            hard: hard.unwrap_or_default(),
            cfg,
        };
        node.reset_election_timer(now);
        node
    }

    /// This node's id.
    pub fn id(&self) -> &str {
        &self.cfg.id
    }

    /// This node's role now.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The election timeout `T`: how long a leader's lease lasts, and how
    /// long a peer may go unheard before it counts as gone.
    pub fn election_timeout(&self) -> Duration {
        self.cfg.election_timeout
    }

    /// How often this node heartbeats while it leads.
    pub fn heartbeat_interval(&self) -> Duration {
        self.cfg.heartbeat_interval
    }

    /// This node's current term.
    pub fn term(&self) -> u64 {
        self.hard.term
    }

    /// Term, vote and pledge as this node holds them now: ahead of the
    /// disk between a change and its write, and, after a vote a pledge
    /// cast, ahead of it for as long as the pledge stands in for it.
    pub fn hard_state(&self) -> &HardState {
        &self.hard
    }

    /// Who leads as of `now`.
    pub fn status(&self, now: Time) -> Status {
        if let Some(ls) = &self.leader_state {
            let leading = ls.lease_until.is_some_and(|until| now < until);
            return Status {
                leader: leading.then(|| self.cfg.id.clone()),
                term: self.hard.term,
                is_self: leading,
                lease_until: ls.lease_until.filter(|_| leading),
            };
        }
        let fresh = self
            .heard_leader_at
            .is_some_and(|at| now < at + self.cfg.election_timeout);
        Status {
            leader: self.leader.clone().filter(|_| fresh),
            term: self.hard.term,
            is_self: false,
            lease_until: None,
        }
    }

    /// Until when this node refuses (pre)votes, its own campaign included:
    /// the promise of its latest granted vote, or of its start.
    ///
    /// `tick` defers a campaign whose timer falls inside it, but no timer
    /// is ever drawn there: a promise is made (a start, a granted vote)
    /// only together with a fresh election timer, at least T ahead, and
    /// every later draw (a heartbeat, a step-down, a hand-over) is at
    /// least T after its own, later, instant. So a follower's timer never
    /// falls before its promise ends. The model check holds that as a
    /// property in every search ("no peer's timer falls due inside its
    /// promise"); the deferral in `tick` keeps the rule should a future
    /// timer be drawn shorter.
    #[doc(hidden)]
    pub fn promised_until(&self) -> Time {
        self.promised_until
    }

    /// The next instant `tick` has something to do.
    pub fn next_deadline(&self) -> Time {
        match &self.leader_state {
            Some(ls) => ls.heartbeat_due,
            None => self.election_due,
        }
    }

    fn majority(&self) -> usize {
        self.cfg.peers.len() / 2 + 1
    }

    fn others(&self) -> impl Iterator<Item = &String> {
        self.cfg.peers.iter().filter(move |p| **p != self.cfg.id)
    }

    fn random(&mut self) -> u64 {
        // splitmix64: deterministic per seed, good enough for timeouts.
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn reset_election_timer(&mut self, now: Time) {
        let t = self.cfg.election_timeout;
        let jitter = self.random() % (t.as_nanos() as u64).max(1);
        self.election_due = now + t + Duration::from_nanos(jitter);
    }

    /// Having just heard the leader at `now`: when to campaign if it falls
    /// silent, by our place in its order of succession (see the module
    /// docs).
    fn reset_succession_timer(&mut self, now: Time) {
        let t = self.cfg.election_timeout;
        let floor = now + t + t.mul_f64(self.cfg.lease_drift);
        let stagger = self.cfg.heartbeat_interval;
        match self.successors.iter().position(|p| *p == self.cfg.id) {
            _ if self.successors.is_empty() => self.reset_election_timer(now),
            Some(0) => self.election_due = floor,
            Some(1) => self.election_due = floor + stagger,
            _ => {
                let jitter = self.random() % (t.as_nanos() as u64).max(1);
                self.election_due = floor + stagger * 2 + Duration::from_nanos(jitter);
            }
        }
    }

    /// The leader's order of succession: the followers that acknowledged
    /// the newest round first, those never heard from last. Ties keep the
    /// order last published (at first, the quicker to acknowledge first),
    /// so the order changes only when a follower falls behind: each change
    /// is a chance for followers to disagree about it.
    fn succession(&self) -> Vec<String> {
        let Some(ls) = &self.leader_state else {
            return Vec::new();
        };
        let mut order: Vec<&String> = ls.published.iter().collect();
        let mut newcomers: Vec<&String> = self.others().filter(|p| !order.contains(p)).collect();
        newcomers.sort_by_key(|p| (ls.acked.get(*p).map(|(_, at)| *at), *p));
        order.extend(newcomers);
        // Stable: equal rounds keep their places.
        order.sort_by_key(|p| std::cmp::Reverse(ls.acked.get(*p).map(|(round, _)| *round)));
        // A switchover's target goes first: the others step aside.
        if let Some(at) = order.iter().position(|p| Some(*p) == ls.preferred.as_ref()) {
            let target = order.remove(at);
            order.insert(0, target);
        }
        order.into_iter().cloned().collect()
    }

    /// Puts `target` first in the order of succession (a switchover: see
    /// `elect::steer`), or lets the order be as it would (`None`); the
    /// next heartbeat round, due at once, publishes it. Only a leader has
    /// an order; `target` must be another peer. Whom a transfer goes to
    /// never matters for safety, only which peer leads next.
    pub fn prefer(&mut self, now: Time, target: Option<&str>) {
        let target = target.filter(|t| self.others().any(|p| p == t));
        let Some(ls) = self.leader_state.as_mut() else {
            return;
        };
        if ls.preferred.as_deref() != target {
            ls.preferred = target.map(str::to_owned);
            ls.heartbeat_due = ls.heartbeat_due.min(now);
        }
    }

    /// Whom a transfer would go to now (a leader only): the first of the
    /// order last published that has answered a heartbeat (see
    /// [`Node::transfer_leadership`]).
    pub fn next_in_line(&self) -> Option<String> {
        self.transfer_target()
    }

    /// The followers that answered a heartbeat within the last election
    /// timeout (a leader only): the live ones, as far as it knows.
    pub fn live_followers(&self, now: Time) -> Vec<String> {
        let t = self.cfg.election_timeout;
        self.leader_state.as_ref().map_or_else(Vec::new, |ls| {
            ls.acked
                .iter()
                .filter(|(_, (_, at))| *at + t > now)
                .map(|(p, _)| p.clone())
                .collect()
        })
    }

    /// The order of succession: as this node last published it (a
    /// leader) or heard it (a follower); empty before any.
    pub fn successors(&self) -> Vec<String> {
        match &self.leader_state {
            Some(ls) => ls.published.clone(),
            None => self.successors.clone(),
        }
    }

    /// Whether a leader was heard recently enough that (pre)votes must be
    /// refused (CheckQuorum's lease on the voter side).
    fn in_lease(&self, now: Time) -> bool {
        self.role == Role::Leader
            || now < self.promised_until
            || (self.leader.is_some()
                && self
                    .heard_leader_at
                    .is_some_and(|at| now < at + self.cfg.election_timeout))
    }

    /// Moves the hard state to `term`, with the vote a pledge cast ahead
    /// for it, if any.
    fn enter_term(&mut self, term: u64) {
        self.hard.term = term;
        self.hard.voted_for = None;
        if let Some(pledge) = self.hard.pledge.take_if(|p| p.term <= term) {
            if pledge.term == term && !switched_off!(self.cfg, PledgeNotBinding) {
                self.hard.voted_for = Some(pledge.candidate);
            }
            self.pledge_unused = false;
        }
    }

    /// Casts our vote in the next term ahead for `candidate`, or takes it
    /// back (`None`), while nothing waits on the disk: the write goes with
    /// a heartbeat's reply (a follower's) or after an acknowledgement (the
    /// leader's), once per term or change of order. The first in line
    /// pledges to itself, so its campaign starts with its own vote
    /// durable; the leader pledges to the follower it would hand over to,
    /// so that a transfer's request finds the old leader's vote durable.
    ///
    /// A pledge made by this run and not used yet may be moved or taken
    /// back: nobody has it. One found on disk at start stands, as any
    /// vote would: we may have granted it, or led in its term without
    /// ever writing the term (see [`Node::campaign`]).
    ///
    /// An old leader claims nothing in the term it handed over into: it
    /// is about to exit, and a pledge left on disk by a run that ended
    /// cannot be taken back, so it would cost whoever is first our vote
    /// in that one term, and the run that follows on this disk its own.
    fn pledge_next_term(&mut self, candidate: Option<String>, ready: &mut Ready) {
        let wanted = candidate.map(|candidate| Pledge {
            term: self.hard.term + 1,
            candidate,
        });
        if self.hard.pledge == wanted || (self.hard.pledge.is_some() && !self.pledge_unused) {
            return;
        }
        self.pledge_unused = wanted.is_some();
        self.hard.pledge = wanted;
        ready.persist = Some(self.hard.clone());
    }

    /// Whether our vote in the next term is pledged to `candidate` by this
    /// run and not used yet, so durable and ours to rely on. An unused
    /// pledge to anyone else is taken back (nobody has it); the caller's
    /// write, which casts the vote anew, records that. A pledge from
    /// before a restart stands either way.
    fn relies_on_pledge_to(&mut self, candidate: &str) -> bool {
        if !self.pledge_unused {
            return false;
        }
        let next = self.hard.term + 1;
        if self
            .hard
            .pledge
            .as_ref()
            .is_some_and(|p| p.term == next && p.candidate == candidate)
        {
            return true;
        }
        self.hard.pledge = None;
        self.pledge_unused = false;
        false
    }

    fn become_follower(&mut self, ready: &mut Ready, now: Time, term: u64, leader: Option<String>) {
        if term > self.hard.term {
            self.enter_term(term);
            ready.persist = Some(self.hard.clone());
            self.heard_leader_at = None;
        }
        if self.leader != leader {
            // A new leader (or none): its order is not known yet.
            self.successors.clear();
        }
        self.role = Role::Follower;
        self.leader_state = None;
        self.votes.clear();
        if leader.is_some() {
            self.heard_leader_at = Some(now);
        }
        self.leader = leader;
        self.reset_election_timer(now);
    }

    /// Advances timers.
    pub fn tick(&mut self, now: Time) -> Ready {
        let mut ready = Ready::default();
        if self.role == Role::Leader {
            self.tick_leader(&mut ready, now);
        } else if now >= self.election_due {
            if now < self.promised_until {
                // Someone may hold a lease on our promise: our own
                // campaign waits for it too, as it does a lost disk's
                // quiet (which never ends later). Timers drawn after a
                // vote or a start already fall later; this makes it a rule.
                self.election_due = self.promised_until;
            } else {
                self.pre_campaign(&mut ready, now);
            }
        }
        ready
    }

    fn tick_leader(&mut self, ready: &mut Ready, now: Time) {
        let t = self.cfg.election_timeout;
        let majority = self.majority();
        let lease = self.lease_length();
        let ls = self.leader_state.as_mut().expect("leader");
        // CheckQuorum: a leader that has not heard a majority for T steps down.
        if now >= ls.since + t && !switched_off!(self.cfg, NoCheckQuorum) {
            let recent = ls.acked.values().filter(|(_, at)| *at + t > now).count() + 1;
            if recent < majority {
                let term = self.hard.term;
                self.become_follower(ready, now, term, None);
                return;
            }
        }
        if now >= ls.heartbeat_due {
            ls.round += 1;
            ls.sent_at.insert(ls.round, now);
            ls.heartbeat_due = now + self.cfg.heartbeat_interval;
            let (term, round) = (self.hard.term, ls.round);
            if self.cfg.peers.len() == 1 {
                // Alone, every round is acknowledged by a majority: us.
                ls.lease_until = Some(now + lease);
            }
            let successors = self.succession();
            if let Some(ls) = self.leader_state.as_mut() {
                ls.published.clone_from(&successors);
            }
            for peer in &successors {
                let successors = successors.clone();
                ready.messages.push((
                    peer.clone(),
                    Message::Heartbeat {
                        term,
                        round,
                        successors,
                    },
                ));
            }
        }
    }

    fn lease_length(&self) -> Duration {
        self.cfg
            .election_timeout
            .mul_f64(1.0 - self.cfg.lease_drift)
    }

    fn pre_campaign(&mut self, ready: &mut Ready, now: Time) {
        self.role = Role::PreCandidate;
        self.leader = None;
        self.votes = BTreeSet::from([self.cfg.id.clone()]);
        self.reset_election_timer(now);
        if self.votes.len() >= self.majority() {
            self.campaign(ready, now, false);
            return;
        }
        let term = self.hard.term + 1;
        let to: Vec<String> = self.others().cloned().collect();
        for peer in to {
            ready.messages.push((peer, Message::PreVote { term }));
        }
    }

    fn campaign(&mut self, ready: &mut Ready, now: Time, transfer: bool) {
        self.role = Role::Candidate;
        self.leader = None;
        let next = self.hard.term + 1;
        // Our own vote in the next term, claimed ahead: already durable.
        let own_id = self.cfg.id.clone();
        let vote_durable = self.relies_on_pledge_to(&own_id);
        let term = match &self.hard.pledge {
            // From before a restart: we may have voted, or led, there.
            Some(p) if !vote_durable && p.term >= next => p.term + 1,
            _ => next,
        };
        self.enter_term(term);
        self.hard.voted_for = Some(self.cfg.id.clone());
        if !vote_durable {
            ready.persist = Some(self.hard.clone());
        }
        self.votes = BTreeSet::from([self.cfg.id.clone()]);
        self.campaigned_at = now;
        self.reset_election_timer(now);
        if self.votes.len() >= self.majority() {
            self.become_leader(now);
            self.tick_leader(ready, now);
            return;
        }
        let term = self.hard.term;
        let to: Vec<String> = self.others().cloned().collect();
        for peer in to {
            ready
                .messages
                .push((peer, Message::Vote { term, transfer }));
        }
    }

    fn become_leader(&mut self, now: Time) {
        self.role = Role::Leader;
        self.leader = Some(self.cfg.id.clone());
        let mut voters = std::mem::take(&mut self.votes);
        voters.remove(&self.cfg.id);
        self.leader_state = Some(LeaderState {
            round: 0,
            heartbeat_due: now,
            sent_at: BTreeMap::new(),
            acked: BTreeMap::new(),
            since: now,
            // Every voter granted its vote after our requests left, and
            // then refuses everyone else for T (see `step`).
            lease_until: Some(self.campaigned_at + self.lease_length()),
            published: Vec::new(),
            preferred: None,
            voters,
        });
    }

    /// Handles a message from peer `from`.
    pub fn step(&mut self, now: Time, from: &str, msg: Message) -> Ready {
        let mut ready = Ready::default();
        if from == self.cfg.id || !self.cfg.peers.iter().any(|p| p == from) {
            return ready;
        }
        match msg {
            Message::PreVote { term } => self.on_pre_vote(&mut ready, now, from, term),
            Message::Vote { term, transfer } => self.on_vote(&mut ready, now, from, term, transfer),
            Message::PreVoteReply { term, granted } => {
                self.on_pre_vote_reply(&mut ready, now, from, term, granted)
            }
            Message::VoteReply { term, granted } => {
                self.on_vote_reply(&mut ready, now, from, term, granted)
            }
            Message::Heartbeat {
                term,
                round,
                successors,
            } => self.on_heartbeat(&mut ready, now, from, term, round, successors),
            Message::HeartbeatReply { term, round } => {
                self.on_heartbeat_reply(&mut ready, now, from, term, round)
            }
            Message::TimeoutNow { term } => self.on_timeout_now(&mut ready, now, from, term),
        }
        ready
    }

    /// A PreVote request: granted for a higher term unless a leader we heard
    /// holds its lease.
    fn on_pre_vote(&mut self, ready: &mut Ready, now: Time, from: &str, term: u64) {
        // A lost disk's quiet ends no later than the promise of our
        // start, which `in_lease` keeps.
        let granted = term > self.hard.term
            && (!self.in_lease(now) || switched_off!(self.cfg, NoPreVoteLease));
        let term = if granted { term } else { self.hard.term };
        reply(ready, from, Message::PreVoteReply { term, granted });
    }

    /// A vote request: granted once per term, outside a leader's lease (a
    /// transfer aside), and never while our own start is quiet.
    fn on_vote(&mut self, ready: &mut Ready, now: Time, from: &str, term: u64, transfer: bool) {
        if !transfer && self.in_lease(now) && !switched_off!(self.cfg, NoVoterLease) {
            // Ignored: a leader we heard recently still holds its lease.
            return;
        }
        if term > self.hard.term {
            self.become_follower(ready, now, term, None);
        }
        let free = self.hard.voted_for.as_deref().is_none_or(|v| v == from)
            || switched_off!(self.cfg, NoDoubleVoteCheck);
        let granted = term == self.hard.term && free && now >= self.quiet_until;
        if granted {
            // Already durable if we voted for it before (a repeated
            // request, a pledge, or the vote a transfer casts ahead).
            if self.hard.voted_for.as_deref() != Some(from) {
                self.hard.voted_for = Some(from.to_owned());
                ready.persist = Some(self.hard.clone());
            }
            // The vote is a promise, as an acknowledged heartbeat
            // is: no other candidate for T, so the winner's lease
            // can start when it asked, one round trip before its
            // first heartbeat is acknowledged.
            self.promised_until = self.promised_until.max(now + self.cfg.election_timeout);
            self.reset_election_timer(now);
            // The promise covers our own candidacy too: a PreVote
            // round of ours under way is given up, or its late
            // grants would start a campaign inside the lease we
            // just promised (found by the model checker: an old
            // leader's round racing its successor's transfer).
            if self.role == Role::PreCandidate && !switched_off!(self.cfg, PreVoteRoundOutlivesVote)
            {
                self.role = Role::Follower;
                self.votes.clear();
            }
        }
        reply(
            ready,
            from,
            Message::VoteReply {
                term: self.hard.term,
                granted,
            },
        );
    }

    /// A PreVote's answer: a majority starts the campaign.
    fn on_pre_vote_reply(
        &mut self,
        ready: &mut Ready,
        now: Time,
        from: &str,
        term: u64,
        granted: bool,
    ) {
        if granted {
            if self.role == Role::PreCandidate && term == self.hard.term + 1 {
                self.votes.insert(from.to_owned());
                if self.votes.len() >= self.majority() {
                    self.campaign(ready, now, false);
                }
            }
        } else if self.overtaken_by(now, term) {
            self.become_follower(ready, now, term, None);
        }
    }

    /// A vote's answer: a majority makes us leader.
    fn on_vote_reply(
        &mut self,
        ready: &mut Ready,
        now: Time,
        from: &str,
        term: u64,
        granted: bool,
    ) {
        if self.overtaken_by(now, term) {
            self.become_follower(ready, now, term, None);
        } else if granted && self.role == Role::Candidate && term == self.hard.term {
            self.votes.insert(from.to_owned());
            if self.votes.len() >= self.majority() {
                self.become_leader(now);
                self.tick_leader(ready, now);
            }
        }
    }

    /// A leader's heartbeat: we follow it, learn the order of succession, and
    /// pledge our vote ahead if we are first in line.
    fn on_heartbeat(
        &mut self,
        ready: &mut Ready,
        now: Time,
        from: &str,
        term: u64,
        round: u64,
        successors: Vec<String>,
    ) {
        if term < self.hard.term {
            // A stale leader learns our term from the reply.
            reply(
                ready,
                from,
                Message::HeartbeatReply {
                    term: self.hard.term,
                    round,
                },
            );
            return;
        }
        self.become_follower(ready, now, term, Some(from.to_owned()));
        self.successors = successors;
        self.reset_succession_timer(now);
        let first = self.successors.first() == Some(&self.cfg.id)
            && self.handed_over_into != Some(self.hard.term);
        self.pledge_next_term(first.then(|| self.cfg.id.clone()), ready);
        reply(ready, from, Message::HeartbeatReply { term, round });
    }

    /// A follower's answer to our heartbeat: it extends our lease and may
    /// complete a pledge.
    fn on_heartbeat_reply(
        &mut self,
        ready: &mut Ready,
        now: Time,
        from: &str,
        term: u64,
        round: u64,
    ) {
        if self.overtaken_by(now, term) {
            self.become_follower(ready, now, term, None);
        } else if term == self.hard.term && self.role == Role::Leader {
            self.acknowledge(now, from, round);
            let target = self.transfer_target();
            self.pledge_next_term(target, ready);
        }
    }

    /// Our leader hands over to us: campaign at once.
    fn on_timeout_now(&mut self, ready: &mut Ready, now: Time, from: &str, term: u64) {
        if term == self.hard.term && self.leader.as_deref() == Some(from) && now >= self.quiet_until
        {
            self.campaign(ready, now, true);
        }
    }

    /// Whether a reply carrying `term` ends our term. A higher term does,
    /// except for a leader within its lease: the lease proves that a
    /// majority refuses every campaign until it ends, so the higher term
    /// is a campaign that cannot win (typically one whose PreVote was
    /// granted just before we were elected), and stepping down for it
    /// would end a leadership nobody else can take: a spurious loss,
    /// the user's command killed for nothing. Its peer rejoins at the
    /// next change of term. A heartbeat of a higher term is never
    /// ignored: someone leads there.
    fn overtaken_by(&self, now: Time, term: u64) -> bool {
        let leads_within_lease = self
            .leader_state
            .as_ref()
            .and_then(|ls| ls.lease_until)
            .is_some_and(|until| now < until);
        term > self.hard.term && (!leads_within_lease || switched_off!(self.cfg, DeposedInLease))
    }

    /// Records an acknowledged round and extends the lease to the send time
    /// of the newest round a majority has acknowledged, plus T(1 - drift).
    fn acknowledge(&mut self, now: Time, from: &str, round: u64) {
        let majority = self.majority();
        let lease = self.lease_length();
        let ls = self.leader_state.as_mut().expect("leader");
        let entry = ls.acked.entry(from.to_owned()).or_insert((0, now));
        if round >= entry.0 {
            *entry = (round, now);
        }
        // The newest round acknowledged by `majority - 1` peers (plus us).
        let mut rounds: Vec<u64> = ls.acked.values().map(|(r, _)| *r).collect();
        rounds.sort_unstable_by(|a, b| b.cmp(a));
        let Some(&quorum_round) = rounds.get(majority - 2) else {
            return;
        };
        if let Some(&sent) = ls.sent_at.get(&quorum_round) {
            let until = sent + lease;
            if ls.lease_until.is_none_or(|u| until > u) {
                ls.lease_until = Some(until);
            }
        }
        ls.sent_at.retain(|r, _| *r >= quorum_round);
    }

    /// Whom a transfer would go to: the first of the order the followers
    /// last heard (the one that claimed the next term) that has answered
    /// a heartbeat. Just after an election the order is by id, and its
    /// first may not have answered yet; before any answer (a transfer
    /// asked for as we are elected, the followers' replies waiting on
    /// their disks), the first that voted for us. Whom it goes to never
    /// matters for safety, only for how soon someone leads: the lease is
    /// given up before it leaves.
    fn transfer_target(&self) -> Option<String> {
        let ls = self.leader_state.as_ref()?;
        let first_that = |known: &dyn Fn(&String) -> bool| ls.published.iter().find(|p| known(p));
        first_that(&|p| ls.acked.contains_key(p))
            .or_else(|| first_that(&|p| ls.voters.contains(p)))
            .cloned()
    }

    /// Hands leadership to the most responsive peer: the lease is given up
    /// first (nothing may act as leader here any more), then TimeoutNow
    /// makes the target campaign at once, without waiting for a timeout.
    pub fn transfer_leadership(&mut self, now: Time) -> Ready {
        let mut ready = Ready::default();
        let target = self.transfer_target();
        if self.leader_state.take().is_none() {
            return ready;
        }
        let term = self.hard.term;
        self.role = Role::Follower;
        self.leader = None;
        // Give the target room to win before we would time out ourselves.
        self.election_due = now + self.cfg.election_timeout * 2;
        let Some(target) = target else {
            return ready;
        };
        ready
            .messages
            .push((target.clone(), Message::TimeoutNow { term }));
        // Our vote for the campaign we ask for, usually pledged already
        // (see `pledge_next_term`); otherwise cast now, the write
        // overlapping the TimeoutNow's way there (which promises nothing,
        // so it need not wait for the disk). Either way the target's
        // request finds the vote durable and is granted at once. The
        // promise that goes with a vote still starts when the request
        // arrives (see `step`), so the new leader's lease is dated as any
        // other.
        let pledged = self.relies_on_pledge_to(&target);
        self.enter_term(term + 1);
        self.handed_over_into = Some(term + 1);
        if !pledged {
            // (A pledge from before a restart, were there one, keeps its
            // vote: ours is then not ours to give.)
            if self.hard.voted_for.is_none() {
                self.hard.voted_for = Some(target);
            }
            ready.persist = Some(self.hard.clone());
        }
        ready
    }
}

/// Puts `msg` for peer `to` in `ready`.
fn reply(ready: &mut Ready, to: &str, msg: Message) {
    ready.messages.push((to.to_owned(), msg));
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Duration = Duration::from_millis(100);

    fn peers(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("n{i}")).collect()
    }

    fn ms(n: u64) -> Time {
        Duration::from_millis(n)
    }

    /// Node `id` of `n0..n{count}`, started at time 0 with an empty store.
    fn node(id: &str, count: usize) -> Node {
        Node::new(
            Config::new(id, &peers(count), T, 1),
            Some(HardState::default()),
            ms(0),
        )
    }

    fn heartbeat(term: u64, round: u64) -> Message {
        Message::Heartbeat {
            term,
            round,
            successors: Vec::new(),
        }
    }

    fn vote(term: u64) -> Message {
        Message::Vote {
            term,
            transfer: false,
        }
    }

    fn prevote_reply(term: u64, granted: bool) -> Message {
        Message::PreVoteReply { term, granted }
    }

    fn vote_reply(term: u64, granted: bool) -> Message {
        Message::VoteReply { term, granted }
    }

    /// The one message `ready` should send: `msg` to `peer`.
    fn only(peer: &str, msg: Message) -> Vec<(String, Message)> {
        vec![(peer.to_owned(), msg)]
    }

    #[test]
    fn a_single_node_elects_itself_and_holds_a_lease() {
        let mut n = node("n0", 1);
        let r = n.tick(ms(250));
        assert_eq!(n.role(), Role::Leader);
        assert_eq!(r.persist.unwrap().term, 1);
        assert!(n.status(ms(250)).is_self);
    }

    #[test]
    fn votes_are_refused_while_a_leader_is_fresh() {
        let mut n = node("n1", 3);
        n.step(ms(10), "n0", heartbeat(1, 1));
        let r = n.step(ms(20), "n2", vote(2));
        assert!(r.messages.is_empty(), "ignored in lease");
        assert_eq!(n.term(), 1, "no term inflation");
        let r = n.step(ms(20), "n2", Message::PreVote { term: 2 });
        assert_eq!(r.messages, only("n2", prevote_reply(1, false)));
        // A transfer campaign passes the lease check.
        let r = n.step(
            ms(30),
            "n2",
            Message::Vote {
                term: 2,
                transfer: true,
            },
        );
        assert_eq!(r.messages, only("n2", vote_reply(2, true)));
        assert_eq!(r.persist.unwrap().voted_for.as_deref(), Some("n2"));
    }

    #[test]
    fn one_vote_per_term_and_it_is_persisted_before_the_reply() {
        let mut n = node("n1", 3);
        let r = n.step(ms(300), "n0", vote(1));
        assert_eq!(
            r.persist,
            Some(HardState {
                term: 1,
                voted_for: Some("n0".into()),
                pledge: None,
            })
        );
        // The vote also promised n0 its lease: n2's request is ignored.
        assert!(n.step(ms(301), "n2", vote(1)).messages.is_empty());
        // A transfer campaign passes the promise, not the vote already cast.
        let transfer = Message::Vote {
            term: 1,
            transfer: true,
        };
        let r = n.step(ms(302), "n2", transfer);
        assert_eq!(r.messages, only("n2", vote_reply(1, false)));
        assert!(r.persist.is_none());
    }

    #[test]
    fn a_vote_promises_the_winner_its_lease() {
        // The winner leads from its vote requests on, before any heartbeat:
        // its voters refuse everyone else for T, even if it falls silent.
        let mut n = node("n1", 3);
        n.step(ms(300), "n0", vote(1));
        let prevote = Message::PreVote { term: 2 };
        let refused = n.step(ms(399), "n2", prevote.clone());
        assert_eq!(refused.messages, only("n2", prevote_reply(1, false)));
        assert!(n.step(ms(399), "n2", vote(2)).messages.is_empty());
        let granted = n.step(ms(400), "n2", prevote);
        assert_eq!(granted.messages, only("n2", prevote_reply(2, true)));
    }

    #[test]
    fn a_node_does_not_campaign_against_its_own_promise() {
        let mut n = node("n1", 3);
        n.step(ms(300), "n0", vote(1));
        // Whatever its timer says, it waits until the promise has run out.
        n.election_due = ms(310);
        assert!(n.tick(ms(320)).messages.is_empty());
        assert_eq!(n.role(), Role::Follower);
        let r = n.tick(ms(400));
        assert_eq!(n.role(), Role::PreCandidate);
        assert_eq!(r.messages.len(), 2, "PreVotes to n0 and n2");
    }

    #[test]
    fn a_restarted_node_keeps_the_promises_it_may_have_made() {
        // It may have acknowledged a leader just before it stopped: it
        // refuses (pre)votes for T, but its vote is free for a transfer.
        let mut n = node("n1", 3);
        assert!(n.step(ms(50), "n0", vote(1)).messages.is_empty());
        let r = n.step(ms(60), "n2", Message::PreVote { term: 1 });
        assert_eq!(r.messages, only("n2", prevote_reply(0, false)));
        let transfer = Message::Vote {
            term: 1,
            transfer: true,
        };
        assert_eq!(n.step(ms(70), "n2", transfer).persist.unwrap().term, 1);
        let mut n = node("n1", 3);
        let r = n.step(ms(100), "n0", vote(1));
        assert_eq!(r.persist.unwrap().voted_for.as_deref(), Some("n0"));
    }

    #[test]
    fn without_durable_state_a_node_stays_quiet_for_one_timeout() {
        let p = peers(3);
        let mut n = Node::new(Config::new("n1", &p, T, 1), None, ms(0));
        let transfer = Message::Vote {
            term: 1,
            transfer: true,
        };
        let r = n.step(ms(50), "n0", transfer);
        assert_eq!(r.messages, only("n0", vote_reply(1, false)));
        assert!(n.tick(ms(99)).messages.is_empty());
        let r = n.step(ms(150), "n2", vote(2));
        assert_eq!(r.messages, only("n2", vote_reply(2, true)));
    }

    #[test]
    fn the_lease_starts_at_the_vote_requests_then_follows_the_majority_round() {
        let mut n = node("n0", 3);
        let r = n.tick(ms(250));
        assert_eq!(n.role(), Role::PreCandidate);
        assert_eq!(r.messages.len(), 2);
        n.step(ms(251), "n1", prevote_reply(1, true));
        assert_eq!(n.role(), Role::Candidate);
        let r = n.step(ms(252), "n1", vote_reply(1, true));
        assert_eq!(n.role(), Role::Leader);
        let s = n.status(ms(252));
        assert!(s.is_self, "the voters promised: a lease at once");
        assert_eq!(s.lease_until, Some(ms(251) + T.mul_f64(0.95)));
        assert!(
            r.messages
                .iter()
                .any(|(_, m)| matches!(m, Message::Heartbeat { round: 1, .. }))
        );
        n.step(ms(260), "n2", Message::HeartbeatReply { term: 1, round: 1 });
        let s = n.status(ms(260));
        assert!(s.is_self);
        assert_eq!(s.lease_until, Some(ms(252) + T.mul_f64(0.95)));
    }

    /// n0 of three, elected in term 1 with n1's vote, n1 having
    /// acknowledged its first heartbeat at 253 ms.
    fn leading_with_n1() -> Node {
        let mut n = node("n0", 3);
        n.tick(ms(250));
        n.step(ms(251), "n1", prevote_reply(1, true));
        n.step(ms(252), "n1", vote_reply(1, true));
        n.step(ms(253), "n1", Message::HeartbeatReply { term: 1, round: 1 });
        n
    }

    #[test]
    fn transfer_gives_the_lease_up_before_timeout_now() {
        let mut n = leading_with_n1();
        assert!(n.status(ms(253)).is_self);
        let r = n.transfer_leadership(ms(254));
        assert!(!n.status(ms(254)).is_self);
        assert_eq!(r.messages, only("n1", Message::TimeoutNow { term: 1 }));
    }

    #[test]
    fn a_transfer_goes_to_the_first_in_line_that_has_answered() {
        let mut n = node("n0", 3);
        n.tick(ms(250));
        n.step(ms(251), "n1", prevote_reply(1, true));
        // Elected: the first heartbeat names n1 first (by id, nobody has
        // answered one yet), but only n2 answers before the transfer.
        n.step(ms(252), "n1", vote_reply(1, true));
        assert_eq!(n.successors(), ["n1", "n2"]);
        n.step(ms(253), "n2", Message::HeartbeatReply { term: 1, round: 1 });
        let r = n.transfer_leadership(ms(254));
        assert_eq!(r.messages, only("n2", Message::TimeoutNow { term: 1 }));
    }

    #[test]
    fn a_vote_granted_gives_our_own_prevote_round_up() {
        let mut n = node("n0", 3);
        let heartbeat = Message::Heartbeat {
            term: 1,
            round: 1,
            successors: Vec::new(),
        };
        n.step(ms(150), "n1", heartbeat);
        // n1 falls silent: our PreVote round for term 2 starts...
        let r = n.tick(ms(400));
        assert!(matches!(r.messages[0].1, Message::PreVote { term: 2 }));
        // ...and n2's request for term 1 (free, nobody heard for T) is
        // granted: a promise not to campaign for T, ourselves included.
        let vote = Message::Vote {
            term: 1,
            transfer: false,
        };
        let r = n.step(ms(401), "n2", vote);
        assert_eq!(r.messages, only("n2", vote_reply(1, true)));
        // A grant of our round arriving late starts no campaign.
        let r = n.step(ms(402), "n1", prevote_reply(2, true));
        assert!(r.messages.is_empty() && r.persist.is_none());
        assert_eq!(n.role(), Role::Follower);
        assert_eq!(n.term(), 1);
    }

    #[test]
    fn a_transfer_before_any_answer_goes_to_a_peer_that_voted_for_us() {
        let mut n = node("n0", 3);
        n.tick(ms(250));
        n.step(ms(251), "n2", prevote_reply(1, true));
        // Elected with n2's vote; asked to hand over before either
        // follower answered the first heartbeat (their replies wait on
        // their disks). n1 leads the order by id, but only n2 is known
        // to be alive.
        n.step(ms(252), "n2", vote_reply(1, true));
        assert_eq!(n.successors(), ["n1", "n2"]);
        let r = n.transfer_leadership(ms(253));
        assert!(!n.status(ms(253)).is_self);
        assert_eq!(r.messages, only("n2", Message::TimeoutNow { term: 1 }));
    }

    /// What `ready` persists of the pledge: `Some(None)` takes it back.
    fn pledged(r: &Ready) -> Option<Option<(u64, &str)>> {
        r.persist
            .as_ref()
            .map(|h| h.pledge.as_ref().map(|p| (p.term, p.candidate.as_str())))
    }

    #[test]
    fn the_leader_pledges_its_next_vote_to_the_follower_it_would_hand_over_to() {
        let mut n = node("n0", 3);
        n.tick(ms(250));
        n.step(ms(251), "n1", prevote_reply(1, true));
        n.step(ms(252), "n1", vote_reply(1, true));
        // Written after the first answer, not with the heartbeats.
        let r = n.step(ms(253), "n1", Message::HeartbeatReply { term: 1, round: 1 });
        assert_eq!(pledged(&r), Some(Some((2, "n1"))));
        let r = n.step(ms(253), "n2", Message::HeartbeatReply { term: 1, round: 1 });
        assert_eq!(r.persist, None, "once per change");
        // The transfer then writes nothing: the target's request finds the
        // vote durable and is granted at once. Anyone else is refused in
        // that term.
        let r = n.transfer_leadership(ms(254));
        assert_eq!(r.messages, only("n1", Message::TimeoutNow { term: 1 }));
        assert_eq!(r.persist, None);
        let transfer = Message::Vote {
            term: 2,
            transfer: true,
        };
        let r = n.step(ms(255), "n1", transfer.clone());
        assert_eq!(r.persist, None);
        assert_eq!(r.messages, only("n1", vote_reply(2, true)));
        let r = n.step(ms(255), "n2", transfer);
        assert_eq!(r.messages, only("n2", vote_reply(2, false)));
        // And the vote promises its lease from the request on, as any vote.
        let r = n.step(ms(256), "n2", vote(3));
        assert!(r.messages.is_empty(), "{r:?}");
    }

    #[test]
    fn a_preferred_follower_goes_first_at_once_and_takes_the_transfer() {
        let mut n = leading_with_n1();
        n.step(ms(254), "n2", Message::HeartbeatReply { term: 1, round: 1 });
        assert_eq!(n.next_in_line().as_deref(), Some("n1"));
        assert_eq!(n.live_followers(ms(254)), ["n1", "n2"]);
        n.prefer(ms(255), Some("n2"));
        // The order goes out with a round due at once.
        let r = n.tick(ms(255));
        let beat = Message::Heartbeat {
            term: 1,
            round: 2,
            successors: vec!["n2".into(), "n1".into()],
        };
        assert!(r.messages.contains(&("n2".into(), beat)), "{r:?}");
        assert_eq!(n.next_in_line().as_deref(), Some("n2"));
        let r = n.transfer_leadership(ms(256));
        assert_eq!(r.messages, only("n2", Message::TimeoutNow { term: 1 }));
        // Nobody else is preferred: an unknown peer, or ourselves.
        let mut m = leading_with_n1();
        m.prefer(ms(255), Some("n0"));
        m.prefer(ms(255), Some("zz"));
        m.tick(ms(262));
        assert_eq!(m.successors()[0], "n1");
    }

    #[test]
    fn a_transfer_to_another_than_the_pledged_moves_the_vote_and_writes_it() {
        let mut n = leading_with_n1();
        n.step(ms(254), "n2", Message::HeartbeatReply { term: 1, round: 1 });
        // n1 misses the next rounds: n2 goes first in the order, and the
        // transfer goes to it before any answer has moved the pledge.
        n.tick(ms(262));
        n.step(ms(263), "n2", Message::HeartbeatReply { term: 1, round: 2 });
        n.tick(ms(272));
        assert_eq!(n.successors(), ["n2", "n1"]);
        let r = n.transfer_leadership(ms(273));
        assert_eq!(r.messages, only("n2", Message::TimeoutNow { term: 1 }));
        let cast = HardState {
            term: 2,
            voted_for: Some("n2".into()),
            pledge: None,
        };
        assert_eq!(r.persist, Some(cast));
        let r = n.step(ms(274), "n1", vote(2));
        assert_eq!(r.messages, only("n1", vote_reply(2, false)));
    }

    #[test]
    fn the_first_in_line_claims_the_next_term_and_keeps_a_claim_it_may_have_used() {
        let beat = |order: [&str; 2]| Message::Heartbeat {
            term: 1,
            round: 1,
            successors: order.map(str::to_owned).to_vec(),
        };
        let transfer_vote = Message::Vote {
            term: 2,
            transfer: true,
        };
        // First in line: the vote for ourselves in term 2 is written with
        // the heartbeat's reply; nobody else gets our vote in term 2.
        let mut n = node("n1", 3);
        let r = n.step(ms(300), "n0", beat(["n1", "n2"]));
        assert_eq!(pledged(&r), Some(Some((2, "n1"))));
        let disk = r.persist.unwrap();
        let r = n.step(ms(301), "n2", transfer_vote.clone());
        assert_eq!(r.messages, only("n2", vote_reply(2, false)));
        // A transfer campaign in term 2 writes nothing before it asks.
        let mut n = node("n1", 3);
        n.step(ms(300), "n0", beat(["n1", "n2"]));
        let r = n.step(ms(301), "n0", Message::TimeoutNow { term: 1 });
        assert_eq!((r.persist, n.term(), r.messages.len()), (None, 2, 2));
        // An old leader, about to exit, claims nothing in the term it
        // handed over into.
        let mut n = leading_with_n1();
        n.transfer_leadership(ms(254));
        let successor_beat = Message::Heartbeat {
            term: 2,
            round: 1,
            successors: vec!["n0".into(), "n2".into()],
        };
        assert_eq!(pledged(&n.step(ms(256), "n1", successor_beat)), None);
        // No longer first, an unused claim is taken back.
        let mut n = node("n1", 3);
        n.step(ms(300), "n0", beat(["n1", "n2"]));
        let r = n.step(ms(310), "n0", beat(["n2", "n1"]));
        assert_eq!(pledged(&r), Some(None));
        // After a restart the claim on disk may have been used (we may have
        // led in term 2 without writing term 2): it is kept, it still
        // refuses others, and our own next campaign skips term 2.
        let restarted = |disk| Node::new(Config::new("n1", &peers(3), T, 7), Some(disk), ms(1000));
        let mut n = restarted(disk.clone());
        let r = n.step(ms(1001), "n0", beat(["n2", "n1"]));
        assert_eq!(r.persist, None, "the claim stays");
        let r = n.step(ms(1002), "n2", transfer_vote);
        assert_eq!(r.messages, only("n2", vote_reply(2, false)));
        let mut n = restarted(disk);
        n.step(ms(1001), "n0", beat(["n1", "n2"]));
        let r = n.step(ms(1002), "n0", Message::TimeoutNow { term: 1 });
        assert_eq!(
            r.persist.map(|h| (h.term, h.voted_for)),
            Some((3, Some("n1".into())))
        );
    }

    #[test]
    fn a_pledge_found_on_disk_is_a_vote_in_its_term() {
        // An old leader's pledge to n2 in term 2, from before a restart:
        // it may have been granted. n0 votes for n2 alone in term 2, and
        // its own campaign skips term 2.
        let disk = HardState {
            term: 1,
            voted_for: Some("n0".into()),
            pledge: Some(Pledge {
                term: 2,
                candidate: "n2".into(),
            }),
        };
        let restarted = || {
            Node::new(
                Config::new("n0", &peers(3), T, 7),
                Some(disk.clone()),
                ms(0),
            )
        };
        let mut n = restarted();
        let r = n.step(ms(200), "n1", vote(2));
        assert_eq!(r.messages, only("n1", vote_reply(2, false)));
        let r = n.step(ms(201), "n2", vote(2));
        assert_eq!(r.messages, only("n2", vote_reply(2, true)));
        assert_eq!(r.persist, None, "durable as the pledge");
        let mut n = restarted();
        let r = n.tick(ms(250));
        assert_eq!(n.role(), Role::PreCandidate);
        assert!(
            r.messages
                .iter()
                .all(|(_, m)| *m == Message::PreVote { term: 2 })
        );
        n.step(ms(251), "n1", prevote_reply(2, true));
        assert_eq!(n.term(), 3, "term 2 skipped");
    }

    #[test]
    fn heartbeats_carry_the_order_of_succession_freshest_first() {
        let mut n = node("n0", 3);
        n.tick(ms(250));
        n.step(ms(250), "n1", prevote_reply(1, true));
        let r = n.step(ms(251), "n1", vote_reply(1, true));
        assert_eq!(n.role(), Role::Leader);
        let carried = |r: &Ready| match r.messages.first() {
            Some((_, Message::Heartbeat { successors, .. })) => successors.clone(),
            other => panic!("a heartbeat: {other:?}"),
        };
        assert_eq!(carried(&r), ["n1", "n2"], "nobody heard yet: by id");
        // Only n2 acknowledges round 1: it moves ahead.
        n.step(ms(252), "n2", Message::HeartbeatReply { term: 1, round: 1 });
        let r = n.tick(ms(261));
        assert_eq!(carried(&r), ["n2", "n1"]);
        assert_eq!(n.successors(), ["n2", "n1"]);
        // Both acknowledge round 2: ties keep their places.
        n.step(ms(262), "n1", Message::HeartbeatReply { term: 1, round: 2 });
        n.step(ms(263), "n2", Message::HeartbeatReply { term: 1, round: 2 });
        assert_eq!(carried(&n.tick(ms(271))), ["n2", "n1"]);
        // n2 misses round 3: n1 is first now, and the transfer goes to it.
        n.step(ms(272), "n1", Message::HeartbeatReply { term: 1, round: 3 });
        assert_eq!(carried(&n.tick(ms(281))), ["n1", "n2"]);
        let r = n.transfer_leadership(ms(282));
        assert_eq!(r.messages, only("n1", Message::TimeoutNow { term: 1 }));
    }

    #[test]
    fn the_first_in_line_campaigns_at_the_lease_floor_the_second_a_stagger_later() {
        let order = vec!["n1".to_owned(), "n2".to_owned(), "n3".to_owned()];
        let due = |id: &str| {
            let mut n = node(id, 4);
            n.step(
                ms(1000),
                "n0",
                Message::Heartbeat {
                    term: 1,
                    round: 7,
                    successors: order.clone(),
                },
            );
            n.next_deadline()
        };
        // T = 100 ms, drift 5%, stagger = heartbeat interval = 10 ms.
        assert_eq!(due("n1"), ms(1105));
        assert_eq!(due("n2"), ms(1115));
        let rest = due("n3");
        assert!(rest >= ms(1125) && rest < ms(1225), "{rest:?}");
        // Without an order (an older leader), Raft's [T, 2T).
        let mut n = node("n1", 4);
        n.step(ms(1000), "n0", heartbeat(1, 1));
        assert!(n.next_deadline() >= ms(1100) && n.next_deadline() < ms(1200));
    }

    #[test]
    fn the_first_in_line_wins_as_soon_as_the_voters_leases_end() {
        // n0 led and fell silent after its heartbeat at 1000 ms.
        let order = vec!["n1".to_owned(), "n2".to_owned()];
        let beat = Message::Heartbeat {
            term: 1,
            round: 9,
            successors: order,
        };
        let mut n1 = node("n1", 3);
        let mut n2 = node("n2", 3);
        // The first in line votes for itself in term 2 ahead of time.
        let r = n1.step(ms(1000), "n0", beat.clone());
        assert_eq!(pledged(&r), Some(Some((2, "n1"))));
        assert_eq!(pledged(&n2.step(ms(1000), "n0", beat)).flatten(), None);
        let due = n1.next_deadline();
        assert!(n2.next_deadline() > due);
        let r = n1.tick(due);
        assert_eq!(r.messages.len(), 2, "pre-votes to n0 and n2: {r:?}");
        let r = n2.step(due, "n1", Message::PreVote { term: 2 });
        assert_eq!(
            r.messages,
            only("n1", prevote_reply(2, true)),
            "n2's lease of n0 has run out"
        );
        // Its campaign has its own vote durable already: nothing to write
        // before the votes it asks for come back.
        let r = n1.step(due, "n2", prevote_reply(2, true));
        assert_eq!(r.persist, None);
        assert_eq!(n1.term(), 2);
        assert_eq!(r.messages.len(), 2, "votes asked of n0 and n2: {r:?}");
        let r = n2.step(due, "n1", vote(2));
        n1.step(due, "n2", r.messages[0].1.clone());
        assert_eq!(n1.role(), Role::Leader);
    }
}
