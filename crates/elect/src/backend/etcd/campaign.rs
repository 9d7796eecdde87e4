//! One candidate's life in an etcd election.
//!
//! Each candidacy runs on one lease:
//! 1. create `<election>/<lease hex>` with an idempotent txn (Go's
//!    `Campaign`), so a retried request never makes a second key;
//! 2. wait only on the predecessor, the key with the largest create
//!    revision below ours, until no older key is left (no herd effect);
//! 3. if the last predecessor was an `elect` candidate (its lease id carries
//!    [`ELECT_LEASE_TAG`](super::layout::ELECT_LEASE_TAG)) and its lease
//!    still lives, its work may still be stopping (its key was deleted by an
//!    operator): wait until that lease ends, at most one of its TTLs. An
//!    `elect` leader that loses its key keeps its lease until its command is
//!    dead, then revokes it. Go candidates are not waited for: `etcdctl
//!    elect` resigns with a plain delete and keeps its lease for a minute;
//! 4. confirm our own key still exists under our lease (etcd #19597: Go
//!    skips this, and a waiter whose lease expired can "win");
//! 5. claim the tenure (the `tenure` module): write our marker and wait
//!    until no other candidacy's is left, so that a leader whose key an
//!    operator deleted has stopped its work before we start; a successor
//!    handed over by its predecessor's touch (the `handover` module) finds
//!    its marker written for it and skips 2 to 5;
//! 6. lead until the lease deadline passes, the lease is gone, or a view at
//!    or after our confirmation shows another leader.
//!
//! Losing leadership ends the candidacy: the lease is revoked once the work
//! has stopped, and a new candidacy starts on a fresh lease.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use etcd_client::{Client, Compare, CompareOp, GetOptions, PutOptions, Txn, TxnOp};
use tokio::sync::watch;
use tokio::time::{Instant, sleep};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

use super::connection::Attempts;
use super::errors::etcd_error;
use super::handover::{self, LeaderWatch};
use super::keywatch::{TurnWatch, Woken, wait_for_delete};
use super::layout::{self, CandidateKey, Ours};
use super::lease::{Lease, LeaseState, Renewer};
use super::observe::View;
use super::recipe::{
    Input, Next, OfficeInput, OfficeStep, ReleaseStep, Request, Resignation, TakeOffice, Touch,
    Turn, TurnCheck, WaitForTurn,
};
use super::tenure;
use crate::backend::backoff::Backoff;
use crate::backend::report::Reporter;
use crate::backend_kind::Backend;
use crate::clock::{BootInstant, sleep_until};
use crate::config::ElectionConfig;
use crate::counters::{PROCESS, warn_counted};
use crate::error::{Error, Result};
use crate::leadership::Leadership;
use crate::work::WorkWatch;

/// How long a resigning leader waits for an elect successor to take its
/// release marker before it revokes its lease: the successor takes it
/// about one round trip after the handover; a slower one finds the lease
/// gone, which says the same.
const HANDOVER_WAIT: Duration = Duration::from_millis(500);

/// Why a candidacy ended.
#[derive(Debug)]
enum Outcome {
    /// Resignation was requested.
    Resigned { led: bool },
    /// The candidacy cannot go on on this lease.
    Lost { led: bool, deadline: BootInstant },
}

/// What a release's transaction did (see [`Candidate::release`]).
struct Released {
    /// Its revision.
    at: i64,
    /// Our release marker.
    marker: String,
    /// Whether it handed over to the successor by touching its key.
    touched: bool,
}

pub struct Candidate {
    /// Shared with the follower: a `Client` is 3.7 KiB, held in every
    /// task that waits.
    client: Arc<Client>,
    /// One client per endpoint, for lease keepalives.
    renewers: Vec<Renewer>,
    cfg: ElectionConfig,
    reporter: Reporter<View>,
    work: WorkWatch,
    resign: CancellationToken,
    /// The key and create revision of the current candidacy.
    current: Option<(String, i64)>,
    /// While we lead: our key and the next in line, whom a resignation
    /// hands over to.
    leader_watch: Option<LeaderWatch>,
}

