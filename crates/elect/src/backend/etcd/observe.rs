//! Following who leads an election, the way Go's `Election.Observe` does:
//! the key with the lowest create revision leads, a PUT on it is a
//! proclaim, a DELETE ends its leadership.
//!
//! Leadership is decided from the watch stream and fresh linearizable
//! reads, never from a cached value, so a paused process never reports an
//! old leader as current (etcd 3.4's stale-read bug, #20418): when the
//! leader's key goes, its successor is named only after a linearizable read
//! found its key, as of a revision after the deletion.
//!
//! What a leader change costs the servers, with N candidates each
//! following: one notification and one read per follower, and nothing
//! else. Go's `Observe` reads the sorted prefix and opens a watch on the
//! new leader's key at every change, two requests per follower, and a
//! sorted read costs etcd the whole prefix. Here each follower keeps:
//!
//! - **One watch for its whole life, of the prefix's deletions only**
//!   (`NOPUT`: candidates joining, the release's put of the next key and
//!   proclaims are not sent). It sees the leader's key go, and every key
//!   of its last listing that goes.
//! - **The next keys in line from its last listing** (sorted by create
//!   revision, a few after the leader), less those whose deletion it saw.
//!   When the leader's key goes, it reads the first of them that still
//!   exists, key by key, each read linearizable. That is sound because
//!   create revisions only grow: a key created after the listing sorts
//!   after every listed one, and a listed name deleted and created again
//!   has a new create revision, which tells it apart. Only when the
//!   listed keys run out does it list again (one sorted read, limited to
//!   the next few).
//! - **A second watch only where the first cannot see enough**: while
//!   nobody leads, the prefix's puts, for the first candidate; while a
//!   candidate that is not `elect`'s leads, its key's puts, for Go's
//!   `Proclaim`. An `elect` leader (its lease carries `elect`'s tag) never
//!   proclaims: its key's value is its id for its life.
use etcd_client::{Client, GetOptions, SortOrder, SortTarget, WatchFilterType, WatchOptions};
use tokio::sync::watch;
use tracing::debug;

use super::bounds::WatchBounds;
use super::errors::etcd_error;
use super::keywatch::{next_response, open_watch};
use super::layout::{CandidateKey, granted_by_elect};
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
async fn read_first(
    client: &Client,
    prefix: &str,
    successors: i64,
) -> Result<(View, Vec<CandidateKey>)> {
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

/// How many keys after the leader a listing keeps for the next changes:
/// every follower lists again once that many leaders have gone, so a
/// change costs each follower `1 / SUCCESSORS` of a sorted read on top of
/// its one read of the successor (8 requests per change with a thousand
/// followers). A listed key takes 16 bytes (see [`Listed`]).
const SUCCESSORS: i64 = 128;

/// A key in line as listed: its lease, which names it (Go's layout:
/// `<prefix><lease id in hex>`), and its create revision, which tells this
/// life of the name from any other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Listed {
    lease: i64,
    create_revision: i64,
}

/// The keys after the leader, in order, as last listed.
type Successors = std::collections::VecDeque<Listed>;

/// The lease a key of `prefix` is named after, if it is named the way Go's
/// layout names it.
fn named_lease(prefix: &str, key: &[u8]) -> Option<i64> {
    let hex = std::str::from_utf8(key.strip_prefix(prefix.as_bytes())?).ok()?;
    let lease = i64::from_str_radix(hex, 16).ok()?;
    (format!("{lease:x}") == hex).then_some(lease)
}

/// The keys after the leader, as [`Listed`], up to the first that is not
/// named after its lease (a key someone wrote by hand): from there a
/// listing decides.
fn successors(prefix: &str, keys: Vec<CandidateKey>) -> Successors {
    keys.into_iter()
        .map_while(|k| {
            (named_lease(prefix, &k.key) == Some(k.lease)).then_some(Listed {
                lease: k.lease,
                create_revision: k.create_revision,
            })
        })
        .collect()
}

/// What a follower knows of the line (sans-IO): the leader as last read,
/// the keys after it from its last listing, and the deletions seen since.
#[derive(Debug)]
struct Line {
    /// The leader as of a linearizable read (or a proclaim after it).
    view: View,
    /// The keys after the leader from the last listing that no deletion
    /// seen since has removed, in create order.
    successors: Successors,
    /// The revision of the last listing: the deletions up to it are in it.
    listed_at: i64,
}

impl Line {
    /// A line from a listing: `view` and the keys after its leader.
    fn listed(view: View, successors: Successors) -> Line {
        Line {
            listed_at: view.revision,
            view,
            successors,
        }
    }

    /// `key` (of `prefix`) was deleted at revision `at`: whether that
    /// ends the leader's leadership. A deletion the last read already
    /// reflects (an earlier life of the same name) changes nothing.
    fn deleted(&mut self, prefix: &str, key: &[u8], at: i64) -> bool {
        if at > self.listed_at
            && let Some(lease) = named_lease(prefix, key)
        {
            self.successors.retain(|k| k.lease != lease);
        }
        at > self.view.revision && self.view.names_leader(key)
    }

