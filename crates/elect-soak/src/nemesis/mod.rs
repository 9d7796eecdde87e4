//! The nemesis: faults drawn at random from the seed, overlapping in time,
//! each for a random while, within a budget that leaves the service able
//! to recover: at most one member fault per service at a time (a quorum
//! loss, dealt on purpose and said so, takes that whole budget), at most
//! one fault per election's candidates, load on the machine on and off.
//! Every fault kind is dealt once, in a shuffled deck, before kinds are
//! drawn freely, so a short soak still covers them all; a kind the
//! moment refuses (no leader to hit, every election busy) goes back to
//! the bottom of the deck, a few times at most (`Stream::put_back`).
//!
//! Each fault is logged with its kind, target, start and end when it has
//! healed; the log is also the schedule `--schedule` replays.

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use elect_judge::history::{FaultRecord, Micros};
use elect_lab::fault::{Proxy, Traffic};
use elect_lab::{Fault, Lab, Role};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::options::Backend;
use crate::record::{Log, Recorder};
use crate::rng::Rng;
use crate::sampler::Sampler;
use crate::world::BackendWorld;

/// A kind of fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    MemberKill,
    MemberPause,
    MemberStall,
    MemberStallLog,
    MemberCut,
    QuorumLoss,
    RollingRestart,
    Compaction,
    OperatorDelete,
    ParentDelete,
    Load,
    CandidateFreeze,
    CandidateKill,
    CandidateResign,
    WatchdogKill,
    GroupKill,
    CandidateCut,
    CandidateStall,
}

/// What a fault holds while in effect.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Budget {
    Member,
    Candidate,
    Machine,
    /// An instant fault: nothing.
    Instant,
}

impl Kind {
    /// Every kind.
    pub const ALL: [Kind; 18] = [
        Kind::MemberKill,
        Kind::MemberPause,
        Kind::MemberStall,
        Kind::MemberStallLog,
        Kind::MemberCut,
        Kind::QuorumLoss,
        Kind::RollingRestart,
        Kind::Compaction,
        Kind::OperatorDelete,
        Kind::ParentDelete,
        Kind::Load,
        Kind::CandidateFreeze,
        Kind::CandidateKill,
        Kind::CandidateResign,
        Kind::WatchdogKill,
        Kind::GroupKill,
        Kind::CandidateCut,
        Kind::CandidateStall,
    ];

