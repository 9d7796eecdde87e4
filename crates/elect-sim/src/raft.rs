//! The production Raft-vote core (the crate `elect-raft`) as a simulated
//! process, unchanged: time and messages in, [`Ready`] out.
//!
//! By default one time unit is one millisecond of the core's clock and the
//! election timeout is [`ELECTION_TIMEOUT`] units, so heartbeats go every
//! 2 units and a message takes 1: the textbooks' scale, for comparing with
//! the classical algorithms. [`Timing`] makes the unit finer (the safety
//! tests use microseconds, with sub-millisecond delays).
//!
//! Raft never falls silent (the leader heartbeats for ever), so a Raft run
//! ends when the processes have settled: every live one names the same
//! leader, which holds its lease ([`Sim::run_until_settled`]).
//!
//! [`Ready`]: elect_raft::Ready
//! [`Sim::run_until_settled`]: super::engine::Sim::run_until_settled

use std::sync::Arc;
use std::time::Duration;

use elect_raft::{Config, HardState, Message as RaftMessage, Node, Ready, Status, Time};

use crate::process::{Io, Message, Pid, Process};

/// The election timeout T, in time units, by default.
pub const ELECTION_TIMEOUT: u64 = 20;

impl Message for RaftMessage {
    fn kind(&self) -> &'static str {
        match self {
            RaftMessage::PreVote { .. } => "pre-vote",
            RaftMessage::PreVoteReply { .. } => "pre-vote-reply",
            RaftMessage::Vote { .. } => "vote",
            RaftMessage::VoteReply { .. } => "vote-reply",
            RaftMessage::Heartbeat { .. } => "heartbeat",
            RaftMessage::HeartbeatReply { .. } => "heartbeat-reply",
            RaftMessage::TimeoutNow { .. } => "timeout-now",
        }
    }
}

/// How simulated time maps onto the core's clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    /// The core's election timeout T.
    pub election_timeout: Duration,
    /// How much of the core's clock one time unit is.
    pub unit: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            election_timeout: Duration::from_millis(ELECTION_TIMEOUT),
            unit: Duration::from_millis(1),
        }
    }
}

impl Timing {
    /// The core's clock at `units`.
    pub fn time(&self, units: u64) -> Time {
        Duration::from_nanos(units.saturating_mul(self.unit.as_nanos() as u64))
    }

    /// The first time unit at or after `time`: a timer set for it finds
    /// the core's deadline due.
    pub fn units(&self, time: Time) -> u64 {
        time.as_nanos().div_ceil(self.unit.as_nanos()) as u64
    }
}

/// One Raft-vote peer.
pub struct RaftProcess {
    id: u64,
    me: Pid,
    /// Every peer's name (its id as text), by index.
    names: Arc<[String]>,
    timing: Timing,
    node: Node,
    /// What it last persisted; `None` after a restart without a disk,
    /// until it persists again.
    disk: Option<HardState>,
    /// Whom it believes leads, as of its last event.
    leader: Option<u64>,
}

impl RaftProcess {
    /// Peer `me` of `ids`, its randomised timeouts drawn from `seed`, with
    /// the default [`Timing`].
    pub fn new(ids: &[u64], me: Pid, seed: u64) -> RaftProcess {
        RaftProcess::with_timing(ids, me, seed, Timing::default())
    }

    /// Peer `me` of `ids` with `timing`, starting on an empty disk.
    pub fn with_timing(ids: &[u64], me: Pid, seed: u64, timing: Timing) -> RaftProcess {
        let names: Arc<[String]> = ids.iter().map(u64::to_string).collect();
        RaftProcess::boot(
            ids[me],
            me,
            names,
            timing,
            seed,
            Some(HardState::default()),
            0,
        )
    }

    fn boot(
        id: u64,
        me: Pid,
        names: Arc<[String]>,
        timing: Timing,
        seed: u64,
        disk: Option<HardState>,
        now: u64,
    ) -> RaftProcess {
        let cfg = Config::new(
            &names[me],
            &names,
            timing.election_timeout,
            seed.wrapping_mul(31).wrapping_add(me as u64),
        );
        RaftProcess {
            id,
            me,
            node: Node::new(cfg, disk.clone(), timing.time(now)),
            names,
            timing,
            disk,
            leader: None,
        }
    }

    /// This peer restarted at time `now` with a fresh `seed`: with what it
    /// had persisted, or, without its disk, with nothing (it then keeps
    /// quiet for T, as the core does without `--data-dir`).
    pub fn restarted(&self, now: u64, seed: u64, keep_disk: bool) -> RaftProcess {
        let disk = if keep_disk { self.disk.clone() } else { None };
        RaftProcess::boot(
            self.id,
            self.me,
            self.names.clone(),
            self.timing,
            seed,
            disk,
            now,
        )
    }

    /// The core, to read its role and term.
    pub fn node(&self) -> &Node {
        &self.node
    }

