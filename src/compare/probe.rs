//! What the ensemble itself can tell about an election: how many
//! candidates are queued (keys under the prefix, children of the znode),
//! and the server-side counters behind wake-ups and requests per leader
//! change. Read from the servers, so the peers' tools are measured exactly
//! as elect is.

use std::cell::RefCell;
use std::time::Duration;

use anyhow::Context as _;
use elect::lab::{etcd, zk};

use super::contender::Backend;

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

impl std::ops::Sub for Counters {
    type Output = Counters;
    fn sub(self, rhs: Counters) -> Counters {
        Counters {
            notifications: self.notifications - rhs.notifications,
            requests: self.requests - rhs.requests,
        }
    }
}

/// Probes one ensemble.
pub struct Probe {
    backend: Backend,
    endpoints: String,
    members: Vec<String>,
    /// ZooKeeper: a runtime and a client, replaced after any failure (a
    /// member killed under it may leave it stuck or its session expired).
    zk: Option<(
        tokio::runtime::Runtime,
        RefCell<Option<zookeeper_client::Client>>,
    )>,
}

impl Probe {
    /// For the etcd or ZooKeeper ensemble at `endpoints` (`host:port,...`).
    pub fn new(backend: Backend, endpoints: &str) -> anyhow::Result<Probe> {
        let members: Vec<String> = endpoints
            .split(',')
            .map(|e| e.trim().trim_start_matches("http://").to_owned())
            .collect();
        let mut probe = Probe {
            backend,
            endpoints: endpoints.to_owned(),
            members,
            zk: None,
        };
        if backend == Backend::Zk {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let client = connect_zk(&rt, endpoints)
                .context("connecting to ZooKeeper to count candidates")?;
            probe.zk = Some((rt, RefCell::new(Some(client))));
        }
        Ok(probe)
    }

    /// How many candidates are queued in `election` (`None` if the
    /// ensemble did not answer).
    pub fn queued(&self, election: &str) -> Option<usize> {
        match (&self.zk, self.backend) {
            (Some((rt, slot)), _) => {
                if slot.borrow().is_none() {
                    *slot.borrow_mut() = connect_zk(rt, &self.endpoints).ok();
                }
                let guard = slot.borrow();
                let client = guard.as_ref()?;
                let answer = rt.block_on(async {
                    tokio::time::timeout(Duration::from_secs(2), client.list_children(election))
                        .await
                });
                drop(guard);
                match answer {
                    Ok(Ok(children)) => Some(children.len()),
                    Ok(Err(zookeeper_client::Error::NoNode)) => Some(0),
                    _ => {
                        *slot.borrow_mut() = None;
                        None
                    }
                }
            }
            (None, Backend::Etcd) => self.members.iter().find_map(|m| etcd_count(m, election)),
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

fn connect_zk(
    rt: &tokio::runtime::Runtime,
    endpoints: &str,
) -> anyhow::Result<zookeeper_client::Client> {
    Ok(rt.block_on(async {
        tokio::time::timeout(
            Duration::from_secs(10),
            zookeeper_client::Client::connect(endpoints),
        )
        .await
    })??)
}

/// Keys under `<election>/` on the etcd member at `member`, counted by a
/// serializable range through etcd's JSON gateway.
fn etcd_count(member: &str, election: &str) -> Option<usize> {
    let prefix = format!("{election}/");
    let mut end = prefix.clone().into_bytes();
    *end.last_mut()? += 1;
    let body = format!(
        "{{\"key\":\"{}\",\"range_end\":\"{}\",\"count_only\":true}}",
        base64(prefix.as_bytes()),
        base64(&end)
    );
    let (code, response) = elect::lab::http_request(
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

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = u32::from_be_bytes([0, b[0], b[1], b[2]]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn base64_pads_like_rfc_4648() {
        assert_eq!(super::base64(b"f"), "Zg==");
        assert_eq!(super::base64(b"fo"), "Zm8=");
        assert_eq!(super::base64(b"foo"), "Zm9v");
        assert_eq!(super::base64(b"elect/"), "ZWxlY3Qv");
    }
}
