//! The completion records of periodic jobs (see [`crate::once`]) in etcd:
//! `<election>\0done/<period>`, each on a lease of its own whose TTL ends
//! when the record's keeping does, so etcd deletes it by itself.

use std::sync::Arc;
use std::time::SystemTime;

use etcd_client::{Client, GetOptions, PutOptions};

use super::connection::{connect_reader, first_contact};
use super::errors::etcd_error;
use super::layout;
use crate::config::ElectionConfig;
use crate::error::Result;
use crate::once::Period;

/// One client for an election's records, kept for a whole run (etcd's
/// client reconnects by itself).
pub struct Records {
    client: Arc<Client>,
    cfg: ElectionConfig,
}

impl Records {
    /// Connects to the election's cluster.
    ///
    /// Errors: [`Unreachable`](crate::Error::Unreachable) when etcd does
    /// not answer within the connect timeout.
    pub async fn open(cfg: &ElectionConfig) -> Result<Records> {
        Ok(Records {
            client: connect_reader(cfg).await?,
            cfg: cfg.clone(),
        })
    }

    /// Whether `period`'s job has completed (one linearizable read).
    ///
    /// Errors: as [`open`](Self::open).
    pub async fn completed(&self, period: &Period) -> Result<bool> {
        let key = layout::completion_record(&self.cfg.election, &period.record_name());
        let options = GetOptions::new().with_count_only();
        let read = async {
            let resp = Box::pin(self.client.kv_client().get(key, Some(options)))
                .await
                .map_err(|e| etcd_error("reading the period's completion record", e))?;
            Ok(resp.count() > 0)
        };
        first_contact(&self.cfg, read).await
    }

    /// Writes `period`'s completion record, bound to a new lease that
    /// lives until the record's keeping ends. The value names who
    /// completed it.
    ///
    /// Errors: as [`open`](Self::open), or etcd refuses the write.
    pub async fn record(&self, period: &Period) -> Result<()> {
        let key = layout::completion_record(&self.cfg.election, &period.record_name());
        let ttl = period.keep_for(SystemTime::now()).as_secs();
        let write = async {
            let lease = Box::pin(self.client.lease_client().grant(ttl as i64, None))
                .await
                .map_err(|e| etcd_error("granting the completion record's lease", e))?;
            let options = PutOptions::new().with_lease(lease.id());
            let put = Box::pin(
                self.client
                    .kv_client()
                    .put(key, self.cfg.id(), Some(options)),
            )
            .await;
            if let Err(e) = put {
                // Nothing left behind: the lease would hold nothing until
                // the record's keeping ended.
                let _ = Box::pin(self.client.lease_client().revoke(lease.id())).await;
                return Err(etcd_error("writing the period's completion record", e));
            }
            Ok(())
        };
        first_contact(&self.cfg, write).await
    }
}
