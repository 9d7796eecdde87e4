//! The lab: real etcd clusters and ZooKeeper ensembles to test against,
//! the faults to deal them, and the instruments that judge the outcome.
//!
//! Nothing here mocks a coordination service. [`Lab::up`] starts members
//! from the installed `etcd` and ZooKeeper (Debian's `etcd-server` and
//! `zookeeper`; another etcd release where [`EtcdRelease`] says so) as
//! local processes, each on its own `127.a.b.x` address, or
//! as containers from the `deploy/` images on a private Docker network, each
//! at its own fixed address ([`Mode`]). Members can be killed and started
//! again on their data, paused and resumed, and (containers) cut off the
//! network and healed ([`Fault`]). Candidates can be cut off by the TCP
//! fault [`fault::Proxy`]; the [`fault::FencedStore`] and
//! [`fault::check`] tell whether two leaders' work overlapped and whether a
//! stale leader's write got through.
//!
//! A `Lab` tears everything down when dropped, unless [`Lab::detach`]ed
//! (what `elect lab up` does, saving the state [`Lab::load`] reads back);
//! [`Lab::down`] leaves no process, container, network or directory.
//! `elect compare`, the project's tests and its benchmarks all use it.

pub mod bridge;
pub mod docker;
pub mod error;
pub mod etcd;
pub mod etcd_release;
pub mod fault;
pub mod host;
pub mod http;
pub mod interrupt;
pub mod kinds;
pub mod load;
pub mod member;
pub mod peers;
pub mod pki;
pub mod poll;
pub mod process;
pub mod raft;
pub mod security;
pub mod spec;
pub mod stall;
pub mod stats;
pub mod zk;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use error::INSTALL_HINT;
pub use error::{Error, Result};
pub use etcd_release::EtcdRelease;
pub use host::{loopback_net, raise_fd_limit, which};
pub use http::{http_get, http_request, sum_prometheus};
pub use kinds::{Fault, Mode};
use member::Placement;
pub use member::{Member, Role};
pub use poll::poll;
pub use security::Security;
pub use spec::{ETCD_AUTH_TOKEN_TTL, Spec};

/// A running lab.
#[derive(Debug, Serialize, Deserialize)]
pub struct Lab {
    /// Its id: a prefix of every container and network name.
    pub id: String,
    /// Where members run.
    pub mode: Mode,
    /// Its directory.
    pub dir: PathBuf,
    /// When it started (seconds since the epoch).
    pub started: u64,
    network: Option<docker::Network>,
    members: Vec<Member>,
    /// The credentials of a secured lab.
    #[serde(default)]
    pub security: Option<Security>,
    /// The etcd its etcd members run (`None` for a lab without them).
    #[serde(default)]
    pub etcd_release: Option<EtcdRelease>,
    /// The `stress-ng` of `elect lab load on`, while it runs.
    #[serde(default)]
    load: Option<u32>,
    #[serde(skip)]
    detached: bool,
}

