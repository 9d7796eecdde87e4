//! Switchovers in etcd (see [`crate::steer`]): the line as a read sees
//! it, the record `elect switchover` writes, and the leader's watch on it.
//!
//! The record is one key beside the election's prefix,
//! `<election>\0switchover` ([`layout::switchover_record`]), bound to a
//! lease of the command's own whose TTL is the switchover's timeout: a
//! command that ends, however it ends, takes its record with it (it
//! revokes the lease; a killed one's lease runs out by the timeout), so
//! a switchover that is over never acts. Its create revision is its
//! identity in etcd, and the leader's touch of the target is guarded by
//! it ([`Recorded`]).
//!
//! One transaction, guarded by the create revisions of the leader's, the
//! target's and every in-between key as the line was read (so nobody
//! came or went) and by the record's absence (no other switchover), writes
//! the record and makes the in-between candidates step aside: their keys
//! are deleted, each with a release marker bound to the command's lease,
//! so whoever waited on one reads on at once (they never led; the
//! leader's key, older, still stood). Each elect candidate whose key went
//! campaigns again, behind the target. The leader's stint then sees the
//! target next in line and gives way ([`Stint`](super::recipe::Stint)'s
//! rule 5).

use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client::{
    Client, Compare, CompareOp, EventType, GetOptions, PutOptions, SortOrder, SortTarget, Txn,
    TxnOp, TxnOpResponse, WatchOptions,
};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio_util::task::AbortOnDropHandle;
use tracing::debug;

use super::bounds::WatchBounds;
use super::connection::{connect_reader, first_contact};
use super::errors::etcd_error;
use super::keywatch::{next_response, open_watch};
use super::layout::{self, CandidateKey, granted_by_elect};
use super::priority;
use super::recipe::{Recorded, Steer};
use crate::backend::backoff::Backoff;
use crate::backend_kind::Backend;
use crate::config::ElectionConfig;
use crate::counters::warn_counted;
use crate::error::{Error, Result};
use crate::steer::{
    InLine, Line, Outcome, Refusal, Report, Standing, Started, Target, WITHDRAWAL_WITHIN,
    fresh_identity,
};

/// The switchover record's value.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Record {
    /// The identity `elect switchover` reports.
    switchover: String,
    /// The leader's id when it was recorded.
    from: String,
    /// The target: its id, key, create revision and lease.
    to: String,
    target_key: String,
    target_revision: i64,
    target_lease: i64,
    /// An operator's switchover (the target pins itself), not a leader's
    /// failback.
    #[serde(default = "operators")]
    manual: bool,
}

fn operators() -> bool {
    true
}

impl Record {
    fn target(&self) -> CandidateKey {
        CandidateKey {
            key: self.target_key.clone().into_bytes(),
            id: self.to.clone(),
            create_revision: self.target_revision,
            lease: self.target_lease,
        }
    }
}

/// Every candidate key of the election, in line order, and the read's
/// revision.
async fn read_keys(client: &Client, election: &str) -> Result<(Vec<CandidateKey>, i64)> {
    let options = GetOptions::new()
        .with_prefix()
        .with_sort(SortTarget::Create, SortOrder::Ascend);
    let prefix = layout::prefix(election);
    let resp = Box::pin(client.kv_client().get(prefix, Some(options)))
        .await
        .map_err(|e| etcd_error("reading the line", e))?;
    let at = resp.header().map_or(0, |h| h.revision());
    Ok((resp.kvs().iter().map(CandidateKey::from).collect(), at))
}

/// The line as data: the first key leads (Go's rule).
fn as_line(election: &str, keys: &[(CandidateKey, Standing)]) -> Line {
    Line {
        backend: Backend::Etcd,
        election: election.to_owned(),
        candidates: keys
            .iter()
            .enumerate()
            .map(|(i, (key, standing))| InLine {
                priority: standing.priority,
                healthy: standing.healthy,
                id: key.id.clone(),
                token: Some(key.create_revision as u64),
                live: true,
                leads: i == 0,
                by: if granted_by_elect(key.lease) {
                    "elect"
                } else {
                    "go"
                },
            })
            .collect(),
    }
}

/// Reads the line once.
///
/// Errors: [`Unreachable`](crate::Error::Unreachable) when etcd does not
/// answer within the connect timeout. Cancel safe.
pub async fn line(cfg: &ElectionConfig) -> Result<Line> {
    let client = connect_reader(cfg).await?;
    let read = || priority::behind(&client, &cfg.election, 0);
    let (keys, _) = first_contact(cfg, read).await?;
    Ok(as_line(&cfg.election, &keys))
}

