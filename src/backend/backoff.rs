//! Exponential backoff for retrying requests to a coordination service.

use std::time::Duration;

/// Waits 50 ms, then twice as long each time, up to 1 s.
#[derive(Default)]
pub struct Backoff {
    next: Duration,
}

impl Backoff {
    pub fn new() -> Self {
        Self::default()
    }

    /// Back to the shortest wait, after a success.
    pub fn reset(&mut self) {
        *self = Backoff::new();
    }

    pub async fn wait(&mut self) {
        let delay = self.next.max(Duration::from_millis(50));
        tokio::time::sleep(delay).await;
        self.next = (delay * 2).min(Duration::from_secs(1));
    }
}
