//! Real etcd members (Debian's `etcd-server`): how to start a cluster, and
//! what it can tell about itself through its HTTP endpoints.

use std::time::Duration;

use super::member::{Member, Role, Runner};
use super::{Placement, Result, http_get};

/// etcd's Raft timing, in milliseconds. The shortest lease etcd grants is
/// about 1.5 election timeouts.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    /// `--heartbeat-interval`.
    pub heartbeat_ms: u64,
    /// `--election-timeout`.
    pub election_ms: u64,
}

impl Default for Timing {
    /// etcd's defaults: 100 ms and 1 s.
    fn default() -> Self {
        Timing {
            heartbeat_ms: 100,
            election_ms: 1000,
        }
    }
}

/// Starts `n` members at `hosts`, each `name` `etcd-<i>`.
pub(crate) fn start(place: &Placement, hosts: &[String], timing: Timing) -> Result<Vec<Member>> {
    let initial = hosts
        .iter()
        .enumerate()
        .map(|(i, host)| format!("etcd-{}=http://{host}:2380", i + 1))
        .collect::<Vec<_>>()
        .join(",");
    let mut members = Vec::new();
    for (i, host) in hosts.iter().enumerate() {
        let name = format!("etcd-{}", i + 1);
        let dir = place.dir.join(&name);
        std::fs::create_dir_all(&dir)?;
        let client = format!("{host}:2379");
        let args = |data: &str| -> Vec<String> {
            [
                "etcd",
                "--name",
                &name,
                "--data-dir",
                data,
                "--listen-client-urls",
                &format!("http://{client}"),
                "--advertise-client-urls",
                &format!("http://{client}"),
                "--listen-peer-urls",
                &format!("http://{host}:2380"),
                "--initial-advertise-peer-urls",
                &format!("http://{host}:2380"),
                "--initial-cluster",
                &initial,
                "--initial-cluster-state",
                "new",
                "--initial-cluster-token",
                &format!("{}-{initial}", place.id),
                "--heartbeat-interval",
                &timing.heartbeat_ms.to_string(),
                "--election-timeout",
                &timing.election_ms.to_string(),
            ]
            .map(str::to_owned)
            .into()
        };
        let runner = match &place.network {
            Some(network) => {
                let container = network.container(&format!("{}-{name}", place.id), host);
                let argv = args("/data/etcd");
                let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
                network.run(&container, &dir, &[], &argv)?;
                Runner::Container {
                    container,
                    cut: false,
                }
            }
            None => Member::spawn_process(
                args(&dir.join("data").display().to_string()),
                dir.join("member.log"),
            )?,
        };
        members.push(Member {
            name,
            role: Role::Etcd,
            client,
            dir,
            runner,
        });
    }
    Ok(members)
}

/// Whether the member at `client` answers `/health` with a leader and a
/// linearizable read.
pub fn healthy(client: &str) -> bool {
    let (status, body) = http_get(client, "/health", Duration::from_secs(2));
    status == 200 && body.contains("\"health\":\"true\"")
}

/// The member's answer to the maintenance Status call (JSON), through the
/// HTTP gateway: cheap enough to poll every millisecond.
pub fn status(client: &str) -> Option<String> {
    let (code, body) = super::http_request(
        client,
        "POST",
        "/v3/maintenance/status",
        "{}",
        Duration::from_millis(200),
    );
    (code != 0).then_some(body)
}

fn status_field(response: &str, name: &str) -> Option<String> {
    let value = response
        .split(&format!("\"{name}\":\""))
        .nth(1)?
        .split('"')
        .next()?;
    Some(value.to_owned())
}

/// The id of the Raft leader the member at `client` knows of (`None` while
/// it knows none or does not answer).
pub fn leader_seen_by(client: &str) -> Option<String> {
    let leader = status_field(&status(client)?, "leader")?;
    (leader != "0").then_some(leader)
}

/// Whether the member at `client` is its cluster's Raft leader.
pub fn is_raft_leader(client: &str) -> bool {
    status(client).is_some_and(|r| {
        status_field(&r, "leader").is_some()
            && status_field(&r, "leader") == status_field(&r, "member_id")
    })
}

/// The member's Prometheus metrics, summed by name (labels dropped).
pub fn metrics(client: &str) -> std::collections::BTreeMap<String, f64> {
    let (_, body) = http_get(client, "/metrics", Duration::from_secs(2));
    super::sum_prometheus(&body)
}
