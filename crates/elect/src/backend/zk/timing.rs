//! The ZooKeeper timing the disconnection rule assumes, read where the
//! servers let us and checked against the session timeout at start.
//!
//! The rule (see [`lease`](super::lease)) counts a sync answered by the
//! ZooKeeper leader as that leader's touch of our session. A ZooKeeper
//! leader cut off from its quorum steps down only once its followers have
//! been silent for `syncLimit` ticks, checked once a tick; if the quorum
//! elected a successor sooner (followers that restarted elect at once),
//! the old leader goes on answering syncs for up to `(syncLimit + 1) x
//! tickTime` into the successor's term (ZOOKEEPER-1675), while the
//! successor's session tracker counts our session from its own start.
//! The rule's slack for a late touch is `Q = timeout / 3`: the proven
//! instant always lies at least `Q` before the latest answer. So the
//! argument needs `(syncLimit + 1) x tickTime <= timeout / 3`.
//!
//! `tickTime` and `syncLimit` are read with the `conf` four-letter word
//! on each member's plain client port, for half a second; servers that do
//! not allow it (`4lw.commands.whitelist`), or speak only TLS, cannot be
//! asked, and the assumption is then the user's to check (said at start).

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tracing::{info, warn};

/// How long a member is given to answer `conf`.
const ASK_WITHIN: Duration = Duration::from_millis(500);

/// A member's `tickTime` and `syncLimit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    pub tick: Duration,
    pub sync_limit: u32,
}

impl Timing {
    /// How long a replaced ZooKeeper leader may still answer syncs:
    /// `(syncLimit + 1) x tickTime`.
    pub fn deposed_leader_window(self) -> Duration {
        self.tick * (self.sync_limit + 1)
    }
}

/// `tickTime` and `syncLimit` from a `conf` answer (`key=value` lines);
/// `None` when either is missing (a standalone server has no
/// `syncLimit`) or the server refused the command.
pub fn parse_conf(text: &str) -> Option<Timing> {
    let value = |key: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(key)?.strip_prefix('='))
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    Some(Timing {
        tick: Duration::from_millis(value("tickTime")?),
        sync_limit: u32::try_from(value("syncLimit")?).ok()?,
    })
}

/// The warning for `timing` against a session of `timeout`, if the
/// deposed leader's window exceeds the rule's slack.
pub fn too_slow_for(timing: Timing, timeout: Duration) -> Option<String> {
    let window = timing.deposed_leader_window();
    let slack = super::lease::settle_for(timeout);
    (window > slack).then(|| {
        format!(
            "ZooKeeper's tickTime {} and syncLimit {}: a ZooKeeper leader cut off from its \
             quorum may answer syncs for up to (syncLimit + 1) x tickTime = {} after it is \
             replaced (ZOOKEEPER-1675), longer than the third of the session timeout ({}) that \
             elect's disconnection rule allows; a leader riding out a disconnection could \
             then outlast its session. Raise --ttl to at least {}, or lower syncLimit x tickTime",
            humantime::format_duration(timing.tick),
            timing.sync_limit,
            humantime::format_duration(window),
            humantime::format_duration(slack),
            humantime::format_duration(window * 3),
        )
    })
}

/// Asks every member of `connect` (a connect string) for its timing, all
/// at once, and says at start what it means for a session of `timeout`.
/// Never fails: what cannot be read is said and left to the user.
pub async fn check(connect: String, timeout: Duration, tls: bool) {
    if tls {
        info!(
            "ZooKeeper's tickTime and syncLimit are not read over TLS: elect assumes \
             (syncLimit + 1) x tickTime <= a third of the session timeout (ZOOKEEPER-1675)"
        );
        return;
    }
    let hosts = connect.split('/').next().unwrap_or_default();
    let mut asked = tokio::task::JoinSet::new();
    for host in hosts.split(',').map(str::trim).filter(|h| !h.is_empty()) {
        let host = host.to_owned();
        asked.spawn(async move {
            let conf = tokio::time::timeout(ASK_WITHIN, conf(&host)).await;
            (
                host,
                conf.ok().and_then(|c| c.ok()).and_then(|c| parse_conf(&c)),
            )
        });
    }
    let mut read = Vec::new();
    let mut unread = Vec::new();
    for (host, timing) in asked.join_all().await {
        match timing {
            Some(timing) => read.push(timing),
            None => unread.push(host),
        }
    }
    // The slowest member decides: any of them may be the leader.
    let slowest = read.iter().max_by_key(|t| t.deposed_leader_window());
    if let Some(&timing) = slowest {
        match too_slow_for(timing, timeout) {
            Some(warning) => warn!("{warning}"),
            None => info!(
                "ZooKeeper's (syncLimit + 1) x tickTime, {}, is within a third of the session \
                 timeout, as the disconnection rule needs",
                humantime::format_duration(timing.deposed_leader_window())
            ),
        }
    }
    if !unread.is_empty() {
        info!(
            "could not read tickTime and syncLimit from {} (the conf four-letter word is not \
             allowed, or no answer in {ASK_WITHIN:?}): elect assumes (syncLimit + 1) x tickTime \
             <= a third of the session timeout (ZOOKEEPER-1675)",
            unread.join(", ")
        );
    }
}

/// The `conf` four-letter word's answer from `host` (`host:port`).
async fn conf(host: &str) -> std::io::Result<String> {
    let mut stream = tokio::net::TcpStream::connect(host).await?;
    stream.write_all(b"conf").await?;
    let mut text = String::new();
    stream.read_to_string(&mut text).await?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONF: &str = "clientPort=2181\nsecureClientPort=-1\ntickTime=2000\nmaxClientCnxns=60\n\
                        minSessionTimeout=4000\nmaxSessionTimeout=40000\nserverId=1\ninitLimit=10\n\
                        syncLimit=5\nelectionAlg=3\n";

    #[test]
    fn conf_gives_tick_and_sync_limit() {
        let timing = parse_conf(CONF).unwrap();
        assert_eq!(
            timing,
            Timing {
                tick: Duration::from_secs(2),
                sync_limit: 5
            }
        );
        assert_eq!(timing.deposed_leader_window(), Duration::from_secs(12));
        let refused = "conf is not executed because it is not in the whitelist.\n";
        assert_eq!(parse_conf(refused), None);
        assert_eq!(parse_conf("tickTime=2000\n"), None, "standalone");
    }

    #[test]
    fn the_window_must_fit_a_third_of_the_session() {
        let production = parse_conf(CONF).unwrap();
        let warning = too_slow_for(production, Duration::from_secs(30)).unwrap();
        assert!(warning.contains("= 12s"), "{warning}");
        assert!(warning.contains("at least 36s"), "{warning}");
        assert_eq!(too_slow_for(production, Duration::from_secs(36)), None);
        let lab = Timing {
            tick: Duration::from_millis(200),
            sync_limit: 2,
        };
        assert_eq!(too_slow_for(lab, Duration::from_secs(2)), None);
    }
}