    /// Its name in the history.
    pub fn name(self) -> &'static str {
        match self {
            Kind::MemberKill => "member-kill",
            Kind::MemberPause => "member-pause",
            Kind::MemberStall => "member-stall",
            Kind::MemberStallLog => "member-stall-log",
            Kind::MemberCut => "member-cut",
            Kind::QuorumLoss => "quorum-loss",
            Kind::RollingRestart => "rolling-restart",
            Kind::Compaction => "compaction",
            Kind::OperatorDelete => "operator-delete",
            Kind::ParentDelete => "parent-delete",
            Kind::Load => "load",
            Kind::CandidateFreeze => "candidate-freeze",
            Kind::CandidateKill => "candidate-kill",
            Kind::CandidateResign => "candidate-resign",
            Kind::WatchdogKill => "watchdog-kill",
            Kind::GroupKill => "group-kill",
            Kind::CandidateCut => "candidate-cut",
            Kind::CandidateStall => "candidate-stall",
        }
    }

    /// The kind called `name`.
    pub fn parse(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Whether it can be dealt to `backend` (the machine's load is dealt
    /// on its own; cutting members needs containers).
    pub fn applies(self, backend: Backend, containers: bool) -> bool {
        let service = backend != Backend::Raft;
        match self {
            Kind::MemberKill
            | Kind::MemberPause
            | Kind::MemberStall
            | Kind::MemberStallLog
            | Kind::QuorumLoss
            | Kind::RollingRestart
            | Kind::OperatorDelete => service,
            Kind::MemberCut => service && containers,
            Kind::Compaction => backend == Backend::Etcd,
            Kind::ParentDelete => backend == Backend::Zk,
            Kind::Load => false,
            Kind::CandidateStall => backend == Backend::Raft,
            Kind::CandidateFreeze
            | Kind::CandidateKill
            | Kind::CandidateResign
            | Kind::WatchdogKill
            | Kind::GroupKill
            | Kind::CandidateCut => true,
        }
    }

    fn budget(self) -> Budget {
        match self {
            Kind::MemberKill
            | Kind::MemberPause
            | Kind::MemberStall
            | Kind::MemberStallLog
            | Kind::MemberCut
            | Kind::QuorumLoss
            | Kind::RollingRestart => Budget::Member,
            Kind::Compaction | Kind::OperatorDelete | Kind::ParentDelete => Budget::Instant,
            Kind::WatchdogKill | Kind::GroupKill => Budget::Instant,
            Kind::Load => Budget::Machine,
            Kind::CandidateFreeze
            | Kind::CandidateKill
            | Kind::CandidateResign
            | Kind::CandidateCut
            | Kind::CandidateStall => Budget::Candidate,
        }
    }

    /// How long it lasts, drawn: member faults up to three TTLs, a quorum
    /// loss up to two, candidate faults up to three, load 5 to 30 s.
    fn duration(self, ttl: Duration, rng: &mut Rng) -> Duration {
        let ttl = ttl.as_millis() as u64;
        let ms = match self.budget() {
            Budget::Instant => 0,
            Budget::Machine => rng.between(5_000, 30_000),
            _ if self == Kind::QuorumLoss => rng.between(500, 2 * ttl),
            Budget::Member => rng.between(500, 3 * ttl),
            Budget::Candidate => rng.between(200, 3 * ttl),
        };
        Duration::from_millis(ms)
    }
}

/// How a fault in effect is healed.
enum Heal {
    Members(Vec<(String, Fault)>),
    Release(String, String),
    Resume(i32),
    ResumeGroup(i32),
    Uncut(Vec<Arc<Proxy>>),
    Unstall(u32),
    LoadOff(u32),
    Rolling(std::thread::JoinHandle<()>),
}

struct Active {
    record: FaultRecord,
    heal_at: Micros,
    heal: Heal,
    budget: Budget,
}

/// Why a candidate fault was not dealt: its budget is taken (not worth
/// reporting).
const BUSY: &str = "every election's candidates are busy";

/// A backend's stream of draws.
struct Stream {
    backend: Backend,
    rng: Rng,
    deck: Vec<Kind>,
    /// How often each kind was put back into the deck (see
    /// [`Stream::put_back`]).
    put_back: BTreeMap<Kind, u8>,
    next_at: Micros,
}

/// How often a kind refused when drawn from the deck goes back into it.
const DECK_RETRIES: u8 = 3;

impl Stream {
    /// A kind drawn from the deck and refused (no leader to hit at that
    /// moment, every election's candidates busy) goes back in at the
    /// bottom, at most [`DECK_RETRIES`] times: a short soak still deals
    /// every kind, and a kind that cannot be dealt at all does not hold
    /// the deck, and so the quiet stretches after it, for ever.
    fn put_back(&mut self, kind: Kind) {
        let tries = self.put_back.entry(kind).or_default();
        if *tries < DECK_RETRIES {
            *tries += 1;
            self.deck.push(kind);
        }
    }
}

/// The nemesis of a soak. One thread deals ([`Nemesis::deal_due`]: a
/// deal can wait on a member or a tool for seconds), another heals
/// ([`Nemesis::heal_due`]: every heal is quick, and comes on time).
pub struct Nemesis {
    recorder: Recorder,
    lab: Option<Arc<Mutex<Lab>>>,
    containers: bool,
    load_dir: std::path::PathBuf,
    draws: Mutex<Draws>,
    ledger: Mutex<Ledger>,
}

/// What the dealing thread draws from.
struct Draws {
    streams: Vec<Stream>,
    machine: Rng,
    machine_next: Micros,
    /// Faults to replay, latest first (`--schedule`).
    replay: Option<Vec<FaultRecord>>,
}

/// The faults in effect, healed, and refused.
#[derive(Default)]
struct Ledger {
    active: Vec<Active>,
    dealt: Vec<FaultRecord>,
    refused: BTreeMap<String, usize>,
}

impl Nemesis {
    /// A nemesis drawing from `seed` for `backends`, or replaying
    /// `replay`.
    pub fn new(
        seed: u64,
        backends: &[Backend],
        lab: Option<Arc<Mutex<Lab>>>,
        containers: bool,
        recorder: Recorder,
        replay: Option<Vec<FaultRecord>>,
    ) -> Nemesis {
        let streams = backends
            .iter()
            .map(|b| {
                let mut rng = Rng::new(seed, *b as u64 + 1);
                let mut deck: Vec<Kind> = Kind::ALL
                    .into_iter()
                    .filter(|k| k.applies(*b, containers))
                    .collect();
                rng.shuffle(&mut deck);
                // The first fault comes once candidates have had time to
                // elect a leader.
                Stream {
                    backend: *b,
                    rng,
                    deck,
                    put_back: BTreeMap::new(),
                    next_at: 5_000_000,
                }
            })
            .collect();
        Nemesis {
            load_dir: recorder.dir().join("load"),
            recorder,
            lab,
            containers,
            draws: Mutex::new(Draws {
                streams,
                machine: Rng::new(seed, 99),
                machine_next: 8_000_000,
                replay: replay.map(|mut r| {
                    r.sort_by_key(|f| f.start);
                    r.reverse();
                    r
                }),
            }),
            ledger: Mutex::new(Ledger::default()),
        }
    }

    /// Faults in effect now.
    pub fn in_effect(&self) -> usize {
        self.ledger.lock().unwrap().active.len()
    }

    /// Every fault that has healed, in the order it healed.
    pub fn dealt(&self) -> Vec<FaultRecord> {
        self.ledger.lock().unwrap().dealt.clone()
    }

    /// Faults that could not be dealt, by why, for the report.
    pub fn refused(&self) -> BTreeMap<String, usize> {
        self.ledger.lock().unwrap().refused.clone()
    }

    /// Deals what is due (the dealing thread's step). `quiet_after` is the
    /// instant after which nothing new is dealt, and by which every fault
    /// heals: the soak's end nears, and the last heal is judged too.
    pub fn deal_due(&self, worlds: &[BackendWorld], sampler: &Sampler, quiet_after: Micros) {
        let now = self.recorder.now();
        if now >= quiet_after {
            return;
        }
        let mut draws = self.draws.lock().unwrap();
        if draws.replay.is_some() {
            self.replay_due(&mut draws, now, worlds, sampler, quiet_after);
            return;
        }
        for i in 0..draws.streams.len() {
            if now < draws.streams[i].next_at {
                continue;
            }
            let backend = draws.streams[i].backend;
            let Some(world) = worlds.iter().find(|w| w.backend == backend) else {
                continue;
            };
            let stream = &mut draws.streams[i];
            if let Some((kind, from_deck)) = self.draw(stream) {
                let duration = kind.duration(world.ttl, &mut stream.rng);
                let dealt = self.deal(
                    kind,
                    world,
                    None,
                    duration,
                    sampler,
                    &mut stream.rng,
                    quiet_after,
                );
                if !dealt && from_deck {
                    stream.put_back(kind);
                }
            }
            // Now and then (once the deck is dealt) a quiet stretch, long
            // enough to judge liveness.
            let pause = if stream.deck.is_empty() && stream.rng.chance(0.25) {
                let bound = crate::world::liveness_bound(world.ttl).as_millis() as u64;
                stream.rng.between(bound, 2 * bound)
            } else {
                stream.rng.between(300, 2_500)
            };
            stream.next_at = self.recorder.now() + pause * 1000;
        }
        if now >= draws.machine_next && !self.busy(Budget::Machine, None) {
            let duration = Kind::Load.duration(Duration::ZERO, &mut draws.machine);
            self.deal_load(duration, quiet_after);
            let rest = draws.machine.between(10_000, 60_000);
            draws.machine_next = now + duration.as_micros() as u64 + rest * 1000;
        }
    }

    fn replay_due(
        &self,
        draws: &mut Draws,
        now: Micros,
        worlds: &[BackendWorld],
        sampler: &Sampler,
        quiet_after: Micros,
    ) {
        let replay = draws.replay.as_mut().expect("replaying");
        let mut due = Vec::new();
        while replay.last().is_some_and(|f| f.start <= now) {
            due.push(replay.pop().unwrap());
        }
        for f in due {
            let Some(kind) = Kind::parse(&f.kind) else {
                continue;
            };
            let duration = Duration::from_micros(f.end.saturating_sub(f.start));
            if kind == Kind::Load {
                self.deal_load(duration, quiet_after);
                continue;
            }
            let Some(world) = worlds.iter().find(|w| w.backend.name() == f.backend) else {
                continue;
            };
            let mut rng = Rng::new(f.start, 7);
            let target = Target {
                name: f.target.clone(),
                election: f.election.clone(),
            };
            self.deal(
                kind,
                world,
                Some(target),
                duration,
                sampler,
                &mut rng,
                quiet_after,
            );
        }
    }

    /// The next kind for `stream` whose budget is free, and whether it
    /// came from the deck: the deck first.
    fn draw(&self, stream: &mut Stream) -> Option<(Kind, bool)> {
        let backend = stream.backend;
        if let Some(pos) = stream
            .deck
            .iter()
            .position(|k| !self.busy(k.budget(), Some(backend)))
        {
            return Some((stream.deck.remove(pos), true));
        }
        if !stream.deck.is_empty() {
            return None;
        }
        let kinds: Vec<Kind> = Kind::ALL
            .into_iter()
            .filter(|k| k.applies(backend, self.containers))
            .filter(|k| !self.busy(k.budget(), Some(backend)))
            .collect();
        (!kinds.is_empty()).then(|| (*stream.rng.pick(&kinds), false))
    }

    fn busy(&self, budget: Budget, backend: Option<Backend>) -> bool {
        let ledger = self.ledger.lock().unwrap();
        match budget {
            Budget::Instant | Budget::Candidate => false,
            Budget::Machine => ledger.active.iter().any(|a| a.budget == Budget::Machine),
            Budget::Member => ledger.active.iter().any(|a| {
                a.budget == Budget::Member
                    && Some(a.record.backend.as_str()) == backend.map(Backend::name)
            }),
        }
    }

    /// Whether a candidate of election `key` is already hit by a fault.
    fn candidate_busy(&self, key: &str) -> bool {
        self.ledger
            .lock()
            .unwrap()
            .active
            .iter()
            .any(|a| a.budget == Budget::Candidate && a.record.election.as_deref() == Some(key))
    }

    fn deal_load(&self, duration: Duration, quiet_after: Micros) {
        let now = self.recorder.now();
        match elect_lab::load::start(&self.load_dir) {
            Ok(pid) => self.ledger.lock().unwrap().active.push(Active {
                record: FaultRecord {
                    kind: Kind::Load.name().into(),
                    backend: "machine".into(),
                    target: "machine".into(),
                    election: None,
                    start: now,
                    end: now,
                    breaks_quorum: false,
                    note: elect_lab::load::STRESS_ARGS.join(" "),
                },
                heal_at: (now + duration.as_micros() as u64).min(quiet_after),
                heal: Heal::LoadOff(pid),
                budget: Budget::Machine,
            }),
            Err(e) => self.refuse(Kind::Load, &e.to_string()),
        }
    }

    fn refuse(&self, kind: Kind, why: &str) {
        if why == BUSY {
            return;
        }
        *self
            .ledger
            .lock()
            .unwrap()
            .refused
            .entry(format!("{}: {why}", kind.name()))
            .or_default() += 1;
    }

    /// Deals `kind` to `world` (at `target` when replaying) for `duration`,
    /// healed by `quiet_after` at the latest. Whether it was dealt (else
    /// it is counted as refused, unless only busy).
    #[allow(clippy::too_many_arguments)]
    fn deal(
        &self,
        kind: Kind,
        world: &BackendWorld,
        target: Option<Target>,
        duration: Duration,
        sampler: &Sampler,
        rng: &mut Rng,
        quiet_after: Micros,
    ) -> bool {
        let start = self.recorder.now();
        let dealt = match kind.budget() {
            Budget::Member => self.deal_member(kind, world, target, rng),
            Budget::Candidate | Budget::Instant if is_candidate_fault(kind) => {
                self.deal_candidate(kind, world, target, sampler, rng)
            }
            _ => self.deal_service(kind, world, target, rng),
        };
        match dealt {
            Ok((target, heal, note)) => {
                let record = FaultRecord {
                    kind: kind.name().into(),
                    backend: world.backend.name().into(),
                    target: target.name,
                    election: target.election,
                    start,
                    end: start,
                    breaks_quorum: kind == Kind::QuorumLoss,
                    note,
                };
                match heal {
                    Some(heal) => self.ledger.lock().unwrap().active.push(Active {
                        record,
                        heal_at: (start + duration.as_micros() as u64).min(quiet_after),
                        heal,
                        budget: kind.budget(),
                    }),
                    None => self.healed(record),
                }
                true
            }
            Err(why) => {
                self.refuse(kind, &why);
                false
            }
        }
    }

    fn healed(&self, mut record: FaultRecord) {
        record.end = self.recorder.now().max(record.start);
        self.recorder.write(Log::Faults, &record);
        self.ledger.lock().unwrap().dealt.push(record);
    }

    /// Heals the faults whose time is up (the healing thread's step).
    pub fn heal_due(&self, worlds: &[BackendWorld]) {
        let now = self.recorder.now();
        let due: Vec<Active> = {
            let mut ledger = self.ledger.lock().unwrap();
            let (due, rest) =
                std::mem::take(&mut ledger.active)
                    .into_iter()
                    .partition(|a| match &a.heal {
                        Heal::Rolling(h) => h.is_finished(),
                        _ => a.heal_at <= now,
                    });
            ledger.active = rest;
            due
        };
        for a in due {
            self.heal(a.heal, worlds);
            self.healed(a.record);
        }
    }

    /// Heals every fault in effect (the end of the soak, or Ctrl-C), once
    /// nothing deals any more.
    pub fn heal_all(&self, worlds: &[BackendWorld]) {
        let all = std::mem::take(&mut self.ledger.lock().unwrap().active);
        for a in all {
            self.heal(a.heal, worlds);
            self.healed(a.record);
        }
    }

    fn heal(&self, heal: Heal, worlds: &[BackendWorld]) {
        match heal {
            Heal::Members(list) => {
                if let Some(lab) = &self.lab {
                    for (member, fault) in list {
                        let _ = lab.lock().unwrap().fault(fault, &member);
                    }
                }
            }
            Heal::Release(key, cand) => {
                if let Some(c) = worlds.iter().find_map(|w| w.candidate(&key, &cand)) {
                    c.release();
                }
            }
            Heal::Resume(pid) => {
                let _ = kill(Pid::from_raw(pid), Signal::SIGCONT);
            }
            Heal::ResumeGroup(group) => {
                let _ = kill(Pid::from_raw(-group), Signal::SIGCONT);
            }
            Heal::Uncut(proxies) => proxies.iter().for_each(|p| p.set(Traffic::Pass)),
            Heal::Unstall(tracer) => elect_lab::stall::release_syncs(tracer),
            Heal::LoadOff(pid) => elect_lab::load::stop(pid),
            Heal::Rolling(h) => {
                let _ = h.join();
            }
        }
    }

    fn deal_member(
        &self,
        kind: Kind,
        world: &BackendWorld,
        target: Option<Target>,
        rng: &mut Rng,
    ) -> Result<(Target, Option<Heal>, String), String> {
        let lab = self.lab.clone().ok_or("no lab")?;
        let role = match world.backend {
            Backend::Etcd => Role::Etcd,
            _ => Role::Zk,
        };
        let clients: Vec<(String, String)> = {
            let lab = lab.lock().unwrap();
            lab.members()
                .iter()
                .filter(|m| m.role == role)
                .map(|m| (m.name.clone(), m.health_address().to_owned()))
                .collect()
        };
        if kind == Kind::RollingRestart {
            let lab2 = lab.clone();
            let members = clients.clone();
            let handle = std::thread::spawn(move || rolling_restart(&lab2, role, &members));
            let names: Vec<&str> = clients.iter().map(|(n, _)| n.as_str()).collect();
            return Ok((
                Target::plain(&names.join(",")),
                Some(Heal::Rolling(handle)),
                String::new(),
            ));
        }
        // The service's own leader, on purpose, half of the time.
        let (names, note) = match &target {
            Some(t) => (
                t.name.split(',').map(str::to_owned).collect::<Vec<_>>(),
                String::new(),
            ),
            None => {
                let leader = clients
                    .iter()
                    .find(|(_, c)| elect_lab::is_service_leader(role, c))
                    .map(|(n, _)| n.clone());
                let mut order: Vec<String> = clients.iter().map(|(n, _)| n.clone()).collect();
                rng.shuffle(&mut order);
                let mut note = String::new();
                if let Some(l) = leader
                    && rng.chance(0.5)
                {
                    order.retain(|n| *n != l);
                    order.insert(0, l);
                    note = "it led the service".into();
                }
                let n = if kind == Kind::QuorumLoss { 2 } else { 1 };
                (order.into_iter().take(n).collect(), note)
            }
        };
        let (fault, undo) = match kind {
            Kind::MemberKill => (Fault::Kill, Fault::Restart),
            Kind::MemberPause | Kind::QuorumLoss => (Fault::Pause, Fault::Resume),
            Kind::MemberStall => (Fault::Stall, Fault::Unstall),
            Kind::MemberStallLog => (Fault::StallLog, Fault::Unstall),
            Kind::MemberCut => (Fault::Cut, Fault::Heal),
            _ => unreachable!("not a member fault"),
        };
        let mut undone: Vec<(String, Fault)> = Vec::new();
        for name in &names {
            // The lab's lock is released before the undo below takes it
            // again: a guard in the `if let` itself would live through its
            // block, and the undo would wait on it forever (seed 4107: a
            // quorum loss whose second member refused the fault stopped
            // the nemesis with the first member paused).
            let dealt = lab.lock().unwrap().fault(fault, name);
            if let Err(e) = dealt {
                // Undo what was dealt of it.
                for (n, f) in &undone {
                    let _ = lab.lock().unwrap().fault(*f, n);
                }
                return Err(e.to_string());
            }
            undone.push((name.clone(), undo));
        }
        Ok((
            Target::plain(&names.join(",")),
            Some(Heal::Members(undone)),
            note,
        ))
    }

    fn deal_service(
        &self,
        kind: Kind,
        world: &BackendWorld,
        target: Option<Target>,
        rng: &mut Rng,
    ) -> Result<(Target, Option<Heal>, String), String> {
        match kind {
            // An attempt that fails partway may have done part of its work
            // (compacted, deleted some znodes): it is recorded all the same,
            // saying how it ended, so the judge knows it happened.
            Kind::Compaction => {
                let note = match compact(&world.endpoints) {
                    Ok(()) => "compact, then defrag each member".to_owned(),
                    Err(e) => format!("compact, then defrag each member; failed partway: {e}"),
                };
                Ok((Target::plain("every member"), None, note))
            }
            Kind::OperatorDelete | Kind::ParentDelete => {
                let election = match target.and_then(|t| t.election) {
                    Some(key) => world.election(&key).ok_or("no such election")?,
                    None => {
                        let choices: Vec<_> = world
                            .elections
                            .iter()
                            .filter(|e| e.meta.period_ms.is_none())
                            .collect();
                        // elect's own election two times in three.
                        if rng.chance(0.66) {
                            choices[0]
                        } else {
                            *rng.pick(&choices)
                        }
                    }
                };
                let deleted = if kind == Kind::ParentDelete {
                    zk_delete_all(&world.endpoints, &election.name)
                } else {
                    delete_leader(world.backend, &world.endpoints, &election.name)
                };
                let (name, note) = match deleted {
                    Ok(name) => (name, String::new()),
                    // Nothing there to delete: nothing happened.
                    Err(e) if e.starts_with("no candidate") => return Err(e),
                    Err(e) => (election.name.clone(), format!("failed partway: {e}")),
                };
                Ok((
                    Target {
                        name,
                        election: Some(election.meta.key.clone()),
                    },
                    None,
                    note,
                ))
            }
            _ => Err("not a service fault".into()),
        }
    }

    fn deal_candidate(
        &self,
        kind: Kind,
        world: &BackendWorld,
        target: Option<Target>,
        sampler: &Sampler,
        rng: &mut Rng,
    ) -> Result<(Target, Option<Heal>, String), String> {
        let (key, cand) = self.pick_candidate(kind, world, target, sampler, rng)?;
        let heal = hit_candidate(kind, world, &key, &cand, sampler)?;
        let t = Target {
            name: cand,
            election: Some(key),
        };
        Ok((t, heal, String::new()))
    }

    /// The election and candidate a candidate fault of `kind` hits: the
    /// `target` a schedule names, or one drawn (the first election more
    /// often; its leader half of the time, always for the faults only a
    /// leader has a target for).
    fn pick_candidate(
        &self,
        kind: Kind,
        world: &BackendWorld,
        target: Option<Target>,
        sampler: &Sampler,
        rng: &mut Rng,
    ) -> Result<(String, String), String> {
        let elect_only = matches!(
            kind,
            Kind::WatchdogKill | Kind::GroupKill | Kind::CandidateStall
        );
        let leaders: Vec<(String, String)> = sampler
            .alive()
            .into_iter()
            .filter(|(_, t)| t.role == "writer")
            .map(|(_, t)| (t.election, t.cand))
            .collect();
        Ok(match target {
            Some(Target {
                name,
                election: Some(key),
            }) => (key, name),
            _ => {
                let elections: Vec<_> = world
                    .elections
                    .iter()
                    .filter(|e| e.meta.period_ms.is_none())
                    .filter(|e| !elect_only || e.meta.contender == "elect")
                    .filter(|e| {
                        kind.budget() != Budget::Candidate || !self.candidate_busy(&e.meta.key)
                    })
                    .collect();
                if elections.is_empty() {
                    // The budget: one fault per election's candidates.
                    return Err(BUSY.into());
                }
                let e = if rng.chance(0.6) {
                    elections[0]
                } else {
                    *rng.pick(&elections)
                };
                let leader = leaders
                    .iter()
                    .find(|(k, _)| *k == e.meta.key)
                    .map(|(_, c)| c.clone());
                // The leader, half of the time (always, for the faults
                // that only a leader has a target for).
                let cand = match leader {
                    Some(l) if elect_only || rng.chance(0.5) => l,
                    _ if elect_only && kind != Kind::CandidateStall => {
                        return Err("no leader to hit".into());
                    }
                    _ => rng.pick(&e.candidates).spec.name.clone(),
                };
                (e.meta.key.clone(), cand)
            }
        })
    }
}

/// Deals candidate fault `kind` to `cand` in election `key`: how to heal
/// it, if it heals.
fn hit_candidate(
    kind: Kind,
    world: &BackendWorld,
    key: &str,
    cand: &str,
    sampler: &Sampler,
) -> Result<Option<Heal>, String> {
    let c = world.candidate(key, cand).ok_or("no such candidate")?;
    let pid = c.pid();
    // A peer's tool runs as a service would, under systemd: a crash or
    // a stop reaches its whole control group (its wrapper, the tool,
    // the writer it started). elect is hit alone: its watchdog and
    // containment are what is tested.
    let writers: Vec<i32> = sampler
        .alive()
        .into_iter()
        .filter(|(_, tag)| tag.election == key && tag.cand == cand)
        .map(|(p, _)| p)
        .collect();
    let whole = |sig: Signal| {
        c.signal_group(sig);
        for w in &writers {
            let _ = kill(Pid::from_raw(*w), sig);
        }
    };
    let heal = match kind {
        Kind::CandidateFreeze if !c.spec.elect => {
            let pid = pid.ok_or("not running")?;
            kill(Pid::from_raw(-pid), Signal::SIGSTOP).map_err(|e| e.to_string())?;
            Some(Heal::ResumeGroup(pid))
        }
        Kind::CandidateFreeze => {
            let pid = pid.ok_or("not running")?;
            kill(Pid::from_raw(pid), Signal::SIGSTOP).map_err(|e| e.to_string())?;
            Some(Heal::Resume(pid))
        }
        Kind::CandidateKill | Kind::CandidateResign => {
            let sig = if kind == Kind::CandidateKill {
                Signal::SIGKILL
            } else {
                Signal::SIGTERM
            };
            c.hold();
            if c.spec.elect {
                c.signal(sig);
            } else {
                whole(sig);
            }
            Some(Heal::Release(key.to_owned(), cand.to_owned()))
        }
        Kind::CandidateCut => {
            let proxies = world.cuts.get(cand).ok_or("no proxies")?.clone();
            proxies.iter().for_each(|p| p.set(Traffic::Blackhole));
            Some(Heal::Uncut(proxies))
        }
        Kind::CandidateStall => {
            let pid = pid.ok_or("not running")?;
            Some(Heal::Unstall(elect_lab::stall::hold_syncs(
                pid as u32, None,
            )?))
        }
        Kind::WatchdogKill => {
            let pid = pid.ok_or("not running")?;
            let watchdog = elect_lab::process::descendants(pid)
                .into_iter()
                .find(|d| cmdline(*d).iter().any(|a| a == "__watchdog"))
                .ok_or("no watchdog (not leading)")?;
            let _ = kill(Pid::from_raw(watchdog), Signal::SIGKILL);
            None
        }
        Kind::GroupKill => {
            let writer = sampler
                .alive()
                .into_iter()
                .find(|(_, tag)| tag.election == key && tag.cand == cand && tag.role == "writer")
                .map(|(p, _)| p)
                .ok_or("no command running")?;
            let group = pgid(writer).ok_or("its command is gone")?;
            let _ = kill(Pid::from_raw(-group), Signal::SIGKILL);
            None
        }
        _ => unreachable!("not a candidate fault"),
    };
    Ok(heal)
}

fn is_candidate_fault(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::CandidateFreeze
            | Kind::CandidateKill
            | Kind::CandidateResign
            | Kind::CandidateCut
            | Kind::CandidateStall
            | Kind::WatchdogKill
            | Kind::GroupKill
    )
}

