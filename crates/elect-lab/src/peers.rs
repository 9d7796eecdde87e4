//! The peers elect is compared with and soaked beside, in one place:
//! `etcdctl elect` (Go's `concurrency.Election`), kazoo's `Election` and
//! Curator's `LeaderLatch` (with its default error policy, and with the
//! session policy). Each is a [`Peer`]: its names, whether it can run
//! here, and its command line, either on its own (it says it leads, as
//! `elect compare` reads it) or wrapping the writer a leader runs (as
//! `elect lab soak` runs it, the way users put work beside these tools).
//!
//! The wrappers follow the soak's protocol: the writer's script is in
//! `$SOAK_WRITE`, the candidate's name in `$SOAK_CAND`; the writer runs in
//! a session of its own with the peer's token as `ELECT_FENCING_TOKEN`.
//! Curator's driver (`LatchDriver.java`, compiled here against Debian's
//! `libcurator-recipes-java` by [`compile_curator`]) does the same when
//! `$SOAK_WRITE` is set.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use elect::Backend;

use crate::error::{Error, Result};

/// Curator's `LeaderLatch` as a participant, compiled at run time.
const LATCH_DRIVER: &str = include_str!("LatchDriver.java");
/// Debian's Curator recipes.
pub const CURATOR_JAR: &str = "/usr/share/java/curator-recipes.jar";
/// The Python that has kazoo: Debian's (a `python3` first on PATH may not).
pub const KAZOO_PYTHON: &str = "/usr/bin/python3";

/// A peer's tool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Peer {
    /// `etcdctl elect` (Go's `concurrency.Election`).
    Etcdctl,
    /// kazoo's `Election` (a lock recipe).
    Kazoo,
    /// Curator's `LeaderLatch` with its default error policy (leadership
    /// given up on SUSPENDED).
    Curator,
    /// Curator's `LeaderLatch` with `SessionConnectionStateErrorPolicy`
    /// (kept through SUSPENDED until LOST).
    CuratorSession,
}

/// How a peer campaigns: where, in which election, for how long a
/// session, with Curator's compiled driver where it is Curator.
#[derive(Clone, Copy, Debug)]
pub struct Campaign<'a> {
    pub endpoints: &'a str,
    pub election: &'a str,
    /// The session's TTL (`etcdctl elect` has no flag for it: 60 s).
    pub ttl: Duration,
    /// Where [`compile_curator`] put the driver's classes.
    pub curator: Option<&'a Path>,
}

/// What a peer does once it leads.
#[derive(Clone, Copy, Debug)]
pub enum Leading<'a> {
    /// It says so, as candidate `id`, and holds leadership.
    Says { id: &'a str },
    /// It runs `$SOAK_WRITE`, fenced with its token, and kills it when
    /// leadership goes (the candidate's name is `$SOAK_CAND`).
    RunsWriter,
}

