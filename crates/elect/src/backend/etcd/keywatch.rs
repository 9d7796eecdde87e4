//! Watches on single keys: until one is deleted, and the two keys a
//! waiting candidate watches (its predecessor's and its own) on one
//! stream; each within its [`WatchBounds`].

use etcd_client::{Client, EventType, WatchOptions, WatchStream};
use std::collections::VecDeque;
use tokio::sync::watch;

use super::bounds::WatchBounds;
use super::errors::etcd_error;
use super::layout::Ours;
use crate::backend::cadence::Cadence;
use crate::error::Result;

/// Returns the revision at which `key` was deleted, after `rev`; `None` if
/// the server cancelled the watch (compaction) and the key must be read
/// again.
///
/// Errors: the watch could not be made or broke. Cancel safe.
pub async fn wait_for_delete(
    client: &Client,
    key: &[u8],
    rev: i64,
    bounds: WatchBounds,
) -> Result<Option<i64>> {
    let options = WatchOptions::new().with_start_revision(rev + 1);
    let mut stream = open_watch(client, key, options, "watching a key", bounds).await?;
    loop {
        let resp = next_response(&mut stream, "watching a key", bounds).await?;
        if resp.canceled() {
            return Ok(None);
        }
        let deleted = resp
            .events()
            .iter()
            .find(|e| e.event_type() == EventType::Delete);
        if let Some(event) = deleted {
            return Ok(Some(deletion_revision(event, &resp)));
        }
    }
}

/// What woke a waiting candidate (see [`TurnWatch`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Woken {
    /// The predecessor's key was deleted, at this revision.
    PredecessorGone(i64),
    /// The resigning leader put our key again, unchanged, at this
    /// revision, in the transaction that deleted its own: we lead from
    /// there (see the `handover` module).
    HandedOver(i64),
    /// Our key was deleted, created again or put without our lease.
    OwnKeyGone,
    /// The server cancelled a watch (compaction): read again.
    Cancelled,
}

/// A waiting candidate's predecessor's key and its own key, watched on one
/// stream from the same revision, within bounds that follow the lease's
/// cadence ([`WatchBounds::at`]).
pub struct TurnWatch {
    stream: WatchStream,
    bounds: WatchBounds,
    cadence: watch::Receiver<Cadence>,
    predecessor: Vec<u8>,
    own: Vec<u8>,
    create_revision: i64,
    lease: i64,
    /// What a response held beyond what was asked for so far.
    pending: VecDeque<Woken>,
}

impl TurnWatch {
    /// Watches `predecessor` and our key from just after `rev`, the
    /// revision of the read that named the predecessor, within `bounds` at
    /// the `cadence` of our lease.
    ///
    /// Errors: the watch could not be made. Cancel safe.
    pub async fn open(
        client: &Client,
        predecessor: &[u8],
        ours: Ours<'_>,
        rev: i64,
        bounds: WatchBounds,
        cadence: watch::Receiver<Cadence>,
    ) -> Result<TurnWatch> {
        let from = || WatchOptions::new().with_start_revision(rev + 1);
        let mut stream = open_watch(
            client,
            predecessor,
            from(),
            "watching our predecessor",
            bounds,
        )
        .await?;
        stream
            .watch(ours.key, Some(from()))
            .await
            .map_err(|e| etcd_error("watching our key", e))?;
        Ok(TurnWatch {
            stream,
            bounds,
            cadence,
            predecessor: predecessor.to_vec(),
            own: ours.key.as_bytes().to_vec(),
            create_revision: ours.create_revision,
            lease: ours.lease,
            pending: VecDeque::new(),
        })
    }

