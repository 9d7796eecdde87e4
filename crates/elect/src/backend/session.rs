//! Many elections on one session: one etcd lease or one ZooKeeper
//! session, as Go's `concurrency.Session` hosts many `Election`s and
//! Curator runs many latches on one client. A service with a leader per
//! shard campaigns in each shard's election on one session: the renewal
//! traffic is the session's (etcd: one keepalive per member per TTL/3;
//! ZooKeeper: one sync per T/20), not the elections', and each election
//! keeps its own leadership and fencing tokens. When the session ends,
//! every term on it ends at once (each campaign fails with
//! [`Error::SessionEnded`]).
//!
//! A Raft-vote cluster is the session of its one election: it cannot be
//! shared ([`Error::Unsupported`]).

use tokio::sync::watch;

use super::handle::Campaign;
use crate::backend_kind::Backend;
use crate::config::ElectionConfig;
use crate::error::{Error, Result};
use crate::leadership::Leadership;
use crate::work::WorkWatch;

/// One session with the coordination service, for many elections.
pub struct Session {
    cfg: ElectionConfig,
    shared: Shared,
}

enum Shared {
    /// Boxed: etcd's clients are large.
    #[cfg(feature = "etcd")]
    Etcd(Box<super::etcd::session::SharedSession>),
    #[cfg(feature = "zk")]
    Zk(super::zk::session::SharedSession),
}

impl Session {
    /// Opens a session with `cfg`'s service, TTL and credentials (its
    /// election and id are the defaults of [`Session::campaign`]).
    ///
    /// # Errors
    /// [`Error::Unreachable`] when the service does not answer within the
    /// connect timeout; [`Error::Unsupported`] for raft;
    /// [`Error::NotBuiltIn`] if the backend's feature is off.
    ///
    /// # Cancel safety
    /// Dropping the future before it returns leaves nothing behind but
    /// what the service cleans up by itself (a lease or session whose TTL
    /// runs out).
    pub async fn open(cfg: &ElectionConfig) -> Result<Session> {
        cfg.validate()?;
        let shared = match cfg.backend() {
            #[cfg(feature = "etcd")]
            Backend::Etcd => Shared::Etcd(Box::new(
                super::etcd::session::SharedSession::open(cfg).await?,
            )),
            #[cfg(feature = "zk")]
            Backend::Zk => Shared::Zk(super::zk::open_shared(cfg).await?),
            Backend::Raft => {
                return Err(Error::Unsupported {
                    backend: Backend::Raft,
                    what: "a Raft-vote cluster serves one election; it cannot be shared",
                });
            }
            #[allow(unreachable_patterns)]
            backend => return Err(Error::NotBuiltIn { backend }),
        };
        Ok(Session {
            cfg: cfg.clone(),
            shared,
        })
    }

    /// Campaigns in `election` (named as [`ElectionConfig`] takes it for
    /// this backend) on this session, publishing `id` while leading.
    /// `work` is as for [`super::campaign`].
    ///
    /// # Errors
    /// [`Error::Config`] naming `election` or `id`;
    /// [`Error::SessionEnded`] when the session is over.
    pub fn campaign(&self, election: &str, id: &str, work: WorkWatch) -> Result<Campaign> {
        let cfg = self.cfg.clone().with_election(election)?.with_id(id)?;
        if !self.is_alive() {
            return Err(Error::SessionEnded {
                backend: cfg.backend(),
            });
        }
        let (out, leadership) = watch::channel(Leadership::unknown());
        let (resign, task) = match &self.shared {
            #[cfg(feature = "etcd")]
            Shared::Etcd(s) => s.campaign(cfg, out, work),
            #[cfg(feature = "zk")]
            Shared::Zk(s) => s.campaign(cfg, out, work),
        };
        Ok(Campaign::new(leadership, resign, task))
    }

    /// Whether the session still lives (its lease or ZooKeeper session).
    pub fn is_alive(&self) -> bool {
        match &self.shared {
            #[cfg(feature = "etcd")]
            Shared::Etcd(s) => s.is_alive(),
            #[cfg(feature = "zk")]
            Shared::Zk(s) => s.is_alive(),
        }
    }

    /// Closes the session: every campaign on it resigns (its key or znode
    /// deleted), then the lease is revoked or the ZooKeeper session
    /// closed.
    ///
    /// # Cancel safety
    /// Not cancel safe: what is left expires with the session's TTL.
    pub async fn close(self) {
        match self.shared {
            #[cfg(feature = "etcd")]
            Shared::Etcd(s) => s.close().await,
            #[cfg(feature = "zk")]
            Shared::Zk(s) => s.close().await,
        }
    }
}
