//! Keeping the lease alive: the I/O of the [`Renewal`] recipe, through
//! every member at once.
//!
//! `etcd-client`'s `LeaseKeeper::keep_alive` sends a single ping, so the
//! loop is ours, and that is what we want: the leadership deadline must be
//! computed from the *send* time of a ping the server acknowledged, which
//! only the loop that sends knows. The server's expiry clock starts when it
//! receives the ping, never earlier, so `send time + TTL` cannot be later
//! than the server's expiry, minus what clock-rate error could add. The
//! loop's decisions (when to ping, which answer counts, what a ping must
//! prove) are [`Renewal`]'s; this module
//! sends what it asks for.
//!
//! That holds only if the member that acknowledged the ping still led etcd
//! when it did. Before etcd 3.4.31 and 3.5.13, a leader whose Raft loop is
//! stuck (a stalled fsync) keeps acknowledging keepalives from memory
//! while the other members elect a new leader, whose clock for our lease
//! started at its election (etcd#15247). Against such servers each ping
//! carries a proof (see [`RenewalProof`]): it is credited only if a
//! linearizable read through the same member, sent after the ping was
//! acknowledged, returns in the Raft term the member had before the ping.
//!
//! Only a leader needs that deadline. A candidate that waits renews at
//! the cadence Go's session does ([`Cadence::Following`]): a ping every
//! TTL/3 through one member, moving to the next when one fails, without
//! the proof. Its acknowledgements keep the lease ([`LeaseState::kept`])
//! and prove nothing where the proof is needed. The next in line and the
//! leader renew as today ([`Cadence::Leading`]), so a handover finds its
//! successor's deadline already proven.

use std::sync::Arc;
use std::time::Duration;

use etcd_client::{Client, ConnectOptions, GetOptions, KvClient, LeaseClient};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing::debug;

use super::recipe::{Renewal, RenewalInput, RenewalNext, RenewalRequest};
use crate::backend::cadence::Cadence;
use crate::backend::recipe::{Heard, Io, Step, drive};
use crate::clock::{BootInstant, sleep_until};
use crate::counters::{PROCESS, warn_counted};

/// What renews the lease through one member.
#[derive(Clone)]
pub(crate) struct Renewer {
    pub lease: LeaseClient,
    /// Set against servers that acknowledge keepalives without checking
    /// that they still lead (see the module doc). Shared: a renewal
    /// loop's future stays small.
    pub proof: Option<Arc<RenewalProof>>,
}

/// Proves that a keepalive acknowledged by one member renewed the lease at
/// the leader that counts (needed before etcd 3.4.31 and 3.5.13, see
/// etcd#15247). The member's Raft term is read before the ping (a
/// serializable read: its own) and after it (a linearizable read, which
/// the leader of that term answers only once a quorum has confirmed it
/// still leads). The same term on both sides means:
/// - the ping was handled by that term's leader: the member itself, or
///   the leader it forwards to, which is always its current term's;
/// - that leader was confirmed by a quorum after it renewed the lease, so
///   any later leader was elected after the renewal, and restarts the
///   lease's clock (a full TTL) from its election, later still.
///
/// So the send time of the ping plus the TTL is before the lease can
/// expire. A stalled leader answers neither read in time (its Raft loop
/// is stuck); once it recovers it has a new term, and the ping is not
/// credited. Costs two small reads per ping.
pub(crate) struct RenewalProof {
    /// The member the renewer's client is on.
    member: etcd_client::Channel,
    /// How to connect: authenticated as the candidate is (reads need
    /// permission where keepalives do not).
    options: ConnectOptions,
    /// A key the candidate may read: the election's prefix.
    key: String,
    /// The reader, made on first use: with a user, making it
    /// authenticates, which must not hold up the start on a member that
    /// does not answer (its pings fail as they would anyway).
    reader: tokio::sync::OnceCell<KvClient>,
}

impl RenewalProof {
    pub(crate) fn new(member: etcd_client::Channel, options: ConnectOptions, key: String) -> Self {
        RenewalProof {
            member,
            options,
            key,
            reader: tokio::sync::OnceCell::new(),
        }
    }

