//! The handles a backend hands back: a [`Campaign`] (taking part) and an
//! [`Observation`] (following). Each backend builds them; the dispatch in
//! `backend/mod.rs` and the [`Term`](super::Term) of a won election use
//! them; they know no backend.

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::error::Result;
use crate::leadership::Leadership;
use std::sync::Arc;

use tokio_util::task::AbortOnDropHandle;

use crate::steer::{Priority, Standing};

/// A running candidacy.
///
/// Dropping it without calling [`resign`](Campaign::resign) also resigns:
/// renewals stop and the key, znode or Raft leadership is given up by a
/// task that finishes in the background (it needs the tokio runtime to
/// keep running for the few round trips that takes). Call `resign` to wait
/// for it and learn whether it went well.
#[must_use = "dropping a Campaign resigns at once; keep it for as long as you campaign"]
pub struct Campaign {
    /// Read in place by [`Term`](super::Term) (no clone per check).
    pub(super) leadership: watch::Receiver<Leadership>,
    resign: CancellationToken,
    task: Option<JoinHandle<Result<()>>>,
    /// Where [`Campaign::set_priority`] and [`Campaign::set_healthy`]
    /// tell the backend.
    standing: Option<Arc<watch::Sender<Standing>>>,
    /// The health check's monitor, while the campaign lives.
    health_monitor: Option<AbortOnDropHandle<()>>,
}

impl Campaign {
    pub(crate) fn new(
        leadership: watch::Receiver<Leadership>,
        resign: CancellationToken,
        task: JoinHandle<Result<()>>,
    ) -> Self {
        Campaign {
            leadership,
            resign,
            task: Some(task),
            standing: None,
            health_monitor: None,
        }
    }

    /// The same, its priority and health changeable through `standing`,
    /// and its health check's monitor (if any) held as long as it lives.
    pub(crate) fn steered_by(
        mut self,
        standing: Arc<watch::Sender<Standing>>,
        health: Option<AbortOnDropHandle<()>>,
    ) -> Self {
        self.standing = Some(standing);
        self.health_monitor = health;
        self
    }

    /// Changes this candidate's priority while it campaigns (see
    /// [`crate::steer`]): the others see it within a round trip, and a
    /// leader hands over to a higher one after the failback delay.
    ///
    /// ```no_run
    /// # async fn f(campaign: elect::backend::Campaign) {
    /// use elect::steer::Priority;
    /// // Going into maintenance: lead only if nobody else can.
    /// campaign.set_priority(Priority::NEVER);
    /// # }
    /// ```
    pub fn set_priority(&self, priority: Priority) {
        if let Some(sender) = &self.standing {
            sender.send_if_modified(|s| std::mem::replace(&mut s.priority, priority) != priority);
        }
    }

    /// Says whether this host is healthy, for a library that runs its own
    /// check (or none: [`crate::config::ElectionConfig::with_health`] runs
    /// one for you). An unhealthy candidate is passed over while a healthy
    /// one is live; an unhealthy leader hands over to one at once (see
    /// [`crate::health`]). Apply your own hysteresis
    /// ([`crate::health::Gate`]): each change may move leadership.
    ///
    /// ```no_run
    /// # async fn f(campaign: elect::backend::Campaign, database_up: bool) {
    /// campaign.set_healthy(database_up);
    /// # }
    /// ```
    pub fn set_healthy(&self, healthy: bool) {
        if let Some(sender) = &self.standing {
            sender.send_if_modified(|s| std::mem::replace(&mut s.healthy, healthy) != healthy);
        }
    }

    /// With a health check ([`crate::config::ElectionConfig::with_health`]):
    /// this candidate's standing as the others see it, health included.
    pub fn health(&self) -> Option<watch::Receiver<Standing>> {
        self.health_monitor
            .as_ref()
            .and(self.standing.as_ref())
            .map(|s| s.subscribe())
    }

    /// The snapshots of this candidacy, starting with an unknown leader.
    pub fn leadership(&self) -> watch::Receiver<Leadership> {
        self.leadership.clone()
    }

    /// Leaves the election: our key/znode is deleted and the session ended,
    /// so a successor takes over in round trips rather than a TTL.
    ///
    /// # Errors
    /// Only if the campaign had already failed.
    ///
    /// # Cancel safety
    /// Not cancel safe: dropping the future leaves the resignation to
    /// finish in the background.
    pub async fn resign(mut self) -> Result<()> {
        self.resign.cancel();
        let Some(task) = self.task.take() else {
            return Ok(());
        };
        match task.await {
            Ok(result) => result,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => Ok(()),
        }
    }
}

impl Drop for Campaign {
    fn drop(&mut self) {
        // The campaign task resigns when cancelled; detached, it finishes
        // on its own.
        self.resign.cancel();
    }
}

/// A running observation; stops when dropped.
#[must_use = "dropping an Observation stops it"]
pub struct Observation {
    leadership: watch::Receiver<Leadership>,
    task: JoinHandle<()>,
}

impl Observation {
    pub(crate) fn new(leadership: watch::Receiver<Leadership>, task: JoinHandle<()>) -> Self {
        Observation { leadership, task }
    }

    /// The snapshots of this observation, starting with an unknown leader.
    pub fn leadership(&self) -> watch::Receiver<Leadership> {
        self.leadership.clone()
    }
}

impl Drop for Observation {
    fn drop(&mut self) {
        self.task.abort();
    }
}
