//! The completion records of periodic jobs (see [`crate::periodic`]) in
//! ZooKeeper: persistent znodes `<election>.done/<period>` beside the
//! election's znode, not under it, where Curator's and kazoo's recipes
//! would take them for candidates. ZooKeeper keeps no TTL without the
//! server's extended types, so the writer of a record deletes the records
//! past their keeping: at most three are ever there.

use std::time::SystemTime;

use tracing::debug;
use zookeeper_client::{Acls, Client, CreateMode, Error as ZkError};

use super::connection::first_contact;
use super::errors::zk_error;
use super::znode::acls;
use crate::config::ElectionConfig;
use crate::error::Result;
use crate::periodic::Period;

/// Where the records of `election` live.
pub fn records_path(election: &str) -> String {
    format!("{election}.done")
}

/// One session for an election's records, kept for a whole run; the
/// write opens another if this one ended meanwhile (a long job).
pub struct Records {
    client: Client,
    cfg: ElectionConfig,
}

impl Records {
    /// Opens a session with the election's ensemble.
    ///
    /// Errors: [`Unreachable`](crate::Error::Unreachable) when no session
    /// is established within the connect timeout.
    pub async fn open(cfg: &ElectionConfig) -> Result<Records> {
        Ok(Records {
            client: first_contact(cfg).await?.client,
            cfg: cfg.clone(),
        })
    }

    /// Whether `period`'s job has completed (a synced read).
    ///
    /// Errors: as [`open`](Self::open), or the read does not answer.
    pub async fn completed(&self, period: &Period) -> Result<bool> {
        let path = self.path_of(period);
        let read = async {
            // A sync first: the member we reached may lag the leader's write.
            let client = &self.client;
            let (synced, stat) = tokio::join!(client.sync(&path), client.check_stat(&path));
            match synced {
                Ok(()) | Err(ZkError::NoNode) => {}
                Err(e) => return Err(zk_error("syncing before the completion record", e)),
            }
            stat.map(|s| s.is_some())
                .map_err(|e| zk_error("reading the period's completion record", e))
        };
        self.within(read).await
    }

    /// Writes `period`'s completion record (its data: who completed it),
    /// then deletes the records past their keeping.
    ///
    /// Errors: as [`open`](Self::open), or ZooKeeper refuses the write
    /// (its ACL).
    pub async fn record(&self, period: &Period) -> Result<()> {
        let fresh;
        let client = match self.create(&self.client, period).await {
            Ok(()) => &self.client,
            Err(ZkError::SessionExpired | ZkError::ClientClosed) => {
                fresh = first_contact(&self.cfg).await?.client;
                self.create(&fresh, period)
                    .await
                    .map_err(|e| zk_error("writing the period's completion record", e))?;
                &fresh
            }
            Err(e) => return Err(zk_error("writing the period's completion record", e)),
        };
        prune(
            client,
            &records_path(&self.cfg.election),
            period,
            SystemTime::now(),
        )
        .await;
        Ok(())
    }

    /// Creates the record (and its parent, when missing) through `client`.
    async fn create(&self, client: &Client, period: &Period) -> std::result::Result<(), ZkError> {
        let parent = records_path(&self.cfg.election);
        let acls = acls(self.cfg.user());
        let persistent = CreateMode::Persistent.with_acls(Acls::new(&acls));
        let create = async {
            loop {
                match client
                    .create(&self.path_of(period), self.cfg.id().as_bytes(), &persistent)
                    .await
                {
                    Ok(_) | Err(ZkError::NodeExists) => return Ok(()),
                    Err(ZkError::NoNode) => match client.mkdir(&parent, &persistent).await {
                        Ok(()) | Err(ZkError::NodeExists) => {}
                        Err(e) => return Err(e),
                    },
                    Err(e) => return Err(e),
                }
            }
        };
        tokio::time::timeout(self.cfg.connect_timeout, create)
            .await
            .unwrap_or(Err(ZkError::Timeout))
    }

    fn path_of(&self, period: &Period) -> String {
        format!(
            "{}/{}",
            records_path(&self.cfg.election),
            period.record_name()
        )
    }

    /// `request` within the connect timeout; no answer means ZooKeeper
    /// could not be reached.
    async fn within<T>(&self, request: impl Future<Output = Result<T>>) -> Result<T> {
        tokio::time::timeout(self.cfg.connect_timeout, request)
            .await
            .map_err(|_| self.cfg.unreachable("no answer"))?
    }
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
