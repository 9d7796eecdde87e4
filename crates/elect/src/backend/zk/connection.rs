//! Sessions with ZooKeeper: how one is opened (timeouts, digest auth,
//! TLS), what a failed first contact means, and reopening one after the
//! previous ended.

use std::future::Future;

use tracing::{debug, info};
use zookeeper_client::Client;

use super::errors::{BACKEND, zk_error};
use super::lease::{Handshake, SessionLease};
use super::timing;
use crate::backend::backoff::Backoff;
use crate::clock::BootInstant;
use crate::config::ElectionConfig;
use crate::counters::warn_counted;
use crate::error::{Error, Result};

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
        // our znodes' ACLs then name it (see `znode::acls`).
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
        Some(_) => connector.secure_connect(cfg.zk_connect_string()).await?,
        None => connector.connect(cfg.zk_connect_string()).await?,
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
        endpoints: cfg.service().to_string(),
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
pub(super) async fn first_contact(cfg: &ElectionConfig) -> Result<Opened> {
    let connector = connector(cfg)?;
    // The library's own wait for one server: the connection timeout.
    let silent = cfg.ttl / 5;
    let started = tokio::time::Instant::now();
    let deadline = started + cfg.connect_timeout;
    let mut last = None;
    loop {
        let attempt = tokio::time::Instant::now();
        let handshake = Handshake::start(BootInstant::now(), cfg.ttl);
        match tokio::time::timeout_at(deadline, open(cfg, connector.clone())).await {
            Ok(Ok(client)) => return Ok(Opened::answered(client, handshake)),
            Ok(Err(e @ (zookeeper_client::Error::Timeout | zookeeper_client::Error::NoHosts)))
                if attempt.elapsed() >= silent =>
            {
                debug!("no session yet ({e}); trying again within --connect-timeout");
                last = Some(e);
            }
            Ok(Err(e)) => {
                return Err(match connect_failed(cfg, e) {
                    e @ Error::Tls { .. } => e,
                    e => cfg.refused_after(
                        started.elapsed(),
                        format!("every server refused at once ({e})"),
                    ),
                });
            }
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

/// A session just opened, and what its handshake proves of its life (see
/// [`Handshake`]).
pub(crate) struct Opened {
    pub client: Client,
    pub lease: SessionLease,
}

impl Opened {
    /// The handshake's answer is in: the lease counts from its start, for
    /// the timeout the server granted.
    fn answered(client: Client, handshake: Handshake) -> Opened {
        let lease = handshake.answered(BootInstant::now(), client.session_timeout());
        Opened { client, lease }
    }
}

/// Opens a new session after the previous one ended, retrying with backoff
/// until it works or `stop` resolves (then `None`).
pub(super) async fn reconnect(
    cfg: &ElectionConfig,
    stop: impl Future<Output = ()>,
) -> Option<Opened> {
    tokio::pin!(stop);
    let mut backoff = Backoff::new();
    loop {
        let handshake = Handshake::start(BootInstant::now(), cfg.ttl);
        tokio::select! {
            () = &mut stop => return None,
            connected = connect(cfg) => match connected {
                Ok(client) => return Some(Opened::answered(client, handshake)),
                Err(e) => warn_counted!("{e}; retrying"),
            },
        }
        tokio::select! {
            () = &mut stop => return None,
            () = backoff.wait() => {}
        }
    }
}

/// Checks, beside the start, the ZooKeeper timing a leader's session
/// relies on (see [`timing`]); it only logs. Once per ensemble and
/// session timeout in a process: a thousand campaigns of one process
/// need one answer, not three thousand connections.
pub(super) fn check_timing(cfg: &ElectionConfig, opened: &Opened) {
    static CHECKED: std::sync::Mutex<Vec<(String, std::time::Duration)>> =
        std::sync::Mutex::new(Vec::new());
    let ensemble = (
        cfg.zk_connect_string().to_owned(),
        opened.client.session_timeout(),
    );
    {
        let mut checked = CHECKED.lock().unwrap_or_else(|e| e.into_inner());
        if checked.contains(&ensemble) {
            return;
        }
        checked.push(ensemble.clone());
    }
    tokio::spawn(timing::check(ensemble.0, ensemble.1, cfg.tls.is_some()));
}