impl Candidate {
    pub fn new(
        client: Arc<Client>,
        renewers: Vec<Renewer>,
        cfg: ElectionConfig,
        out: watch::Sender<Leadership>,
        view: watch::Receiver<View>,
        work: WorkWatch,
        resign: CancellationToken,
    ) -> Self {
        Candidate {
            client,
            renewers,
            cfg,
            reporter: Reporter::new(out, view),
            work,
            resign,
            current: None,
            leader_watch: None,
        }
    }

    /// Campaigns until resignation is requested, one candidacy per lease.
    pub async fn run(mut self, mut lease: Lease) -> Result<()> {
        loop {
            match self.candidacy(&lease).await {
                Outcome::Resigned { led } => {
                    if led {
                        // We stop leading now, not once the release lands:
                        // a release that hangs (cut off, a member
                        // restarting) must not keep us exported as the
                        // leader past our deadline (found by the soak).
                        self.reporter.demoted(BootInstant::now());
                        self.hand_over(lease.id, lease.ttl).await;
                    }
                    lease.revoke(&self.client, self.cfg.connect_timeout).await;
                    self.resigned(led);
                    return Ok(());
                }
                Outcome::Lost { led, deadline } => {
                    if led {
                        self.step_down(deadline, lease.ttl).await;
                    }
                    lease.revoke(&self.client, self.cfg.connect_timeout).await;
                    match self.grant_again().await {
                        Some(next) => lease = next,
                        None => return Ok(()),
                    }
                }
            }
        }
    }

    /// After losing leadership: says so, and waits (at most `ttl`) until
    /// the work started under it has stopped.
    async fn step_down(&mut self, deadline: BootInstant, ttl: Duration) {
        warn_counted!("leadership lost");
        self.reporter.demoted(deadline);
        self.wait_until_idle(ttl).await;
    }

    /// After resigning: nobody is known to lead, as far as we can say.
    fn resigned(&mut self, led: bool) {
        if led {
            info!("resigned");
        }
        self.reporter.publish(Leadership::unknown());
    }

    /// Campaigns on a lease shared with other elections (a session) until
    /// resignation or the lease's end. A candidacy that ends releases its
    /// key (see [`Candidate::release`]) instead of revoking the lease.
    ///
    /// Errors: [`Error::SessionEnded`] once the lease is gone.
    pub async fn run_shared(mut self, lease: std::sync::Arc<Lease>) -> Result<()> {
        let ended = || Error::SessionEnded {
            backend: Backend::Etcd,
        };
        loop {
            match self.candidacy(&lease).await {
                Outcome::Resigned { led } => {
                    if led {
                        self.reporter.demoted(BootInstant::now());
                    }
                    let successor = self.elect_successor();
                    let released = self.release_when_idle(lease.id, successor, lease.ttl);
                    if let Some(released) = released.await
                        && released.touched
                    {
                        // The successor led without reading the marker,
                        // and the session's lease lives on: nobody else
                        // would remove it.
                        self.remove(&released.marker).await;
                    }
                    self.resigned(led);
                    return Ok(());
                }
                Outcome::Lost { led, deadline } => {
                    if led {
                        self.step_down(deadline, lease.ttl).await;
                    }
                    if lease.state().expired {
                        self.reporter.publish(Leadership::unknown());
                        return Err(ended());
                    }
                    self.release_when_idle(lease.id, None, lease.ttl).await;
                    // A lapse of renewals: campaign again only once the
                    // lease is proven alive again (or gone for good).
                    let mut state = lease.watch();
                    let proven = state
                        .wait_for(|s| s.expired || s.deadline > BootInstant::now())
                        .await
                        .map(|s| !s.expired);
                    if !matches!(proven, Ok(true)) {
                        self.reporter.publish(Leadership::unknown());
                        return Err(ended());
                    }
                }
            }
        }
    }

