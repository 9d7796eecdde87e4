//! Who takes part in a compared election: elect on each backend, and the
//! peers' own tools on the same ensembles. Each contender is spawned as a
//! real process and says `elected` in its own way; [`Contender::elected`]
//! knows which line means it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::Context as _;
use elect::Backend;
use elect_lab::process::{Line, Watched};

/// A candidate started by [`Contender::spawn`].
pub struct Spawned {
    pub proc: Watched,
    /// Where an elect candidate serves `/metrics` (its wake-up count).
    pub metrics: Option<String>,
}

/// Whose code campaigns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Implementation {
    Elect,
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

impl Implementation {
    pub fn name(self) -> &'static str {
        match self {
            Implementation::Elect => "elect",
            Implementation::Etcdctl => "etcdctl elect",
            Implementation::Kazoo => "kazoo",
            Implementation::Curator => "curator",
            Implementation::CuratorSession => "curator (session policy)",
        }
    }
}

/// The metric an elect candidate's `--http` export counts its campaign
/// wake-ups in.
pub const WAKEUPS_METRIC: &str = "elect_backend_wakeups_total";

/// The metric an elect candidate's `--http` export counts the terms it
/// began without a read of its own in.
pub const LED_WITHOUT_READ_METRIC: &str = "elect_backend_led_without_read_total";

/// The Curator baseline's driver, compiled at run time against Debian's
/// libcurator-recipes-java.
const LATCH_DRIVER: &str = include_str!("LatchDriver.java");
const CURATOR_JAR: &str = "/usr/share/java/curator-recipes.jar";
const KAZOO_PYTHON: &str = "/usr/bin/python3";

/// Whether a baseline can run here; the reason and the fix when not.
pub fn baseline_available(imp: Implementation) -> Result<(), String> {
    let has = |p: &str| elect_lab::which(p).is_some();
    match imp {
        Implementation::Elect => Ok(()),
        Implementation::Etcdctl if has("etcdctl") => Ok(()),
        Implementation::Etcdctl => {
            Err("etcdctl is not installed (apt-get install etcd-client)".into())
        }
        Implementation::Kazoo => {
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
        Implementation::Curator | Implementation::CuratorSession
            if !Path::new(CURATOR_JAR).exists() =>
        {
            Err(format!(
                "{CURATOR_JAR} is missing (apt-get install libcurator-recipes-java)"
            ))
        }
        Implementation::Curator | Implementation::CuratorSession if !has("javac") => {
            Err("javac is missing (apt-get install default-jdk-headless)".into())
        }
        Implementation::Curator | Implementation::CuratorSession => Ok(()),
    }
}

/// Compiles the Curator driver into `dir`.
pub fn compile_curator(dir: &Path) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let source = dir.join("LatchDriver.java");
    std::fs::write(&source, LATCH_DRIVER)?;
    let out = Command::new("javac")
        .args(["-cp", CURATOR_JAR, "-d"])
        .arg(dir)
        .arg(&source)
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "compiling the Curator driver: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(dir.to_owned())
}

/// Raft-vote peers for one compared election: ids, and each peer's view
/// of the others' addresses (its own entry is where it listens; the others
/// may be fault proxies dedicated to it, so one peer can be cut off).
#[derive(Clone, Debug)]
pub struct RaftPeers {
    pub ids: Vec<String>,
    /// `--endpoints` per peer.
    pub endpoints: Vec<String>,
    /// Where each peer listens.
    pub addresses: Vec<String>,
    pub dir: PathBuf,
}

/// The credentials of a secured comparison (`--secure`): the lab's for
/// etcd and ZooKeeper, and a CA of its own for the Raft-vote peers compare
/// starts, which issues each peer a certificate naming its id.
pub struct Credentials {
    pub lab: Option<elect_lab::Security>,
    raft_ca: elect_lab::pki::Authority,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("lab", &self.lab)
            .field("raft_ca", &self.raft_ca.ca())
            .finish()
    }
}

impl Credentials {
    pub fn new(lab: Option<elect_lab::Security>, dir: &Path) -> anyhow::Result<Credentials> {
        let raft_ca = elect_lab::pki::Authority::new(dir, "elect compare raft CA")?;
        Ok(Credentials { lab, raft_ca })
    }

    /// elect's flags for candidate `id` on `backend`.
    fn flags(&self, backend: Backend, id: &str) -> anyhow::Result<Vec<String>> {
        let path = |p: &Path| p.display().to_string();
        Ok(match backend {
            Backend::Raft => {
                let issued = self.raft_ca.issue(id, &[id])?;
                vec![
                    "--cacert".into(),
                    path(&self.raft_ca.ca()),
                    "--cert".into(),
                    path(&issued.cert),
                    "--key".into(),
                    path(&issued.key),
                ]
            }
            _ => {
                let s = self
                    .lab
                    .as_ref()
                    .context("a secured lab for etcd and ZooKeeper")?;
                let mut flags = s.tls_flags();
                flags.extend(s.user_flags());
                if backend == Backend::Etcd {
                    // Fault proxies stand between candidates and members;
                    // the members' certificates also name localhost.
                    flags.extend(["--server-name".into(), "localhost".into()]);
                }
                flags
            }
        })
    }
}

/// One implementation on one backend, ready to spawn candidates.
#[derive(Clone, Debug)]
pub struct Contender {
    pub backend: Backend,
    pub imp: Implementation,
    pub ttl: Duration,
    pub bin: PathBuf,
    pub curator_classes: Option<PathBuf>,
    /// With `--secure`: TLS and credentials for every candidate.
    pub credentials: Option<std::sync::Arc<Credentials>>,
}

