//! Which service decides who leads: the one name of a backend that the
//! configuration, the errors, the output lines, the metrics and the
//! command line all use.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// Which service decides who leads.
///
/// Its name (`etcd`, `zk`, `raft`) is what [`Display`](fmt::Display)
/// prints, [`FromStr`] reads, serde writes and reads, and `ELECT_BACKEND`
/// takes.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// Lease-bound keys in etcd, in the layout of Go's `concurrency.Election`.
    Etcd,
    /// Ephemeral-sequential znodes in ZooKeeper, named as Curator's `LeaderLatch`.
    Zk,
    /// The `elect` peers elect a leader among themselves with Raft's vote.
    Raft,
}

impl Backend {
    /// Every backend, in the order the tool lists them.
    pub const ALL: [Backend; 3] = [Backend::Etcd, Backend::Zk, Backend::Raft];

    /// The name used in output lines, metrics and `ELECT_BACKEND`.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Etcd => "etcd",
            Backend::Zk => "zk",
            Backend::Raft => "raft",
        }
    }

    /// Whether this build of the library has the backend (its cargo
    /// feature, named as the backend, is on).
    pub fn is_built_in(self) -> bool {
        match self {
            Backend::Etcd => cfg!(feature = "etcd"),
            Backend::Zk => cfg!(feature = "zk"),
            Backend::Raft => cfg!(feature = "raft"),
        }
    }

    /// Where the service is looked for when no endpoints are given (none
    /// for raft: the peers must be named).
    pub fn default_endpoints(self) -> &'static str {
        match self {
            Backend::Etcd => "127.0.0.1:2379",
            Backend::Zk => "127.0.0.1:2181",
            Backend::Raft => "",
        }
    }

    /// The TTL used unless one is set: 10 s for etcd and ZooKeeper, 1 s
    /// (the election timeout) for raft.
    pub fn default_ttl(self) -> Duration {
        match self {
            Backend::Etcd | Backend::Zk => Duration::from_secs(10),
            Backend::Raft => Duration::from_secs(1),
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is no backend's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a backend: etcd, zk or raft")]
pub struct UnknownBackend(pub String);

impl FromStr for Backend {
    type Err = UnknownBackend;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Backend::ALL
            .into_iter()
            .find(|b| b.name() == text.trim())
            .ok_or_else(|| UnknownBackend(text.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_text_and_serde() {
        for b in Backend::ALL {
            assert_eq!(b.to_string().parse::<Backend>(), Ok(b));
            let json = serde_json::to_string(&b).unwrap();
            assert_eq!(json, format!("\"{b}\""));
            assert_eq!(serde_json::from_str::<Backend>(&json).unwrap(), b);
        }
        assert_eq!(
            "consul".parse::<Backend>().unwrap_err().to_string(),
            "\"consul\" is not a backend: etcd, zk or raft"
        );
    }
}