    /// Resigns as leader, the work already stopped: our key and its
    /// release marker in one transaction (see [`Candidate::release`]),
    /// which also hands over to the next in line by touching its key when
    /// it is an elect candidate we know of (see the `handover` module);
    /// the caller then revokes the lease, marker and all. Otherwise (the
    /// elect candidate we knew as next had just left) the elect successor
    /// that sees the marker leads without asking about our lease, one read
    /// after its watch saw our key go, and the lease is kept until it has
    /// taken the marker (or [`HANDOVER_WAIT`]). A failed release leaves the
    /// revoke to do it all, as before.
    async fn hand_over(&mut self, lease: i64, ttl: Duration) {
        let successor = self.elect_successor();
        let expects_taker = successor.is_some();
        let Some(released) = self.release_when_idle(lease, successor, ttl).await else {
            return;
        };
        if released.touched {
            debug!(revision = released.at, "handed over to the next in line");
            return;
        }
        if expects_taker {
            let taken = wait_for_delete(&self.client, released.marker.as_bytes(), released.at);
            match tokio::time::timeout(HANDOVER_WAIT, taken).await {
                Ok(_) => debug!("handover: the successor took the release marker"),
                Err(_) => debug!("the successor did not take the release marker; revoking"),
            }
        }
    }

    /// Deletes a key we wrote, giving up after the connect timeout (a key
    /// on a lease goes with it anyway).
    async fn remove(&self, key: &str) {
        let mut kv = self.client.kv_client();
        let deleted = Box::pin(kv.delete(key, None));
        match tokio::time::timeout(self.cfg.connect_timeout, deleted).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => debug!(key, "removing: {e}"),
            Err(_) => debug!(key, "removing timed out"),
        }
    }

    /// The next in line, if we lead and it is an elect candidate: whom a
    /// resignation may hand over to. Stops following it.
    fn elect_successor(&mut self) -> Option<CandidateKey> {
        self.leader_watch
            .take()
            .and_then(|watch| watch.elect_successor())
    }

    /// Ends the current candidacy as [`Resignation`] decides: once the work
    /// started under our leadership has stopped (waiting at most `ttl`,
    /// as a lost leader does), the release, with the touch of `successor`
    /// if any.
    async fn release_when_idle(
        &mut self,
        lease: i64,
        successor: Option<CandidateKey>,
        ttl: Duration,
    ) -> Option<Released> {
        let mut resignation = Resignation::new(successor, self.work.is_running());
        if resignation.step() == ReleaseStep::AwaitWorkStopped {
            self.wait_until_idle(ttl).await;
            resignation.work_stopped();
        }
        let ReleaseStep::Release(touch) = resignation.step() else {
            unreachable!("the work has stopped");
        };
        self.release(lease, touch.as_ref(), ttl).await
    }

    /// Ends the current candidacy, its work stopped: one transaction
    /// deletes our key (if it is still this candidacy's), writes its
    /// release marker, bound to the lease, and, given a `touch`, hands
    /// over to the next in line ([`handover::touch`]). The marker tells a successor
    /// waiting on our lease (a session's, or ours until we revoke it) that
    /// the work is over. `None` if the transaction failed (a successor then
    /// waits for the lease).
    ///
    /// The transaction reads nothing: a range over the election's prefix
    /// walks every key deleted there since etcd's last compaction (each
    /// candidacy leaves one), and inside the commit it would delay the
    /// handover for every waiter.
    ///
    /// It is given at most the lease's TTL (and the connect timeout): our
    /// keepalives go on while it waits, and a successor waiting for the
    /// lease would wait longer for a hung release than for the lease to
    /// expire once the caller revokes it (the soak found a release stuck
    /// on a restarting member for the 5 s connect timeout, a 2 s TTL).
    async fn release(
        &mut self,
        lease: i64,
        touch: Option<&Touch>,
        ttl: Duration,
    ) -> Option<Released> {
        let (key, rev) = self.current.take()?;
        debug!(
            successor = touch.map(|t| t.next.id.as_str()),
            "releasing our key"
        );
        let marker = layout::release_marker(&self.cfg.election, rev);
        let bound = || Some(PutOptions::new().with_lease(lease));
        let election = self.cfg.election.as_str();
        let mut then = vec![
            TxnOp::put(marker.as_str(), "", bound()),
            TxnOp::delete(key.as_str(), None),
            tenure::end(election, lease),
        ];
        then.extend(touch.map(|touch| handover::touch(election, touch)));
        let txn = Txn::new()
            .when([Compare::create_revision(
                key.as_str(),
                CompareOp::Equal,
                rev,
            )])
            .and_then(then)
            .or_else([
                TxnOp::put(marker.as_str(), "", bound()),
                tenure::end(election, lease),
            ]);
        let mut kv = self.client.kv_client();
        let within = self.cfg.connect_timeout.min(ttl);
        let resp = match tokio::time::timeout(within, Box::pin(kv.txn(txn))).await {
            Ok(Ok(resp)) => resp,
            Ok(Err(e)) => {
                warn_counted!(
                    key,
                    "releasing our key: {e}; a successor waits for the lease"
                );
                return None;
            }
            Err(_) => {
                warn_counted!(
                    key,
                    "releasing our key timed out; a successor waits for the lease"
                );
                return None;
            }
        };
        let at = resp.header().map_or(0, |h| h.revision());
        debug!(
            revision = at,
            "released: key deleted, release marker written"
        );
        Some(Released {
            at,
            touched: handover::touched(&resp.op_responses()),
            marker,
        })
    }

    async fn candidacy(&mut self, lease: &Lease) -> Outcome {
        let client = self.client.clone();
        let key = layout::candidate_key(&self.cfg.election, lease.id);
        let election = self.cfg.election.clone();
        let id = self.cfg.id.clone();
        self.reporter.own_key = key.clone().into_bytes();
        let mut lease_state = lease.watch();
        let patience = self.cfg.connect_timeout;

        let my_rev = match self
            .until_lost(
                &mut lease_state,
                create_key(&client, &key, &id, lease.id, patience),
            )
            .await
        {
            Ok(rev) => rev,
            Err(outcome) => return outcome,
        };
        self.current = Some((key.clone(), my_rev));
        let ours = Ours {
            key: &key,
            lease: lease.id,
            create_revision: my_rev,
        };
        let turn = match self
            .until_lost(
                &mut lease_state,
                wait_for_turn(&client, &election, ours, patience),
            )
            .await
        {
            Ok(turn) => turn,
            Err(outcome) => return outcome,
        };
        let mut office = TakeOffice::new();
        office.input(OfficeInput::Turn(turn));
        let confirmed_at = loop {
            let answer = match office.step().clone() {
                OfficeStep::Lead { confirmed_at } => break confirmed_at,
                OfficeStep::Vanished => {
                    warn_counted!("our key vanished before we could lead; campaigning again");
                    return Outcome::Lost {
                        led: false,
                        deadline: lease.state().deadline,
                    };
                }
                OfficeStep::AwaitTurn => unreachable!("the turn was handed in"),
                OfficeStep::AwaitLeaseEnd(pred) => {
                    let ended = wait_for_lease_end(&client, &election, pred);
                    self.until_lost(&mut lease_state, ended)
                        .await
                        .map(|()| OfficeInput::LeaseEnded)
                }
                OfficeStep::Claim => {
                    let claim = tenure::claim(&client, &election, ours, patience);
                    self.until_lost(&mut lease_state, claim)
                        .await
                        .map(OfficeInput::Claimed)
                }
                OfficeStep::ReadBack => {
                    let read_back = confirm(&client, &key, lease.id, my_rev, patience);
                    self.until_lost(&mut lease_state, read_back)
                        .await
                        .map(OfficeInput::ReadBack)
                }
            };
            match answer {
                Ok(input) => office.input(input),
                Err(outcome) => return outcome,
            }
        };
        let outcome = self
            .lead(&mut lease_state, lease.id, &key, my_rev, confirmed_at)
            .await;
        if !matches!(outcome, Outcome::Resigned { .. }) {
            // Lost: nobody to hand over to.
            self.leader_watch = None;
        }
        outcome
    }

    /// Leads until something says we may not.
    async fn lead(
        &mut self,
        lease_state: &mut watch::Receiver<LeaseState>,
        lease: i64,
        key: &str,
        token: i64,
        confirmed_at: i64,
    ) -> Outcome {
        let client = self.client.clone();
        let mut deadline = lease_state.borrow_and_update().deadline;
        info!(token, "elected");
        self.reporter.leading = true;
        self.reporter.publish(Leadership::elected(
            self.cfg.id.clone(),
            token as u64,
            deadline,
        ));
        // Our own key is watched directly, so its deletion is acted on at
        // the event rather than one read later through the observer; the
        // same watch keeps who is next for our resignation.
        let own = CandidateKey {
            key: key.as_bytes().to_vec(),
            id: self.cfg.id.clone(),
            create_revision: token,
            lease,
        };
        let watch =
            LeaderWatch::start(self.client.clone(), layout::prefix(&self.cfg.election), own);
        let mut key_gone = watch.key_gone();
        self.leader_watch = Some(watch);
        loop {
            tokio::select! {
                _ = self.resign.cancelled() => return Outcome::Resigned { led: true },
                _ = sleep_until(deadline) => {
                    warn_counted!("lease not renewed before the deadline; stepping down");
                    return Outcome::Lost { led: true, deadline };
                }
                Ok(()) = lease_state.changed() => {
                    let state = *lease_state.borrow_and_update();
                    if state.expired {
                        return Outcome::Lost { led: true, deadline: BootInstant::now() };
                    }
                    deadline = state.deadline;
                    self.reporter
                        .publish(Leadership::elected(self.cfg.id.clone(), token as u64, deadline));
                }
                Ok(_) = key_gone.wait_for(|gone| *gone) => {
                    warn_counted!("our key is gone from etcd (deleted or its lease revoked)");
                    break;
                }
                Ok(()) = self.reporter.view.changed() => {
                    let view = self.reporter.view.borrow_and_update().clone();
                    if contradicts(&view, key.as_bytes(), confirmed_at) {
                        warn_counted!("another leader is seen; our key is gone");
                        break;
                    }
                }
            }
        }
        // Our key is gone. Stop the work at once, within the lease deadline;
        // then learn whether the lease itself is gone too (revoked), in which
        // case someone else may lead already and the work must die now.
        self.reporter.demoted(deadline);
        let deadline = loss_deadline(&client, lease, lease_state).await;
        Outcome::Lost {
            led: true,
            deadline,
        }
    }

    /// Runs one step of a candidacy, reporting the leader meanwhile and
    /// giving up when resignation is requested or the lease is lost.
    async fn until_lost<T>(
        &mut self,
        lease_state: &mut watch::Receiver<LeaseState>,
        step: impl Future<Output = T>,
    ) -> Result<T, Outcome> {
        tokio::pin!(step);
        self.reporter.show_view();
        loop {
            let deadline = lease_state.borrow_and_update().deadline;
            tokio::select! {
                value = &mut step => return Ok(value),
                _ = self.resign.cancelled() => return Err(Outcome::Resigned { led: false }),
                _ = sleep_until(deadline) => return Err(Outcome::Lost { led: false, deadline }),
                Ok(()) = lease_state.changed() => {
                    if lease_state.borrow().expired {
                        return Err(Outcome::Lost { led: false, deadline: BootInstant::now() });
                    }
                }
                Ok(()) = self.reporter.view.changed() => self.reporter.show_view(),
            }
        }
    }

    /// Waits until the work started under our leadership has stopped, at
    /// most `limit`, so successors waiting on our lease get in promptly.
    async fn wait_until_idle(&mut self, limit: Duration) {
        let idle = self.work.stopped();
        if tokio::time::timeout(limit, idle).await.is_err() {
            warn_counted!(
                "the wrapped command is still running after the lease TTL; releasing the lease anyway"
            );
        }
    }

    /// Grants a fresh lease, retrying until it works or resignation is
    /// requested (then `None`). A grant in flight is never abandoned: its
    /// lease would outlive us by a TTL.
    async fn grant_again(&mut self) -> Option<Lease> {
        let mut backoff = Backoff::new();
        loop {
            if self.resign.is_cancelled() {
                return None;
            }
            let grant = Lease::grant(&self.client, &self.renewers, self.cfg.ttl);
            tokio::pin!(grant);
            let granted = loop {
                tokio::select! {
                    granted = &mut grant => break granted,
                    Ok(()) = self.reporter.view.changed() => self.reporter.show_view(),
                }
            };
            match granted {
                Ok(lease) if self.resign.is_cancelled() => {
                    lease.revoke(&self.client, self.cfg.connect_timeout).await;
                    return None;
                }
                Ok(lease) => return Some(lease),
                Err(e) => warn_counted!("{e}; retrying"),
            }
            tokio::select! {
                _ = self.resign.cancelled() => return None,
                _ = backoff.wait() => {}
            }
        }
    }
}

