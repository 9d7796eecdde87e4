//! Raft-vote backend: the `elect` processes elect a leader among
//! themselves with Raft's election (no log), no external service.
//!
//! - the sans-IO state machine (PreVote, CheckQuorum, leader lease,
//!   leadership transfer) is the crate [`elect_raft`], which `elect-sim`
//!   and the model check run unchanged;
//! - `store`: term and vote on disk, fsynced before any vote reply;
//! - `transport`: TCP frames between peers, and queries from non-peers;
//! - `driver`: the tokio loop that feeds the core.
//!
//! The fencing token is the leader's term.

pub(crate) mod driver;
mod reach;
pub(crate) mod store;
pub mod switchover;
pub mod transport;

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio::time::timeout;
use tokio_util::sync::CancellationToken;
use tracing::debug;

use crate::backend::handle::{Campaign, Observation};
use crate::config::ElectionConfig;
use crate::error::{Error, Result};
use crate::leadership::Leadership;
use crate::work::WorkWatch;
use reach::{peer_addresses, peer_tls, query};
use transport::{BoxStream, WireStatus};

/// Starts this process as a peer: listens on its own address, loads its
/// term and vote, and runs the election.
///
/// # Errors
/// The address cannot be bound, or the stored vote cannot be read.
///
/// # Cancel safety
/// Dropping the future before it returns leaves nothing running; a vote
/// it had written stays on disk, as a vote must.
pub async fn campaign(
    cfg: &ElectionConfig,
    work: WorkWatch,
    priority: tokio::sync::watch::Receiver<crate::steer::Standing>,
) -> Result<Campaign> {
    // `work` is waited for only by a switchover (it transfers once the
    // work has stopped): otherwise the lease ends before anyone else can
    // be elected, and the supervisor kills the command by then.
    let addresses = peer_addresses(cfg);
    let ids: Vec<String> = addresses.keys().cloned().collect();
    let tls = peer_tls(cfg)?;
    transport::check_own_certificate(cfg)?;
    let own = &addresses[&cfg.id];
    let listener = TcpListener::bind(own).await.map_err(|e| {
        Error::io(
            format!("listening on {own}, the address of --id {}", cfg.id),
            e,
        )
    })?;
    let store = Arc::new(store::Store::new(cfg.data_dir.as_deref()));
    let hard = store::load_timed(store.clone(), &cfg.id, cfg.ttl).await?;
    let seed = std::process::id() as u64
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
    let node = elect_raft::Node::new(
        elect_raft::Config::new(&cfg.id, &ids, cfg.ttl, seed),
        hard,
        Duration::ZERO,
    );
    let (inbound_tx, inbound) = mpsc::channel(1024);
    let (status, status_rx) = watch::channel(WireStatus {
        leader: None,
        term: node.term(),
        successors: Vec::new(),
        live: Vec::new(),
        priorities: Default::default(),
        unhealthy: Vec::new(),
    });
    let (steering_tx, steering) = mpsc::channel(4);
    let heard = transport::Heard::default();
    let server = transport::Server {
        listener,
        cluster: cfg.election.clone(),
        peers: ids,
        me: cfg.id.clone(),
        tls: tls.clone(),
        steering: steering_tx,
        heard: heard.clone(),
    };
    let serving = tokio::spawn(transport::serve(server, inbound_tx, status_rx));
    let outbound = transport::connect_peers(
        &cfg.election,
        &cfg.id,
        &addresses,
        tls.clone(),
        priority.clone(),
    );
    let (out, leadership) = watch::channel(Leadership::unknown());
    let resign = CancellationToken::new();
    let driver = driver::Driver {
        node,
        store: store::Persister::start(store, cfg.ttl)?,
        cluster: cfg.election.clone(),
        addresses,
        inbound,
        outbound,
        leadership: out,
        status,
        origin: crate::clock::BootInstant::now(),
        resign: resign.clone(),
        tls,
        steering,
        work,
        switchover: None,
        priority,
        heard,
        failback_delay: cfg.failback_delay,
        failback: None,
        pinned_in: None,
    };
    // The listener lives as long as the driver: once we have resigned
    // (and handed leadership over), the port is closed.
    let task = tokio::spawn(async move {
        let result = driver.run().await;
        serving.abort();
        result
    });
    Ok(Campaign::new(leadership, resign, task))
}

async fn next_status(stream: &mut BoxStream) -> std::io::Result<Leadership> {
    let status = transport::next_status(stream).await?;
    Ok(Leadership::observed(
        status.leader.map(|l| (l, status.term)),
    ))
}

/// Asks any peer who leads.
///
/// # Errors
/// [`Error::Unreachable`] when no peer answers within the connect timeout.
///
/// # Cancel safety
/// Cancel safe: it only asks.
pub async fn leader(cfg: &ElectionConfig) -> Result<Leadership> {
    let mut stream = query(cfg, peer_tls(cfg)?.as_deref()).await?;
    timeout(cfg.connect_timeout, next_status(&mut stream))
        .await
        .map_err(|_| cfg.unreachable("no status received"))?
        .map_err(|e| cfg.unreachable(e))
}

/// Follows who leads through any peer, moving to another when it fails.
///
/// # Errors
/// [`Error::Unreachable`] when no peer answers at first.
///
/// # Cancel safety
/// Cancel safe: a dropped future leaves no observation running.
pub async fn observe(cfg: &ElectionConfig) -> Result<Observation> {
    // Built once: reconnections reuse it.
    let tls = peer_tls(cfg)?;
    let mut stream = query(cfg, tls.as_deref()).await?;
    let (out, leadership) = watch::channel(Leadership::unknown());
    let cfg = cfg.clone();
    let task = tokio::spawn(async move {
        loop {
            match next_status(&mut stream).await {
                Ok(snapshot) => {
                    crate::backend::publish::publish_if_changed(&out, snapshot);
                }
                Err(e) => {
                    debug!("observer: {e}");
                    out.send_replace(Leadership::unknown());
                    stream = loop {
                        if let Ok(s) = query(&cfg, tls.as_deref()).await {
                            break s;
                        }
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    };
                }
            }
        }
    });
    Ok(Observation::new(leadership, task))
}
