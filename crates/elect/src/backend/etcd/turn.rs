//! Waiting for our turn: the I/O of the [`WaitForTurn`] recipe, from our
//! key's creation until no older key is left.

use std::time::Duration;

use etcd_client::{Client, Compare, CompareOp, GetOptions, Txn, TxnOp};
use tokio::sync::watch;
use tokio::time::sleep;
use tracing::debug;

use super::bounds::WatchBounds;
use super::connection::retry;
use super::errors::etcd_error;
use super::keywatch::{TurnWatch, Woken};
use super::layout::{self, CandidateKey, Ours};
use super::recipe::{Turn, TurnCheck, TurnInput, TurnNext, TurnRequest, WaitForTurn};
use super::transaction::read_only;
use crate::backend::cadence::Cadence;
use crate::backend::recipe::{Heard, Io, Recipe, Step, drive};
use crate::clock::BootInstant;
use crate::counters::{PROCESS, warn_counted};
use crate::error::Result;

/// Waits until no key older than ours is left, waiting only on our
/// predecessor: the I/O of [`WaitForTurn`], whose module says how it
/// decides. A resigning elect leader hands over by touching our key (see
/// the `handover` module): we lead at that event with no request of our
/// own. When the predecessor goes otherwise, one read tells what we need
/// to lead, served by a member from its own state if it can (see
/// [`check_turn_locally`]). Each predecessor found goes to `predecessor`
/// (its key), which tells the campaign whether we are next in line; the
/// watch is bounded as the lease's `cadence` says ([`WatchBounds::at`]).
pub(super) async fn wait_for_turn(
    client: &Client,
    election: &str,
    ours: Ours<'_>,
    patience: Duration,
    predecessor: &watch::Sender<Option<Vec<u8>>>,
    cadence: watch::Receiver<Cadence>,
) -> Turn {
    let mut io = TurnIo {
        client,
        election,
        prefix: layout::prefix(election),
        ours,
        patience,
        watch: None,
        predecessor,
        cadence,
    };
    drive(&mut WaitForTurn::new(), &mut io).await
}

/// The turn's I/O: the read of our predecessor, its watch (with our own
/// key's, on one stream), and the read of our turn racing that watch.
struct TurnIo<'a> {
    client: &'a Client,
    election: &'a str,
    prefix: String,
    ours: Ours<'a>,
    patience: Duration,
    /// The stream on the predecessor's key and ours, while we wait on it.
    watch: Option<TurnWatch>,
    /// The predecessor's key, as last found.
    predecessor: &'a watch::Sender<Option<Vec<u8>>>,
    /// Our lease's cadence, which bounds the watch.
    cadence: watch::Receiver<Cadence>,
}

impl Io<WaitForTurn> for TurnIo<'_> {
    type Request = TurnRequest;
    type Outcome = Turn;

    fn step(&mut self, next: TurnNext) -> Step<TurnRequest, Turn> {
        match next {
            TurnNext::Decided(decided) => {
                if let Turn::Ours {
                    released: Some(predecessor),
                    ..
                } = &decided
                {
                    // The predecessor revokes its lease once the marker
                    // is gone (or after a while): take it now.
                    let marker = layout::release_marker(self.election, predecessor.create_revision);
                    let client = self.client.clone();
                    tokio::spawn(async move {
                        let _ = client.kv_client().delete(marker, None).await;
                    });
                }
                Step::Done(decided)
            }
            TurnNext::Send(request) => Step::Send(request),
        }
    }

    async fn send(
        &mut self,
        turn: &mut WaitForTurn,
        request: TurnRequest,
    ) -> Heard<TurnInput, Turn> {
        let (client, ours, patience) = (self.client, self.ours, self.patience);
        let input = match request {
            TurnRequest::FindPredecessor => {
                let prefix = &self.prefix;
                let (key, at) = retry("finding our predecessor", patience, || {
                    older_key(client, prefix, ours.create_revision)
                })
                .await;
                self.predecessor
                    .send_replace(key.as_ref().map(|k| k.key.clone()));
                TurnInput::Predecessor { key, at }
            }
            TurnRequest::Watch { predecessor, from } => {
                let bounds = WatchBounds::new(patience);
                let cadence = self.cadence.clone();
                let watch = &mut self.watch;
                watch_predecessor(client, ours, &predecessor, from, (bounds, cadence), watch).await
            }
            TurnRequest::CheckTurn { seen } => {
                let (prefix, election) = (&self.prefix, self.election);
                let checked = check_turn_racing_the_watch(
                    client,
                    prefix,
                    election,
                    ours,
                    patience,
                    seen,
                    turn,
                    &mut self.watch,
                )
                .await;
                // Handed over meanwhile: decided already.
                let Some(checked) = checked else {
                    return Heard::Nothing;
                };
                checked
            }
        };
        Heard::Input(input)
    }

    async fn wait(&mut self, _: &WaitForTurn, _: Option<BootInstant>) -> Heard<TurnInput, Turn> {
        unreachable!("the turn never waits but on its requests")
    }
}

