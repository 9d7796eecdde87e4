//! Hirschberg and Sinclair (1980), "Decentralized extrema-finding in
//! circular configurations of processors": a bidirectional ring in which
//! every process, in phases k = 0, 1, 2..., sends a probe with its id 2^k
//! hops in both directions. A process swallows a probe carrying a smaller
//! id than its own, forwards a larger one, and turns it back as a reply
//! once it has gone 2^k hops; a process that gets both replies starts the
//! next phase. A probe that comes back to its sender has gone all the way
//! round: that sender has the largest id and announces it (Elected, sent
//! one way round, counted apart).
//!
//! At most 8n(1 + ceil(log2 n)) probes and replies, O(n) time.

use crate::process::{Io, Message, Pid, Process};

/// Its messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Msg {
    /// An id on its way out, in a phase, after so many hops.
    Probe {
        /// The id.
        id: u64,
        /// The phase: it goes 2^phase hops.
        phase: u32,
        /// Hops so far.
        hops: u64,
    },
    /// A probe turned back, on its way home.
    Reply {
        /// The id.
        id: u64,
        /// The phase.
        phase: u32,
    },
    /// The leader's announcement.
    Elected(u64),
}

impl Message for Msg {
    fn kind(&self) -> &'static str {
        match self {
            Msg::Probe { .. } => "probe",
            Msg::Reply { .. } => "reply",
            Msg::Elected(_) => "elected",
        }
    }
}

/// One process; all initiate.
#[derive(Debug)]
pub struct HirschbergSinclair {
    id: u64,
    phase: u32,
    replies: u8,
    leader: Option<u64>,
}

impl HirschbergSinclair {
    /// A process with `id`.
    pub fn new(id: u64) -> HirschbergSinclair {
        HirschbergSinclair {
            id,
            phase: 0,
            replies: 0,
            leader: None,
        }
    }

    fn probe_both_ways(&mut self, io: &mut Io<'_, Msg>) {
        let (left, right) = neighbours(io);
        for to in [left, right] {
            io.send(
                to,
                Msg::Probe {
                    id: self.id,
                    phase: self.phase,
                    hops: 1,
                },
            );
        }
    }
}

/// The previous and the next process on the ring.
fn neighbours<M>(io: &Io<'_, M>) -> (Pid, Pid) {
    let n = io.n();
    ((io.me() + n - 1) % n, (io.me() + 1) % n)
}

/// The neighbour on the other side from `from`.
fn onward<M>(io: &Io<'_, M>, from: Pid) -> Pid {
    let (left, right) = neighbours(io);
    if from == left { right } else { left }
}

impl Process for HirschbergSinclair {
    type Msg = Msg;

    fn start(&mut self, io: &mut Io<'_, Msg>) {
        self.probe_both_ways(io);
    }

    fn receive(&mut self, from: Pid, msg: Msg, io: &mut Io<'_, Msg>) {
        match msg {
            Msg::Probe { id, .. } if id == self.id => {
                // Round the ring: the largest id. It arrives from both
                // sides; announce once.
                if self.leader.is_none() {
                    self.leader = Some(self.id);
                    let (_, right) = neighbours(io);
                    io.send(right, Msg::Elected(self.id));
                }
            }
            Msg::Probe { id, phase, hops } if id > self.id => {
                if hops < 1u64 << phase {
                    let to = onward(io, from);
                    io.send(
                        to,
                        Msg::Probe {
                            id,
                            phase,
                            hops: hops + 1,
                        },
                    );
                } else {
                    io.send(from, Msg::Reply { id, phase });
                }
            }
            Msg::Probe { .. } => {}
            Msg::Reply { id, phase } if id != self.id => {
                let to = onward(io, from);
                io.send(to, Msg::Reply { id, phase });
            }
            Msg::Reply { phase, .. } => {
                if phase == self.phase && self.leader.is_none() {
                    self.replies += 1;
                    if self.replies == 2 {
                        self.replies = 0;
                        self.phase += 1;
                        self.probe_both_ways(io);
                    }
                }
            }
            Msg::Elected(j) => {
                self.leader = Some(j);
                if j != self.id {
                    let (_, right) = neighbours(io);
                    io.send(right, Msg::Elected(j));
                }
            }
        }
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

    #[test]
    fn the_lecture_ring_elects_300() {
        let procs = [101, 205, 150, 300, 175]
            .into_iter()
            .map(HirschbergSinclair::new)
            .collect();
        let mut sim = Sim::new(procs, Config::default());
        sim.run();
        assert_eq!(sim.outcome().leaders, vec![300]);
        assert!(sim.outcome().agreed);
    }

    #[test]
    fn elects_the_largest_id_within_the_bound() {
        let mut seed = 11u64;
        for n in [3usize, 4, 5, 8, 13, 64, 200] {
            for ids in crate::run::arrangements(n, &mut seed) {
                let procs = ids.iter().map(|&id| HirschbergSinclair::new(id)).collect();
                let mut sim = Sim::new(procs, Config::default());
                let s = sim.run().clone();
                assert_eq!(sim.outcome().leaders, vec![n as u64], "n={n}");
                assert!(sim.outcome().agreed);
                let log = (n as f64).log2().ceil() as u64;
                let bound = 8 * n as u64 * (1 + log);
                let used = s.by_kind["probe"] + s.by_kind.get("reply").copied().unwrap_or(0);
                assert!(used <= bound, "n={n}: {used} > {bound}");
                assert_eq!(s.by_kind["elected"], n as u64);
            }
        }
    }
}
