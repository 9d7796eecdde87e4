//! Waiting for our turn: the I/O of the [`WaitForTurn`] recipe, from our
//! znode's creation until it leads the queue and is confirmed ours.

use std::time::Duration;

use tokio::sync::{oneshot, watch};
use tracing::debug;
use zookeeper_client::{Client, EventType};

use super::errors::zk_error;
use super::layout::{self, Participant};
use super::observe::{View, list_queue};
use super::recipe::{Gone, TurnInput, TurnNext, TurnRequest, WaitForTurn};
use super::znode::{OneShotWatch, owns, watch_own};
use crate::backend::recipe::Recipe;
use crate::clock::{self, BootInstant};
use crate::counters::{PROCESS, warn_counted};
use crate::error::Result;

/// What [`wait_for_turn`] found.
pub(super) enum Turn {
    /// Our znode leads the queue and belongs to our session, as a synced
    /// read confirmed within the last third of a session timeout. (The
    /// leadership deadline is the session's, from the session's keeper.)
    Ours,
    /// Our znode is gone, or is not our session's.
    Gone,
}

/// Waits until our znode is the first participant and confirms it is ours:
/// the I/O of [`WaitForTurn`], whose module says how it decides. The next
/// in line leads on its predecessor's deletion alone, one round trip
/// sooner than kazoo or Curator, which list the children first. The
/// leadership deadline does not depend on these reads: it is the
/// session's, proven by the keeper's syncs. The first listing also goes
/// to `listed` (the election's follower starts from it).
pub(super) async fn wait_for_turn(
    client: &Client,
    election: &str,
    path: &str,
    proven_at: BootInstant,
    session_timeout: Duration,
    mut view: watch::Receiver<View>,
    listed: &mut Option<oneshot::Sender<Vec<Participant>>>,
) -> Result<Turn> {
    let mut share = |queue: &Vec<Participant>| {
        if let Some(tx) = listed.take() {
            let _ = tx.send(queue.clone());
        }
    };
    let own = path.rsplit('/').next().unwrap_or_default();
    let mut turn = WaitForTurn::for_session(election, own, session_timeout).created_at(proven_at);
    let now = BootInstant::now;
    let leader_path = |view: &View| view.leader.as_ref().map(|l| l.path.clone());
    turn.input(
        now(),
        TurnInput::LeaderSeen(leader_path(&view.borrow_and_update())),
    );
    let mut own_watch: Option<OneShotWatch> = None;
    let mut predecessor_watch: Option<OneShotWatch> = None;
    loop {
        let input = match turn.poll(now()) {
            TurnNext::Lead { read_free } => {
                if read_free {
                    PROCESS.led_without_read();
                }
                return Ok(Turn::Ours);
            }
            TurnNext::Gone(why) => {
                if why == Gone::Deleted {
                    warn_counted!("our znode was deleted while we waited");
                }
                return Ok(Turn::Gone);
            }
            TurnNext::Send(TurnRequest::Read { owner: false }) => {
                let queue = list_queue(client, election).await?;
                share(&queue);
                TurnInput::Read {
                    queue: names(queue),
                    ours: None,
                }
            }
            TurnNext::Send(TurnRequest::Read { owner: true }) => {
                // A session's requests are answered in order: both reads
                // see the same state, or the stat a later one.
                let (queue, ours) = tokio::join!(list_queue(client, election), owns(client, path));
                let ours = ours?;
                let queue = if ours { queue? } else { Vec::new() };
                if ours {
                    share(&queue);
                }
                TurnInput::Read {
                    queue: names(queue),
                    ours: Some(ours),
                }
            }
            TurnNext::Send(TurnRequest::WatchPredecessor(predecessor)) => {
                predecessor_watch = None;
                own_watch = None;
                match client.check_and_watch_stat(&predecessor).await {
                    Ok((None, _)) => TurnInput::PredecessorWatched { exists: false },
                    Ok((Some(_), watcher)) => {
                        debug!(%predecessor, "waiting on our predecessor");
                        predecessor_watch = Some(Box::pin(watcher.changed()));
                        TurnInput::PredecessorWatched { exists: true }
                    }
                    Err(e) => return Err(zk_error("watching our predecessor", e)),
                }
            }
            TurnNext::Send(TurnRequest::WatchOwn) => {
                own_watch = watch_own(client, path).await?;
                TurnInput::OwnWatched {
                    ours: own_watch.is_some(),
                }
            }
            TurnNext::Send(TurnRequest::ConfirmOwn) => TurnInput::Confirmed {
                ours: owns(client, path).await?,
            },
            TurnNext::Wait(until) => {
                let watches = (&mut own_watch, &mut predecessor_watch);
                match wait(watches, &mut view, until).await {
                    Some(input) => input,
                    None => continue,
                }
            }
        };
        turn.input(now(), input);
    }
}

/// Waits, at most `until`, for what the turn hears: our znode's watch,
/// our predecessor's, or the leader the view names. `None`: the time
/// came.
async fn wait(
    (own_watch, predecessor_watch): (&mut Option<OneShotWatch>, &mut Option<OneShotWatch>),
    view: &mut watch::Receiver<View>,
    until: Option<BootInstant>,
) -> Option<TurnInput> {
    let refresh = async {
        match until {
            Some(at) => clock::sleep_until(at).await,
            None => std::future::pending().await,
        }
    };
    let leader_path = |view: &View| view.leader.as_ref().map(|l| l.path.clone());
    tokio::select! {
        // Events of one session arrive in the order of the
        // changes: ours first, if both are ready.
        biased;
        event = async { own_watch.as_mut().expect("armed").await }, if own_watch.is_some() => {
            *own_watch = None;
            Some(TurnInput::OwnChanged { deleted: event.event_type == EventType::NodeDeleted })
        }
        event = async { predecessor_watch.as_mut().expect("armed").await }, if predecessor_watch.is_some() => {
            *predecessor_watch = None;
            PROCESS.woken();
            debug!(event = ?event.event_type, "woke: predecessor changed");
            Some(TurnInput::PredecessorChanged { deleted: event.event_type == EventType::NodeDeleted })
        }
        () = refresh => None,
        Ok(()) = view.changed() => Some(TurnInput::LeaderSeen(leader_path(&view.borrow_and_update()))),
    }
}

/// The queue's znode names, in order.
fn names(queue: Vec<layout::Participant>) -> Vec<String> {
    queue.into_iter().map(|p| p.name).collect()
}
