//! How a candidate reaches etcd: one connection per member, shared by its
//! requests and by its lease's renewals.
//!
//! The keepalive loop renews through every member at once (see
//! [`super::renewal`]), so it needs a client bound to each member; the
//! requests need a client that balances over the members. Built with
//! `etcd-client`'s `Client::connect`, each of those would open its own
//! connections: six per candidate at three members. Here each member's
//! connection is made once; every renewer is a client on one of them, and
//! the requests' client balances over all of them ([`LeastLoaded`]: the
//! power of two choices, by requests in flight, so a member that stopped
//! answering is passed over once a request waits on it). Three connections
//! per candidate at three members, the fewest that keep a renewal path
//! through every member.
//!
//! Connecting also asks each member its version: against servers that
//! acknowledge keepalives without checking that they lead (before etcd
//! 3.4.31 and 3.5.13), each renewal carries a proof (see
//! [`super::renewal::RenewalProof`]), and we say so at start; of etcd
//! 3.5.0 to 3.5.2, whose members can diverge after a crash, we warn.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use etcd_client::{Certificate, Client, ConnectOptions, Identity, TlsOptions};
use tonic::transport::{Channel, Endpoint};
use tower::Service;
use tower::util::BoxCloneSyncService;
use tracing::{debug, warn};

use super::bounds::{SHORTEST_ATTEMPT, first_attempt};
use super::errors::BACKEND;
use super::layout;
use super::renewal::{RenewalProof, Renewer};
use crate::backend::backoff::Backoff;
use crate::config::ElectionConfig;
use crate::counters::warn_counted;
use crate::error::{Error, Result};

/// A candidate's clients, all over one connection per member.
pub(crate) struct Connections {
    /// Balances every request over the members. Shared (a `Client` is
    /// 3.7 KiB) by the tasks of a candidate.
    pub client: Arc<Client>,
    /// One renewer per member, for the lease's renewals (in the order of
    /// the configured endpoints).
    pub renewers: Vec<Renewer>,
}

/// How often an idle connection is pinged: just above etcd's default
/// `--grpc-keepalive-min-time` of 5 s, which it enforces.
const KEEPALIVE_PING: Duration = Duration::from_secs(6);

/// Opens the clients of one candidate: the balancing client and a lease
/// client per member, on the same connections.
pub(crate) async fn connect(cfg: &ElectionConfig) -> Result<Connections> {
    let (client, members) = open(cfg).await?;
    let mut plain = Vec::with_capacity(members.len());
    for member in &members {
        // Keepalives need no auth token (etcd checks none for
        // LeaseKeepAlive), so the renewers do not authenticate: each
        // authentication is a password check (bcrypt) on the server.
        // Boxed: the future holds a whole `Client` (3.7 KiB).
        let channel = etcd_client::Channel::Tonic(member.clone());
        let renewer = Box::pin(Client::from_channel(channel, Some(options(None))))
            .await
            .map_err(|e| refused(cfg, e))?;
        plain.push(renewer);
    }
    let prove = renewals_need_proof(cfg, &plain).await;
    let renewers = members
        .into_iter()
        .zip(plain)
        .map(|(member, renewer)| Renewer {
            lease: renewer.lease_client(),
            // The reads need the candidate's permission: a client of
            // their own on this member, authenticated where a user is set.
            proof: prove.then(|| {
                Arc::new(RenewalProof::new(
                    etcd_client::Channel::Tonic(member),
                    options(cfg.user.as_ref()),
                    layout::prefix(&cfg.election),
                ))
            }),
        })
        .collect();
    Ok(Connections { client, renewers })
}

/// How long the members are given to say their version at the start: a
/// member that does not answer in time counts as old, which costs only
/// the proof, and the start is not held up for it.
const VERSION_WITHIN: Duration = Duration::from_millis(500);