/// Watches the predecessor's key and ours on one stream from just after
/// `from` (kept in `watch`, so a read of our turn can race it), and says
/// what it reported first.
async fn watch_predecessor(
    client: &Client,
    ours: Ours<'_>,
    predecessor: &CandidateKey,
    from: i64,
    (bounds, cadence): (WatchBounds, watch::Receiver<Cadence>),
    watch: &mut Option<TurnWatch>,
) -> TurnInput {
    // Boxed: the watch stream is most of a waiting candidate's
    // future (see `a_candidates_futures_stay_small`).
    *watch = None;
    let woken = match Box::pin(TurnWatch::open(
        client,
        &predecessor.key,
        ours,
        from,
        bounds,
        cadence,
    ))
    .await
    {
        Ok(stream) => Box::pin(watch.insert(stream).next()).await,
        Err(e) => Err(e),
    };
    match woken {
        Ok(woken) => {
            if matches!(woken, Woken::HandedOver(_) | Woken::PredecessorGone(_)) {
                PROCESS.woken();
            }
            if let Woken::HandedOver(at) = woken {
                PROCESS.led_without_read();
                debug!(predecessor = %predecessor.id, revision = at, "handed over");
            } else {
                debug!(predecessor = %predecessor.id, ?woken, "woke");
            }
            TurnInput::Woken(woken)
        }
        Err(e) => {
            warn_counted!("{e}; looking again");
            *watch = None;
            sleep(Duration::from_millis(50)).await;
            TurnInput::WatchBroke
        }
    }
}

/// Reads our turn after the predecessor went at revision `seen` (`None`:
/// linearizably), while the watch races the read: a touch that arrives
/// first decides, and then there is nothing to hand in (`None`).
#[allow(clippy::too_many_arguments)]
async fn check_turn_racing_the_watch(
    client: &Client,
    prefix: &str,
    election: &str,
    ours: Ours<'_>,
    patience: Duration,
    seen: Option<i64>,
    turn: &mut WaitForTurn,
    watch: &mut Option<TurnWatch>,
) -> Option<TurnInput> {
    let predecessor = turn.predecessor().expect("a predecessor is checked");
    let marker = layout::release_marker(election, predecessor.create_revision);
    // A leader that hands over touches our key in the
    // transaction that deleted its own, so that event is right
    // behind the deletion's on our stream. It is waited for
    // while the read is in flight: both are sound, the first
    // decides, and the touch is preferred when both are there.
    let read = async {
        let local = match seen {
            Some(seen) => check_turn_locally(client, prefix, ours, &marker, seen).await,
            None => None,
        };
        match local {
            Some(check) => (check, "local"),
            None => (
                check_turn_linearizably(client, prefix, ours, &marker, patience).await,
                "linearizable",
            ),
        }
    };
    let mut read = Box::pin(read);
    let checked = loop {
        let racing = turn.races_the_watch() && watch.is_some();
        tokio::select! {
            biased;
            woken = async { watch.as_mut().expect("racing").next().await }, if racing => {
                let woken = woken.map_or(TurnInput::WatchBroke, TurnInput::Woken);
                if let TurnInput::Woken(Woken::HandedOver(at)) = woken {
                    PROCESS.led_without_read();
                    debug!(revision = at, "handed over");
                }
                turn.input(BootInstant::now(), woken);
                if matches!(turn.poll(BootInstant::now()), TurnNext::Decided(_)) {
                    break None;
                }
            }
            (check, read) = &mut read => {
                debug!(read, "turn checked");
                break Some(TurnInput::Checked(check));
            }
        }
    };
    // Handed over meanwhile (None): decided already.
    checked
}

/// [`check_turn`] until it answers.
async fn check_turn_linearizably(
    client: &Client,
    prefix: &str,
    ours: Ours<'_>,
    marker: &str,
    patience: Duration,
) -> TurnCheck {
    retry("checking our turn", patience, || {
        check_turn(client, prefix, ours, marker)
    })
    .await
}

/// The key just older than `my_rev`, and the revision of the read.
async fn older_key(
    client: &Client,
    prefix: &str,
    my_rev: i64,
) -> Result<(Option<CandidateKey>, i64)> {
    let resp = Box::pin(
        client
            .kv_client()
            .get(prefix, Some(layout::older_than(my_rev))),
    )
    .await
    .map_err(|e| etcd_error("finding our predecessor", e))?;
    let rev = resp.header().map_or(0, |h| h.revision());
    Ok((resp.kvs().first().map(CandidateKey::from), rev))
}