/// Whether `view` proves our key is no longer the leader's: it reflects a
/// revision at or after the one at which we confirmed our key, and names a
/// different leader (or none). Older views are ignored: they may predate us.
fn contradicts(view: &View, own_key: &[u8], confirmed_at: i64) -> bool {
    view.current
        && view.revision >= confirmed_at
        && view.leader.as_ref().is_none_or(|l| l.key != own_key)
}

/// How long the work of a leader whose key is gone may take to stop. If
/// our lease still lives, successors of ours wait for it (see step 3), so
/// the lease deadline bounds the work; if the lease is gone (revoked), or we
/// cannot tell, someone else may lead already: now.
async fn loss_deadline(
    client: &Client,
    lease: i64,
    lease_state: &watch::Receiver<LeaseState>,
) -> BootInstant {
    let state = *lease_state.borrow();
    let now = BootInstant::now();
    if state.expired || state.deadline <= now {
        return now;
    }
    let asked = tokio::time::timeout(
        state.deadline - now,
        Box::pin(client.lease_client().time_to_live(lease, None)),
    )
    .await;
    match asked {
        Ok(Ok(resp)) if resp.ttl() > 0 => state.deadline,
        _ => BootInstant::now(),
    }
}

/// Puts our key unless it exists (then reads it): Go's campaign txn.
/// Returns our create revision. Retries until it succeeds.
async fn create_key(client: &Client, key: &str, id: &str, lease: i64, patience: Duration) -> i64 {
    let txn = Txn::new()
        .when([Compare::create_revision(key, CompareOp::Equal, 0)])
        .and_then([TxnOp::put(
            key,
            id,
            Some(PutOptions::new().with_lease(lease)),
        )])
        .or_else([TxnOp::get(key, None)]);
    retry("creating our key", patience, || async {
        let resp = Box::pin(client.kv_client().txn(txn.clone()))
            .await
            .map_err(|e| etcd_error("creating our key", e))?;
        if resp.succeeded() {
            return Ok(resp.header().map_or(0, |h| h.revision()));
        }
        for op in resp.op_responses() {
            if let etcd_client::TxnOpResponse::Get(get) = op
                && let Some(kv) = get.kvs().first()
            {
                return Ok(kv.create_revision());
            }
        }
        Err(etcd_error(
            "creating our key",
            "key vanished during the txn",
        ))
    })
    .await
}

