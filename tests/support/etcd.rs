//! A real 3-member etcd cluster (the lab's), with what tests ask of it.

use std::process::{Command, Output};
use std::time::Duration;

use elect_lab::docker::Network;
use elect_lab::{Lab, Member, Role, Spec, etcd};

use super::eventually;

pub struct Cluster {
    lab: Lab,
    /// Client endpoints, `host:port,...`.
    pub endpoints: String,
}

impl Cluster {
    /// Starts three members and waits until the cluster has a leader and
    /// serves linearizable requests. Heartbeat 100 ms, election timeout
    /// 1 s (etcd's defaults), so the minimum lease TTL is 2 s.
    pub fn start() -> Cluster {
        Cluster::start_with_timing(100, 1000)
    }

    /// Like [`Cluster::start`] with etcd's Raft heartbeat and election
    /// timeout (milliseconds).
    pub fn start_with_timing(heartbeat_ms: u64, election_ms: u64) -> Cluster {
        let mut spec = Spec::new(super::mode(), 3, 0);
        spec.etcd_timing = etcd::Timing {
            heartbeat_ms,
            election_ms,
        };
        let lab = Lab::up(&spec).unwrap_or_else(|e| panic!("starting etcd: {e}"));
        let endpoints = lab.endpoints(Role::Etcd).expect("etcd members");
        Cluster { lab, endpoints }
    }

    pub fn member(&self, i: usize) -> &Member {
        &self.lab.members()[i]
    }

    pub fn member_mut(&mut self, i: usize) -> &mut Member {
        let name = self.lab.members()[i].name.clone();
        self.lab.member_mut(&name).expect("a member")
    }

    /// The cluster's private network; panics in process mode.
    pub fn network(&self) -> &Network {
        self.lab
            .network()
            .expect("a container-only test in process mode")
    }

    /// The Raft leader member `i` knows of (`None` while it knows none or
    /// does not answer).
    pub fn leader_seen_by(&self, i: usize) -> Option<String> {
        etcd::leader_seen_by(&self.member(i).client)
    }

    /// The index of the member that is the Raft leader.
    pub fn leader_member(&self) -> Option<usize> {
        (0..3).find(|&i| etcd::is_raft_leader(&self.member(i).client))
    }

    /// Kills member `i` (SIGKILL), as a crash would.
    pub fn kill(&mut self, i: usize) {
        super::MemberExt::kill(self.member_mut(i));
    }

    /// Runs `etcdctl` (API v3) against the whole cluster.
    pub fn etcdctl(&self, args: &[&str]) -> Output {
        Command::new(elect_lab::etcd_release::program("etcdctl"))
            .env("ETCDCTL_API", "3")
            .args([
                "--endpoints",
                &self.endpoints,
                "--dial-timeout",
                "2s",
                "--command-timeout",
                "5s",
            ])
            .args(args)
            .output()
            .expect("etcdctl (Debian etcd-client) is installed")
    }

    /// The version the members say they run (`3.4.23`, `3.5.1`).
    pub fn version(&self) -> String {
        etcd::server_version(&self.member(0).client).expect("etcd says its version")
    }

    /// The version the members say, as numbers: major, minor, patch.
    pub fn version_numbers(&self) -> [u64; 3] {
        let version = self.version();
        let mut parts = version
            .split(['.', '-'])
            .map(|p| p.parse().expect("a numeric version"));
        [(); 3].map(|()| parts.next().expect("major, minor and patch"))
    }

    /// Runs `etcdctl` (API v3) against member `i` alone, giving each
    /// request `timeout`.
    pub fn etcdctl_at(&self, i: usize, timeout: &str, args: &[&str]) -> Command {
        let mut cmd = Command::new(elect_lab::etcd_release::program("etcdctl"));
        cmd.env("ETCDCTL_API", "3")
            .args(["--endpoints", &self.member(i).client])
            .args(["--dial-timeout", "2s", "--command-timeout", timeout])
            .args(args);
        cmd
    }

    /// `etcdctl` output as text; panics if it failed.
    pub fn etcdctl_ok(&self, args: &[&str]) -> String {
        let out = self.etcdctl(args);
        assert!(
            out.status.success(),
            "etcdctl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Keys under `<election>/`, oldest first, with their values.
    pub fn candidates(&self, election: &str) -> Vec<(String, String)> {
        let out = self.list(election, &[]);
        let lines: Vec<&str> = out.lines().collect();
        lines
            .chunks(2)
            .map(|kv| (kv[0].to_owned(), kv.get(1).unwrap_or(&"").to_string()))
            .collect()
    }

    /// Waits (10 s at most) until `n` candidate keys exist under
    /// `<election>/`, so the order they queued in is known.
    pub fn wait_for_candidates(&self, election: &str, n: usize) {
        eventually(&format!("{n} candidates"), Duration::from_secs(10), || {
            (self.candidates(election).len() == n).then_some(())
        });
    }

    /// The candidates under `<election>/`, oldest first: each one's value
    /// and its key's version (1 until the key is put again).
    pub fn versions(&self, election: &str) -> Vec<(String, i64)> {
        use base64::Engine;
        let out = self.list(election, &["-w", "json"]);
        let resp: serde_json::Value = serde_json::from_str(&out).expect("etcdctl's JSON");
        let kvs = resp["kvs"].as_array().cloned().unwrap_or_default();
        kvs.iter()
            .map(|kv| {
                let value = base64::engine::general_purpose::STANDARD
                    .decode(kv["value"].as_str().unwrap_or_default())
                    .expect("base64 value");
                let version = kv["version"].as_i64().expect("a version");
                (String::from_utf8_lossy(&value).into_owned(), version)
            })
            .collect()
    }

    /// `etcdctl get` of the keys under `<election>/`, oldest first.
    fn list(&self, election: &str, extra: &[&str]) -> String {
        let prefix = format!("{election}/");
        let args = [
            "get",
            "--prefix",
            &prefix,
            "--sort-by=CREATE",
            "--order=ASCEND",
        ];
        self.etcdctl_ok(&[&args[..], extra].concat())
    }

    /// Ids of the leases that currently exist.
    pub fn leases(&self) -> Vec<i64> {
        self.etcdctl_ok(&["lease", "list"])
            .lines()
            .skip(1)
            .filter_map(|l| i64::from_str_radix(l.trim(), 16).ok())
            .collect()
    }

    /// Waits until every member answers `/health` again.
    pub fn wait_healthy(&self) {
        eventually("etcd healthy", Duration::from_secs(30), || {
            (0..3)
                .all(|i| etcd::healthy(&self.member(i).client))
                .then_some(())
        });
    }
}
