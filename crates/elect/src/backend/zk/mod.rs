//! ZooKeeper backend: ephemeral-sequential znodes named as Curator's
//! `LeaderLatch` names them, so Curator, kazoo and `elect` participants can
//! share (or watch) one election.
//!
//! - [`layout`]: znode names of the recipes we take part in or read.
//! - [`observe`]: who leads, from one watch on the leader's znode.
//! - [`campaign`]: create our znode (protected against lost replies), wait
//!   on our predecessor only, confirm ownership, lead while the session
//!   provably lives (through disconnections too), resign.
//! - [`recipe`]: when it is our turn, as a state machine without I/O that
//!   `campaign` drives and the model check drives unchanged.
//! - [`lease`]: how long the session provably lives on the ZooKeeper
//!   leader, from what our syncs prove; the argument is there.
//!
//! The session is the lease: its *negotiated* timeout (the server clamps
//! the requested one to 2..20 ticks) drives the leadership deadline.

pub mod campaign;
pub mod layout;
pub mod lease;
#[cfg(test)]
mod lease_model;
pub mod observe;
pub mod recipe;
pub mod timing;
#[cfg(test)]
mod turn_model;

use std::future::Future;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};
use zookeeper_client::Client;

use crate::backend::backoff::Backoff;
use crate::backend::counters::warn_counted;
use crate::backend::report::{self, Observed};
use crate::backend::{Campaign, Observation};
use crate::backend_kind::Backend;
use crate::clock::BootInstant;
use crate::config::ElectionConfig;
use crate::error::{Error, Result};
use crate::leadership::Leadership;
use crate::work::WorkWatch;
use observe::View;

const BACKEND: Backend = Backend::Zk;

pub(crate) fn zk_error(action: &'static str, e: impl Into<crate::error::BoxError>) -> Error {
    Error::backend(BACKEND, action, e)
}

fn unreachable(cfg: &ElectionConfig, detail: impl std::fmt::Display) -> Error {
    cfg.unreachable(detail)
}

/// How a session is opened: the requested timeout, our credentials, TLS.
fn connector(cfg: &ElectionConfig) -> Result<zookeeper_client::Connector> {
    let mut connector = Client::connector();
    // A member silent for T/5 is left for the next one (the library's
    // default waits 2T/5, and as long again for each frozen member it
    // tries): a leader leads on through a disconnection only until its
    // session's proof runs out, about 0.52 T after its last answered sync
    // (see `lease`).
    connector = connector
        .with_session_timeout(cfg.ttl)
        .with_connection_timeout(cfg.ttl / 5)
        .with_fail_eagerly();
    if let Some(user) = &cfg.user {
        // Digest auth: the server derives our identity from user:password;
        // our znodes' ACLs then name it (see `campaign::acls`).
        let credentials = format!("{}:{}", user.name(), user.password().expose());
        connector = connector.with_auth("digest", credentials.as_bytes());
    }
    if let Some(tls) = &cfg.tls {
        connector = connector.with_tls(tls_options(tls)?);
    }
    Ok(connector)
}

/// Opens a session; the library's own error, so that a caller can tell a
/// server too slow to answer ([`zookeeper_client::Error::Timeout`]) from
/// one that refused us.
async fn open(
    cfg: &ElectionConfig,
    connector: zookeeper_client::Connector,
) -> std::result::Result<Client, zookeeper_client::Error> {
    let client = match cfg.tls {
        // secure_connect: hosts without a scheme speak TLS.
        Some(_) => connector.secure_connect(&cfg.endpoints[0]).await?,
        None => connector.connect(&cfg.endpoints[0]).await?,
    };
    let negotiated = client.session_timeout();
    info!(
        session = %client.session_id(),
        requested = %humantime::format_duration(cfg.ttl),
        negotiated = %humantime::format_duration(negotiated),
        "ZooKeeper session established"
    );
    if negotiated != cfg.ttl {
        warn_counted!(
            "ZooKeeper negotiated a session timeout of {} instead of --ttl {} (servers clamp it to 2..20 ticks)",
            humantime::format_duration(negotiated),
            humantime::format_duration(cfg.ttl)
        );
    }
    Ok(client)
}

