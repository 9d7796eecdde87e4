//! The completion records of periodic jobs (see [`crate::periodic`]) in etcd:
//! `<election>\0done/<period>`, each on a lease of its own whose TTL ends
//! when the record's keeping does, so etcd deletes it by itself.

use std::sync::Arc;
use std::time::SystemTime;

use etcd_client::{Client, GetOptions, LeaseGrantOptions, PutOptions};

use super::connection::{connect_reader, first_contact};
use super::errors::etcd_error;
use super::layout;
use crate::config::ElectionConfig;
use crate::error::Result;
use crate::periodic::Period;

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
        let read = || async {
            let options = GetOptions::new().with_count_only();
            let resp = Box::pin(self.client.kv_client().get(key.as_str(), Some(options)))
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
    /// The lease's id is ours, derived from the record and our id, so a
    /// grant tried again after an unanswered attempt (a paused member:
    /// the soak found a period run twice because one of three members was
    /// paused while the record was written) is the same lease, and a put
    /// tried again is the same put.
    ///
    /// Errors: as [`open`](Self::open), or etcd refuses the write.
    pub async fn record(&self, period: &Period) -> Result<()> {
        let key = layout::completion_record(&self.cfg.election, &period.record_name());
        let ttl = period.keep_for(SystemTime::now()).as_secs() as i64;
        let id = record_lease_id(&key, self.cfg.id());
        let write = || async {
            let grant = Box::pin(
                self.client
                    .lease_client()
                    .grant(ttl, Some(LeaseGrantOptions::new().with_id(id))),
            )
            .await;
            match grant {
                Ok(_) => {}
                // Granted by an attempt whose answer was lost.
                Err(e) if e.to_string().contains("lease already exists") => {}
                Err(e) => return Err(etcd_error("granting the completion record's lease", e)),
            }
            let options = PutOptions::new().with_lease(id);
            Box::pin(
                self.client
                    .kv_client()
                    .put(key.as_str(), self.cfg.id(), Some(options)),
            )
            .await
            .map_err(|e| etcd_error("writing the period's completion record", e))?;
            Ok(())
        };
        let written = first_contact(&self.cfg, write).await;
        if written.is_err() {
            // Nothing left behind: the lease, if granted, would hold
            // nothing until the record's keeping ended.
            let mut leases = self.client.lease_client();
            let revoke = Box::pin(leases.revoke(id));
            let _ = tokio::time::timeout(self.cfg.connect_timeout, revoke).await;
        }
        written
    }
}

/// The lease id of the record `key` written by candidate `id`: positive,
/// never 0 (which asks etcd to choose), the same in every attempt.
fn record_lease_id(key: &str, id: &str) -> i64 {
    use std::hash::{Hash, Hasher};
    // SipHash with fixed keys: the same in every process.
    let mut h = std::hash::DefaultHasher::new();
    (key, id).hash(&mut h);
    ((h.finish() >> 1) | 1) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_lease_id_is_positive_and_stable() {
        let a = record_lease_id("jobs\0done/1", "host-a");
        assert!(a > 0);
        assert_eq!(a, record_lease_id("jobs\0done/1", "host-a"));
        assert_ne!(a, record_lease_id("jobs\0done/1", "host-b"));
        assert_ne!(a, record_lease_id("jobs\0done/2", "host-a"));
    }
}
