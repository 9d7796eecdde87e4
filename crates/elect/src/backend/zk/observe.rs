//! Following who leads a ZooKeeper election: list the participants, read
//! the lowest one's data, and watch only that znode (deletion ends its
//! leadership, a data change is a new id). With no participant, watch the
//! children of the election path, or its creation.
//!
//! An observer sets one watch, never one per participant, and while a
//! leader exists never a children watch, so a crowd of observers does not
//! turn each join or leave into a storm of `getChildren` calls.
//!
//! Nor does a leader change: a follower remembers the participants after
//! the leader as last listed ([`Successors`]). When the leader's znode
//! goes, the first of them that still exists is the new leader, found
//! with one small read instead of a listing of every participant (with a
//! thousand candidates each following the leader, a thousand listings of a
//! thousand names). That is sound because sequence numbers only grow: a
//! participant that joined after the listing sorts after everyone listed,
//! so nobody unlisted can precede a listed participant that still exists.

use crate::backend::backoff::Backoff;
use crate::counters::warn_counted;
use zookeeper_client::{Client, Error as ZkError, OneshotWatcher, SessionState};

use super::errors::zk_error;
use super::layout::{self, Participant};
use crate::backend::publish::{Observed, publish_if_changed};
use crate::error::Result;
use crate::leadership::Leadership;
use tokio::sync::{oneshot, watch};
use tracing::debug;

/// The leader as last read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    pub leader: Option<Leader>,
    /// `false` while disconnected from the ensemble.
    pub current: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leader {
    /// Full path of the leader's znode.
    pub path: String,
    /// Its data: the id the leader published.
    pub id: String,
    /// The zxid that created it (its czxid): the fencing token (see
    /// `znode::create_node` for why not its sequence number).
    pub token: u64,
}

impl View {
    pub fn unknown() -> Self {
        View {
            leader: None,
            current: false,
        }
    }
}

impl Observed for View {
    fn names_leader(&self, key: &[u8]) -> bool {
        self.leader
            .as_ref()
            .is_some_and(|l| l.path.as_bytes() == key)
    }

    fn to_leadership(&self) -> Leadership {
        if !self.current {
            return Leadership::unknown();
        }
        Leadership::observed(self.leader.as_ref().map(|l| (l.id.clone(), l.token)))
    }
}

/// The participants of `election`, leader first (none if the path does not
/// exist yet).
pub async fn list_queue(client: &Client, election: &str) -> Result<Vec<Participant>> {
    match client.list_children(election).await {
        Ok(children) => Ok(layout::queue(&children)),
        Err(ZkError::NoNode) => Ok(Vec::new()),
        Err(e) => Err(zk_error("listing the election", e)),
    }
}

/// The participants after the leader, in order, as last listed; the
/// leader itself first, so a data change (a new id) is read from it.
#[derive(Debug, Default)]
pub struct Successors(std::collections::VecDeque<Participant>);

/// Reads the current leader and arms one watch that fires when it may have
/// changed.
///
/// Errors: a request failed. Cancel safe.
pub async fn read_leader(client: &Client, election: &str) -> Result<(View, OneshotWatcher)> {
    read_leader_after(client, election, &mut Successors::default()).await
}

/// [`read_leader`], trying the participants `known` from an earlier
/// listing before listing them all again.
async fn read_leader_after(
    client: &Client,
    election: &str,
    known: &mut Successors,
) -> Result<(View, OneshotWatcher)> {
    loop {
        while let Some(next) = known.0.front() {
            let path = format!("{election}/{}", next.name);
            match client.get_and_watch_data(&path).await {
                Ok((data, stat, watcher)) => {
                    let leader = Leader {
                        id: String::from_utf8_lossy(&data).into_owned(),
                        token: stat.czxid as u64,
                        path,
                    };
                    let view = View {
                        leader: Some(leader),
                        current: true,
                    };
                    return Ok((view, watcher));
                }
                // Gone since it was listed: the next one may lead.
                Err(ZkError::NoNode) => {
                    known.0.pop_front();
                }
                Err(e) => {
                    known.0.clear();
                    return Err(zk_error("reading the leader", e));
                }
            }
        }
        // Nobody known is left: list the participants again.
        let queue = list_queue(client, election).await?;
        if !queue.is_empty() {
            known.0 = queue.into_iter().collect();
            continue;
        }
        let watcher = match client.list_and_watch_children(election).await {
            Ok((children, watcher)) if layout::queue(&children).is_empty() => watcher,
            Ok(_) => continue,
            Err(ZkError::NoNode) => match client.check_and_watch_stat(election).await {
                Ok((None, watcher)) => watcher,
                Ok((Some(_), _)) => continue,
                Err(e) => return Err(zk_error("watching the election", e)),
            },
            Err(e) => return Err(zk_error("watching the election", e)),
        };
        let view = View {
            leader: None,
            current: true,
        };
        return Ok((view, watcher));
    }
}

