//! Making the current leader visible: lines on stdout, a leader file, and
//! over HTTP with Prometheus metrics.
//!
//! Export only reads [`Leadership`](crate::Leadership) snapshots. A snapshot that tells the
//! same story as the previous one (a renewal moving the deadline) is not
//! reported again; the HTTP side always sees the latest one.

mod exporter;
mod exports;
#[cfg(feature = "http")]
pub mod http;
pub(crate) mod leader_file;
pub mod lines;
#[cfg(feature = "metrics")]
pub mod metrics;
#[cfg(not(feature = "metrics"))]
mod no_metrics;
mod stdout;
mod view;

pub use exporter::{OutputConfig, run};
pub use exports::{Exports, Running};
pub use leader_file::check as check_leader_file;
#[cfg(feature = "metrics")]
pub use metrics::Metrics;
#[cfg(not(feature = "metrics"))]
pub use no_metrics::Metrics;
pub use view::{Context, Exported, Format};
