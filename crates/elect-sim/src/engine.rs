//! The event loop: a priority queue of deliveries, timers, crashes and
//! partitions, ordered by time and then by the order they were scheduled,
//! so a run is a function of its processes and its seed.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

use super::trace::Delivery;
use crate::process::{Io, Message, Pid, Process};

/// How long a message takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delay {
    /// Always this many time units (1: the textbooks' message transmission
    /// time).
    Fixed(u64),
    /// Uniformly from `min` to `max` time units, both included.
    Uniform {
        /// Shortest.
        min: u64,
        /// Longest.
        max: u64,
    },
}

/// How a simulation runs.
#[derive(Clone, Debug)]
pub struct Config {
    /// Seeds every random choice (delays, drops).
    pub seed: u64,
    /// The delay model.
    pub delay: Delay,
    /// The probability that a message is lost.
    pub drop_rate: f64,
    /// Keep a line per message (memory grows with the run).
    pub trace: bool,
    /// Stop at this time even if events remain (algorithms with timers
    /// that never settle, e.g. bully under false suspicion).
    pub until: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            seed: 1,
            delay: Delay::Fixed(1),
            drop_rate: 0.0,
            trace: false,
            until: 1_000_000,
        }
    }
}

/// What a run counted.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stats {
    /// Messages sent, lost ones included.
    pub messages: u64,
    /// Messages sent, by kind.
    pub by_kind: BTreeMap<&'static str, u64>,
    /// When the last delivered message arrived.
    pub completion: u64,
    /// How often a process took leadership (came to believe it leads),
    /// while [`Sim::track_leader`] was on: elections, re-elections
    /// included.
    pub leader_changes: u64,
}

/// Who believes what at the end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// Ids of live processes that believe they lead.
    pub leaders: Vec<u64>,
    /// Whether every live process names the same leader.
    pub agreed: bool,
    /// Whether more than one process believes it leads.
    pub split_brain: bool,
}

enum Event<M> {
    Deliver {
        from: Pid,
        to: Pid,
        msg: M,
    },
    Timer {
        pid: Pid,
        timer: u64,
        incarnation: u64,
    },
    Crash(Pid),
    Partition(Vec<u8>),
    Suspect {
        observer: Pid,
        suspected: Pid,
    },
}

struct Scheduled<M> {
    at: u64,
    seq: u64,
    event: Event<M>,
}

impl<M> Scheduled<M> {
    /// At one instant: the world changes first (crashes, partitions), then
    /// messages arrive, then timers fire, so a reply arriving exactly at
    /// its deadline (a round trip of zero processing time) is in time.
    fn key(&self) -> (u64, u8, u64) {
        let class = match self.event {
            Event::Crash(_) | Event::Partition(_) | Event::Suspect { .. } => 0,
            Event::Deliver { .. } => 1,
            Event::Timer { .. } => 2,
        };
        (self.at, class, self.seq)
    }
}

impl<M> PartialEq for Scheduled<M> {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}
impl<M> Eq for Scheduled<M> {}
impl<M> PartialOrd for Scheduled<M> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<M> Ord for Scheduled<M> {
    /// Earliest first (the heap is a max-heap).
    fn cmp(&self, other: &Self) -> Ordering {
        other.key().cmp(&self.key())
    }
}

/// A simulation of processes `P`.
pub struct Sim<P: Process> {
    procs: Vec<P>,
    up: Vec<bool>,
    /// A process's incarnation: timers of an earlier one are ignored.
    incarnation: Vec<u64>,
    /// Partition group of each process: messages cross no group boundary.
    group: Vec<u8>,
    /// Links cut one way, `(from, to)`: finer than partitions.
    cut: BTreeSet<(Pid, Pid)>,
    now: u64,
    seq: u64,
    queue: BinaryHeap<Scheduled<P::Msg>>,
    rng: u64,
    cfg: Config,
    stats: Stats,
    trace: Vec<Delivery>,
    started: bool,
    /// Who believed they led after the last event, while tracking.
    tracked: Option<Vec<bool>>,
}

impl<P: Process> Sim<P> {
    /// `procs[i]` is process `i`; all up, one network.
    pub fn new(procs: Vec<P>, cfg: Config) -> Self {
        let n = procs.len();
        Sim {
            procs,
            up: vec![true; n],
            incarnation: vec![0; n],
            group: vec![0; n],
            cut: BTreeSet::new(),
            now: 0,
            seq: 0,
            queue: BinaryHeap::new(),
            rng: cfg.seed ^ 0x9E37_79B9_7F4A_7C15,
            cfg,
            stats: Stats::default(),
            trace: Vec::new(),
            started: false,
            tracked: None,
        }
    }

    /// Crashes `pid` before anything runs (a failed leader).
    pub fn crash_before_start(&mut self, pid: Pid) {
        self.up[pid] = false;
    }

