//! Waiting for our turn: the I/O of the [`WaitForTurn`] recipe, from our
//! znode's creation until it leads the queue and is confirmed ours.

use tokio::sync::{oneshot, watch};
use tracing::debug;
use zookeeper_client::{Client, EventType};

use super::errors::zk_error;
use super::layout::{self, Participant};
use super::observe::{View, list_queue};
use super::recipe::{Gone, TurnInput, TurnNext, TurnRequest, WaitForTurn};
use super::znode::{OneShotWatch, owns, watch_own};
use crate::backend::cadence::Cadence;
use crate::backend::recipe::{Heard, Io, Recipe, Step, drive};
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
    mut view: watch::Receiver<View>,
    listed: &mut Option<oneshot::Sender<Vec<Participant>>>,
    cadence: Option<&watch::Sender<Cadence>>,
) -> Result<Turn> {
    let own = path.rsplit('/').next().unwrap_or_default();
    let session_timeout = client.session_timeout();
    let mut turn = WaitForTurn::for_session(election, own, session_timeout).created_at(proven_at);
    let leader = leader_path(&view.borrow_and_update());
    turn.input(BootInstant::now(), TurnInput::LeaderSeen(leader));
    let mut io = TurnIo {
        client,
        election,
        path,
        view,
        listed,
        own_watch: None,
        predecessor_watch: None,
        cadence,
    };
    drive(&mut turn, &mut io).await
}

/// The path of the leader `view` names.
fn leader_path(view: &View) -> Option<String> {
    view.leader.as_ref().map(|l| l.path.clone())
}

/// The turn's I/O: the queue's reads, our znode's and our predecessor's
/// watches, the observer's view of the leader.
struct TurnIo<'a> {
    client: &'a Client,
    election: &'a str,
    path: &'a str,
    view: watch::Receiver<View>,
    /// Where the first listing goes (the election's follower starts
    /// from it).
    listed: &'a mut Option<oneshot::Sender<Vec<Participant>>>,
    own_watch: Option<OneShotWatch>,
    predecessor_watch: Option<OneShotWatch>,
    /// The session's cadence: a leader's while we wait as the next in
    /// line, so a handover finds our proof at its freshest.
    cadence: Option<&'a watch::Sender<Cadence>>,
}

impl TurnIo<'_> {
    fn share(&mut self, queue: &[Participant]) {
        if let Some(tx) = self.listed.take() {
            let _ = tx.send(queue.to_vec());
        }
    }

    /// Carries `request` out: the recipe's next input.
    async fn request(&mut self, request: TurnRequest) -> Result<TurnInput> {
        let (client, election, path) = (self.client, self.election, self.path);
        Ok(match request {
            TurnRequest::Read { owner: false } => {
                let queue = list_queue(client, election).await?;
                self.share(&queue);
                TurnInput::Read {
                    queue: names(queue),
                    ours: None,
                }
            }
            TurnRequest::Read { owner: true } => {
                // A session's requests are answered in order: both reads
                // see the same state, or the stat a later one.
                let (queue, ours) = tokio::join!(list_queue(client, election), owns(client, path));
                let ours = ours?;
                let queue = if ours { queue? } else { Vec::new() };
                if ours {
                    self.share(&queue);
                }
                TurnInput::Read {
                    queue: names(queue),
                    ours: Some(ours),
                }
            }
            TurnRequest::WatchPredecessor(predecessor) => {
                self.predecessor_watch = None;
                self.own_watch = None;
                match client.check_and_watch_stat(&predecessor).await {
                    Ok((None, _)) => TurnInput::PredecessorWatched { exists: false },
                    Ok((Some(_), watcher)) => {
                        debug!(%predecessor, "waiting on our predecessor");
                        self.predecessor_watch = Some(Box::pin(watcher.changed()));
                        TurnInput::PredecessorWatched { exists: true }
                    }
                    Err(e) => return Err(zk_error("watching our predecessor", e)),
                }
            }
            TurnRequest::WatchOwn => {
                self.own_watch = watch_own(client, path).await?;
                TurnInput::OwnWatched {
                    ours: self.own_watch.is_some(),
                }
            }
            TurnRequest::ConfirmOwn => TurnInput::Confirmed {
                ours: owns(client, path).await?,
            },
        })
    }
}

impl Io<WaitForTurn> for TurnIo<'_> {
    type Request = TurnRequest;
    /// Our turn, or the error that ends the candidacy.
    type Outcome = Result<Turn>;

    fn step(&mut self, next: TurnNext) -> Step<TurnRequest, Result<Turn>> {
        match next {
            TurnNext::Lead { read_free } => {
                if read_free {
                    PROCESS.led_without_read();
                }
                Step::Done(Ok(Turn::Ours))
            }
            TurnNext::Gone(why) => {
                if why == Gone::Deleted {
                    warn_counted!("our znode was deleted while we waited");
                }
                Step::Done(Ok(Turn::Gone))
            }
            TurnNext::Send(request) => Step::Send(request),
            TurnNext::Wait(until) => Step::Wait(until),
        }
    }

    async fn send(
        &mut self,
        _: &mut WaitForTurn,
        request: TurnRequest,
    ) -> Heard<TurnInput, Result<Turn>> {
        match self.request(request).await {
            Ok(input) => Heard::Input(input),
            Err(e) => Heard::Done(Err(e)),
        }
    }

    async fn wait(
        &mut self,
        turn: &WaitForTurn,
        until: Option<BootInstant>,
    ) -> Heard<TurnInput, Result<Turn>> {
        if let Some(cadence) = self.cadence {
            Cadence::for_next_in_line(turn.next_in_line()).set_on(cadence);
        }
        let watches = (&mut self.own_watch, &mut self.predecessor_watch);
        match wait(watches, &mut self.view, until).await {
            Some(input) => Heard::Input(input),
            None => Heard::Nothing,
        }
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