/// Opens a session with the requested timeout.
async fn connect(cfg: &ElectionConfig) -> Result<Client> {
    open(cfg, connector(cfg)?)
        .await
        .map_err(|e| connect_failed(cfg, e))
}

/// What a failed session open means: a TLS refusal where we spoke TLS
/// (the library says little, see `tls_refused`), else the library's error.
fn connect_failed(cfg: &ElectionConfig, e: zookeeper_client::Error) -> Error {
    match cfg.tls {
        Some(_) => tls_refused(cfg, e),
        None => zk_error("connecting", e),
    }
}

/// A TLS connection that failed: the library says little ("no available
/// hosts"), so name what was tried.
fn tls_refused(cfg: &ElectionConfig, e: zookeeper_client::Error) -> Error {
    Error::Tls {
        backend: BACKEND,
        endpoints: cfg.endpoints.join(","),
        detail: format!(
            "{e} (is it ZooKeeper's secureClientPort, does its certificate name the host, and \
             does it want a client certificate, --cert and --key?)"
        ),
    }
}

/// The client's TLS: the CA, and our certificate if the server wants one.
pub fn tls_options(tls: &crate::credentials::Tls) -> Result<zookeeper_client::TlsOptions> {
    // The client builds its rustls config with the process default.
    crate::credentials::crypto_provider();
    let text = |pem: &[u8]| String::from_utf8_lossy(pem).into_owned();
    let mut options = zookeeper_client::TlsOptions::new()
        .with_pem_ca(&text(tls.ca_pem()))
        .map_err(|e| Error::config("cacert", format!("unusable for ZooKeeper TLS: {e}")))?;
    if let Some((cert, key)) = tls.identity_pem() {
        options = options
            .with_pem_identity(&text(cert), &text(key))
            .map_err(|e| Error::config("cert", format!("unusable for ZooKeeper TLS: {e}")))?;
    }
    Ok(options)
}

/// Opens a session for the first request of a command, within the connect
/// timeout; any failure means ZooKeeper could not be reached.
///
/// The library gives up after one session timeout, which may be shorter
/// than --connect-timeout, so an attempt in which some server stayed
/// silent (a JVM's first TLS handshakes on a busy machine, a long pause)
/// is made again until the connect timeout. Servers that all refused at
/// once (nothing listening, a TLS refusal) have answered: that is final.
async fn first_contact(cfg: &ElectionConfig) -> Result<Opened> {
    let connector = connector(cfg)?;
    // The library's own wait for one server: the connection timeout.
    let silent = cfg.ttl / 5;
    let deadline = tokio::time::Instant::now() + cfg.connect_timeout;
    let mut last = None;
    loop {
        let attempt = tokio::time::Instant::now();
        let handshake = BootInstant::now();
        match tokio::time::timeout_at(deadline, open(cfg, connector.clone())).await {
            Ok(Ok(client)) => return Ok(Opened { client, handshake }),
            Ok(Err(e @ (zookeeper_client::Error::Timeout | zookeeper_client::Error::NoHosts)))
                if attempt.elapsed() >= silent =>
            {
                debug!("no session yet ({e}); trying again within --connect-timeout");
                last = Some(e);
            }
            Ok(Err(e)) => return Err(contact_failed(cfg, e)),
            Err(_) => {
                return Err(match last {
                    Some(e) => contact_failed(cfg, e),
                    None => unreachable(cfg, "no session established"),
                });
            }
        }
    }
}

/// What a first contact's failure tells the user: a TLS refusal as it
/// is, anything else as ZooKeeper being out of reach.
fn contact_failed(cfg: &ElectionConfig, e: zookeeper_client::Error) -> Error {
    match connect_failed(cfg, e) {
        e @ Error::Tls { .. } => e,
        e => unreachable(cfg, e),
    }
}

/// A session just opened, and when its handshake was started: the
/// ZooKeeper leader created the session after that instant, which is the
/// first thing its [`lease::SessionLease`] knows.
pub(crate) struct Opened {
    pub client: Client,
    pub handshake: BootInstant,
}

