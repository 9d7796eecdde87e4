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
//!
//! In parts: the kinds are the judge's ([`FaultKind`], spelled once for
//! the runner and the judge); `deck.rs` draws them; `ledger.rs` keeps what
//! is in effect, its budgets and what was refused; `deal.rs` deals and
//! heals each kind; the outside tools are the soak's (`tools.rs`). This
//! file runs them: a dealing thread and a healing thread.

mod deal;
mod deck;
mod ledger;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use elect_judge::history::{FaultKind, FaultRecord, Micros};
use elect_lab::Lab;

use crate::options::Backend;
use crate::record::{Log, Recorder};
use crate::rng::Rng;
use crate::sampler::Sampler;
use crate::world::BackendWorld;
use deal::{Dealt, Target};
use deck::Stream;
use ledger::{Active, Budget, Heal, Ledger, Refusal, budget};

pub use deck::applies;

/// The nemesis of a soak. One thread deals ([`Nemesis::deal_due`]: a
/// deal can wait on a member or a tool for seconds), another heals
/// ([`Nemesis::heal_due`]: every heal is quick, and comes on time).
pub struct Nemesis {
    recorder: Recorder,
    /// The elect binary, which deals switchovers.
    bin: std::path::PathBuf,
    lab: Option<Arc<Mutex<Lab>>>,
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
        bin: std::path::PathBuf,
    ) -> Nemesis {
        // The first fault comes once candidates have had time to elect a
        // leader.
        let streams = backends
            .iter()
            .map(|b| Stream::new(seed, *b, containers, 5_000_000))
            .collect();
        Nemesis {
            bin,
            load_dir: recorder.dir().join("load"),
            recorder,
            lab,
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
        self.ledger.lock().unwrap().in_effect()
    }

    /// Every fault that has healed, in the order it healed.
    pub fn dealt(&self) -> Vec<FaultRecord> {
        self.ledger.lock().unwrap().dealt().to_vec()
    }

    /// Faults that could not be dealt, by why, for the report.
    pub fn refused(&self) -> BTreeMap<String, usize> {
        self.ledger.lock().unwrap().refused().clone()
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
        for stream in &mut draws.streams {
            if now < stream.next_at {
                continue;
            }
            let Some(world) = worlds.iter().find(|w| w.backend == stream.backend) else {
                continue;
            };
            let backend = stream.backend;
            let free = |b: Budget| !self.ledger.lock().unwrap().busy(b, Some(backend));
            if let Some(draw) = stream.draw(free) {
                let duration = deck::duration(draw.kind, world.ttl, &mut stream.rng);
                let dealing = Dealing {
                    kind: draw.kind,
                    world,
                    target: None,
                    duration,
                    quiet_after,
                };
                let dealt = self.deal(dealing, sampler, &mut stream.rng);
                if !dealt && draw.from_deck {
                    stream.put_back(draw.kind);
                }
            }
            // Now and then (once the deck is dealt) a quiet stretch, long
            // enough to judge liveness.
            let pause = if stream.deck_dealt() && stream.rng.chance(0.25) {
                let bound = crate::world::liveness_bound(world.ttl).as_millis() as u64;
                stream.rng.between(bound, 2 * bound)
            } else {
                stream.rng.between(300, 2_500)
            };
            stream.next_at = self.recorder.now() + pause * 1000;
        }
        let machine_free = !self.ledger.lock().unwrap().busy(Budget::Machine, None);
        if now >= draws.machine_next && machine_free {
            let duration = deck::duration(FaultKind::Load, Duration::ZERO, &mut draws.machine);
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
            let duration = Duration::from_micros(f.end.saturating_sub(f.start));
            if f.kind == FaultKind::Load {
                self.deal_load(duration, quiet_after);
                continue;
            }
            let Some(world) = worlds.iter().find(|w| w.backend.name() == f.backend) else {
                continue;
            };
            let mut rng = Rng::new(f.start, 7);
            let dealing = Dealing {
                kind: f.kind,
                world,
                target: Some(Target {
                    name: f.target.clone(),
                    election: f.election.clone(),
                }),
                duration,
                quiet_after,
            };
            self.deal(dealing, sampler, &mut rng);
        }
    }

    fn deal_load(&self, duration: Duration, quiet_after: Micros) {
        let now = self.recorder.now();
        match elect_lab::load::start(&self.load_dir) {
            Ok(pid) => self.ledger.lock().unwrap().take_effect(Active {
                record: FaultRecord {
                    kind: FaultKind::Load,
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
            Err(e) => {
                let why = Refusal::Failed(e.to_string());
                self.ledger.lock().unwrap().refuse(FaultKind::Load, &why);
            }
        }
    }

    /// Deals what `dealing` says; whether it was dealt (else it is
    /// counted as refused, unless only busy).
    fn deal(&self, dealing: Dealing<'_>, sampler: &Sampler, rng: &mut Rng) -> bool {
        let Dealing {
            kind,
            world,
            target,
            duration,
            quiet_after,
        } = dealing;
        let start = self.recorder.now();
        let dealt = match budget(kind) {
            Budget::Member => match &self.lab {
                Some(lab) => deal::deal_member(lab, kind, world, target, rng),
                None => Err(Refusal::NoTarget("no lab")),
            },
            _ if kind == FaultKind::Switchover => deal::deal_switchover(world, &self.bin, rng),
            Budget::Candidate | Budget::Instant if deal::is_candidate_fault(kind) => {
                let busy = |key: &str| self.ledger.lock().unwrap().candidate_busy(key);
                deal::deal_candidate(kind, world, target, sampler, rng, busy)
            }
            _ => deal::deal_service(kind, world, target, rng),
        };
        match dealt {
            Ok(Dealt { target, heal, note }) => {
                let record = FaultRecord {
                    kind,
                    backend: world.backend.name().into(),
                    target: target.name,
                    election: target.election,
                    start,
                    end: start,
                    breaks_quorum: kind == FaultKind::QuorumLoss,
                    note,
                };
                match heal {
                    Some(heal) => self.ledger.lock().unwrap().take_effect(Active {
                        record,
                        heal_at: (start + duration.as_micros() as u64).min(quiet_after),
                        heal,
                        budget: budget(kind),
                    }),
                    None => self.healed(record),
                }
                true
            }
            Err(why) => {
                self.ledger.lock().unwrap().refuse(kind, &why);
                false
            }
        }
    }

    fn healed(&self, mut record: FaultRecord) {
        record.end = self.recorder.now().max(record.start);
        self.recorder.write(Log::Faults, &record);
        self.ledger.lock().unwrap().healed(record);
    }

    /// Heals the faults whose time is up (the healing thread's step).
    pub fn heal_due(&self, worlds: &[BackendWorld]) {
        let due = self.ledger.lock().unwrap().due(self.recorder.now());
        self.heal(due, worlds);
    }

    /// Heals every fault in effect (the end of the soak, or Ctrl-C), once
    /// nothing deals any more.
    pub fn heal_all(&self, worlds: &[BackendWorld]) {
        let all = self.ledger.lock().unwrap().all();
        self.heal(all, worlds);
    }

    fn heal(&self, faults: Vec<Active>, worlds: &[BackendWorld]) {
        for mut a in faults {
            match a.heal {
                // Its end is its report.
                Heal::Switchover(thread) => {
                    a.record.note = thread.join().unwrap_or_default();
                }
                heal => deal::heal(heal, self.lab.as_deref(), worlds),
            }
            self.healed(a.record);
        }
    }
}

/// One fault to deal: of `kind`, to `world` (at `target` when replaying),
/// for `duration`, healed by `quiet_after` at the latest.
struct Dealing<'a> {
    kind: FaultKind,
    world: &'a BackendWorld,
    target: Option<Target>,
    duration: Duration,
    quiet_after: Micros,
}
