//! `elect`: leader election as a library and a command-line tool.
//!
//! One interface, several ways to decide who leads. A backend publishes
//! [`Leadership`](leadership::Leadership) snapshots on a
//! `tokio::sync::watch` channel, each with a local leadership **deadline**;
//! everything else reads only those snapshots:
//!
//! ```text
//!             +-------------------- elect (binary) --------------------+
//!  CLI args ->| cli: clap structs -> validated Config (no I/O yet)      |
//!             +----------------------------+---------------------------+
//!                                          | Config
//!                     +--------------------v--------------------+
//!                     |  backend: etcd           (library)       |
//!                     |  each: campaign / resign / observe       |
//!                     +--------------------+--------------------+
//!                                          | tokio::sync::watch<Leadership>
//!               +--------------------------+---------------------------+
//!               v                                                      v
//!      supervise (run CMD only                                 export (stdout lines,
//!      while leader; kill on loss)                             leader file)
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
//! 6. nothing is left behind: no keys, leases or processes.

pub mod backend;
pub mod config;
pub mod error;
pub mod export;
pub mod leadership;
pub mod supervise;

pub use error::{Error, Result};
pub use leadership::{Event, Leadership};