/// Whether a keepalive acknowledged by a member of this cluster may not
/// have renewed the lease (see [`renews_without_leading`]): asks every
/// member its version at once, and says at start what was found, and
/// once a process whether a member runs a release whose data can diverge
/// after a crash ([`diverges_after_a_crash`]). A member that does not say
/// is counted as old.
async fn renewals_need_proof(cfg: &ElectionConfig, members: &[Client]) -> bool {
    let within = cfg.connect_timeout.min(VERSION_WITHIN);
    let mut asked = tokio::task::JoinSet::new();
    for (i, client) in members.iter().enumerate() {
        let mut client = client.clone();
        asked.spawn(async move {
            let status = tokio::time::timeout(within, Box::pin(client.status())).await;
            (i, status)
        });
    }
    let mut statuses: Vec<_> = asked.join_all().await;
    statuses.sort_by_key(|(i, _)| *i);
    let mut old = Vec::new();
    let mut diverging = Vec::new();
    let mut fragile = Vec::new();
    for ((_, status), url) in statuses.into_iter().zip(cfg.etcd_urls()) {
        match status {
            Ok(Ok(status)) => {
                let version = status.version();
                if renews_without_leading(version) {
                    old.push(format!("{url} runs etcd {version}"));
                }
                if diverges_after_a_crash(version) {
                    diverging.push(format!("{url} runs etcd {version}"));
                }
                if crashes_on_abandoned_reads(version) {
                    fragile.push(format!("{url} runs etcd {version}"));
                }
            }
            Ok(Err(e)) => old.push(format!("{url} did not say its version ({e})")),
            Err(_) => old.push(format!("{url} did not say its version in {within:?}")),
        }
    }
    if !old.is_empty() {
        let found = old.join("; ");
        if first_said(&found) {
            warn!(
                "{found}: etcd before 3.4.31 and 3.5.13 acknowledges lease renewals on a leader that has lost its quorum (etcd#15247); each renewal is proven with a linearizable read through the same member, one more round trip per renewal; upgrade etcd to drop it"
            );
        } else {
            debug!("{found}: renewals proven with a read (etcd#15247, said above)");
        }
    }
    if !diverging.is_empty() {
        let found = diverging.join("; ");
        if first_said(&format!("diverging: {found}")) {
            warn!(
                "{found}: a member of etcd 3.5.0 to 3.5.2 killed while applying a transaction can come back with data that differs from the others' (etcd#13766, fixed in 3.5.3; etcd's maintainers advise against these releases in production); elect's rules rest on every member holding the same keys and cannot detect a member that does not; upgrade etcd, or start its members with --experimental-initial-corrupt-check"
            );
        }
    }
    if !fragile.is_empty() {
        let found = fragile.join("; ");
        if first_said(&format!("fragile: {found}")) {
            warn!(
                "{found}: a member of etcd 3.5.0 to 3.5.4 crashes when a client goes away while it applies that client's read-only transaction (etcd#14110, fixed in 3.5.5); elect never abandons one, but any client killed mid-read can crash a member; upgrade etcd"
            );
        }
    }
    !old.is_empty()
}

/// Whether `finding` is said for the first time in this process: a
/// process with many campaigns on one cluster (`elect compare`'s scale
/// scenario holds dozens) warns once, not once a campaign.
fn first_said(finding: &str) -> bool {
    static SAID: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut said = SAID
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if said.iter().any(|s| s == finding) {
        return false;
    }
    said.push(finding.to_owned());
    true
}

/// Whether etcd `version` acknowledges keepalives without checking that
/// it still leads: every release before 3.4.31 and 3.5.13 (etcd#15247,
/// fixed by a leadership check before renewing). A version we cannot
/// read counts as such.
fn renews_without_leading(version: &str) -> bool {
    let mut parts = version
        .trim_start_matches('v')
        .split(['.', '-', '+'])
        .map(|p| p.parse::<u64>());
    let (Some(Ok(major)), Some(Ok(minor)), Some(Ok(patch))) =
        (parts.next(), parts.next(), parts.next())
    else {
        return true;
    };
    match (major, minor) {
        (3, 4) => patch < 31,
        (3, 5) => patch < 13,
        (3, m) => m < 4,
        (m, _) => m < 3,
    }
}

/// Whether etcd `version` is one of the releases whose members can come
/// back from a crash with data that differs from the others' (3.5.0 to
/// 3.5.2: etcd#13766, fixed in 3.5.3 by etcd#13854 and etcd#13908).
fn diverges_after_a_crash(version: &str) -> bool {
    let mut parts = version.trim_start_matches('v').split(['.', '-', '+']);
    matches!(
        (parts.next(), parts.next(), parts.next()),
        (Some("3"), Some("5"), Some("0" | "1" | "2"))
    )
}

