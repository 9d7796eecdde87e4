//! What each backend accepts as an election's name and as a TTL, checked
//! before anything is sent.

use std::time::Duration;

use super::service::zk_path;
use crate::backend_kind::Backend;
use crate::clock::MAX_DURATION;
use crate::error::{Error, Result};

/// etcd's maximum lease TTL (`lease.MaxLeaseTTL`), in seconds.
pub const ETCD_MAX_TTL_SECS: u64 = 9_000_000_000;

/// Checks an election's name as `backend` names elections.
pub(super) fn election_for(backend: Backend, election: &str) -> Result<String> {
    match backend {
        Backend::Etcd => etcd_election(election),
        Backend::Zk => zk_path(election),
        Backend::Raft => raft_cluster(election),
    }
}

/// Checks an etcd election name (the key prefix Go's `NewElection` takes).
pub(crate) fn etcd_election(name: &str) -> Result<String> {
    const FLAG: &str = "election";
    if name.is_empty() {
        return Err(Error::config(FLAG, "must not be empty"));
    }
    if name.chars().any(char::is_control) {
        return Err(Error::config(
            FLAG,
            format!("{name:?} contains control characters"),
        ));
    }
    if name.ends_with('/') {
        return Err(Error::config(
            FLAG,
            format!(
                "{name:?} ends with '/'; give the name without it (keys are <name>/<lease id>)"
            ),
        ));
    }
    Ok(name.to_owned())
}

/// Checks a ZooKeeper session timeout: ZooKeeper counts in milliseconds.
pub(crate) fn zk_ttl(ttl: Duration) -> Result<Duration> {
    ttl_at_least(
        ttl,
        Duration::from_millis(100),
        "is too short for a ZooKeeper session",
    )?;
    if ttl > Duration::from_secs(i32::MAX as u64 / 1000) {
        return Err(Error::config(
            "ttl",
            format!(
                "{} is too long for a ZooKeeper session (at most {}s)",
                humantime::format_duration(ttl),
                i32::MAX / 1000
            ),
        ));
    }
    Ok(ttl)
}

/// Checks a raft cluster name (`--election`).
pub(crate) fn raft_cluster(name: &str) -> Result<String> {
    if name.is_empty() || name.chars().any(char::is_control) {
        return Err(Error::config(
            "election",
            format!("{name:?} is not a cluster name"),
        ));
    }
    Ok(name.to_owned())
}

/// Checks a raft election timeout.
pub(crate) fn raft_ttl(ttl: Duration) -> Result<Duration> {
    ttl_at_least(
        ttl,
        Duration::from_millis(10),
        "is below the 10ms minimum election timeout",
    )?;
    if ttl > MAX_DURATION {
        return Err(Error::config(
            "ttl",
            format!(
                "{} is above the 24h maximum election timeout",
                humantime::format_duration(ttl)
            ),
        ));
    }
    Ok(ttl)
}

/// `--ttl` below `min` is refused with "<ttl> <why>".
fn ttl_at_least(ttl: Duration, min: Duration, why: &str) -> Result<()> {
    if ttl < min {
        return Err(Error::config(
            "ttl",
            format!("{} {why}", humantime::format_duration(ttl)),
        ));
    }
    Ok(())
}

/// Checks an etcd TTL: leases are granted in whole seconds, at least one.
pub(crate) fn etcd_ttl(ttl: Duration) -> Result<Duration> {
    ttl_at_least(
        ttl,
        Duration::from_secs(1),
        "is below etcd's lease granularity of 1s",
    )?;
    if ttl.as_secs() > ETCD_MAX_TTL_SECS {
        return Err(Error::config(
            "ttl",
            format!(
                "{} is above etcd's maximum lease TTL of {ETCD_MAX_TTL_SECS}s",
                humantime::format_duration(ttl)
            ),
        ));
    }
    if ttl.subsec_nanos() != 0 {
        return Err(Error::config(
            "ttl",
            format!(
                "{}: etcd leases are granted in whole seconds",
                humantime::format_duration(ttl)
            ),
        ));
    }
    Ok(ttl)
}
