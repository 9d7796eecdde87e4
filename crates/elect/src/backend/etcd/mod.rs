//! etcd backend: lease-bound keys in the layout of Go's
//! `concurrency.Election`, so `etcdctl elect` and `elect` share elections.
//!
//! - [`layout`]: key names and how a key reads as a candidate.
//! - [`lease`]: the session lease and our own keepalive loop, which is
//!   where the local leadership deadline comes from.
//! - [`observe`]: who leads, from a fresh read plus a watch on one key.
//! - [`campaign`]: create our key, wait for our predecessor only, confirm,
//!   lead until the deadline or a contradiction, resign.

pub mod campaign;
pub mod layout;
pub mod lease;
pub mod observe;

use std::future::Future;
use std::time::Duration;

use etcd_client::{Certificate, Client, ConnectOptions, Identity, TlsOptions};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::debug;

use crate::backend::candidates::Candidates;
use crate::backend::counters::warn_counted;
use crate::backend::report::{self, Observed};
use crate::backend::{Campaign, Observation};
use crate::backend_kind::Backend;
use crate::config::ElectionConfig;
use crate::error::{Error, Result};
use crate::leadership::Leadership;
use crate::work::WorkWatch;

const BACKEND: Backend = Backend::Etcd;

pub(crate) fn etcd_error(action: &'static str, e: impl Into<crate::error::BoxError>) -> Error {
    Error::backend(BACKEND, action, e)
}

/// Opens a client balancing over every endpoint. The connection itself is
/// made lazily by the first request, which callers bound with
/// [`first_contact`].
async fn connect(cfg: &ElectionConfig) -> Result<Client> {
    connect_to(cfg, &cfg.endpoints).await
}

/// How often an idle connection is pinged: just above etcd's default
/// `--grpc-keepalive-min-time` of 5 s, which it enforces.
const KEEPALIVE_PING: Duration = Duration::from_secs(6);

/// One client per endpoint, for the keepalive loop (see [`lease`]): it
/// pings every member at once, so no single member that is paused, cut off
/// or without a leader can cost the lease, where the balancing client could
/// keep choosing a member that is cut off until HTTP/2 pings declare that
/// connection dead, longer than a short TTL. With a single endpoint
/// `client` serves.
async fn connect_each(cfg: &ElectionConfig, client: &Client) -> Result<Vec<Client>> {
    if cfg.endpoints.len() == 1 {
        return Ok(vec![client.clone()]);
    }
    // Keepalives need no auth token (etcd checks none for LeaseKeepAlive),
    // so these clients do not authenticate: each authentication is a
    // password check (bcrypt) on the server, four per candidate otherwise.
    let mut renewing = cfg.clone();
    renewing.user = None;
    let mut clients = Vec::with_capacity(cfg.endpoints.len());
    for endpoint in &cfg.endpoints {
        clients.push(connect_to(&renewing, std::slice::from_ref(endpoint)).await?);
    }
    Ok(clients)
}