    /// A put on the leader's key (a proclaim) at its `mod_revision`.
    fn proclaimed(&mut self, key: CandidateKey, at: i64) -> bool {
        let same = self
            .view
            .leader
            .as_ref()
            .is_some_and(|l| l.key == key.key && l.create_revision == key.create_revision);
        if same && at > self.view.revision {
            self.view.leader = Some(key);
            self.view.revision = at;
        }
        same
    }

    /// The second watch this line needs beside the deletions (see the
    /// module doc): its key and options, or `None`.
    fn extra_watch(&self, prefix: &str) -> Option<(Vec<u8>, WatchOptions)> {
        let from = WatchOptions::new()
            .with_start_revision(self.view.revision + 1)
            .with_filters([WatchFilterType::NoDelete]);
        match &self.view.leader {
            None => Some((prefix.as_bytes().to_vec(), from.with_prefix())),
            Some(l) if !granted_by_elect(l.lease) => Some((l.key.clone(), from)),
            Some(_) => None,
        }
    }
}

/// Reads the leader and the next [`SUCCESSORS`] keys in line.
async fn list(client: &Client, prefix: &str) -> Result<Line> {
    let (view, keys) = read_first(client, prefix, SUCCESSORS).await?;
    Ok(Line::listed(view, successors(prefix, keys)))
}

