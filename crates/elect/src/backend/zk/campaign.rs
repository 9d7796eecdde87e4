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
//!    deletion is all it needs to lead (see [`wait_for_turn`]);
//! 4. lead while the session provably lives: a keeper task syncs through
//!    the ZooKeeper leader every T/20, and [`SessionLease`] turns the
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

use tokio::sync::watch;
use tokio::time::{Instant, sleep, sleep_until};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};
use zookeeper_client::{
    Acl, Acls, AuthId, Client, CreateMode, Error as ZkError, EventType, Permission, SessionState,
    StateWatcher, WatchedEvent,
};

use super::connection::{self, Opened};
use super::errors::zk_error;
use super::layout;
use super::lease::SessionLease;
use super::observe::{self, View, is_terminal, list_queue, until_disconnected, until_reconnected};
use super::recipe::{
    Demotion, Gone, Input, Next, Request, Stint, StintEnd, StintInput, StintNext, StintRequest,
    WaitForTurn,
};
use crate::backend::backoff::Backoff;
use crate::backend::candidates::Candidates;
use crate::backend::report::Reporter;
use crate::backend_kind::Backend;
use crate::clock::{self, BootInstant};
use crate::config::ElectionConfig;
use crate::counters::{PROCESS, warn_counted};
use crate::credentials::User;
use crate::error::{Error, Result};
use crate::leadership::Leadership;
use crate::work::WorkWatch;

/// Why a session's campaign ended.
enum SessionEnd {
    Resigned,
    /// The session expired or was closed: a new one is needed.
    Ended,
    /// ZooKeeper will not let us take part (the election's ACLs): no
    /// session would change that.
    Refused(Error),
}

/// Why a candidacy ended.
enum End {
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
}

impl Candidate {
    pub fn new(
        cfg: ElectionConfig,
        out: watch::Sender<Leadership>,
        work: WorkWatch,
        resign: CancellationToken,
    ) -> Self {
        Candidate {
            cfg,
            out,
            work,
            resign,
        }
    }

    /// Campaigns until resignation is requested, one session at a time.
    pub(crate) async fn run(self, first: Opened) -> Result<()> {
        let Opened {
            mut client,
            mut handshake,
        } = first;
        loop {
            let (view_tx, view_rx) = watch::channel(View::unknown());
            let follower = tokio::spawn(observe::follow(
                client.clone(),
                self.cfg.election.clone(),
                view_tx,
            ));
            let lease = SessionLease::new(client.session_timeout(), handshake);
            let (lease_tx, lease_rx) = watch::channel(lease.deadline());
            let keeper = tokio::spawn(keep_session(client.clone(), lease, lease_tx));
            let mut session = Session {
                client: &client,
                cfg: &self.cfg,
                reporter: Reporter::new(self.out.clone(), view_rx),
                work: self.work.clone(),
                resign: &self.resign,
                state: client.state_watcher(),
                lease: lease_rx,
            };
            let end = session.campaign().await;
            drop(session);
            follower.abort();
            keeper.abort();
            // The tasks' clones of the client go with them.
            let _ = follower.await;
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
                        Some(next) => (client, handshake) = (next.client, next.handshake),
                        None => return Ok(()),
                    }
                }
            }
        }
    }
}

/// One ZooKeeper session that many elections share: one client, one sync
/// loop proving the session alive (so one leadership deadline for every
/// election on it), and a candidate per election, each watching only its
/// predecessor in its own election. When the session ends, every
/// candidate on it ends with [`Error::SessionEnded`].
pub(crate) struct SharedSession {
    client: Client,
    lease: watch::Receiver<Option<BootInstant>>,
    keeper: tokio::task::JoinHandle<()>,
    connect_timeout: Duration,
    candidates: Candidates,
}

