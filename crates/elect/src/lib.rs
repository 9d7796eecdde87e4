//! `elect`: leader election as a library and a command-line tool.
//!
//! One interface, three ways to decide who leads. A backend publishes
//! [`Leadership`] snapshots on a `tokio::sync::watch` channel, each with a
//! local leadership **deadline**; everything else reads only those
//! snapshots:
//!
//! ```text
//!   elect (binary): clap -> config::ElectionConfig / ChildConfig -> library calls
//!                                   |
//!   +-------------------------------v---------------------------------+
//!   | config: ElectionConfig::etcd | ::zk | ::raft, validated once      |
//!   |                                                                  |
//!   | backend:   etcd                zk                  raft          |
//!   |   lease-bound keys,   ephemeral-sequential  Raft's vote among    |
//!   |   Go's Election       znodes, Curator       the peers (PreVote,  |
//!   |   layout              LeaderLatch naming    CheckQuorum, lease)  |
//!   |   campaign / resign / observe / leader -> Campaign, Observation  |
//!   |                           |                                      |
//!   |      watch::Receiver<Leadership> (leader, token, deadline)       |
//!   |            +--------------+------------------+                   |
//!   |            v                                 v                   |
//!   | supervise: run CMD only while     export: stdout lines (text or |
//!   |   leading, under a watchdog in    JSON), leader file, HTTP       |
//!   |   its own session that kills      /leader /healthz /readyz,      |
//!   |   the group by the deadline       Prometheus /metrics            |
//!   +------------------------------------------------------------------+
//!
//!   elect-raft: the Raft-vote state machine, sans I/O, that the raft
//!        backend drives (and the simulator and the model check, unchanged)
//!   elect-lab: real etcd / ZooKeeper members (processes or containers),
//!        faults on them, a TCP fault proxy, a fenced store and a history
//!        checker: what `elect lab`, `elect compare` and the tests run on
//!   elect-sim: a deterministic simulator and the classical election
//!        algorithms (ring, Chang-Roberts, Hirschberg-Sinclair, Peterson,
//!        bully and its variants, invitation, and the Raft core) as sans-IO
//!        processes: `elect simulate`
//!   elect-compare: the scenarios of `elect compare` on every backend
//! ```
//!
//! Campaigning in a few lines (see `examples/` for whole programs):
//!
//! ```no_run
//! # async fn demo() -> elect::Result<()> {
//! use std::time::Duration;
//! use elect::{backend, config::ElectionConfig};
//!
//! let cfg = ElectionConfig::etcd(["127.0.0.1:2379"], "jobs")?
//!     .with_id("node-a")?
//!     .with_ttl(Duration::from_secs(5))?;
//! let campaign = backend::campaign(&cfg, elect::work::WorkWatch::none()).await?;
//! let term = campaign.elected().await?;
//! tokio::select! {
//!     // Leader-only work, writing under `term.token()`...
//!     () = std::future::pending::<()>() => {}
//!     // ...stopped at any loss, and at the local deadline at the latest.
//!     () = term.lost() => {}
//! }
//! term.resign().await?;
//! # Ok(()) }
//! ```
//!
//! Safety rules every backend keeps:
//! 1. act as leader only before the local deadline: the send time of the
//!    last acknowledged renewal plus the granted TTL, minus a margin;
//! 2. on stepping down, report it at once and have the work's whole process
//!    group dead no later than the deadline;
//! 3. claim leadership only after confirming our own key is still ours;
//! 4. fencing tokens only grow and are exported wherever leadership is;
//! 5. a clean exit resigns, so the successor takes over in round trips;
//! 6. nothing is left behind: no keys, leases or processes;
//! 7. the command's whole tree is dead before leadership could pass to
//!    anyone, however `elect`, the watchdog or their process group are
//!    signalled, stopped or killed (see [`supervise`]).

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
pub mod leadership;
pub mod once;
pub mod supervise;
pub mod work;

pub use backend_kind::Backend;
pub use clock::BootInstant;
pub use error::{Error, Result};
pub use leadership::{Event, Leadership};
