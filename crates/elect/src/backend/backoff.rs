//! Exponential backoff for retrying requests to a coordination service.

use crate::counters::warn_counted;
use std::time::Duration;

/// Waits 50 ms, then twice as long each time, up to 1 s; and tells of a
/// failure that keeps coming back once, not on every retry.
#[derive(Default)]
pub struct Backoff {
    next: Duration,
    warned: bool,
}

impl Backoff {
    pub fn new() -> Self {
        Self::default()
    }

    /// Back to the shortest wait, after a success.
    pub fn reset(&mut self) {
        *self = Backoff::new();
    }

    /// Says `what` as a warning the first time since the last
    /// [`reset`](Self::reset), at debug level after that.
    pub fn warn_once(&mut self, what: impl std::fmt::Display) {
        if std::mem::replace(&mut self.warned, true) {
            tracing::debug!("{what}");
        } else {
            warn_counted!("{what} (retrying with backoff; said once)");
        }
    }

    /// Sleeps for the next delay.
    pub async fn wait(&mut self) {
        let delay = self.next.max(Duration::from_millis(50));
        tokio::time::sleep(delay).await;
        self.next = (delay * 2).min(Duration::from_secs(1));
    }
}
