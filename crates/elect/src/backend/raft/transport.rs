//! Peer and client traffic over TCP: length-delimited frames (a 4-byte
//! big-endian length, then JSON). Every frame names the cluster and the
//! sender; frames of another cluster or from an unknown peer are dropped
//! and logged. A process that is not a peer may send a `Query` and then
//! receives the peer's view of the leader, once and on every change.
//!
//! Without TLS anyone who reaches a peer's port can claim to be a peer:
//! one forged heartbeat at a high term deposes the leader. With
//! [`PeerTls`] every connection is mutual TLS against one CA: a peer
//! dials another by its id, so the server's certificate must name that
//! id; a peer accepts a `Peer` frame only if the client certificate of
//! its connection names the sender the frame claims. Any certificate from
//! the CA may `Query`, which only reads; a `Switchover` is taken only on
//! a connection whose certificate names one of the peers: whoever may
//! take part may steer, nobody else.

use crate::backend::backoff::Backoff;
use crate::counters::warn_counted;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::{CertificateDer, ServerName};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio_rustls::{TlsAcceptor, TlsConnector};
use tracing::debug;

use crate::config::ElectionConfig;
use crate::credentials::Tls;
use crate::error::{Error, Result};
use crate::steer::{Priority, Standing};
use elect_raft::Message;

/// How long a connecting client may take over its TLS handshake: a
/// connection that dawdles (slow-loris) is closed.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(3);

/// A connection, plain or TLS.
pub trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<S: AsyncRead + AsyncWrite + Unpin + Send> Stream for S {}

/// Boxed, so plain and TLS connections share the code above them.
pub type BoxStream = Box<dyn Stream>;

/// Mutual TLS between peers, and for readers.
pub struct PeerTls {
    acceptor: TlsAcceptor,
    connector: TlsConnector,
}

impl PeerTls {
    /// Servers require a client certificate from the CA; clients check the
    /// server's names the peer they dial. `tls` must have an identity.
    pub fn new(tls: &Tls) -> Result<Arc<PeerTls>> {
        let provider = crate::credentials::crypto_provider();
        let roots = Arc::new(tls.roots()?);
        let (chain, key) = tls
            .identity()
            .ok_or_else(|| Error::config("cert", "raft TLS needs --cert and --key"))?;
        let bad = |field: &'static str| {
            move |e: rustls::Error| Error::config(field, format!("unusable for TLS: {e}"))
        };
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            roots.clone(),
            provider.clone(),
        )
        .build()
        .map_err(|e| Error::config("cacert", format!("unusable for TLS: {e}")))?;
        let server = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(bad("cacert"))?
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain.clone(), key.clone_key())
            .map_err(bad("key"))?;
        let client = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(bad("cacert"))?
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)
            .map_err(bad("key"))?;
        Ok(Arc::new(PeerTls {
            acceptor: TlsAcceptor::from(Arc::new(server)),
            connector: TlsConnector::from(Arc::new(client)),
        }))
    }

    /// Dials peer `id` at `addr`: its certificate must name `id`.
    ///
    /// # Errors
    /// The TLS handshake failed (a certificate refused either way).
    ///
    /// # Cancel safety
    /// Cancel safe: the connection is dropped with the future.
    pub async fn connect(&self, id: &str, tcp: TcpStream) -> std::io::Result<BoxStream> {
        let name = ServerName::try_from(id.to_owned()).map_err(std::io::Error::other)?;
        let stream = self.connector.connect(name, tcp).await?;
        Ok(Box::new(stream))
    }

    /// Completes a client's handshake: the stream and the client's
    /// certificate.
    async fn accept(
        &self,
        tcp: TcpStream,
    ) -> std::io::Result<(BoxStream, CertificateDer<'static>)> {
        let stream = tokio::time::timeout(HANDSHAKE_TIMEOUT, self.acceptor.accept(tcp))
            .await
            .map_err(|_| std::io::Error::other("TLS handshake timed out"))??;
        let cert = stream
            .get_ref()
            .1
            .peer_certificates()
            .and_then(|chain| chain.first())
            .cloned()
            .ok_or_else(|| std::io::Error::other("no client certificate"))?;
        Ok((Box::new(stream), cert))
    }
}

/// Whether `cert` is valid for the DNS name `id` (a subject alternative
/// name): how a certificate says which peer it belongs to.
pub fn names(cert: &CertificateDer<'_>, id: &str) -> bool {
    let Ok(name) = ServerName::try_from(id) else {
        return false;
    };
    webpki::EndEntityCert::try_from(cert)
        .is_ok_and(|c| c.verify_is_valid_for_subject_name(&name).is_ok())
}

