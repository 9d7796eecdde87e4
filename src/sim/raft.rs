//! The production Raft-vote core (`backend::raft::core`) as a simulated
//! process, unchanged: time and messages in, [`Ready`] out. One time unit
//! is one millisecond of the core's clock; with the default election
//! timeout of [`ELECTION_TIMEOUT`] units, heartbeats go every 2 units and a
//! message takes 1.
//!
//! Raft never falls silent (the leader heartbeats for ever), so a Raft run
//! ends when the processes have settled: every live one names the same
//! leader, which holds its lease ([`Sim::run_until_settled`]).
//!
//! [`Ready`]: crate::backend::raft::core::Ready
//! [`Sim::run_until_settled`]: super::engine::Sim::run_until_settled

use std::sync::Arc;
use std::time::Duration;

use crate::backend::raft::core::{Config, HardState, Message as RaftMessage, Node, Ready};

use super::{Io, Message, Pid, Process};

/// The election timeout T, in time units.
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

/// One Raft-vote peer.
pub struct RaftProcess {
    id: u64,
    /// Every peer's name (its id as text), by index.
    names: Arc<[String]>,
    node: Node,
    /// Whom it believes leads, as of its last event.
    leader: Option<u64>,
}

impl RaftProcess {
    /// Peer `me` of `ids`, its randomised timeouts drawn from `seed`.
    pub fn new(ids: &[u64], me: Pid, seed: u64) -> RaftProcess {
        let names: Arc<[String]> = ids.iter().map(u64::to_string).collect();
        let cfg = Config::new(
            &names[me],
            &names,
            Duration::from_millis(ELECTION_TIMEOUT),
            seed.wrapping_mul(31).wrapping_add(me as u64),
        );
        RaftProcess {
            id: ids[me],
            node: Node::new(cfg, Some(HardState::default()), Duration::ZERO),
            names,
            leader: None,
        }
    }

    fn apply(&mut self, ready: Ready, io: &mut Io<'_, RaftMessage>) {
        // The simulated disk is instant: `persist` needs no waiting.
        for (to, msg) in ready.messages {
            if let Some(pid) = self.names.iter().position(|n| *n == to) {
                io.send(pid, msg);
            }
        }
        let now = Duration::from_millis(io.now());
        let status = self.node.status(now);
        self.leader = if status.is_self {
            Some(self.id)
        } else {
            status.leader.and_then(|l| l.parse().ok())
        };
        // Wake up at the core's next deadline; stale timers find nothing
        // due and re-arm.
        let next = self.node.next_deadline().as_millis() as u64;
        io.set_timer(next.saturating_sub(io.now()).max(1), next);
    }
}

impl Process for RaftProcess {
    type Msg = RaftMessage;

    fn start(&mut self, io: &mut Io<'_, RaftMessage>) {
        self.apply(Ready::default(), io);
    }

    fn receive(&mut self, from: Pid, msg: RaftMessage, io: &mut Io<'_, RaftMessage>) {
        let now = Duration::from_millis(io.now());
        let from = self.names[from].clone();
        let ready = self.node.step(now, &from, msg);
        self.apply(ready, io);
    }

    fn timeout(&mut self, timer: u64, io: &mut Io<'_, RaftMessage>) {
        // Only the timer armed for the current deadline ticks the core.
        if timer != self.node.next_deadline().as_millis() as u64 {
            return;
        }
        let ready = self.node.tick(Duration::from_millis(io.now()));
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
    use crate::sim::engine::{Config as SimConfig, Sim};

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
                .filter(|&i| {
                    sim.process(i)
                        .node
                        .status(Duration::from_millis(sim.now()))
                        .is_self
                })
                .map(|i| i as u64 + 1)
                .collect();
            assert!(
                minority_leaders.is_empty(),
                "seed {seed}: {minority_leaders:?}"
            );
            let majority_leaders = (0..5)
                .filter(|&i| groups[i] == 0)
                .filter(|&i| {
                    sim.process(i)
                        .node
                        .status(Duration::from_millis(sim.now()))
                        .is_self
                })
                .count();
            assert_eq!(majority_leaders, 1, "seed {seed}");
        }
    }
}
