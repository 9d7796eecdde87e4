//! The bully algorithm (Garcia-Molina, "Elections in a distributed
//! computing system", IEEE Trans. Computers, 1982, as Coulouris et al.
//! give it, 15.3.2).
//!
//! Every process knows every other's id. A process that notices the
//! coordinator's failure holds an election: if no live process has a
//! higher id than its own (it knows the coordinator it saw fail is gone),
//! it announces itself with Coordinator messages to every lower process;
//! otherwise it sends Election to every higher process and waits for an OK.
//! A process receiving Election from a lower one answers OK and holds an
//! election of its own. With no OK within the round trip (2 time units),
//! the process announces itself; with an OK, it waits for a Coordinator and
//! holds a new election if none comes in time.
//!
//! N processes including the failed coordinator: worst case (the lowest
//! detects the failure) N(N-1)/2 Election messages; best case (the
//! second-highest detects) N-2 Coordinator messages and nothing else, in
//! one time unit. Completion in the worst case takes 4 time units here:
//! Election (1), the highest survivor's OK timeout (2), Coordinator (1).
//! Lecture slides count 5 because they also count the detection of the
//! failure, which here happens before time 0.

use crate::process::{Io, Message, Pid, Process};

/// The bully algorithm's messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Msg {
    /// "I am holding an election."
    Election,
    /// "I am alive and higher: leave it to me."
    Ok,
    /// "I am the coordinator": carries the sender's id.
    Coordinator(u64),
}

impl Message for Msg {
    fn kind(&self) -> &'static str {
        match self {
            Msg::Election => "election",
            Msg::Ok => "ok",
            Msg::Coordinator(_) => "coordinator",
        }
    }
}

/// The round trip: how long an election waits for an OK.
pub const OK_TIMEOUT: u64 = 2;
/// How long a process that got an OK waits for the Coordinator.
pub const COORDINATOR_TIMEOUT: u64 = 6;

const WAIT_OK: u64 = 1;
const WAIT_COORDINATOR: u64 = 2;

/// One process. `ids[i]` is process i's id; all know all.
#[derive(Debug)]
pub struct Bully {
    ids: std::sync::Arc<[u64]>,
    me: Pid,
    /// Starts an election at time 0, having seen the coordinator (this
    /// process index) fail.
    detects: Option<Pid>,
    electing: bool,
    got_ok: bool,
    leader: Option<u64>,
    /// Timers of older elections are ignored.
    round: u64,
}

impl Bully {
    /// Process `me` of `ids`; `detects` names the failed coordinator it
    /// noticed, for the one process that starts the election.
    pub fn new(ids: std::sync::Arc<[u64]>, me: Pid, detects: Option<Pid>) -> Bully {
        let coordinator = ids.iter().copied().max();
        Bully {
            ids,
            me,
            detects,
            electing: false,
            got_ok: false,
            // Everyone believed in the old coordinator.
            leader: coordinator,
            round: 0,
        }
    }

    fn higher(&self) -> impl Iterator<Item = Pid> + '_ {
        let mine = self.ids[self.me];
        (0..self.ids.len()).filter(move |&p| self.ids[p] > mine)
    }

    fn hold_election(&mut self, io: &mut Io<'_, Msg>, known_failed: Option<Pid>) {
        self.electing = true;
        self.got_ok = false;
        self.round += 1;
        let higher: Vec<Pid> = self.higher().collect();
        if higher.iter().all(|&p| Some(p) == known_failed) {
            self.announce(io);
            return;
        }
        for p in higher {
            io.send(p, Msg::Election);
        }
        io.set_timer(OK_TIMEOUT, self.round * 4 + WAIT_OK);
    }

    fn announce(&mut self, io: &mut Io<'_, Msg>) {
        self.electing = false;
        self.leader = Some(self.ids[self.me]);
        let mine = self.ids[self.me];
        for p in 0..self.ids.len() {
            if self.ids[p] < mine {
                io.send(p, Msg::Coordinator(mine));
            }
        }
    }
}

impl Process for Bully {
    type Msg = Msg;

    fn start(&mut self, io: &mut Io<'_, Msg>) {
        if let Some(failed) = self.detects {
            self.hold_election(io, Some(failed));
        }
    }

    fn receive(&mut self, from: Pid, msg: Msg, io: &mut Io<'_, Msg>) {
        match msg {
            Msg::Election => {
                io.send(from, Msg::Ok);
                if !self.electing {
                    self.hold_election(io, None);
                }
            }
            Msg::Ok => {
                if self.electing && !self.got_ok {
                    self.got_ok = true;
                    io.set_timer(COORDINATOR_TIMEOUT, self.round * 4 + WAIT_COORDINATOR);
                }
            }
            Msg::Coordinator(id) => {
                self.electing = false;
                self.leader = Some(id);
            }
        }
    }

    /// The coordinator is unreachable: hold an election knowing it gone.
    fn suspect(&mut self, pid: Pid, io: &mut Io<'_, Msg>) {
        self.hold_election(io, Some(pid));
    }

    fn timeout(&mut self, timer: u64, io: &mut Io<'_, Msg>) {
        if timer / 4 != self.round || !self.electing {
            return;
        }
        match timer % 4 {
            WAIT_OK if !self.got_ok => self.announce(io),
            WAIT_COORDINATOR => self.hold_election(io, None),
            _ => {}
        }
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

    /// Ids 1..=n at indices 0..n; the highest (index n-1) has failed and
    /// `detector` noticed.
    fn run(n: usize, detector: Pid) -> Sim<Bully> {
        let ids: std::sync::Arc<[u64]> = (1..=n as u64).collect();
        let procs = (0..n)
            .map(|i| Bully::new(ids.clone(), i, (i == detector).then_some(n - 1)))
            .collect();
        let mut sim = Sim::new(procs, Config::default());
        sim.crash_before_start(n - 1);
        sim.run();
        sim
    }

    #[test]
    fn worst_case_the_lowest_detects() {
        for n in [3usize, 4, 6, 10, 20] {
            let sim = run(n, 0);
            let s = sim.stats();
            assert_eq!(s.by_kind["election"], (n * (n - 1) / 2) as u64, "n={n}");
            assert_eq!(s.by_kind["coordinator"], n as u64 - 2, "n={n}");
            assert_eq!(s.completion, 4, "n={n}");
            assert_eq!(sim.outcome().leaders, vec![n as u64 - 1]);
            assert!(sim.outcome().agreed);
        }
    }

    #[test]
    fn best_case_the_second_highest_detects() {
        for n in [3usize, 4, 6, 10, 20] {
            let sim = run(n, n - 2);
            let s = sim.stats();
            assert_eq!(s.messages, n as u64 - 2, "n={n}");
            assert_eq!(s.by_kind.get("coordinator"), Some(&(n as u64 - 2)));
            assert_eq!(s.completion, 1);
            assert!(sim.outcome().agreed);
        }
    }

    #[test]
    fn the_lecture_example_process_6_fails_3_detects_5_is_elected() {
        let sim = run(6, 2);
        assert_eq!(sim.outcome().leaders, vec![5]);
        assert!(sim.outcome().agreed);
    }
}