/// Whether etcd `version` is one of the releases whose members crash when
/// a read-only transaction's client goes away while it is applied (3.5.0
/// to 3.5.4: etcd#14110, fixed in 3.5.5 by etcd#14178; see
/// [`super::transaction::read_only`]).
fn crashes_on_abandoned_reads(version: &str) -> bool {
    let mut parts = version.trim_start_matches('v').split(['.', '-', '+']);
    matches!(
        (parts.next(), parts.next(), parts.next()),
        (Some("3"), Some("5"), Some("0" | "1" | "2" | "3" | "4"))
    )
}

/// Opens the balancing client alone, for those who only read and watch
/// (`leader`, `observe`).
pub(crate) async fn connect_reader(cfg: &ElectionConfig) -> Result<Arc<Client>> {
    Ok(open(cfg).await?.0)
}

/// The members' channels and the client balancing over them. The
/// connections themselves are made lazily by the first request, which
/// callers bound with [`first_contact`]; with a user, connecting
/// authenticates at once, and that is the first contact.
async fn open(cfg: &ElectionConfig) -> Result<(Arc<Client>, Vec<Channel>)> {
    let until = tokio::time::Instant::now() + cfg.connect_timeout;
    let mut attempts = 0;
    loop {
        attempts += 1;
        let members = cfg
            .etcd_urls()
            .iter()
            .map(|url| member_channel(cfg, url))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| refused(cfg, e.into()))?;
        // Boxed: the future holds a whole `Client` (3.7 KiB) and more;
        // inline it would size every caller's future.
        let connecting = Box::pin(Client::from_channel(
            balanced(&members),
            Some(options(cfg.user.as_ref())),
        ));
        match tokio::time::timeout_at(until, connecting).await {
            Ok(Ok(client)) => return Ok((Arc::new(client), members)),
            // The connection failed before the request could use it, and
            // hyper says only that (its cause, often a refused TLS
            // handshake, is gone): once more, to learn what it was.
            Ok(Err(e)) if attempts == 1 && connection_not_ready(&e) => {
                debug!(
                    "first contact: {}; trying again to learn why",
                    error_chain(&e)
                );
            }
            Ok(Err(e)) => return Err(refused(cfg, e)),
            Err(_) => return Err(unreachable(cfg, "no answer")),
        }
    }
}

/// One member's channel: a single HTTP/2 connection, made on first use and
/// remade after it fails.
fn member_channel(
    cfg: &ElectionConfig,
    url: &str,
) -> std::result::Result<Channel, tonic::transport::Error> {
    // HTTP/2 pings find a dead connection within ~9 s even while idle (the
    // lease's renewals, with their own timeouts, are what keep leadership
    // safe). etcd answers pings more often than its
    // --grpc-keepalive-min-time (5 s by default) with a GOAWAY
    // "too_many_pings", which broke every idle watch every few seconds when
    // we pinged each second.
    let mut endpoint = Endpoint::from_shared(url.to_string())?
        .connect_timeout(cfg.connect_timeout)
        .http2_keep_alive_interval(KEEPALIVE_PING)
        .keep_alive_timeout(Duration::from_secs(3))
        .keep_alive_while_idle(true);
    if let Some(tls) = &cfg.tls {
        crate::credentials::crypto_provider();
        let mut client_tls = TlsOptions::new().ca_certificate(Certificate::from_pem(tls.ca_pem()));
        if let Some((cert, key)) = tls.identity_pem() {
            client_tls = client_tls.identity(Identity::from_pem(cert, key));
        }
        if let Some(name) = tls.server_name() {
            client_tls = client_tls.domain_name(name);
        }
        endpoint = endpoint.tls_config(client_tls)?;
    }
    Ok(endpoint.connect_lazy())
}

/// A channel that sends each request to the less busy of two members
/// picked at random, over the members' own connections.
fn balanced(members: &[Channel]) -> etcd_client::Channel {
    etcd_client::Channel::Custom(BoxCloneSyncService::new(LeastLoaded::new(members)))
}