/// One linearizable transaction: if our key is still ours, the youngest
/// key older than it and the count of `marker`.
///
/// A user whose role covers exactly `<election>/` (what users of `etcdctl
/// elect` grant) may not read the marker, which lies outside that prefix:
/// etcd refuses the whole transaction. Then the same transaction without
/// the marker answers, as if no marker were there: the successor waits
/// for its predecessor's lease to end, which costs time, never safety.
async fn check_turn(
    client: &Client,
    prefix: &str,
    ours: Ours<'_>,
    marker: &str,
) -> Result<TurnCheck> {
    let txn = turn_txn(prefix, ours, Some(marker), false);
    let resp = match read_only(client, txn).await {
        Err(e) if e.to_string().contains("permission denied") => {
            debug!("the release marker may not be read (permission denied); reading without it");
            let txn = turn_txn(prefix, ours, None, false);
            read_only(client, txn).await
        }
        other => other,
    }
    .map_err(|e| etcd_error("checking our turn", e))?;
    read_turn(&resp)
}

/// How long [`check_turn_locally`] waits before the linearizable read is
/// sent instead.
const LOCAL_READ_WITHIN: Duration = Duration::from_millis(200);

/// [`check_turn`]'s reads, served by one member from its own state,
/// without the round among the members a linearizable read waits for:
/// its answer if that member had applied `seen`, the revision at which
/// our predecessor's key was deleted; otherwise `None`, and the caller
/// reads linearizably.
///
/// Why that is as good as the linearizable read: a member only applies
/// committed entries, in order, so what it answers at revision `at >=
/// seen` is the state etcd was in at `at`, after the deletion. A
/// linearizable read also answers the state at some revision after the
/// deletion, only perhaps a later one, and nothing we conclude depends on
/// which. No key older than ours can appear after `at` (a new key's
/// create revision is above every existing one); the marker at `at` was
/// written with the deletion, in the same transaction; and our key may go
/// after either read alike, which the lease deadline and the follower's
/// watch already answer for. A member that has not applied `seen` yet
/// (`at < seen`) proves nothing.
async fn check_turn_locally(
    client: &Client,
    prefix: &str,
    ours: Ours<'_>,
    marker: &str,
    seen: i64,
) -> Option<TurnCheck> {
    let txn = turn_txn(prefix, ours, Some(marker), true);
    // Past the timeout we stop waiting; the read itself runs to its end.
    let read = read_only(client, txn);
    // A member that is paused would hold the read until the connection's
    // pings give up on it; the linearizable read may find another.
    let resp = tokio::time::timeout(LOCAL_READ_WITHIN, read)
        .await
        .ok()?
        .ok()?;
    if !applied_at_least(&resp, seen) {
        debug!(seen, "the member had not applied the deletion yet");
        return None;
    }
    read_turn(&resp).ok()
}

/// Whether the member that served `resp` had applied revision `seen`.
fn applied_at_least(resp: &etcd_client::TxnResponse, seen: i64) -> bool {
    resp.header().is_some_and(|h| h.revision() >= seen)
}

/// If our key is still ours: the youngest key older than it and, if asked
/// for, the count of `marker`. Serializable reads are served by the member
/// from its own state; a transaction of nothing else is too.
fn turn_txn(prefix: &str, ours: Ours<'_>, marker: Option<&str>, serializable: bool) -> Txn {
    let read = |options: GetOptions| match serializable {
        true => options.with_serializable(),
        false => options,
    };
    let mut reads = vec![TxnOp::get(
        prefix,
        Some(read(layout::older_than(ours.create_revision))),
    )];
    if let Some(marker) = marker {
        reads.push(TxnOp::get(
            marker,
            Some(read(GetOptions::new().with_count_only())),
        ));
    }
    Txn::new()
        .when([
            Compare::create_revision(ours.key, CompareOp::Equal, ours.create_revision),
            Compare::lease(ours.key, CompareOp::Equal, ours.lease),
        ])
        .and_then(reads)
}

/// What a [`turn_txn`] answered.
fn read_turn(resp: &etcd_client::TxnResponse) -> Result<TurnCheck> {
    if !resp.succeeded() {
        return Ok(TurnCheck::KeyGone);
    }
    let at = resp.header().map_or(0, |h| h.revision());
    let mut gets = resp.op_responses().into_iter().filter_map(|op| match op {
        etcd_client::TxnOpResponse::Get(get) => Some(get),
        _ => None,
    });
    let Some(older) = gets.next() else {
        return Err(etcd_error(
            "checking our turn",
            "a transaction without its reads",
        ));
    };
    // No marker read (it may not be read): as if none were there.
    let released = gets.next().is_some_and(|marker| marker.count() > 0);
    Ok(match older.kvs().first() {
        Some(kv) => TurnCheck::Older(CandidateKey::from(kv), at),
        None => TurnCheck::Clear { at, released },
    })
}
