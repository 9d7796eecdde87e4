//! Validated configuration of an election, for the library and the CLI.
//!
//! An [`ElectionConfig`] is built by one constructor per backend
//! ([`ElectionConfig::etcd`], [`ElectionConfig::zk`],
//! [`ElectionConfig::raft`]), or from a [`Service`] (what a command line's
//! `--backend` and `--endpoints` give, through [`Service::parse`]) with
//! [`ElectionConfig::new`], and refined with `with_*` methods. Every value
//! is checked once, there, into its type (the service's in
//! [`EtcdEndpoints`], [`ZkEnsemble`] or [`RaftPeers`]), so the backends
//! never see a malformed endpoint or election name, never parse one again,
//! and never half-create anything because of one. What only the whole
//! configuration can tell ([`ElectionConfig::validate`]: `https://`
//! endpoints without TLS material; a Raft candidate's id among the peers)
//! is checked where an election starts, before any I/O. Errors
//! are [`Error::Config`](crate::Error::Config) naming the field (`endpoints`, `election`, `id`,
//! `ttl`, `connect_timeout`, `data_dir`); the `elect` binary reports them as
//! the flag of the same name.
//!
//! # Bounds
//!
//! | field | etcd | zk | raft |
//! |---|---|---|---|
//! | `ttl` | 1 s to 9,000,000,000 s (etcd's maximum lease TTL), whole seconds | 100 ms to 2^31-1 ms (the server clamps it to 2 to 20 ticks) | 10 ms to 24 h |
//! | `connect_timeout` | 10 ms to 24 h | same | same |
//!
//! ```
//! use std::time::Duration;
//! use elect::config::ElectionConfig;
//!
//! let cfg = ElectionConfig::etcd(["127.0.0.1:2379"], "jobs")?
//!     .with_id("node-a")?
//!     .with_ttl(Duration::from_secs(5))?;
//! assert_eq!(cfg.service().to_string(), "http://127.0.0.1:2379");
//!
//! let err = ElectionConfig::zk("127.0.0.1:2181", "jobs").unwrap_err();
//! assert_eq!(err.to_string(), "election: \"jobs\" is not an absolute ZooKeeper path (it must start with '/')");
//! # Ok::<(), elect::Error>(())
//! ```

mod duration;
mod election;
mod limits;
mod service;

pub use duration::parse_duration;

pub use election::{DEFAULT_CONNECT_TIMEOUT, ElectionConfig, default_id};
pub use limits::ETCD_MAX_TTL_SECS;
pub use service::{EtcdEndpoints, MAX_ID_BYTES, RaftPeer, RaftPeers, Service, ZkEnsemble};