/// The power of two choices over the members' channels, by requests in
/// flight: each request goes to the member with fewer requests awaiting
/// an answer of two picked at random, so a member that stopped answering
/// is passed over once a request waits on it. A request counts until its
/// answer's head arrives (a watch's stream then goes on uncounted), as
/// tower's `PendingRequests` counted. A member whose connection failed (a
/// request to it ended in a transport error: refused, reset) is passed
/// over for [`PASS_OVER`] while another is left: a member that is down
/// refuses at once, carries no load, and would otherwise take a third of
/// the requests (observers then saw no leader for seconds of a member's
/// restart).
///
/// A request abandoned unanswered after [`ABANDONED`] (a timeout gave up
/// on it: the member holds the connection open without answering, as a
/// paused or partitioned one does) passes its member over too: once
/// dropped, it no longer counts in flight, and the retry would otherwise
/// be as likely to go there again.
///
/// Clones share the counts and pick on their own, each from a random
/// state of its own (a clone made for one request, `kv_client()`, would
/// otherwise pick what its original picks, the same member every time:
/// the soak found a record write retried four times into one paused
/// member). Unlike tower's
/// `Balance` it needs no `Buffer` in front (it is `Clone`), so a request
/// goes straight to the member's channel: no worker task to hop through,
/// and no queue of its own per candidate.
struct LeastLoaded {
    members: Vec<Channel>,
    health: Arc<Health>,
    /// The member `poll_ready` chose for the next `call`.
    chosen: Option<usize>,
    /// This clone's random state (xorshift).
    random: u64,
}

/// How long a member whose connection failed is passed over.
const PASS_OVER: Duration = Duration::from_secs(1);

/// A request dropped unanswered after this long passes its member over.
const ABANDONED: Duration = Duration::from_millis(250);

impl Clone for LeastLoaded {
    fn clone(&self) -> LeastLoaded {
        // A state of its own: the original's, mixed with how many clones
        // came before (splitmix64's finalizer), never 0 (xorshift's fixed
        // point).
        let n = self.health.clones.fetch_add(1, Ordering::Relaxed);
        let mut z = self.random ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        LeastLoaded {
            members: self.members.clone(),
            health: self.health.clone(),
            chosen: None,
            random: (z ^ (z >> 31)) | 1,
        }
    }
}

/// What every clone of a [`LeastLoaded`] knows of the members.
struct Health {
    /// Requests awaiting their answer's head, per member.
    in_flight: Box<[AtomicUsize]>,
    /// When a member's connection last failed, in nanoseconds after
    /// `since` (0: not since it last answered).
    failed_at: Box<[AtomicU64]>,
    since: std::time::Instant,
    /// Clones made so far, which seed each clone's random state.
    clones: AtomicU64,
}

impl Health {
    fn now(&self) -> u64 {
        // At least 1: 0 means "not failed".
        (self.since.elapsed().as_nanos() as u64).max(1)
    }

    fn passed_over(&self, member: usize, now: u64) -> bool {
        let failed = self.failed_at[member].load(Ordering::Relaxed);
        failed != 0 && now.saturating_sub(failed) < PASS_OVER.as_nanos() as u64
    }
}

impl LeastLoaded {
    fn new(members: &[Channel]) -> LeastLoaded {
        use std::hash::{BuildHasher, Hasher};
        let seed = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        LeastLoaded {
            members: members.to_vec(),
            health: Arc::new(Health {
                in_flight: members.iter().map(|_| AtomicUsize::new(0)).collect(),
                failed_at: members.iter().map(|_| AtomicU64::new(0)).collect(),
                since: std::time::Instant::now(),
                clones: AtomicU64::new(0),
            }),
            chosen: None,
            random: seed | 1,
        }
    }