impl Lab {
    /// Starts what `spec` asks for and waits until every member is healthy:
    /// etcd answers `/health` (a leader and a quorum read), ZooKeeper
    /// servers are leader or follower. Whatever was started is torn down
    /// again if that fails.
    pub fn up(spec: &Spec) -> Result<Lab> {
        let id = spec
            .dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| format!("elect-lab-{}", host::unique_id()));
        let etcd_release = (spec.etcd > 0).then(EtcdRelease::chosen).transpose()?;
        if spec.mode == Mode::Processes {
            if spec.etcd > 0 && etcd_release.as_ref().is_some_and(|r| r.version.is_none()) {
                return Err(Error::Missing {
                    what: "etcd".into(),
                    hint: INSTALL_HINT.into(),
                });
            }
            if spec.zk > 0 && (which("java").is_none() || !Path::new(zk::JAR).exists()) {
                return Err(Error::Missing {
                    what: format!("java or {}", zk::JAR),
                    hint: INSTALL_HINT.into(),
                });
            }
        }
        std::fs::create_dir_all(&spec.dir)?;
        raise_fd_limit();
        let mut lab = Lab {
            id: id.clone(),
            mode: spec.mode,
            dir: spec.dir.clone(),
            started: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_secs(),
            network: None,
            members: Vec::new(),
            security: None,
            etcd_release: etcd_release.clone(),
            load: None,
            detached: false,
        };
        let authority = if spec.secure {
            let ca = pki::Authority::new(&spec.dir.join("pki"), &format!("{id} CA"))?;
            lab.security = Some(Security::create(&ca)?);
            Some(ca)
        } else {
            None
        };
        // From here on, dropping `lab` on an error tears down what started.
        let (hosts, net): (Box<dyn Fn(u8) -> String>, _) = match spec.mode {
            Mode::Containers => {
                let network = docker::Network::create(&id, &id)?;
                lab.network = Some(network.clone());
                (Box::new(move |n| network.ip(n)), lab.network.clone())
            }
            Mode::Processes => {
                let prefix = loopback_net();
                (Box::new(move |n| format!("{prefix}.{n}")), None)
            }
        };
        let place = Placement {
            id: id.clone(),
            dir: spec.dir.clone(),
            network: net,
        };
        if let Some(release) = &etcd_release {
            let h: Vec<String> = (0..spec.etcd).map(|i| hosts(11 + i as u8)).collect();
            lab.members.extend(etcd::start(
                &place,
                release,
                &h,
                spec.etcd_timing,
                authority.as_ref().map(|a| (a, spec.etcd_auth_token_ttl)),
            )?);
        }
        if spec.zk > 0 {
            let h: Vec<String> = (0..spec.zk).map(|i| hosts(21 + i as u8)).collect();
            lab.members.extend(zk::start(
                &place,
                &h,
                authority.as_ref(),
                spec.zk_sync_limit,
            )?);
        }
        if spec.raft > 0 {
            let bin = match &spec.elect_bin {
                Some(bin) => bin.clone(),
                None => std::env::current_exe()?,
            };
            let h: Vec<String> = (0..spec.raft).map(|i| hosts(31 + i as u8)).collect();
            lab.members
                .extend(raft::start(&place, &h, &bin, authority.as_ref())?);
        }
        lab.wait_healthy(spec.ready_within)?;
        if let (Some(security), Some(endpoints)) = (&lab.security, lab.endpoints(Role::Etcd)) {
            etcd::enable_auth(&endpoints, security)?;
        }
        Ok(lab)
    }

    fn wait_healthy(&self, within: Duration) -> Result<()> {
        for role in [Role::Etcd, Role::Zk, Role::Raft] {
            let clients: Vec<&str> = self
                .members
                .iter()
                .filter(|m| m.role == role)
                .map(|m| m.health_address())
                .collect();
            if clients.is_empty() {
                continue;
            }
            self.wait_until(
                format!("{} ({})", role.name(), clients.join(",")),
                within,
                || clients.iter().all(|c| healthy(role, c)),
            )?;
        }
        if let (Some(security), Some(endpoints)) = (&self.security, self.endpoints(Role::Zk)) {
            // A JVM's first TLS handshakes can take seconds on a busy
            // machine: they happen here, not in the first client's session.
            self.wait_until(
                format!("ZooKeeper's TLS port ({endpoints})"),
                within,
                || zk::serves_tls(&endpoints, security),
            )?;
        }
        Ok(())
    }

    /// Polls `ready` until it holds; if it does not within `within`, the
    /// logs are kept and the error names `what`.
    fn wait_until(&self, what: String, within: Duration, ready: impl Fn() -> bool) -> Result<()> {
        if poll(within, || ready().then_some(())).is_some() {
            return Ok(());
        }
        if interrupt::requested() {
            return Err(Error::Interrupted);
        }
        self.save_container_logs();
        Err(Error::Unhealthy {
            what,
            within,
            dir: self.dir.display().to_string(),
        })
    }

    /// The members, in start order.
    pub fn members(&self) -> &[Member] {
        &self.members
    }

    /// Member `name` (`etcd-2`, `zk-1`...).
    pub fn member(&self, name: &str) -> Result<&Member> {
        self.members
            .iter()
            .find(|m| m.name == name)
            .ok_or_else(|| self.no_such(name))
    }

    /// Member `name`, to deal it a fault.
    pub fn member_mut(&mut self, name: &str) -> Result<&mut Member> {
        let missing = self.no_such(name);
        self.members
            .iter_mut()
            .find(|m| m.name == name)
            .ok_or(missing)
    }

    fn no_such(&self, name: &str) -> Error {
        Error::NoSuchMember {
            name: name.to_owned(),
            members: self
                .members
                .iter()
                .map(|m| m.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        }
    }

    /// Deals `fault` to member `name`.
    pub fn fault(&mut self, fault: Fault, name: &str) -> Result<()> {
        self.member_mut(name)?.apply(fault)
    }

    /// Puts the machine under load (see [`load`]) or takes it off;
    /// returns whether it was under load before.
    ///
    /// Errors: `stress-ng` cannot be run.
    pub fn set_load(&mut self, on: bool) -> Result<bool> {
        let was = self.load.is_some();
        match (on, self.load) {
            (true, None) => self.load = Some(load::start(&self.dir.join("load"))?),
            (false, Some(pid)) => {
                load::stop(pid);
                self.load = None;
            }
            _ => {}
        }
        Ok(was)
    }

    /// Whether the machine is under the lab's load.
    pub fn loaded(&self) -> bool {
        self.load.is_some()
    }

    /// The client endpoints of the members of `role`, `host:port,...`;
    /// for Raft-vote, `id=host:port,...` as `--endpoints` takes them
    /// (`None` when the lab has none).
    pub fn endpoints(&self, role: Role) -> Option<String> {
        let list: Vec<String> = self
            .members
            .iter()
            .filter(|m| m.role == role)
            .map(|m| match role {
                Role::Raft => format!("{}={}", m.name, m.client),
                _ => m.client.clone(),
            })
            .collect();
        (!list.is_empty()).then(|| list.join(","))
    }

    /// The private network, in container mode.
    pub fn network(&self) -> Option<&docker::Network> {
        self.network.as_ref()
    }

    /// Each member's name, role, client address and state.
    pub fn status(&mut self) -> Vec<MemberStatus> {
        self.members
            .iter_mut()
            .map(|m| {
                let state = m.state();
                let healthy = state == "running" && healthy(m.role, m.health_address());
                // What the member says (a TLS client port does not say it
                // in plain HTTP: then the release's own word).
                let version = (m.role == Role::Etcd)
                    .then(|| {
                        etcd::server_version(&m.client)
                            .or_else(|| self.etcd_release.as_ref().and_then(|r| r.version.clone()))
                    })
                    .flatten();
                MemberStatus {
                    name: m.name.clone(),
                    role: m.role,
                    client: m.client.clone(),
                    state,
                    healthy,
                    version,
                }
            })
            .collect()
    }

    /// Keeps everything running when the `Lab` is dropped: for a lab that
    /// outlives this process (saved with [`Lab::save`]).
    pub fn detach(mut self) {
        self.detached = true;
    }

    /// Writes the lab's state (JSON) to `path`, for [`Lab::load`].
    pub fn save(&self, path: &Path) -> Result<()> {
        let text = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, text)?;
        std::fs::rename(tmp, path)?;
        Ok(())
    }

    /// Reads back a lab [`Lab::save`]d: still detached, so dropping it
    /// leaves it running; [`Lab::down`] takes it down.
    pub fn load(path: &Path) -> Result<Lab> {
        let text = elect::input::read_regular_text(path, 16 * elect::input::MAX_SMALL_FILE)
            .map_err(|e| Error::State(e.to_string()))?;
        let mut lab: Lab = serde_json::from_str(&text)
            .map_err(|e| Error::State(format!("{} is not a lab's state: {e}", path.display())))?;
        lab.detached = true;
        Ok(lab)
    }

    /// Stops every member, removes the network and the lab's directory.
    pub fn down(mut self) -> Result<()> {
        self.detached = false;
        self.teardown()
    }

    fn teardown(&mut self) -> Result<()> {
        self.set_load(false)?;
        for m in &mut self.members {
            m.remove();
        }
        self.members.clear();
        if let Some(network) = self.network.take() {
            // Anything else carrying our label too (a killed `up`).
            docker::remove_all(&self.id);
            let _ = network.remove();
        }
        match std::fs::remove_dir_all(&self.dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
            _ => Ok(()),
        }
    }

    fn save_container_logs(&self) {
        for m in &self.members {
            if let Some(c) = m.container() {
                let _ = std::fs::write(m.dir.join("member.log"), c.logs());
            }
        }
    }

    /// Copies every member's log so far into `into`, as `<member>.log`.
    pub fn save_logs(&self, into: &std::path::Path) -> Result<()> {
        self.save_container_logs();
        std::fs::create_dir_all(into)?;
        for m in &self.members {
            let from = m.dir.join("member.log");
            if from.exists() {
                std::fs::copy(from, into.join(format!("{}.log", m.name)))?;
            }
        }
        Ok(())
    }

    /// Keeps the logs (not the lab) when a test or experiment failed: call
    /// before dropping; the directory is named on stderr.
    pub fn keep_logs(&mut self) {
        self.save_container_logs();
        let kept = std::env::temp_dir().join(format!("{}-logs", self.id));
        let _ = std::fs::create_dir_all(&kept);
        for m in &self.members {
            let _ = std::fs::copy(
                m.dir.join("member.log"),
                kept.join(format!("{}.log", m.name)),
            );
        }
        eprintln!("lab {}: member logs kept in {}", self.id, kept.display());
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if !self.detached {
            if std::thread::panicking() {
                self.keep_logs();
            }
            let _ = self.teardown();
        }
    }
}

