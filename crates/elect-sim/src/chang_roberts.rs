//! Chang and Roberts (1979), "An improved algorithm for decentralized
//! extrema-finding in circular configurations of processes": a
//! unidirectional ring on which every process initiates at once, sending
//! its own id; a process forwards an id larger than its own and swallows a
//! smaller one; the process that receives its own id has the maximum and
//! announces it with an Elected round.
//!
//! Election messages (the Elected round counted apart, as `elected`): with
//! ids decreasing along the direction of travel every id runs until the
//! maximum swallows it, n(n+1)/2 in all (the worst case); increasing, every
//! id but the maximum dies at its successor, 2n-1 (the best case); over
//! random arrangements n*H_n on average.

use super::ring::successor;
use crate::process::{Io, Message, Pid, Process};

pub use super::ring::Msg;

/// One process; all initiate.
#[derive(Debug)]
pub struct ChangRoberts {
    id: u64,
    leader: Option<u64>,
}

impl ChangRoberts {
    /// A process with `id`.
    pub fn new(id: u64) -> ChangRoberts {
        ChangRoberts { id, leader: None }
    }
}

impl Process for ChangRoberts {
    type Msg = Msg;

    fn start(&mut self, io: &mut Io<'_, Msg>) {
        let next = successor(io);
        io.send(next, Msg::Election(self.id));
    }

    fn receive(&mut self, _from: Pid, msg: Msg, io: &mut Io<'_, Msg>) {
        let next = successor(io);
        match msg {
            Msg::Election(j) if j > self.id => io.send(next, Msg::Election(j)),
            Msg::Election(j) if j < self.id => {}
            Msg::Election(_) => {
                self.leader = Some(self.id);
                io.send(next, Msg::Elected(self.id));
            }
            Msg::Elected(j) => {
                self.leader = Some(j);
                if j != self.id {
                    io.send(next, Msg::Elected(j));
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

/// Keeps the compiler honest about the shared message type's kinds.
const _: fn(&Msg) -> &'static str = Message::kind;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{Config, Sim};

    fn election_messages(ids: &[u64]) -> (u64, Sim<ChangRoberts>) {
        let procs = ids.iter().map(|&id| ChangRoberts::new(id)).collect();
        let mut sim = Sim::new(procs, Config::default());
        let stats = sim.run().clone();
        (stats.by_kind["election"], sim)
    }

    #[test]
    fn the_lecture_ring_elects_300() {
        let (election, sim) = election_messages(&[101, 205, 150, 300, 175]);
        assert_eq!(sim.outcome().leaders, vec![300]);
        assert!(sim.outcome().agreed);
        // 300 goes all the way round (5 hops); 175 passes 101 and dies at
        // 205 (2); 205 passes 150 and dies at 300 (2); 150 dies at 300 and
        // 101 at 205 (1 each).
        assert_eq!(election, 5 + 2 + 2 + 1 + 1);
    }

    #[test]
    fn worst_and_best_cases_count_exactly() {
        for n in [3u64, 4, 10, 32, 100] {
            let decreasing: Vec<u64> = (1..=n).rev().collect();
            let (worst, sim) = election_messages(&decreasing);
            assert_eq!(worst, n * (n + 1) / 2, "n={n}");
            assert_eq!(sim.stats().by_kind["elected"], n);
            assert_eq!(sim.outcome().leaders, vec![n]);
            let increasing: Vec<u64> = (1..=n).collect();
            let (best, sim) = election_messages(&increasing);
            assert_eq!(best, 2 * n - 1, "n={n}");
            assert!(sim.outcome().agreed);
        }
    }

    #[test]
    fn the_average_over_random_rings_is_n_times_the_harmonic_number() {
        let n = 64u64;
        let runs = 400;
        let mut seed = 7u64;
        let mut total = 0u64;
        for _ in 0..runs {
            let mut ids: Vec<u64> = (1..=n).collect();
            // Fisher-Yates with a small LCG: reproducible.
            for i in (1..ids.len()).rev() {
                seed = seed
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                ids.swap(i, (seed >> 33) as usize % (i + 1));
            }
            total += election_messages(&ids).0;
        }
        let mean = total as f64 / runs as f64;
        let h: f64 = (1..=n).map(|k| 1.0 / k as f64).sum();
        let expected = n as f64 * h;
        assert!(
            (mean - expected).abs() / expected < 0.03,
            "mean {mean:.1} vs n*H_n {expected:.1}"
        );
    }
}
