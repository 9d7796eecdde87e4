//! The ways to decide who leads, behind one small interface.
//!
//! A backend turns an [`ElectionConfig`] into a stream of [`Leadership`]
//! snapshots: [`campaign`] takes part, [`observe`] only follows, and
//! [`leader`] reads once. Everything downstream (`supervise`, `export`)
//! depends only on the snapshots, never on a backend.

pub mod backoff;
pub mod etcd;
pub mod raft;
pub mod report;
pub mod zk;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::config::{BackendKind, ElectionConfig};
use crate::error::Result;
use crate::leadership::Leadership;

/// A running candidacy.
pub struct Campaign {
    leadership: watch::Receiver<Leadership>,
    resign: CancellationToken,
    task: JoinHandle<Result<()>>,
}

impl Campaign {
    pub(crate) fn new(
        leadership: watch::Receiver<Leadership>,
        resign: CancellationToken,
        task: JoinHandle<Result<()>>,
    ) -> Self {
        Campaign {
            leadership,
            resign,
            task,
        }
    }

    /// The snapshots of this candidacy, starting with an unknown leader.
    pub fn leadership(&self) -> watch::Receiver<Leadership> {
        self.leadership.clone()
    }

    /// Leaves the election: our key/znode is deleted and the session ended,
    /// so a successor takes over in round trips rather than a TTL.
    ///
    /// Errors: only if the campaign had already failed. Not cancel safe:
    /// dropping the future leaves the resignation to finish in the
    /// background.
    pub async fn resign(self) -> Result<()> {
        self.resign.cancel();
        match self.task.await {
            Ok(result) => result,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => Ok(()),
        }
    }
}

/// A running observation; stops when dropped.
pub struct Observation {
    leadership: watch::Receiver<Leadership>,
    task: JoinHandle<()>,
}

impl Observation {
    pub(crate) fn new(leadership: watch::Receiver<Leadership>, task: JoinHandle<()>) -> Self {
        Observation { leadership, task }
    }

    pub fn leadership(&self) -> watch::Receiver<Leadership> {
        self.leadership.clone()
    }
}

impl Drop for Observation {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Joins the election described by `cfg`. `busy` tells the backend whether
/// work started under our leadership still runs (see
/// [`crate::supervise`]); pass a constant `false` when there is none.
///
/// Errors: the service could not be reached within the connect timeout.
pub async fn campaign(cfg: &ElectionConfig, busy: watch::Receiver<bool>) -> Result<Campaign> {
    match cfg.backend {
        BackendKind::Etcd => etcd::campaign(cfg, busy).await,
        BackendKind::Zk => zk::campaign(cfg, busy).await,
        BackendKind::Raft => raft::campaign(cfg, busy).await,
    }
}

/// Follows the election without taking part.
///
/// Errors: the service could not be reached within the connect timeout.
pub async fn observe(cfg: &ElectionConfig) -> Result<Observation> {
    match cfg.backend {
        BackendKind::Etcd => etcd::observe(cfg).await,
        BackendKind::Zk => zk::observe(cfg).await,
        BackendKind::Raft => raft::observe(cfg).await,
    }
}

/// Reads the current leader once.
///
/// Errors: the service could not be reached within the connect timeout.
pub async fn leader(cfg: &ElectionConfig) -> Result<Leadership> {
    match cfg.backend {
        BackendKind::Etcd => etcd::leader(cfg).await,
        BackendKind::Zk => zk::leader(cfg).await,
        BackendKind::Raft => raft::leader(cfg).await,
    }
}