impl SharedSession {
    pub(crate) fn start(opened: Opened, connect_timeout: Duration) -> SharedSession {
        let Opened { client, handshake } = opened;
        let lease = SessionLease::new(client.session_timeout(), handshake);
        let (lease_tx, lease_rx) = watch::channel(lease.deadline());
        let keeper = tokio::spawn(keep_session(client.clone(), lease, lease_tx));
        SharedSession {
            client,
            lease: lease_rx,
            keeper,
            connect_timeout,
            candidates: Candidates::new(),
        }
    }

    /// Campaigns in `cfg`'s election on this session until resignation
    /// (our znode deleted) or the end of the session: the token that asks
    /// it to resign, and its task.
    pub(crate) fn campaign(
        &self,
        cfg: ElectionConfig,
        out: watch::Sender<Leadership>,
        work: WorkWatch,
    ) -> (CancellationToken, tokio::task::JoinHandle<Result<()>>) {
        let client = self.client.clone();
        let lease = self.lease.clone();
        self.candidates.spawn(|resign| async move {
            let (view_tx, view_rx) = watch::channel(View::unknown());
            let follower = tokio::spawn(observe::follow(
                client.clone(),
                cfg.election.clone(),
                view_tx,
            ));
            let mut session = Session {
                client: &client,
                cfg: &cfg,
                reporter: Reporter::new(out.clone(), view_rx),
                work,
                resign: &resign,
                state: client.state_watcher(),
                lease,
            };
            let end = session.campaign().await;
            drop(session);
            follower.abort();
            let _ = follower.await;
            out.send_replace(Leadership::unknown());
            match end {
                SessionEnd::Resigned => Ok(()),
                SessionEnd::Refused(e) => Err(e),
                SessionEnd::Ended => Err(Error::SessionEnded {
                    backend: Backend::Zk,
                }),
            }
        })
    }

    /// Whether the session still lives.
    pub(crate) fn is_alive(&self) -> bool {
        !observe::is_terminal(self.client.state())
    }

    /// Closes the session: every candidate on it resigns first (their
    /// znodes deleted), then the session ends.
    pub(crate) async fn close(self) {
        self.candidates.close(self.connect_timeout).await;
        self.keeper.abort();
        let _ = self.keeper.await;
        close(self.client, self.connect_timeout).await;
    }
}

/// Syncs through the ZooKeeper leader every `renew_every` for as long as
/// the session lasts, and publishes the leadership deadline the answers
/// prove (see [`SessionLease`]). Each sync is sent only after the previous
/// one was answered or given up, as the lease's argument needs.
async fn keep_session(
    client: Client,
    mut lease: SessionLease,
    out: watch::Sender<Option<BootInstant>>,
) {
    let every = lease.renew_every();
    loop {
        let sent = BootInstant::now();
        match tokio::time::timeout(every * 2, client.sync("/")).await {
            Ok(Ok(())) => {
                lease.renewed(sent, BootInstant::now());
                PROCESS.renewed();
                out.send_replace(lease.deadline());
            }
            Ok(Err(e @ (ZkError::SessionExpired | ZkError::ClientClosed))) => {
                debug!("session keeper: {e}");
                return;
            }
            Ok(Err(e)) => debug!("session sync: {e}"),
            Err(_) => debug!("session sync unanswered"),
        }
        clock::sleep_until(sent + every).await;
    }
}

/// Closes the session: dropping the last clone of the client makes the
/// library send CloseSession, which also removes anything ephemeral we
/// might have left; waits (at most `within`) until the server confirmed.
async fn close(client: Client, within: Duration) {
    let mut state = client.state_watcher();
    drop(client);
    let closed = async {
        while !observe::is_terminal(state.state()) {
            state.changed().await;
        }
    };
    if tokio::time::timeout(within, closed).await.is_err() {
        warn_counted!("closing the ZooKeeper session timed out; it will expire");
    } else {
        debug!("ZooKeeper session closed");
    }
}

/// A candidate within one ZooKeeper session.
struct Session<'a> {
    client: &'a Client,
    cfg: &'a ElectionConfig,
    reporter: Reporter<View>,
    work: WorkWatch,
    resign: &'a CancellationToken,
    state: StateWatcher,
    /// The deadline our session's syncs prove (see [`keep_session`]).
    lease: watch::Receiver<Option<BootInstant>>,
}

