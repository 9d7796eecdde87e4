//! A real 3-member ZooKeeper ensemble (the lab's), with what tests ask of
//! it. tickTime is 200 ms, so the server accepts session timeouts from
//! 400 ms to 4 s and tests fail over quickly.

use std::process::{Command, Output};

use elect_lab::docker::Network;
use elect_lab::{Lab, Member, Role, Spec};

#[allow(unused_imports)]
pub use elect_lab::zk::{TICK, four_letter, is_leader};

pub struct Ensemble {
    lab: Lab,
    /// The connect string, `host:port,...`.
    pub endpoints: String,
}

impl Ensemble {
    pub fn start() -> Ensemble {
        Ensemble::start_with_sync_limit(elect_lab::zk::SYNC_LIMIT)
    }

    /// An ensemble whose ZooKeeper leader drops a silent follower (and
    /// steps down, cut from its quorum) after `sync_limit` ticks.
    pub fn start_with_sync_limit(sync_limit: u32) -> Ensemble {
        let spec = Spec {
            zk_sync_limit: sync_limit,
            ..Spec::new(super::mode(), 0, 3)
        };
        let lab = Lab::up(&spec).unwrap_or_else(|e| panic!("starting ZooKeeper: {e}"));
        let endpoints = lab.endpoints(Role::Zk).expect("ZooKeeper members");
        Ensemble { lab, endpoints }
    }

    pub fn member(&self, i: usize) -> &Member {
        &self.lab.members()[i]
    }

    pub fn member_mut(&mut self, i: usize) -> &mut Member {
        let name = self.lab.members()[i].name.clone();
        self.lab.member_mut(&name).expect("a member")
    }

    /// The ensemble's private network; panics in process mode.
    pub fn network(&self) -> &Network {
        self.lab
            .network()
            .expect("a container-only test in process mode")
    }

    pub fn members(&self) -> impl Iterator<Item = &str> {
        self.lab.members().iter().map(|m| m.client.as_str())
    }

    /// Index of the member serving session `sid` (as `0x...`), from `cons`.
    pub fn member_serving(&self, sid: &str) -> Option<usize> {
        self.members()
            .position(|m| four_letter(m, "cons").contains(&format!("sid={sid}")))
    }

