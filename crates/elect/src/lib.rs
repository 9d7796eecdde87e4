//! Leader election for Rust services: campaign in an etcd, ZooKeeper or
//! Raft-vote election, learn that you lead with a **fencing token** and a
//! local **deadline**, and stop leading on your own by that deadline.
//!
//! `elect` is also a command-line tool (a sidecar, a wrapper that runs a
//! command only on the leader); this crate is the library it is built on.
//! The [book](https://github.com/elect-rs/elect/tree/main/docs/src) has
//! the guides; this page is the library guide's short form.
//!
//! # Using it
//!
//! Pick the backends you use; the others are not compiled (`etcd` needs
//! `protoc` at build time, `zk` and `raft` do not):
//!
//! ```toml
//! [dependencies]
//! elect = { version = "0.1", default-features = false, features = ["etcd"] }
//! tokio = { version = "1", features = ["macros", "rt-multi-thread", "signal"] }
//! ```
//!
//! A service that does leader-only work, and resigns on shutdown so the
//! next candidate takes over in milliseconds, not a TTL:
//!
//! ```no_run
//! use std::time::Duration;
//! use elect::{backend, config::ElectionConfig, work::WorkWatch};
//!
//! # async fn leader_only_work(_token: u64) {}
//! #[tokio::main]
//! async fn main() -> elect::Result<()> {
//!     let cfg = ElectionConfig::etcd(["127.0.0.1:2379"], "jobs")? // or ::zk, ::raft
//!         .with_id("node-a")?
//!         .with_ttl(Duration::from_secs(10))?;
//!     let mut campaign = backend::campaign(&cfg, WorkWatch::none()).await?;
//!     loop {
//!         let term = campaign.elected().await?;
//!         // We lead. Write under term.token(); stop at any loss, and at
//!         // the local deadline at the latest.
//!         let shutting_down = tokio::select! {
//!             () = leader_only_work(term.token()) => false,
//!             () = term.lost() => false,
//!             _ = tokio::signal::ctrl_c() => true,
//!         };
//!         if shutting_down {
//!             return term.resign().await;
//!         }
//!         campaign = term.into_campaign(); // and campaign for a later term
//!     }
//! }
//! ```
//!
//! - [`config::ElectionConfig`] is validated once, when built; a wrong
//!   value is [`Error::Config`] naming the field.
//! - [`backend::campaign`] takes part, [`backend::observe`] follows,
//!   [`backend::leader`] reads once. A `backend::Session` hosts many
//!   elections on one etcd lease or ZooKeeper session.
//! - [`supervise::run`] runs a command only while leading, under a
//!   watchdog process that kills its whole tree by the deadline even if
//!   your process is frozen or killed; a host binary calls
//!   [`supervise::dispatch_hidden`] first in `main`.
//! - [`steer`] says who *should* lead: [`backend::switchover`] moves
//!   leadership to a named candidate, [`backend::line`] lists the line,
//!   and a priority ([`config::ElectionConfig::with_priority`],
//!   changeable with [`backend::Campaign::set_priority`]) makes the
//!   leader hand over to a higher one after a failback delay.
//! - [`health`] gates leadership on a check of the host
//!   ([`config::ElectionConfig::with_health`]): an unhealthy leader hands
//!   over to a healthy candidate.
//! - [`export`] serves the leader as stdout lines, a file, HTTP and
//!   Prometheus metrics; `once::PeriodicJob` (etcd and ZooKeeper) runs a
//!   command once per period across hosts (`elect run --once`), on
//!   [`periodic`]'s decisions and the backend's `backend::CompletionRecords`.
//!
//! # What it guarantees
//!
//! - **A local deadline.** A snapshot says "this process leads" only
//!   before its deadline: the send time of the last renewal the service
//!   acknowledged, plus the TTL, minus a margin (2.5% of the TTL for clock
//!   rate error, plus 20 ms). Past it, [`backend::Term::lost`] fires
//!   without hearing from the service: a partitioned leader steps down on
//!   its own before the service could let anyone else lead. The clock is
//!   `CLOCK_BOOTTIME`, which counts through a suspend.
//! - **Fencing tokens that only grow** within an election (etcd: the
//!   leader key's create revision; ZooKeeper: the leader znode's czxid;
//!   Raft-vote: the term, with a data directory).
//! - **Compatible layouts**: etcd's keys are Go's `concurrency.Election`'s
//!   (`etcdctl elect` shares the election), ZooKeeper's znodes Curator's
//!   `LeaderLatch`'s.
//! - **Resignation** on [`backend::Campaign::resign`] and on drop; nothing
//!   left behind (keys, leases, znodes).
//! - The decision code of each backend is model-checked as it runs in
//!   production, and a fault suite runs it against real servers killed,
//!   frozen, cut off and slowed (the book's *Design* and *Results*).
//!
//! # What it does not guarantee
//!
//! - **That your in-process work stops.** The library tells you, by the
//!   deadline at the latest, that you may no longer lead; code that does
//!   not look (a blocking call, a write already sent) goes on. Work that
//!   must stop goes in a command under [`supervise::run`], which kills it;
//!   a store your leader writes to should check the fencing token and
//!   refuse older ones, the only protection against a write already in
//!   flight.
//! - **Against an operator.** Revoking the etcd lease or deleting the
//!   leader's znode ends leadership at once on the server; the leader
//!   learns a round trip later. The token covers that window.
//! - **Against clocks that run more than 2% apart** over a TTL, or a
//!   machine that stops its boot clock. Like client-go's leader election,
//!   the deadline is only as good as the clocks' rates.
//! - **Liveness under every fault**: a leader that cannot renew steps
//!   down even when nobody else can take over (safety first).
//! - Raft-vote without a data directory may repeat a term after a restart
//!   (its tokens then repeat too): give each peer one.

#![warn(missing_docs)]
// Helpers the backends share (credentials, backoff, error constructors)
// go unused in builds that leave some backends out.
#![cfg_attr(
    not(all(feature = "etcd", feature = "zk", feature = "raft")),
    allow(dead_code)
)]

pub mod backend;
pub mod backend_kind;
pub mod clock;
pub mod config;
pub mod counters;
pub mod credentials;
pub mod error;
pub mod export;
pub mod health;
pub mod input;
pub mod leadership;
#[cfg(test)]
mod model_check;
#[cfg(any(feature = "etcd", feature = "zk"))]
pub mod once;
pub mod periodic;
pub mod steer;
pub mod supervise;
pub mod work;

pub use backend_kind::Backend;
pub use clock::BootInstant;
pub use error::{Error, Result};
pub use leadership::{Event, Leadership};