/// How a candidate campaigns: holding leadership only, or running a command
/// (the fenced store's writer) while it leads.
pub enum Role<'a> {
    Campaign,
    Run(&'a str),
}

impl<'a> Role<'a> {
    /// `Run(script)` when there is one, else `Campaign`.
    pub fn with(script: Option<&'a str>) -> Role<'a> {
        script.map_or(Role::Campaign, Role::Run)
    }
}

impl Contender {
    /// Spawns candidate `id` in `election` against `endpoints` (for Raft,
    /// the peer's own `--endpoints`; `peer_dir` its data directory).
    pub fn spawn(
        &self,
        election: &str,
        id: &str,
        endpoints: &str,
        peer_dir: Option<&Path>,
        role: Role<'_>,
    ) -> anyhow::Result<Spawned> {
        let ttl = humantime::format_duration(self.ttl)
            .to_string()
            .replace(' ', "");
        let mut metrics = None;
        let cmd = match self.imp {
            Implementation::Elect => {
                let mut cmd = Command::new(&self.bin);
                let export = format!("127.0.0.1:{}", elect_lab::host::free_port()?);
                metrics = Some(export.clone());
                cmd.args(["--backend", self.backend.name()])
                    .args(["--endpoints", endpoints, "--election", election])
                    .args(["--id", id, "--ttl", &ttl, "--format", "json"])
                    // Campaign wake-ups are counted in its metrics.
                    .args(["--http", &export])
                    .env("RUST_LOG", "warn");
                if let Some(dir) = peer_dir {
                    cmd.arg("--data-dir").arg(dir);
                }
                if let Some(credentials) = &self.credentials {
                    cmd.args(credentials.flags(self.backend, id)?);
                }
                match role {
                    Role::Campaign => {
                        cmd.arg("campaign");
                    }
                    Role::Run(script) => {
                        cmd.args(["run", "--grace", "0s", "--", "bash", "-c", script]);
                    }
                }
                cmd
            }
            Implementation::Etcdctl => {
                let mut cmd = Command::new("etcdctl");
                cmd.env("ETCDCTL_API", "3")
                    .args(["--endpoints", endpoints, "elect", election, id]);
                cmd
            }
            Implementation::Kazoo => {
                let script = format!(
                    "import signal, sys, time\nfrom kazoo.client import KazooClient\n\
                     signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))\n\
                     zk = KazooClient(hosts={endpoints:?}, timeout={})\nzk.start(timeout=15)\n\
                     zk.add_listener(lambda s: print('LOST {id}', flush=True) if s == 'LOST' else None)\n\
                     def lead():\n    print('ELECTED {id}', flush=True)\n    while True: time.sleep(1)\n\
                     try:\n    zk.Election({election:?}, {id:?}).run(lead)\nfinally:\n    zk.stop()\n",
                    self.ttl.as_secs_f64()
                );
                let mut cmd = Command::new(KAZOO_PYTHON);
                cmd.arg("-c").arg(script);
                cmd
            }
            Implementation::Curator | Implementation::CuratorSession => {
                let classes = self.curator_classes.as_ref().expect("compiled before use");
                let policy = match self.imp {
                    Implementation::CuratorSession => "session",
                    _ => "standard",
                };
                let mut cmd = Command::new("java");
                cmd.args(["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp"])
                    .arg(format!("{}:{CURATOR_JAR}", classes.display()))
                    .args(["LatchDriver", endpoints, election, id])
                    .arg(self.ttl.as_millis().to_string())
                    .arg(policy);
                cmd
            }
        };
        Ok(Spawned {
            proc: Watched::spawn(&format!("{} {id}", self.imp.name()), cmd)?,
            metrics,
        })
    }

    /// Whether `line` from candidate `id` says it was elected.
    pub fn elected(&self, line: &Line, id: &str) -> bool {
        match self.imp {
            Implementation::Elect => line.json().is_some_and(|v| v["event"] == "elected"),
            // etcdctl prints the key, then the proposal, once elected.
            Implementation::Etcdctl => line.text == id,
            Implementation::Kazoo => line.text == format!("ELECTED {id}"),
            Implementation::Curator | Implementation::CuratorSession => line.text == "LEADER",
        }
    }

    /// Whether `line` from candidate `id` says it lost leadership (or, for
    /// kazoo, which never says so, its session). `etcdctl elect` says
    /// nothing: it exits when its session goes.
    pub fn lost(&self, line: &Line, id: &str) -> bool {
        match self.imp {
            Implementation::Elect => line.json().is_some_and(|v| v["event"] == "demoted"),
            Implementation::Etcdctl => false,
            Implementation::Kazoo => line.text == format!("LOST {id}"),
            Implementation::Curator | Implementation::CuratorSession => line.text == "NOT_LEADER",
        }
    }

    /// The name of a fresh election for trial `n` in this implementation's
    /// own layout (ZooKeeper recipes take absolute paths).
    pub fn election(&self, scenario: &str, n: usize) -> String {
        let name = format!(
            "elect-compare-{}-{}-{n}",
            scenario,
            self.imp.name().replace(' ', "-")
        );
        match (self.backend, &self.credentials) {
            (Backend::Zk, _) => format!("/{name}"),
            // The lab's user may only use keys under its prefix.
            (Backend::Etcd, Some(c)) => match &c.lab {
                Some(s) => format!("{}{name}", s.prefix),
                None => name,
            },
            _ => name,
        }
    }

    /// Fencing token from an `elected` line, where the implementation
    /// reports one.
    pub fn token(&self, line: &Line) -> Option<u64> {
        line.json().and_then(|v| v["token"].as_u64())
    }
}