impl Peer {
    /// Every peer, in the order reports show them.
    pub const ALL: [Peer; 4] = [
        Peer::Etcdctl,
        Peer::Kazoo,
        Peer::Curator,
        Peer::CuratorSession,
    ];

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Peer::Etcdctl => "etcdctl elect",
            Peer::Kazoo => "kazoo",
            Peer::Curator => "curator",
            Peer::CuratorSession => "curator (session policy)",
        }
    }

    /// Its name in keys, paths and file names (no blanks).
    pub fn key(self) -> &'static str {
        match self {
            Peer::Etcdctl => "etcdctl",
            Peer::Kazoo => "kazoo",
            Peer::Curator => "curator",
            Peer::CuratorSession => "curator-session",
        }
    }

    /// The backend it campaigns on.
    pub fn backend(self) -> Backend {
        match self {
            Peer::Etcdctl => Backend::Etcd,
            _ => Backend::Zk,
        }
    }

    /// The peers on `backend`.
    pub fn on(backend: Backend) -> impl Iterator<Item = Peer> {
        Peer::ALL
            .into_iter()
            .filter(move |p| p.backend() == backend)
    }

    /// Whether it can run here; the reason and the fix when not.
    pub fn available(self) -> Result<(), String> {
        let has = |p: &str| crate::which(p).is_some();
        match self {
            Peer::Etcdctl => match crate::EtcdRelease::chosen() {
                Err(e) => Err(e.to_string()),
                Ok(release) if release.dir.is_some() || has("etcdctl") => Ok(()),
                Ok(_) => Err("etcdctl is not installed (apt-get install etcd-client)".into()),
            },
            Peer::Kazoo => {
                let ok = Command::new(KAZOO_PYTHON)
                    .args(["-c", "import kazoo"])
                    .output()
                    .is_ok_and(|o| o.status.success());
                if ok {
                    Ok(())
                } else {
                    Err(format!(
                        "kazoo is not importable by {KAZOO_PYTHON} (apt-get install python3-kazoo)"
                    ))
                }
            }
            Peer::Curator | Peer::CuratorSession if !Path::new(CURATOR_JAR).exists() => Err(
                format!("{CURATOR_JAR} is missing (apt-get install libcurator-recipes-java)"),
            ),
            Peer::Curator | Peer::CuratorSession if !has("javac") => {
                Err("javac is missing (apt-get install default-jdk-headless)".into())
            }
            Peer::Curator | Peer::CuratorSession => Ok(()),
        }
    }

    /// Its command line for `campaign`, doing `leading` once it leads;
    /// [`Peer::command`] adds its environment.
    pub fn argv(self, campaign: &Campaign<'_>, leading: Leading<'_>) -> Vec<String> {
        let Campaign {
            endpoints,
            election,
            ttl,
            curator,
        } = *campaign;
        let s = |x: &str| x.to_owned();
        match (self, leading) {
            (Peer::Etcdctl, Leading::Says { id }) => [
                crate::etcd_release::program("etcdctl")
                    .display()
                    .to_string(),
                s("--endpoints"),
                s(endpoints),
                s("elect"),
            ]
            .into_iter()
            .chain([s(election), s(id)])
            .collect(),
            (Peer::Etcdctl, Leading::RunsWriter) => vec![
                s("bash"),
                s("-c"),
                s(ETCDCTL_WRAPPER),
                s("etcdctl-wrapper"),
                s(endpoints),
                s(election),
                crate::etcd_release::program("etcdctl")
                    .display()
                    .to_string(),
            ],
            (Peer::Kazoo, Leading::Says { id }) => vec![
                s(KAZOO_PYTHON),
                s("-c"),
                format!(
                    "import signal, sys, time\nfrom kazoo.client import KazooClient\n\
                     signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))\n\
                     zk = KazooClient(hosts={endpoints:?}, timeout={})\nzk.start(timeout=15)\n\
                     zk.add_listener(lambda s: print('LOST {id}', flush=True) if s == 'LOST' else None)\n\
                     def lead():\n    print('ELECTED {id}', flush=True)\n    while True: time.sleep(1)\n\
                     try:\n    zk.Election({election:?}, {id:?}).run(lead)\nfinally:\n    zk.stop()\n",
                    ttl.as_secs_f64()
                ),
            ],
            (Peer::Kazoo, Leading::RunsWriter) => vec![
                s(KAZOO_PYTHON),
                s("-c"),
                s(KAZOO_WRAPPER),
                s(endpoints),
                s(election),
                format!("{}", ttl.as_secs_f64()),
            ],
            (Peer::Curator | Peer::CuratorSession, leading) => {
                let classes = curator.expect("Curator's driver compiled before it campaigns");
                let id = match leading {
                    Leading::Says { id } => id,
                    Leading::RunsWriter => "soak",
                };
                let policy = match self {
                    Peer::CuratorSession => "session",
                    _ => "standard",
                };
                vec![
                    s("java"),
                    s("-XX:+UseSerialGC"),
                    s("-XX:TieredStopAtLevel=1"),
                    s("-cp"),
                    format!("{}:{CURATOR_JAR}", classes.display()),
                    s("LatchDriver"),
                    s(endpoints),
                    s(election),
                    s(id),
                    ttl.as_millis().to_string(),
                    s(policy),
                ]
            }
        }
    }

    /// [`Peer::argv`] as a command, with the environment the tool needs.
    pub fn command(self, campaign: &Campaign<'_>, leading: Leading<'_>) -> Command {
        let argv = self.argv(campaign, leading);
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..]);
        if self == Peer::Etcdctl {
            cmd.env("ETCDCTL_API", "3");
        }
        cmd
    }

    /// Whether `line` from candidate `id` says it was elected, as
    /// [`Leading::Says`] prints it.
    pub fn says_elected(self, line: &str, id: &str) -> bool {
        match self {
            // etcdctl prints the key, then the proposal, once elected.
            Peer::Etcdctl => line == id,
            Peer::Kazoo => line == format!("ELECTED {id}"),
            Peer::Curator | Peer::CuratorSession => line == "LEADER",
        }
    }

    /// Whether `line` from candidate `id` says it lost leadership (or, for
    /// kazoo, which never says so, its session). `etcdctl elect` says
    /// nothing: it exits when its session goes.
    pub fn says_lost(self, line: &str, id: &str) -> bool {
        match self {
            Peer::Etcdctl => false,
            Peer::Kazoo => line == format!("LOST {id}"),
            Peer::Curator | Peer::CuratorSession => line == "NOT_LEADER",
        }
    }
}

