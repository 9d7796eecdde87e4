//! A soak's run: the ensembles and candidates up, the nemesis dealing on
//! one thread while this one heals on time, prints progress, and starts
//! the periodic jobs; then everything healed and stopped, what is left
//! listed, and the history judged.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use elect_judge::history::Meta;
use elect_judge::{History, Judgement};
use elect_lab::Mode;

use crate::nemesis::Nemesis;
use crate::options::{Backend, Error, LINE_SLACK, Options, SAMPLER_PERIOD};
use crate::probe::Probe;
use crate::record::Recorder;
use crate::sampler::Sampler;
use crate::schedule::Schedule;
use crate::store::Store;
use crate::world::{self, BackendWorld, Shared};
use crate::{end, rng};

/// How a soak ended.
pub struct Outcome {
    pub judgement: Judgement,
    /// Where the report is.
    pub report: PathBuf,
}

/// Runs a soak (checked first), writes its history and report into
/// `options.report`, and judges it. Ctrl-C stops it early: everything is
/// torn down and the report of what ran is still written.
///
/// Errors: bad input (nothing started), or the lab could not start.
pub fn run(options: &Options, progress: &mut dyn FnMut(&str)) -> Result<Outcome, Error> {
    options.check()?;
    elect_lab::interrupt::install();
    let dir = &options.report;
    std::fs::create_dir_all(dir)?;
    let history = dir.join("history");
    let _ = std::fs::remove_dir_all(&history);
    let recorder = Recorder::create(&history)?;
    let started_unix_ms = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as u64;
    progress(&announcement(options, &history));
    let curator = curator_for(options, dir)?;
    progress("soak: starting the ensembles");
    let lab = world::lab(options, dir)?;
    let store = Store::start(recorder.clone())?;
    // Told apart from any other soak on the machine.
    let id = format!("{}-{started_unix_ms}", std::process::id());
    let mut sampler = Sampler::start(recorder.clone(), SAMPLER_PERIOD, id.clone());
    let shared = Shared {
        options,
        recorder: &recorder,
        store: &store.dev_tcp,
        curator: curator.as_deref(),
        id: &id,
    };
    let mut worlds = Vec::new();
    for b in &options.backends {
        worlds.push(world::start(*b, lab.as_deref(), &shared)?);
    }
    let probe = probe(&recorder, lab.as_deref(), &worlds);
    let mut meta = meta(options, &worlds, started_unix_ms);
    recorder.write_json("meta.json", &meta)?;
    let nemesis = Nemesis::new(
        options.seed,
        &options.backends,
        lab.clone(),
        world::containers(options.mode),
        recorder.clone(),
        options.replay.clone(),
        options.bin.clone(),
    );

    let end = options.duration.as_micros() as u64;
    let soaking = Soaking {
        recorder: &recorder,
        nemesis: &nemesis,
        worlds: &worlds,
        sampler: &sampler,
        store: &store,
        meta: &meta,
        end,
        quiet_after: quiet_after(&worlds, end),
    };
    let interrupted = soaking.until_end(options.seed, progress);
    meta.ended = recorder.now();
    meta.interrupted = interrupted;
    progress("soak: healing every fault, stopping the candidates");
    nemesis.heal_all(&worlds);
    stop_candidates(&worlds);
    store.flush(&recorder);
    sampler.stop();
    let leftovers = end::leftovers(&worlds, &id);
    recorder.write_json("end.json", &leftovers)?;
    recorder.flush();
    recorder.write_json("meta.json", &meta)?;
    recorder.write_json("schedule.json", &schedule(options, &nemesis))?;
    for (why, n) in &nemesis.refused() {
        progress(&format!(
            "soak: a fault could not be dealt {n} times: {why}"
        ));
    }
    probe.stop();
    if let Some(lab) = lab {
        stop_ensembles(lab, dir, progress);
    }
    let outcome = check(&History::read(&history)?, dir)?;
    Ok(outcome)
}

/// When faults stop: they are healed a liveness bound before the `end`,
/// so the last heal is judged too.
fn quiet_after(worlds: &[BackendWorld], end: u64) -> u64 {
    end.saturating_sub(
        worlds
            .iter()
            .map(|w| world::liveness_bound(w.ttl).as_micros() as u64)
            .max()
            .unwrap_or(0),
    )
}

/// The soak while it runs: what it deals faults to and records.
struct Soaking<'a> {
    recorder: &'a Recorder,
    nemesis: &'a Nemesis,
    worlds: &'a [BackendWorld],
    sampler: &'a Sampler,
    store: &'a Store,
    meta: &'a Meta,
    end: u64,
    quiet_after: u64,
}