/// Moves leadership to `to`, within `timeout`: checks, records, has the
/// in-between candidates step aside, and waits for the target to lead.
///
/// Errors: [`Error::SwitchoverRefused`] before anything changed;
/// [`Unreachable`](crate::Error::Unreachable) when etcd does not answer.
/// A switchover that started reports how it ended in the [`Report`].
///
/// Cancel safety: a dropped future leaves the record until its lease's
/// TTL (the timeout) runs out; it never acts after that.
pub async fn switchover(cfg: &ElectionConfig, to: &Target, timeout: Duration) -> Result<Report> {
    let asked = Instant::now();
    let refused = |refusal| Error::SwitchoverRefused {
        election: cfg.election.clone(),
        refusal,
    };
    let client = connect_reader(cfg).await?;
    let read = || priority::behind(&client, &cfg.election, 0);
    let (with_priorities, _) = first_contact(cfg, read).await?;
    let line = as_line(&cfg.election, &with_priorities);
    let keys: Vec<CandidateKey> = with_priorities.into_iter().map(|(k, _)| k).collect();
    let plan = line.plan(to).map_err(refused)?;
    let (leader, target) = (&keys[plan.leader], &keys[plan.target]);
    let started = Started::new(asked, &leader.id, &target.id);
    if plan.nothing_to_do() {
        return Ok(started.nothing_to_do(target.create_revision as u64));
    }
    let ttl = timeout.as_secs().max(1) + u64::from(timeout.subsec_nanos() > 0);
    // Every step is held to the timeout: a member that does not answer
    // (its disk hung) must not keep the command past it.
    let until = asked + timeout;
    let no_answer = |what: &str| cfg.unreachable(format!("{what}: no answer by the timeout"));
    let mut leases = client.lease_client();
    let granting = Box::pin(leases.grant(ttl as i64, None));
    let lease = tokio::time::timeout_at(until.into(), granting)
        .await
        .map_err(|_| no_answer("granting the switchover's lease"))?
        .map_err(|e| etcd_error("granting the switchover's lease", e))?
        .id();
    let record = Record {
        switchover: started.identity.clone(),
        from: leader.id.clone(),
        to: target.id.clone(),
        target_key: String::from_utf8_lossy(&target.key).into_owned(),
        target_revision: target.create_revision,
        target_lease: target.lease,
        manual: true,
    };
    let aside: Vec<&CandidateKey> = plan.step_aside.iter().map(|&i| &keys[i]).collect();
    let recording = record_it(&client, cfg, &record, lease, [leader, target], &aside);
    let recorded = tokio::time::timeout_at(until.into(), recording)
        .await
        .unwrap_or_else(|_| Err(Recording::Failed(no_answer("recording the switchover"))));
    let outcome = match recorded {
        Ok(at) => {
            debug!(switchover = %started.identity, revision = at, "switchover recorded");
            let mut waited = wait_for(&client, cfg, target, at, until).await;
            // First in line is etcd's word; that an elect target leads is
            // its own, said by its pin (a target paused or cut off is
            // first in line and leads nobody).
            if matches!(waited, Outcome::Done { .. })
                && granted_by_elect(target.lease)
                && !wait_for_pin(&client, cfg, target, until).await
            {
                waited = not_done(UNPINNED, Some(target));
            }
            revoke(&client, lease).await;
            waited
        }
        Err(e) => {
            revoke(&client, lease).await;
            return Err(match e {
                Recording::Refused(refusal) => refused(refusal),
                Recording::Failed(e) => e,
            });
        }
    };
    Ok(started.ended(outcome))
}

/// A leader's own switchover to `target` (a failback, see
/// [`crate::steer::Failback`]): recorded on the leader's lease, with the
/// candidates in `aside` stepping aside, as `elect switchover` does.
/// The leader removes the record once it has given way.
///
/// Errors: the line changed, or the request failed.
pub(super) async fn propose(
    client: &Client,
    cfg: &ElectionConfig,
    leader: &CandidateKey,
    target: &CandidateKey,
    aside: &[&CandidateKey],
) -> Result<i64> {
    let record = Record {
        switchover: fresh_identity(),
        from: leader.id.clone(),
        to: target.id.clone(),
        target_key: String::from_utf8_lossy(&target.key).into_owned(),
        target_revision: target.create_revision,
        target_lease: target.lease,
        manual: false,
    };
    match record_it(client, cfg, &record, leader.lease, [leader, target], aside).await {
        Ok(at) => Ok(at),
        Err(Recording::Failed(e)) => Err(e),
        Err(Recording::Refused(refusal)) => Err(Error::SwitchoverRefused {
            election: cfg.election.clone(),
            refusal,
        }),
    }
}

/// Removes the switchover record if it is bound to `lease`: a leader's
/// own failback, once it has given way (the lease lives on with our next
/// candidacy). One an operator recorded is theirs to remove.
pub(super) async fn withdraw_own(client: &Client, election: &str, lease: i64) {
    let key = layout::switchover_record(election);
    let txn = Txn::new()
        .when([Compare::lease(key.as_str(), CompareOp::Equal, lease)])
        .and_then([TxnOp::delete(key.as_str(), None)]);
    if let Err(e) = Box::pin(client.kv_client().txn(txn)).await {
        debug!("removing our failback's record: {e}; it goes with our lease");
    }
}

