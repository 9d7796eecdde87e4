//! Peer and client traffic over TCP: length-delimited frames (a 4-byte
//! big-endian length, then JSON). Every frame names the cluster and the
//! sender; frames of another cluster or from an unknown peer are dropped
//! and logged. A process that is not a peer may send a `Query` and then
//! receives the peer's view of the leader, once and on every change.

use crate::backend::backoff::Backoff;
use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tracing::{debug, warn};

use super::core::Message;

/// Largest frame we accept; ours are well under 1 KiB.
const MAX_FRAME: u32 = 64 * 1024;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Frame {
    pub cluster: String,
    pub from: String,
    pub body: Body,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Body {
    Peer(Message),
    /// A client asks who leads.
    Query,
    /// A peer's view of the leader.
    Status(WireStatus),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireStatus {
    pub leader: Option<String>,
    pub term: u64,
}

pub async fn write_frame(stream: &mut TcpStream, frame: &Frame) -> std::io::Result<()> {
    let body = serde_json::to_vec(frame).map_err(std::io::Error::other)?;
    let mut buf = Vec::with_capacity(4 + body.len());
    buf.extend_from_slice(&(body.len() as u32).to_be_bytes());
    buf.extend_from_slice(&body);
    stream.write_all(&buf).await
}

pub async fn read_frame(stream: &mut TcpStream) -> std::io::Result<Frame> {
    let len = stream.read_u32().await?;
    if len > MAX_FRAME {
        return Err(std::io::Error::other(format!("frame of {len} bytes")));
    }
    let mut body = vec![0; len as usize];
    stream.read_exact(&mut body).await?;
    serde_json::from_slice(&body).map_err(std::io::Error::other)
}

/// Accepts connections on `listener`: peer messages go to `inbound`,
/// queries are answered from `status`.
pub async fn serve(
    listener: TcpListener,
    cluster: String,
    peers: Vec<String>,
    inbound: mpsc::Sender<(String, Message)>,
    status: watch::Receiver<WireStatus>,
    me: String,
) {
    let mut backoff = Backoff::new();
    loop {
        let (mut stream, addr) = match listener.accept().await {
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
        let _ = stream.set_nodelay(true);
        let (cluster, peers, inbound, status, me) = (
            cluster.clone(),
            peers.clone(),
            inbound.clone(),
            status.clone(),
            me.clone(),
        );
        tokio::spawn(async move {
            loop {
                let frame = match read_frame(&mut stream).await {
                    Ok(f) => f,
                    Err(e) => {
                        debug!(%addr, "connection closed: {e}");
                        return;
                    }
                };
                if frame.cluster != cluster {
                    warn!(%addr, cluster = %frame.cluster, "dropping a frame of another cluster");
                    continue;
                }
                match frame.body {
                    Body::Peer(msg) if peers.contains(&frame.from) => {
                        if inbound.send((frame.from, msg)).await.is_err() {
                            return;
                        }
                    }
                    Body::Peer(_) => {
                        warn!(%addr, from = %frame.from, "dropping a frame from an unknown peer")
                    }
                    Body::Query => {
                        answer_queries(&mut stream, &cluster, &me, status).await;
                        return;
                    }
                    Body::Status(_) => {}
                }
            }
        });
    }
}

async fn answer_queries(
    stream: &mut TcpStream,
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
        };
        if write_frame(stream, &frame).await.is_err() || status.changed().await.is_err() {
            return;
        }
    }
}

/// One outbound queue per peer; each is drained by a task that keeps a
/// connection open, reconnecting with backoff. Raft tolerates loss, so a
/// full queue or a failed write just drops messages.
pub fn connect_peers(
    cluster: &str,
    me: &str,
    addresses: &BTreeMap<String, String>,
) -> BTreeMap<String, mpsc::Sender<Message>> {
    let mut queues = BTreeMap::new();
    for (peer, addr) in addresses {
        if peer == me {
            continue;
        }
        let (tx, rx) = mpsc::channel(256);
        tokio::spawn(send_loop(
            cluster.to_owned(),
            me.to_owned(),
            addr.clone(),
            rx,
        ));
        queues.insert(peer.clone(), tx);
    }
    queues
}

async fn send_loop(cluster: String, me: String, addr: String, mut rx: mpsc::Receiver<Message>) {
    let mut stream: Option<TcpStream> = None;
    let mut backoff = Duration::from_millis(10);
    loop {
        let next = match stream.as_mut() {
            // Peers never write on a connection we opened, so anything
            // readable means it was closed: drop it now rather than lose
            // the next message to a peer that restarted.
            Some(s) => {
                let mut probe = [0u8; 1];
                tokio::select! {
                    msg = rx.recv() => msg,
                    _ = s.read(&mut probe) => {
                        debug!(%addr, "connection closed by the peer");
                        stream = None;
                        continue;
                    }
                }
            }
            None => rx.recv().await,
        };
        let Some(msg) = next else {
            return;
        };
        if stream.is_none() {
            match tokio::time::timeout(Duration::from_secs(1), TcpStream::connect(&addr)).await {
                Ok(Ok(s)) => {
                    let _ = s.set_nodelay(true);
                    stream = Some(s);
                    backoff = Duration::from_millis(10);
                }
                failed => {
                    debug!(%addr, ?failed, "connect failed");
                    // Drop what queued up meanwhile: it is stale by now.
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_millis(500));
                    while rx.try_recv().is_ok() {}
                    continue;
                }
            }
        }
        let frame = Frame {
            cluster: cluster.clone(),
            from: me.clone(),
            body: Body::Peer(msg),
        };
        if let Some(s) = stream.as_mut()
            && let Err(e) = write_frame(s, &frame).await
        {
            debug!(%addr, "send failed: {e}");
            stream = None;
        }
    }
}
