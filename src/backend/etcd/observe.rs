//! Following who leads an election, the way Go's `Election.Observe` does:
//! read the key with the lowest create revision, then watch only that key
//! (a PUT is a proclaim, a DELETE ends its leadership). With no leader,
//! watch the prefix for the first new candidate.
//!
//! Leadership is decided from the watch stream and fresh linearizable reads,
//! never from a cached value, so a paused process never reports an old
//! leader as current (etcd 3.4's stale-read bug, #20418).

use etcd_client::{Client, EventType, GetOptions, SortOrder, SortTarget, WatchOptions};
use tokio::sync::watch;
use tracing::{debug, warn};

use super::etcd_error;
use super::layout::CandidateKey;
use crate::backend::backoff::Backoff;
use crate::backend::report::{Observed, publish_if_changed};
use crate::error::Result;
use crate::leadership::Leadership;

/// The leader as of one etcd revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    pub leader: Option<CandidateKey>,
    /// `false` while the watch is broken and the leader may have changed.
    pub current: bool,
    /// The etcd revision the view reflects.
    pub revision: i64,
}

impl Observed for View {
    fn names_leader(&self, key: &[u8]) -> bool {
        self.leader.as_ref().is_some_and(|l| l.key == key)
    }

    fn to_leadership(&self) -> Leadership {
        if !self.current {
            return Leadership::unknown();
        }
        Leadership::observed(
            self.leader
                .as_ref()
                .map(|l| (l.id.clone(), l.create_revision as u64)),
        )
    }
}

/// Reads the current leader of `prefix` with a linearizable read.
///
/// Errors: the read failed. Cancel safe.
pub async fn read_leader(client: &Client, prefix: &str) -> Result<View> {
    let options = GetOptions::new()
        .with_prefix()
        .with_sort(SortTarget::Create, SortOrder::Ascend)
        .with_limit(1);
    let resp = client
        .kv_client()
        .get(prefix, Some(options))
        .await
        .map_err(|e| etcd_error("reading the leader", e))?;
    Ok(View {
        leader: resp.kvs().first().map(CandidateKey::from),
        current: true,
        revision: resp.header().map_or(0, |h| h.revision()),
    })
}

/// Keeps `out` current until the receiver side is dropped. Errors are
/// retried with backoff; while they last the view is marked not current.
pub async fn follow(client: Client, prefix: String, first: View, out: watch::Sender<View>) {
    let mut view = first;
    let mut backoff = Backoff::new();
    loop {
        publish_if_changed(&out, view.clone());
        match watch_until_change(&client, &prefix, &view, &out).await {
            Ok(()) => backoff.reset(),
            Err(e) => {
                lost_contact(&out, &e);
                if out.is_closed() {
                    return;
                }
                backoff.wait().await;
            }
        }
        if out.is_closed() {
            return;
        }
        view = loop {
            match read_leader(&client, &prefix).await {
                Ok(v) => break v,
                Err(e) => {
                    lost_contact(&out, &e);
                    backoff.wait().await;
                }
            }
        };
    }
}

/// Keeps the last view but marks it as not current. The first failure of
/// a stretch is a warning (and counts as a backend error in the metrics);
/// the retries that follow are debug noise.
fn lost_contact(out: &watch::Sender<View>, e: &impl std::fmt::Display) {
    if out.send_if_modified(|v| std::mem::replace(&mut v.current, false)) {
        warn!("lost contact with etcd, the leader is unknown until it is back: {e}");
    } else {
        debug!("observer: {e}");
    }
}

/// Watches from just after `view.revision` and returns once the leader may
/// have changed, publishing proclaims (new values of the leader's key) on
/// the way.
async fn watch_until_change(
    client: &Client,
    prefix: &str,
    view: &View,
    out: &watch::Sender<View>,
) -> Result<()> {
    let from = WatchOptions::new().with_start_revision(view.revision + 1);
    let (key, options) = match &view.leader {
        Some(leader) => (leader.key.clone(), from),
        None => (prefix.as_bytes().to_vec(), from.with_prefix()),
    };
    let mut stream = client
        .watch_client()
        .watch(key, Some(options))
        .await
        .map_err(|e| etcd_error("watching the leader", e))?;
    loop {
        let resp = tokio::select! {
            r = stream.message() => r.map_err(|e| etcd_error("watching the leader", e))?,
            _ = out.closed() => return Ok(()),
        };
        let Some(resp) = resp else {
            return Err(etcd_error("watching the leader", "stream closed"));
        };
        if resp.canceled() {
            // Compacted or cancelled by the server: read afresh.
            return Ok(());
        }
        for event in resp.events() {
            match (event.event_type(), event.kv(), &view.leader) {
                (EventType::Put, Some(kv), Some(_)) => {
                    let mut next = view.clone();
                    next.leader = Some(CandidateKey::from(kv));
                    next.revision = kv.mod_revision();
                    publish_if_changed(out, next);
                }
                (EventType::Put, _, None) | (EventType::Delete, _, _) => return Ok(()),
                (EventType::Put, None, Some(_)) => {}
            }
        }
    }
}
