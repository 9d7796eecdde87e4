//! The completion records of periodic jobs (see [`crate::once`]) in etcd:
//! `<election>\0done/<period>`, each on a lease of its own whose TTL ends
//! when the record's keeping does, so etcd deletes it by itself.

use std::time::SystemTime;

use etcd_client::{GetOptions, PutOptions};

use super::connection::{connect_reader, first_contact};
use super::errors::etcd_error;
use super::layout;
use crate::config::ElectionConfig;
use crate::error::Result;
use crate::once::Period;

/// Whether `period`'s job has completed (one linearizable read).
///
/// Errors: [`Unreachable`](crate::Error::Unreachable) when etcd does not
/// answer within the connect timeout.
pub async fn completed(cfg: &ElectionConfig, period: &Period) -> Result<bool> {
    let client = connect_reader(cfg).await?;
    let key = layout::completion_record(&cfg.election, &period.record_name());
    let read = async {
        let resp = Box::pin(
            client
                .kv_client()
                .get(key, Some(GetOptions::new().with_count_only())),
        )
        .await
        .map_err(|e| etcd_error("reading the period's completion record", e))?;
        Ok(resp.count() > 0)
    };
    first_contact(cfg, read).await
}

/// Writes `period`'s completion record, bound to a new lease that lives
/// until the record's keeping ends. The value names who completed it.
///
/// Errors: [`Unreachable`](crate::Error::Unreachable) when etcd does not
/// answer within the connect timeout, or refuses the write.
pub async fn record(cfg: &ElectionConfig, period: &Period) -> Result<()> {
    let client = connect_reader(cfg).await?;
    let key = layout::completion_record(&cfg.election, &period.record_name());
    let ttl = period.keep_for(SystemTime::now()).as_secs();
    let write = async {
        let lease = Box::pin(client.lease_client().grant(ttl as i64, None))
            .await
            .map_err(|e| etcd_error("granting the completion record's lease", e))?;
        let options = PutOptions::new().with_lease(lease.id());
        Box::pin(client.kv_client().put(key, cfg.id(), Some(options)))
            .await
            .map_err(|e| etcd_error("writing the period's completion record", e))?;
        Ok(())
    };
    first_contact(cfg, write).await
}
