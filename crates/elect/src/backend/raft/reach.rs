//! How a client or a peer reaches the cluster: the peers' addresses from
//! the configuration, their TLS, and a query stream to the first that
//! answers (what `campaign`, `leader`, `observe` and a switchover share).

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::time::timeout;

use super::transport::{self, BoxStream, PeerTls};
use crate::config::ElectionConfig;
use crate::error::Result;

/// Peer id -> address.
pub(super) fn peer_addresses(cfg: &ElectionConfig) -> BTreeMap<String, String> {
    cfg.raft_peers()
        .into_iter()
        .flat_map(|peers| peers.iter())
        .map(|p| (p.id().to_owned(), p.addr().to_owned()))
        .collect()
}

/// The peers' mutual TLS, if configured.
pub(super) fn peer_tls(cfg: &ElectionConfig) -> Result<Option<Arc<PeerTls>>> {
    cfg.tls.as_ref().map(PeerTls::new).transpose()
}

/// Opens a query stream to the first peer that answers.
pub(super) async fn query(cfg: &ElectionConfig, tls: Option<&PeerTls>) -> Result<BoxStream> {
    let mut last = String::from("no peer listed");
    for (id, addr) in peer_addresses(cfg) {
        let peer = (id.as_str(), addr.as_str());
        let attempt = timeout(
            cfg.connect_timeout,
            transport::open_query(&cfg.election, &cfg.id, peer, tls),
        )
        .await;
        match attempt {
            Ok(Ok(stream)) => return Ok(stream),
            Ok(Err(e)) => last = format!("{id} at {addr}: {e}"),
            Err(_) => last = format!("{id} at {addr}: no answer"),
        }
    }
    Err(cfg.unreachable(last))
}
