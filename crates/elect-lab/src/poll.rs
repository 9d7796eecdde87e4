//! Waiting for a condition the lab cannot be told about: probe it until it
//! holds, for a bounded time, and give up at once on an interrupt.

use std::time::{Duration, Instant};

use crate::interrupt;

/// Polls `probe` every 10 ms until it returns `Some`, for at most `within`
/// (and not after an [`interrupt`]).
pub fn poll<T>(within: Duration, mut probe: impl FnMut() -> Option<T>) -> Option<T> {
    let until = Instant::now() + within;
    loop {
        if let Some(v) = probe() {
            return Some(v);
        }
        if Instant::now() >= until || interrupt::requested() {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
