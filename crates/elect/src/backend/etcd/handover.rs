//! Handing leadership to the next in line with no request of the
//! successor's on the way.
//!
//! In Go's recipe the successor, woken by its predecessor's deletion,
//! reads before it leads: that no key older than its own is left, and
//! (where `elect` adds it, etcd #19597) that its own key is still its own.
//! The resigning leader knows the first fact already and can have the
//! server check the second in its resignation, so the successor's read
//! can ride on a watch event instead:
//!
//! - While leading, [`LeaderWatch`] keeps the first key younger than ours:
//!   one linearizable read of our key and of the oldest key created after
//!   it, then a watch on the election's prefix from that read: a deletion
//!   of that key means a new read, and while nobody queues the first key
//!   created is the next. The same watch tells the leader at once that its
//!   own key is gone. Only the leader runs one.
//! - The resignation's transaction deletes our key (if it still has our
//!   create revision) and writes the release marker, and now also holds
//!   a touch (`Transaction::touch`): if that next key still has the create revision and the
//!   lease it was read with, put it again with its value and lease
//!   unchanged. Only keys on leases `elect` granted are touched; Go's
//!   waiters read as before.
//!   The same nested transaction writes the successor's tenure marker
//!   (the `tenure` module), bound to its lease, as our own is deleted.
//! - Every waiting candidate watches its own key beside its predecessor's,
//!   on one stream ([`TurnWatch`](super::keywatch::TurnWatch)). A put of
//!   its own key, with its create revision and lease, is the handover: it
//!   leads as of that put's revision, without a request of its own.
//!
//! Why the successor leads at the touch's revision `R`:
//! 1. Our key existed at `R` with the create revision we were elected
//!    with (the outer compare), so it was the oldest key at `R`: none
//!    older was left when we were elected, and none older can be created
//!    later (a new key's create revision is above every existing one).
//! 2. No key between ours and the successor's existed at `R`: none did at
//!    the leader's read, at revision `X`, which found the successor's as
//!    the oldest younger than ours, and a key created after `X` has a
//!    create revision above `X`, so above both; or, where that read found
//!    none, the successor's key was the first created after `X` (the
//!    watch's events come in the order of their revisions). Deletions
//!    since only leave fewer keys.
//! 3. The successor's key existed at `R` with its create revision and its
//!    lease (the nested compare): what its own read would have confirmed
//!    (safety rule 3).
//!
//! Our key is deleted in that same transaction, so from `R` the
//! successor's key is the oldest: it leads, and learns so from a committed
//! transaction rather than from a read. Its leadership deadline is still
//! its own lease's, from its own renewals; the touch only ends its wait.
//! Our work was dead before the transaction was sent, as for any
//! resignation.
//!
//! Everything else takes the path of the recipe: a successor woken by its
//! predecessor's deletion without a touch (a Go leader, a leader that did
//! not know its next, a next that had left, an expired lease, an
//! operator's delete) reads its turn, and a touch that arrives while that
//! read is in flight decides first. Both are sound, so whichever answers
//! first decides.

use std::sync::Arc;

use etcd_client::{
    Client, EventType, SortOrder, SortTarget, Txn, TxnOp, TxnOpResponse, WatchOptions,
};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::debug;

use super::bounds::WatchBounds;
use super::errors::etcd_error;
use super::keywatch::{next_response, open_watch};
use super::layout::{self, CandidateKey};
use super::recipe::{KeyEvent, NextInLine, NextInLineInput, NextInLineNext, Pick};
use super::transaction::read_only;
use crate::backend::backoff::Backoff;
use crate::backend::recipe::{Heard, Io, Recipe, Step, drive};
use crate::clock::BootInstant;
use crate::counters::warn_counted;
use crate::error::Result;

/// While we lead: our key and the next in line, from one watch on the
/// election's prefix, as [`NextInLine`] decides. Dropping it stops
/// watching.
pub struct LeaderWatch {
    next: watch::Receiver<Option<CandidateKey>>,
    gone: watch::Receiver<bool>,
    task: JoinHandle<()>,
}

impl LeaderWatch {
    /// Starts watching our key, `own`, under `prefix`, and the next in
    /// line after it, each watch within `bounds`.
    pub fn start(
        client: Arc<Client>,
        prefix: String,
        own: CandidateKey,
        bounds: WatchBounds,
    ) -> LeaderWatch {
        let (next_out, next) = watch::channel(None);
        let (gone_out, gone) = watch::channel(false);
        let mut line = NextInLine::new(own);
        let task = tokio::spawn(async move {
            follow(&client, &prefix, &mut line, &next_out, bounds).await;
            next_out.send_replace(None);
            gone_out.send_replace(true);
        });
        LeaderWatch { next, gone, task }
    }

    /// The next in line as last known, if it is an `elect` candidate,
    /// whom a resignation may touch (`Transaction::touch`).
    pub fn elect_successor(&self) -> Option<CandidateKey> {
        self.next
            .borrow()
            .clone()
            .filter(|next| layout::granted_by_elect(next.lease))
    }

    /// The next in line (elect's or a peer's), as it changes.
    pub fn next_in_line(&self) -> watch::Receiver<Option<CandidateKey>> {
        self.next.clone()
    }

    /// Becomes true once our key is gone (deleted, created again, or put
    /// without our lease).
    pub fn key_gone(&self) -> watch::Receiver<bool> {
        self.gone.clone()
    }
}

impl Drop for LeaderWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Does what `line` asks until our key is gone, publishing whom a
/// resignation may touch. Failures are retried, reading afresh; meanwhile
/// nobody is published, so a resignation touches no one.
async fn follow(
    client: &Client,
    prefix: &str,
    line: &mut NextInLine,
    next_out: &watch::Sender<Option<CandidateKey>>,
    bounds: WatchBounds,
) {
    let mut io = LineIo {
        client,
        prefix,
        next_out,
        bounds,
        backoff: Backoff::new(),
    };
    drive(line, &mut io).await
}

