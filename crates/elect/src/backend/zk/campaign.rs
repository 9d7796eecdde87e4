//! One candidate's life in a ZooKeeper election.
//!
//! Per session, candidacies follow each other:
//! 1. create `<election>/_c_<uuid>-latch-<seq>` (ephemeral, sequential,
//!    data = id), creating parents as needed. After a lost reply, look for
//!    the uuid among the children instead of creating again, so we never
//!    leave a second znode behind (Curator's protected mode);
//! 2. wait on the predecessor only (the participant just before ours):
//!    one watch, woken only when that znode goes (no herd effect);
//! 3. claim leadership only after reading our znode back with
//!    `ephemeralOwner` = our session (CURATOR-696), in a synced read; the
//!    deadline is the session's own (rule 4). The next in line keeps that
//!    read fresh while it waits, so the announcement of its predecessor's
//!    deletion is all it needs to lead (see `turn::wait_for_turn`);
//! 4. lead while the session provably lives: a keeper task syncs through
//!    the ZooKeeper leader every T/20 (T/16 while we wait behind the next
//!    in line: see [`Cadence`]), and [`SessionLease`](super::lease::SessionLease) turns the
//!    answers into the instant until which the leader cannot have expired
//!    the session; our deadline is that, less a margin. A disconnection is
//!    not a loss: the client moves to another member (the library tries
//!    the next one at once) and we lead on, the view marked not current,
//!    until that deadline; reconnected, we check our znode is still ours
//!    and carry on. Curator's default gives up on every disconnection;
//!    CURATOR-460's double leaders came from timing the session from the
//!    disconnection, not from what the leader provably heard. Deletion of
//!    our znode, expiry or an auth failure end leadership at once. On
//!    expiry, a new session and a new candidacy.

use std::future::Future;
use std::time::Duration;

use tokio::sync::{oneshot, watch};
use tokio::time::sleep;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};
use zookeeper_client::{Client, Error as ZkError, StateWatcher};

use super::connection::{self, Opened};
use super::keeper::{close, keep_session};
use super::layout::{self, Participant};
use super::observe::{Follower, View, until_disconnected, until_reconnected};
use super::priority;
use super::turn::{Turn, wait_for_turn};
use super::znode::{Created, create_node};
use crate::backend::cadence::Cadence;
use crate::backend::publish::Reporter;
use crate::clock::BootInstant;
use crate::config::ElectionConfig;
use crate::counters::warn_counted;
use crate::error::{Error, Result};
use crate::leadership::Leadership;
use crate::steer::{self, Standing};
use crate::work::WorkWatch;

/// Why a session's campaign ended.
pub(super) enum SessionEnd {
    Resigned,
    /// The session expired or was closed: a new one is needed.
    Ended,
    /// ZooKeeper will not let us take part (the election's ACLs): no
    /// session would change that.
    Refused(Error),
}

/// Why a candidacy ended.
pub(super) enum End {
    Resigned,
    /// Our znode is gone; the session lives: campaign again in it.
    NodeGone,
    /// The session expired or was closed: a new one is needed.
    SessionEnded,
    /// See [`SessionEnd::Refused`].
    Refused(Error),
}

pub struct Candidate {
    cfg: ElectionConfig,
    out: watch::Sender<Leadership>,
    work: WorkWatch,
    resign: CancellationToken,
    priority: watch::Receiver<Standing>,
}

impl Candidate {
    pub fn new(
        cfg: ElectionConfig,
        out: watch::Sender<Leadership>,
        work: WorkWatch,
        resign: CancellationToken,
    ) -> Self {
        let priority = watch::channel(Standing::healthy(cfg.priority)).1;
        Candidate {
            cfg,
            out,
            work,
            resign,
            priority,
        }
    }

    /// The same, its priority as `priority` says (the config's, at first).
    pub fn wishing(mut self, priority: watch::Receiver<Standing>) -> Self {
        self.priority = priority;
        self
    }

