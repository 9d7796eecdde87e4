//! One ensemble member: where it runs and the faults it can be dealt.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

use super::docker::{self, Container};
use crate::error::{Error, Result};
use crate::kinds::Fault;

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
    /// The `strace` holding its syncs ([`Fault::Stall`]), while it does.
    #[serde(default)]
    pub stalled_by: Option<u32>,
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
        let state = self.runner_state();
        if state == "running" && self.stalled_by.is_some() {
            return "stalled".into();
        }
        state
    }

    fn runner_state(&mut self) -> String {
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
        let name = self.name.clone();
        let refuse = |why: &str| Error::Fault {
            fault,
            member: name.clone(),
            why: why.to_owned(),
        };
        match fault {
            Fault::Stall | Fault::StallLog => {
                return self
                    .stall(fault == Fault::StallLog)
                    .map_err(|why| refuse(&why));
            }
            Fault::Unstall => {
                self.unstall();
                return Ok(());
            }
            _ => {}
        }
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
                Fault::Stall | Fault::StallLog | Fault::Unstall => {
                    unreachable!("dealt with above")
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
                Fault::Stall | Fault::StallLog | Fault::Unstall => {
                    unreachable!("dealt with above")
                }
            },
        }
    }

    /// Attaches `strace` to the member's process, holding every sync (or,
    /// with `log_only`, those of its log files) until
    /// [`Member::unstall`]; returns once it holds them.
    fn stall(&mut self, log_only: bool) -> std::result::Result<(), String> {
        if self.stalled_by.is_some() {
            return Err("it is stalled already".into());
        }
        let pid = self.pid().ok_or("it is not running")?;
        let only = if log_only {
            let logs = open_logs(pid);
            if logs.is_empty() {
                return Err("it has no log file open (etcd's *.wal, ZooKeeper's log.*)".into());
            }
            Some(logs)
        } else {
            None
        };
        self.stalled_by = Some(crate::stall::hold_syncs(pid, only.as_deref())?);
        Ok(())
    }

    /// Detaches the `strace` of [`Member::stall`], if any; held syncs
    /// complete.
    fn unstall(&mut self) {
        if let Some(tracer) = self.stalled_by.take() {
            crate::stall::release_syncs(tracer);
        }
    }

    /// Stops the member for good: SIGKILL (after SIGCONT, so a paused one
    /// goes too), or the container removed.
    pub fn remove(&mut self) {
        self.unstall();
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

/// The log files process `pid` has open, by the paths it sees: etcd's
/// WAL segments (`*.wal`), ZooKeeper's transaction logs (`log.*`).
fn open_logs(pid: u32) -> Vec<PathBuf> {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    let mut logs: Vec<PathBuf> = fds
        .flatten()
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .filter(|path| {
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
            name.is_some_and(|n| n.ends_with(".wal") || n.starts_with("log."))
        })
        .collect();
    logs.sort();
    logs.dedup();
    logs
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

/// Where the members being started go: the lab's id, directory and, in
/// container mode, network.
pub(crate) struct Placement {
    pub(crate) id: String,
    pub(crate) dir: PathBuf,
    pub(crate) network: Option<docker::Network>,
}
