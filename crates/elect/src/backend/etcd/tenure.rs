//! Tenure markers: which candidacies may be leading, so that none starts
//! while another's work may still run.
//!
//! The queue alone does not say it. When an operator deletes the leading
//! key by hand, the old leader learns so from its watch and stops its
//! command, which takes up to its `--grace`; a successor that was waiting
//! on that key waits for the old lease (see `campaign`), but a candidate
//! that was not (one that joins after the delete, or was queued behind
//! another key that went meanwhile) finds no older key and nothing else in
//! the election. the handover model (`model::handover`) found that overlap.
//!
//! So every `elect` candidacy that leads holds a marker,
//! `<election>\0leading/<lease id in hex>`, bound to its lease and
//! outside the election's prefix (Go candidates never see it):
//! - A candidate that reads its turn **claims** before it leads: one
//!   transaction, guarded by its own key's create revision and lease,
//!   writes its marker and reads every marker; it leads once no other is
//!   left, watching the markers' deletions meanwhile. Two claims in either
//!   order: the later one sees the earlier marker.
//! - A resigning leader deletes its marker in its release, after its work
//!   stopped; its touch of the next in line (see `handover`) writes the
//!   successor's marker in the same transaction, bound to the successor's
//!   lease, so a handover still needs no request of the successor's.
//! - A leader that lost its key stops its work, then revokes its lease
//!   (or, on a session's lease, releases), and its marker goes with it; a
//!   crashed one's goes when its lease expires, when its work has stopped
//!   too (its deadline came first).
//!
//! A user whose etcd permission covers exactly `<election>/` cannot write
//! markers: the claim then says so, and the candidate reads its key back
//! and leads as before, without this protection (as without release
//! markers). Otherwise the claim's guard is that read back (safety rule
//! 3): a first candidate or one that waited for a lease does not read its
//! key on its own as well.

use etcd_client::{Client, Compare, CompareOp, EventType, GetOptions, PutOptions, Txn, TxnOp};
use etcd_client::{TxnOpResponse, WatchOptions};
use tracing::{info, warn};

use std::time::Duration;

use super::connection::Attempts;
use super::errors::etcd_error;
use super::keywatch::{next_response, open_watch};
use super::layout::{self, Ours};
use crate::backend::backoff::Backoff;
use crate::counters::warn_counted;
use crate::error::Result;

pub use super::recipe::Claim;

/// Claims the tenure for our candidacy (see the module docs): returns
/// once our marker is the only one, or our key is gone. Retries failures
/// until then, each attempt bounded (see [`Attempts`]: the claim is the
/// same marker under the same guard, so an abandoned attempt costs only
/// the retry); the caller bounds it all with the lease deadline.
///
/// Cancel safe: a marker written before the cancellation is bound to our
/// lease, and the caller's release or revoke removes it.
pub async fn claim(client: &Client, election: &str, ours: Ours<'_>, patience: Duration) -> Claim {
    let marker = layout::tenure_marker(election, ours.lease);
    let mut backoff = Backoff::new();
    let mut attempts = Attempts::new(patience);
    let mut waited = false;
    loop {
        let claimed = claim_once(client, election, ours, &marker);
        match attempts.send("claiming our tenure", claimed).await {
            Ok(Read::KeyGone) => return Claim::KeyGone,
            Ok(Read::Alone(at)) => {
                if waited {
                    info!("the other tenure is over; leading");
                }
                return Claim::Ours(at);
            }
            Ok(Read::Others(others, at)) => {
                if !waited {
                    info!(
                        others = others.len(),
                        "another candidacy's tenure is not over (its work may still be \
                         stopping); waiting for it"
                    );
                    waited = true;
                }
                if let Err(e) = wait_for_a_deletion(client, election, &others, at).await {
                    warn_counted!("waiting for another tenure to end: {e}");
                    backoff.wait().await;
                }
            }
            Err(e) if e.to_string().contains("permission denied") => {
                warn!(
                    marker,
                    "cannot write our tenure marker (permission denied): leading without it; \
                     grant readwrite on the election's name as a prefix, not only on \
                     `<election>/`"
                );
                return Claim::Unwritable;
            }
            Err(e) => {
                warn_counted!("{e}; retrying");
                backoff.wait().await;
            }
        }
    }
}

/// What one claim's transaction found.
enum Read {
    KeyGone,
    Alone(i64),
    /// Other candidacies' markers, at the read's revision.
    Others(Vec<Vec<u8>>, i64),
}

/// If our key is still ours: put our marker (again, unchanged if it was
/// there) and read every marker's key.
async fn claim_once(client: &Client, election: &str, ours: Ours<'_>, marker: &str) -> Result<Read> {
    let txn = Txn::new()
        .when([
            Compare::create_revision(ours.key, CompareOp::Equal, ours.create_revision),
            Compare::lease(ours.key, CompareOp::Equal, ours.lease),
        ])
        .and_then([
            TxnOp::put(marker, "", Some(PutOptions::new().with_lease(ours.lease))),
            TxnOp::get(
                layout::tenure_prefix(election),
                Some(GetOptions::new().with_prefix().with_keys_only()),
            ),
        ]);
    let resp = Box::pin(client.kv_client().txn(txn))
        .await
        .map_err(|e| etcd_error("claiming our tenure", e))?;
    if !resp.succeeded() {
        return Ok(Read::KeyGone);
    }
    let at = resp.header().map_or(0, |h| h.revision());
    let others: Vec<Vec<u8>> = resp
        .op_responses()
        .into_iter()
        .filter_map(|op| match op {
            TxnOpResponse::Get(get) => Some(get),
            _ => None,
        })
        .flat_map(|get| {
            get.kvs()
                .iter()
                .map(|kv| kv.key().to_vec())
                .collect::<Vec<_>>()
        })
        .filter(|key| key.as_slice() != marker.as_bytes())
        .collect();
    Ok(match others.is_empty() {
        true => Read::Alone(at),
        false => Read::Others(others, at),
    })
}

/// Returns once one of `others` is deleted after revision `at` (or the
/// server cancelled the watch): time to read the markers again.
async fn wait_for_a_deletion(
    client: &Client,
    election: &str,
    others: &[Vec<u8>],
    at: i64,
) -> Result<()> {
    let options = WatchOptions::new()
        .with_prefix()
        .with_start_revision(at + 1);
    let prefix = layout::tenure_prefix(election);
    let mut stream = open_watch(client, prefix, options, "watching the tenure markers").await?;
    loop {
        let resp = next_response(&mut stream, "watching the tenure markers").await?;
        if resp.canceled() {
            return Ok(());
        }
        let deleted = resp.events().iter().any(|event| {
            event.event_type() == EventType::Delete
                && event
                    .kv()
                    .is_some_and(|kv| others.iter().any(|k| k.as_slice() == kv.key()))
        });
        if deleted {
            return Ok(());
        }
    }
}

/// The part of a release that ends our tenure: our marker's deletion.
pub fn end(election: &str, lease: i64) -> TxnOp {
    TxnOp::delete(layout::tenure_marker(election, lease), None)
}

/// The part of a touch that hands our tenure on: the successor's marker,
/// bound to its lease.
pub fn hand_on(election: &str, lease: i64) -> TxnOp {
    TxnOp::put(
        layout::tenure_marker(election, lease),
        "",
        Some(PutOptions::new().with_lease(lease)),
    )
}
