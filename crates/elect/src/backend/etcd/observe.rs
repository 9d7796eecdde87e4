//! Following who leads an election, the way Go's `Election.Observe` does:
//! read the key with the lowest create revision, then watch only that key
//! (a PUT is a proclaim, a DELETE ends its leadership). With no leader,
//! watch the prefix for the first new candidate.
//!
//! Leadership is decided from the watch stream and fresh linearizable reads,
//! never from a cached value, so a paused process never reports an old
//! leader as current (etcd 3.4's stale-read bug, #20418).
//!
//! A sorted read of the prefix costs etcd the whole prefix (it sorts by
//! create revision after reading every key), and with a thousand
//! candidates each following the leader, a thousand such reads per leader
//! change. So the follower keeps the next few keys in line from its last
//! listing, and when the leader's key goes it reads the first of them that
//! still exists, key by key, each read linearizable. That is sound because
//! create revisions only grow: a key created after the listing sorts after
//! every listed one, and a listed name deleted and created again has a new
//! create revision, which tells it apart.

use etcd_client::{Client, EventType, GetOptions, SortOrder, SortTarget, WatchOptions};
use tokio::sync::watch;
use tracing::debug;

use super::errors::etcd_error;
use super::keywatch::open_watch;
use super::layout::CandidateKey;
use crate::backend::backoff::Backoff;
use crate::backend::publish::{Observed, publish_if_changed};
use crate::counters::warn_counted;
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
    read_first(client, prefix, 0).await.map(|(view, _)| view)
}

/// The leader and up to `successors` keys after it, in create order, with
/// one linearizable read.
async fn read_first(client: &Client, prefix: &str, successors: i64) -> Result<(View, Successors)> {
    let options = GetOptions::new()
        .with_prefix()
        .with_sort(SortTarget::Create, SortOrder::Ascend)
        .with_limit(successors + 1);
    let resp = Box::pin(client.kv_client().get(prefix, Some(options)))
        .await
        .map_err(|e| etcd_error("reading the leader", e))?;
    let mut keys = resp.kvs().iter().map(CandidateKey::from);
    let view = View {
        leader: keys.next(),
        current: true,
        revision: resp.header().map_or(0, |h| h.revision()),
    };
    Ok((view, keys.collect()))
}

/// How many keys after the leader a listing keeps for the next changes.
const SUCCESSORS: i64 = 16;

/// The keys after the leader, in order, as last listed.
type Successors = std::collections::VecDeque<CandidateKey>;

/// Reads the leader and the next [`SUCCESSORS`] keys in line.
async fn read_leader_and_successors(
    client: &Client,
    prefix: &str,
    known: &mut Successors,
) -> Result<View> {
    let (view, next) = read_first(client, prefix, SUCCESSORS).await?;
    *known = next;
    Ok(view)
}

/// After the leader's key was deleted: the first key `known` from the last
/// listing that still exists (same create revision) leads. `None` when none
/// is left and a listing must decide.
async fn read_successor(client: &Client, known: &mut Successors) -> Result<Option<View>> {
    while let Some(next) = known.front() {
        let resp = Box::pin(client.kv_client().get(next.key.clone(), None))
            .await
            .map_err(|e| etcd_error("reading the leader", e))?;
        match resp.kvs().first().map(CandidateKey::from) {
            Some(key) if key.create_revision == next.create_revision => {
                known.pop_front();
                return Ok(Some(View {
                    leader: Some(key),
                    current: true,
                    revision: resp.header().map_or(0, |h| h.revision()),
                }));
            }
            _ => {
                known.pop_front();
            }
        }
    }
    Ok(None)
}

/// Keeps `out` current until the receiver side is dropped. Errors are
/// retried with backoff; while they last the view is marked not current.
pub async fn follow(
    client: std::sync::Arc<Client>,
    prefix: String,
    first: View,
    out: watch::Sender<View>,
) {
    let mut view = first;
    let mut known = Successors::new();
    let mut backoff = Backoff::new();
    // Watches that broke in a row. The first break is usually the member
    // serving the watch going away (a restart): the fresh linearizable
    // read below goes through another member, and the view stays current
    // if it answers. Only breaks in a row mean etcd is out of reach.
    let mut broken = 0u32;
    loop {
        publish_if_changed(&out, view.clone());
        let leader_gone = match watch_until_change(&client, &prefix, &view, &out, &mut broken).await
        {
            Ok(gone) => {
                backoff.reset();
                broken = 0;
                gone
            }
            Err(e) => {
                broken += 1;
                if broken == 1 {
                    debug!("the watch broke ({e}); reading the leader afresh");
                } else {
                    lost_contact(&out, &e);
                    if out.is_closed() {
                        return;
                    }
                    backoff.wait().await;
                }
                false
            }
        };
        if out.is_closed() {
            return;
        }
        if !leader_gone {
            known.clear();
        }
        // Reads that failed in a row: the client balances over the members,
        // so the next read may well go to one that answers (a restarted
        // member's connection fails on first use); only a third failure
        // marks the view unknown.
        let mut failed = 0;
        view = loop {
            let next = match read_successor(&client, &mut known).await {
                Ok(Some(v)) => Ok(v),
                Ok(None) => read_leader_and_successors(&client, &prefix, &mut known).await,
                Err(e) => Err(e),
            };
            match next {
                Ok(v) => break v,
                Err(e) => {
                    known.clear();
                    failed += 1;
                    if failed < 3 {
                        debug!("reading the leader: {e}; again, through any member");
                        continue;
                    }
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
        warn_counted!("lost contact with etcd, the leader is unknown until it is back: {e}");
    } else {
        debug!("observer: {e}");
    }
}

/// Watches from just after `view.revision` and returns once the leader may
/// have changed (`true` when its key was deleted), publishing proclaims
/// (new values of the leader's key) on the way. `broken` is reset once the
/// server answers the watch.
async fn watch_until_change(
    client: &Client,
    prefix: &str,
    view: &View,
    out: &watch::Sender<View>,
    broken: &mut u32,
) -> Result<bool> {
    let from = WatchOptions::new().with_start_revision(view.revision + 1);
    let (key, options) = match &view.leader {
        Some(leader) => (leader.key.clone(), from),
        None => (prefix.as_bytes().to_vec(), from.with_prefix()),
    };
    let mut stream = open_watch(client, key, options, "watching the leader").await?;
    loop {
        let resp = tokio::select! {
            r = stream.message() => r.map_err(|e| etcd_error("watching the leader", e))?,
            _ = out.closed() => return Ok(false),
        };
        let Some(resp) = resp else {
            return Err(etcd_error("watching the leader", "stream closed"));
        };
        *broken = 0;
        if resp.canceled() {
            // Compacted or cancelled by the server: read afresh.
            return Ok(false);
        }
        for event in resp.events() {
            match (event.event_type(), event.kv(), &view.leader) {
                (EventType::Put, Some(kv), Some(_)) => {
                    let mut next = view.clone();
                    next.leader = Some(CandidateKey::from(kv));
                    next.revision = kv.mod_revision();
                    publish_if_changed(out, next);
                }
                (EventType::Put, _, None) => return Ok(false),
                (EventType::Delete, _, leader) => return Ok(leader.is_some()),
                (EventType::Put, None, Some(_)) => {}
            }
        }
    }
}