    /// The member's Raft term, from a read of `key`.
    async fn term(&self, linearizable: bool) -> std::result::Result<u64, String> {
        let reader = self
            .reader
            .get_or_try_init(|| async {
                let client = Box::pin(Client::from_channel(
                    self.member.clone(),
                    Some(self.options.clone()),
                ))
                .await?;
                Ok::<_, etcd_client::Error>(client.kv_client())
            })
            .await
            .map_err(|e| format!("connecting to read: {e}"))?;
        let mut options = GetOptions::new().with_keys_only().with_limit(1);
        if !linearizable {
            options = options.with_serializable();
        }
        let resp = Box::pin(reader.clone().get(self.key.as_str(), Some(options)))
            .await
            .map_err(|e| e.to_string())?;
        resp.header()
            .map(|h| h.raft_term())
            .ok_or_else(|| "a read without a header".to_string())
    }
}

/// What the keepalive loop knows about the lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseState {
    /// Until when the lease is surely alive: what a leader may count on.
    pub deadline: BootInstant,
    /// Until when a follower's acknowledged ping keeps the lease, unproven
    /// (never earlier than `deadline` says: see [`LeaseState::alive_until`]).
    pub kept: BootInstant,
    /// The server said the lease is gone (revoked or expired).
    pub expired: bool,
}

impl LeaseState {
    /// Until when a waiting candidate takes its lease to live: proven or
    /// only acknowledged. Never for leading: that is `deadline`.
    pub fn alive_until(&self) -> BootInstant {
        self.deadline.max(self.kept)
    }
}

/// Keeps the lease alive at the `cadence` asked for, until etcd says the
/// lease is gone. Leading, through every member at once, publishing the
/// latest deadline any of them bought; a change of cadence takes effect
/// at once (a leader's first pings go out as it is asked for).
///
/// A renewal only needs one member that can reach etcd's leader, but which
/// one cannot be known in advance: a member paused or cut off leaves pings
/// unanswered (no reset), a member whose leader was just paused answers
/// "no leader" until etcd has elected another, and a follower that still
/// forwards to the paused leader hangs. Pinging one member at a time and
/// moving on after a timeout can walk through all three within one TTL;
/// pinging all of them costs two extra requests per TTL/3 and rides out
/// any minority fault. Renewals only ever move the server's expiry later,
/// so the latest deadline any member acknowledged is sound.
pub(super) async fn keep_alive(
    renewers: Vec<Renewer>,
    id: i64,
    ttl: Duration,
    granted_at: BootInstant,
    state: watch::Sender<LeaseState>,
    mut cadence: watch::Receiver<Cadence>,
) {
    let state = Arc::new(state);
    // The grant renewed the lease: the first pings are due TTL/3 later.
    let mut first_ping_at = granted_at + ttl / 3;
    loop {
        let mut renewing = JoinSet::new();
        let leading = *cadence.borrow_and_update() == Cadence::Leading;
        if leading {
            for (member, renewer) in renewers.iter().enumerate() {
                let one = Renewing {
                    members: vec![(member, renewer.clone())],
                    id,
                    ttl,
                    following: false,
                };
                renewing.spawn(one.run(first_ping_at, state.clone()));
            }
        } else {
            let one = Renewing {
                members: renewers.iter().cloned().enumerate().collect(),
                id,
                ttl,
                following: true,
            };
            renewing.spawn(one.run(first_ping_at, state.clone()));
        }
        // Renewers only return once etcd says the lease is gone; dropping
        // the set stops the others.
        tokio::select! {
            _ = renewing.join_next() => break,
            Ok(()) = cadence.changed() => {
                debug!(lease = format_args!("{id:x}"), cadence = ?*cadence.borrow(), "renewing at another cadence");
                first_ping_at = BootInstant::now();
            }
        }
    }
    warn_counted!(
        lease = format_args!("{id:x}"),
        "etcd says the lease is gone"
    );
    state.send_modify(|s| s.expired = true);
}

/// One share of [`keep_alive`]: sends what its [`Renewal`] asks for
/// through its member, and publishes the deadlines it proves. A
/// follower's share has every member, and moves to the next when a
/// request fails or goes unanswered.
pub(super) struct Renewing {
    /// (index, renewer): the first is the one pinged.
    pub(super) members: Vec<(usize, Renewer)>,
    pub(super) id: i64,
    pub(super) ttl: Duration,
    pub(super) following: bool,
}