/// Opens a new session after the previous one ended, retrying with backoff
/// until it works or `stop` resolves (then `None`).
async fn reconnect(cfg: &ElectionConfig, stop: impl Future<Output = ()>) -> Option<Opened> {
    tokio::pin!(stop);
    let mut backoff = Backoff::new();
    loop {
        let handshake = BootInstant::now();
        tokio::select! {
            () = &mut stop => return None,
            connected = connect(cfg) => match connected {
                Ok(client) => return Some(Opened { client, handshake }),
                Err(e) => warn_counted!("{e}; retrying"),
            },
        }
        tokio::select! {
            () = &mut stop => return None,
            () = backoff.wait() => {}
        }
    }
}

/// Reads the current leader once.
///
/// Errors: [`Error::Unreachable`] when no session is established within the
/// connect timeout. Cancel safe.
pub async fn leader(cfg: &ElectionConfig) -> Result<Leadership> {
    let client = first_contact(cfg).await?.client;
    let (view, _watch) = observe::read_leader(&client, &cfg.election).await?;
    Ok(view.to_leadership())
}

/// Starts following the election, across sessions.
///
/// Errors: [`Error::Unreachable`] when the first session cannot be
/// established. Later failures show as an unknown leader and are retried.
pub async fn observe(cfg: &ElectionConfig) -> Result<Observation> {
    let client = first_contact(cfg).await?.client;
    let (view_tx, view_rx) = watch::channel(View::unknown());
    let (out, leadership) = watch::channel(Leadership::unknown());
    let cfg = cfg.clone();
    let task = tokio::spawn(async move {
        let follower = async move {
            let mut client = client;
            loop {
                observe::follow(client, cfg.election.clone(), view_tx.clone()).await;
                view_tx.send_replace(View::unknown());
                match reconnect(&cfg, view_tx.closed()).await {
                    Some(next) => client = next.client,
                    None => return,
                }
            }
        };
        tokio::join!(follower, report::publish_views(view_rx, out));
    });
    Ok(Observation::new(leadership, task))
}

/// Joins the election as a candidate. See [`crate::backend::campaign`].
///
/// Errors: [`Error::Unreachable`] when the first session cannot be
/// established. Later failures are retried.
pub async fn campaign(cfg: &ElectionConfig, work: WorkWatch) -> Result<Campaign> {
    let opened = first_contact(cfg).await?;
    check_timing(cfg, &opened);
    let (out, leadership) = watch::channel(Leadership::unknown());
    let resign = CancellationToken::new();
    let candidate = campaign::Candidate::new(cfg.clone(), out, work, resign.clone());
    let task = tokio::spawn(candidate.run(opened));
    Ok(Campaign::new(leadership, resign, task))
}

/// Opens a session for many elections (see [`campaign::SharedSession`]).
///
/// Errors: [`Error::Unreachable`] when no session is established within
/// the connect timeout.
pub(crate) async fn open_shared(cfg: &ElectionConfig) -> Result<campaign::SharedSession> {
    let opened = first_contact(cfg).await?;
    check_timing(cfg, &opened);
    Ok(campaign::SharedSession::start(opened, cfg.connect_timeout))
}

/// Checks, beside the start, the ZooKeeper timing a leader's session
/// relies on (see [`timing`]); it only logs. Once per ensemble and
/// session timeout in a process: a thousand campaigns of one process
/// need one answer, not three thousand connections.
fn check_timing(cfg: &ElectionConfig, opened: &Opened) {
    static CHECKED: std::sync::Mutex<Vec<(String, std::time::Duration)>> =
        std::sync::Mutex::new(Vec::new());
    let ensemble = (cfg.endpoints[0].clone(), opened.client.session_timeout());
    {
        let mut checked = CHECKED.lock().unwrap_or_else(|e| e.into_inner());
        if checked.contains(&ensemble) {
            return;
        }
        checked.push(ensemble.clone());
    }
    tokio::spawn(timing::check(ensemble.0, ensemble.1, cfg.tls.is_some()));
}