/// Largest frame we accept; ours are well under 1 KiB.
const MAX_FRAME: u32 = 64 * 1024;

/// What travels on a connection.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Frame {
    /// The cluster (`--election`) it belongs to.
    pub cluster: String,
    /// Who sends it (a peer id; anything for a query).
    pub from: String,
    /// What it says.
    pub body: Body,
    /// The sender's priority (see [`crate::steer`]), on a peer's frames:
    /// how a leader learns who wants to lead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u32>,
    /// Whether the sender's health check fails (see [`crate::health`]),
    /// on a peer's frames.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unhealthy: bool,
}

/// The standings the peers' frames carried, and when each was heard.
pub type Heard = Arc<std::sync::Mutex<BTreeMap<String, (Standing, crate::clock::BootInstant)>>>;

/// A frame's content.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Body {
    /// A Raft message between peers.
    Peer(Message),
    /// A client asks who leads.
    Query,
    /// A peer's view of the leader.
    Status(WireStatus),
    /// A client asks the leader for a switchover (see [`crate::steer`]),
    /// which lives as long as this connection stays open.
    Switchover(SwitchoverAsk),
    /// The leader's answer to a [`Body::Switchover`].
    SwitchoverAnswer(Result<(), WireRefusal>),
}

/// A switchover as a client asks the leader for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SwitchoverAsk {
    /// Its identity.
    pub id: String,
    /// The peer to lead.
    pub to: String,
    /// The term the client planned it in: a leader of another term
    /// refuses it, so a stale switchover never acts.
    pub term: u64,
    /// How long it may take, from its arrival.
    pub within_ms: u64,
}

/// Why a leader refused a switchover.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WireRefusal {
    /// The peer asked does not lead.
    NotLeader,
    /// The leader's term is not the one the switchover was planned in.
    TermChanged,
    /// The target has not answered the leader within an election timeout.
    NotLive,
    /// Another switchover is under way.
    Busy,
    /// The target has priority 0 and a peer of positive priority is live.
    NeverLeads,
    /// The target's health check fails and a healthy peer is live.
    Unhealthy,
    /// The connection's certificate names no peer.
    NotAllowed,
}

/// A switchover handed to the driver: the ask, where its answer goes,
/// and a token cancelled once the asking connection is gone.
pub struct Steering {
    /// What the client asks.
    pub ask: SwitchoverAsk,
    /// Where the driver answers.
    pub answer: tokio::sync::oneshot::Sender<Result<(), WireRefusal>>,
    /// Cancelled once the client's connection is gone.
    pub ended: tokio_util::sync::CancellationToken,
}

/// Who leads, as a peer sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireStatus {
    /// The leader's id, if it knows one with a lease.
    pub leader: Option<String>,
    /// The peer's term.
    pub term: u64,
    /// The order of succession the peer last published (a leader) or heard
    /// (a follower), first in line first.
    #[serde(default)]
    pub successors: Vec<String>,
    /// A leader: the followers that answered it within an election
    /// timeout.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub live: Vec<String>,
    /// A leader: its own priority and each live follower's, as their
    /// frames said (a switchover's plan refuses a priority 0 target).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub priorities: BTreeMap<String, u32>,
    /// A leader: those of them whose health check fails.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unhealthy: Vec<String>,
}

/// Opens a query to peer `id` at `addr` of `cluster`, as client `from`:
/// the peer answers with its status, and again each time it changes
/// (read them with [`next_status`]).
///
/// # Errors
/// The peer could not be reached.
///
/// # Cancel safety
/// Cancel safe: the connection is dropped with the future.
pub async fn open_query(
    cluster: &str,
    from: &str,
    (id, addr): (&str, &str),
    tls: Option<&PeerTls>,
) -> std::io::Result<BoxStream> {
    let mut stream = dial(id, addr, tls).await?;
    let query = Frame {
        cluster: cluster.to_owned(),
        from: from.to_owned(),
        body: Body::Query,
        priority: None,
        unhealthy: false,
    };
    write_frame(&mut stream, &query).await?;
    Ok(stream)
}

