//! The ways to decide who leads, behind one small interface.
//!
//! A backend turns an [`ElectionConfig`] into a stream of [`Leadership`]
//! snapshots: [`campaign`] takes part, [`observe`] only follows, and
//! [`leader`] reads once. Everything downstream (`supervise`, `export`)
//! depends only on the snapshots, never on a backend.

// With no backend compiled in, what they share goes unused.
#[cfg_attr(
    not(any(feature = "etcd", feature = "zk", feature = "raft")),
    allow(dead_code)
)]
pub(crate) mod backoff;
#[cfg(any(feature = "etcd", feature = "zk"))]
mod cadence;
#[cfg(any(feature = "etcd", feature = "zk"))]
mod candidates;
#[cfg(feature = "etcd")]
pub(crate) mod etcd;
mod handle;
#[cfg_attr(not(any(feature = "etcd", feature = "zk")), allow(dead_code))]
pub(crate) mod publish;
#[cfg(feature = "raft")]
pub mod raft;
#[cfg(any(feature = "etcd", feature = "zk"))]
mod recipe;
#[cfg(any(feature = "etcd", feature = "zk"))]
mod records;
#[cfg(any(feature = "etcd", feature = "zk"))]
mod session;
mod term;
#[cfg(feature = "zk")]
pub(crate) mod zk;

pub use handle::{Campaign, Observation};
#[cfg(any(feature = "etcd", feature = "zk"))]
pub use records::CompletionRecords;
#[cfg(any(feature = "etcd", feature = "zk"))]
pub use session::Session;
pub use term::Term;

/// TLS credentials as the options of a ZooKeeper client
/// (`zookeeper_client`), with elect's crypto provider installed: how the
/// lab and users' tools talk to the same ensemble the way elect does.
///
/// # Errors
/// [`Error::Tls`](crate::Error::Tls) when the certificate or key does not parse.
#[cfg(feature = "zk")]
pub use zk::tls_options as zk_tls_options;

use std::time::Duration;

#[cfg(any(feature = "etcd", feature = "zk", feature = "raft"))]
use crate::backend_kind::Backend;
use crate::config::ElectionConfig;
use crate::error::{Error, Result};
use crate::leadership::Leadership;
use crate::steer::{Line, Report, Standing, Target};
use crate::work::WorkWatch;

/// Joins the election described by `cfg`. `work` tells the backend whether
/// work started under our leadership still runs, so that after a loss it
/// keeps what successors wait for until that work has stopped (see
/// [`crate::work`]); pass [`WorkWatch::none`] when nothing needs waiting
/// for.
///
/// # Errors
/// [`Error::Config`] naming `id` if a Raft candidate's id is not one of
/// the peers; [`Error::NotBuiltIn`] if the backend's feature is off;
/// otherwise the service could not be reached within the connect timeout,
/// or refused us.
///
/// # Cancel safety
/// Dropping the future before it returns leaves nothing behind but what
/// the service cleans up by itself (an etcd lease or ZooKeeper session
/// whose TTL runs out).
#[cfg_attr(
    not(any(feature = "etcd", feature = "zk", feature = "raft")),
    allow(unused_variables)
)]
pub async fn campaign(cfg: &ElectionConfig, work: WorkWatch) -> Result<Campaign> {
    // The default id (hostname-pid) is no Raft peer's.
    cfg.check_raft_membership()?;
    cfg.validate()?;
    let (standing, wished, health) = standing_of(cfg).await?;
    let campaign: Result<Campaign> = match cfg.backend() {
        #[cfg(feature = "etcd")]
        Backend::Etcd => etcd::campaign(cfg, work, wished).await,
        #[cfg(feature = "zk")]
        Backend::Zk => zk::campaign(cfg, work, wished).await,
        #[cfg(feature = "raft")]
        Backend::Raft => raft::campaign(cfg, work, wished).await,
        #[allow(unreachable_patterns)]
        backend => {
            let _ = wished;
            Err(Error::NotBuiltIn { backend })
        }
    };
    campaign.map(|c| c.steered_by(standing, health))
}

/// What `cfg`'s candidate says of itself at first (its health from a
/// first check, when it has one), where it can be changed, and the
/// monitor that keeps its health up to date.
async fn standing_of(
    cfg: &ElectionConfig,
) -> Result<(
    std::sync::Arc<tokio::sync::watch::Sender<Standing>>,
    tokio::sync::watch::Receiver<Standing>,
    Option<tokio_util::task::AbortOnDropHandle<()>>,
)> {
    let (standing, wished) = tokio::sync::watch::channel(Standing::healthy(cfg.priority()));
    let standing = std::sync::Arc::new(standing);
    let Some(health) = cfg.health() else {
        return Ok((standing, wished, None));
    };
    // The monitor says the first check's verdict (before we join) and
    // each change after.
    let told = standing.clone();
    let (_first, checking) = crate::health::monitor(health.clone(), move |healthy| {
        told.send_if_modified(|s| std::mem::replace(&mut s.healthy, healthy) != healthy);
    })
    .await?;
    Ok((
        standing,
        wished,
        Some(tokio_util::task::AbortOnDropHandle::new(checking)),
    ))
}

