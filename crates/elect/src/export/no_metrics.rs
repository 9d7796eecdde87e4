//! What the exporters call on the metrics when the `metrics` feature is
//! off: the same calls, counting nothing, so the rest of `export` has no
//! feature switches of its own.

use std::time::Duration;

use crate::clock::BootInstant;
use crate::leadership::Leadership;

/// Metrics that count nothing (the `metrics` feature is off).
#[derive(Debug, Default)]
pub struct Metrics;

impl Metrics {
    /// Nothing to count.
    pub fn new() -> Metrics {
        Metrics
    }

    /// Nothing to count.
    pub fn with_containment(_containment: Option<&'static str>) -> Metrics {
        Metrics
    }

    /// Counts nothing.
    pub fn record(&self, _previous: &Leadership, _next: &Leadership, _now: BootInstant) {}

    /// Counts nothing.
    pub fn set_healthy(&self, _healthy: bool) {}

    /// Counts nothing.
    pub fn record_handover(&self, _took: Duration) {}
}
