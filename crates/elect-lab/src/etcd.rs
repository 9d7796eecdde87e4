//! Real etcd members (Debian's `etcd-server`, or the release
//! [`EtcdRelease`] chose): how to start a cluster, and what it can tell
//! about itself through its HTTP endpoints.

use std::time::Duration;

use super::member::{Member, Role, Runner};
use super::pki::Authority;
use crate::EtcdRelease;
use crate::error::Result;
use crate::http::http_get;
use crate::member::Placement;
use crate::security::Security;

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

/// Starts `n` members at `hosts`, each `name` `etcd-<i>`. With an
/// `authority` (and an auth token TTL in seconds), clients must speak TLS
/// and present a certificate from it; health and metrics stay plain HTTP
/// on port 2381.
pub(crate) fn start(
    place: &Placement,
    release: &EtcdRelease,
    hosts: &[String],
    timing: Timing,
    secure: Option<(&Authority, u64)>,
) -> Result<Vec<Member>> {
    let authority = secure.map(|(a, _)| a);
    if place.network.is_some() {
        crate::docker::require_image(&release.image(), release.image_hint())?;
    }
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
        let scheme = if authority.is_some() { "https" } else { "http" };
        let secure_args = match secure {
            Some((ca, token_ttl)) => tls_args(ca, &name, host, &dir, place, token_ttl)?,
            None => Vec::new(),
        };
        let args = |data: &str| -> Vec<String> {
            let mut argv: Vec<String> = [
                "--name",
                &name,
                "--data-dir",
                data,
                "--listen-client-urls",
                &format!("{scheme}://{client}"),
                "--advertise-client-urls",
                &format!("{scheme}://{client}"),
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
            .into();
            argv.extend(secure_args.iter().cloned());
            argv
        };
        let runner = match &place.network {
            Some(network) => {
                let container = network.container(&format!("{}-{name}", place.id), host);
                // The image's etcd: the release's own.
                let mut argv = vec!["etcd".to_owned()];
                argv.extend(args("/data/etcd"));
                let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
                network.run_image(&release.image(), &container, &dir, &[], &argv)?;
                Runner::Container {
                    container,
                    cut: false,
                }
            }
            None => {
                let mut argv = vec![release.program("etcd").display().to_string()];
                argv.extend(args(&dir.join("data").display().to_string()));
                Member::spawn_process(argv, dir.join("member.log"))?
            }
        };
        members.push(Member {
            name,
            role: Role::Etcd,
            health: authority.map(|_| format!("{host}:2381")),
            client,
            dir,
            runner,
            stalled_by: None,
        });
    }
    Ok(members)
}

/// A member's TLS flags: its certificate from `ca` (copied into its
/// directory, which is /data in a container), client certificates
/// required, health and metrics on plain HTTP at port 2381, and simple
/// auth tokens that live `token_ttl` seconds.
fn tls_args(
    ca: &Authority,
    name: &str,
    host: &str,
    dir: &std::path::Path,
    place: &Placement,
    token_ttl: u64,
) -> Result<Vec<String>> {
    let inside = |file: &str| match &place.network {
        Some(_) => format!("/data/{file}"),
        None => dir.join(file).display().to_string(),
    };
    let issued = ca.issue(name, &[host, "localhost"])?;
    std::fs::copy(&issued.cert, dir.join("server.pem"))?;
    std::fs::copy(&issued.key, dir.join("server-key.pem"))?;
    std::fs::copy(ca.ca(), dir.join("ca.pem"))?;
    Ok([
        "--cert-file",
        &inside("server.pem"),
        "--key-file",
        &inside("server-key.pem"),
        "--trusted-ca-file",
        &inside("ca.pem"),
        "--client-cert-auth",
        "--listen-metrics-urls",
        &format!("http://{host}:2381"),
        "--auth-token",
        "simple",
        "--auth-token-ttl",
        &token_ttl.to_string(),
    ]
    .map(str::to_owned)
    .into())
}

/// Whether the member at `client` answers `/health` with a leader and a
/// linearizable read.
pub fn healthy(client: &str) -> bool {
    let (status, body) = http_get(client, "/health", Duration::from_secs(2));
    status == 200 && body.contains("\"health\":\"true\"")
}

/// The version the member at `client` says it runs (`/version`'s
/// `etcdserver`), when it answers plain HTTP.
pub fn server_version(client: &str) -> Option<String> {
    let (status, body) = http_get(client, "/version", Duration::from_secs(2));
    (status == 200).then(|| status_field(&body, "etcdserver"))?
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

/// Turns auth on in a secured cluster at `endpoints`: users `root` and
/// `security.user`, the latter with a role that may read and write only
/// keys under `security.prefix`. Runs on a thread of its own, so it can be
/// called from inside an async runtime or not.
pub(crate) fn enable_auth(endpoints: &str, security: &Security) -> Result<()> {
    use etcd_client::{Certificate, Client, ConnectOptions, Identity, Permission, TlsOptions};
    let read = |p: &std::path::Path| std::fs::read(p);
    let ca = read(&security.ca)?;
    let (cert, key) = (read(&security.client.cert)?, read(&security.client.key)?);
    let root_password = std::fs::read_to_string(&security.root_password_file)?;
    let user_password = std::fs::read_to_string(&security.password_file)?;
    let endpoints: Vec<String> = endpoints
        .split(',')
        .map(|e| format!("https://{e}"))
        .collect();
    let (user, prefix) = (security.user.clone(), security.prefix.clone());
    elect::credentials::crypto_provider();
    let setup = async move {
        let tls = TlsOptions::new()
            .ca_certificate(Certificate::from_pem(ca))
            .identity(Identity::from_pem(cert, key));
        let options = ConnectOptions::new()
            .with_tls(tls)
            .with_connect_timeout(Duration::from_secs(5));
        let mut client = Client::connect(endpoints, Some(options)).await?;
        let role = format!("{user}-role");
        client.user_add("root", root_password, None).await?;
        client.user_grant_role("root", "root").await?;
        client.user_add(user.as_str(), user_password, None).await?;
        client.role_add(role.as_str()).await?;
        let range_end = prefix_end(&prefix);
        client
            .role_grant_permission(
                role.as_str(),
                Permission::read_write(prefix.as_str()).with_range_end(range_end),
            )
            .await?;
        client.user_grant_role(user.as_str(), role.as_str()).await?;
        client.auth_enable().await?;
        Ok::<_, etcd_client::Error>(())
    };
    crate::bridge::block_on(setup)?
        .map_err(|e| std::io::Error::other(format!("enabling etcd auth: {e}")))?;
    Ok(())
}

/// The end of the range of keys starting with `prefix`.
fn prefix_end(prefix: &str) -> Vec<u8> {
    let mut end = prefix.as_bytes().to_vec();
    if let Some(last) = end.last_mut() {
        *last += 1;
    }
    end
}
