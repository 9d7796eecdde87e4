//! What an algorithm is to the simulator: a sans-IO [`Process`] that
//! exchanges [`Message`]s through an [`Io`], and how processes are named
//! ([`Pid`]).

/// A process's index in the simulation, `0..n`. Algorithms compare
/// processes by the ids the scenario gave them, not by index.
pub type Pid = usize;

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
    pub(crate) now: u64,
    pub(crate) me: Pid,
    pub(crate) n: usize,
    /// Which processes are up, and in which partition group each is: the
    /// failure detector is perfect, and a process across a partition looks
    /// down.
    pub(crate) up: &'a [bool],
    pub(crate) group: &'a [u8],
    /// Pairs `(from, to)` whose messages are lost (a cut link).
    pub(crate) cut: &'a std::collections::BTreeSet<(Pid, Pid)>,
    pub(crate) sends: &'a mut Vec<(Pid, M)>,
    pub(crate) timers: &'a mut Vec<(u64, u64)>,
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