/// Compiles Curator's driver into `dir`; the directory of its classes.
///
/// # Errors
/// `javac` or Curator's jar is missing ([`Error::Missing`]), or the
/// compilation failed.
pub fn compile_curator(dir: &Path) -> Result<PathBuf> {
    Peer::Curator.available().map_err(|hint| Error::Missing {
        what: "Curator's driver's build".into(),
        hint,
    })?;
    std::fs::create_dir_all(dir)?;
    let source = dir.join("LatchDriver.java");
    std::fs::write(&source, LATCH_DRIVER)?;
    let out = Command::new("javac")
        .args(["-cp", CURATOR_JAR, "-d"])
        .arg(dir)
        .arg(&source)
        .output()?;
    if !out.status.success() {
        return Err(Error::Io(std::io::Error::other(format!(
            "compiling the Curator driver: {}",
            String::from_utf8_lossy(&out.stderr)
        ))));
    }
    Ok(dir.to_owned())
}

/// `etcdctl elect` wrapping the writer, as its users wrap a command: once
/// it prints the key and the proposal, read the key's create revision (the
/// token), start the writer in a session of its own, and kill it when
/// etcdctl exits (its session expired). SIGTERM resigns (etcdctl's own
/// handler) and kills the writer. Args: endpoints, election, the
/// `etcdctl` to run (the chosen release's).
const ETCDCTL_WRAPPER: &str = r#"export ETCDCTL_API=3
w=
coproc ETCD { exec "$3" --endpoints "$1" elect "$2" "$SOAK_CAND" 2>&1; }
epid=$ETCD_PID
trap 'kill -TERM $epid 2>/dev/null; [ -n "$w" ] && kill -KILL -- -$w 2>/dev/null; wait $epid; exit 0' TERM INT
read -r key <&"${ETCD[0]}" || { wait $epid; exit 1; }
read -r _ <&"${ETCD[0]}" || { wait $epid; exit 1; }
rev=$("$3" --endpoints "$1" get "$key" -w json | grep -o '"create_revision":[0-9]*' | cut -d: -f2)
[ -n "$rev" ] || { kill -TERM $epid; wait $epid; exit 1; }
echo "ELECTED $rev"
ELECT_FENCING_TOKEN=$rev setsid bash -c "$SOAK_WRITE" soak-writer &
w=$!
wait $epid
echo "DEMOTED"
kill -KILL -- -$w 2>/dev/null
exit 1"#;

/// kazoo's `Election` wrapping the writer, stopping it on SUSPENDED or
/// LOST as kazoo's documentation advises; the token is the lock znode's
/// creation zxid. Args: hosts, path, session timeout in seconds.
const KAZOO_WRAPPER: &str = r#"import os, signal, subprocess, sys, threading
from kazoo.client import KazooClient
hosts, path, timeout = sys.argv[1], sys.argv[2], float(sys.argv[3])
lost = threading.Event()
writer = None
def on_state(state):
    if state in ("SUSPENDED", "LOST"):
        lost.set()
def stop(*_):
    raise SystemExit(0)
signal.signal(signal.SIGTERM, stop)
zk = KazooClient(hosts=hosts, timeout=timeout)
zk.add_listener(on_state)
def kill_writer():
    global writer
    if writer is not None:
        try:
            os.killpg(writer.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        writer.wait()
        writer = None
try:
    zk.start(timeout=15)
    election = zk.Election(path, os.environ["SOAK_CAND"])
    def lead():
        global writer
        if lost.is_set():
            sys.exit(1)
        czxid = zk.exists(election.lock.path + "/" + election.lock.node).czxid
        print("ELECTED", czxid, flush=True)
        env = dict(os.environ, ELECT_FENCING_TOKEN=str(czxid))
        writer = subprocess.Popen(["bash", "-c", os.environ["SOAK_WRITE"], "soak-writer"],
                                  env=env, start_new_session=True)
        while not lost.wait(0.05):
            pass
        kill_writer()
        print("DEMOTED", flush=True)
        sys.exit(1)
    election.run(lead)
finally:
    kill_writer()
    zk.stop()
    zk.close()
"#;
