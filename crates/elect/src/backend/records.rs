//! [`CompletionRecords`]: where a periodic job's completion records are
//! read and written (see [`crate::periodic`]), on the backends that keep a
//! shared store.

#[cfg(feature = "etcd")]
use super::etcd;
#[cfg(feature = "zk")]
use super::zk;
use crate::backend_kind::Backend;
use crate::config::ElectionConfig;
use crate::error::{Error, Result};
use crate::periodic::Period;

/// The completion records of one election, through one connection (an
/// etcd client, a ZooKeeper session) opened once for a whole run: the
/// read at start, the read once elected and the write after the job.
pub struct CompletionRecords {
    store: Store,
}

enum Store {
    #[cfg(feature = "etcd")]
    Etcd(etcd::periodic::Records),
    #[cfg(feature = "zk")]
    Zk(zk::periodic::Records),
}

impl CompletionRecords {
    /// Connects to the service of `cfg`.
    ///
    /// # Errors
    /// [`Error::Unsupported`] on Raft-vote, which has no shared store for
    /// a record; [`Error::NotBuiltIn`] if the backend's feature is off;
    /// the service could not be reached within the connect timeout.
    pub async fn open(cfg: &ElectionConfig) -> Result<Self> {
        cfg.validate()?;
        let store = match cfg.backend() {
            #[cfg(feature = "etcd")]
            Backend::Etcd => Store::Etcd(etcd::periodic::Records::open(cfg).await?),
            #[cfg(feature = "zk")]
            Backend::Zk => Store::Zk(zk::periodic::Records::open(cfg).await?),
            Backend::Raft => {
                return Err(Error::Unsupported {
                    backend: Backend::Raft,
                    what: "no shared store keeps a completion record: run a long-lived \
                           `elect run` whose command schedules the job",
                });
            }
            #[allow(unreachable_patterns)]
            backend => return Err(Error::NotBuiltIn { backend }),
        };
        Ok(CompletionRecords { store })
    }

    /// Whether the job of `period` has completed: its record is there.
    ///
    /// # Errors
    /// The service did not answer within the connect timeout.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn completed(&self, period: &Period) -> Result<bool> {
        match &self.store {
            #[cfg(feature = "etcd")]
            Store::Etcd(records) => records.completed(period).await,
            #[cfg(feature = "zk")]
            Store::Zk(records) => records.completed(period).await,
        }
    }

    /// Records that the job of `period` has completed, for the candidates
    /// that come after. Call it only after the job succeeded: a record is
    /// never taken back.
    ///
    /// # Errors
    /// The service did not answer within the connect timeout, or refused
    /// the write.
    ///
    /// # Cancel safety
    /// Dropping the future may leave the record written or not.
    pub async fn record(&self, period: &Period) -> Result<()> {
        match &self.store {
            #[cfg(feature = "etcd")]
            Store::Etcd(records) => records.record(period).await,
            #[cfg(feature = "zk")]
            Store::Zk(records) => records.record(period).await,
        }
    }
}
