//! Peterson (1982), "An O(n log n) unidirectional algorithm for the
//! circular extrema problem": on a unidirectional ring with FIFO links,
//! active processes hold a temporary id. In each phase an active process
//! sends its temporary id on (first message), learns its active
//! predecessor's (and passes it on: second message), and learns the one
//! before that. It stays active, adopting its predecessor's temporary id,
//! only if that id is larger than both its own and the one before;
//! otherwise it becomes a relay that only forwards. At least half of the
//! active processes turn relay each phase, and each phase costs 2n
//! messages. A process whose own first message comes back is the last
//! active one, holding the largest id; it announces itself (Elected, counted
//! apart).
//!
//! At most 2n(floor(log2 n) + 1) + n messages before the announcement.
//! Needs FIFO links: the fixed delay model gives them.

use super::ring::successor;
use crate::process::{Io, Message, Pid, Process};

/// Its messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Msg {
    /// An active process's temporary id.
    First(u64),
    /// Its predecessor's, passed on.
    Second(u64),
    /// The winner's announcement: its own id.
    Elected(u64),
}

impl Message for Msg {
    fn kind(&self) -> &'static str {
        match self {
            Msg::First(_) => "first",
            Msg::Second(_) => "second",
            Msg::Elected(_) => "elected",
        }
    }
}

/// One process; all start active.
#[derive(Debug)]
pub struct Peterson {
    id: u64,
    active: bool,
    tid: u64,
    /// The active predecessor's temporary id, this phase.
    ntid: Option<u64>,
    leader: Option<u64>,
}

impl Peterson {
    /// A process with `id`.
    pub fn new(id: u64) -> Peterson {
        Peterson {
            id,
            active: true,
            tid: id,
            ntid: None,
            leader: None,
        }
    }
}

impl Process for Peterson {
    type Msg = Msg;

    fn start(&mut self, io: &mut Io<'_, Msg>) {
        let next = successor(io);
        io.send(next, Msg::First(self.tid));
    }

    fn receive(&mut self, _from: Pid, msg: Msg, io: &mut Io<'_, Msg>) {
        let next = successor(io);
        if let Msg::Elected(j) = msg {
            self.leader = Some(j);
            if j != self.id {
                io.send(next, Msg::Elected(j));
            }
            return;
        }
        if !self.active {
            io.send(next, msg);
            return;
        }
        match msg {
            Msg::First(x) if x == self.tid => {
                // Our own temporary id came round: nobody else is active.
                self.leader = Some(self.id);
                io.send(next, Msg::Elected(self.id));
            }
            Msg::First(x) => {
                self.ntid = Some(x);
                io.send(next, Msg::Second(x));
            }
            Msg::Second(nntid) => {
                let ntid = self.ntid.take().expect("FIFO: first before second");
                if ntid > self.tid.max(nntid) {
                    self.tid = ntid;
                    io.send(next, Msg::First(self.tid));
                } else {
                    self.active = false;
                }
            }
            Msg::Elected(_) => unreachable!("handled above"),
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
    fn one_leader_within_the_bound() {
        let mut seed = 5u64;
        for n in [2usize, 3, 4, 7, 16, 100, 256] {
            for ids in crate::run::arrangements(n, &mut seed) {
                let procs = ids.iter().map(|&id| Peterson::new(id)).collect();
                let mut sim = Sim::new(procs, Config::default());
                let s = sim.run().clone();
                let out = sim.outcome();
                assert_eq!(out.leaders.len(), 1, "n={n}: {out:?}");
                assert!(out.agreed, "n={n}");
                let floor_log = (n as f64).log2().floor() as u64;
                let bound = 2 * n as u64 * (floor_log + 1) + n as u64;
                let used = s.messages - s.by_kind["elected"];
                assert!(used <= bound, "n={n}: {used} > {bound}");
            }
        }
    }
}
