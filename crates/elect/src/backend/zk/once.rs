//! The completion records of periodic jobs (see [`crate::once`]) in
//! ZooKeeper: persistent znodes `<election>.done/<period>` beside the
//! election's znode, not under it, where Curator's and kazoo's recipes
//! would take them for candidates. ZooKeeper keeps no TTL without the
//! server's extended types, so the writer of a record deletes the records
//! past their keeping: at most three are ever there.

use std::time::SystemTime;

use tracing::debug;
use zookeeper_client::{Acls, Client, CreateMode, Error as ZkError};

use super::campaign::acls;
use super::connection::first_contact;
use super::errors::zk_error;
use crate::config::ElectionConfig;
use crate::error::Result;
use crate::once::Period;

/// Where the records of `election` live.
pub fn records_path(election: &str) -> String {
    format!("{election}.done")
}

/// Whether `period`'s job has completed (a synced read).
///
/// Errors: [`Unreachable`](crate::Error::Unreachable) when no session is
/// established within the connect timeout, or the read does not answer.
pub async fn completed(cfg: &ElectionConfig, period: &Period) -> Result<bool> {
    let client = first_contact(cfg).await?.client;
    let path = format!("{}/{}", records_path(&cfg.election), period.record_name());
    let read = async {
        // A sync first: the member we reached may lag the leader's write.
        let (synced, stat) = tokio::join!(client.sync(&path), client.check_stat(&path));
        match synced {
            Ok(()) | Err(ZkError::NoNode) => {}
            Err(e) => return Err(zk_error("syncing before the completion record", e)),
        }
        stat.map(|s| s.is_some())
            .map_err(|e| zk_error("reading the period's completion record", e))
    };
    within(cfg, read).await
}

/// Writes `period`'s completion record (its data: who completed it), then
/// deletes the records past their keeping.
///
/// Errors: [`Unreachable`](crate::Error::Unreachable) when no session is
/// established within the connect timeout, or ZooKeeper refuses the
/// write (its ACL).
pub async fn record(cfg: &ElectionConfig, period: &Period) -> Result<()> {
    let client = first_contact(cfg).await?.client;
    let write = async {
        let parent = records_path(&cfg.election);
        let path = format!("{parent}/{}", period.record_name());
        let acls = acls(cfg.user());
        let persistent = CreateMode::Persistent.with_acls(Acls::new(&acls));
        loop {
            match client.create(&path, cfg.id().as_bytes(), &persistent).await {
                Ok(_) | Err(ZkError::NodeExists) => break,
                Err(ZkError::NoNode) => match client.mkdir(&parent, &persistent).await {
                    Ok(()) | Err(ZkError::NodeExists) => continue,
                    Err(e) => return Err(zk_error("creating the completion records' znode", e)),
                },
                Err(e) => return Err(zk_error("writing the period's completion record", e)),
            }
        }
        prune(&client, &parent, period, SystemTime::now()).await;
        Ok(())
    };
    within(cfg, write).await
}

/// Deletes the records under `parent` past their keeping; a failure only
/// leaves them for the next writer.
async fn prune(client: &Client, parent: &str, period: &Period, now: SystemTime) {
    let Ok(children) = client.list_children(parent).await else {
        return;
    };
    for name in children {
        if Period::record_expired(&name, period.length(), now)
            && let Err(e) = client.delete(&format!("{parent}/{name}"), None).await
        {
            debug!("leaving the old completion record {name}: {e}");
        }
    }
}

/// `request` within the connect timeout; no answer means ZooKeeper could
/// not be reached.
async fn within<T>(cfg: &ElectionConfig, request: impl Future<Output = Result<T>>) -> Result<T> {
    tokio::time::timeout(cfg.connect_timeout, request)
        .await
        .map_err(|_| cfg.unreachable("no answer"))?
}
