//! Raft-vote peers: `elect campaign` processes electing among themselves,
//! so there is a running Raft-vote cluster to observe, query and fault like
//! the etcd and ZooKeeper ones.

use std::path::Path;
use std::time::Duration;

use super::member::{Member, Role, Runner};
use super::pki::Authority;
use super::{Placement, Result};

/// The election timeout the lab's peers run with.
pub const TTL: &str = "1s";
/// The cluster name they share.
pub const CLUSTER: &str = "lab";
const PORT: u16 = 7000;

/// `--endpoints` for peers at `hosts`: `raft-1=host:7000,...`.
pub fn peers(hosts: &[String]) -> String {
    hosts
        .iter()
        .enumerate()
        .map(|(i, h)| format!("raft-{}={h}:{PORT}", i + 1))
        .collect::<Vec<_>>()
        .join(",")
}

/// Starts one peer per host, each named `raft-<i>`, running `bin`. With
/// an `authority`, peers talk mutual TLS, each with a certificate naming
/// its id.
pub(crate) fn start(
    place: &Placement,
    hosts: &[String],
    bin: &Path,
    authority: Option<&Authority>,
) -> Result<Vec<Member>> {
    let endpoints = peers(hosts);
    let mut members = Vec::new();
    for (i, host) in hosts.iter().enumerate() {
        let name = format!("raft-{}", i + 1);
        let dir = place.dir.join(&name);
        std::fs::create_dir_all(&dir)?;
        if let Some(ca) = authority {
            let issued = ca.issue(&name, &[name.as_str()])?;
            std::fs::copy(&issued.cert, dir.join("peer.pem"))?;
            std::fs::copy(&issued.key, dir.join("peer-key.pem"))?;
            std::fs::copy(ca.ca(), dir.join("ca.pem"))?;
        }
        let args = |elect: &str, data: &str| -> Vec<String> {
            // The member's directory is the parent of its data directory
            // (in a container, /data).
            let file = |f: &str| {
                Path::new(data)
                    .parent()
                    .unwrap_or(Path::new("/"))
                    .join(f)
                    .display()
                    .to_string()
            };
            let mut argv: Vec<String> = [
                elect,
                "--backend",
                "raft",
                "--endpoints",
                &endpoints,
                "--election",
                CLUSTER,
                "--id",
                &name,
                "--ttl",
                TTL,
                "--data-dir",
                data,
                "--format",
                "json",
                "campaign",
            ]
            .map(str::to_owned)
            .into();
            if authority.is_some() {
                argv.extend([
                    "--cacert".to_owned(),
                    file("ca.pem"),
                    "--cert".to_owned(),
                    file("peer.pem"),
                    "--key".to_owned(),
                    file("peer-key.pem"),
                ]);
            }
            argv
        };
        let runner = match &place.network {
            Some(network) => {
                let container = network.container(&format!("{}-{name}", place.id), host);
                let mount = vec![
                    "-v".to_owned(),
                    format!("{}:/usr/local/bin/elect:ro", bin.display()),
                ];
                let argv = args("/usr/local/bin/elect", "/data/raft");
                let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
                network.run(&container, &dir, &mount, &argv)?;
                Runner::Container {
                    container,
                    cut: false,
                }
            }
            None => Member::spawn_process(
                args(
                    &bin.display().to_string(),
                    &dir.join("data").display().to_string(),
                ),
                dir.join("member.log"),
            )?,
        };
        members.push(Member {
            name,
            role: Role::Raft,
            client: format!("{host}:{PORT}"),
            health: None,
            dir,
            runner,
        });
    }
    Ok(members)
}

/// Whether the peer at `addr` accepts connections.
pub fn healthy(addr: &str) -> bool {
    addr.parse()
        .ok()
        .and_then(|a| std::net::TcpStream::connect_timeout(&a, Duration::from_secs(1)).ok())
        .is_some()
}