impl Renewing {
    /// Renews until etcd says the lease is gone. Each keepalive goes on a
    /// stream of its own, rather than one kept open: an idle keepalive
    /// stream holds about 16 KiB of gRPC buffers, three per candidate,
    /// for a ping every TTL/3; opening one costs no extra round trip (the
    /// ping travels with the stream's headers). Giving a ping up drops
    /// its stream, so a late acknowledgement never arrives at all.
    pub(super) async fn run(
        self,
        first_ping_at: BootInstant,
        state: Arc<watch::Sender<LeaseState>>,
    ) {
        let proves = self.members[0].1.proof.is_some();
        let mut renewal = Renewal::first_ping_at(self.ttl, first_ping_at, proves);
        if self.following {
            renewal = renewal.following();
        }
        let mut io = RenewalIo {
            renewing: self,
            state,
        };
        drive(&mut renewal, &mut io).await
    }

    /// The member pinged, and its renewer.
    fn member(&self) -> (usize, &Renewer) {
        let (member, renewer) = &self.members[0];
        (*member, renewer)
    }

    /// A request failed or went unanswered: a follower pings the next
    /// member from now on.
    fn move_on(&mut self) {
        self.members.rotate_left(1);
    }

    async fn request(&self, request: RenewalRequest) -> RenewalInput {
        let (member, renewer) = self.member();
        match request {
            RenewalRequest::ReadTerm { ping, linearizable } => {
                let Some(proof) = renewer.proof.as_deref() else {
                    unreachable!("a term is read only to prove a ping");
                };
                match proof.term(linearizable).await {
                    Ok(term) => {
                        debug!(member, ping, linearizable, term, "the member's Raft term");
                        RenewalInput::Term { ping, term }
                    }
                    Err(e) => {
                        debug!(member, "keepalive: reading the term: {e}");
                        RenewalInput::Failed { ping }
                    }
                }
            }
            RenewalRequest::KeepAlive { ping } => {
                match renewer.lease.clone().keep_alive(self.id).await {
                    // Dropping the keeper and the stream closes it.
                    Ok(_opened) => RenewalInput::KeptAlive { ping },
                    Err(etcd_client::Error::LeaseKeepAliveError(e)) if e.contains("not found") => {
                        RenewalInput::LeaseGone
                    }
                    Err(e) => {
                        debug!(member, "keepalive: {e}");
                        RenewalInput::Failed { ping }
                    }
                }
            }
        }
    }
}
/// One member's renewal I/O: its pings and term reads, each given up at
/// the instant the recipe says; the deadlines it proves, published.
struct RenewalIo {
    renewing: Renewing,
    state: Arc<watch::Sender<LeaseState>>,
}

impl RenewalIo {
    /// Moves the instant `field` picks to `until`, if that is later
    /// (renewals only ever move the server's expiry later).
    fn publish(&self, until: BootInstant, field: fn(&mut LeaseState) -> &mut BootInstant) {
        PROCESS.renewed();
        self.state.send_if_modified(|s| {
            let instant = field(s);
            let later = until > *instant;
            if later {
                *instant = until;
            }
            later
        });
    }
}

impl Io<Renewal> for RenewalIo {
    /// A request, and when to give it up.
    type Request = (RenewalRequest, BootInstant);
    /// Etcd says the lease is gone.
    type Outcome = ();

    fn step(&mut self, next: RenewalNext) -> Step<Self::Request, ()> {
        match next {
            RenewalNext::Wait(until) => Step::Wait(Some(until)),
            RenewalNext::Renewed { deadline } => {
                self.publish(deadline, |s| &mut s.deadline);
                Step::Said
            }
            RenewalNext::Kept { until } => {
                self.publish(until, |s| &mut s.kept);
                Step::Said
            }
            RenewalNext::LeaseGone => Step::Done(()),
            RenewalNext::Send {
                request,
                give_up_at,
            } => Step::Send((request, give_up_at)),
        }
    }

    async fn send(
        &mut self,
        _: &mut Renewal,
        (request, give_up_at): Self::Request,
    ) -> Heard<RenewalInput, ()> {
        // Boxed: the request's future is large and lives only for the
        // ping, where the task waiting between pings stays small.
        let answered = Box::pin(self.renewing.request(request));
        let input = tokio::select! {
            input = answered => input,
            () = sleep_until(give_up_at) => {
                debug!(member = self.renewing.member().0, "keepalive: no reply in time");
                RenewalInput::GaveUp
            }
        };
        if matches!(input, RenewalInput::GaveUp | RenewalInput::Failed { .. }) {
            self.renewing.move_on();
        }
        Heard::Input(input)
    }

    async fn wait(&mut self, _: &Renewal, until: Option<BootInstant>) -> Heard<RenewalInput, ()> {
        if let Some(until) = until {
            sleep_until(until).await;
        }
        Heard::Nothing
    }
}
