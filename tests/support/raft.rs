//! A Raft-vote cluster of real `elect` processes, each on its own loopback
//! address, with its own data dir.

use std::path::PathBuf;

use super::elect::{BIN, Proc};
use super::loopback_net;

pub struct Cluster {
    pub ids: Vec<String>,
    /// `--endpoints` for every peer.
    pub endpoints: String,
    pub ttl: String,
    dir: PathBuf,
    /// With mutual TLS: the CA's directory, a certificate per peer in it.
    pki: Option<PathBuf>,
}

impl Cluster {
    pub fn new(n: usize, ttl: &str) -> Cluster {
        let net = loopback_net();
        let ids: Vec<String> = (0..n).map(|i| format!("p{i}")).collect();
        let endpoints = ids
            .iter()
            .enumerate()
            .map(|(i, id)| format!("{id}={net}.{}:7000", i + 1))
            .collect::<Vec<_>>()
            .join(",");
        let dir = std::env::temp_dir().join(format!("elect-raft-{net}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        Cluster {
            ids,
            endpoints,
            ttl: ttl.to_owned(),
            dir,
            pki: None,
        }
    }

    /// Like [`Cluster::new`], the peers talking mutual TLS: a CA made now,
    /// a certificate per peer naming its id.
    pub fn secured(n: usize, ttl: &str) -> Cluster {
        let mut cluster = Cluster::new(n, ttl);
        let pki = cluster.dir.join("pki");
        let ca = elect_lab::pki::Authority::new(&pki, "test CA").expect("a CA");
        for id in &cluster.ids {
            ca.issue(id, &[id.as_str()]).expect("a certificate");
        }
        // A certificate from the CA that names no peer: a reader's.
        ca.issue("reader", &["reader"]).expect("a certificate");
        cluster.pki = Some(pki);
        cluster
    }

    /// `--cacert`, `--cert` and `--key` for peer `id` (none without TLS).
    pub fn tls_flags(&self, id: &str) -> Vec<String> {
        let Some(pki) = &self.pki else {
            return Vec::new();
        };
        let file = |f: String| pki.join(f).display().to_string();
        vec![
            "--cacert".into(),
            file("ca.pem".into()),
            "--cert".into(),
            file(format!("{id}.pem")),
            "--key".into(),
            file(format!("{id}-key.pem")),
        ]
    }

    /// `elect` with this peer's flags, then `args`.
    pub fn command(&self, id: &str, args: &[&str]) -> std::process::Command {
        let mut cmd = std::process::Command::new(BIN);
        cmd.args([
            "--backend",
            "raft",
            "--endpoints",
            &self.endpoints,
            "--election",
            "test",
        ])
        .args(["--format", "json", "--ttl", &self.ttl, "--id", id])
        .arg("--data-dir")
        .arg(self.dir.join(id))
        .args(self.tls_flags(id))
        .args(args)
        .env("RUST_LOG", "elect=debug,warn");
        cmd
    }

    /// `elect campaign` as peer `id`.
    pub fn campaign(&self, id: &str) -> Proc {
        Proc::spawn(id, self.command(id, &["campaign"]))
    }

    /// `elect <extra> campaign` as peer `id`.
    pub fn campaign_with(&self, id: &str, extra: &[&str]) -> Proc {
        Proc::spawn(id, self.command(id, &[extra, &["campaign"]].concat()))
    }

    /// `elect run -- sh -c script` as peer `id`.
    pub fn run(&self, id: &str, script: &str) -> Proc {
        Proc::spawn(id, self.command(id, &["run", "--", "sh", "-c", script]))
    }

    /// `elect run <run_flags> -- argv...` as peer `id`.
    pub fn run_argv(&self, id: &str, run_flags: &[&str], argv: &[&str]) -> Proc {
        let args = [&["run"], run_flags, &["--"], argv].concat();
        Proc::spawn(id, self.command(id, &args))
    }

    pub fn all(&self) -> Vec<Proc> {
        self.ids.iter().map(|id| self.campaign(id)).collect()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