async fn connect_to(cfg: &ElectionConfig, endpoints: &[String]) -> Result<Client> {
    // HTTP/2 pings find a dead connection within ~9 s even while idle (the
    // lease's renewals, with their own timeouts, are what keep leadership
    // safe), and `require_leader` makes members that lost quorum fail our
    // watches instead of serving them silently. etcd answers pings more
    // often than its --grpc-keepalive-min-time (5 s by default) with a
    // GOAWAY "too_many_pings", which broke every idle watch every few
    // seconds when we pinged each second.
    let mut options = ConnectOptions::new()
        .with_connect_timeout(cfg.connect_timeout)
        .with_keep_alive(KEEPALIVE_PING, Duration::from_secs(3))
        .with_keep_alive_while_idle(true)
        .with_require_leader(true);
    if let Some(tls) = &cfg.tls {
        crate::credentials::crypto_provider();
        let mut client_tls = TlsOptions::new().ca_certificate(Certificate::from_pem(tls.ca_pem()));
        if let Some((cert, key)) = tls.identity_pem() {
            client_tls = client_tls.identity(Identity::from_pem(cert, key));
        }
        if let Some(name) = tls.server_name() {
            client_tls = client_tls.domain_name(name);
        }
        options = options.with_tls(client_tls);
    }
    if let Some(user) = &cfg.user {
        // Tokens expire (simple tokens after --auth-token-ttl, JWTs when
        // auth changes); the client re-authenticates and retries once.
        options = options
            .with_user(user.name(), user.password().expose())
            .with_auto_token_refresh(true);
    }
    // With a user, connecting authenticates at once: the first contact.
    let until = tokio::time::Instant::now() + cfg.connect_timeout;
    let mut attempts = 0;
    loop {
        attempts += 1;
        let connecting = Client::connect(endpoints, Some(options.clone()));
        match tokio::time::timeout_at(until, connecting).await {
            Ok(Ok(client)) => return Ok(client),
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
                "permission denied: the user needs readwrite on the key prefix {:?}",
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
            endpoints: cfg.endpoints.join(","),
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
            endpoints: cfg.endpoints.join(","),
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

/// Runs the first request of a command within the connect timeout; any
/// failure there means etcd could not be reached.
async fn first_contact<T>(
    cfg: &ElectionConfig,
    request: impl Future<Output = Result<T>>,
) -> Result<T> {
    match tokio::time::timeout(cfg.connect_timeout, request).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(Error::Backend { source, .. })) => match source.downcast::<etcd_client::Error>() {
            Ok(e) => Err(refused(cfg, *e)),
            Err(other) => Err(unreachable(cfg, other)),
        },
        Ok(Err(e)) => Err(unreachable(cfg, e)),
        Err(_) => Err(unreachable(cfg, "no answer")),
    }
}

/// Reads the current leader once.
///
/// Errors: [`Error::Unreachable`] when etcd does not answer within the
/// connect timeout. Cancel safe.
pub async fn leader(cfg: &ElectionConfig) -> Result<Leadership> {
    let client = connect(cfg).await?;
    let prefix = layout::prefix(&cfg.election);
    let view = first_contact(cfg, observe::read_leader(&client, &prefix)).await?;
    Ok(view.to_leadership())
}

/// Starts following the election.
///
/// Errors: [`Error::Unreachable`] when the first read fails. Later failures
/// are retried and shown as an unknown leader.
pub async fn observe(cfg: &ElectionConfig) -> Result<Observation> {
    let client = connect(cfg).await?;
    let prefix = layout::prefix(&cfg.election);
    let first = first_contact(cfg, observe::read_leader(&client, &prefix)).await?;
    let (view_tx, view_rx) = watch::channel(first.clone());
    let (out, leadership) = watch::channel(first.to_leadership());
    let task = tokio::spawn(async move {
        let follower = observe::follow(client, prefix, first, view_tx);
        tokio::join!(follower, report::publish_views(view_rx, out));
    });
    Ok(Observation::new(leadership, task))
}

/// Joins the election as a candidate.
///
/// After losing leadership the campaign keeps its lease (which successors
/// wait for) until `work` says the work started under it has stopped.
///
/// Errors: [`Error::Unreachable`] when the lease cannot be granted within
/// the connect timeout. Later failures are retried.
pub async fn campaign(cfg: &ElectionConfig, work: WorkWatch) -> Result<Campaign> {
    let client = connect(cfg).await?;
    let renewers = connect_each(cfg, &client).await?;
    let prefix = layout::prefix(&cfg.election);
    let first = first_contact(cfg, observe::read_leader(&client, &prefix)).await?;
    let lease = first_contact(cfg, lease::Lease::grant(&client, &renewers, cfg.ttl)).await?;

    let (view_tx, view_rx) = watch::channel(first.clone());
    let (out, leadership) = watch::channel(Leadership::unknown());
    let resign = CancellationToken::new();
    let candidate = campaign::Candidate::new(
        client.clone(),
        renewers,
        cfg.clone(),
        out,
        view_rx,
        work,
        resign.clone(),
    );
    let task = tokio::spawn(async move {
        let follower = tokio::spawn(observe::follow(client, prefix, first, view_tx));
        let result = candidate.run(lease).await;
        follower.abort();
        result
    });
    Ok(Campaign::new(leadership, resign, task))
}

/// One etcd lease that many elections share (Go's `concurrency.Session`):
/// one keepalive loop through every member, so one leadership deadline for
/// every election on it, and a candidate per election, each waiting only
/// on its predecessor in its own election. A candidacy that ends releases
/// its key instead of revoking the lease (see
/// [`campaign::Candidate::run_shared`]); when the lease ends, every
/// candidate on it ends with [`Error::SessionEnded`].
pub(crate) struct SharedSession {
    client: Client,
    renewers: Vec<Client>,
    lease: std::sync::Arc<lease::Lease>,
    connect_timeout: Duration,
    candidates: Candidates,
}

impl SharedSession {
    /// Connects and grants the session's lease.
    ///
    /// Errors: [`Error::Unreachable`] when etcd does not grant it within
    /// the connect timeout.
    pub(crate) async fn open(cfg: &ElectionConfig) -> Result<SharedSession> {
        let client = connect(cfg).await?;
        let renewers = connect_each(cfg, &client).await?;
        let lease = first_contact(cfg, lease::Lease::grant(&client, &renewers, cfg.ttl)).await?;
        Ok(SharedSession {
            client,
            renewers,
            lease: std::sync::Arc::new(lease),
            connect_timeout: cfg.connect_timeout,
            candidates: Candidates::new(),
        })
    }

    /// Campaigns in `cfg`'s election on this session's lease: the token
    /// that asks it to resign, and its task.
    pub(crate) fn campaign(
        &self,
        cfg: ElectionConfig,
        out: watch::Sender<Leadership>,
        work: WorkWatch,
    ) -> (CancellationToken, tokio::task::JoinHandle<Result<()>>) {
        let (client, renewers, lease) = (
            self.client.clone(),
            self.renewers.clone(),
            self.lease.clone(),
        );
        self.candidates.spawn(|resign| async move {
            let prefix = layout::prefix(&cfg.election);
            let first = observe::read_leader(&client, &prefix).await?;
            let (view_tx, view_rx) = watch::channel(first.clone());
            let candidate =
                campaign::Candidate::new(client.clone(), renewers, cfg, out, view_rx, work, resign);
            let follower = tokio::spawn(observe::follow(client, prefix, first, view_tx));
            let result = candidate.run_shared(lease).await;
            follower.abort();
            result
        })
    }

    /// Whether the lease is still alive.
    pub(crate) fn is_alive(&self) -> bool {
        !self.lease.state().expired
    }

    /// Every candidate resigns (releasing its key), then the lease is
    /// revoked.
    pub(crate) async fn close(self) {
        self.candidates.close(self.connect_timeout).await;
        match std::sync::Arc::try_unwrap(self.lease) {
            Ok(lease) => lease.revoke(&self.client, self.connect_timeout).await,
            // A candidate still holds it: the lease expires after its TTL.
            Err(_) => warn_counted!("the session's lease is still in use; it will expire"),
        }
    }
}
