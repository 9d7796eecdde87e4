//! Typed errors of the library.
//!
//! Each variant tells the binary which exit code it maps to (see
//! [`Error::exit_code`]); the messages name what the user can change.

use std::time::Duration;

/// Result alias used across the library.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in `elect`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A flag or variable holds a value we refuse before any I/O.
    #[error("{flag}: {reason}")]
    Usage {
        /// The flag as the user types it, e.g. `--endpoints`.
        flag: &'static str,
        reason: String,
    },

    /// The coordination service did not answer within the connect timeout.
    #[error("cannot reach {backend} at {endpoints} within {}: {detail}", humantime::format_duration(*.timeout))]
    Unreachable {
        backend: &'static str,
        endpoints: String,
        timeout: Duration,
        detail: String,
    },

    /// A request to the coordination service failed.
    #[error("{backend}: {action} failed: {detail}")]
    Backend {
        backend: &'static str,
        action: &'static str,
        /// `etcd_client::Error` exposes no `source()`, so its text is kept.
        detail: String,
    },

    /// The wrapped command could not be started.
    #[error("cannot start {command:?}: {source}")]
    Spawn {
        command: String,
        #[source]
        source: std::io::Error,
    },

    /// Local I/O (leader file, signals, process control) failed.
    #[error("{action}: {source}")]
    Io {
        action: String,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// The process exit code of the design's contract: 2 for bad usage or
    /// configuration, 1 for everything that failed at run time.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Usage { .. } => 2,
            _ => 1,
        }
    }

    pub(crate) fn usage(flag: &'static str, reason: impl Into<String>) -> Self {
        Error::Usage {
            flag,
            reason: reason.into(),
        }
    }

    /// The service of `cfg` did not answer within its connect timeout.
    pub(crate) fn unreachable(
        backend: &'static str,
        cfg: &crate::config::ElectionConfig,
        detail: impl std::fmt::Display,
    ) -> Self {
        Error::Unreachable {
            backend,
            endpoints: cfg.endpoints.join(","),
            timeout: cfg.connect_timeout,
            detail: detail.to_string(),
        }
    }

    pub(crate) fn io(action: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            action: action.into(),
            source,
        }
    }
}
