//! etcd backend: lease-bound keys in the layout of Go's
//! `concurrency.Election`, so `etcdctl elect` and `elect` share elections.
//!
//! - [`connection`]: one connection per member, shared by the requests
//!   and the lease's renewals; what a failed first contact means.
//! - [`layout`]: key names and how a key reads as a candidate.
//! - [`lease`]: the session lease, granted and revoked.
//! - [`renewal`]: our own keepalive loop through every member, which is
//!   where the local leadership deadline comes from.
//! - [`observe`]: who leads, from a fresh read plus a watch on one key.
//! - [`campaign`]: create our key, wait for our predecessor only, confirm,
//!   lead (`stint.rs`, driving [`recipe::Stint`]) until the deadline or a
//!   contradiction, resign.
//! - [`handover`]: a resigning leader hands over to the next in line in
//!   its resignation's transaction, so the successor needs no read.
//! - [`recipe`]: every decision of a candidacy (our turn, taking office,
//!   the next in line, the release), as state machines without I/O that
//!   `campaign` and `handover` drive and the handover model drives
//!   unchanged.
//! - [`keywatch`]: watches on single keys (a deletion; a waiting
//!   candidate's predecessor and own key on one stream).
//! - `bounds`: how long a request or a watch may go unanswered; a silent
//!   watch asks its member for progress, so one on a paused member is
//!   found and opened again elsewhere as a request would be.
//! - [`session`]: one lease many elections share.
//! - [`tenure`]: the marker every leading candidacy holds, so that none
//!   starts while another's work may still run.

mod bounds;
pub mod campaign;
mod connection;
mod errors;
pub mod handover;
pub mod keywatch;
pub mod layout;
pub mod lease;
#[cfg(test)]
mod model;
pub mod observe;
mod office;
pub mod periodic;
mod priority;
pub mod recipe;
mod renewal;
pub(crate) mod session;
mod stint;
pub mod switchover;
pub mod tenure;
mod transaction;
mod turn;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::backend::handle::{Campaign, Observation};
use crate::backend::publish::{self, Observed};
use crate::config::ElectionConfig;
use crate::error::Result;
use crate::leadership::Leadership;
use crate::steer::Standing;
use crate::work::WorkWatch;
use bounds::WatchBounds;
use connection::{Connections, connect, connect_reader, first_contact};

/// Reads the current leader once.
///
/// Errors: [`Unreachable`](crate::Error::Unreachable) when etcd does not answer within the
/// connect timeout. Cancel safe.
pub async fn leader(cfg: &ElectionConfig) -> Result<Leadership> {
    let client = connect_reader(cfg).await?;
    let prefix = layout::prefix(&cfg.election);
    let view = first_contact(cfg, || observe::read_leader(&client, &prefix)).await?;
    Ok(view.to_leadership())
}

/// Starts following the election.
///
/// Errors: [`Unreachable`](crate::Error::Unreachable) when the first read fails. Later failures
/// are retried and shown as an unknown leader.
pub async fn observe(cfg: &ElectionConfig) -> Result<Observation> {
    let client = connect_reader(cfg).await?;
    let prefix = layout::prefix(&cfg.election);
    let first = first_contact(cfg, || observe::read_leader(&client, &prefix)).await?;
    let (view_tx, view_rx) = watch::channel(first.clone());
    let (out, leadership) = watch::channel(first.to_leadership());
    let bounds = WatchBounds::new(cfg.connect_timeout);
    let task = tokio::spawn(async move {
        let follower = observe::follow(client, prefix, first, view_tx, bounds);
        tokio::join!(follower, publish::publish_views(view_rx, out));
    });
    Ok(Observation::new(leadership, task))
}

/// Joins the election as a candidate.
///
/// After losing leadership the campaign keeps its lease (which successors
/// wait for) until `work` says the work started under it has stopped.
///
/// Errors: [`Unreachable`](crate::Error::Unreachable) when the lease cannot be granted within
/// the connect timeout. Later failures are retried.
pub async fn campaign(
    cfg: &ElectionConfig,
    work: WorkWatch,
    priority: watch::Receiver<Standing>,
) -> Result<Campaign> {
    let Connections { client, renewers } = connect(cfg).await?;
    let prefix = layout::prefix(&cfg.election);
    let first = first_contact(cfg, || observe::read_leader(&client, &prefix)).await?;
    let lease = first_contact(cfg, || lease::Lease::grant(&client, &renewers, cfg.ttl)).await?;

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
    )
    .wishing(priority);
    // The candidate's view decides no deadline (its stint watches its own
    // key): it asks for no progress, leader or not.
    let bounds = WatchBounds::new(cfg.connect_timeout).following();
    let task = tokio::spawn(async move {
        let follower = tokio::spawn(observe::follow(client, prefix, first, view_tx, bounds));
        let result = candidate.run(lease).await;
        follower.abort();
        result
    });
    Ok(Campaign::new(leadership, resign, task))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A waiting candidate's memory is mostly its connections, its watch
    /// streams and its tasks' futures. etcd-client's request futures are
    /// 3.5 KiB each and a `Client` 3.7 KiB; awaited or held inline they
    /// sized every task above them (the candidate's was 9.3 KiB, the
    /// follower's 11 KiB, setting one up 13.6 KiB) and the stacks that poll
    /// them. They are boxed or shared; these bounds keep them so, with
    /// room for another compiler's layout.
    #[tokio::test]
    async fn a_candidates_futures_stay_small() {
        let cfg = ElectionConfig::etcd(["127.0.0.1:1", "127.0.0.1:2"], "e").unwrap();
        // No request is sent: connections are made on first use.
        let Connections { client, renewers } = connect(&cfg).await.unwrap();
        let first = observe::View {
            leader: None,
            current: true,
            revision: 0,
        };
        let (view_tx, view_rx) = watch::channel(first.clone());
        let (out, _) = watch::channel(Leadership::unknown());
        let candidate = campaign::Candidate::new(
            client.clone(),
            renewers.clone(),
            cfg.clone(),
            out,
            view_rx,
            WorkWatch::none(),
            CancellationToken::new(),
        );
        let (lease, state) = lease::Lease::ungranted();
        let renewal = lease.renewal(renewers[0].clone(), state);
        let bounds = WatchBounds::new(cfg.connect_timeout);
        let follower = observe::follow(client, "e/".into(), first, view_tx, bounds);
        let run = candidate.run(lease);
        let setup = campaign(&cfg, WorkWatch::none(), watch::channel(Standing::DEFAULT).1);

        let kib = |size: usize| size as f64 / 1024.0;
        let sizes = [
            ("a candidacy", kib(std::mem::size_of_val(&run)), 6.0),
            ("the follower", kib(std::mem::size_of_val(&follower)), 2.0),
            ("a renewal loop", kib(std::mem::size_of_val(&renewal)), 2.0),
            ("setting up", kib(std::mem::size_of_val(&setup)), 6.0),
        ];
        for (what, size, bound) in sizes {
            assert!(
                size <= bound,
                "{what}'s future is {size:.1} KiB, above {bound} KiB"
            );
        }
    }
}