/// After the leader's key was deleted: the first key `known` from the last
/// listing that still exists (same create revision) leads. `None` when none
/// is left and a listing must decide.
async fn read_successor(
    client: &Client,
    prefix: &str,
    known: &mut Successors,
) -> Result<Option<View>> {
    while let Some(next) = known.pop_front() {
        let key = format!("{prefix}{:x}", next.lease);
        let resp = Box::pin(client.kv_client().get(key, None))
            .await
            .map_err(|e| etcd_error("reading the leader", e))?;
        if let Some(key) = resp.kvs().first().map(CandidateKey::from)
            && key.create_revision == next.create_revision
        {
            return Ok(Some(View {
                leader: Some(key),
                current: true,
                revision: resp.header().map_or(0, |h| h.revision()),
            }));
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
    bounds: WatchBounds,
) {
    let mut line = Line::listed(first, Successors::new());
    let mut backoff = Backoff::new();
    // Watches that broke in a row. The first break is usually the member
    // serving the watch going away (a restart): the fresh linearizable
    // listing below goes through another member, and the view stays
    // current if it answers. Only breaks in a row mean etcd is out of reach.
    let mut broken = 0u32;
    loop {
        publish_if_changed(&out, line.view.clone());
        match follow_line(&client, &prefix, &mut line, &out, &mut broken, bounds).await {
            Ok(()) => {
                backoff.reset();
                broken = 0;
            }
            Err(e) => {
                broken += 1;
                if broken == 1 {
                    debug!("following the leader broke ({e}); listing afresh");
                } else {
                    lost_contact(&out, &e);
                    if out.is_closed() {
                        return;
                    }
                    backoff.wait().await;
                }
            }
        }
        if out.is_closed() {
            return;
        }
        // Reads that failed in a row: the client balances over the members,
        // so the next read may well go to one that answers (a restarted
        // member's connection fails on first use); only a third failure
        // marks the view unknown.
        let mut failed = 0;
        line = loop {
            match list(&client, &prefix).await {
                Ok(listed) => break listed,
                Err(e) => {
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

/// Follows `line` from its listing on one watch of the prefix's deletions,
/// publishing each new leader (and a Go leader's proclaims), listing again
/// on the same watch when the listed keys run out or a candidate appears
/// while nobody leads. Returns when the server cancelled a watch
/// (compaction) or nobody listens any more. `broken` is reset once the
/// server answers the watch.
///
/// The deletions watch outlives the listings: a deletion at or before a
/// listing's revision is already in it, and [`Line::deleted`] ignores it.
///
/// Errors: a watch broke or a read failed.
async fn follow_line(
    client: &Client,
    prefix: &str,
    line: &mut Line,
    out: &watch::Sender<View>,
    broken: &mut u32,
    bounds: WatchBounds,
) -> Result<()> {
    let deletions = WatchOptions::new()
        .with_prefix()
        .with_start_revision(line.listed_at + 1)
        .with_filters([WatchFilterType::NoPut]);
    let mut deletions =
        open_watch(client, prefix, deletions, "watching the leader", bounds).await?;
    loop {
        publish_if_changed(out, line.view.clone());
        let mut extra = match line.extra_watch(prefix) {
            Some((key, options)) => {
                let what = "watching the leader's key";
                Some(open_watch(client, key, options, what, bounds).await?)
            }
            None => None,
        };
        // Until the leader's key goes.
        loop {
            let resp = tokio::select! {
                r = next_response(&mut deletions, "watching the leader", bounds) => r?,
                // Boxed: only beside a Go leader, and it would double the
                // follower's future (see `a_candidates_futures_stay_small`).
                r = async { Box::pin(next_response(extra.as_mut().expect("guarded"), "watching the leader's key", bounds)).await }, if extra.is_some() => {
                    let resp = r?;
                    if resp.canceled() {
                        return Ok(());
                    }
                    let Some(leader) = line.view.leader.clone() else {
                        // A candidate while nobody led: list.
                        if resp.events().is_empty() {
                            continue;
                        }
                        break;
                    };
                    for kv in resp.events().iter().filter_map(|e| e.kv()) {
                        if !line.proclaimed(CandidateKey::from(kv), kv.mod_revision()) {
                            debug!(leader = %leader.id, "a put on the leader's key of another life");
                        }
                    }
                    publish_if_changed(out, line.view.clone());
                    continue;
                }
                _ = out.closed() => return Ok(()),
            };
            *broken = 0;
            if resp.canceled() {
                return Ok(());
            }
            let mut gone = false;
            for kv in resp.events().iter().filter_map(|e| e.kv()) {
                gone |= line.deleted(prefix, kv.key(), kv.mod_revision());
            }
            if gone {
                break;
            }
        }
        match read_successor(client, prefix, &mut line.successors).await? {
            Some(view) => line.view = view,
            None => *line = list(client, prefix).await?,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ELECT: i64 = 0x1_e1ec;
    const GO: i64 = 0x694d_7b2a_9c01;

    fn key(lease: i64, create_revision: i64) -> CandidateKey {
        CandidateKey {
            key: format!("e/{lease:x}").into_bytes(),
            id: format!("{lease:x}"),
            create_revision,
            lease,
        }
    }

    fn line(leader: Option<CandidateKey>, after: Vec<CandidateKey>, at: i64) -> Line {
        Line::listed(
            View {
                leader,
                current: true,
                revision: at,
            },
            successors("e/", after),
        )
    }

    fn leases(l: &Line) -> Vec<i64> {
        l.successors.iter().map(|s| s.lease).collect()
    }

    #[test]
    fn the_leaders_deletion_ends_it_and_others_leave_the_line() {
        let (a, b, c) = (key(0x1_e1ec, 5), key(0x2_e1ec, 6), key(GO, 7));
        let mut l = line(Some(a.clone()), vec![b.clone(), c], 10);
        assert!(
            !l.deleted("e/", &b.key, 11),
            "a successor's deletion is no change"
        );
        assert_eq!(leases(&l), [GO]);
        assert!(l.deleted("e/", &a.key, 12));
    }

    #[test]
    fn a_deletion_the_last_read_reflects_changes_nothing() {
        let (a, b) = (key(ELECT, 5), key(0x2_e1ec, 9));
        // Listed at 10 with `b` created at 9: a deletion of the name `b`
        // at 8 was of an earlier life, and one of `a` at 10 is in the read.
        let mut l = line(Some(a.clone()), vec![b.clone()], 10);
        assert!(!l.deleted("e/", &b.key, 8));
        assert!(!l.deleted("e/", &a.key, 10));
        assert_eq!(leases(&l), [b.lease]);
        // A successor read at 20 leads: a deletion of its name at or
        // before 20 is not its own.
        l.view = View {
            leader: Some(b.clone()),
            current: true,
            revision: 20,
        };
        assert!(!l.deleted("e/", &b.key, 15));
        assert!(l.deleted("e/", &b.key, 21));
    }

    #[test]
    fn a_key_not_named_after_its_lease_ends_the_listed_line() {
        let mut odd = key(0x3_e1ec, 8);
        odd.key = b"e/by-hand".to_vec();
        let l = line(
            Some(key(ELECT, 5)),
            vec![key(0x2_e1ec, 6), odd, key(0x4_e1ec, 9)],
            10,
        );
        assert_eq!(leases(&l), [0x2_e1ec]);
        assert_eq!(named_lease("e/", b"e/0abc"), None, "not Go's spelling");
        assert_eq!(named_lease("e/", b"e/abc"), Some(0xabc));
        assert_eq!(named_lease("e/", b"f/abc"), None);
    }

    #[test]
    fn a_proclaim_renames_the_leader_and_another_life_does_not() {
        let a = key(GO, 5);
        let mut l = line(Some(a.clone()), vec![], 10);
        let mut proclaimed = a.clone();
        proclaimed.id = "proclaimed".into();
        assert!(l.proclaimed(proclaimed.clone(), 12));
        assert_eq!(l.view.leader, Some(proclaimed));
        assert_eq!(l.view.revision, 12);
        assert!(!l.proclaimed(key(GO, 13), 13));
    }

    #[test]
    fn a_second_watch_only_while_nobody_or_a_go_candidate_leads() {
        assert!(
            line(Some(key(ELECT, 5)), vec![], 10)
                .extra_watch("e/")
                .is_none()
        );
        let (on_key, _) = line(Some(key(GO, 5)), vec![], 10)
            .extra_watch("e/")
            .unwrap();
        assert_eq!(on_key, format!("e/{GO:x}").into_bytes());
        let (on_prefix, _) = line(None, vec![], 10).extra_watch("e/").unwrap();
        assert_eq!(on_prefix, b"e/");
    }
}
