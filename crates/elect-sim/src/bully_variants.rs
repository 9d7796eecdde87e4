//! Variants of the bully algorithm, after Petrov, *Database Internals*
//! (O'Reilly, 2019), chapter 10, which trade the bully's O(N^2) messages
//! for a process that gathers answers and names the leader:
//!
//! - `bully-modified`: the process that notices the coordinator's failure
//!   sends Election to every higher process, collects their OKs for a
//!   round trip, and names the highest responder (Elect), which announces
//!   itself (Coordinator to everyone else); nobody else holds an election.
//! - `next-in-line`: the coordinator published its failover alternatives,
//!   ranked; the process that notices the failure names the first of them
//!   its failure detector believes up, without an election round.
//! - `candidate-ordinary`: only the top ceil(sqrt N) ids are candidates;
//!   the noticing process asks the candidates, collects their OKs, and
//!   names the highest.
//!
//! In each, if nobody answers, the noticing process announces itself.

use std::sync::Arc;

use crate::bully::OK_TIMEOUT;
use crate::process::{Io, Message, Pid, Process};

/// Which variant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// Collect the OKs, name the highest responder.
    Modified,
    /// Name the first live failover alternative.
    NextInLine,
    /// Ask only the candidates, name the highest.
    CandidateOrdinary,
}

/// Their messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Msg {
    /// "Are you alive?"
    Election,
    /// "Yes."
    Ok,
    /// "You lead: announce it."
    Elect,
    /// "I lead."
    Coordinator(u64),
}

impl Message for Msg {
    fn kind(&self) -> &'static str {
        match self {
            Msg::Election => "election",
            Msg::Ok => "ok",
            Msg::Elect => "elect",
            Msg::Coordinator(_) => "coordinator",
        }
    }
}

/// One process.
#[derive(Debug)]
pub struct BullyVariant {
    ids: Arc<[u64]>,
    me: Pid,
    variant: Variant,
    detects: Option<Pid>,
    responders: Vec<Pid>,
    leader: Option<u64>,
}

impl BullyVariant {
    /// Process `me` of `ids`; `detects` names the failed coordinator for the
    /// process that noticed.
    pub fn new(ids: Arc<[u64]>, me: Pid, variant: Variant, detects: Option<Pid>) -> BullyVariant {
        let coordinator = ids.iter().copied().max();
        BullyVariant {
            ids,
            me,
            variant,
            detects,
            responders: Vec::new(),
            leader: coordinator,
        }
    }

    /// Processes ranked by id, highest first, but `failed`.
    fn ranked(&self, failed: Pid) -> Vec<Pid> {
        let mut all: Vec<Pid> = (0..self.ids.len()).filter(|&p| p != failed).collect();
        all.sort_by_key(|&p| std::cmp::Reverse(self.ids[p]));
        all
    }

    fn announce(&mut self, io: &mut Io<'_, Msg>) {
        let mine = self.ids[self.me];
        self.leader = Some(mine);
        for p in 0..self.ids.len() {
            if p != self.me {
                io.send(p, Msg::Coordinator(mine));
            }
        }
    }

    fn name(&mut self, chosen: Pid, io: &mut Io<'_, Msg>) {
        if chosen == self.me {
            self.announce(io);
        } else {
            io.send(chosen, Msg::Elect);
        }
    }
}

impl Process for BullyVariant {
    type Msg = Msg;

    fn start(&mut self, io: &mut Io<'_, Msg>) {
        let Some(failed) = self.detects else { return };
        let ranked = self.ranked(failed);
        let ask: Vec<Pid> = match self.variant {
            Variant::NextInLine => {
                // The published alternatives, in rank order: the first the
                // detector believes up.
                let first = ranked
                    .iter()
                    .copied()
                    .find(|&p| p == self.me || io.believed_up(p))
                    .unwrap_or(self.me);
                self.name(first, io);
                return;
            }
            Variant::Modified => {
                let mine = self.ids[self.me];
                (0..self.ids.len())
                    .filter(|&p| self.ids[p] > mine)
                    .collect()
            }
            Variant::CandidateOrdinary => {
                let k = (self.ids.len() as f64).sqrt().ceil() as usize;
                // The candidates are the top k ids, the failed one included.
                let mut all: Vec<Pid> = (0..self.ids.len()).collect();
                all.sort_by_key(|&p| std::cmp::Reverse(self.ids[p]));
                all.into_iter().take(k).filter(|&p| p != self.me).collect()
            }
        };
        if ask.is_empty() {
            self.announce(io);
            return;
        }
        for p in ask {
            io.send(p, Msg::Election);
        }
        io.set_timer(OK_TIMEOUT, 0);
    }

    fn receive(&mut self, from: Pid, msg: Msg, io: &mut Io<'_, Msg>) {
        match msg {
            Msg::Election => io.send(from, Msg::Ok),
            Msg::Ok => self.responders.push(from),
            Msg::Elect => self.announce(io),
            Msg::Coordinator(id) => self.leader = Some(id),
        }
    }

    fn timeout(&mut self, _timer: u64, io: &mut Io<'_, Msg>) {
        let best = self
            .responders
            .iter()
            .copied()
            .chain(std::iter::once(self.me))
            .max_by_key(|&p| self.ids[p])
            .expect("at least this process");
        self.name(best, io);
    }

    fn leader(&self) -> Option<u64> {
        self.leader
    }

    fn id(&self) -> u64 {
        self.ids[self.me]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{Config, Sim};

    fn run(n: usize, detector: Pid, variant: Variant) -> Sim<BullyVariant> {
        let ids: Arc<[u64]> = (1..=n as u64).collect();
        let procs = (0..n)
            .map(|i| BullyVariant::new(ids.clone(), i, variant, (i == detector).then_some(n - 1)))
            .collect();
        let mut sim = Sim::new(procs, Config::default());
        sim.crash_before_start(n - 1);
        sim.run();
        sim
    }

    #[test]
    fn every_variant_elects_the_highest_survivor_in_linear_messages() {
        for variant in [
            Variant::Modified,
            Variant::NextInLine,
            Variant::CandidateOrdinary,
        ] {
            for n in [3usize, 6, 16, 100] {
                for detector in [0, n / 2, n - 2] {
                    let sim = run(n, detector, variant);
                    let out = sim.outcome();
                    assert_eq!(out.leaders, vec![n as u64 - 1], "{variant:?} n={n}");
                    assert!(out.agreed, "{variant:?} n={n}");
                    assert!(sim.stats().messages <= 4 * n as u64, "{variant:?} n={n}");
                }
            }
        }
    }

    #[test]
    fn the_lowest_detecting_costs_what_each_variant_promises() {
        let n = 16u64;
        // Modified: N-1 elections, N-2 OKs, 1 elect, N-1 coordinators (the
        // new leader tells everyone, the failed one included: it does not
        // know which failed).
        let s = run(16, 0, Variant::Modified).stats().clone();
        assert_eq!(s.messages, (n - 1) + (n - 2) + 1 + (n - 1));
        // Election, OK (in time for the round-trip deadline), Elect,
        // Coordinator.
        assert_eq!(s.completion, 4);
        // Next in line: 1 elect, N-1 coordinators, in 2 time units.
        let s = run(16, 0, Variant::NextInLine).stats().clone();
        assert_eq!(s.messages, 1 + (n - 1));
        assert_eq!(s.completion, 2);
        // Candidates: the top 4, one of them failed: 4 elections, 3 OKs.
        let s = run(16, 0, Variant::CandidateOrdinary).stats().clone();
        assert_eq!(s.by_kind["election"], 4);
        assert_eq!(s.by_kind["ok"], 3);
    }
}