    /// Campaigns until resignation is requested, one session at a time.
    pub(crate) async fn run(self, first: Opened) -> Result<()> {
        let Opened {
            mut client,
            mut lease,
        } = first;
        loop {
            let (view_tx, view_rx) = watch::channel(View::unknown());
            let (lease_tx, lease_rx) = watch::channel(lease.deadline());
            let (cadence, cadence_rx) = watch::channel(Cadence::Following);
            let keeper = tokio::spawn(keep_session(client.clone(), lease, lease_tx, cadence_rx));
            let mut session = Candidacy {
                client: &client,
                cfg: &self.cfg,
                reporter: Reporter::new(self.out.clone(), view_rx),
                follower: Follower::new(&self.cfg.election, view_tx),
                work: self.work.clone(),
                resign: &self.resign,
                state: client.state_watcher(),
                lease: lease_rx,
                cadence: Some(cadence),
                priority: self.priority.clone(),
            };
            let end = session.campaign().await;
            keeper.abort();
            // The tasks' clones of the client go with them.
            session.follower.stop().await;
            let _ = keeper.await;
            match end {
                SessionEnd::Resigned => {
                    self.out.send_replace(Leadership::unknown());
                    close(client, self.cfg.connect_timeout).await;
                    return Ok(());
                }
                SessionEnd::Refused(e) => {
                    self.out.send_replace(Leadership::unknown());
                    close(client, self.cfg.connect_timeout).await;
                    return Err(e);
                }
                SessionEnd::Ended => {
                    warn_counted!("ZooKeeper session ended; opening a new one");
                    self.out.send_replace(Leadership::unknown());
                    match connection::reconnect(&self.cfg, self.resign.cancelled()).await {
                        Some(next) => (client, lease) = (next.client, next.lease),
                        None => return Ok(()),
                    }
                }
            }
        }
    }
}

/// One election's candidacies within one ZooKeeper session, each after
/// the one before: its driver. (Leading is in `stint`.)
pub(super) struct Candidacy<'a> {
    pub(super) client: &'a Client,
    pub(super) cfg: &'a ElectionConfig,
    pub(super) reporter: Reporter<View>,
    /// The election's observer, whose view the reporter shows: started
    /// once our first znode exists.
    pub(super) follower: Follower,
    pub(super) work: WorkWatch,
    pub(super) resign: &'a CancellationToken,
    pub(super) state: StateWatcher,
    /// The deadline our session's syncs prove (see the keeper).
    pub(super) lease: watch::Receiver<Option<BootInstant>>,
    /// How often the keeper syncs: set by the candidacy, except on a
    /// session shared by elections (`None`: always as a leader's).
    pub(super) cadence: Option<watch::Sender<Cadence>>,
    /// Our priority, as the campaign's owner wishes it.
    pub(super) priority: watch::Receiver<Standing>,
}

