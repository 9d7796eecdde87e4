//! Candidates as users run them: each a process of its own, started again
//! when it fails (as systemd's `Restart=on-failure` would), its lines and
//! its starts and exits recorded.
//!
//! A candidate's slot is shared with the nemesis, which can hold it down
//! (killed or resigned until the fault heals), and with the periodic
//! timer, which starts `run --once` candidates at each period.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use elect_judge::history::LineRecord;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::record::{Log, Recorder};

/// What to start, and how.
#[derive(Clone, Debug)]
pub struct Spec {
    /// The election's key in the history.
    pub election: String,
    /// The candidate's name.
    pub name: String,
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    /// Where its stderr goes.
    pub log: PathBuf,
    /// An elect candidate (it has a watchdog and a command group to hit).
    pub elect: bool,
    /// Started only when asked (a periodic job's timer), not at once.
    pub on_demand: bool,
    /// An elect candidate gated on a health check: the markers that make
    /// its check fail or hang (see [`HealthMarkers`]).
    pub health: Option<HealthMarkers>,
}

/// The files the nemesis creates to make a candidate's health check
/// fail: `sick` (its own check fails), `hang` (its own check hangs until
/// the interval kills it), `all` (every candidate's of its election
/// fails).
#[derive(Clone, Debug)]
pub struct HealthMarkers {
    pub sick: PathBuf,
    pub hang: PathBuf,
    pub all: PathBuf,
}

/// The health check's interval and failures in the soak: an unhealthy
/// leader is seen in 2 s at most.
pub const HEALTH_INTERVAL: &str = "1s";
pub const HEALTH_FAILURES: &str = "2";

impl HealthMarkers {
    /// The markers of candidate `cand` of election `key`, under `dir`.
    pub fn new(dir: &std::path::Path, key: &str, cand: &str) -> HealthMarkers {
        let key = key.replace('/', "-");
        HealthMarkers {
            sick: dir.join(format!("{key}-{cand}.sick")),
            hang: dir.join(format!("{key}-{cand}.hang")),
            all: dir.join(format!("{key}-all.sick")),
        }
    }

    /// The flags that gate a candidate on them.
    fn flags(&self) -> Vec<String> {
        let check = format!(
            "[ -e '{}' ] && exec sleep 3600; [ ! -e '{}' ] && [ ! -e '{}' ]",
            self.hang.display(),
            self.sick.display(),
            self.all.display()
        );
        [
            "--health-cmd",
            &check,
            "--health-interval",
            HEALTH_INTERVAL,
            "--health-failures",
            HEALTH_FAILURES,
        ]
        .map(str::to_owned)
        .into()
    }
}

#[derive(Default)]
struct Slot {
    pid: Option<i32>,
    /// Held down by a fault: not started again until released.
    held: bool,
    /// Asked to start (the periodic timer, or a fault's end).
    wanted: bool,
    stopping: bool,
    starts: usize,
    /// The priority its next start takes (`--priority`, with a failback
    /// delay of two seconds), once a priority change set one.
    priority: Option<u32>,
}

/// A supervised candidate.
#[derive(Clone)]
pub struct Candidate {
    pub spec: Spec,
    slot: Arc<Mutex<Slot>>,
}

impl Candidate {
    /// Starts supervising `spec` (started now unless it is on demand).
    pub fn start(spec: Spec, recorder: Recorder) -> Candidate {
        let slot = Arc::new(Mutex::new(Slot {
            wanted: !spec.on_demand,
            ..Slot::default()
        }));
        let c = Candidate { spec, slot };
        let me = c.clone();
        std::thread::spawn(move || me.supervise(&recorder));
        c
    }

    /// Its process, while it runs.
    pub fn pid(&self) -> Option<i32> {
        self.slot.lock().unwrap().pid
    }

    /// How many times it was started.
    pub fn starts(&self) -> usize {
        self.slot.lock().unwrap().starts
    }

    /// Sends `sig` to its process; whether there was one.
    pub fn signal(&self, sig: Signal) -> bool {
        match self.pid() {
            Some(p) => kill(Pid::from_raw(p), sig).is_ok(),
            None => false,
        }
    }

    /// Sends `sig` to its process group (it leads one of its own).
    pub fn signal_group(&self, sig: Signal) -> bool {
        match self.pid() {
            Some(p) => kill(Pid::from_raw(-p), sig).is_ok(),
            None => false,
        }
    }

    /// Holds it down: its next exit is not followed by a start until
    /// [`Candidate::release`].
    pub fn hold(&self) {
        self.slot.lock().unwrap().held = true;
    }

    /// The priority its next start takes (an elect candidate).
    pub fn set_priority(&self, priority: u32) {
        self.slot.lock().unwrap().priority = Some(priority);
    }

    /// Releases a hold and asks for a start.
    pub fn release(&self) {
        let mut s = self.slot.lock().unwrap();
        s.held = false;
        s.wanted = true;
    }

    /// Asks for a start (a periodic timer), unless it runs.
    pub fn want(&self) {
        let mut s = self.slot.lock().unwrap();
        if s.pid.is_none() {
            s.wanted = true;
        }
    }

