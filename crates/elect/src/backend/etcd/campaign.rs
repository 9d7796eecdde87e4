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
//! 6. lead until the lease deadline passes, the lease is gone, our key is
//!    gone, or a view at or after our confirmation shows another leader,
//!    as the [`Stint`](super::recipe::Stint) decides (`stint.rs` drives it).
//!
//! While it waits, the lease is renewed as a follower's (see
//! [`Cadence`]): at Go's cadence, proving nothing. The next in line (our
//! predecessor leads) and the leader renew as leaders, and a candidate
//! leads only once its deadline is proven: at its turn it renews as a
//! leader and, if its deadline is not ahead yet, waits for that proof.
//!
//! Losing leadership ends the candidacy: the lease is revoked once the work
//! has stopped, and a new candidacy starts on a fresh lease.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use etcd_client::{Client, Compare, CompareOp, PutOptions, Txn, TxnOp};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;
use tracing::{debug, info};

use super::bounds::WatchBounds;
use super::connection::retry;
use super::errors::etcd_error;
use super::handover::LeaderWatch;
use super::keywatch::wait_for_delete;
use super::layout::{self, CandidateKey, Ours};
use super::lease::Lease;
use super::observe::View;
use super::recipe::{Resignation, ResignationInput, ResignationNext, Steer, Touch, Transaction};
use super::renewal::{LeaseState, Renewer};
use super::{priority, switchover, transaction, turn};
use crate::backend::backoff::Backoff;
use crate::backend::cadence::Cadence;
use crate::backend::publish::Reporter;
use crate::backend::recipe::{Heard, Io, Step, drive};
use crate::backend_kind::Backend;
use crate::clock::{BootInstant, sleep_until};
use crate::config::ElectionConfig;
use crate::counters::warn_counted;
use crate::error::{Error, Result};
use crate::leadership::Leadership;
use crate::steer::{self, Standing};
use crate::work::WorkWatch;

/// How long a resigning leader waits for an elect successor to take its
/// release marker before it revokes its lease: the successor takes it
/// about one round trip after the handover; a slower one finds the lease
/// gone, which says the same.
const HANDOVER_WAIT: Duration = Duration::from_millis(500);

/// Why a candidacy ended.
#[derive(Debug)]
pub(super) enum Outcome {
    /// Resignation was requested.
    Resigned { led: bool },
    /// The candidacy cannot go on on this lease.
    Lost { led: bool, deadline: BootInstant },
    /// We led and give way to a switchover's target; the candidacy goes
    /// on, behind it.
    GaveWay(Steer),
    /// Priority 0: our turn came while a candidate of positive priority
    /// waited behind us; we released our key and queue again, behind it.
    SteppedAside,
}

