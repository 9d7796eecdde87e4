//! The session lease and our own keepalive loop.
//!
//! `etcd-client`'s `LeaseKeeper::keep_alive` sends a single ping, so the
//! loop is ours, and that is what we want: the leadership deadline must be
//! computed from the *send* time of a ping the server acknowledged, which
//! only the loop that sends knows. The server's expiry clock starts when it
//! receives the ping, never earlier, so `send time + TTL` cannot be later
//! than the server's expiry, minus what clock-rate error could add.

use std::time::Duration;

use etcd_client::{Client, LeaseGrantOptions};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep_until, timeout};
use tracing::{debug, info, warn};

use super::etcd_error;
use crate::error::Result;
use crate::leadership::deadline_after;

/// The low 16 bits of every lease id `elect` chooses ("e1ec"). An `elect`
/// leader that loses its key keeps its lease until its work is dead and
/// then revokes it, so a successor that sees this tag on its predecessor's
/// lease knows waiting for it is worthwhile. Leases of Go clients (server
/// assigned ids) are not waited for: `etcdctl elect` resigns by deleting
/// its key and keeps its lease for a minute.
pub const ELECT_LEASE_TAG: i64 = 0xe1ec;

/// Whether `id` is a lease granted by `elect` (see [`ELECT_LEASE_TAG`]).
pub fn granted_by_elect(id: i64) -> bool {
    id > 0 && id & 0xffff == ELECT_LEASE_TAG
}

/// A random positive lease id carrying [`ELECT_LEASE_TAG`].
fn fresh_lease_id() -> i64 {
    use std::hash::{BuildHasher, Hasher};
    let random = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish() as i64;
    (random & 0x7fff_ffff_ffff_0000) | ELECT_LEASE_TAG
}

/// What the keepalive loop knows about the lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseState {
    /// Until when the lease is surely alive.
    pub deadline: Instant,
    /// The server said the lease is gone (revoked or expired).
    pub expired: bool,
}

/// A granted lease with its keepalive loop running.
pub struct Lease {
    pub id: i64,
    /// The TTL the server granted (it raises TTLs below its minimum).
    pub ttl: Duration,
    state: watch::Receiver<LeaseState>,
    keeper: JoinHandle<()>,
}

impl Lease {
    /// Grants a lease of `ttl` through `client` and starts keeping it
    /// alive through `renewers`, one client per endpoint.
    ///
    /// Errors: the grant request failed. Cancel safety: a grant whose reply
    /// is lost leaves a lease that expires after `ttl` on its own.
    pub async fn grant(client: &Client, renewers: &[Client], ttl: Duration) -> Result<Lease> {
        let mut lease_client = client.lease_client();
        let sent = Instant::now();
        let options = LeaseGrantOptions::new().with_id(fresh_lease_id());
        // A taken id (one chance in 2^47) fails the grant; the caller retries.
        let resp = lease_client
            .grant(ttl.as_secs() as i64, Some(options))
            .await
            .map_err(|e| etcd_error("lease grant", e))?;
        let granted = Duration::from_secs(resp.ttl().max(0) as u64);
        if granted != ttl {
            warn!(
                requested = %humantime::format_duration(ttl),
                granted = %humantime::format_duration(granted),
                "etcd granted a different lease TTL than --ttl asked for (the server's minimum is ceil(1.5 x election timeout))"
            );
        }
        info!(lease = format_args!("{:x}", resp.id()), ttl = %humantime::format_duration(granted), "lease granted");
        let (tx, state) = watch::channel(LeaseState {
            deadline: deadline_after(sent, granted),
            expired: false,
        });
        let keeper = tokio::spawn(keep_alive(renewers.to_vec(), resp.id(), granted, sent, tx));
        Ok(Lease {
            id: resp.id(),
            ttl: granted,
            state,
            keeper,
        })
    }

    pub fn state(&self) -> LeaseState {
        *self.state.borrow()
    }

    /// A receiver that is notified on each renewal and on expiry.
    pub fn watch(&self) -> watch::Receiver<LeaseState> {
        self.state.clone()
    }

    /// Stops the keepalive loop and revokes the lease, deleting every key
    /// bound to it in the same step. Best effort: if the request fails the
    /// lease expires after its TTL.
    pub async fn revoke(self, client: &Client, within: Duration) {
        self.keeper.abort();
        let mut lease_client = client.lease_client();
        match timeout(within, lease_client.revoke(self.id)).await {
            Ok(Ok(_)) => debug!(lease = format_args!("{:x}", self.id), "lease revoked"),
            Ok(Err(e)) if e.to_string().contains("requested lease not found") => {}
            Ok(Err(e)) => warn!(
                lease = format_args!("{:x}", self.id),
                "revoking lease failed, it will expire: {e}"
            ),
            Err(_) => warn!(
                lease = format_args!("{:x}", self.id),
                "revoking lease timed out, it will expire"
            ),
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.keeper.abort();
    }
}

/// Pings every TTL/3 and publishes the deadline each acknowledged ping buys.
///
/// Pings go to one member at a time; one left unanswered for TTL/3 moves
/// the loop to the next member, so a member cut off from us (its packets
/// dropped, no reset) costs one interval, not the lease. Candidates start
/// at different members (chosen by lease id) to spread the load.
async fn keep_alive(
    renewers: Vec<Client>,
    id: i64,
    ttl: Duration,
    granted_at: Instant,
    state: watch::Sender<LeaseState>,
) {
    let interval = ttl / 3;
    let mut next = granted_at + interval;
    let mut stream = None;
    let mut member = (id >> 16) as usize % renewers.len().max(1);
    loop {
        sleep_until(next).await;
        if stream.is_none() {
            let mut lease_client = renewers[member].lease_client();
            match timeout(interval, lease_client.keep_alive(id)).await {
                Ok(Ok(pair)) => stream = Some(pair),
                Ok(Err(e)) => debug!(member, "keepalive stream: {e}"),
                Err(_) => debug!(member, "keepalive stream: timed out"),
            }
        }
        let Some((keeper, responses)) = stream.as_mut() else {
            member = (member + 1) % renewers.len();
            next = Instant::now() + retry_delay(interval);
            continue;
        };
        let sent = Instant::now();
        let reply = async {
            keeper.keep_alive().await?;
            responses.message().await
        };
        match timeout(interval, reply).await {
            Ok(Ok(Some(resp))) if resp.ttl() > 0 => {
                let renewed = Duration::from_secs(resp.ttl() as u64);
                state.send_replace(LeaseState {
                    deadline: deadline_after(sent, renewed),
                    expired: false,
                });
                next = sent + interval;
            }
            Ok(Ok(Some(_))) => {
                warn!(
                    lease = format_args!("{id:x}"),
                    "etcd says the lease is gone"
                );
                state.send_modify(|s| s.expired = true);
                return;
            }
            outcome => {
                // A reply that arrives late must never be credited to a later
                // ping: that would move the deadline past the server's expiry.
                // So the stream is dropped and a new one opened.
                match outcome {
                    Ok(Err(e)) => debug!(member, "keepalive failed: {e}"),
                    _ => debug!(member, "keepalive unanswered"),
                }
                stream = None;
                member = (member + 1) % renewers.len();
                next = Instant::now() + retry_delay(interval);
            }
        }
    }
}

fn retry_delay(interval: Duration) -> Duration {
    interval.min(Duration::from_millis(100))
}

#[cfg(test)]
mod tests {
    use super::*;

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