    /// Crashes `pid` at time `at`.
    pub fn crash_at(&mut self, pid: Pid, at: u64) {
        self.schedule(at, Event::Crash(pid));
    }

    /// Splits the network at time `at`: processes talk only within their
    /// group (`groups[i]` is process i's).
    pub fn partition_at(&mut self, at: u64, groups: Vec<u8>) {
        self.schedule(at, Event::Partition(groups));
    }

    /// Crashes `pid` now: it stops, and the timers it set never fire.
    pub fn crash(&mut self, pid: Pid) {
        self.up[pid] = false;
        self.incarnation[pid] += 1;
    }

    /// Brings `pid` back now as `process` (typically rebuilt from what the
    /// crashed one had persisted), and starts it. Messages still in flight
    /// to `pid` reach the new incarnation; its predecessor's timers do not.
    pub fn restart(&mut self, pid: Pid, process: P) {
        self.procs[pid] = process;
        self.up[pid] = true;
        self.incarnation[pid] += 1;
        if self.started {
            self.step(pid, |p, io| p.start(io));
        }
    }

    /// Lets `pid` act on something from outside the algorithm now (an
    /// operator's command, say), through `f`.
    pub fn act(&mut self, pid: Pid, f: impl FnOnce(&mut P, &mut Io<'_, P::Msg>)) {
        self.start();
        self.step(pid, f);
    }

    /// Cuts the link between `a` and `b`, both ways, until [`Sim::heal`].
    pub fn cut(&mut self, a: Pid, b: Pid) {
        self.cut.insert((a, b));
        self.cut.insert((b, a));
    }

    /// Cuts every link of `pid`.
    pub fn isolate(&mut self, pid: Pid) {
        for other in (0..self.procs.len()).filter(|&o| o != pid) {
            self.cut(pid, other);
        }
    }

    /// Heals every cut and partition now.
    pub fn heal(&mut self) {
        self.cut.clear();
        self.group.iter_mut().for_each(|g| *g = 0);
    }

    fn reachable(&self, from: Pid, to: Pid) -> bool {
        self.group[from] == self.group[to] && !self.cut.contains(&(from, to))
    }

    /// From now on, count each time a process takes leadership (checked
    /// after every event: O(n) each).
    pub fn track_leader(&mut self) {
        self.tracked = Some(self.leading());
    }

    fn leading(&self) -> Vec<bool> {
        (0..self.procs.len())
            .map(|i| self.up[i] && self.procs[i].leader() == Some(self.procs[i].id()))
            .collect()
    }

    /// Loses each message from now on with probability `rate`.
    pub fn set_drop_rate(&mut self, rate: f64) {
        self.cfg.drop_rate = rate;
    }

    /// Delays messages sent from now on by `delay`.
    pub fn set_delay(&mut self, delay: Delay) {
        self.cfg.delay = delay;
    }

    /// Has `observer`'s failure detector suspect `suspected` at time `at`.
    pub fn suspect_at(&mut self, at: u64, observer: Pid, suspected: Pid) {
        self.schedule(
            at,
            Event::Suspect {
                observer,
                suspected,
            },
        );
    }

    fn schedule(&mut self, at: u64, event: Event<P::Msg>) {
        self.seq += 1;
        self.queue.push(Scheduled {
            at,
            seq: self.seq,
            event,
        });
    }

    fn random(&mut self) -> u64 {
        crate::random::splitmix64(&mut self.rng)
    }

    fn delay(&mut self) -> u64 {
        match self.cfg.delay {
            Delay::Fixed(d) => d,
            Delay::Uniform { min, max } => min + self.random() % (max - min + 1),
        }
    }

    /// Lets process `pid` handle one event through `f`, then schedules
    /// what it sent and the timers it set.
    fn step(&mut self, pid: Pid, f: impl FnOnce(&mut P, &mut Io<'_, P::Msg>)) {
        let mut sends = Vec::new();
        let mut timers = Vec::new();
        let mut io = Io {
            now: self.now,
            me: pid,
            n: self.procs.len(),
            up: &self.up,
            group: &self.group,
            cut: &self.cut,
            sends: &mut sends,
            timers: &mut timers,
        };
        f(&mut self.procs[pid], &mut io);
        for (to, msg) in sends {
            self.stats.messages += 1;
            *self.stats.by_kind.entry(msg.kind()).or_default() += 1;
            let lost = self.cfg.drop_rate > 0.0
                && (self.random() as f64 / u64::MAX as f64) < self.cfg.drop_rate;
            if lost {
                continue;
            }
            let at = self.now + self.delay();
            self.schedule(at, Event::Deliver { from: pid, to, msg });
        }
        for (after, timer) in timers {
            let incarnation = self.incarnation[pid];
            self.schedule(
                self.now + after,
                Event::Timer {
                    pid,
                    timer,
                    incarnation,
                },
            );
        }
    }

    /// Starts every live process, then runs until nothing is scheduled or
    /// the time limit.
    pub fn run(&mut self) -> &Stats {
        let until = self.cfg.until;
        self.advance(until, |_| false);
        &self.stats
    }

    /// Runs until every live process names the same leader and exactly one
    /// believes it leads (completion is then that instant), or the time
    /// limit; whether it settled. For algorithms that never fall silent.
    pub fn run_until_settled(&mut self) -> bool {
        self.run_until(|out| out.agreed && out.leaders.len() == 1)
    }

    /// Runs until the outcome satisfies `done` after some event
    /// (completion is then that instant), or the time limit; whether it did.
    pub fn run_until(&mut self, mut done: impl FnMut(&Outcome) -> bool) -> bool {
        let until = self.cfg.until;
        let reached = self.advance(until, |sim| done(&sim.outcome()));
        if reached {
            self.stats.completion = self.now;
        }
        reached
    }

    /// Runs for `units` more time units.
    pub fn run_for(&mut self, units: u64) {
        self.run_to(self.now + units, |_| {});
    }

    /// Runs until time `at`, calling `check` after every event: where
    /// invariants that must hold at every instant are checked.
    pub fn run_to(&mut self, at: u64, mut check: impl FnMut(&Self)) {
        self.advance(at, |sim| {
            check(sim);
            false
        });
        self.now = self.now.max(at);
    }

    /// The current time.
    pub fn now(&self) -> u64 {
        self.now
    }

    /// Starts every live process, once.
    fn start(&mut self) {
        if !self.started {
            self.started = true;
            for pid in 0..self.procs.len() {
                if self.up[pid] {
                    self.step(pid, |p, io| p.start(io));
                }
            }
        }
    }

    /// Processes events up to `until`; stops early, returning true, once
    /// `stop` holds after an event.
    fn advance(&mut self, until: u64, mut stop: impl FnMut(&Self) -> bool) -> bool {
        self.start();
        while let Some(next) = self.queue.pop() {
            if next.at > until {
                self.queue.push(next);
                break;
            }
            self.now = next.at;
            match next.event {
                Event::Deliver { from, to, msg } => {
                    if !self.up[to] || !self.reachable(from, to) {
                        continue;
                    }
                    self.stats.completion = self.now;
                    if self.cfg.trace {
                        self.trace.push(Delivery {
                            at: self.now,
                            from: self.procs[from].id(),
                            to: self.procs[to].id(),
                            message: format!("{msg:?}"),
                        });
                    }
                    self.step(to, |p, io| p.receive(from, msg, io));
                }
                Event::Timer {
                    pid,
                    timer,
                    incarnation,
                } => {
                    if self.up[pid] && self.incarnation[pid] == incarnation {
                        self.step(pid, |p, io| p.timeout(timer, io));
                    }
                }
                Event::Crash(pid) => self.crash(pid),
                Event::Partition(groups) => self.group = groups,
                Event::Suspect {
                    observer,
                    suspected,
                } => {
                    if self.up[observer] {
                        self.step(observer, |p, io| p.suspect(suspected, io));
                    }
                }
            }
            if self.tracked.is_some() {
                let now = self.leading();
                let last = self.tracked.as_ref().expect("tracking");
                let taken = now.iter().zip(last).filter(|(n, l)| **n && !**l).count();
                self.stats.leader_changes += taken as u64;
                self.tracked = Some(now);
            }
            if stop(self) {
                return true;
            }
        }
        false
    }

    /// What was counted so far.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Process `pid`.
    pub fn process(&self, pid: Pid) -> &P {
        &self.procs[pid]
    }

    /// How many processes there are.
    pub fn len(&self) -> usize {
        self.procs.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.procs.is_empty()
    }

    /// Whether `pid` is up.
    pub fn is_up(&self, pid: Pid) -> bool {
        self.up[pid]
    }

    /// Every delivered message, when [`Config::trace`] asked.
    pub fn trace(&self) -> &[Delivery] {
        &self.trace
    }

    /// Who believes what now. With a partition, `agreed` is judged per
    /// side and `leaders` lists every side's.
    pub fn outcome(&self) -> Outcome {
        let live: Vec<&P> = (0..self.procs.len())
            .filter(|&i| self.up[i])
            .map(|i| &self.procs[i])
            .collect();
        let mut leaders: Vec<u64> = live
            .iter()
            .filter(|p| p.leader() == Some(p.id()))
            .map(|p| p.id())
            .collect();
        leaders.sort_unstable();
        let first = live.first().and_then(|p| p.leader());
        let agreed = first.is_some() && live.iter().all(|p| p.leader() == first);
        Outcome {
            split_brain: leaders.len() > 1,
            leaders,
            agreed,
        }
    }
}
