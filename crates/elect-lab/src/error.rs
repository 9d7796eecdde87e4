//! What the lab could not do, as typed errors.

use std::time::Duration;

use crate::kinds::Fault;

/// What the lab could not do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A program, package, image or engine the lab needs is not there.
    #[error("{what} is missing: {hint}")]
    Missing {
        /// What is missing.
        what: String,
        /// How to get it.
        hint: String,
    },
    /// `ELECT_ETCD_BIN` names no usable etcd release.
    #[error("ELECT_ETCD_BIN={}: {why}", dir.display())]
    EtcdRelease {
        /// The directory it names.
        dir: std::path::PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// A `docker` command failed.
    #[error("docker {command}: {stderr}")]
    Docker {
        /// Its arguments.
        command: String,
        /// What it said.
        stderr: String,
    },
    /// Members did not become healthy in time.
    #[error("{what} not healthy within {within:?}; member logs are in {dir}")]
    Unhealthy {
        /// Which ensemble.
        what: String,
        /// How long we waited.
        within: Duration,
        /// Where the logs are kept.
        dir: String,
    },
    /// No member of that name.
    #[error("no member {name:?} in this lab; its members are {members}")]
    NoSuchMember {
        /// The name asked for.
        name: String,
        /// The names there are.
        members: String,
    },
    /// A fault that this member cannot be dealt.
    #[error("cannot {fault} {member}: {why}")]
    Fault {
        /// The fault.
        fault: Fault,
        /// The member.
        member: String,
        /// Why not.
        why: String,
    },
    /// The lab's state file is missing, or names a lab already up.
    #[error("{0}")]
    State(String),
    /// Ctrl-C (or SIGTERM) arrived while waiting.
    #[error("interrupted")]
    Interrupted,
    /// Reading or writing the lab's files.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// What the lab's operations return.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// How to get what process mode needs.
pub(crate) const INSTALL_HINT: &str = "install Debian's etcd-server and zookeeper (and a Java \
    runtime), or use containers (--containers) built by deploy/images/build.sh";
