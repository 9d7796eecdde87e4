//! A deterministic simulator for leader-election algorithms.
//!
//! Election is taught, and chosen, by comparing the classical algorithms:
//! how many messages they send, how long they take, what they do when the
//! network splits. Here each algorithm is a sans-IO [`Process`]: it reacts
//! to its start, to messages and to its timers by asking [`Io`] to send
//! messages and set timers, and says whom it believes leads. The
//! [`engine::Sim`] delivers what they send in a seeded, reproducible order,
//! with a delay model, drops, partitions and crashes, and counts.
//!
//! Counting conventions (the tests hold them exactly):
//! - one message transmission takes one time unit (unless a delay model
//!   says otherwise), and a process acts on a message the instant it
//!   arrives;
//! - a message sent to a crashed process, or across a partition, counts as
//!   sent and is lost;
//! - completion time is the arrival of the last message delivered;
//! - messages are counted by kind (`election`, `elected`, `ok`,
//!   `coordinator`...), and in total.

pub mod bully;
pub mod bully_variants;
pub mod chang_roberts;
pub mod engine;
pub mod hirschberg_sinclair;
pub mod invitation;
pub mod peterson;
pub mod raft;
pub mod ring;
pub mod run;
pub mod trace;

/// A process's index in the simulation, `0..n`. Algorithms compare
/// processes by the ids the scenario gave them, not by index.
pub type Pid = usize;

/// The textbooks' three arrangements of ids 1..=n around a ring:
/// increasing, decreasing, and shuffled by `seed`.
#[cfg(test)]
pub(crate) fn arrangements(n: usize, seed: &mut u64) -> [Vec<u64>; 3] {
    let increasing: Vec<u64> = (1..=n as u64).collect();
    let decreasing = increasing.iter().rev().copied().collect();
    [increasing, decreasing, run::shuffled(n, seed)]
}

/// splitmix64: small, fast, the same everywhere; every random choice of
/// the simulator and its scenarios draws from it.
pub(crate) fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A message of an algorithm.
pub trait Message: Clone + std::fmt::Debug {
    /// Its kind, for counting: `election`, `elected`, `ok`...
    fn kind(&self) -> &'static str;
}

/// One process of an election algorithm, sans I/O.
pub trait Process {
    /// The messages it exchanges.
    type Msg: Message;

    /// Called once for every live process at time 0, in index order.
    fn start(&mut self, io: &mut Io<'_, Self::Msg>);

    /// A message from `from` arrived.
    fn receive(&mut self, from: Pid, msg: Self::Msg, io: &mut Io<'_, Self::Msg>);

    /// Timer `timer` (as set with [`Io::set_timer`]) fired.
    fn timeout(&mut self, timer: u64, io: &mut Io<'_, Self::Msg>) {
        let _ = (timer, io);
    }

    /// The failure detector suspects `pid` (e.g. the leader, unreachable
    /// since a partition). Algorithms that react hold an election.
    fn suspect(&mut self, pid: Pid, io: &mut Io<'_, Self::Msg>) {
        let _ = (pid, io);
    }

    /// The id of whom it believes leads, if anyone.
    fn leader(&self) -> Option<u64>;

    /// Its own id.
    fn id(&self) -> u64;
}

/// What a process may do while it handles an event.
pub struct Io<'a, M> {
    now: u64,
    me: Pid,
    n: usize,
    /// Which processes are up, and in which partition group each is: the
    /// failure detector is perfect, and a process across a partition looks
    /// down.
    up: &'a [bool],
    group: &'a [u8],
    /// Pairs `(from, to)` whose messages are lost (a cut link).
    cut: &'a std::collections::BTreeSet<(Pid, Pid)>,
    sends: &'a mut Vec<(Pid, M)>,
    timers: &'a mut Vec<(u64, u64)>,
}

impl<M> Io<'_, M> {
    /// The current time, in time units.
    pub fn now(&self) -> u64 {
        self.now
    }

    /// This process's index.
    pub fn me(&self) -> Pid {
        self.me
    }

    /// How many processes there are (live or not).
    pub fn n(&self) -> usize {
        self.n
    }

    /// Sends `msg` to `to`.
    pub fn send(&mut self, to: Pid, msg: M) {
        self.sends.push((to, msg));
    }

    /// Fires [`Process::timeout`] with `timer` after `after` time units.
    pub fn set_timer(&mut self, after: u64, timer: u64) {
        self.timers.push((after, timer));
    }

    /// Whether the failure detector believes `pid` is up: it is, on this
    /// side of any partition, and the link to it is not cut.
    pub fn believed_up(&self, pid: Pid) -> bool {
        self.up[pid]
            && self.group[pid] == self.group[self.me]
            && !self.cut.contains(&(self.me, pid))
    }
}
