//! The candidates a shared session runs (see `Session`): each gets a
//! resignation token that closing the session cancels, and closing waits
//! (a while) for all of them to resign before the session itself ends.

use std::future::Future;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::counters::warn_counted;
use crate::error::Result;

/// The campaigns running on one shared session.
pub(crate) struct Candidates {
    closing: CancellationToken,
    tasks: TaskTracker,
}

impl Candidates {
    pub(crate) fn new() -> Candidates {
        Candidates {
            closing: CancellationToken::new(),
            tasks: TaskTracker::new(),
        }
    }

    /// Runs the campaign `run` makes from its resignation token: that
    /// token, and the campaign's task.
    pub(crate) fn spawn<F>(
        &self,
        run: impl FnOnce(CancellationToken) -> F,
    ) -> (CancellationToken, JoinHandle<Result<()>>)
    where
        F: Future<Output = Result<()>> + Send + 'static,
    {
        let resign = self.closing.child_token();
        let task = self.tasks.spawn(run(resign.clone()));
        (resign, task)
    }

    /// Asks every campaign to resign and waits for them, at most `within`.
    pub(crate) async fn close(&self, within: Duration) {
        self.closing.cancel();
        self.tasks.close();
        if tokio::time::timeout(within, self.tasks.wait())
            .await
            .is_err()
        {
            warn_counted!("candidates still resigning when the session closed");
        }
    }
}