/// The next in line's I/O: one read of our key and the next, then the
/// prefix's watch, each of whose events goes to the recipe as it comes;
/// whom a resignation may touch published after each.
struct LineIo<'a> {
    client: &'a Client,
    prefix: &'a str,
    next_out: &'a watch::Sender<Option<CandidateKey>>,
    bounds: WatchBounds,
    backoff: Backoff,
}

impl Io<NextInLine> for LineIo<'_> {
    type Request = NextInLineNext;
    type Outcome = ();

    fn step(&mut self, next: NextInLineNext) -> Step<NextInLineNext, ()> {
        match next {
            NextInLineNext::OwnKeyGone => Step::Done(()),
            request => Step::Send(request),
        }
    }

    /// Hands `line` the read's answer, or the watch's events as they
    /// come, and publishes whom a resignation may touch; a failure is a
    /// broken stream, read afresh after a backoff.
    async fn send(
        &mut self,
        line: &mut NextInLine,
        request: NextInLineNext,
    ) -> Heard<NextInLineInput, ()> {
        let (client, prefix) = (self.client, self.prefix);
        let done = match request {
            NextInLineNext::Read { pick } => {
                match read_own_and_next(client, prefix, line.own(), pick).await {
                    Ok((own, next, at)) => {
                        line.input(BootInstant::now(), NextInLineInput::Read { own, next, at });
                        Ok(())
                    }
                    Err(e) => Err(e),
                }
            }
            NextInLineNext::Watch { from } => {
                watch_prefix(client, prefix, line, from, self.next_out, self.bounds).await
            }
            NextInLineNext::OwnKeyGone => unreachable!("no request"),
        };
        if let Err(e) = &done {
            line.input(BootInstant::now(), NextInLineInput::Broke);
            warn_counted!("watching our key and the next in line: {e}");
        }
        publish_next(self.next_out, line);
        match done {
            Ok(()) => self.backoff.reset(),
            Err(_) => self.backoff.wait().await,
        }
        Heard::Nothing
    }

    async fn wait(&mut self, _: &NextInLine, _: Option<BootInstant>) -> Heard<NextInLineInput, ()> {
        unreachable!("the next in line never waits but on its requests")
    }
}

/// One linearizable read: our key as it reads, the younger key `pick`
/// chooses, and the read's revision.
async fn read_own_and_next(
    client: &Client,
    prefix: &str,
    own: &CandidateKey,
    pick: Pick,
) -> Result<(Option<CandidateKey>, Option<CandidateKey>, i64)> {
    let younger = match pick {
        Pick::Oldest => layout::younger_than(own.create_revision),
        Pick::Youngest => layout::younger_than(own.create_revision)
            .with_sort(SortTarget::Create, SortOrder::Descend),
    };
    let txn = Txn::new().and_then([
        TxnOp::get(own.key.as_slice(), None),
        TxnOp::get(prefix, Some(younger)),
    ]);
    let resp = read_only(client, txn)
        .await
        .map_err(|e| etcd_error("reading our key and the next in line", e))?;
    let at = resp.header().map_or(0, |h| h.revision());
    let mut gets = resp.op_responses().into_iter().filter_map(|op| match op {
        TxnOpResponse::Get(get) => Some(get),
        _ => None,
    });
    let (Some(ours), Some(next)) = (gets.next(), gets.next()) else {
        return Err(etcd_error(
            "reading our key and the next in line",
            "a transaction without its reads",
        ));
    };
    Ok((
        ours.kvs().first().map(CandidateKey::from),
        next.kvs().first().map(CandidateKey::from),
        at,
    ))
}

/// Tells the resignation whom it may touch now, if that changed (and the
/// debug log, which the tests wait on).
fn publish_next(next_out: &watch::Sender<Option<CandidateKey>>, line: &NextInLine) {
    let next = line.next().cloned();
    if *next_out.borrow() == next {
        return;
    }
    match line.next() {
        Some(n) => debug!(next = n.id.as_str(), "next in line"),
        None => debug!("nobody is next in line"),
    }
    next_out.send_replace(next);
}

/// Watches the prefix from just after `from`, handing `line` its events,
/// until it asks for something else.
async fn watch_prefix(
    client: &Client,
    prefix: &str,
    line: &mut NextInLine,
    from: i64,
    next_out: &watch::Sender<Option<CandidateKey>>,
    bounds: WatchBounds,
) -> Result<()> {
    let options = WatchOptions::new()
        .with_prefix()
        .with_start_revision(from + 1);
    let what = "watching the election";
    let mut stream = open_watch(client, prefix, options, what, bounds).await?;
    loop {
        let resp = next_response(&mut stream, what, bounds).await?;
        if resp.canceled() {
            line.input(BootInstant::now(), NextInLineInput::Cancelled);
            return Ok(());
        }
        for event in resp.events() {
            let Some(kv) = event.kv() else { continue };
            let event = match event.event_type() {
                EventType::Delete => KeyEvent::Delete(kv.key().to_vec()),
                EventType::Put => KeyEvent::Put(CandidateKey::from(kv), kv.version()),
            };
            if let KeyEvent::Delete(key) = &event
                && let Some(next) = line.next().filter(|n| n.key == *key)
            {
                debug!(next = %next.id, "the next in line left");
            }
            line.input(BootInstant::now(), NextInLineInput::Event(event));
            if !matches!(line.poll(BootInstant::now()), NextInLineNext::Watch { .. }) {
                return Ok(());
            }
            publish_next(next_out, line);
        }
    }
}