    /// The next thing that may change our turn, in the order etcd sent it.
    ///
    /// Errors: the watch broke. Cancel safe: what a response held is
    /// kept until asked for.
    pub async fn next(&mut self) -> Result<Woken> {
        loop {
            if let Some(woken) = self.pending.pop_front() {
                return Ok(woken);
            }
            let bounds = self.bounds.at(*self.cadence.borrow_and_update());
            let resp = tokio::select! {
                resp = next_response(&mut self.stream, "watching a key", bounds) => resp?,
                // Now next in line (or following again): bound the wait anew.
                Ok(()) = self.cadence.changed() => continue,
            };
            if resp.canceled() {
                self.pending.push_back(Woken::Cancelled);
                continue;
            }
            for event in resp.events() {
                let Some(kv) = event.kv() else { continue };
                let woken = if kv.key() == self.predecessor {
                    match event.event_type() {
                        EventType::Delete => {
                            Woken::PredecessorGone(deletion_revision(event, &resp))
                        }
                        // A proclaim by the predecessor changes nothing.
                        EventType::Put => continue,
                    }
                } else if kv.key() == self.own {
                    let ours =
                        kv.create_revision() == self.create_revision && kv.lease() == self.lease;
                    match event.event_type() {
                        EventType::Put if ours => Woken::HandedOver(kv.mod_revision()),
                        _ => Woken::OwnKeyGone,
                    }
                } else {
                    continue;
                };
                self.pending.push_back(woken);
            }
        }
    }
}

/// Opens a watch on `key` with `options`, within `bounds`; `what` names
/// the watch in its error.
pub(super) async fn open_watch(
    client: &Client,
    key: impl Into<Vec<u8>>,
    options: WatchOptions,
    what: &'static str,
    bounds: WatchBounds,
) -> Result<WatchStream> {
    let key = key.into();
    let opening = async move { client.watch_client().watch(key, Some(options)).await };
    // Boxed, as every future of a watch here: a follower's future holds
    // them (see `a_candidates_futures_stay_small`).
    match Box::pin(tokio::time::timeout(bounds.open, opening)).await {
        Ok(opened) => opened.map_err(|e| etcd_error(what, e)),
        Err(_) => Err(etcd_error(
            what,
            format!("not opened within {:?}", bounds.open),
        )),
    }
}

/// The next response on a watch stream, within `bounds`: a stream that
/// ends, or whose member does not answer a progress request, is an error
/// (`what` names the watch in it). A progress answer is a response with
/// no events, which every caller passes over.
pub(super) async fn next_response(
    stream: &mut WatchStream,
    what: &'static str,
    bounds: WatchBounds,
) -> Result<etcd_client::WatchResponse> {
    let mut asked = false;
    loop {
        let within = if asked {
            Some(bounds.answer)
        } else {
            bounds.quiet
        };
        let Some(within) = within else {
            // A follower's watch: found broken by the connection's pings.
            return answered(what, Box::pin(stream.message()).await);
        };
        match Box::pin(tokio::time::timeout(within, stream.message())).await {
            Ok(message) => return answered(what, message),
            Err(_) if asked => {
                return Err(etcd_error(
                    what,
                    format!(
                        "its member did not answer a progress request within {within:?}; opening it again"
                    ),
                ));
            }
            Err(_) => {
                Box::pin(stream.request_progress())
                    .await
                    .map_err(|e| etcd_error(what, e))?;
                asked = true;
            }
        }
    }
}

/// A watch's message, or why there is none (`what` names the watch).
fn answered(
    what: &'static str,
    message: std::result::Result<Option<etcd_client::WatchResponse>, etcd_client::Error>,
) -> Result<etcd_client::WatchResponse> {
    message
        .map_err(|e| etcd_error(what, e))?
        .ok_or_else(|| etcd_error(what, "stream closed"))
}

/// A deletion's event carries the key's tombstone, whose modification
/// revision is the deletion's.
fn deletion_revision(event: &etcd_client::Event, resp: &etcd_client::WatchResponse) -> i64 {
    event
        .kv()
        .map(|kv| kv.mod_revision())
        .unwrap_or_else(|| resp.header().map_or(0, |h| h.revision()))
}
