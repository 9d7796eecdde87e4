//! The lab's two small vocabularies: where members run ([`Mode`]) and the
//! faults one can be dealt ([`Fault`]). They stand below everything, so
//! that errors, members and specs can all name them.

use serde::{Deserialize, Serialize};

/// Where members run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Local processes, each on its own loopback address.
    Processes,
    /// Containers on a private Docker network.
    Containers,
}

/// A fault to deal one member.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Fault {
    /// SIGKILL, as a crash would.
    Kill,
    /// Start a killed member again on its data.
    Restart,
    /// SIGSTOP (or `docker pause`).
    Pause,
    /// SIGCONT (or `docker unpause`).
    Resume,
    /// Take it off the network (containers only).
    Cut,
    /// Put it back.
    Heal,
    /// Hold every `fsync` and `fdatasync` of its process until
    /// [`Fault::Unstall`], as a hung disk does (strace's syscall fault
    /// injection; needs `strace`). Its threads that do not sync run on.
    Stall,
    /// Like [`Fault::Stall`], for the syncs of its log alone (etcd's WAL,
    /// ZooKeeper's transaction log), as when the log has a disk of its
    /// own (etcd's `--wal-dir`, ZooKeeper's `dataLogDir`) and that disk
    /// hangs: the rest of the member, its database included, runs on.
    StallLog,
    /// Let its held syncs complete.
    Unstall,
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Fault::Kill => "kill",
            Fault::Restart => "restart",
            Fault::Pause => "pause",
            Fault::Resume => "resume",
            Fault::Cut => "cut",
            Fault::Heal => "heal",
            Fault::Stall => "stall",
            Fault::StallLog => "stall-log",
            Fault::Unstall => "unstall",
        })
    }
}
