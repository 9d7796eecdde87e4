//! Raft-vote peers: `elect campaign` processes electing among themselves,
//! so there is a running Raft-vote cluster to observe, query and fault like
//! the etcd and ZooKeeper ones.

use std::path::Path;
use std::time::Duration;

use super::member::{Member, Role, Runner};
use super::pki::Authority;
use crate::error::Result;
use crate::member::Placement;

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
            stalled_by: None,
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

/// Raft-vote peers on this machine's loopback, outside any lab: each an
/// `elect` process (of `bin`) on a port of its own, with its own data
/// directory, running the subcommand the caller gives (`campaign`, or
/// `run -- CMD`), its output watched line by line. What `elect demo`
/// shows; dropping it stops every peer and removes the directory.
pub struct LocalPeers {
    bin: std::path::PathBuf,
    dir: std::path::PathBuf,
    ttl: String,
    /// The peers' ids, `peer-1`...
    pub ids: Vec<String>,
    /// `--endpoints` of every peer.
    pub endpoints: String,
    peers: Vec<Option<crate::process::Watched>>,
}

impl LocalPeers {
    /// `n` peers of the cluster `name`, with election timeout `ttl`, on
    /// free ports of 127.0.0.1, keeping their data under `dir`. None is
    /// started yet.
    ///
    /// # Errors
    /// `dir` cannot be made, or no free port was found.
    pub fn new(bin: &Path, n: usize, ttl: &str, dir: &Path) -> std::io::Result<LocalPeers> {
        std::fs::create_dir_all(dir)?;
        let ids: Vec<String> = (1..=n).map(|i| format!("peer-{i}")).collect();
        let mut endpoints = Vec::new();
        for id in &ids {
            // A free port, released just before the peer binds it.
            let port = crate::host::free_port()?;
            endpoints.push(format!("{id}=127.0.0.1:{port}"));
        }
        Ok(LocalPeers {
            bin: bin.to_owned(),
            dir: dir.to_owned(),
            ttl: ttl.to_owned(),
            ids,
            endpoints: endpoints.join(","),
            peers: (0..n).map(|_| None).collect(),
        })
    }

    /// Starts peer `i` (again, on its data) in `election` with
    /// `subcommand` (e.g. `["run", "--", "sh", "-c", "..."]`), its JSON
    /// lines on stdout, and `log` as its `RUST_LOG`.
    ///
    /// # Errors
    /// The process could not be started.
    pub fn start(
        &mut self,
        i: usize,
        election: &str,
        subcommand: &[&str],
        log: &str,
    ) -> std::io::Result<()> {
        let (first, rest) = subcommand.split_first().expect("a subcommand");
        let mut cmd = std::process::Command::new(&self.bin);
        cmd.arg(first)
            .args(["--backend", "raft", "--endpoints", &self.endpoints])
            .args(["--election", election, "--id", &self.ids[i]])
            .args(["--ttl", &self.ttl, "--format", "json", "--data-dir"])
            .arg(self.dir.join(&self.ids[i]))
            .args(rest)
            .env("RUST_LOG", log);
        self.peers[i] = Some(crate::process::Watched::spawn(&self.ids[i], cmd)?);
        Ok(())
    }

    /// Lines every peer printed since the last call, in the order they
    /// were read, each with its peer's index.
    pub fn lines(&mut self) -> Vec<(usize, crate::process::Line)> {
        let mut lines: Vec<(usize, crate::process::Line)> = self
            .peers
            .iter_mut()
            .enumerate()
            .filter_map(|(i, p)| Some((i, p.as_mut()?)))
            .flat_map(|(i, p)| p.drain().into_iter().map(move |l| (i, l)))
            .collect();
        lines.sort_by_key(|(_, l)| l.at);
        lines
    }

    /// Sends `sig` to peer `i`.
    pub fn signal(&self, i: usize, sig: nix::sys::signal::Signal) {
        if let Some(p) = &self.peers[i] {
            p.signal(sig);
        }
    }

    /// Waits for peer `i` to exit (after a kill), and forgets it.
    pub fn reap(&mut self, i: usize, within: Duration) {
        if let Some(mut p) = self.peers[i].take() {
            p.wait_exit(within);
        }
    }

    /// Stops every peer (SIGTERM, SIGKILL after a few seconds) and removes
    /// their data.
    pub fn stop(&mut self) {
        for p in self.peers.iter().flatten() {
            p.signal(nix::sys::signal::Signal::SIGTERM);
        }
        // Each Watched waits for its exit (and kills it late) when dropped.
        self.peers.iter_mut().for_each(|p| drop(p.take()));
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Drop for LocalPeers {
    fn drop(&mut self) {
        self.stop();
    }
}