    /// What it last persisted (term and vote).
    pub fn disk(&self) -> Option<&HardState> {
        self.disk.as_ref()
    }

    /// Who it believes leads at time `now`.
    pub fn status(&self, now: u64) -> Status {
        self.node.status(self.timing.time(now))
    }

    /// Whether it holds a leader lease at time `now`.
    pub fn leads(&self, now: u64) -> bool {
        self.status(now).is_self
    }

    /// Hands leadership to the most up-to-date follower (a graceful exit).
    pub fn transfer_leadership(&mut self, io: &mut Io<'_, RaftMessage>) {
        let ready = self.node.transfer_leadership(self.timing.time(io.now()));
        self.apply(ready, io);
    }

    fn apply(&mut self, ready: Ready, io: &mut Io<'_, RaftMessage>) {
        // The simulated disk is instant: `persist` needs no waiting.
        if let Some(hard) = ready.persist {
            self.disk = Some(hard);
        }
        for (to, msg) in ready.messages {
            if let Some(pid) = self.names.iter().position(|n| *n == to) {
                io.send(pid, msg);
            }
        }
        let status = self.status(io.now());
        self.leader = if status.is_self {
            Some(self.id)
        } else {
            status.leader.and_then(|l| l.parse().ok())
        };
        // Wake up at the core's next deadline; stale timers find another
        // deadline and do nothing.
        let next = self.timing.units(self.node.next_deadline());
        io.set_timer(next.saturating_sub(io.now()).max(1), next);
    }
}

impl Process for RaftProcess {
    type Msg = RaftMessage;

    fn start(&mut self, io: &mut Io<'_, RaftMessage>) {
        self.apply(Ready::default(), io);
    }

    fn receive(&mut self, from: Pid, msg: RaftMessage, io: &mut Io<'_, RaftMessage>) {
        let now = self.timing.time(io.now());
        let from = self.names[from].clone();
        let ready = self.node.step(now, &from, msg);
        self.apply(ready, io);
    }

    fn timeout(&mut self, timer: u64, io: &mut Io<'_, RaftMessage>) {
        // Only the timer armed for the current deadline ticks the core.
        if timer != self.timing.units(self.node.next_deadline()) {
            return;
        }
        let ready = self.node.tick(self.timing.time(io.now()));
        self.apply(ready, io);
    }

    fn leader(&self) -> Option<u64> {
        self.leader
    }

    fn id(&self) -> u64 {
        self.id
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{Config as SimConfig, Sim};

    fn cluster(n: usize, seed: u64) -> Sim<RaftProcess> {
        let ids: Vec<u64> = (1..=n as u64).collect();
        let procs = (0..n).map(|i| RaftProcess::new(&ids, i, seed)).collect();
        Sim::new(
            procs,
            SimConfig {
                seed,
                ..SimConfig::default()
            },
        )
    }

    #[test]
    fn the_production_core_elects_one_leader_everyone_follows() {
        for seed in 0..200 {
            for n in [3, 5, 7] {
                let mut sim = cluster(n, seed);
                assert!(sim.run_until_settled(), "seed {seed}, n={n}: never settled");
                let out = sim.outcome();
                assert_eq!(out.leaders.len(), 1, "seed {seed}: {out:?}");
                assert!(out.agreed);
                let t = sim.stats().completion;
                // The first timeout falls in [T, 2T); a split vote costs
                // another round now and then.
                assert!(t >= ELECTION_TIMEOUT, "seed {seed}: {t}");
                assert!(t < 10 * ELECTION_TIMEOUT, "seed {seed}: {t}");
            }
        }
    }

    #[test]
    fn a_minority_cut_off_elects_nobody() {
        // 5 peers; after the first election, 2 of them (the leader among
        // them) are split off: the majority side elects, the minority none.
        for seed in 0..50 {
            let mut sim = cluster(5, seed);
            assert!(sim.run_until_settled());
            let leader = sim.outcome().leaders[0] as usize - 1;
            let other = (leader + 1) % 5;
            let groups: Vec<u8> = (0..5)
                .map(|i| u8::from(i == leader || i == other))
                .collect();
            let now = sim.stats().completion;
            sim.partition_at(now, groups.clone());
            sim.run_for(20 * ELECTION_TIMEOUT);
            let minority_leaders: Vec<u64> = (0..5)
                .filter(|&i| groups[i] == 1)
                .filter(|&i| sim.process(i).leads(sim.now()))
                .map(|i| i as u64 + 1)
                .collect();
            assert!(
                minority_leaders.is_empty(),
                "seed {seed}: {minority_leaders:?}"
            );
            let majority_leaders = (0..5)
                .filter(|&i| groups[i] == 0)
                .filter(|&i| sim.process(i).leads(sim.now()))
                .count();
            assert_eq!(majority_leaders, 1, "seed {seed}");
        }
    }
}
