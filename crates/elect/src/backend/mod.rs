//! The ways to decide who leads, behind one small interface.
//!
//! A backend turns an [`ElectionConfig`] into a stream of [`Leadership`]
//! snapshots: [`campaign`] takes part, [`observe`] only follows, and
//! [`leader`] reads once. Everything downstream (`supervise`, `export`)
//! depends only on the snapshots, never on a backend.

// With no backend compiled in, what they share goes unused.
#[cfg_attr(
    not(any(feature = "etcd", feature = "zk", feature = "raft")),
    allow(dead_code)
)]
pub(crate) mod backoff;
#[cfg(any(feature = "etcd", feature = "zk"))]
mod candidates;
pub mod counters;
#[cfg(feature = "etcd")]
pub(crate) mod etcd;
#[cfg(test)]
mod model_check;
#[cfg(feature = "raft")]
pub mod raft;
#[cfg_attr(not(any(feature = "etcd", feature = "zk")), allow(dead_code))]
pub(crate) mod report;
#[cfg(any(feature = "etcd", feature = "zk"))]
mod session;
mod term;
#[cfg(feature = "zk")]
pub(crate) mod zk;

#[cfg(any(feature = "etcd", feature = "zk"))]
pub use session::Session;
pub use term::Term;

/// TLS credentials as the options of a ZooKeeper client
/// (`zookeeper_client`), with elect's crypto provider installed: how the
/// lab and users' tools talk to the same ensemble the way elect does.
///
/// # Errors
/// [`Error::Tls`](crate::Error::Tls) when the certificate or key does not parse.
#[cfg(feature = "zk")]
pub use zk::tls_options as zk_tls_options;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

#[cfg(any(feature = "etcd", feature = "zk", feature = "raft"))]
use crate::backend_kind::Backend;
use crate::config::ElectionConfig;
use crate::error::{Error, Result};
use crate::leadership::Leadership;
use crate::work::WorkWatch;

/// A running candidacy.
///
/// Dropping it without calling [`resign`](Campaign::resign) also resigns:
/// renewals stop and the key, znode or Raft leadership is given up by a
/// task that finishes in the background (it needs the tokio runtime to
/// keep running for the few round trips that takes). Call `resign` to wait
/// for it and learn whether it went well.
#[must_use = "dropping a Campaign resigns at once; keep it for as long as you campaign"]
pub struct Campaign {
    leadership: watch::Receiver<Leadership>,
    resign: CancellationToken,
    task: Option<JoinHandle<Result<()>>>,
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
            task: Some(task),
        }
    }

    /// The snapshots of this candidacy, starting with an unknown leader.
    pub fn leadership(&self) -> watch::Receiver<Leadership> {
        self.leadership.clone()
    }

    /// Leaves the election: our key/znode is deleted and the session ended,
    /// so a successor takes over in round trips rather than a TTL.
    ///
    /// # Errors
    /// Only if the campaign had already failed.
    ///
    /// # Cancel safety
    /// Not cancel safe: dropping the future leaves the resignation to
    /// finish in the background.
    pub async fn resign(mut self) -> Result<()> {
        self.resign.cancel();
        let Some(task) = self.task.take() else {
            return Ok(());
        };
        match task.await {
            Ok(result) => result,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => Ok(()),
        }
    }
}

impl Drop for Campaign {
    fn drop(&mut self) {
        // The campaign task resigns when cancelled; detached, it finishes
        // on its own.
        self.resign.cancel();
    }
}

/// A running observation; stops when dropped.
#[must_use = "dropping an Observation stops it"]
pub struct Observation {
    leadership: watch::Receiver<Leadership>,
    task: JoinHandle<()>,
}

impl Observation {
    pub(crate) fn new(leadership: watch::Receiver<Leadership>, task: JoinHandle<()>) -> Self {
        Observation { leadership, task }
    }

    /// The snapshots of this observation, starting with an unknown leader.
    pub fn leadership(&self) -> watch::Receiver<Leadership> {
        self.leadership.clone()
    }
}

impl Drop for Observation {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Joins the election described by `cfg`. `work` tells the backend whether
/// work started under our leadership still runs, so that after a loss it
/// keeps what successors wait for until that work has stopped (see
/// [`crate::work`]); pass [`WorkWatch::none`] when nothing needs waiting
/// for.
///
/// # Errors
/// [`Error::Config`] naming `id` if a Raft candidate's id is not one of
/// the peers; [`Error::NotBuiltIn`] if the backend's feature is off;
/// otherwise the service could not be reached within the connect timeout,
/// or refused us.
///
/// # Cancel safety
/// Dropping the future before it returns leaves nothing behind but what
/// the service cleans up by itself (an etcd lease or ZooKeeper session
/// whose TTL runs out).
#[cfg_attr(
    not(any(feature = "etcd", feature = "zk", feature = "raft")),
    allow(unused_variables)
)]
pub async fn campaign(cfg: &ElectionConfig, work: WorkWatch) -> Result<Campaign> {
    // The default id (hostname-pid) is no Raft peer's.
    cfg.check_raft_membership()?;
    cfg.validate()?;
    match cfg.backend {
        #[cfg(feature = "etcd")]
        Backend::Etcd => etcd::campaign(cfg, work).await,
        #[cfg(feature = "zk")]
        Backend::Zk => zk::campaign(cfg, work).await,
        #[cfg(feature = "raft")]
        Backend::Raft => raft::campaign(cfg, work).await,
        #[allow(unreachable_patterns)]
        backend => Err(Error::NotBuiltIn { backend }),
    }
}

/// Follows the election without taking part.
///
/// # Errors
/// [`Error::NotBuiltIn`] if the backend's feature is off; the service
/// could not be reached within the connect timeout.
///
/// # Cancel safety
/// Cancel safe: a dropped future leaves no observation running.
pub async fn observe(cfg: &ElectionConfig) -> Result<Observation> {
    cfg.validate()?;
    match cfg.backend {
        #[cfg(feature = "etcd")]
        Backend::Etcd => etcd::observe(cfg).await,
        #[cfg(feature = "zk")]
        Backend::Zk => zk::observe(cfg).await,
        #[cfg(feature = "raft")]
        Backend::Raft => raft::observe(cfg).await,
        #[allow(unreachable_patterns)]
        backend => Err(Error::NotBuiltIn { backend }),
    }
}

/// Reads the current leader once.
///
/// # Errors
/// [`Error::NotBuiltIn`] if the backend's feature is off; the service
/// could not be reached within the connect timeout.
///
/// # Cancel safety
/// Cancel safe: it only reads.
pub async fn leader(cfg: &ElectionConfig) -> Result<Leadership> {
    cfg.validate()?;
    match cfg.backend {
        #[cfg(feature = "etcd")]
        Backend::Etcd => etcd::leader(cfg).await,
        #[cfg(feature = "zk")]
        Backend::Zk => zk::leader(cfg).await,
        #[cfg(feature = "raft")]
        Backend::Raft => raft::leader(cfg).await,
        #[allow(unreachable_patterns)]
        backend => Err(Error::NotBuiltIn { backend }),
    }
}
