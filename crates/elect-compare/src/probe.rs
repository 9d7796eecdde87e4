//! What the ensemble itself can tell about an election: how many
//! candidates are queued (keys under the prefix, children of the znode),
//! and the server-side counters behind wake-ups and requests per leader
//! change. Read from the servers, so the peers' tools are measured exactly
//! as elect is.

use elect_lab::bridge::block_on;
use std::cell::RefCell;
use std::time::Duration;

use anyhow::Context as _;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use elect_lab::{etcd, zk};

use elect::Backend;

/// Cluster-wide counters at one instant.
#[derive(Clone, Copy, Debug, Default)]
pub struct Counters {
    /// Watch notifications delivered: etcd's `etcd_debugging_mvcc_events_total`
    /// (events sent to watchers); ZooKeeper's watches triggered
    /// (`mntr`'s `zk_sum_node_*_watch_count`).
    pub notifications: f64,
    /// Requests the servers received: etcd's
    /// `grpc_server_msg_received_total`; ZooKeeper's `zk_packets_received`.
    pub requests: f64,
}

impl Counters {
    /// What was counted since `before`; `None` where a counter went back
    /// (a member restarted, or did not answer now): no difference then
    /// says what happened between.
    pub fn since(self, before: Counters) -> Option<Counters> {
        let counted = Counters {
            notifications: self.notifications - before.notifications,
            requests: self.requests - before.requests,
        };
        (counted.notifications >= 0.0 && counted.requests >= 0.0).then_some(counted)
    }

    /// These counts less what `rate` (counts per second) accounts for in
    /// `elapsed`, never below zero: a window's counts net of the steady
    /// state's (every session's or lease's renewals).
    pub fn net_of(self, rate: Counters, elapsed: Duration) -> Counters {
        let secs = elapsed.as_secs_f64();
        Counters {
            notifications: (self.notifications - rate.notifications * secs).max(0.0),
            requests: (self.requests - rate.requests * secs).max(0.0),
        }
    }

    /// These counts, counted over `elapsed`, per second.
    pub fn per_second(self, elapsed: Duration) -> Counters {
        let secs = elapsed.as_secs_f64().max(1e-9);
        Counters {
            notifications: self.notifications / secs,
            requests: self.requests / secs,
        }
    }
}

/// How long the steady state is counted before a scale point's measured
/// handovers: renewals are a rate, paid whether or not the leader
/// changes, and at N = 1000 they outnumber a change's own requests
/// several times over in the time a handover takes. Counting them apart
/// says what a change costs.
pub const IDLE_WINDOW: Duration = Duration::from_secs(3);

/// Probes one ensemble.
pub struct Probe {
    backend: Backend,
    /// Where the ZooKeeper client connects (plain ports).
    endpoints: String,
    /// Plain-HTTP (etcd) or plain (ZooKeeper) addresses of the members,
    /// for metrics, counts and four-letter words.
    members: Vec<String>,
    /// A secured etcd: counting goes through a TLS client as root, since
    /// the JSON gateway is behind TLS and auth.
    etcd: Option<etcd_client::Client>,
    /// ZooKeeper: a client, replaced after any failure (a member killed
    /// under it may leave it stuck or its session expired).
    zk: Option<RefCell<Option<zookeeper_client::Client>>>,
}

impl Probe {
    /// For the etcd or ZooKeeper ensemble whose plain addresses are
    /// `plain` (`host:port,...`); a secured etcd is counted through
    /// `secure` at its TLS `endpoints`.
    pub fn new(
        backend: Backend,
        endpoints: &str,
        plain: &str,
        secure: Option<&elect_lab::Security>,
    ) -> anyhow::Result<Probe> {
        let members: Vec<String> = plain
            .split(',')
            .map(|e| e.trim().trim_start_matches("http://").to_owned())
            .collect();
        let mut probe = Probe {
            backend,
            endpoints: plain.to_owned(),
            members,
            etcd: None,
            zk: None,
        };
        if let (Backend::Etcd, Some(security)) = (backend, secure) {
            let (endpoints, security) = (endpoints.to_owned(), security.clone());
            let client =
                block_on(async move { connect_etcd_as_root(&endpoints, &security).await })?
                    .context("connecting to the secured etcd to count candidates")?;
            probe.etcd = Some(client);
        }
        if backend == Backend::Zk {
            let client =
                connect_zk(plain).context("connecting to ZooKeeper to count candidates")?;
            probe.zk = Some(RefCell::new(Some(client)));
        }
        Ok(probe)
    }

    /// The servers' counts per second with no leader change, over
    /// [`IDLE_WINDOW`]: every candidate's renewals. Blocks the thread;
    /// `None` where a member did not answer.
    pub fn idle_rate(&self) -> Option<Counters> {
        self.rate_over(IDLE_WINDOW)
    }

    /// The servers' counts per second over `window`. Blocks the thread;
    /// `None` where a member did not answer (or restarted).
    pub fn rate_over(&self, window: Duration) -> Option<Counters> {
        let (from, started) = (self.counters(), std::time::Instant::now());
        std::thread::sleep(window);
        self.counters()
            .since(from)
            .map(|c| c.per_second(started.elapsed()))
    }

