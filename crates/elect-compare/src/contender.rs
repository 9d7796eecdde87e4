//! Who takes part in a compared election: elect on each backend, and the
//! peers' own tools on the same ensembles. Each contender is spawned as a
//! real process and says `elected` in its own way; [`Contender::elected`]
//! knows which line means it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::Context as _;
use elect::Backend;
use elect_lab::peers::{self, Leading, Peer};
use elect_lab::process::{Line, Watched};

/// A candidate started by [`Contender::spawn`].
pub struct Spawned {
    pub proc: Watched,
    /// Where an elect candidate serves `/metrics` (its wake-up count).
    pub metrics: Option<String>,
}

/// Whose code campaigns: elect, or one of the peers' tools
/// ([`Peer`], the lab's, which the soak runs too).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Implementation {
    Elect,
    Peer(Peer),
}

impl Implementation {
    pub fn name(self) -> &'static str {
        match self {
            Implementation::Elect => "elect",
            Implementation::Peer(peer) => peer.name(),
        }
    }

    /// Whether it can run here; the reason and the fix when not.
    pub fn available(self) -> Result<(), String> {
        match self {
            Implementation::Elect => Ok(()),
            Implementation::Peer(peer) => peer.available(),
        }
    }
}

/// The metric an elect candidate's `--http` export counts its campaign
/// wake-ups in.
pub const WAKEUPS_METRIC: &str = "elect_backend_wakeups_total";

/// The metric an elect candidate's `--http` export counts the terms it
/// began without a read of its own in.
pub const LED_WITHOUT_READ_METRIC: &str = "elect_backend_led_without_read_total";

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
        extra: &[String],
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
                cmd.args(extra);
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
            Implementation::Peer(peer) => {
                let campaign = peers::Campaign {
                    endpoints,
                    election,
                    ttl: self.ttl,
                    curator: self.curator_classes.as_deref(),
                };
                peer.command(&campaign, Leading::Says { id })
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
            Implementation::Peer(peer) => peer.says_elected(&line.text, id),
        }
    }

    /// Whether `line` from candidate `id` says it lost leadership (see
    /// [`Peer::says_lost`] for the peers).
    pub fn lost(&self, line: &Line, id: &str) -> bool {
        match self.imp {
            Implementation::Elect => line.json().is_some_and(|v| v["event"] == "demoted"),
            Implementation::Peer(peer) => peer.says_lost(&line.text, id),
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