    /// The less loaded of two distinct members picked at random, passing
    /// over members whose connection just failed while others are left.
    fn pick(&mut self) -> usize {
        let n = self.members.len();
        if n == 1 {
            return 0;
        }
        let mut next = || {
            self.random ^= self.random << 13;
            self.random ^= self.random >> 7;
            self.random ^= self.random << 17;
            self.random
        };
        let a = (next() % n as u64) as usize;
        let b = (a + 1 + (next() % (n as u64 - 1)) as usize) % n;
        let health = &self.health;
        let now = health.now();
        match (health.passed_over(a, now), health.passed_over(b, now)) {
            (false, true) => a,
            (true, false) => b,
            // Both just failed: any other that has not, else `a`.
            (true, true) => (0..n)
                .map(|k| (a + k) % n)
                .find(|&i| !health.passed_over(i, now))
                .unwrap_or(a),
            (false, false) => {
                let load = |i: usize| health.in_flight[i].load(Ordering::Relaxed);
                if load(b) < load(a) { b } else { a }
            }
        }
    }
}

/// Counts a request in flight on a member until dropped; dropped
/// unanswered after [`ABANDONED`], passes the member over.
struct InFlight {
    health: Arc<Health>,
    member: usize,
    sent: u64,
    answered: bool,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.health.in_flight[self.member].fetch_sub(1, Ordering::Relaxed);
        let now = self.health.now();
        if !self.answered && now.saturating_sub(self.sent) >= ABANDONED.as_nanos() as u64 {
            self.health.failed_at[self.member].store(now, Ordering::Relaxed);
        }
    }
}

type TonicRequest = tonic::codegen::http::Request<tonic::body::Body>;
type TonicResponse = tonic::codegen::http::Response<tonic::body::Body>;

impl Service<TonicRequest> for LeastLoaded {
    type Response = TonicResponse;
    type Error = tower::BoxError;
    type Future =
        Pin<Box<dyn Future<Output = std::result::Result<TonicResponse, tower::BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<std::result::Result<(), Self::Error>> {
        let member = match self.chosen {
            Some(member) => member,
            None => {
                let member = self.pick();
                self.chosen = Some(member);
                member
            }
        };
        let ready = self.members[member].poll_ready(cx);
        if let Poll::Ready(Err(_)) = ready {
            // The next request picks afresh.
            self.chosen = None;
        }
        ready.map_err(Into::into)
    }

    fn call(&mut self, request: TonicRequest) -> Self::Future {
        let member = self.chosen.take().expect("poll_ready before call");
        self.health.in_flight[member].fetch_add(1, Ordering::Relaxed);
        let mut counted = InFlight {
            sent: self.health.now(),
            health: self.health.clone(),
            member,
            answered: false,
        };
        let answer = self.members[member].call(request);
        Box::pin(async move {
            let answer = answer.await;
            // A transport error (gRPC's own errors come as answers): the
            // connection failed; an answer: the member is back.
            let failed_at = if answer.is_err() {
                counted.health.now()
            } else {
                0
            };
            counted.health.failed_at[member].store(failed_at, Ordering::Relaxed);
            counted.answered = true;
            drop(counted);
            answer.map_err(Into::into)
        })
    }
}

/// What every client of a candidate asks of etcd-client: `require_leader`
/// makes members that lost quorum fail our requests and watches instead
/// of serving them silently, and a `user`'s token is refreshed when it
/// expires (simple tokens after --auth-token-ttl, JWTs when auth changes).
fn options(user: Option<&crate::credentials::User>) -> ConnectOptions {
    let options = ConnectOptions::new().with_require_leader(true);
    match user {
        Some(user) => options
            .with_user(user.name(), user.password().expose())
            .with_auto_token_refresh(true),
        None => options,
    }
}

/// Whether a request failed only because its connection never became
/// ready, with no cause given.
fn connection_not_ready(e: &etcd_client::Error) -> bool {
    error_chain(e).contains("connection was not ready")
}

