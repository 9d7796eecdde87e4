//! The ring algorithm with Election and Elected messages (after Chang and
//! Roberts, 1979, as lectures on distributed systems give it, e.g.
//! Coulouris et al., *Distributed Systems*, 15.3.1).
//!
//! Processes sit on a logical ring and each knows its successor. An
//! initiator marks itself a participant and sends Election(own id) to its
//! successor. A process receiving Election(j):
//! - j larger than its id: forwards it (and is now a participant);
//! - j smaller and it is not a participant: replaces it with its own id and
//!   forwards that (so at most one message per initiator survives);
//! - j smaller and it already participates: discards it (a lower
//!   initiator's message is suppressed);
//! - j its own id: it has the largest id and is the coordinator; it sends
//!   Elected(own id) around the ring, and each process records the leader
//!   and forwards it until it comes back.
//!
//! A crashed successor is skipped (the next live one in ring order), as the
//! failure detector reports it.
//!
//! One initiator, no failures: worst case (the initiator is the would-be
//! leader's successor) 3N-1 messages and 3N-1 time units; best case (the
//! would-be leader initiates) 2N and 2N.

use crate::process::{Io, Message, Pid, Process};

/// The ring's messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Msg {
    /// Election(id): the largest id seen on this round.
    Election(u64),
    /// Elected(id): the coordinator's announcement.
    Elected(u64),
}

impl Message for Msg {
    fn kind(&self) -> &'static str {
        match self {
            Msg::Election(_) => "election",
            Msg::Elected(_) => "elected",
        }
    }
}

/// One process on the ring. Index i's successor is index i+1 (mod n).
#[derive(Debug)]
pub struct Ring {
    id: u64,
    initiator: bool,
    participant: bool,
    leader: Option<u64>,
}

impl Ring {
    /// A process with `id`; initiators start an election at time 0.
    pub fn new(id: u64, initiator: bool) -> Ring {
        Ring {
            id,
            initiator,
            participant: false,
            leader: None,
        }
    }
}

/// The next live process after `me` in ring order.
pub fn successor<M>(io: &Io<'_, M>) -> Pid {
    let n = io.n();
    (1..n)
        .map(|k| (io.me() + k) % n)
        .find(|&p| io.believed_up(p))
        .unwrap_or(io.me())
}

impl Process for Ring {
    type Msg = Msg;

    fn start(&mut self, io: &mut Io<'_, Msg>) {
        if self.initiator {
            self.participant = true;
            let next = successor(io);
            io.send(next, Msg::Election(self.id));
        }
    }

    fn receive(&mut self, _from: Pid, msg: Msg, io: &mut Io<'_, Msg>) {
        let next = successor(io);
        match msg {
            Msg::Election(j) if j > self.id => {
                self.participant = true;
                io.send(next, Msg::Election(j));
            }
            Msg::Election(j) if j < self.id => {
                if !self.participant {
                    self.participant = true;
                    io.send(next, Msg::Election(self.id));
                }
            }
            Msg::Election(_) => {
                self.participant = false;
                self.leader = Some(self.id);
                io.send(next, Msg::Elected(self.id));
            }
            Msg::Elected(j) => {
                self.participant = false;
                self.leader = Some(j);
                if j != self.id {
                    io.send(next, Msg::Elected(j));
                }
            }
        }
    }

    /// The leader is unreachable: start a new election.
    fn suspect(&mut self, _pid: Pid, io: &mut Io<'_, Msg>) {
        self.leader = None;
        self.participant = true;
        let next = successor(io);
        io.send(next, Msg::Election(self.id));
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
    use crate::engine::{Config, Sim};

    fn run(ids: &[u64], initiators: &[usize]) -> Sim<Ring> {
        let procs = ids
            .iter()
            .enumerate()
            .map(|(i, &id)| Ring::new(id, initiators.contains(&i)))
            .collect();
        let mut sim = Sim::new(procs, Config::default());
        sim.run();
        sim
    }

    #[test]
    fn the_lecture_ring_elects_300() {
        // 101, 205, 150, 300, 175 around the ring; 150 initiates.
        let sim = run(&[101, 205, 150, 300, 175], &[2]);
        let out = sim.outcome();
        assert_eq!(out.leaders, vec![300]);
        assert!(out.agreed);
    }

    #[test]
    fn one_initiator_worst_and_best_cases_count_exactly() {
        for n in [3usize, 5, 8, 16, 64] {
            let ids: Vec<u64> = (1..=n as u64).collect();
            // The largest id sits at index n-1; its successor is index 0.
            let worst = run(&ids, &[0]);
            let s = worst.stats();
            assert_eq!(s.messages, 3 * n as u64 - 1, "worst, n={n}");
            assert_eq!(s.completion, 3 * n as u64 - 1, "worst, n={n}");
            let best = run(&ids, &[n - 1]);
            let s = best.stats();
            assert_eq!(s.messages, 2 * n as u64, "best, n={n}");
            assert_eq!(s.completion, 2 * n as u64, "best, n={n}");
            assert_eq!(best.outcome().leaders, vec![n as u64]);
        }
    }

    #[test]
    fn a_crashed_successor_is_skipped() {
        let procs = [3u64, 9, 4, 7]
            .iter()
            .enumerate()
            .map(|(i, &id)| Ring::new(id, i == 0))
            .collect();
        let mut sim = Sim::new(procs, Config::default());
        sim.crash_before_start(1);
        sim.run();
        assert_eq!(sim.outcome().leaders, vec![7]);
        assert!(sim.outcome().agreed);
    }

    #[test]
    fn several_initiators_agree_and_lower_ones_are_suppressed() {
        let sim = run(&[101, 205, 150, 300, 175], &[0, 2, 4]);
        assert_eq!(sim.outcome().leaders, vec![300]);
        assert!(sim.outcome().agreed);
    }
}
