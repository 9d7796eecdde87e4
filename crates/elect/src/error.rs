//! Typed errors of the library.
//!
//! Each variant tells the binary which exit code it maps to (see
//! [`Error::exit_code`]); the messages name what the user can change.

use std::time::Duration;

use crate::backend_kind::Backend;

/// Result alias used across the library.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A boxed error, the source of a failed request.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Everything that can go wrong in `elect`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A configuration value is refused before any I/O.
    #[error("{field}: {reason}")]
    Config {
        /// The field of the election's or the command's configuration,
        /// e.g. `endpoints`; the `elect` binary names the flag of the same
        /// name.
        field: &'static str,
        /// What is wrong with the value.
        reason: String,
    },

    /// The coordination service did not answer within the connect timeout
    /// (or refused at once: every server said no, which waiting would not
    /// change).
    #[error("cannot reach {backend} at {endpoints} (tried for {}): {detail}", humantime::format_duration(*.timeout))]
    Unreachable {
        /// Which backend.
        backend: Backend,
        /// The endpoints tried.
        endpoints: String,
        /// How long it was tried: the connect timeout, or less when
        /// every server refused at once.
        timeout: Duration,
        /// What the last attempt said.
        detail: String,
    },

    /// The TLS handshake with the service failed: a certificate was
    /// refused, by us or by it.
    #[error("{backend}: TLS handshake with {endpoints} failed: {detail}")]
    Tls {
        /// Which backend.
        backend: Backend,
        /// The endpoints tried.
        endpoints: String,
        /// What the TLS layer said.
        detail: String,
    },

    /// The service refused our credentials or lacks a permission we need.
    #[error("{backend}: {detail}")]
    Auth {
        /// Which backend.
        backend: Backend,
        /// What was refused, naming the user or key prefix (never a
        /// password).
        detail: String,
    },

    /// A request to the coordination service failed.
    #[error("{backend}: {action} failed: {source}")]
    Backend {
        /// Which backend.
        backend: Backend,
        /// What we were doing.
        action: &'static str,
        /// The client's error.
        #[source]
        source: BoxError,
    },

    /// The election names a backend this build of the library lacks: its
    /// cargo feature (named as the backend) is off.
    #[error("{backend}: this build of elect has no {backend} backend (cargo feature `{backend}`)")]
    NotBuiltIn {
        /// The backend asked for.
        backend: Backend,
    },

    /// A campaign ended (resigned, or its task stopped) before this
    /// candidate was elected.
    #[error("the campaign ended before this candidate was elected")]
    CampaignEnded,

    /// The session the election ran on ended (its etcd lease or ZooKeeper
    /// session expired or was closed): every election on it ended with it.
    #[error("{backend}: the session these elections shared ended")]
    SessionEnded {
        /// Which backend.
        backend: Backend,
    },

    /// The backend cannot do what was asked (e.g. share one session among
    /// Raft-vote elections, whose peers are the session).
    #[error("{backend}: {what}")]
    Unsupported {
        /// Which backend.
        backend: Backend,
        /// What it cannot do.
        what: &'static str,
    },

    /// The wrapped command could not be started.
    #[error("cannot start {command:?}: {source}")]
    Spawn {
        /// The command, as given.
        command: String,
        /// Why it could not be started.
        #[source]
        source: std::io::Error,
    },

    /// A switchover was refused before anything changed (see
    /// [`crate::steer`]): the election is as it was.
    #[error("switchover in {election:?} refused: {refusal}")]
    SwitchoverRefused {
        /// The election.
        election: String,
        /// Why.
        refusal: crate::steer::Refusal,
    },

    /// Local I/O (leader file, signals, process control) failed.
    #[error("{action}: {source}")]
    Io {
        /// What we were doing.
        action: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// The process exit code of the design's contract: 2 for bad usage or
    /// configuration, 5 for a refused switchover, 1 for everything that
    /// failed at run time.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Config { .. } | Error::NotBuiltIn { .. } => 2,
            Error::SwitchoverRefused { .. } => 5,
            _ => 1,
        }
    }

    pub(crate) fn config(field: &'static str, reason: impl Into<String>) -> Self {
        Error::Config {
            field,
            reason: reason.into(),
        }
    }

    pub(crate) fn backend(
        backend: Backend,
        action: &'static str,
        source: impl Into<BoxError>,
    ) -> Self {
        Error::Backend {
            backend,
            action,
            source: source.into(),
        }
    }

    pub(crate) fn io(action: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            action: action.into(),
            source,
        }
    }
}
