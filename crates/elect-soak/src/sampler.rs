//! Which commands are alive and runnable, read from /proc.
//!
//! Every command the soak's candidates run (elect's, and the peers'
//! writers) is `bash -c SCRIPT soak-ROLE`, with `SOAK_ID` (this soak's,
//! so two soaks side by side never see each other's), `SOAK_ELECTION` and
//! `SOAK_CAND` in its environment; daemons it leaves keep all three. The sampler
//! lists /proc every couple of milliseconds, recognises those processes by
//! their command line and environment, and logs each change of state: `run`
//! (alive, not stopped), `stop` (stopped by a signal or a tracer), `gone`.
//! Once a second it logs the largest gap between two of its reads: the
//! resolution of what it saw. It runs at a real-time priority where
//! allowed, so a loaded machine delays it less than what it watches.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use elect_judge::history::{Micros, ProcRecord};

use crate::record::{Log, Recorder};

/// How long a process's command line is read again after it first
/// appears: a fork shows its parent's until it execs.
const YOUNG: Micros = 200_000;

/// The sampler's thread and what it has seen.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    overlaps: Arc<Mutex<HashMap<String, usize>>>,
    thread: Option<std::thread::JoinHandle<()>>,
    live: Arc<Mutex<HashMap<i32, Tag>>>,
}

/// What a recognised process is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tag {
    pub election: String,
    pub cand: String,
    pub role: String,
}

struct Known {
    tag: Option<Tag>,
    first_seen: Micros,
    state: &'static str,
}

impl Sampler {
    /// Starts reading /proc every `period`, for the commands of soak `id`.
    pub fn start(recorder: Recorder, period: Duration, id: String) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let overlaps = Arc::new(Mutex::new(HashMap::new()));
        let live = Arc::new(Mutex::new(HashMap::new()));
        let (s, o, l) = (stop.clone(), overlaps.clone(), live.clone());
        let thread = std::thread::spawn(move || {
            real_time();
            run(&recorder, period, &id, &s, &o, &l);
        });
        Sampler {
            stop,
            overlaps,
            thread: Some(thread),
            live,
        }
    }

    /// Per election, the episodes in which two candidates had runnable
    /// commands for two reads in a row (the judge decides; this is for
    /// progress lines).
    pub fn overlaps(&self) -> HashMap<String, usize> {
        self.overlaps.lock().unwrap().clone()
    }

    /// The recognised processes alive now.
    pub fn alive(&self) -> Vec<(i32, Tag)> {
        self.live
            .lock()
            .unwrap()
            .iter()
            .map(|(p, t)| (*p, t.clone()))
            .collect()
    }

    /// Stops the sampler (after one last read).
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop();
    }
}

/// SCHED_FIFO at the lowest real-time priority for this thread, if allowed.
fn real_time() {
    let param = libc::sched_param { sched_priority: 1 };
    // SAFETY: a plain syscall on this thread (pid 0) with a valid struct.
    unsafe {
        libc::sched_setscheduler(0, libc::SCHED_FIFO, &param);
    }
}

fn run(
    recorder: &Recorder,
    period: Duration,
    id: &str,
    stop: &AtomicBool,
    overlaps: &Mutex<HashMap<String, usize>>,
    live: &Mutex<HashMap<i32, Tag>>,
) {
    let mut known: HashMap<i32, Known> = HashMap::new();
    let mut last = recorder.now();
    let mut tick_at = last + 1_000_000;
    let mut max_gap = 0;
    let mut scans = 0;
    // Per election, the reads in a row at which candidates overlapped.
    let mut overlapping: HashMap<String, u32> = HashMap::new();
    loop {
        let finishing = stop.load(Ordering::SeqCst);
        let now = recorder.now();
        max_gap = max_gap.max(now - last);
        last = now;
        scans += 1;
        scan(recorder, now, id, &mut known);
        count_overlaps(&known, &mut overlapping, overlaps);
        *live.lock().unwrap() = known
            .iter()
            .filter(|(_, k)| k.state != "gone")
            .filter_map(|(p, k)| k.tag.clone().map(|t| (*p, t)))
            .collect();
        if now >= tick_at || finishing {
            recorder.write(
                Log::Procs,
                &ProcRecord::Tick {
                    t: now,
                    max_gap,
                    scans,
                },
            );
            tick_at = now + 1_000_000;
            max_gap = 0;
            scans = 0;
        }
        if finishing {
            return;
        }
        std::thread::sleep(period);
    }
}