/// Follows the election without taking part.
///
/// # Errors
/// [`Error::NotBuiltIn`] if the backend's feature is off; the service
/// could not be reached within the connect timeout.
///
/// # Cancel safety
/// Cancel safe: a dropped future leaves no observation running.
pub async fn observe(cfg: &ElectionConfig) -> Result<Observation> {
    cfg.validate()?;
    match cfg.backend() {
        #[cfg(feature = "etcd")]
        Backend::Etcd => etcd::observe(cfg).await,
        #[cfg(feature = "zk")]
        Backend::Zk => zk::observe(cfg).await,
        #[cfg(feature = "raft")]
        Backend::Raft => raft::observe(cfg).await,
        #[allow(unreachable_patterns)]
        backend => Err(Error::NotBuiltIn { backend }),
    }
}

/// Reads the line once: every candidate, in the order the backend
/// would let them lead, and who leads (`elect candidates`).
///
/// ```no_run
/// # async fn f() -> elect::Result<()> {
/// let cfg = elect::config::ElectionConfig::etcd(["127.0.0.1:2379"], "jobs")?;
/// let line = elect::backend::line(&cfg).await?;
/// for c in &line.candidates {
///     println!("{} {} priority {}", c.id, if c.leads { "leads" } else { "waits" }, c.priority);
/// }
/// # Ok(()) }
/// ```
///
/// # Errors
/// [`Error::NotBuiltIn`] if the backend's feature is off;
/// the service could not be reached within the connect timeout.
///
/// # Cancel safety
/// Cancel safe: it only reads.
#[cfg_attr(
    not(any(feature = "etcd", feature = "zk", feature = "raft")),
    allow(unused_variables)
)]
pub async fn line(cfg: &ElectionConfig) -> Result<Line> {
    cfg.validate()?;
    match cfg.backend() {
        #[cfg(feature = "etcd")]
        Backend::Etcd => etcd::switchover::line(cfg).await,
        #[cfg(feature = "zk")]
        Backend::Zk => zk::switchover::line(cfg).await,
        #[cfg(feature = "raft")]
        Backend::Raft => raft::switchover::line(cfg).await,
        #[allow(unreachable_patterns)]
        backend => Err(Error::NotBuiltIn { backend }),
    }
}

/// Moves leadership to `to` (see [`crate::steer`]): checks the target
/// against the line, records the switchover with an identity, has the
/// candidates between leader and target step aside, and waits, at most
/// `timeout`, for the target to lead. The leader's work is dead before
/// it hands over, and the target's token is higher.
///
/// ```no_run
/// # async fn f() -> elect::Result<()> {
/// use std::time::Duration;
/// use elect::steer::{Outcome, Target};
/// let cfg = elect::config::ElectionConfig::etcd(["127.0.0.1:2379"], "jobs")?;
/// let to = Target::Candidate("host-b".into());
/// let report = elect::backend::switchover(&cfg, &to, Duration::from_secs(5)).await?;
/// if let Outcome::Done { leader, token, .. } = &report.outcome {
///     println!("{leader} leads with token {token}");
/// }
/// # Ok(()) }
/// ```
///
/// # Errors
/// [`Error::SwitchoverRefused`] before anything changed (the target is
/// not one live candidate, nobody leads, a peer's candidate is in the
/// way, another switchover is under way); [`Error::NotBuiltIn`] if the
/// backend's feature is off; the service could not be reached within
/// the connect timeout. A switchover that started says how it ended in
/// its [`Report`].
///
/// # Cancel safety
/// A dropped future leaves the switchover's record until its timeout
/// runs out; it never acts after that.
#[cfg_attr(
    not(any(feature = "etcd", feature = "zk", feature = "raft")),
    allow(unused_variables)
)]
pub async fn switchover(cfg: &ElectionConfig, to: &Target, timeout: Duration) -> Result<Report> {
    cfg.validate()?;
    match cfg.backend() {
        #[cfg(feature = "etcd")]
        Backend::Etcd => etcd::switchover::switchover(cfg, to, timeout).await,
        #[cfg(feature = "zk")]
        Backend::Zk => zk::switchover::switchover(cfg, to, timeout).await,
        #[cfg(feature = "raft")]
        Backend::Raft => raft::switchover::switchover(cfg, to, timeout).await,
        #[allow(unreachable_patterns)]
        backend => Err(Error::NotBuiltIn { backend }),
    }
}

/// Reads the current leader once.
///
/// # Errors
/// [`Error::NotBuiltIn`] if the backend's feature is off; the service
/// could not be reached within the connect timeout.
///
/// # Cancel safety
/// Cancel safe: it only reads.
pub async fn leader(cfg: &ElectionConfig) -> Result<Leadership> {
    cfg.validate()?;
    match cfg.backend() {
        #[cfg(feature = "etcd")]
        Backend::Etcd => etcd::leader(cfg).await,
        #[cfg(feature = "zk")]
        Backend::Zk => zk::leader(cfg).await,
        #[cfg(feature = "raft")]
        Backend::Raft => raft::leader(cfg).await,
        #[allow(unreachable_patterns)]
        backend => Err(Error::NotBuiltIn { backend }),
    }
}