/// Our leadership, as the stint (`stint.rs`) leads it: the key we lead
/// with, on which lease.
pub(super) struct Tenure<'a> {
    pub key: &'a str,
    pub lease: i64,
    /// Our key's create revision: the fencing token.
    pub token: i64,
    /// The revision our key was confirmed ours at.
    pub confirmed_at: i64,
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
    pub(super) client: Arc<Client>,
    /// One client per endpoint, for lease keepalives.
    renewers: Vec<Renewer>,
    pub(super) cfg: ElectionConfig,
    pub(super) reporter: Reporter<View>,
    work: WorkWatch,
    pub(super) resign: CancellationToken,
    /// The key and create revision of the current candidacy.
    current: Option<(String, i64)>,
    /// While we lead: our key and the next in line, whom a resignation
    /// hands over to.
    pub(super) leader_watch: Option<LeaderWatch>,
    /// Our priority, as the campaign's owner wishes it.
    pub(super) priority: watch::Receiver<Standing>,
    /// Whether the candidacy sets its lease's cadence: not on a lease
    /// shared by a session's elections, always renewed as a leader's.
    steers_cadence: bool,
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
            priority: watch::channel(Standing::DEFAULT).1,
            steers_cadence: true,
        }
    }

    /// The same, its priority as `priority` says (the config's, at first).
    pub fn wishing(mut self, priority: watch::Receiver<Standing>) -> Self {
        self.priority = priority;
        self
    }

    /// Campaigns until resignation is requested, one candidacy per lease.
    pub async fn run(mut self, mut lease: Lease) -> Result<()> {
        let mut published = self.publish_priority(lease.id);
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
                    published.abort();
                    lease.revoke(&self.client, self.cfg.connect_timeout).await;
                    self.resigned(led);
                    return Ok(());
                }
                Outcome::GaveWay(steer) => self.give_way(lease.id, steer, lease.ttl).await,
                Outcome::SteppedAside => {}
                Outcome::Lost { led, deadline } => {
                    if led {
                        self.step_down(deadline, lease.ttl).await;
                    }
                    published.abort();
                    lease.revoke(&self.client, self.cfg.connect_timeout).await;
                    match self.grant_again().await {
                        Some(next) => lease = next,
                        None => return Ok(()),
                    }
                    published = self.publish_priority(lease.id);
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
        self.steers_cadence = false;
        let _published = AbortOnDropHandle::new(self.publish_priority(lease.id));
        loop {
            match self.candidacy(&lease).await {
                Outcome::Resigned { led } => {
                    if led {
                        self.reporter.demoted(BootInstant::now());
                    }
                    let resignation = Resignation::new(self.elect_successor(), self.working());
                    let released = self.release_when_idle(lease.id, resignation, lease.ttl);
                    if let Some(released) = released.await
                        && released.touched
                    {
                        // The session's lease lives on: nobody else would
                        // remove the marker; once a successor's read of its
                        // turn racing the touch is surely done (see
                        // `give_way`).
                        self.remove_later(released.marker);
                    }
                    self.resigned(led);
                    return Ok(());
                }
                Outcome::GaveWay(steer) => self.give_way(lease.id, steer, lease.ttl).await,
                Outcome::SteppedAside => {}
                Outcome::Lost { led, deadline } => {
                    if led {
                        self.step_down(deadline, lease.ttl).await;
                    }
                    if lease.state().expired {
                        self.reporter.publish(Leadership::unknown());
                        return Err(ended());
                    }
                    let resignation = Resignation::new(None, self.working());
                    self.release_when_idle(lease.id, resignation, lease.ttl)
                        .await;
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
        let resignation = Resignation::new(successor, self.working());
        let Some(released) = self.release_when_idle(lease, resignation, ttl).await else {
            return;
        };
        if released.touched {
            debug!(revision = released.at, "handed over to the next in line");
            return;
        }
        if expects_taker {
            let bounds = WatchBounds::new(self.cfg.connect_timeout);
            let marker = released.marker.as_bytes();
            let taken = wait_for_delete(&self.client, marker, released.at, bounds);
            match tokio::time::timeout(HANDOVER_WAIT, taken).await {
                Ok(_) => debug!("handover: the successor took the release marker"),
                Err(_) => debug!("the successor did not take the release marker; revoking"),
            }
        }
    }

    /// Keeps our priority published on `lease` (see the `priority`
    /// module) until the returned task is aborted.
    fn publish_priority(&self, lease: i64) -> tokio::task::JoinHandle<()> {
        let client = self.client.clone();
        priority::publish(client, &self.cfg.election, lease, self.priority.clone())
    }

    /// Unhealthy or priority 0 at our turn: whether a candidate of a
    /// higher tier waits behind us (a failed read says no: we lead, as any
    /// candidate whose turn came; a failback hands over later).
    async fn others_come_first(&self, create_revision: i64) -> bool {
        let own = *self.priority.borrow();
        if own.tier() == Standing::DEFAULT.tier() {
            return false;
        }
        let read = priority::behind(&self.client, &self.cfg.election, create_revision);
        match tokio::time::timeout(self.cfg.connect_timeout, read).await {
            Ok(Ok((behind, _))) => steer::steps_aside(own, behind.iter().map(|(_, s)| *s)),
            _ => false,
        }
    }

    /// Gives way to a switchover's target (the stint's rule 5): demoted at
    /// once, the release sent once the work has stopped, touching the
    /// target while the switchover's record lives; the lease lives on for
    /// the next candidacy, behind the target.
    async fn give_way(&mut self, lease: i64, steer: Steer, ttl: Duration) {
        self.reporter.demoted(BootInstant::now());
        self.leader_watch = None;
        let resignation = Resignation::steered(steer, self.working());
        let released = self.release_when_idle(lease, resignation, ttl).await;
        match released {
            Some(released) if released.touched => {
                info!("handed over to the switchover's target");
                // Our lease lives on, so nobody else would remove the
                // marker; but the target may be reading its turn right now
                // (its stream woke on our key's deletion before the touch
                // reached it), and a read that found the marker gone would
                // wait for our lease (a TTL: found by compare's
                // switchover-last). It goes once that read is surely done.
                self.remove_later(released.marker);
            }
            Some(_) => info!("released for a switchover that had ended: a plain handover"),
            None => {}
        }
        switchover::withdraw_own(&self.client, &self.cfg.election, lease).await;
        self.reporter.publish(Leadership::unknown());
    }

    /// Whether work started under our leadership runs now.
    fn working(&self) -> bool {
        self.work.is_running()
    }

    /// Deletes `key`, a marker of ours, once [`HANDOVER_WAIT`] has passed,
    /// in the background.
    fn remove_later(&self, key: String) {
        let (client, within) = (self.client.clone(), self.cfg.connect_timeout);
        tokio::spawn(async move {
            tokio::time::sleep(HANDOVER_WAIT).await;
            let mut kv = client.kv_client();
            let deleted = Box::pin(kv.delete(key.as_str(), None));
            if let Ok(Err(e)) = tokio::time::timeout(within, deleted).await {
                debug!(key, "removing: {e}");
            }
        });
    }

    /// The next in line, if we lead and it is an elect candidate: whom a
    /// resignation may hand over to. Stops following it.
    fn elect_successor(&mut self) -> Option<CandidateKey> {
        self.leader_watch
            .take()
            .and_then(|watch| watch.elect_successor())
    }

    /// Ends the current candidacy as `resignation` decides: once the work
    /// started under our leadership has stopped (waiting at most `ttl`,
    /// as a lost leader does), the release, with its touch if any.
    async fn release_when_idle(
        &mut self,
        lease: i64,
        mut resignation: Resignation,
        ttl: Duration,
    ) -> Option<Released> {
        let mut io = ResignationIo {
            candidate: self,
            ttl,
        };
        let touch = drive(&mut resignation, &mut io).await;
        self.release(lease, touch.as_ref(), ttl).await
    }

    /// Ends the current candidacy, its work stopped: one transaction
    /// deletes our key (if it is still this candidacy's), writes its
    /// release marker, bound to the lease, and, given a `touch`, hands
    /// over to the next in line ([`Transaction::release`]). The marker tells a successor
    /// waiting on our lease (a session's, or ours until we revoke it) that
    /// the work is over. `None` if the transaction failed (a successor then
    /// waits for the lease).
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
        let txn = Transaction::release(&self.cfg.election, &key, rev, lease, touch);
        let within = self.cfg.connect_timeout.min(ttl);
        let sent = transaction::send(&self.client, &txn, "releasing our key");
        let answer = match tokio::time::timeout(within, sent).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(e)) => {
                warn_counted!(key, "{e}; a successor waits for the lease");
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
        debug!(
            revision = answer.revision,
            "released: key deleted, release marker written"
        );
        Some(Released {
            at: answer.revision,
            touched: answer.touched(),
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
        let (predecessor, found) = watch::channel(None);
        let paced = lease.cadence().subscribe();
        let waited = turn::wait_for_turn(&client, &election, ours, patience, &predecessor, paced);
        let cadence = self.steers_cadence.then(|| lease.cadence());
        let view = self.reporter.view.clone();
        let own = key.clone().into_bytes();
        // Boxed: the wait and the cadence's steering together would size
        // the whole candidacy's future (a_candidates_futures_stay_small).
        let waited = Box::pin(async {
            tokio::select! {
                turn = waited => turn,
                never = steer_cadence(cadence, own, found, view) => match never {},
            }
        });
        let turn = match self.until_lost(&mut lease_state, waited).await {
            Ok(turn) => turn,
            Err(outcome) => return outcome,
        };
        if self.steers_cadence {
            lease.renew_as(Cadence::Leading);
        }
        if self.others_come_first(my_rev).await {
            info!(
                standing = self.priority.borrow().encode(),
                "our turn came; stepping aside for a candidate healthier or of positive priority"
            );
            let resignation = Resignation::new(None, false);
            self.release_when_idle(lease.id, resignation, lease.ttl)
                .await;
            return Outcome::SteppedAside;
        }
        let confirmed_at = match self.take_office(&mut lease_state, lease, ours, turn).await {
            Ok(confirmed_at) => confirmed_at,
            Err(outcome) => return outcome,
        };
        // A follower's pings proved nothing: lead on a proven deadline.
        let mut proof = lease.watch();
        let proven = proof.wait_for(|s| s.expired || s.deadline > BootInstant::now());
        if let Err(outcome) = self.until_lost(&mut lease_state, proven).await {
            return outcome;
        }
        let tenure = Tenure {
            key: &key,
            lease: lease.id,
            token: my_rev,
            confirmed_at,
        };
        let outcome = self.lead(&mut lease_state, tenure).await;
        if !matches!(outcome, Outcome::Resigned { .. }) {
            // Lost: nobody to hand over to.
            self.leader_watch = None;
        }
        outcome
    }

    /// Runs one step of a candidacy, reporting the leader meanwhile and
    /// giving up when resignation is requested or the lease is lost.
    pub(super) async fn until_lost<T>(
        &mut self,
        lease_state: &mut watch::Receiver<LeaseState>,
        step: impl Future<Output = T>,
    ) -> Result<T, Outcome> {
        tokio::pin!(step);
        self.reporter.show_view();
        loop {
            // A waiting candidate's lease lives by its follower's pings
            // too; the stint alone leads, on the proven deadline.
            let deadline = lease_state.borrow_and_update().alive_until();
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

/// The resignation's I/O: the wait until the work has stopped (at most
/// `ttl`). Its drive ends with the release it decided on, which
/// [`Candidate::release`] sends.
struct ResignationIo<'c> {
    candidate: &'c mut Candidate,
    ttl: Duration,
}

impl Io<Resignation> for ResignationIo<'_> {
    type Request = std::convert::Infallible;
    /// The touch the release carries, if any.
    type Outcome = Option<Touch>;

    fn step(&mut self, next: ResignationNext) -> Step<Self::Request, Option<Touch>> {
        match next {
            ResignationNext::AwaitWorkStopped => Step::Wait(None),
            ResignationNext::Release(touch) => Step::Done(touch),
        }
    }

    async fn send(
        &mut self,
        _: &mut Resignation,
        request: Self::Request,
    ) -> Heard<ResignationInput, Option<Touch>> {
        match request {}
    }

    async fn wait(
        &mut self,
        _: &Resignation,
        _: Option<BootInstant>,
    ) -> Heard<ResignationInput, Option<Touch>> {
        self.candidate.wait_until_idle(self.ttl).await;
        Heard::Input(ResignationInput::WorkStopped)
    }
}

/// Renews our lease as a leader's while the leader the `view` names is our
/// predecessor (as `found` names it), so a handover finds our deadline
/// proven, or is already us (handed over, and our watch has yet to say
/// so), and as a follower's otherwise. `None`: the cadence is not ours to
/// set. Runs until dropped.
async fn steer_cadence(
    cadence: Option<watch::Sender<Cadence>>,
    own: Vec<u8>,
    mut found: watch::Receiver<Option<Vec<u8>>>,
    mut view: watch::Receiver<View>,
) -> std::convert::Infallible {
    let Some(cadence) = cadence else {
        return std::future::pending().await;
    };
    loop {
        let next_in_line = {
            let (predecessor, view) = (found.borrow_and_update(), view.borrow_and_update());
            next_in_line(&own, predecessor.as_deref(), view.leader.as_ref())
        };
        Cadence::for_next_in_line(next_in_line).set_on(&cadence);
        tokio::select! {
            Ok(()) = found.changed() => {}
            Ok(()) = view.changed() => {}
            else => return std::future::pending().await,
        }
    }
}

/// Whether the candidate of key `own`, behind `predecessor`, is next in
/// line under `leader`: the leader is its predecessor, or already itself.
fn next_in_line(own: &[u8], predecessor: Option<&[u8]>, leader: Option<&CandidateKey>) -> bool {
    leader.is_some_and(|l| l.key == own || predecessor == Some(l.key.as_slice()))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> CandidateKey {
        CandidateKey {
            key: name.as_bytes().to_vec(),
            id: name.into(),
            create_revision: 1,
            lease: 1,
        }
    }

    #[test]
    fn the_next_in_line_is_behind_the_leader_or_handed_over_to() {
        let (own, predecessor) = (b"e/b".as_slice(), Some(b"e/a".as_slice()));
        assert!(next_in_line(own, predecessor, Some(&key("e/a"))));
        // Handed over: the view names us before our watch says so.
        assert!(next_in_line(own, predecessor, Some(&key("e/b"))));
        assert!(!next_in_line(own, Some(b"e/x"), Some(&key("e/a"))));
        assert!(!next_in_line(own, None, Some(&key("e/a"))));
        assert!(!next_in_line(own, predecessor, None));
    }
}