/// Waits until no key older than ours is left, waiting only on our
/// predecessor: the I/O of [`WaitForTurn`], whose module says how it
/// decides. A resigning elect leader hands over by touching our key (see
/// the `handover` module): we lead at that event with no request of our
/// own. When the predecessor goes otherwise, one read tells what we need
/// to lead, served by a member from its own state if it can (see
/// [`check_turn_locally`]).
async fn wait_for_turn(
    client: &Client,
    election: &str,
    ours: Ours<'_>,
    patience: Duration,
) -> Turn {
    let prefix = layout::prefix(election);
    let mut turn = WaitForTurn::new();
    // The stream on the predecessor's key and ours, while we wait on it.
    let mut watch: Option<TurnWatch> = None;
    loop {
        let input = match turn.next() {
            Next::Decided(decided) => {
                if let Turn::Ours {
                    released: Some(predecessor),
                    ..
                } = &decided
                {
                    // The predecessor revokes its lease once the marker
                    // is gone (or after a while): take it now.
                    let marker = layout::release_marker(election, predecessor.create_revision);
                    let client = client.clone();
                    tokio::spawn(async move {
                        let _ = client.kv_client().delete(marker, None).await;
                    });
                }
                return decided;
            }
            Next::Send(Request::FindPredecessor) => {
                let (key, at) = retry("finding our predecessor", patience, || {
                    older_key(client, &prefix, ours.create_revision)
                })
                .await;
                Input::Predecessor { key, at }
            }
            Next::Send(Request::Watch { predecessor, from }) => {
                // Boxed: the watch stream is most of a waiting candidate's
                // future (see `a_candidates_futures_stay_small`).
                watch = None;
                let woken =
                    match Box::pin(TurnWatch::open(client, &predecessor.key, ours, from)).await {
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
                        Input::Woken(woken)
                    }
                    Err(e) => {
                        warn_counted!("{e}; looking again");
                        watch = None;
                        sleep(Duration::from_millis(50)).await;
                        Input::WatchBroke
                    }
                }
            }
            Next::Send(Request::CheckTurn { seen }) => {
                let predecessor = turn.predecessor().expect("a predecessor is checked");
                let marker = layout::release_marker(election, predecessor.create_revision);
                // A leader that hands over touches our key in the
                // transaction that deleted its own, so that event is right
                // behind the deletion's on our stream. It is waited for
                // while the read is in flight: both are sound, the first
                // decides, and the touch is preferred when both are there.
                let read = async {
                    let local = match seen {
                        Some(seen) => {
                            check_turn_locally(client, &prefix, ours, &marker, seen).await
                        }
                        None => None,
                    };
                    match local {
                        Some(check) => (check, "local"),
                        None => (
                            check_turn_linearizably(client, &prefix, ours, &marker, patience).await,
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
                            let woken = woken.map_or(Input::WatchBroke, Input::Woken);
                            if let Input::Woken(Woken::HandedOver(at)) = woken {
                                PROCESS.led_without_read();
                                debug!(revision = at, "handed over");
                            }
                            turn.input(woken);
                            if matches!(turn.next(), Next::Decided(_)) {
                                break None;
                            }
                        }
                        (check, read) = &mut read => {
                            debug!(read, "turn checked");
                            break Some(Input::Checked(check));
                        }
                    }
                };
                // Handed over meanwhile: decided already.
                let Some(checked) = checked else { continue };
                checked
            }
        };
        turn.input(input);
    }
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
    let resp = match Box::pin(client.kv_client().txn(txn)).await {
        Err(e) if e.to_string().contains("permission denied") => {
            debug!("the release marker may not be read (permission denied); reading without it");
            let txn = turn_txn(prefix, ours, None, false);
            Box::pin(client.kv_client().txn(txn)).await
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
    let mut kv = client.kv_client();
    let read = Box::pin(kv.txn(txn));
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

/// Waits (at most one of its TTLs) until the lease of our last predecessor
/// has ended, i.e. its holder has stopped acting as leader.
async fn wait_for_lease_end(client: &Client, election: &str, pred: CandidateKey) {
    let started = Instant::now();
    let mut poll = Duration::from_millis(2);
    let mut limit = None;
    let marker = layout::release_marker(election, pred.create_revision);
    loop {
        let ttl = Box::pin(client.lease_client().time_to_live(pred.lease, None)).await;
        match ttl {
            Ok(resp) if resp.ttl() <= 0 => return,
            Ok(resp) => {
                // A lease shared by a session outlives the candidacy: its
                // holder says the work is over with a release marker.
                let released = Box::pin(
                    client
                        .kv_client()
                        .get(marker.as_str(), Some(GetOptions::new().with_count_only())),
                )
                .await;
                if released.is_ok_and(|r| r.count() > 0) {
                    let _ = Box::pin(client.kv_client().delete(marker.as_str(), None)).await;
                    return;
                }
                let granted = Duration::from_secs(resp.granted_ttl().max(0) as u64);
                let limit = *limit.get_or_insert_with(|| {
                    info!(
                        holder = %pred.id,
                        "predecessor's key is gone but its lease lives; waiting for it to end"
                    );
                    started + granted
                });
                if Instant::now() >= limit {
                    warn_counted!(holder = %pred.id, "predecessor's lease outlived its TTL; going ahead");
                    return;
                }
            }
            Err(e) => warn_counted!("asking for the predecessor's lease: {e}"),
        }
        sleep(poll).await;
        poll = (poll * 2).min(Duration::from_millis(100));
    }
}

/// Reads our key back: it must still exist, on our lease, with our create
/// revision. Returns the revision of the read, or `None` if it is gone.
async fn confirm(
    client: &Client,
    key: &str,
    lease: i64,
    my_rev: i64,
    patience: Duration,
) -> Option<i64> {
    retry("confirming our key", patience, || {
        confirm_once(client, key, lease, my_rev)
    })
    .await
}

async fn confirm_once(client: &Client, key: &str, lease: i64, my_rev: i64) -> Result<Option<i64>> {
    let resp = Box::pin(client.kv_client().get(key, None))
        .await
        .map_err(|e| etcd_error("confirming our key", e))?;
    let ours = resp
        .kvs()
        .first()
        .is_some_and(|kv| kv.lease() == lease && kv.create_revision() == my_rev);
    Ok(ours.then(|| resp.header().map_or(0, |h| h.revision())))
}

/// Retries an idempotent request with backoff until it succeeds, each
/// attempt bounded (see [`Attempts`]: a member that holds a request
/// unanswered must not hold the campaign); callers bound it all with the
/// lease deadline.
async fn retry<T, F, Fut>(what: &'static str, patience: Duration, mut request: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let mut backoff = Backoff::new();
    let mut attempts = Attempts::new(patience);
    loop {
        match attempts.send(what, request()).await {
            Ok(v) => return v,
            Err(e) => warn_counted!("{e}; retrying"),
        }
        backoff.wait().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn view(key: Option<&str>, revision: i64) -> View {
        View {
            leader: key.map(|k| CandidateKey {
                key: k.as_bytes().to_vec(),
                id: "x".into(),
                create_revision: 1,
                lease: 1,
            }),
            current: true,
            revision,
        }
    }

    #[test]
    fn only_newer_views_contradict() {
        assert!(
            !contradicts(&view(Some("e/1"), 10), b"e/2", 11),
            "older view"
        );
        assert!(contradicts(&view(Some("e/1"), 11), b"e/2", 11));
        assert!(contradicts(&view(None, 12), b"e/2", 11));
        assert!(!contradicts(&view(Some("e/2"), 12), b"e/2", 11));
        let mut stale = view(None, 20);
        stale.current = false;
        assert!(
            !contradicts(&stale, b"e/2", 11),
            "a broken watch proves nothing"
        );
    }
}
