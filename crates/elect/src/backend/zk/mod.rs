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
mod connection;
mod errors;
mod keeper;
pub mod layout;
pub mod lease;
#[cfg(test)]
mod model;
pub mod observe;
pub mod periodic;
mod priority;
pub mod recipe;
pub(crate) mod session;
mod stint;
pub mod switchover;
pub mod timing;
mod turn;
mod znode;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::backend::handle::{Campaign, Observation};
use crate::backend::publish::{self, Observed};
use crate::config::ElectionConfig;
use crate::error::Result;
use crate::leadership::Leadership;
use crate::work::WorkWatch;
pub use connection::tls_options;
use connection::{check_timing, first_contact, reconnect};
use observe::View;

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
                observe::follow(client, cfg.election.clone(), view_tx.clone(), None).await;
                view_tx.send_replace(View::unknown());
                match reconnect(&cfg, view_tx.closed()).await {
                    Some(next) => client = next.client,
                    None => return,
                }
            }
        };
        tokio::join!(follower, publish::publish_views(view_rx, out));
    });
    Ok(Observation::new(leadership, task))
}

/// Joins the election as a candidate. See [`crate::backend::campaign`].
///
/// Errors: [`Error::Unreachable`] when the first session cannot be
/// established. Later failures are retried.
pub async fn campaign(
    cfg: &ElectionConfig,
    work: WorkWatch,
    priority: tokio::sync::watch::Receiver<crate::steer::Standing>,
) -> Result<Campaign> {
    let opened = first_contact(cfg).await?;
    check_timing(cfg, &opened);
    let (out, leadership) = watch::channel(Leadership::unknown());
    let resign = CancellationToken::new();
    let candidate =
        campaign::Candidate::new(cfg.clone(), out, work, resign.clone()).wishing(priority);
    let task = tokio::spawn(candidate.run(opened));
    Ok(Campaign::new(leadership, resign, task))
}

/// Opens a session for many elections (see [`session::SharedSession`]).
///
/// Errors: [`Error::Unreachable`] when no session is established within
/// the connect timeout.
pub(crate) async fn open_shared(cfg: &ElectionConfig) -> Result<session::SharedSession> {
    let opened = first_contact(cfg).await?;
    check_timing(cfg, &opened);
    Ok(session::SharedSession::start(opened, cfg.connect_timeout))
}