impl Soaking<'_> {
    /// Deals faults on a thread of their own and heals them here, runs
    /// the periodic jobs' timer, and says how it goes every 10 s, until
    /// the end or Ctrl-C: whether it was interrupted.
    fn until_end(&self, seed: u64, progress: &mut dyn FnMut(&str)) -> bool {
        let mut timer = PeriodicTimer::new(seed);
        let mut next_progress = 10_000_000;
        let mut silence = NemesisSilence::default();
        let mut interrupted = false;
        let dealing = std::sync::atomic::AtomicBool::new(true);
        std::thread::scope(|scope| {
            // Dealing may wait on a member or a tool for seconds; healing
            // (here) never waits for it.
            scope.spawn(|| {
                while dealing.load(std::sync::atomic::Ordering::SeqCst) {
                    self.nemesis
                        .deal_due(self.worlds, self.sampler, self.quiet_after);
                    std::thread::sleep(Duration::from_millis(20));
                }
            });
            loop {
                let now = self.recorder.now();
                if now >= self.end {
                    break;
                }
                if elect_lab::interrupt::requested() {
                    interrupted = true;
                    progress("soak: interrupted; tearing down and writing the report of what ran");
                    break;
                }
                self.nemesis.heal_due(self.worlds);
                timer.step(self.worlds);
                if now >= next_progress {
                    next_progress += 10_000_000;
                    progress(&progress_line(
                        now,
                        self.nemesis,
                        self.store,
                        self.sampler,
                        self.meta,
                    ));
                    self.recorder.flush();
                    if let Some(warning) = silence.heard(now, self.nemesis, self.quiet_after) {
                        progress(&warning);
                    }
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            dealing.store(false, std::sync::atomic::Ordering::SeqCst);
        });
        interrupted
    }
}

/// The soak's first line: what it runs, and where its history goes.
fn announcement(options: &Options, history: &Path) -> String {
    format!(
        "soak: seed {}, {} on {}, {} candidates{}; history in {}",
        options.seed,
        humantime::format_duration(options.duration),
        options
            .backends
            .iter()
            .map(|b| b.name())
            .collect::<Vec<_>>()
            .join(", "),
        options.candidates,
        if options.peers {
            ", the peers beside elect"
        } else {
            ""
        },
        history.display()
    )
}

/// Curator's driver, compiled, where the peers run beside elect on
/// ZooKeeper.
fn curator_for(options: &Options, dir: &Path) -> Result<Option<PathBuf>, Error> {
    if !(options.peers && options.backends.contains(&Backend::Zk)) {
        return Ok(None);
    }
    elect_lab::peers::compile_curator(&dir.join("curator"))
        .map(Some)
        .map_err(|e| Error::Peer(e.to_string()))
}

/// When the nemesis last dealt or refused anything: a dealing thread that
/// hangs deals nothing, and the soak would go on without faults.
#[derive(Default)]
struct NemesisSilence {
    seen: (usize, usize),
    at: u64,
}

impl NemesisSilence {
    /// What the nemesis has done by `now`: a warning if it has dealt
    /// nothing for [`NEMESIS_SILENT`] while faults are still due.
    fn heard(&mut self, now: u64, nemesis: &Nemesis, quiet_after: u64) -> Option<String> {
        let dealt = (
            nemesis.dealt().len() + nemesis.in_effect(),
            nemesis.refused().values().sum::<usize>(),
        );
        if dealt != self.seen {
            (self.seen, self.at) = (dealt, now);
            return None;
        }
        (now - self.at >= NEMESIS_SILENT && now < quiet_after).then(|| {
            format!(
                "soak: the nemesis has dealt nothing for {}: its thread may hang",
                humantime::format_duration(Duration::from_secs((now - self.at) / 1_000_000))
            )
        })
    }
}

/// What was dealt, to replay it (`--schedule`).
fn schedule(options: &Options, nemesis: &Nemesis) -> Schedule {
    Schedule {
        seed: options.seed,
        backends: options.backends.clone(),
        candidates: options.candidates,
        peers: options.peers,
        duration: options.duration.as_micros() as u64,
        faults: nemesis.dealt(),
    }
}

/// Keeps the members' logs in the report's `members/`, and stops them.
fn stop_ensembles(
    lab: std::sync::Arc<std::sync::Mutex<elect_lab::Lab>>,
    dir: &Path,
    progress: &mut dyn FnMut(&str),
) {
    progress("soak: stopping the ensembles");
    let kept = lab.lock().unwrap().save_logs(&dir.join("members"));
    if let Err(e) = kept {
        progress(&format!("soak: the members' logs could not be kept: {e}"));
    }
    if let Ok(lab) = std::sync::Arc::try_unwrap(lab) {
        let _ = lab.into_inner().unwrap().down();
    }
}

/// How long the nemesis may deal nothing before the progress lines say so:
/// it deals a fault every few seconds.
const NEMESIS_SILENT: u64 = 60_000_000;

/// Starts probing the members, if any: the ZooKeeper members about the
/// znodes of every ZooKeeper election, the etcd members' health.
fn probe(
    recorder: &Recorder,
    lab: Option<&std::sync::Mutex<elect_lab::Lab>>,
    worlds: &[BackendWorld],
) -> Probe {
    let members = |role: elect_lab::Role| -> Vec<(String, String)> {
        lab.map(|lab| {
            lab.lock()
                .unwrap()
                .members()
                .iter()
                .filter(|m| m.role == role)
                .map(|m| (m.name.clone(), m.health_address().to_owned()))
                .collect()
        })
        .unwrap_or_default()
    };
    let elections = worlds
        .iter()
        .filter(|w| w.backend == Backend::Zk)
        .flat_map(|w| w.elections.iter())
        .map(|e| (e.name.clone(), e.meta.key.clone()))
        .collect();
    Probe::start(
        recorder,
        members(elect_lab::Role::Zk),
        members(elect_lab::Role::Etcd),
        elections,
    )
}

/// Judges the history `h` (read whole with `History::read`) and writes
/// the report into `report`.
///
/// Errors: the report cannot be written.
pub fn check(h: &History, report: &Path) -> Result<Outcome, Error> {
    let judgement = elect_judge::judge(h);
    elect_judge::report::write(report, &judgement, h)?;
    Ok(Outcome {
        judgement,
        report: report.to_owned(),
    })
}

/// One progress line: elapsed, faults, leader changes, and what the
/// store and the sampler have seen so far, elect's and the peers' apart:
/// overlaps and tokens out of order (violations, unless the judge finds
/// them within its resolution), and stale writes the store refused (the
/// fence at work; the judge decides at the end whether a writer was
/// stale past its deadline).
fn progress_line(
    now: u64,
    nemesis: &Nemesis,
    store: &Store,
    sampler: &Sampler,
    meta: &Meta,
) -> String {
    let seen = store.seen();
    let overlaps = sampler.overlaps();
    let ours = |key: &str| {
        meta.elections
            .iter()
            .any(|e| e.key == key && e.decides_exit)
    };
    let mut changes = 0;
    let (mut elect, mut peers) = (0, 0);
    let (mut elect_refused, mut peers_refused) = (0, 0);
    for (key, s) in &seen {
        changes += s.leader_changes;
        if ours(key) {
            elect += s.out_of_order;
            elect_refused += s.refused;
        } else {
            peers += s.out_of_order;
            peers_refused += s.refused;
        }
    }
    for (key, n) in &overlaps {
        if ours(key) { elect += n } else { peers += n }
    }
    format!(
        "soak [{}] faults {} ({} in effect), leader changes {changes}, violations so far: elect {elect}, peers {peers} (overlaps seen, tokens out of order); stale writes refused by the fence: elect {elect_refused}, peers {peers_refused}",
        humantime::format_duration(Duration::from_secs(now / 1_000_000)),
        nemesis.dealt().len() + nemesis.in_effect(),
        nemesis.in_effect(),
    )
}

fn meta(options: &Options, worlds: &[BackendWorld], started_unix_ms: u64) -> Meta {
    Meta {
        seed: options.seed,
        started_unix_ms,
        ended: 0,
        interrupted: false,
        mode: match options.mode {
            Mode::Containers => "containers".into(),
            Mode::Processes => "processes".into(),
        },
        sampler_period: SAMPLER_PERIOD.as_micros() as u64,
        line_slack: LINE_SLACK.as_micros() as u64,
        probe_period: crate::probe::PROBE_PERIOD.as_micros() as u64,
        elections: worlds
            .iter()
            .flat_map(|w| w.elections.iter().map(|e| e.meta.clone()))
            .collect(),
        versions: end::versions(),
    }
}

/// Stops every candidate: SIGTERM (a clean exit resigns), SIGKILL after
/// 10 s; all at once, then waits for each.
fn stop_candidates(worlds: &[BackendWorld]) {
    let all: Vec<_> = worlds
        .iter()
        .flat_map(|w| {
            w.elections
                .iter()
                .flat_map(|e| e.candidates.iter().cloned())
        })
        .collect();
    let handles: Vec<_> = all
        .into_iter()
        .map(|c| std::thread::spawn(move || c.stop(Duration::from_secs(10))))
        .collect();
    for h in handles {
        let _ = h.join();
    }
}

/// Starts the periodic candidates at each period, a little apart, as
/// timers on separate hosts would.
struct PeriodicTimer {
    rng: rng::Rng,
    period: u64,
    pending: Vec<(std::time::Instant, usize)>,
}

impl PeriodicTimer {
    fn new(seed: u64) -> PeriodicTimer {
        PeriodicTimer {
            rng: rng::Rng::new(seed, 77),
            period: 0,
            pending: Vec::new(),
        }
    }

    fn step(&mut self, worlds: &[BackendWorld]) {
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs()
            / world::ONCE_PERIOD.as_secs();
        let once: Vec<_> = worlds
            .iter()
            .flat_map(|w| w.elections.iter())
            .filter(|e| e.meta.period_ms.is_some())
            .flat_map(|e| e.candidates.iter())
            .collect();
        if now != self.period {
            self.period = now;
            for i in 0..once.len() {
                let jitter = Duration::from_millis(self.rng.between(0, 1_500));
                self.pending.push((std::time::Instant::now() + jitter, i));
            }
        }
        self.pending.retain(|(at, i)| {
            if *at <= std::time::Instant::now() {
                once[*i].want();
                false
            } else {
                true
            }
        });
    }
}