/// What a failed first contact means: a TLS handshake that failed, a
/// password etcd refused, a permission it lacks, or no answer at all.
fn refused(cfg: &ElectionConfig, e: etcd_client::Error) -> Error {
    let text = error_chain(&e);
    let lower = text.to_lowercase();
    if lower.contains("authentication failed") || lower.contains("invalid auth token") {
        return Error::Auth {
            backend: BACKEND,
            detail: format!(
                "authentication failed for user {:?}: etcd refused the name or password",
                cfg.user.as_ref().map(|u| u.name()).unwrap_or("")
            ),
        };
    }
    if lower.contains("permission denied") {
        return Error::Auth {
            backend: BACKEND,
            detail: format!(
                "permission denied: the user needs readwrite on the election's name as a \
                 prefix, {:?}, which holds its keys ({:?}) and the markers beside them; a role \
                 on a parent prefix (say `apps/` for the election `apps/jobs`) covers both",
                cfg.election,
                layout::prefix(&cfg.election)
            ),
        };
    }
    if lower.contains("user name is empty") || lower.contains("user name not found") {
        return Error::Auth {
            backend: BACKEND,
            detail: "etcd requires authentication: give --user and a password".into(),
        };
    }
    let tls_words = [
        "certificate",
        "handshake",
        "tls",
        "invalidcontenttype",
        "corrupt message",
        "unknownca",
        "bad certificate",
    ];
    if cfg.tls.is_some() && tls_words.iter().any(|w| lower.contains(w)) {
        return Error::Tls {
            backend: BACKEND,
            endpoints: cfg.service().to_string(),
            detail: text,
        };
    }
    // A server that wants a client certificate it did not get (or does
    // not trust) closes the connection right after the TLS 1.3 handshake;
    // the client sees it closed, or its next write hit a broken pipe.
    let closed = ["connection closed", "broken pipe", "connection reset"];
    if cfg.tls.is_some() && closed.iter().any(|w| lower.contains(w)) {
        return Error::Tls {
            backend: BACKEND,
            endpoints: cfg.service().to_string(),
            detail: format!(
                "etcd closed the connection; it may want a client certificate from its CA \
                 (--cert, --key) ({text})"
            ),
        };
    }
    unreachable(cfg, text)
}

/// An error and its sources on one line: tonic hides the TLS cause a few
/// levels down.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let more = s.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = s.source();
    }
    text
}

fn unreachable(cfg: &ElectionConfig, detail: impl std::fmt::Display) -> Error {
    cfg.unreachable(detail)
}

/// Runs the first request of a command within the connect timeout, in
/// attempts of a quarter of it (at least 250 ms); the request must be
/// one that may be sent again (a read; a grant, whose lost lease expires
/// on its own). Failing throughout means etcd could not be reached: the balancing client
/// may send a request to a member that holds its connection open without
/// answering (paused, partitioned), or the cluster may be electing its
/// leader (`no leader`); the next attempt may go elsewhere, or later. A
/// refusal of our credentials or permissions is not tried again.
pub(crate) async fn first_contact<T, F>(
    cfg: &ElectionConfig,
    mut request: impl FnMut() -> F,
) -> Result<T>
where
    F: Future<Output = Result<T>>,
{
    let until = tokio::time::Instant::now() + cfg.connect_timeout;
    let attempt = (cfg.connect_timeout / 4).max(Duration::from_millis(250));
    let mut last = None;
    loop {
        let left = until.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            return Err(last.unwrap_or_else(|| unreachable(cfg, "no answer")));
        }
        let failed = match tokio::time::timeout(attempt.min(left), request()).await {
            Ok(Ok(v)) => return Ok(v),
            Ok(Err(Error::Backend { source, .. })) => match source.downcast::<etcd_client::Error>()
            {
                Ok(e) => refused(cfg, *e),
                Err(other) => unreachable(cfg, other),
            },
            Ok(Err(e)) => unreachable(cfg, e),
            Err(_) => unreachable(cfg, format!("no answer within {attempt:?}")),
        };
        if matches!(failed, Error::Auth { .. }) || failed.to_string().contains("permission denied")
        {
            return Err(failed);
        }
        debug!("{failed}; trying again");
        last = Some(failed);
        tokio::time::sleep(Duration::from_millis(50).min(left)).await;
    }
}

/// Bounds each attempt of a request that may be sent again (a read, or a
/// transaction that changes nothing when repeated): a quarter of the
/// connect timeout (at least 250 ms) at first, twice as long after each
/// attempt that went unanswered, up to the connect timeout.
///
/// A request sent to a member that is paused, or cut off with its
/// connection open, has no bound of its own: it waits until the
/// connection's pings give up (9 s), or for etcd's own "request timed
/// out" (the soak saw 13 s). An abandoned attempt passes that member over
/// (see [`LeastLoaded`]), so the next one goes elsewhere. Growing the
/// bound keeps a cluster that is only slow (a loaded disk) from never
/// answering in time.
pub(crate) struct Attempts {
    within: Duration,
    longest: Duration,
}