    /// Starts watching the ZooKeeper leader's `dump` for session `sid`
    /// (as `0x...`): the thread returns the last instant the leader still
    /// listed the session in its tracker, a lower bound of the
    /// moment it expired it (polled every 10 ms, for at most `within`).
    ///
    /// Only a leader's own tracker counts as not listing it: a member that
    /// stops leading between `srvr` and `dump` (the one cut off, when it
    /// notices its lost quorum) answers `dump` with "not currently serving
    /// requests", which lists no session and proves no expiry.
    pub fn watch_session(
        &self,
        sid: &str,
        within: std::time::Duration,
    ) -> std::thread::JoinHandle<Option<std::time::Instant>> {
        let members: Vec<String> = self.members().map(str::to_owned).collect();
        let sid = sid.to_owned();
        std::thread::spawn(move || {
            let until = std::time::Instant::now() + within;
            let mut last_seen = None;
            while std::time::Instant::now() < until {
                let asked = std::time::Instant::now();
                if let Some(leader) = members.iter().find(|m| is_leader(m)) {
                    match leader_sessions(&four_letter(leader, "dump")) {
                        Some(sessions) if sessions.contains(&sid) => last_seen = Some(asked),
                        Some(_) if last_seen.is_some() && is_leader(leader) => return last_seen,
                        _ => {}
                    }
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            None
        })
    }

    /// Cuts member `i` off from the other members, both ways, while its
    /// clients still reach it (container mode only).
    pub fn isolate(&self, i: usize) {
        for j in (0..3).filter(|&j| j != i) {
            self.container(i)
                .partition_from(self.container(j))
                .unwrap_or_else(|e| panic!("cutting member {i} from member {j}: {e}"));
        }
    }

    /// Undoes [`isolate`](Self::isolate).
    pub fn rejoin(&self, i: usize) {
        for j in (0..3).filter(|&j| j != i) {
            self.container(i)
                .mend_partition_from(self.container(j))
                .unwrap_or_else(|e| panic!("mending member {i} with member {j}: {e}"));
        }
    }

    fn container(&self, i: usize) -> &elect_lab::docker::Container {
        self.member(i)
            .container()
            .expect("a container-only test in process mode")
    }

    /// Whether member `i` is the ensemble's leader now.
    pub fn leads(&self, i: usize) -> bool {
        is_leader(&self.member(i).client)
    }

    /// Kills member `i` (SIGKILL), as a crash would.
    pub fn kill(&mut self, i: usize) {
        super::MemberExt::kill(self.member_mut(i));
    }

    /// Sends a four-letter word to every member and joins the answers.
    pub fn four_letter_all(&self, word: &str) -> String {
        self.members()
            .map(|m| four_letter(m, word))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Runs a kazoo snippet with `zk` connected; returns its output.
    pub fn kazoo(&self, code: &str) -> Output {
        kazoo(&self.endpoints, None, code)
    }

    /// Children of `path` (empty if it does not exist).
    pub fn children(&self, path: &str) -> Vec<String> {
        children(&self.endpoints, path)
    }

    /// Deletes a znode as an operator would.
    pub fn delete(&self, path: &str) {
        let out = self.kazoo(&format!("zk.delete({path:?})"));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Runs a kazoo snippet with `zk` connected to `hosts`, authenticated
/// with the digest `user:password` if given; returns its output.
pub fn kazoo(hosts: &str, digest: Option<&str>, code: &str) -> Output {
    let auth = match digest {
        Some(d) => format!("[('digest', {d:?})]"),
        None => "None".into(),
    };
    let script = format!(
        "import sys\nfrom kazoo.client import KazooClient\n\
         zk = KazooClient(hosts={hosts:?}, timeout=5, auth_data={auth})\nzk.start(timeout=15)\n{code}\nzk.stop()\n"
    );
    Command::new("/usr/bin/python3")
        .arg("-c")
        .arg(script)
        .output()
        .expect("Debian python3 with python3-kazoo")
}

/// Children of `path` on `hosts`, read without credentials (empty if it
/// does not exist).
pub fn children(hosts: &str, path: &str) -> Vec<String> {
    let out = kazoo(
        hosts,
        None,
        &format!(
            "print('\\n'.join(sorted(zk.get_children({path:?}))) if zk.exists({path:?}) else '')"
        ),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Debian's Curator recipes.
pub const CURATOR: &str = "/usr/share/java/curator-recipes.jar";

/// Compiles the Curator `LeaderLatch` driver (the lab's, `elect_lab::peers`);
/// returns the directory of its classes.
pub fn compile_latch_driver() -> std::path::PathBuf {
    static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let out = std::env::temp_dir().join(format!("elect-curator-{}-{n}", std::process::id()));
    ::elect_lab::peers::compile_curator(&out).expect("compiling LatchDriver.java")
}

/// A Curator `LeaderLatch` participant `id` in `path`, authenticated with
/// the digest `user:password` if given.
pub fn curator_latch(
    classes: &std::path::Path,
    endpoints: &str,
    path: &str,
    id: &str,
    digest: Option<&str>,
) -> super::elect::Proc {
    let mut cmd = Command::new("java");
    cmd.args(["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp"])
        .arg(format!("{}:{CURATOR}", classes.display()))
        .args(["LatchDriver", endpoints, path, id])
        // The tests read who it sees.
        .env("LATCH_SEES", "1");
    if let Some(digest) = digest {
        cmd.env("LATCH_DIGEST", digest);
    }
    super::elect::Proc::spawn(&format!("curator {id}"), cmd)
}

/// The session tracker's part of a `dump` answer (its buckets and the
/// ephemerals, not the open connections: a cut client's stays open), or
/// `None` when the answer is no dump (the member is not serving).
fn leader_sessions(dump: &str) -> Option<&str> {
    let tracked = dump.split_once("SessionTracker dump:")?.1;
    Some(tracked.split("Connections").next().unwrap_or_default())
}