/// One read of /proc at `now`: processes new to `known` are tagged while
/// young (ours carry the soak's `id`), and each of ours whose state
/// changed, or that is gone, is logged.
fn scan(recorder: &Recorder, now: Micros, id: &str, known: &mut HashMap<i32, Known>) {
    let mut present = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for entry in dir.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<i32>().ok())
            else {
                continue;
            };
            present.push(pid);
            let k = known.entry(pid).or_insert_with(|| Known {
                tag: None,
                first_seen: now,
                state: "",
            });
            if k.tag.is_none() && now - k.first_seen <= YOUNG {
                k.tag = tag_of(pid, id);
            }
            let Some(tag) = &k.tag else { continue };
            let state = state_of(pid);
            if state != k.state {
                k.state = state;
                log(recorder, now, pid, tag, state);
            }
        }
    }
    present.sort_unstable();
    known.retain(|pid, k| {
        let here = present.binary_search(pid).is_ok();
        if !here
            && let Some(tag) = &k.tag
            && k.state != "gone"
        {
            log(recorder, now, *pid, tag, "gone");
        }
        here
    });
}

/// Live overlap episodes, for progress lines: an election whose
/// candidates' commands ran together at two reads in a row counts once.
fn count_overlaps(
    known: &HashMap<i32, Known>,
    overlapping: &mut HashMap<String, u32>,
    overlaps: &Mutex<HashMap<String, usize>>,
) {
    let mut running: HashMap<&str, Vec<&str>> = HashMap::new();
    for k in known.values().filter(|k| k.state == "run") {
        if let Some(t) = &k.tag {
            let cands = running.entry(&t.election).or_default();
            if !cands.contains(&t.cand.as_str()) {
                cands.push(&t.cand);
            }
        }
    }
    for (e, reads) in overlapping.iter_mut() {
        if running.get(e.as_str()).is_none_or(|c| c.len() < 2) {
            *reads = 0;
        }
    }
    for (e, cands) in &running {
        if cands.len() > 1 {
            let reads = overlapping.entry((*e).to_owned()).or_default();
            *reads += 1;
            if *reads == 2 {
                *overlaps.lock().unwrap().entry((*e).to_owned()).or_default() += 1;
            }
        }
    }
}

fn log(recorder: &Recorder, t: Micros, pid: i32, tag: &Tag, state: &str) {
    recorder.write(
        Log::Procs,
        &ProcRecord::Proc {
            t,
            pid,
            e: tag.election.clone(),
            cand: tag.cand.clone(),
            role: tag.role.clone(),
            state: state.to_owned(),
        },
    );
}

/// `run`, `stop` or `gone`, from /proc/PID/stat.
fn state_of(pid: i32) -> &'static str {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return "gone";
    };
    match stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.trim_start().chars().next())
    {
        Some('T' | 't') => "stop",
        Some('Z' | 'X') | None => "gone",
        Some(_) => "run",
    }
}

/// The tag of a command of soak `id`: `bash -c SCRIPT soak-ROLE` with
/// `SOAK_ID`, `SOAK_ELECTION` and `SOAK_CAND` in its environment.
pub fn tag_of(pid: i32, id: &str) -> Option<Tag> {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let argv: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
    let (Some(prog), Some(flag), Some(name)) = (argv.first(), argv.get(1), argv.get(3)) else {
        return None;
    };
    if !prog.ends_with(b"bash") || *flag != b"-c" {
        return None;
    }
    let role = std::str::from_utf8(name)
        .ok()?
        .strip_prefix("soak-")?
        .to_owned();
    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let var = |name: &str| env_var(&environ, name);
    if var("SOAK_ID")? != id {
        return None;
    }
    Some(Tag {
        election: var("SOAK_ELECTION")?,
        cand: var("SOAK_CAND")?,
        role,
    })
}

/// Variable `name` of a process's environment (`/proc/PID/environ`).
pub fn env_var(environ: &[u8], name: &str) -> Option<String> {
    environ.split(|b| *b == 0).find_map(|kv| {
        let kv = std::str::from_utf8(kv).ok()?;
        kv.strip_prefix(name)?.strip_prefix('=').map(str::to_owned)
    })
}