/// Why the record was not written.
enum Recording {
    Refused(Refusal),
    Failed(Error),
}

/// The one transaction that records the switchover and has the
/// in-between candidates step aside; the revision it committed at.
async fn record_it(
    client: &Client,
    cfg: &ElectionConfig,
    record: &Record,
    lease: i64,
    standing: [&CandidateKey; 2],
    aside: &[&CandidateKey],
) -> std::result::Result<i64, Recording> {
    let key = layout::switchover_record(&cfg.election);
    let value = serde_json::to_vec(record).expect("a record serializes");
    let unchanged = |k: &CandidateKey| {
        Compare::create_revision(k.key.as_slice(), CompareOp::Equal, k.create_revision)
    };
    let mut when = vec![Compare::create_revision(key.as_str(), CompareOp::Equal, 0)];
    when.extend(
        standing
            .into_iter()
            .chain(aside.iter().copied())
            .map(unchanged),
    );
    let with_lease = || Some(PutOptions::new().with_lease(lease));
    let mut then = vec![TxnOp::put(key.as_str(), value, with_lease())];
    for k in aside {
        then.push(TxnOp::delete(k.key.as_slice(), None));
        let marker = layout::release_marker(&cfg.election, k.create_revision);
        then.push(TxnOp::put(marker, "", with_lease()));
    }
    let txn = Txn::new()
        .when(when)
        .and_then(then)
        .or_else([TxnOp::get(key.as_str(), None)]);
    let resp = Box::pin(client.kv_client().txn(txn))
        .await
        .map_err(|e| Recording::Failed(etcd_error("recording the switchover", e)))?;
    if resp.succeeded() {
        return Ok(resp.header().map_or(0, |h| h.revision()));
    }
    let busy = resp
        .op_responses()
        .iter()
        .any(|op| matches!(op, TxnOpResponse::Get(get) if !get.kvs().is_empty()));
    Err(Recording::Refused(match busy {
        true => Refusal::Busy,
        false => Refusal::LineChanged,
    }))
}

