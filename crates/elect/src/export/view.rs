//! What the exporters show: the latest snapshot with when this process
//! first saw its leader ([`Exported`]), what every line names beside it
//! ([`Context`]), and the format of the lines ([`Format`]). The exporters
//! (stdout, the leader file, HTTP, metrics) all read these, and the
//! gathering `export/mod.rs` builds them.

use std::time::SystemTime;

use tokio::sync::watch;

use crate::backend_kind::Backend;
use crate::leadership::Leadership;

/// How changes are reported on stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Sentences for people.
    Text,
    /// One JSON object per line, each a full snapshot.
    Json,
}

/// What every output line names besides the snapshot.
#[derive(Debug, Clone)]
pub struct Context {
    /// Which backend decides.
    pub backend: Backend,
    /// The election's name.
    pub election: String,
    /// Under `run`: the containment level holding the command's tree
    /// (`pidns`, `cgroup`, `subreaper`).
    pub containment: Option<&'static str>,
}

/// The latest snapshot with what the exporters add to it.
#[derive(Debug, Clone)]
pub struct Exported {
    /// The latest snapshot.
    pub leadership: Leadership,
    /// When this process first saw the current leader (and term).
    pub since: Option<SystemTime>,
    /// Whether our health check passes, when we have one.
    pub healthy: Option<bool>,
}

impl Exported {
    /// A channel that starts with an unknown leader.
    pub fn channel() -> (watch::Sender<Exported>, watch::Receiver<Exported>) {
        watch::channel(Exported {
            leadership: Leadership::unknown(),
            since: None,
            healthy: None,
        })
    }
}