/// What a fault hit.
#[derive(Clone, Debug)]
struct Target {
    name: String,
    election: Option<String>,
}

impl Target {
    fn plain(name: &str) -> Target {
        Target {
            name: name.to_owned(),
            election: None,
        }
    }
}

/// Kills and restarts each member in turn, each once the service is
/// healthy again (at most 30 s each).
fn rolling_restart(lab: &Mutex<Lab>, role: Role, members: &[(String, String)]) {
    for (name, client) in members {
        let _ = lab.lock().unwrap().fault(Fault::Kill, name);
        std::thread::sleep(Duration::from_millis(300));
        let _ = lab.lock().unwrap().fault(Fault::Restart, name);
        elect_lab::poll(Duration::from_secs(30), || {
            elect_lab::healthy(role, client).then_some(())
        });
    }
}

fn cmdline(pid: i32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .unwrap_or_default()
        .split(|b| *b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

fn pgid(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(2)?
        .parse()
        .ok()
}

/// How long a tool the nemesis or the leftover check runs may take
/// (coreutils' `timeout`, then SIGKILL 2 s later): one stuck call must not
/// hold the dealing thread, and every backend's faults with it.
const TOOL_LIMIT: &str = "20s";

/// `program` run under [`TOOL_LIMIT`].
fn bounded(program: &str) -> Command {
    let mut cmd = Command::new("timeout");
    cmd.args(["--kill-after=2s", TOOL_LIMIT, program])
        .stdin(std::process::Stdio::null());
    cmd
}

/// Why a [`bounded`] tool failed: it ran out of time, or the last line
/// it wrote to stderr.
fn failure(out: &std::process::Output) -> String {
    use std::os::unix::process::ExitStatusExt;
    // `timeout`'s code when it stopped the tool, or its SIGKILL.
    if matches!(out.status.code(), Some(124 | 137)) || out.status.signal() == Some(9) {
        return format!("no answer within {TOOL_LIMIT}");
    }
    let err = String::from_utf8_lossy(&out.stderr);
    err.trim().lines().last().unwrap_or_default().to_owned()
}

/// `etcdctl` (API 3) against `endpoints`; its stdout.
pub fn etcdctl(endpoints: &str, args: &[&str]) -> Result<Vec<u8>, String> {
    let out = bounded("etcdctl")
        .env("ETCDCTL_API", "3")
        .args(["--endpoints", endpoints, "--command-timeout", "5s"])
        .args(args)
        .output()
        .map_err(|e| format!("etcdctl: {e}"))?;
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(format!("etcdctl {}: {}", args.join(" "), failure(&out)))
    }
}

/// A snippet of Python with kazoo connected to `hosts` as `zk`; its stdout.
pub fn kazoo(hosts: &str, code: &str) -> Result<String, String> {
    let script = format!(
        "from kazoo.client import KazooClient\nzk = KazooClient(hosts={hosts:?}, timeout=5)\nzk.start(timeout=5)\ntry:\n{}\nfinally:\n    zk.stop()\n",
        code.lines()
            .map(|l| format!("    {l}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let out = bounded("/usr/bin/python3")
        .arg("-c")
        .arg(script)
        .output()
        .map_err(|e| format!("python3 (kazoo): {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!("kazoo: {}", failure(&out)))
    }
}

fn compact(endpoints: &str) -> Result<(), String> {
    let status = etcdctl(
        endpoints.split(',').next().unwrap_or_default(),
        &["endpoint", "status", "-w", "json"],
    )?;
    let text = String::from_utf8_lossy(&status);
    let revision = text
        .split("\"revision\":")
        .nth(1)
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|r| r.parse::<u64>().ok())
        .ok_or("no revision in etcdctl's status")?;
    etcdctl(endpoints, &["compact", &revision.to_string(), "--physical"])?;
    for member in endpoints.split(',') {
        etcdctl(member, &["defrag"])?;
    }
    Ok(())
}

/// Deletes the leader's key (etcd: the lowest create revision under the
/// election's prefix) or znode (the lowest sequence); its name.
fn delete_leader(backend: Backend, endpoints: &str, election: &str) -> Result<String, String> {
    match backend {
        Backend::Etcd => {
            let prefix = format!("{election}/");
            let out = etcdctl(
                endpoints,
                &[
                    "get",
                    &prefix,
                    "--prefix",
                    "--sort-by=CREATE",
                    "--order=ASCEND",
                    "--limit=1",
                    "--keys-only",
                ],
            )?;
            let key = String::from_utf8_lossy(&out)
                .lines()
                .next()
                .map(str::to_owned)
                .ok_or("no candidate's key")?;
            etcdctl(endpoints, &["del", &key])?;
            Ok(key)
        }
        _ => {
            let code = format!(
                "kids = zk.get_children({election:?})\nkids.sort(key=lambda k: k[-10:])\nif kids:\n    zk.delete({election:?} + '/' + kids[0])\n    print(kids[0])"
            );
            let out = kazoo(endpoints, &code)?;
            let name = out.trim();
            if name.is_empty() {
                return Err("no candidate's znode".into());
            }
            Ok(format!("{election}/{name}"))
        }
    }
}

/// Deletes the election's parent znode and all below it (an operator's
/// `deleteall`).
fn zk_delete_all(endpoints: &str, election: &str) -> Result<String, String> {
    // Candidates create znodes under it meanwhile: an operator's
    // `deleteall` retries until it wins.
    kazoo(
        endpoints,
        &format!(
            "from kazoo.exceptions import NotEmptyError\nfor _ in range(20):\n    try:\n        zk.delete({election:?}, recursive=True)\n        break\n    except NotEmptyError:\n        pass"
        ),
    )?;
    Ok(election.to_owned())
}
