//! Whether work started under our leadership still runs.
//!
//! A campaign that loses leadership keeps what successors wait for (its
//! etcd lease, its ZooKeeper znode) until that work has stopped, at most
//! one TTL, so the successor's work never overlaps ours even when the loss
//! was learned late. Whoever runs the work holds the [`Work`] half and
//! says when it runs; the campaign holds the [`WorkWatch`] half.
//! `supervise::run` does this for a wrapped command. A program whose
//! leader-only work stops by itself at the deadline passes
//! [`WorkWatch::none`].

use tokio::sync::watch;

/// Says whether leader-only work runs (held by whoever runs it).
#[derive(Debug)]
pub struct Work(watch::Sender<bool>);

/// Follows whether leader-only work runs (given to a campaign).
#[derive(Debug, Clone)]
pub struct WorkWatch(watch::Receiver<bool>);

/// A pair that starts with no work running.
pub fn channel() -> (Work, WorkWatch) {
    let (tx, rx) = watch::channel(false);
    (Work(tx), WorkWatch(rx))
}

impl Work {
    /// The work started (or is still running).
    pub fn running(&self) {
        self.0.send_replace(true);
    }

    /// The work has stopped: nothing started under our leadership runs.
    pub fn stopped(&self) {
        self.0.send_replace(false);
    }

    /// Whether it said the work runs.
    pub fn is_running(&self) -> bool {
        *self.0.borrow()
    }
}

impl WorkWatch {
    /// No leader-only work to wait for.
    pub fn none() -> WorkWatch {
        channel().1
    }

    /// Whether the work runs now.
    pub fn is_running(&self) -> bool {
        *self.0.borrow()
    }

    /// Returns once the work runs (never if the [`Work`] half is gone
    /// while it does not).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn started(&mut self) {
        if self.0.wait_for(|running| *running).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// Returns once no work runs (at once if the [`Work`] half is gone).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn stopped(&mut self) {
        let _ = self.0.wait_for(|running| !running).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_watch_returns_once_the_work_stopped_or_its_holder_is_gone() {
        let (work, mut watch) = channel();
        work.running();
        let waiting = tokio::spawn(async move { watch.stopped().await });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        work.stopped();
        waiting.await.unwrap();

        let (work, mut watch) = channel();
        work.running();
        drop(work);
        watch.stopped().await;
        WorkWatch::none().stopped().await;
    }
}
