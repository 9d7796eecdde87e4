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

use etcd_client::{Client, EventType, WatchOptions};
use tracing::{info, warn};

use std::time::Duration;

use super::bounds::WatchBounds;
use super::connection::Attempts;
use super::keywatch::{next_response, open_watch};
use super::layout::{self, Ours};
use super::recipe::{ClaimAnswer, Transaction};
use super::transaction;
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
        let txn = Transaction::claim(election, ours);
        let claimed = transaction::send(client, &txn, "claiming our tenure");
        let claimed = attempts.send("claiming our tenure", claimed).await;
        match claimed.map(|answer| answer.claimed(election, ours.lease)) {
            Ok(ClaimAnswer::KeyGone) => return Claim::KeyGone,
            Ok(ClaimAnswer::Alone(at)) => {
                if waited {
                    info!("the other tenure is over; leading");
                }
                return Claim::Ours(at);
            }
            Ok(ClaimAnswer::Others(others, at)) => {
                if !waited {
                    info!(
                        others = others.len(),
                        "another candidacy's tenure is not over (its work may still be \
                         stopping); waiting for it"
                    );
                    waited = true;
                }
                let bounds = WatchBounds::new(patience);
                if let Err(e) = wait_for_a_deletion(client, election, &others, at, bounds).await {
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

/// Returns once one of `others` is deleted after revision `at` (or the
/// server cancelled the watch): time to read the markers again.
async fn wait_for_a_deletion(
    client: &Client,
    election: &str,
    others: &[Vec<u8>],
    at: i64,
    bounds: WatchBounds,
) -> Result<()> {
    let options = WatchOptions::new()
        .with_prefix()
        .with_start_revision(at + 1);
    let prefix = layout::tenure_prefix(election);
    let what = "watching the tenure markers";
    let mut stream = open_watch(client, prefix, options, what, bounds).await?;
    loop {
        let resp = next_response(&mut stream, what, bounds).await?;
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
