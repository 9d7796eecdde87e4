//! The session lease: granted with an id that tells elect's candidates
//! from Go's, kept alive by the renewal loop (see
//! [`renewal`](super::renewal), which is where the leadership deadline
//! comes from), revoked when the candidacy is over.

use std::time::Duration;

use etcd_client::{Client, LeaseGrantOptions};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::{Instant, timeout};
use tracing::{debug, info};

use super::errors::etcd_error;
use super::layout::ELECT_LEASE_TAG;
use super::recipe::Grant;
use super::renewal::{LeaseState, Renewer, keep_alive};
use crate::backend::cadence::Cadence;
use crate::clock::BootInstant;
use crate::counters::warn_counted;
use crate::error::Result;

/// A random positive lease id carrying [`ELECT_LEASE_TAG`].
fn fresh_lease_id() -> i64 {
    use std::hash::{BuildHasher, Hasher};
    let random = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish() as i64;
    (random & 0x7fff_ffff_ffff_0000) | ELECT_LEASE_TAG
}

/// A granted lease with its keepalive loop running.
pub struct Lease {
    pub id: i64,
    /// The TTL the server granted (it raises TTLs below its minimum).
    pub ttl: Duration,
    state: watch::Receiver<LeaseState>,
    cadence: watch::Sender<Cadence>,
    keeper: JoinHandle<()>,
}

impl Lease {
    /// Grants a lease of `ttl` through `client` and starts keeping it
    /// alive through `renewers`, one client per endpoint.
    ///
    /// Errors: the grant request failed. Cancel safety: a grant whose reply
    /// is lost leaves a lease that expires after `ttl` on its own.
    pub(crate) async fn grant(
        client: &Client,
        renewers: &[Renewer],
        ttl: Duration,
    ) -> Result<Lease> {
        let mut lease_client = client.lease_client();
        let sent = BootInstant::now();
        let options = LeaseGrantOptions::new().with_id(fresh_lease_id());
        // A taken id (one chance in 2^47) fails the grant; the caller retries.
        let resp = Box::pin(lease_client.grant(ttl.as_secs() as i64, Some(options)))
            .await
            .map_err(|e| etcd_error("lease grant", e))?;
        let grant = Grant::answered(sent, resp.ttl());
        let granted = grant.ttl;
        if granted != ttl {
            warn_counted!(
                requested = %humantime::format_duration(ttl),
                granted = %humantime::format_duration(granted),
                "etcd granted a different lease TTL than --ttl asked for (the server's minimum is ceil(1.5 x election timeout))"
            );
        }
        info!(lease = format_args!("{:x}", resp.id()), ttl = %humantime::format_duration(granted), "lease granted");
        let (tx, state) = watch::channel(LeaseState {
            deadline: grant.deadline,
            kept: grant.deadline,
            expired: false,
        });
        let (cadence, cadence_rx) = watch::channel(Cadence::Following);
        let keeper = tokio::spawn(keep_alive(
            renewers.to_vec(),
            resp.id(),
            granted,
            sent,
            tx,
            cadence_rx,
        ));
        Ok(Lease {
            id: resp.id(),
            ttl: granted,
            state,
            cadence,
            keeper,
        })
    }

    /// Renews as `cadence` says from now on (see [`Cadence`]); a change
    /// to leading sends its first pings at once.
    pub fn renew_as(&self, cadence: Cadence) {
        cadence.set_on(&self.cadence);
    }

    /// Whoever sets the cadence from a task of its own.
    pub fn cadence(&self) -> watch::Sender<Cadence> {
        self.cadence.clone()
    }

    pub fn state(&self) -> LeaseState {
        *self.state.borrow()
    }

    /// A receiver that is notified on each renewal and on expiry.
    pub fn watch(&self) -> watch::Receiver<LeaseState> {
        self.state.clone()
    }

    /// Stops the keepalive loop and revokes the lease, deleting every key
    /// bound to it in the same step. A failed request is tried again until
    /// `within` has passed: right after a member restarted, the client's
    /// connection to it fails on first use, and a successor then waits
    /// for the whole TTL of a lease it knows to be elect's. Best effort:
    /// if no request succeeds the lease expires after its TTL.
    pub async fn revoke(self, client: &Client, within: Duration) {
        self.keeper.abort();
        let lease = format_args!("{:x}", self.id).to_string();
        let until = Instant::now() + within;
        let mut pause = Duration::from_millis(5);
        loop {
            let mut lease_client = client.lease_client();
            let left = until.saturating_duration_since(Instant::now());
            match timeout(left, Box::pin(lease_client.revoke(self.id))).await {
                Ok(Ok(_)) => {
                    debug!(lease, "lease revoked");
                    return;
                }
                Ok(Err(e)) if e.to_string().contains("requested lease not found") => return,
                Ok(Err(e)) if Instant::now() + pause < until => {
                    debug!(lease, "revoking the lease: {e}; trying again");
                }
                Ok(Err(e)) => {
                    warn_counted!(lease, "revoking lease failed, it will expire: {e}");
                    return;
                }
                Err(_) => {
                    warn_counted!(lease, "revoking lease timed out, it will expire");
                    return;
                }
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(100));
        }
    }
}

#[cfg(test)]
impl Lease {
    /// A lease that was never granted and that nothing keeps alive.
    pub(crate) fn ungranted() -> (Lease, watch::Sender<LeaseState>) {
        let now = BootInstant::now();
        let (tx, state) = watch::channel(LeaseState {
            deadline: now,
            kept: now,
            expired: false,
        });
        let keeper = tokio::spawn(async {});
        let ttl = Duration::from_secs(2);
        (
            Lease {
                id: 1,
                ttl,
                state,
                cadence: watch::channel(Cadence::Leading).0,
                keeper,
            },
            tx,
        )
    }

    /// One member's renewal loop for this lease, not started.
    pub(crate) fn renewal(
        &self,
        renewer: Renewer,
        state: watch::Sender<LeaseState>,
    ) -> impl std::future::Future<Output = ()> + use<> {
        let renewing = super::renewal::Renewing {
            members: vec![(0, renewer)],
            id: self.id,
            ttl: self.ttl,
            following: false,
        };
        renewing.run(
            BootInstant::now() + self.ttl / 3,
            std::sync::Arc::new(state),
        )
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.keeper.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::etcd::layout::granted_by_elect;

    #[test]
    fn our_lease_ids_carry_the_tag() {
        for _ in 0..100 {
            let id = fresh_lease_id();
            assert!(granted_by_elect(id), "{id:x}");
        }
        assert!(
            !granted_by_elect(0x694d7d4a0c3e7b0d),
            "a server-assigned id"
        );
    }
}