impl Session<'_> {
    /// Candidacies follow each other until we resign or the session ends.
    async fn campaign(&mut self) -> SessionEnd {
        let timeout = self.client.session_timeout();
        loop {
            match self.candidacy(timeout).await {
                End::NodeGone => continue,
                End::Resigned => return SessionEnd::Resigned,
                End::SessionEnded => return SessionEnd::Ended,
                End::Refused(e) => return SessionEnd::Refused(e),
            }
        }
    }

    async fn candidacy(&mut self, timeout: Duration) -> End {
        let client = self.client;
        let election = self.cfg.election.clone();
        let id = self.cfg.id.clone();
        let user = self.cfg.user.clone();
        let (path, token) = match self
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
        let outcome = self.until_leading(&path, timeout).await;
        let end = match outcome {
            Ok(()) => self.lead(&path, token).await,
            Err(end) => end,
        };
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
        end
    }

    /// Waits for our turn and confirms our znode is ours.
    async fn until_leading(&mut self, path: &str, timeout: Duration) -> Result<(), End> {
        loop {
            let client = self.client;
            match self
                .step(wait_for_turn(
                    client,
                    &self.cfg.election,
                    path,
                    timeout,
                    self.reporter.view.clone(),
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

    /// Leads, across disconnections within the session, until leadership
    /// is lost for good or we resign, doing what [`Stint`] decides. When
    /// nothing proves the session alive by the deadline we step down but
    /// keep our znode: if the session lives we are still first in line and
    /// nobody else can lead before it expires, so once syncs prove it
    /// alive again and our znode is still ours, we lead again with the
    /// same token.
    async fn lead(&mut self, path: &str, token: u64) -> End {
        let client = self.client;
        let timeout = client.session_timeout();
        let mut stint = Stint::new(timeout / 20, timeout / 4);
        let mut own_watch: Option<OneShotWatch> = None;
        let mut led = false;
        if let Some(proven) = *self.lease.borrow_and_update() {
            stint.input(BootInstant::now(), StintInput::Renewed(proven));
        }
        loop {
            let now = BootInstant::now();
            let input = match stint.poll(now) {
                StintNext::Lead { deadline, current } => {
                    if !led {
                        info!(token, "elected");
                    } else if !self.reporter.leading {
                        info!("the session is proven alive again and our znode is ours");
                    }
                    led = true;
                    self.reporter.leading = true;
                    let mut us = Leadership::elected(self.cfg.id.clone(), token, deadline);
                    us.current = current;
                    self.reporter.publish(us);
                    continue;
                }
                StintNext::Demoted { stop_by, why } => {
                    match why {
                        Demotion::Lapsed => warn_counted!(
                            "nothing proves our ZooKeeper session alive past the deadline; stepping down"
                        ),
                        Demotion::NodeGone => {
                            warn_counted!("our znode was deleted, or is not our session's")
                        }
                        Demotion::SessionEnded => {
                            warn_counted!("our ZooKeeper session ended: leadership lost")
                        }
                    }
                    // The supervisor starts the command again only once
                    // the old one is gone.
                    self.reporter.demoted(stop_by);
                    own_watch = None;
                    continue;
                }
                StintNext::Ended(StintEnd::NodeGone) => return self.after_loss(path).await,
                StintNext::Ended(StintEnd::SessionEnded) => return End::SessionEnded,
                StintNext::Send(StintRequest::WatchOwn) => {
                    // This also reads our znode back after a reconnection.
                    match by_deadline(stint.leads_until(), watch_own(client, path)).await {
                        Some(Ok(Some(changed))) => {
                            own_watch = Some(changed);
                            StintInput::OwnWatched(Some(true))
                        }
                        Some(Ok(None)) => StintInput::OwnWatched(Some(false)),
                        Some(Err(e)) => {
                            debug!("{e}");
                            StintInput::OwnWatched(None)
                        }
                        None => StintInput::OwnWatched(None),
                    }
                }
                StintNext::Send(StintRequest::ConfirmOwn) => {
                    match by_deadline(stint.leads_until(), owns(client, path)).await {
                        Some(Ok(ours)) => {
                            if !ours {
                                warn_counted!("our znode is gone or not our session's");
                            }
                            StintInput::Confirmed(Some(ours))
                        }
                        Some(Err(e)) => {
                            debug!("{e}");
                            StintInput::Confirmed(None)
                        }
                        None => StintInput::Confirmed(None),
                    }
                }
                StintNext::Wait(until) => {
                    let leading = stint.leads_until().is_some();
                    if !leading {
                        self.reporter.show_view();
                    }
                    let wake = until.unwrap_or(now + timeout);
                    tokio::select! {
                        _ = self.resign.cancelled() => return End::Resigned,
                        () = clock::sleep_until(wake) => continue,
                        changed = self.lease.changed() => match changed {
                            Ok(()) => match *self.lease.borrow_and_update() {
                                Some(proven) => StintInput::Renewed(proven),
                                None => continue,
                            },
                            // The session's keeper is gone with the session.
                            Err(_) => StintInput::SessionEnded,
                        },
                        event = async { own_watch.as_mut().expect("armed").await }, if own_watch.is_some() => {
                            own_watch = None;
                            if is_terminal(event.session_state) {
                                StintInput::SessionEnded
                            } else {
                                debug!(event = ?event.event_type, "our znode's watch fired");
                                StintInput::OwnChanged {
                                    deleted: event.event_type == EventType::NodeDeleted,
                                }
                            }
                        }
                        state = self.state.changed() => match state {
                            SessionState::Disconnected => {
                                if let Some(deadline) = stint.leads_until() {
                                    warn_counted!(
                                        "disconnected from ZooKeeper: leading on for {:?} while the session provably lives",
                                        deadline.saturating_duration_since(BootInstant::now())
                                    );
                                }
                                StintInput::Disconnected
                            }
                            SessionState::SyncConnected | SessionState::ConnectedReadOnly => {
                                if stint.leads_until().is_some() {
                                    info!("reconnected within the session; confirming our znode");
                                }
                                own_watch = None;
                                StintInput::Connected
                            }
                            s if is_terminal(s) => StintInput::SessionEnded,
                            _ => continue,
                        },
                        Ok(()) = self.reporter.view.changed(), if !leading => continue,
                    }
                }
            };
            stint.input(BootInstant::now(), input);
        }
    }

    /// After losing leadership: wait (at most a session timeout) for the
    /// work to stop, then remove our znode if it is still there, so the next
    /// candidacy never leaves a second one of ours behind.
    async fn after_loss(&mut self, path: &str) -> End {
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
    async fn step<T>(&mut self, step: impl Future<Output = T>) -> Result<T, End> {
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

/// Awaits `request`, but while we lead not past our `deadline`: the
/// driver must be back at the stint by then to step down on time, even
/// when the request waits on a connection that hangs (a member killed
/// under it, which the client notices only seconds later). `None` when
/// the deadline came first: no answer. (Seen while looking into a soak's
/// violation, which turned out to be a freeze the nemesis dealt: nothing
/// else bounded these two awaits.)
async fn by_deadline<T>(
    deadline: Option<BootInstant>,
    request: impl Future<Output = T>,
) -> Option<T> {
    match deadline {
        None => Some(request.await),
        Some(deadline) => tokio::select! {
            answer = request => Some(answer),
            () = clock::sleep_until(deadline) => None,
        },
    }
}

/// ZooKeeper refused us a znode under `election` (NoAuth).
fn not_allowed(election: &str, e: ZkError) -> Error {
    Error::Auth {
        backend: Backend::Zk,
        detail: format!(
            "not allowed to create under {election} ({e}): its ACL does not let this identity \
             create; use the credentials (--user, password) of whoever made it"
        ),
    }
}

/// The ACLs of the znodes we create. With digest credentials: our digest
/// identity may do anything, everyone else may only read. Deleting a child
/// needs DELETE on its parent, so a parent made with these ACLs keeps
/// strangers from deleting the leader's znode. The identity is named
/// explicitly (`digest:user:hash`) rather than as `auth`, which would also
/// grant the session's other identities (the x509 one of a TLS client
/// certificate that others may share). Without credentials: open to all,
/// as Curator and kazoo do by default.
pub(super) fn acls(user: Option<&User>) -> Vec<Acl> {
    match user {
        Some(user) => vec![
            Acl::new(Permission::ALL, AuthId::new("digest", &digest_id(user))),
            Acl::new(Permission::READ, AuthId::anyone()),
        ],
        None => Acls::anyone_all().to_vec(),
    }
}

/// ZooKeeper's digest identity: `user:base64(sha1(user:password))`.
fn digest_id(user: &User) -> String {
    use base64::Engine;
    let text = format!("{}:{}", user.name(), user.password().expose());
    let hash = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, text.as_bytes());
    format!(
        "{}:{}",
        user.name(),
        base64::engine::general_purpose::STANDARD.encode(hash.as_ref())
    )
}

/// Creates our znode, protected against lost replies; returns its path
/// and our fencing token: its creation's zxid (czxid).
///
/// Not its sequence number, which Curator's naming puts in its name: that
/// counts per parent, and starts again at 0 when the parent is deleted
/// and created again (Curator makes it a container znode, which the
/// server deletes once empty; an operator's `deleteall` does the same),
/// below a frozen old leader's token. A zxid only grows, across parents
/// and ZooKeeper leaders, and orders the znodes of one parent as their
/// sequence numbers do.
///
/// Errors when the session has ended, or when the ACLs forbid us to
/// create it.
async fn create_node(
    client: &Client,
    election: &str,
    id: &str,
    user: Option<&User>,
) -> Result<(String, u64)> {
    let uuid = layout::fresh_uuid();
    let prefix = layout::candidate_prefix(election, &uuid);
    let acls = acls(user);
    let ephemeral = CreateMode::EphemeralSequential.with_acls(Acls::new(&acls));
    let parent = CreateMode::Persistent.with_acls(Acls::new(&acls));
    let mut backoff = Backoff::new();
    loop {
        match client.create(&prefix, id.as_bytes(), &ephemeral).await {
            Ok((stat, sequence)) => {
                return Ok((format!("{prefix}{sequence}"), stat.czxid as u64));
            }
            Err(ZkError::NoNode) => match client.mkdir(election, &parent).await {
                // Created by us or by another candidate meanwhile.
                Ok(()) | Err(ZkError::NodeExists) => continue,
                Err(e @ ZkError::NoAuth) => return Err(not_allowed(election, e)),
                Err(e) => backoff.warn_once(format_args!(
                    "cannot create {election}: {e} (does the chroot of --endpoints exist?)"
                )),
            },
            Err(e @ (ZkError::SessionExpired | ZkError::ClientClosed)) => {
                return Err(zk_error("creating our znode", e));
            }
            Err(e @ ZkError::NoAuth) => return Err(not_allowed(election, e)),
            Err(e) => {
                // The create may have happened with its reply lost (the
                // connection dropped, a timeout): creating again before a
                // listing has answered would queue us twice.
                if let Some(name) = find_ours(client, election, &uuid).await? {
                    let path = format!("{election}/{name}");
                    match client.check_stat(&path).await {
                        Ok(Some(stat)) => return Ok((path, stat.czxid as u64)),
                        // Gone already (our session moved on and ended):
                        // the session's end is what the caller hears next.
                        Ok(None) => {}
                        Err(e) => return Err(zk_error("reading our znode", e)),
                    }
                }
                backoff.warn_once(format_args!("creating our znode: {e}"));
            }
        }
        backoff.wait().await;
    }
}

/// Our znode among the election's children, by the uuid in its name
/// (Curator's protected mode): asks until a synced listing answers.
///
/// A listing alone can miss a create whose reply was lost: the create went
/// out on the old connection, and after the client moved the session to
/// another member the create may still be on its way to the ZooKeeper
/// leader (it passed the session check there before the move) while the
/// new member answers the listing from its own state. The sync goes
/// through the leader's pipeline behind that create, and the listing,
/// sent right after it in the session's order, is served once the member
/// has caught up with the sync: it sees the create if it happened at all.
/// (A create that reaches the leader after the move is refused there:
/// the session has moved.) Seen in the fault suite: a second znode of
/// ours, queued behind the first and waiting on it forever.
///
/// Errors: the session ended.
async fn find_ours(client: &Client, election: &str, uuid: &str) -> Result<Option<String>> {
    let mine = format!("_c_{uuid}-");
    let mut backoff = Backoff::new();
    loop {
        let (synced, listed) = tokio::join!(client.sync(election), client.list_children(election));
        match synced.and(listed) {
            Ok(children) => return Ok(children.into_iter().find(|c| c.starts_with(&mine))),
            Err(ZkError::NoNode) => return Ok(None),
            Err(e @ (ZkError::SessionExpired | ZkError::ClientClosed)) => {
                return Err(zk_error("looking for our znode", e));
            }
            Err(e) => debug!("looking for our znode: {e}"),
        }
        backoff.wait().await;
    }
}

/// What [`wait_for_turn`] found.
enum Turn {
    /// Our znode leads the queue and belongs to our session, as a synced
    /// read confirmed within the last third of a session timeout. (The
    /// leadership deadline is the session's, from [`keep_session`].)
    Ours,
    /// Our znode is gone, or is not our session's.
    Gone,
}

/// Waits until our znode is the first participant and confirms it is ours:
/// the I/O of [`WaitForTurn`], whose module says how it decides. The next
/// in line leads on its predecessor's deletion alone, one round trip
/// sooner than kazoo or Curator, which list the children first. The
/// leadership deadline does not depend on these reads: it is the
/// session's, proven by [`keep_session`]'s syncs.
async fn wait_for_turn(
    client: &Client,
    election: &str,
    path: &str,
    session_timeout: Duration,
    mut view: watch::Receiver<View>,
) -> Result<Turn> {
    let own = path.rsplit('/').next().unwrap_or_default();
    let mut turn = WaitForTurn::new(election, own, session_timeout / 3);
    let origin = Instant::now();
    let now = || Instant::now() - origin;
    let leader_path = |view: &View| view.leader.as_ref().map(|l| l.path.clone());
    turn.input(
        now(),
        Input::LeaderSeen(leader_path(&view.borrow_and_update())),
    );
    let mut own_watch: Option<OneShotWatch> = None;
    let mut predecessor_watch: Option<OneShotWatch> = None;
    loop {
        let input = match turn.poll(now()) {
            Next::Lead { read_free } => {
                if read_free {
                    PROCESS.led_without_read();
                }
                return Ok(Turn::Ours);
            }
            Next::Gone(why) => {
                if why == Gone::Deleted {
                    warn_counted!("our znode was deleted while we waited");
                }
                return Ok(Turn::Gone);
            }
            Next::Send(Request::Read { owner: false }) => Input::Read {
                queue: names(list_queue(client, election).await?),
                ours: None,
            },
            Next::Send(Request::Read { owner: true }) => {
                // A session's requests are answered in order: both reads
                // see the same state, or the stat a later one.
                let (queue, ours) = tokio::join!(list_queue(client, election), owns(client, path));
                let ours = ours?;
                Input::Read {
                    queue: if ours { names(queue?) } else { Vec::new() },
                    ours: Some(ours),
                }
            }
            Next::Send(Request::WatchPredecessor(predecessor)) => {
                predecessor_watch = None;
                own_watch = None;
                match client.check_and_watch_stat(&predecessor).await {
                    Ok((None, _)) => Input::PredecessorWatched { exists: false },
                    Ok((Some(_), watcher)) => {
                        debug!(%predecessor, "waiting on our predecessor");
                        predecessor_watch = Some(Box::pin(watcher.changed()));
                        Input::PredecessorWatched { exists: true }
                    }
                    Err(e) => return Err(zk_error("watching our predecessor", e)),
                }
            }
            Next::Send(Request::WatchOwn) => {
                own_watch = watch_own(client, path).await?;
                Input::OwnWatched {
                    ours: own_watch.is_some(),
                }
            }
            Next::Send(Request::ConfirmOwn) => Input::Confirmed {
                ours: owns(client, path).await?,
            },
            Next::Wait(until) => {
                let refresh = async {
                    match until {
                        Some(at) => sleep_until(origin + at).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    // Events of one session arrive in the order of the
                    // changes: ours first, if both are ready.
                    biased;
                    event = async { own_watch.as_mut().expect("armed").await }, if own_watch.is_some() => {
                        own_watch = None;
                        Input::OwnChanged { deleted: event.event_type == EventType::NodeDeleted }
                    }
                    event = async { predecessor_watch.as_mut().expect("armed").await }, if predecessor_watch.is_some() => {
                        predecessor_watch = None;
                        PROCESS.woken();
                        debug!(event = ?event.event_type, "woke: predecessor changed");
                        Input::PredecessorChanged { deleted: event.event_type == EventType::NodeDeleted }
                    }
                    () = refresh => continue,
                    Ok(()) = view.changed() => Input::LeaderSeen(leader_path(&view.borrow_and_update())),
                }
            }
        };
        turn.input(now(), input);
    }
}

/// The queue's znode names, in order.
fn names(queue: Vec<layout::Participant>) -> Vec<String> {
    queue.into_iter().map(|p| p.name).collect()
}

/// A one-shot watch on a znode (ours, or our predecessor's), waiting for
/// its change.
type OneShotWatch = std::pin::Pin<Box<dyn Future<Output = WatchedEvent> + Send>>;

/// Arms a watch on our znode; `None` when it is gone or not our session's.
async fn watch_own(client: &Client, path: &str) -> Result<Option<OneShotWatch>> {
    match client.check_and_watch_stat(path).await {
        Ok((Some(stat), watcher)) if stat.ephemeral_owner == client.session_id().0 => {
            Ok(Some(Box::pin(watcher.changed())))
        }
        Ok(_) => Ok(None),
        Err(e) => Err(zk_error("watching our znode", e)),
    }
}

/// Whether `path` exists and belongs to our session, as the quorum knows
/// it. The `sync` goes through the ZooKeeper leader and the read is
/// answered after it: a follower cut off from the quorum keeps serving
/// reads until it notices (up to syncLimit ticks), and must not vouch for a
/// session the quorum may be expiring. (A listing read before the sync can
/// only be older, so it can only show more predecessors, never fewer.)
async fn owns(client: &Client, path: &str) -> Result<bool> {
    let (synced, stat) = tokio::join!(client.sync(path), client.check_stat(path));
    synced.map_err(|e| zk_error("syncing with the quorum", e))?;
    match stat {
        Ok(Some(stat)) => Ok(stat.ephemeral_owner == client.session_id().0),
        Ok(None) => Ok(false),
        Err(e) => Err(zk_error("reading our znode", e)),
    }
}

#[cfg(test)]
mod acl_tests {
    use super::*;
    use crate::credentials::Password;

    #[test]
    fn the_digest_identity_is_zookeepers() {
        // As kazoo's make_digest_acl_credential("super", "secret") and ZooKeeper's
        // DigestAuthenticationProvider.generateDigest compute it.
        let user = User::new("super", Password::new("secret")).unwrap();
        assert_eq!(digest_id(&user), "super:lK75jTNcA+U9vtVEw5vB51mj/w4=");
    }
}
