//! One ensemble member: where it runs and the faults it can be dealt.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

use super::docker::Container;
use super::{Error, Fault, Result};

/// What a member serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// An etcd member.
    Etcd,
    /// A ZooKeeper server.
    Zk,
    /// A Raft-vote peer (`elect campaign`).
    Raft,
}

impl Role {
    /// `etcd` or `zk`, as in member names.
    pub fn name(self) -> &'static str {
        match self {
            Role::Etcd => "etcd",
            Role::Zk => "zk",
            Role::Raft => "raft",
        }
    }
}

/// Where a member runs.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Runner {
    /// A local process in a process group of its own, so a terminal's
    /// Ctrl-C aimed at whoever started it does not reach it.
    Process {
        /// Its pid while it runs.
        pid: Option<u32>,
        /// What started it, to start it again after a kill.
        argv: Vec<String>,
        /// Where its output goes.
        log: PathBuf,
        /// Whether it is stopped (SIGSTOP).
        paused: bool,
        /// The handle when this process started it, to reap it.
        #[serde(skip)]
        child: Option<Child>,
    },
    /// A container on the lab's network.
    Container {
        /// The container.
        container: Container,
        /// Whether it is disconnected from the network.
        cut: bool,
    },
}

/// A member of an etcd cluster or ZooKeeper ensemble.
#[derive(Debug, Serialize, Deserialize)]
pub struct Member {
    /// `etcd-1`, `zk-3`...
    pub name: String,
    /// What it serves.
    pub role: Role,
    /// The address clients connect to, `host:port`.
    pub client: String,
    /// Where it answers plain-HTTP health and metrics requests, when that
    /// is not `client` (an etcd member whose client port speaks TLS).
    #[serde(default)]
    pub health: Option<String>,
    /// Its directory under the lab's: data and, for a process, the log.
    pub dir: PathBuf,
    /// Where it runs.
    pub runner: Runner,
}

impl Member {
    /// Starts a member process from `argv`, its output appended to `log`.
    pub(crate) fn spawn_process(argv: Vec<String>, log: PathBuf) -> Result<Runner> {
        let child = spawn(&argv, &log)?;
        Ok(Runner::Process {
            pid: Some(child.id()),
            argv,
            log,
            paused: false,
            child: Some(child),
        })
    }

    /// The address of its health and metrics endpoints.
    pub fn health_address(&self) -> &str {
        self.health.as_deref().unwrap_or(&self.client)
    }

    /// The host pid of its main process, while it runs.
    pub fn pid(&self) -> Option<u32> {
        match &self.runner {
            Runner::Process { pid, .. } => *pid,
            Runner::Container { container, .. } => container
                .host_pid()
                .ok()
                .filter(|&p| p > 0)
                .map(|p| p as u32),
        }
    }

    /// The member's container, in container mode.
    pub fn container(&self) -> Option<&Container> {
        match &self.runner {
            Runner::Container { container, .. } => Some(container),
            Runner::Process { .. } => None,
        }
    }

    /// `running`, `paused`, `cut`, `killed` (or a container's own state).
    pub fn state(&mut self) -> String {
        match &mut self.runner {
            Runner::Process {
                pid, child, paused, ..
            } => {
                let alive = match child {
                    Some(c) => matches!(c.try_wait(), Ok(None)),
                    None => pid.is_some_and(|p| process_alive(p, &self.dir)),
                };
                match (alive, *paused) {
                    (false, _) => "killed".into(),
                    (true, true) => "paused".into(),
                    (true, false) => "running".into(),
                }
            }
            Runner::Container { container, cut } => match container.state().as_str() {
                "running" if *cut => "cut".into(),
                "exited" => "killed".into(),
                other => other.into(),
            },
        }
    }

    /// Deals `fault` to the member.
    pub fn apply(&mut self, fault: Fault) -> Result<()> {
        let refuse = |why: &str| Error::Fault {
            fault,
            member: self.name.clone(),
            why: why.to_owned(),
        };
        match &mut self.runner {
            Runner::Process {
                pid,
                argv,
                log,
                paused,
                child,
            } => match fault {
                Fault::Kill => {
                    if let Some(p) = pid.take() {
                        signal(p, Signal::SIGKILL);
                    }
                    if let Some(mut c) = child.take() {
                        let _ = c.wait();
                    }
                    *paused = false;
                    Ok(())
                }
                Fault::Restart => {
                    if pid.is_some_and(|p| process_alive(p, &self.dir)) {
                        return Err(refuse("it is running; kill it first"));
                    }
                    let c = spawn(argv, log)?;
                    *pid = Some(c.id());
                    *child = Some(c);
                    Ok(())
                }
                Fault::Pause | Fault::Resume => {
                    let p = pid.ok_or_else(|| refuse("it is not running"))?;
                    let pause = fault == Fault::Pause;
                    signal(
                        p,
                        if pause {
                            Signal::SIGSTOP
                        } else {
                            Signal::SIGCONT
                        },
                    );
                    *paused = pause;
                    Ok(())
                }
                Fault::Cut | Fault::Heal => Err(refuse(
                    "a local process's network cannot be cut; start the lab with \
                     --containers (docker network disconnect), or cut clients off with \
                     the fault proxy (elect_lab::fault::Proxy)",
                )),
            },
            Runner::Container { container, cut } => match fault {
                Fault::Kill => container.kill(),
                Fault::Restart => container.start(),
                Fault::Pause => container.pause(),
                Fault::Resume => container.unpause(),
                Fault::Cut => container.disconnect().map(|()| *cut = true),
                Fault::Heal => container.connect().map(|()| *cut = false),
            },
        }
    }

    /// Stops the member for good: SIGKILL (after SIGCONT, so a paused one
    /// goes too), or the container removed.
    pub fn remove(&mut self) {
        match &mut self.runner {
            Runner::Process { pid, child, .. } => {
                if let Some(p) = pid.take()
                    && (child.is_some() || process_alive(p, &self.dir))
                {
                    signal(p, Signal::SIGKILL);
                    signal(p, Signal::SIGCONT);
                }
                if let Some(mut c) = child.take() {
                    let _ = c.wait();
                }
            }
            Runner::Container { container, .. } => container.remove(),
        }
    }
}

fn spawn(argv: &[String], log: &std::path::Path) -> Result<Child> {
    use std::os::unix::process::CommandExt;
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)?;
    Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .process_group(0)
        .spawn()
        .map_err(|e| Error::Missing {
            what: format!("{} ({e})", argv[0]),
            hint: super::INSTALL_HINT.into(),
        })
}

fn signal(pid: u32, sig: Signal) {
    let _ = kill(Pid::from_raw(pid as i32), sig);
}

/// Whether `pid` is still the member whose directory is `dir`: alive, not a
/// zombie, and naming `dir` on its command line (so a reused pid is not
/// mistaken for it).
fn process_alive(pid: u32, dir: &std::path::Path) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.trim().chars().next());
    if matches!(state, Some('Z' | 'X') | None) {
        return false;
    }
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let needle = dir.as_os_str().as_encoded_bytes();
    cmdline.windows(needle.len()).any(|w| w == needle)
}
