//! The invitation algorithm (Garcia-Molina, "Elections in a distributed
//! computing system", 1982), simplified as Coulouris et al. and lecture
//! notes describe it: processes form groups, each with a coordinator;
//! coordinators look for one another and merge their groups.
//!
//! Every process starts as the coordinator of a group of its own and asks
//! everyone it can reach whether they coordinate. After a round trip, a
//! coordinator that heard from no higher coordinator invites the ones that
//! answered; an invited coordinator passes the invitation on to its
//! members and accepts, and so do they; the inviter then tells its new
//! group it is ready. A member that loses sight of its coordinator (the
//! failure detector suspects it, or it is across a partition) answers as a
//! coordinator of its own again, and a suspicion starts a merge round.
//! Because a group only merges with groups it can reach, a partition ends
//! with a coordinator on each side: the split brain this algorithm
//! accepts by design (it favours availability).

use std::sync::Arc;

use crate::process::{Io, Message, Pid, Process};

/// Its messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Msg {
    /// "Do you coordinate a group?"
    AreYouCoordinator,
    /// "Yes."
    Yes,
    /// "Join the group of the coordinator with this id."
    Invite(u64),
    /// "I join your group."
    Accept,
    /// "The group is formed; I coordinate it."
    Ready(u64),
}

impl Message for Msg {
    fn kind(&self) -> &'static str {
        match self {
            Msg::AreYouCoordinator => "are-you-coordinator",
            Msg::Yes => "yes",
            Msg::Invite(_) => "invite",
            Msg::Accept => "accept",
            Msg::Ready(_) => "ready",
        }
    }
}

const MERGE: u64 = 0;
const READY: u64 = 1;

/// One process.
#[derive(Debug)]
pub struct Invitation {
    ids: Arc<[u64]>,
    me: Pid,
    coordinator: Pid,
    members: Vec<Pid>,
    responders: Vec<Pid>,
}

impl Invitation {
    /// Process `me` of `ids`, coordinator of a group of its own.
    pub fn new(ids: Arc<[u64]>, me: Pid) -> Invitation {
        Invitation {
            ids,
            me,
            coordinator: me,
            members: Vec::new(),
            responders: Vec::new(),
        }
    }

    fn merge_round(&mut self, io: &mut Io<'_, Msg>) {
        self.responders.clear();
        for p in 0..self.ids.len() {
            if p != self.me && io.believed_up(p) {
                io.send(p, Msg::AreYouCoordinator);
            }
        }
        io.set_timer(2, MERGE);
    }

    fn pid_of(&self, id: u64) -> Pid {
        self.ids.iter().position(|&i| i == id).expect("a known id")
    }
}

impl Process for Invitation {
    type Msg = Msg;

    fn start(&mut self, io: &mut Io<'_, Msg>) {
        self.merge_round(io);
    }

    fn receive(&mut self, from: Pid, msg: Msg, io: &mut Io<'_, Msg>) {
        match msg {
            Msg::AreYouCoordinator => {
                if self.coordinator != self.me && !io.believed_up(self.coordinator) {
                    // Lost sight of its coordinator: a group of its own,
                    // looking for others to merge with.
                    self.coordinator = self.me;
                    self.members.clear();
                    self.merge_round(io);
                }
                if self.coordinator == self.me {
                    io.send(from, Msg::Yes);
                }
            }
            Msg::Yes => self.responders.push(from),
            Msg::Invite(leader) => {
                let new = self.pid_of(leader);
                if self.coordinator == self.me {
                    // Bring the group along.
                    for &m in &self.members {
                        io.send(m, Msg::Invite(leader));
                    }
                    self.members.clear();
                }
                self.coordinator = new;
                io.send(new, Msg::Accept);
            }
            Msg::Accept => {
                if self.coordinator == self.me && !self.members.contains(&from) {
                    self.members.push(from);
                }
            }
            Msg::Ready(leader) => self.coordinator = self.pid_of(leader),
        }
    }

    fn timeout(&mut self, timer: u64, io: &mut Io<'_, Msg>) {
        if self.coordinator != self.me {
            return;
        }
        match timer {
            MERGE => {
                let mine = self.ids[self.me];
                if self.responders.iter().all(|&r| self.ids[r] < mine) {
                    for &r in &self.responders {
                        io.send(r, Msg::Invite(mine));
                    }
                    if !self.responders.is_empty() {
                        io.set_timer(4, READY);
                    }
                }
            }
            _ => {
                for &m in &self.members {
                    io.send(m, Msg::Ready(self.ids[self.me]));
                }
            }
        }
    }

    /// Its coordinator is unreachable: coordinate a group of its own and
    /// look for others to merge with.
    fn suspect(&mut self, _pid: Pid, io: &mut Io<'_, Msg>) {
        self.coordinator = self.me;
        self.members.clear();
        self.merge_round(io);
    }

    fn leader(&self) -> Option<u64> {
        Some(self.ids[self.coordinator])
    }

    fn id(&self) -> u64 {
        self.ids[self.me]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{Config, Sim};

    fn group(n: usize) -> Sim<Invitation> {
        let ids: Arc<[u64]> = (1..=n as u64).collect();
        let procs = (0..n).map(|i| Invitation::new(ids.clone(), i)).collect();
        Sim::new(procs, Config::default())
    }

    #[test]
    fn singleton_groups_merge_under_the_highest() {
        for n in [2usize, 3, 8, 33] {
            let mut sim = group(n);
            sim.run();
            let out = sim.outcome();
            assert_eq!(out.leaders, vec![n as u64], "n={n}");
            assert!(out.agreed, "n={n}");
        }
    }

    #[test]
    fn a_partition_leaves_a_coordinator_on_each_side() {
        let n = 8;
        let mut sim = group(n);
        sim.run();
        // The leader (index 7) and index 0 on one side, the rest on the other.
        let groups: Vec<u8> = (0..n).map(|i| u8::from(i == 7 || i == 0)).collect();
        let at = sim.now() + 1;
        sim.partition_at(at, groups);
        sim.suspect_at(at + 1, 1, 7);
        sim.run();
        let out = sim.outcome();
        assert_eq!(out.leaders, vec![7, 8], "{out:?}");
        assert!(out.split_brain);
    }
}