impl Attempts {
    pub(crate) fn new(connect_timeout: Duration) -> Attempts {
        Attempts {
            within: first_attempt(connect_timeout),
            longest: connect_timeout.max(SHORTEST_ATTEMPT),
        }
    }

    /// Sends one attempt: its answer, or an error once its bound passed
    /// unanswered (the next attempt then waits twice as long).
    pub(crate) async fn send<T>(
        &mut self,
        what: &'static str,
        request: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        let within = self.within;
        // Boxed: a candidacy's future holds its requests' (see
        // `a_candidates_futures_stay_small`).
        match Box::pin(tokio::time::timeout(within, request)).await {
            Ok(answer) => answer,
            Err(_) => {
                self.within = (within * 2).min(self.longest);
                Err(super::errors::etcd_error(
                    what,
                    format!("no answer within {within:?}"),
                ))
            }
        }
    }
}

/// Retries an idempotent request with backoff until it succeeds, each
/// attempt bounded (see [`Attempts`]: a member that holds a request
/// unanswered must not hold the campaign); callers bound it all with the
/// lease deadline.
pub(crate) async fn retry<T, F, Fut>(what: &'static str, patience: Duration, mut request: F) -> T
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

    #[tokio::test(start_paused = true)]
    async fn unanswered_attempts_wait_twice_as_long_up_to_the_connect_timeout() {
        let mut attempts = Attempts::new(Duration::from_secs(5));
        let mut bounds = Vec::new();
        for _ in 0..5 {
            let sent = tokio::time::Instant::now();
            let answer: Result<()> = attempts.send("asking", std::future::pending()).await;
            assert!(answer.unwrap_err().to_string().contains("no answer within"));
            bounds.push(sent.elapsed().as_millis());
        }
        assert_eq!(bounds, [1250, 2500, 5000, 5000, 5000]);
        let answered = attempts.send("asking", async { Ok(7) }).await;
        assert_eq!(answered.unwrap(), 7);
        let short = Attempts::new(Duration::from_millis(100));
        assert_eq!(short.within, SHORTEST_ATTEMPT, "never below 250 ms");
    }

    #[test]
    fn an_old_cluster_is_said_once_a_process() {
        let a = "http://unit-a:2379 runs etcd 3.4.23";
        let b = "http://unit-b:2379 runs etcd 3.4.23";
        assert!(first_said(a));
        assert!(!first_said(a), "the same finding again");
        assert!(first_said(b), "another cluster is said too");
    }

    #[test]
    fn servers_before_the_leadership_check_need_the_proof() {
        for old in [
            "3.4.23", "3.4.30", "3.5.0", "3.5.1", "3.5.12", "3.3.27", "2.3.8", "v3.4.9", "", "x",
        ] {
            assert!(renews_without_leading(old), "{old}");
        }
        for new in [
            "3.4.31",
            "3.4.34",
            "3.5.13",
            "3.5.21",
            "3.6.0",
            "3.6.4-rc.1",
            "4.0.0",
        ] {
            assert!(!renews_without_leading(new), "{new}");
        }
    }

    #[test]
    fn only_3_5_0_to_3_5_2_are_said_to_diverge_after_a_crash() {
        for bad in ["3.5.0", "3.5.1", "v3.5.2", "3.5.2-rc.0"] {
            assert!(diverges_after_a_crash(bad), "{bad}");
        }
        for fine in [
            "3.4.23", "3.5.3", "3.5.13", "3.5.10", "3.6.0", "3.5", "", "x",
        ] {
            assert!(!diverges_after_a_crash(fine), "{fine}");
        }
    }

    #[test]
    fn only_3_5_0_to_3_5_4_are_said_to_crash_on_abandoned_reads() {
        for bad in ["3.5.0", "3.5.1", "3.5.4", "v3.5.3"] {
            assert!(crashes_on_abandoned_reads(bad), "{bad}");
        }
        for fine in ["3.4.23", "3.5.5", "3.5.13", "3.6.0", "3.5", ""] {
            assert!(!crashes_on_abandoned_reads(fine), "{fine}");
        }
    }

    /// Three members' channels (never connected: nothing is sent).
    fn three() -> LeastLoaded {
        let members: Vec<Channel> = (1..=3)
            .map(|i| {
                Endpoint::from_shared(format!("http://127.0.0.1:{i}"))
                    .unwrap()
                    .connect_lazy()
            })
            .collect();
        LeastLoaded::new(&members)
    }

    fn picks(balancer: &mut LeastLoaded) -> [usize; 3] {
        let mut counts = [0; 3];
        for _ in 0..3000 {
            counts[balancer.pick()] += 1;
        }
        counts
    }

    #[tokio::test]
    async fn requests_spread_over_the_members_and_avoid_the_busy_one() {
        let mut balancer = three();
        let spread = picks(&mut balancer);
        assert!(spread.iter().all(|&n| n > 700), "{spread:?}");
        balancer.health.in_flight[0].store(2, Ordering::Relaxed);
        let busy = picks(&mut balancer);
        assert_eq!(busy[0], 0, "the member with requests waiting: {busy:?}");
    }

    #[tokio::test]
    async fn a_member_whose_connection_failed_is_passed_over_for_a_while() {
        let mut balancer = three();
        // A clock that has run for a while, so that a failure can be old.
        Arc::get_mut(&mut balancer.health).unwrap().since =
            std::time::Instant::now() - Duration::from_secs(10);
        let now = balancer.health.now();
        balancer.health.failed_at[1].store(now, Ordering::Relaxed);
        let counts = picks(&mut balancer);
        assert_eq!(counts[1], 0, "{counts:?}");
        // Every member failed: requests still go somewhere.
        for member in 0..3 {
            balancer.health.failed_at[member].store(now, Ordering::Relaxed);
        }
        assert_eq!(picks(&mut balancer).iter().sum::<usize>(), 3000);
        // Past the pass-over, a member takes its share again.
        let long_ago = now - 2 * PASS_OVER.as_nanos() as u64;
        balancer.health.failed_at[0].store(0, Ordering::Relaxed);
        balancer.health.failed_at[1].store(long_ago, Ordering::Relaxed);
        let counts = picks(&mut balancer);
        assert!(counts[1] > 700, "{counts:?}");
        assert_eq!(counts[2], 0, "still passed over: {counts:?}");
    }

    /// A clone made per request (`kv_client()`) picks on its own: the
    /// first picks of fresh clones spread over the members, instead of all
    /// going where the original's first pick goes.
    #[tokio::test]
    async fn fresh_clones_pick_apart() {
        let balancer = three();
        let mut first = [0; 3];
        for _ in 0..3000 {
            first[balancer.clone().pick()] += 1;
        }
        assert!(first.iter().all(|&n| n > 700), "{first:?}");
    }

    /// A request given up on unanswered (a timeout dropped it) after a
    /// while passes its member over; one dropped at once does not.
    #[tokio::test]
    async fn a_request_abandoned_unanswered_passes_its_member_over() {
        let mut balancer = three();
        Arc::get_mut(&mut balancer.health).unwrap().since =
            std::time::Instant::now() - Duration::from_secs(10);
        let now = balancer.health.now();
        let sent = |member: usize, ago: Duration| {
            balancer.health.in_flight[member].fetch_add(1, Ordering::Relaxed);
            InFlight {
                health: balancer.health.clone(),
                member,
                sent: now - ago.as_nanos() as u64,
                answered: false,
            }
        };
        drop(sent(0, Duration::from_millis(10)));
        drop(sent(2, 2 * ABANDONED));
        let counts = picks(&mut balancer);
        assert!(counts[0] > 700, "{counts:?}");
        assert_eq!(counts[2], 0, "{counts:?}");
        assert_eq!(
            balancer
                .health
                .in_flight
                .iter()
                .map(|n| n.load(Ordering::Relaxed))
                .sum::<usize>(),
            0
        );
    }
}