/// The next status on a stream from [`open_query`].
///
/// # Errors
/// The peer hung up, or sent something unreadable.
///
/// # Cancel safety
/// Not cancel safe: a status half read is lost, and the stream with it.
pub async fn next_status(stream: &mut BoxStream) -> std::io::Result<WireStatus> {
    loop {
        if let Body::Status(status) = read_frame(stream).await?.body {
            return Ok(status);
        }
    }
}

/// Asks a peer who leads, once: its status (see [`open_query`]).
///
/// # Errors
/// The peer could not be reached, or hung up before answering.
///
/// # Cancel safety
/// Cancel safe: the connection is dropped with the future.
pub async fn status_of(
    cluster: &str,
    from: &str,
    peer: (&str, &str),
    tls: Option<&PeerTls>,
) -> std::io::Result<WireStatus> {
    next_status(&mut open_query(cluster, from, peer, tls).await?).await
}

/// Writes one frame.
///
/// # Errors
/// The stream failed.
///
/// # Cancel safety
/// Not cancel safe: a frame half written leaves the stream unusable.
pub async fn write_frame<S: AsyncWrite + Unpin + ?Sized>(
    stream: &mut S,
    frame: &Frame,
) -> std::io::Result<()> {
    let body = serde_json::to_vec(frame).map_err(std::io::Error::other)?;
    let mut buf = Vec::with_capacity(4 + body.len());
    buf.extend_from_slice(&(body.len() as u32).to_be_bytes());
    buf.extend_from_slice(&body);
    stream.write_all(&buf).await?;
    stream.flush().await
}

/// Reads one frame.
///
/// # Errors
/// The stream failed or ended, or the frame is not one of ours.
///
/// # Cancel safety
/// Not cancel safe: a frame half read leaves the stream unusable.
pub async fn read_frame<S: AsyncRead + Unpin + ?Sized>(stream: &mut S) -> std::io::Result<Frame> {
    let len = stream.read_u32().await?;
    if len > MAX_FRAME {
        return Err(std::io::Error::other(format!("frame of {len} bytes")));
    }
    let mut body = vec![0; len as usize];
    stream.read_exact(&mut body).await?;
    serde_json::from_slice(&body).map_err(std::io::Error::other)
}

/// Where a peer listens and what it accepts.
pub struct Server {
    /// The bound listener.
    pub listener: TcpListener,
    /// Its cluster: frames of others are dropped.
    pub cluster: String,
    /// Every peer id.
    pub peers: Vec<String>,
    /// This peer's id.
    pub me: String,
    /// Mutual TLS, if configured.
    pub tls: Option<Arc<PeerTls>>,
    /// Where switchovers go (the driver).
    pub steering: mpsc::Sender<Steering>,
    /// Where the peers' priorities go.
    pub heard: Heard,
}