/// Keeps `out` current for as long as the session lives. Returns when the
/// session has ended (expired or closed) or nobody listens any more.
///
/// A candidate's follower may be `listed` the participants by a listing
/// made after its znode's creation (the wait for its turn makes one at
/// once): the first read starts from it instead of listing again. Without
/// one (an observer, or the sender dropped), it lists for itself.
pub async fn follow(
    client: Client,
    election: String,
    out: watch::Sender<View>,
    listed: Option<oneshot::Receiver<Vec<Participant>>>,
) {
    let mut state = client.state_watcher();
    let mut backoff = Backoff::new();
    let mut known = Successors::default();
    if let Some(listed) = listed
        && let Ok(queue) = listed.await
    {
        known.0 = queue.into();
    }
    loop {
        if out.is_closed() {
            return;
        }
        match read_leader_after(&client, &election, &mut known).await {
            Ok((view, watcher)) => {
                backoff.reset();
                publish_if_changed(&out, view);
                tokio::select! {
                    event = watcher.changed() => {
                        debug!(?event.event_type, "leader may have changed");
                        // Its znode is gone: no need to read it again.
                        if event.event_type == zookeeper_client::EventType::NodeDeleted {
                            known.0.pop_front();
                        }
                    }
                    () = out.closed() => return,
                    ended = until_disconnected(&mut state) => {
                        warn_counted!("disconnected from ZooKeeper, the leader is unknown until the session is back");
                        publish_if_changed(&out, View::unknown());
                        if ended || !until_reconnected(&mut state).await {
                            return;
                        }
                    }
                }
            }
            Err(e) => {
                if out.borrow().current {
                    warn_counted!(
                        "lost contact with ZooKeeper, the leader is unknown until it is back: {e}"
                    );
                } else {
                    debug!("observer: {e}");
                }
                publish_if_changed(&out, View::unknown());
                if is_terminal(state.peek_state()) {
                    return;
                }
                if matches!(state.peek_state(), SessionState::SyncConnected) {
                    // Connected, yet refused (e.g. NoAuth): not a loop to spin.
                    backoff.warn_once(format_args!("reading the election {election}: {e}"));
                    backoff.wait().await;
                } else if !until_reconnected(&mut state).await {
                    return;
                }
            }
        }
    }
}

/// Whether a session in `state` is over for good.
/// A candidate's observer of its election, started once the candidate's
/// first znode exists. Started sooner, in an election not made yet, it
/// would find nothing, watch for the election's creation and read it
/// again once made: five requests where two do, for each of a thousand
/// new elections on one session, all in that session's one ordered
/// queue. (A waiting candidate's view comes one create later.) Its first
/// listing is the wait for our turn's, which lists at once: one request
/// where two were.
pub struct Follower {
    pending: Option<(String, watch::Sender<View>)>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Follower {
    /// An observer of `election` that will publish into `out`.
    pub fn new(election: &str, out: watch::Sender<View>) -> Follower {
        Follower {
            pending: Some((election.to_owned(), out)),
            task: None,
        }
    }

    /// Starts following, if not started yet, from the participants
    /// `listed` will bring (see [`follow`]).
    pub fn start(&mut self, client: &Client, listed: oneshot::Receiver<Vec<Participant>>) {
        if let Some((election, out)) = self.pending.take() {
            let follower = follow(client.clone(), election, out, Some(listed));
            self.task = Some(tokio::spawn(follower));
        }
    }

    /// Stops following; its clone of the client is gone on return.
    pub async fn stop(self) {
        if let Some(task) = self.task {
            task.abort();
            let _ = task.await;
        }
    }
}

pub fn is_terminal(state: SessionState) -> bool {
    matches!(
        state,
        SessionState::Expired | SessionState::Closed | SessionState::AuthFailed
    )
}

/// Resolves when the connection is lost: `true` if the session ended for
/// good, `false` if it may still come back.
pub async fn until_disconnected(state: &mut zookeeper_client::StateWatcher) -> bool {
    loop {
        match state.changed().await {
            SessionState::Disconnected => return false,
            s if is_terminal(s) => return true,
            _ => {}
        }
    }
}

/// Resolves when the connection is back (`true`) or the session has ended
/// (`false`).
pub async fn until_reconnected(state: &mut zookeeper_client::StateWatcher) -> bool {
    loop {
        match state.peek_state() {
            SessionState::SyncConnected | SessionState::ConnectedReadOnly => return true,
            s if is_terminal(s) => return false,
            _ => {}
        }
        state.changed().await;
    }
}
