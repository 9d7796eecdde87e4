//! One etcd lease that many elections share (Go's `concurrency.Session`):
//! what [`crate::backend::Session`] opens on etcd.

use std::sync::Arc;
use std::time::Duration;

use etcd_client::Client;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::bounds::WatchBounds;
use super::connection::{Connections, connect, first_contact};
use super::lease::Lease;
use super::renewal::Renewer;
use super::{campaign, layout, observe};
use crate::backend::cadence::Cadence;
use crate::backend::candidates::Candidates;
use crate::config::ElectionConfig;
use crate::counters::warn_counted;
use crate::error::Result;
use crate::leadership::Leadership;
use crate::work::WorkWatch;

/// One etcd lease that many elections share (Go's `concurrency.Session`):
/// one keepalive loop through every member, so one leadership deadline for
/// every election on it, and a candidate per election, each waiting only
/// on its predecessor in its own election. A candidacy that ends releases
/// its key instead of revoking the lease (see
/// [`campaign::Candidate::run_shared`]); when the lease ends, every
/// candidate on it ends with [`SessionEnded`](crate::Error::SessionEnded).
pub(crate) struct SharedSession {
    client: Arc<Client>,
    renewers: Vec<Renewer>,
    lease: Arc<Lease>,
    connect_timeout: Duration,
    candidates: Candidates,
}

impl SharedSession {
    /// Connects and grants the session's lease.
    ///
    /// Errors: [`Unreachable`](crate::Error::Unreachable) when etcd does not grant it within
    /// the connect timeout.
    pub(crate) async fn open(cfg: &ElectionConfig) -> Result<SharedSession> {
        let Connections { client, renewers } = connect(cfg).await?;
        let lease = first_contact(cfg, || Lease::grant(&client, &renewers, cfg.ttl)).await?;
        // Its elections lead or are next in line at any time: one lease,
        // renewed as a leader's.
        lease.renew_as(Cadence::Leading);
        Ok(SharedSession {
            client,
            renewers,
            lease: Arc::new(lease),
            connect_timeout: cfg.connect_timeout,
            candidates: Candidates::new(),
        })
    }

    /// Campaigns in `cfg`'s election on this session's lease: the token
    /// that asks it to resign, and its task.
    pub(crate) fn campaign(
        &self,
        cfg: ElectionConfig,
        out: watch::Sender<Leadership>,
        work: WorkWatch,
    ) -> (CancellationToken, tokio::task::JoinHandle<Result<()>>) {
        let (client, renewers, lease) = (
            self.client.clone(),
            self.renewers.clone(),
            self.lease.clone(),
        );
        self.candidates.spawn(|resign| async move {
            let prefix = layout::prefix(&cfg.election);
            let first = observe::read_leader(&client, &prefix).await?;
            let (view_tx, view_rx) = watch::channel(first.clone());
            let bounds = WatchBounds::new(cfg.connect_timeout);
            let candidate =
                campaign::Candidate::new(client.clone(), renewers, cfg, out, view_rx, work, resign);
            let follower = tokio::spawn(observe::follow(client, prefix, first, view_tx, bounds));
            let result = candidate.run_shared(lease).await;
            follower.abort();
            result
        })
    }

    /// Whether the lease is still alive.
    pub(crate) fn is_alive(&self) -> bool {
        !self.lease.state().expired
    }

    /// Every candidate resigns (releasing its key), then the lease is
    /// revoked.
    pub(crate) async fn close(self) {
        self.candidates.close(self.connect_timeout).await;
        match Arc::try_unwrap(self.lease) {
            Ok(lease) => lease.revoke(&self.client, self.connect_timeout).await,
            // A candidate still holds it: the lease expires after its TTL.
            Err(_) => warn_counted!("the session's lease is still in use; it will expire"),
        }
    }
}