/// Accepts connections: peer messages go to `inbound`, queries are
/// answered from `status`.
///
/// # Cancel safety
/// Dropping the future stops accepting; connections already accepted
/// run on in their own tasks until their peers hang up.
pub async fn serve(
    server: Server,
    inbound: mpsc::Sender<(String, Message)>,
    status: watch::Receiver<WireStatus>,
) {
    let Server {
        listener,
        cluster,
        peers,
        me,
        tls,
        steering,
        heard,
    } = server;
    let mut backoff = Backoff::new();
    loop {
        let (tcp, addr) = match listener.accept().await {
            Ok(accepted) => {
                backoff.reset();
                accepted
            }
            Err(e) => {
                // EMFILE and the like do not clear by retrying at once.
                backoff.warn_once(format_args!("accepting a peer connection: {e}"));
                backoff.wait().await;
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        let (cluster, peers, inbound, status, me, tls, steering, heard) = (
            cluster.clone(),
            peers.clone(),
            inbound.clone(),
            status.clone(),
            me.clone(),
            tls.clone(),
            steering.clone(),
            heard.clone(),
        );
        tokio::spawn(async move {
            let (mut stream, cert): (BoxStream, _) = match &tls {
                None => (Box::new(tcp), None),
                Some(tls) => match tls.accept(tcp).await {
                    Ok((stream, cert)) => (stream, Some(cert)),
                    Err(e) => {
                        warn_counted!(%addr, "refused a connection: {e}");
                        return;
                    }
                },
            };
            loop {
                let frame = match read_frame(&mut stream).await {
                    Ok(f) => f,
                    Err(e) => {
                        debug!(%addr, "connection closed: {e}");
                        return;
                    }
                };
                if frame.cluster != cluster {
                    warn_counted!(%addr, cluster = %frame.cluster, "dropping a frame of another cluster");
                    continue;
                }
                let vouched = cert.as_ref().is_none_or(|c| names(c, &frame.from));
                match frame.body {
                    Body::Peer(_) if !vouched => {
                        warn_counted!(%addr, from = %frame.from, "dropping a frame: the connection's certificate does not name its sender");
                    }
                    Body::Peer(msg) if peers.contains(&frame.from) => {
                        if let Some(priority) = frame.priority.and_then(Priority::new) {
                            let now = crate::clock::BootInstant::now();
                            let standing = Standing {
                                priority,
                                healthy: !frame.unhealthy,
                            };
                            let mut heard = heard.lock().unwrap_or_else(|e| e.into_inner());
                            heard.insert(frame.from.clone(), (standing, now));
                        }
                        if inbound.send((frame.from, msg)).await.is_err() {
                            return;
                        }
                    }
                    Body::Peer(_) => {
                        warn_counted!(%addr, from = %frame.from, "dropping a frame from an unknown peer")
                    }
                    Body::Query => {
                        answer_queries(&mut stream, &cluster, &me, status).await;
                        return;
                    }
                    Body::Switchover(ask) => {
                        let a_peer = cert
                            .as_ref()
                            .is_none_or(|c| peers.iter().any(|p| names(c, p)));
                        let reply = |answer| Frame {
                            cluster: cluster.clone(),
                            from: me.clone(),
                            body: Body::SwitchoverAnswer(answer),
                            priority: None,
                            unhealthy: false,
                        };
                        if !a_peer {
                            warn_counted!(%addr, "refused a switchover: the connection's certificate names no peer");
                            let _ = write_frame(&mut stream, &reply(Err(WireRefusal::NotAllowed)))
                                .await;
                            return;
                        }
                        answer_switchover(&mut stream, ask, &steering, reply).await;
                        return;
                    }
                    Body::Status(_) | Body::SwitchoverAnswer(_) => {}
                }
            }
        });
    }
}

/// Hands a switchover to the driver, writes its answer, and keeps it
/// alive until the client hangs up (then the driver drops it).
async fn answer_switchover(
    stream: &mut BoxStream,
    ask: SwitchoverAsk,
    steering: &mpsc::Sender<Steering>,
    reply: impl Fn(Result<(), WireRefusal>) -> Frame,
) {
    let (answer, answered) = tokio::sync::oneshot::channel();
    let ended = tokio_util::sync::CancellationToken::new();
    let _ending = ended.clone().drop_guard();
    let handed = steering.send(Steering { ask, answer, ended }).await;
    let answer = match handed {
        Ok(()) => answered.await.unwrap_or(Err(WireRefusal::NotLeader)),
        Err(_) => Err(WireRefusal::NotLeader),
    };
    if write_frame(stream, &reply(answer)).await.is_err() || answer.is_err() {
        return;
    }
    // Anything more, or the end: the client is done with it.
    let _ = read_frame(stream).await;
}

async fn answer_queries(
    stream: &mut BoxStream,
    cluster: &str,
    me: &str,
    mut status: watch::Receiver<WireStatus>,
) {
    loop {
        let current = status.borrow_and_update().clone();
        let frame = Frame {
            cluster: cluster.to_owned(),
            from: me.to_owned(),
            body: Body::Status(current),
            priority: None,
            unhealthy: false,
        };
        if write_frame(stream, &frame).await.is_err() || status.changed().await.is_err() {
            return;
        }
    }
}

/// A message for a peer, and who wants to know once it is written.
pub struct Outgoing {
    /// The message.
    pub msg: Message,
    /// Told `true` once the frame is written to the connection (in the
    /// kernel's hands, so it leaves even if this process exits next),
    /// `false` if it could not be.
    pub written: Option<tokio::sync::oneshot::Sender<bool>>,
}

impl From<Message> for Outgoing {
    fn from(msg: Message) -> Self {
        Outgoing { msg, written: None }
    }
}

/// One outbound queue per peer; each is drained by a task that keeps a
/// connection open, reconnecting with backoff. Raft tolerates loss, so a
/// full queue or a failed write just drops messages.
pub fn connect_peers(
    cluster: &str,
    me: &str,
    addresses: &BTreeMap<String, String>,
    tls: Option<Arc<PeerTls>>,
    priority: watch::Receiver<Standing>,
) -> BTreeMap<String, mpsc::Sender<Outgoing>> {
    let mut queues = BTreeMap::new();
    for (peer, addr) in addresses {
        if peer == me {
            continue;
        }
        let (tx, rx) = mpsc::channel(256);
        tokio::spawn(send_loop(
            cluster.to_owned(),
            me.to_owned(),
            (peer.clone(), addr.clone()),
            tls.clone(),
            priority.clone(),
            rx,
        ));
        queues.insert(peer.clone(), tx);
    }
    queues
}

/// Opens a connection to peer `id` at `addr`, TLS when configured.
///
/// # Errors
/// The peer could not be reached, or the TLS handshake failed.
///
/// # Cancel safety
/// Cancel safe: the connection is dropped with the future.
pub async fn dial(id: &str, addr: &str, tls: Option<&PeerTls>) -> std::io::Result<BoxStream> {
    let tcp = TcpStream::connect(addr).await?;
    let _ = tcp.set_nodelay(true);
    match tls {
        None => Ok(Box::new(tcp)),
        Some(tls) => tls.connect(id, tcp).await,
    }
}

/// Keeps a connection to one peer open, dialling as soon as it starts and
/// again whenever the connection closes, so that messages, a new leader's
/// votes above all, never wait for a TCP or TLS handshake; and writes what
/// the driver queues for that peer.
async fn send_loop(
    cluster: String,
    me: String,
    (peer, addr): (String, String),
    tls: Option<Arc<PeerTls>>,
    priority: watch::Receiver<Standing>,
    mut rx: mpsc::Receiver<Outgoing>,
) {
    let tell = |written: Option<tokio::sync::oneshot::Sender<bool>>, ok: bool| {
        if let Some(w) = written {
            let _ = w.send(ok);
        }
    };
    let mut backoff = Duration::from_millis(10);
    let mut warned = false;
    loop {
        let dialing = dial(&peer, &addr, tls.as_deref());
        let mut stream = match tokio::time::timeout(Duration::from_secs(1), dialing).await {
            Ok(Ok(s)) => {
                backoff = Duration::from_millis(10);
                warned = false;
                s
            }
            failed => {
                match failed {
                    // tokio-rustls reports TLS failures as InvalidData: a
                    // misconfiguration, worth saying aloud (once a stretch).
                    Ok(Err(e)) if e.kind() == std::io::ErrorKind::InvalidData && !warned => {
                        warned = true;
                        warn_counted!(%addr, %peer, "TLS with the peer failed: {e}")
                    }
                    Ok(Err(e)) => debug!(%addr, "connect failed: {e}"),
                    _ => debug!(%addr, "connect timed out"),
                }
                // What queued up meanwhile is stale by now: drop it.
                let waited = tokio::time::sleep(backoff);
                tokio::pin!(waited);
                loop {
                    tokio::select! {
                        () = &mut waited => break,
                        next = rx.recv() => match next {
                            Some(stale) => tell(stale.written, false),
                            None => return,
                        },
                    }
                }
                backoff = (backoff * 2).min(Duration::from_millis(500));
                continue;
            }
        };
        loop {
            // Peers never write on a connection we opened, so anything
            // readable means it was closed: drop it now rather than lose
            // the next message to a peer that restarted.
            let mut probe = [0u8; 1];
            let next = tokio::select! {
                next = rx.recv() => next,
                _ = stream.read(&mut probe) => {
                    debug!(%addr, "connection closed by the peer");
                    break;
                }
            };
            let Some(Outgoing { msg, written }) = next else {
                return;
            };
            let frame = Frame {
                cluster: cluster.clone(),
                from: me.clone(),
                body: Body::Peer(msg),
                priority: Some(priority.borrow().priority.get()),
                unhealthy: !priority.borrow().healthy,
            };
            match write_frame(&mut stream, &frame).await {
                Ok(()) => tell(written, true),
                Err(e) => {
                    debug!(%addr, "send failed: {e}");
                    tell(written, false);
                    break;
                }
            }
        }
    }
}
/// Refuses a certificate that does not name this peer's id (as a DNS
/// subject alternative name): the other peers would refuse it.
pub(crate) fn check_own_certificate(cfg: &ElectionConfig) -> Result<()> {
    if let Some(tls) = &cfg.tls
        && let Some((chain, _)) = tls.identity()
        && !chain.first().is_some_and(|c| names(c, &cfg.id))
    {
        return Err(Error::config(
            "cert",
            format!(
                "the certificate does not name this peer's id {:?} (a DNS subject alternative \
                 name): other peers would refuse it",
                cfg.id
            ),
        ));
    }
    Ok(())
}