    /// Stops supervising: SIGTERM (a clean exit resigns), SIGCONT in case
    /// it is frozen, then SIGKILL after `grace`. Returns once it exited.
    pub fn stop(&self, grace: Duration) {
        self.slot.lock().unwrap().stopping = true;
        self.signal(Signal::SIGTERM);
        self.signal(Signal::SIGCONT);
        let deadline = std::time::Instant::now() + grace;
        while self.pid().is_some() {
            if std::time::Instant::now() > deadline {
                self.signal(Signal::SIGKILL);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts the candidate's process in a group of its own, its stdout
    /// piped, its stderr appended to its log.
    fn spawn(&self, priority: Option<u32>) -> std::io::Result<std::process::Child> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.spec.log);
        let mut cmd = Command::new(&self.spec.argv[0]);
        // A group of its own, as a service has: a terminal's Ctrl-C
        // reaches the soak alone, which stops every candidate itself.
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        // Options before the subcommand: elect takes them there. The
        // failback delay is also the health check's backoff.
        if let Some(priority) = priority {
            cmd.args(["--priority", &priority.to_string()]);
        }
        if let Some(health) = &self.spec.health {
            cmd.args(health.flags());
        }
        if priority.is_some() || self.spec.health.is_some() {
            cmd.args(["--failback-delay", "2s"]);
        }
        cmd.args(&self.spec.argv[1..])
            .envs(self.spec.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log.map_or_else(|_| Stdio::null(), Stdio::from));
        cmd.spawn()
    }

    fn supervise(&self, recorder: &Recorder) {
        let e = self.spec.election.clone();
        let cand = self.spec.name.clone();
        let mut failures = 0u32;
        loop {
            // The start happens under the slot's lock, after the check of
            // `stopping`: a `stop` then either comes first (and nothing is
            // started) or finds the new process's pid and signals it. With
            // the check and the start apart, a restart racing the soak's
            // teardown left a candidate running after the soak ended.
            let mut s = self.slot.lock().unwrap();
            if s.stopping {
                return;
            }
            if s.held || !s.wanted {
                drop(s);
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            let mut child = match self.spawn(s.priority) {
                Ok(c) => c,
                Err(err) => {
                    drop(s);
                    eprintln!("soak: cannot start {cand} of {e}: {err}");
                    std::thread::sleep(Duration::from_secs(1));
                    continue;
                }
            };
            let pid = child.id() as i32;
            s.pid = Some(pid);
            s.starts += 1;
            s.wanted = false;
            drop(s);
            recorder.write(
                Log::Lines,
                &LineRecord::Start {
                    t: recorder.now(),
                    e: e.clone(),
                    cand: cand.clone(),
                    pid,
                },
            );
            let status = wait_recording_lines(&mut child, recorder, &e, &cand);
            let code = status.map_or(-1, |s| {
                use std::os::unix::process::ExitStatusExt;
                s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0))
            });
            recorder.write(
                Log::Lines,
                &LineRecord::Exit {
                    t: recorder.now(),
                    e: e.clone(),
                    cand: cand.clone(),
                    code,
                },
            );
            let mut s = self.slot.lock().unwrap();
            s.pid = None;
            // Restart=on-failure: a failure starts it again (after a short
            // backoff); a clean exit waits to be asked.
            if code != 0 {
                s.wanted = true;
                failures += 1;
            } else {
                failures = 0;
            }
            drop(s);
            if code != 0 {
                std::thread::sleep(Duration::from_millis(200 * u64::from(failures.min(5))));
            }
        }
    }
}

/// Records the process's stdout lines as they come, waits for its exit,
/// and gives its last lines a moment to be recorded.
fn wait_recording_lines(
    child: &mut std::process::Child,
    recorder: &Recorder,
    e: &str,
    cand: &str,
) -> std::io::Result<std::process::ExitStatus> {
    let stdout = child.stdout.take().expect("piped");
    let (r, e2, c2) = (recorder.clone(), e.to_owned(), cand.to_owned());
    let reader = std::thread::spawn(move || {
        for text in BufReader::new(stdout).lines().map_while(Result::ok) {
            r.write(
                Log::Lines,
                &LineRecord::Line {
                    t: r.now(),
                    e: e2.clone(),
                    cand: c2.clone(),
                    text,
                },
            );
        }
    });
    let status = child.wait();
    // Its last lines, before its exit (a descendant holding the
    // pipe open is given a moment, not waited for).
    for _ in 0..25 {
        if reader.is_finished() {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stop that races a start leaves nothing running: the start either
    /// comes first and is stopped, or never happens. Each round asks for a
    /// start and stops at once; the supervisor polls every 20 ms, so some
    /// rounds land the stop between its check and its start.
    #[test]
    fn a_stop_racing_a_start_leaves_nothing_running() {
        let dir = std::env::temp_dir().join(format!("soak-candidate-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let recorder = Recorder::create(&dir).unwrap();
        for round in 0..60 {
            let c = Candidate::start(
                Spec {
                    election: "e".into(),
                    name: format!("c{round}"),
                    argv: vec!["sleep".into(), "30".into()],
                    env: vec![],
                    log: dir.join("log"),
                    elect: false,
                    on_demand: true,
                    health: None,
                },
                recorder.clone(),
            );
            c.want();
            // The stop lands at a different phase of the supervisor's
            // poll in each round, sometimes in the middle of its start.
            std::thread::sleep(Duration::from_micros(round * 331 % 20_000));
            c.stop(Duration::from_secs(5));
            std::thread::sleep(Duration::from_millis(30));
            assert_eq!(c.pid(), None, "round {round}: started after the stop");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