/// Waits until `target` leads (its key first in line), it leaves, or
/// `until`; watching the election from just after revision `from`.
async fn wait_for(
    client: &Client,
    cfg: &ElectionConfig,
    target: &CandidateKey,
    from: i64,
    until: Instant,
) -> Outcome {
    let deadline = tokio::time::Instant::from_std(until);
    let mut last = None;
    let watching = async {
        let bounds = WatchBounds::new(cfg.connect_timeout);
        let mut from = from;
        loop {
            let (keys, at) = match read_keys(client, &cfg.election).await {
                Ok(read) => read,
                Err(e) => {
                    warn_counted!("reading the line: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            last = keys.first().cloned();
            let here = keys.iter().any(|k| same_key(k, target));
            match keys.first() {
                Some(first) if same_key(first, target) => {
                    return Outcome::Done {
                        leader: first.id.clone(),
                        token: first.create_revision as u64,
                        changed: true,
                    };
                }
                _ if !here => {
                    return not_done("the target left the election", keys.first());
                }
                _ => {}
            }
            from = from.max(at);
            if let Err(e) = next_change(client, &cfg.election, from, bounds).await {
                debug!("watching the line: {e}");
            }
        }
    };
    match tokio::time::timeout_at(deadline, watching).await {
        Ok(outcome) => outcome,
        Err(_) => not_done(
            "not done within the timeout; the leader gave no way (is it paused, or cut off?)",
            last.as_ref(),
        ),
    }
}

/// What a switchover whose elect target is first in line but never led
/// reports.
const UNPINNED: &str =
    "the target is first in line but did not take leadership by the timeout (paused, or cut off?)";

/// Waits, until `until`, for the target to pin itself: it leads, and read
/// the record naming it, so no failback undoes the operator's choice (the
/// record must live until then). Whether it did.
async fn wait_for_pin(
    client: &Client,
    cfg: &ElectionConfig,
    target: &CandidateKey,
    until: Instant,
) -> bool {
    let pin = layout::pin_key(&cfg.election);
    let until = tokio::time::Instant::from_std(until);
    loop {
        // A member that does not answer (its disk hung) holds no read
        // past the timeout.
        let mut kv = client.kv_client();
        let read = Box::pin(kv.get(pin.as_str(), None));
        if let Ok(Ok(resp)) = tokio::time::timeout_at(until, read).await
            && resp
                .kvs()
                .first()
                .is_some_and(|kv| kv.value() == target.key.as_slice())
        {
            return true;
        }
        if tokio::time::Instant::now() >= until {
            debug!("the target did not pin itself in time");
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn same_key(a: &CandidateKey, b: &CandidateKey) -> bool {
    a.key == b.key && a.create_revision == b.create_revision
}

fn not_done(reason: &str, leader: Option<&CandidateKey>) -> Outcome {
    Outcome::NotDone {
        reason: reason.to_owned(),
        leader: leader.map(|k| k.id.clone()),
        token: leader.map(|k| k.create_revision as u64),
    }
}

/// Returns at the first change to the election's keys after `from`.
async fn next_change(
    client: &Client,
    election: &str,
    from: i64,
    bounds: WatchBounds,
) -> Result<()> {
    let options = WatchOptions::new()
        .with_prefix()
        .with_start_revision(from + 1);
    let what = "watching the line";
    let prefix = layout::prefix(election);
    let mut stream = open_watch(client, prefix.as_str(), options, what, bounds).await?;
    loop {
        let resp = next_response(&mut stream, what, bounds).await?;
        if resp.canceled() || !resp.events().is_empty() {
            return Ok(());
        }
    }
}

/// Revokes the switchover's lease, within [`WITHDRAWAL_WITHIN`]: unanswered,
/// the lease (whose TTL is the timeout) runs out by itself.
async fn revoke(client: &Client, lease: i64) {
    let mut leases = client.lease_client();
    let revoking = Box::pin(leases.revoke(lease));
    match tokio::time::timeout(WITHDRAWAL_WITHIN, revoking).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => debug!("revoking the switchover's lease: {e}; it runs out by itself"),
        Err(_) => debug!("revoking the switchover's lease: no answer; it runs out by itself"),
    }
}

/// While we lead: the switchover under way, as its record reads, from a
/// read and a watch on its key. Dropping it stops watching.
pub struct SwitchoverWatch {
    steer: watch::Receiver<Option<Steer>>,
    _task: AbortOnDropHandle<()>,
}

impl SwitchoverWatch {
    /// Follows `election`'s switchover record, each watch within `bounds`.
    pub fn start(client: Arc<Client>, election: &str, bounds: WatchBounds) -> SwitchoverWatch {
        let (out, steer) = watch::channel(None);
        let key = layout::switchover_record(election);
        let task = tokio::spawn(async move {
            let mut backoff = Backoff::new();
            loop {
                match follow_record(&client, &key, &out, bounds).await {
                    Ok(()) => backoff.reset(),
                    Err(e) => {
                        debug!("watching the switchover record: {e}");
                        backoff.wait().await;
                    }
                }
            }
        });
        SwitchoverWatch {
            steer,
            _task: AbortOnDropHandle::new(task),
        }
    }

    /// The switchover under way, as last read.
    pub fn steer(&self) -> watch::Receiver<Option<Steer>> {
        self.steer.clone()
    }
}

/// Reads the record, then follows its changes until the watch ends.
async fn follow_record(
    client: &Client,
    key: &str,
    out: &watch::Sender<Option<Steer>>,
    bounds: WatchBounds,
) -> Result<()> {
    let resp = Box::pin(client.kv_client().get(key, None))
        .await
        .map_err(|e| etcd_error("reading the switchover record", e))?;
    let at = resp.header().map_or(0, |h| h.revision());
    publish(
        out,
        resp.kvs()
            .first()
            .map(|kv| (kv.value(), kv.create_revision())),
        key,
    );
    let options = WatchOptions::new().with_start_revision(at + 1);
    let what = "watching the switchover record";
    let mut stream = open_watch(client, key, options, what, bounds).await?;
    loop {
        let resp = next_response(&mut stream, what, bounds).await?;
        if resp.canceled() {
            return Ok(());
        }
        for event in resp.events() {
            let Some(kv) = event.kv() else { continue };
            let now = match event.event_type() {
                EventType::Put => Some((kv.value(), kv.create_revision())),
                EventType::Delete => None,
            };
            publish(out, now, key);
        }
    }
}

/// Publishes the record as a [`Steer`], or none; a record that does not
/// parse is no switchover of ours.
fn publish(out: &watch::Sender<Option<Steer>>, record: Option<(&[u8], i64)>, key: &str) {
    let steer =
        record.and_then(
            |(value, create_revision)| match serde_json::from_slice::<Record>(value) {
                Ok(record) => Some(Steer {
                    switchover: Recorded {
                        key: key.as_bytes().to_vec(),
                        create_revision,
                    },
                    target: record.target(),
                    manual: record.manual,
                }),
                Err(e) => {
                    warn_counted!("a switchover record that does not parse is ignored: {e}");
                    None
                }
            },
        );
    if *out.borrow() != steer {
        if let Some(s) = &steer {
            debug!(to = s.target.id.as_str(), "a switchover is under way");
        }
        out.send_replace(steer);
    }
}
