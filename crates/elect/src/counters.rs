//! What the backends do, counted as data: renewals answered, errors met,
//! candidates woken by a change of their predecessor, successors that led
//! without a read, Raft-vote's durable writes and how long they took. The
//! backends write these counts; the metrics export and `elect compare`
//! read them (so they stand below both). The logs stay for people and may
//! change their wording freely.
//!
//! The counts are process-wide totals over every campaign and
//! observation, as Prometheus client libraries keep theirs.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counts of what the backends did in this process.
#[derive(Debug, Default)]
pub struct Counters {
    renewals: AtomicU64,
    errors: AtomicU64,
    wakeups: AtomicU64,
    led_without_read: AtomicU64,
    durable_writes: AtomicU64,
    durable_write_nanos: AtomicU64,
    slow_durable_writes: AtomicU64,
}

/// This process's counts.
pub static PROCESS: Counters = Counters {
    renewals: AtomicU64::new(0),
    errors: AtomicU64::new(0),
    wakeups: AtomicU64::new(0),
    led_without_read: AtomicU64::new(0),
    durable_writes: AtomicU64::new(0),
    durable_write_nanos: AtomicU64::new(0),
    slow_durable_writes: AtomicU64::new(0),
};

/// This process's counts, read at once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Renewals the service answered: etcd keepalives, ZooKeeper syncs
    /// that moved the session lease, Raft heartbeat rounds a majority
    /// acknowledged.
    pub renewals: u64,
    /// Requests that failed and connections that were lost (each is also
    /// logged as a warning).
    pub errors: u64,
    /// Waiting candidates woken because their predecessor changed; with
    /// each candidate watching only its predecessor, about one per leader
    /// change (etcd and ZooKeeper).
    pub wakeups: u64,
    /// Terms of ours that began at the event that ended our
    /// predecessor's, with no request of our own after it (etcd: the
    /// resigning leader touched our key; ZooKeeper: the next in line saw
    /// the leader's znode deleted).
    pub led_without_read: u64,
    /// Raft-vote: writes of term and vote, each ending in an fsync.
    pub durable_writes: u64,
    /// Raft-vote: the time those writes took, in all.
    pub durable_write_time: std::time::Duration,
    /// Raft-vote: those writes that took longer than a quarter of the
    /// election timeout, long enough to cost elections (see
    /// `raft::store::Persister`).
    pub slow_durable_writes: u64,
}

impl Counters {
    /// The counts now.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            renewals: self.renewals.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
            wakeups: self.wakeups.load(Ordering::Relaxed),
            led_without_read: self.led_without_read.load(Ordering::Relaxed),
            durable_writes: self.durable_writes.load(Ordering::Relaxed),
            durable_write_time: std::time::Duration::from_nanos(
                self.durable_write_nanos.load(Ordering::Relaxed),
            ),
            slow_durable_writes: self.slow_durable_writes.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn renewed(&self) {
        self.renewals.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn failed(&self) {
        self.errors.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn woken(&self) {
        self.wakeups.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn led_without_read(&self) {
        self.led_without_read.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn wrote_durably(&self, took: std::time::Duration, slow: bool) {
        self.durable_writes.fetch_add(1, Ordering::Relaxed);
        self.durable_write_nanos
            .fetch_add(took.as_nanos() as u64, Ordering::Relaxed);
        if slow {
            self.slow_durable_writes.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// This process's counts, read at once.
pub fn snapshot() -> Snapshot {
    PROCESS.snapshot()
}

/// Logs a backend's warning and counts it as an error.
macro_rules! warn_counted {
    ($($arg:tt)*) => {{
        $crate::counters::PROCESS.failed();
        ::tracing::warn!($($arg)*)
    }};
}
pub(crate) use warn_counted;