/// One line of `elect lab status`.
#[derive(Clone, Debug, Serialize)]
pub struct MemberStatus {
    /// `etcd-1`...
    pub name: String,
    /// What it serves.
    pub role: Role,
    /// Its client address.
    pub client: String,
    /// `running`, `paused`, `cut`, `killed`...
    pub state: String,
    /// Whether it answers as a healthy member.
    pub healthy: bool,
    /// The server's version, where it says it (etcd members).
    pub version: Option<String>,
}

/// Whether the member of `role` at `client` serves: etcd answers
/// `/health`, a ZooKeeper server is leader or follower, a Raft-vote peer
/// accepts connections.
pub fn healthy(role: Role, client: &str) -> bool {
    match role {
        Role::Etcd => etcd::healthy(client),
        Role::Zk => zk::healthy(client),
        Role::Raft => raft::healthy(client),
    }
}

/// Whether the member at `client` leads its own ensemble (etcd's or
/// ZooKeeper's leader; a Raft-vote peer is never asked).
pub fn is_service_leader(role: Role, client: &str) -> bool {
    match role {
        Role::Etcd => etcd::is_raft_leader(client),
        Role::Zk => zk::is_leader(client),
        Role::Raft => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_member_that_is_not_there_is_named_with_those_that_are() {
        let lab = Lab {
            id: "t".into(),
            mode: Mode::Processes,
            dir: std::env::temp_dir().join("elect-lab-unit-none"),
            started: 0,
            network: None,
            members: Vec::new(),
            security: None,
            etcd_release: None,
            load: None,
            detached: true,
        };
        let e = lab.member("etcd-9").unwrap_err();
        assert!(e.to_string().contains("no member \"etcd-9\""), "{e}");
    }
}