    /// How many candidates are queued in `election` (`None` if the
    /// ensemble did not answer).
    pub fn queued(&self, election: &str) -> Option<usize> {
        match (&self.zk, self.backend) {
            (Some(slot), _) => {
                if slot.borrow().is_none() {
                    *slot.borrow_mut() = connect_zk(&self.endpoints).ok();
                }
                let client = slot.borrow().clone()?;
                let election = election.to_owned();
                let answer = block_on(async move {
                    tokio::time::timeout(Duration::from_secs(2), client.list_children(&election))
                        .await
                });
                match answer {
                    // Participants only: a pinned leader's `pinned` and the
                    // priorities are children too.
                    Ok(Ok(Ok(children))) => {
                        Some(children.iter().filter(|c| participant(c)).count())
                    }
                    Ok(Ok(Err(zookeeper_client::Error::NoNode))) => Some(0),
                    _ => {
                        *slot.borrow_mut() = None;
                        None
                    }
                }
            }
            (None, Backend::Etcd) => match &self.etcd {
                Some(client) => {
                    let (client, prefix) = (client.clone(), format!("{election}/"));
                    block_on(async move {
                        let options = etcd_client::GetOptions::new()
                            .with_prefix()
                            .with_count_only();
                        let mut kv = client.kv_client();
                        let answer = tokio::time::timeout(
                            Duration::from_secs(2),
                            kv.get(prefix, Some(options)),
                        )
                        .await;
                        match answer {
                            Ok(Ok(r)) => Some(r.count() as usize),
                            _ => None,
                        }
                    })
                    .ok()
                    .flatten()
                }
                None => self.members.iter().find_map(|m| etcd_count(m, election)),
            },
            _ => None,
        }
    }

    /// The counters summed over every member that answers.
    pub fn counters(&self) -> Counters {
        let mut c = Counters::default();
        for m in &self.members {
            match self.backend {
                Backend::Etcd => {
                    let metrics = etcd::metrics(m);
                    c.notifications += metrics
                        .get("etcd_debugging_mvcc_events_total")
                        .copied()
                        .unwrap_or(0.0);
                    c.requests += metrics
                        .get("grpc_server_msg_received_total")
                        .copied()
                        .unwrap_or(0.0);
                }
                Backend::Zk => {
                    let mntr = zk::mntr(m);
                    c.notifications += [
                        "zk_sum_node_created_watch_count",
                        "zk_sum_node_deleted_watch_count",
                        "zk_sum_node_changed_watch_count",
                        "zk_sum_node_children_watch_count",
                    ]
                    .iter()
                    .filter_map(|k| mntr.get(*k))
                    .sum::<f64>();
                    c.requests += mntr.get("zk_packets_received").copied().unwrap_or(0.0);
                }
                Backend::Raft => {}
            }
        }
        c
    }
}

/// A TLS client of a secured lab's etcd, authenticated as root.
async fn connect_etcd_as_root(
    endpoints: &str,
    security: &elect_lab::Security,
) -> anyhow::Result<etcd_client::Client> {
    use etcd_client::{Certificate, ConnectOptions, Identity, TlsOptions};
    let read = |p: &std::path::Path| std::fs::read(p).with_context(|| p.display().to_string());
    let tls = TlsOptions::new()
        .ca_certificate(Certificate::from_pem(read(&security.ca)?))
        .identity(Identity::from_pem(
            read(&security.client.cert)?,
            read(&security.client.key)?,
        ));
    let root = std::fs::read_to_string(&security.root_password_file)?;
    let options = ConnectOptions::new()
        .with_tls(tls)
        .with_user("root", root)
        .with_auto_token_refresh(true)
        .with_connect_timeout(Duration::from_secs(5));
    let urls: Vec<String> = endpoints
        .split(',')
        .map(|e| format!("https://{e}"))
        .collect();
    Ok(etcd_client::Client::connect(urls, Some(options)).await?)
}

fn connect_zk(endpoints: &str) -> anyhow::Result<zookeeper_client::Client> {
    let endpoints = endpoints.to_owned();
    Ok(block_on(async move {
        tokio::time::timeout(
            Duration::from_secs(10),
            zookeeper_client::Client::connect(&endpoints),
        )
        .await
    })???)
}

/// Keys under `<election>/` on the etcd member at `member`, counted by a
/// serializable range through etcd's JSON gateway.
fn etcd_count(member: &str, election: &str) -> Option<usize> {
    let prefix = format!("{election}/");
    let mut end = prefix.clone().into_bytes();
    *end.last_mut()? += 1;
    let body = format!(
        "{{\"key\":\"{}\",\"range_end\":\"{}\",\"count_only\":true}}",
        STANDARD.encode(prefix.as_bytes()),
        STANDARD.encode(&end)
    );
    let (code, response) = elect_lab::http_request(
        member,
        "POST",
        "/v3/kv/range",
        &body,
        Duration::from_secs(2),
    );
    if code != 200 {
        return None;
    }
    // `count` is an int64, which the gateway writes as a string, and left
    // out when zero.
    response
        .split("\"count\":\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .map_or(Some(0), |n| n.parse().ok())
}

/// Whether a child of a ZooKeeper election is a participant: it carries a
/// recipe's marker (Curator's `-latch-`, `-lock-`, kazoo's `__lock__`),
/// unlike what elect keeps beside them (`pinned`, `switchover`,
/// `priority-<sequence>`).
fn participant(child: &str) -> bool {
    ["-latch-", "-lock-", "__lock__"]
        .iter()
        .any(|marker| child.contains(marker))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_counter_that_went_back_is_not_a_count() {
        let before = Counters {
            notifications: 200.0,
            requests: 1000.0,
        };
        let after = Counters {
            notifications: 230.0,
            requests: 1100.0,
        };
        let counted = after.since(before).unwrap();
        assert_eq!((counted.notifications, counted.requests), (30.0, 100.0));
        // A member restarted meanwhile: its counters began again at zero.
        let restarted = Counters {
            notifications: 53.0,
            requests: 1100.0,
        };
        assert!(restarted.since(before).is_none());
    }
}