impl Candidacy<'_> {
    /// Candidacies follow each other until we resign or the session ends.
    pub(super) async fn campaign(&mut self) -> SessionEnd {
        loop {
            match self.candidacy().await {
                End::NodeGone => continue,
                End::Resigned => return SessionEnd::Resigned,
                End::SessionEnded => return SessionEnd::Ended,
                End::Refused(e) => return SessionEnd::Refused(e),
            }
        }
    }

    async fn candidacy(&mut self) -> End {
        let client = self.client;
        let election = self.cfg.election.clone();
        let id = self.cfg.id.clone();
        let user = self.cfg.user.clone();
        let Created {
            path,
            token,
            proven_at,
        } = match self
            .step(create_node(client, &election, &id, user.as_ref()))
            .await
        {
            Ok(Ok(created)) => created,
            Ok(Err(e @ Error::Auth { .. })) => return End::Refused(e),
            Ok(Err(e)) => {
                warn_counted!("{e}");
                return End::SessionEnded;
            }
            Err(end) => return end,
        };
        self.reporter.own_key = path.clone().into_bytes();
        let sequence = path
            .rsplit('/')
            .next()
            .and_then(layout::participant)
            .map_or(0, |p| p.sequence);
        let published = priority::publish(
            client.clone(),
            &election,
            sequence,
            user,
            self.priority.clone(),
        );
        // The follower starts from the wait's first listing.
        let (listed, first_listing) = oneshot::channel();
        self.follower.start(client, first_listing);
        self.renew_as(Cadence::Following);
        let outcome = self.until_leading(&path, proven_at, Some(listed)).await;
        if outcome.is_ok() {
            self.renew_as(Cadence::Leading);
        }
        let end = match outcome {
            Ok(()) if self.others_come_first(&election, sequence).await => {
                info!(
                    standing = %*self.priority.borrow(),
                    "our turn came; stepping aside for a candidate healthier or of positive priority"
                );
                match client.delete(&path, None).await {
                    Ok(()) | Err(ZkError::NoNode) => End::NodeGone,
                    Err(e) => {
                        warn_counted!("stepping aside: deleting {path}: {e}");
                        End::SessionEnded
                    }
                }
            }
            Ok(()) => self.lead(&path, token).await,
            Err(end) => end,
        };
        published.abort();
        if matches!(end, End::Resigned) {
            if self.reporter.leading {
                // We stop leading now, not once the delete lands: a delete
                // that hangs (cut off) must not keep us exported as the
                // leader past our deadline (found by the soak).
                self.reporter.demoted(BootInstant::now());
            }
            match tokio::time::timeout(self.cfg.connect_timeout, client.delete(&path, None)).await {
                Ok(Ok(()) | Err(ZkError::NoNode)) => debug!("deleted {path}"),
                Ok(Err(e)) => warn_counted!("deleting {path}: {e}; it goes with the session"),
                Err(_) => warn_counted!("deleting {path} timed out; it goes with the session"),
            }
        }
        // The next candidacy in this session publishes its own; a session
        // that ends takes this one with it.
        if matches!(end, End::NodeGone) {
            let unpublished = priority::unpublish(client, &election, sequence);
            let _ = tokio::time::timeout(self.cfg.connect_timeout, unpublished).await;
        }
        end
    }

    /// Syncs as `cadence` says from now on, where the cadence is ours.
    fn renew_as(&self, cadence: Cadence) {
        if let Some(sender) = &self.cadence {
            cadence.set_on(sender);
        }
    }

    /// Unhealthy or priority 0 at our turn: whether a candidate of a
    /// higher tier waits behind us (a failed read says no: we lead, as any
    /// candidate whose turn came; a failback hands over later).
    async fn others_come_first(&self, election: &str, sequence: u64) -> bool {
        let own = *self.priority.borrow();
        if own.tier() == Standing::DEFAULT.tier() {
            return false;
        }
        let read = super::switchover::read_line(self.client, election);
        match tokio::time::timeout(self.cfg.connect_timeout, read).await {
            Ok(Ok((line, _))) => steer::steps_aside(
                own,
                line.iter()
                    .filter(|p| p.participant.sequence > sequence)
                    .map(|p| p.standing),
            ),
            _ => false,
        }
    }

    /// Waits for our turn and confirms our znode is ours (proven so by
    /// its creation, sent at `proven_at`).
    async fn until_leading(
        &mut self,
        path: &str,
        proven_at: BootInstant,
        mut listed: Option<oneshot::Sender<Vec<Participant>>>,
    ) -> Result<(), End> {
        let cadence = self.cadence.clone();
        loop {
            let client = self.client;
            match self
                .step(wait_for_turn(
                    client,
                    &self.cfg.election,
                    path,
                    proven_at,
                    self.reporter.view.clone(),
                    &mut listed,
                    cadence.as_ref(),
                ))
                .await?
            {
                Ok(Turn::Ours) => return Ok(()),
                Ok(Turn::Gone) => {
                    warn_counted!("our znode is gone or not our session's; campaigning again");
                    return Err(End::NodeGone);
                }
                Err(e) => {
                    warn_counted!("{e}; retrying");
                    self.step(sleep(Duration::from_millis(100))).await?;
                }
            }
        }
    }

    /// After losing leadership: wait (at most a session timeout) for the
    /// work to stop, then remove our znode if it is still there, so the next
    /// candidacy never leaves a second one of ours behind.
    pub(super) async fn after_loss(&mut self, path: &str) -> End {
        let idle = self.work.stopped();
        let _ = tokio::time::timeout(self.client.session_timeout(), idle).await;
        if !until_reconnected(&mut self.state).await {
            return End::SessionEnded;
        }
        match self.client.delete(path, None).await {
            Ok(()) | Err(ZkError::NoNode) => End::NodeGone,
            Err(e) => {
                warn_counted!("removing our old znode: {e}; opening a new session instead");
                End::SessionEnded
            }
        }
    }

    /// Runs `step` while reporting the leader, giving up on resignation or
    /// the end of the session.
    pub(super) async fn step<T>(&mut self, step: impl Future<Output = T>) -> Result<T, End> {
        tokio::pin!(step);
        self.reporter.show_view();
        loop {
            tokio::select! {
                value = &mut step => return Ok(value),
                _ = self.resign.cancelled() => return Err(End::Resigned),
                Ok(()) = self.reporter.view.changed() => self.reporter.show_view(),
                ended = until_disconnected(&mut self.state) => {
                    if ended {
                        return Err(End::SessionEnded);
                    }
                }
            }
        }
    }
}
