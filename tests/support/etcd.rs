//! A real 3-member etcd cluster from the Debian `etcd-server` binary.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use super::docker::Network;
use super::{Node, eventually, member_hosts};

/// A member as a local process, its output in `<dir>/<name>.log`.
fn process(dir: &std::path::Path, name: &str, args: &[String]) -> Node {
    let log = std::fs::File::create(dir.join(format!("{name}.log"))).unwrap();
    let mut command = Command::new("etcd");
    command
        .arg("--data-dir")
        .arg(dir.join(name))
        .args(args)
        .stdout(Stdio::null())
        .stderr(log);
    Node::spawn(command, "etcd (Debian etcd-server)")
}

pub struct Cluster {
    members: Vec<Member>,
    /// The private network in container mode (dropped after the members).
    network: Option<Network>,
    dir: PathBuf,
    /// Client endpoints, `host:port,...`.
    pub endpoints: String,
}

pub struct Member {
    pub name: String,
    pub client: String,
    pub peer: String,
    pub node: Node,
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
        let (network, hosts) = member_hosts("etcd", 10);
        let dir =
            std::env::temp_dir().join(format!("elect-etcd-{}-{}", hosts[0], std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let initial = hosts
            .iter()
            .enumerate()
            .map(|(i, host)| format!("m{}=http://{host}:2380", i + 1))
            .collect::<Vec<_>>()
            .join(",");
        let endpoints = hosts
            .iter()
            .map(|host| format!("{host}:2379"))
            .collect::<Vec<_>>()
            .join(",");
        let members = hosts
            .iter()
            .enumerate()
            .map(|(i, host)| {
                let name = format!("m{}", i + 1);
                let client = format!("{host}:2379");
                let peer = format!("{host}:2380");
                let args: Vec<String> = [
                    "--name",
                    &name,
                    "--listen-client-urls",
                    &format!("http://{client}"),
                    "--advertise-client-urls",
                    &format!("http://{client}"),
                    "--listen-peer-urls",
                    &format!("http://{peer}"),
                    "--initial-advertise-peer-urls",
                    &format!("http://{peer}"),
                    "--initial-cluster",
                    &initial,
                    "--initial-cluster-state",
                    "new",
                    "--initial-cluster-token",
                    &endpoints,
                    "--heartbeat-interval",
                    &heartbeat_ms.to_string(),
                    "--election-timeout",
                    &election_ms.to_string(),
                ]
                .map(str::to_owned)
                .into();
                let node = match &network {
                    Some(network) => {
                        let mut argv = vec!["etcd", "--data-dir", "/data/etcd"];
                        argv.extend(args.iter().map(String::as_str));
                        Node::Container(network.run(&name, 11 + i as u8, &dir.join(&name), &argv))
                    }
                    None => process(&dir, &name, &args),
                };
                Member {
                    name,
                    client,
                    peer,
                    node,
                }
            })
            .collect();
        let cluster = Cluster {
            members,
            network,
            dir,
            endpoints,
        };
        eventually("etcd cluster healthy", Duration::from_secs(30), || {
            cluster
                .etcdctl(&["put", "/elect-test/health", "ok"])
                .status
                .success()
                .then_some(())
        });
        cluster.etcdctl(&["del", "/elect-test/health"]);
        cluster
    }

    pub fn member(&self, i: usize) -> &Member {
        &self.members[i]
    }

    pub fn member_mut(&mut self, i: usize) -> &mut Member {
        &mut self.members[i]
    }

    /// The cluster's private network; panics in process mode.
    pub fn network(&self) -> &Network {
        self.network
            .as_ref()
            .expect("a container-only test in process mode")
    }

    /// Member `i`'s answer to the maintenance Status call, through the HTTP
    /// gateway: cheap enough to poll every millisecond.
    fn status(&self, i: usize) -> Option<String> {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(&self.members[i].client).ok()?;
        stream
            .set_read_timeout(Some(Duration::from_millis(200)))
            .ok()?;
        let request = "POST /v3/maintenance/status HTTP/1.1\r\nHost: etcd\r\n\
                       Content-Length: 2\r\nConnection: close\r\n\r\n{}";
        stream.write_all(request.as_bytes()).ok()?;
        let mut response = String::new();
        let _ = stream.read_to_string(&mut response);
        Some(response)
    }

    fn status_field(response: &str, name: &str) -> Option<String> {
        let value = response
            .split(&format!("\"{name}\":\""))
            .nth(1)?
            .split('"')
            .next()?;
        Some(value.to_owned())
    }

    /// The Raft leader member `i` knows of (`None` while it knows none or
    /// does not answer).
    pub fn leader_seen_by(&self, i: usize) -> Option<String> {
        let leader = Self::status_field(&self.status(i)?, "leader")?;
        (leader != "0").then_some(leader)
    }

    /// The index of the member that is the Raft leader.
    pub fn leader_member(&self) -> Option<usize> {
        (0..self.members.len()).find(|&i| {
            self.status(i).is_some_and(|r| {
                Self::status_field(&r, "leader").is_some()
                    && Self::status_field(&r, "leader") == Self::status_field(&r, "member_id")
            })
        })
    }

    /// Kills member `i` (SIGKILL), as a crash would.
    pub fn kill(&mut self, i: usize) {
        self.members[i].node.kill();
    }

    /// Runs `etcdctl` (API v3) against the whole cluster.
    pub fn etcdctl(&self, args: &[&str]) -> Output {
        Command::new("etcdctl")
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
        let out = self.etcdctl_ok(&[
            "get",
            "--prefix",
            &format!("{election}/"),
            "--sort-by=CREATE",
            "--order=ASCEND",
        ]);
        let lines: Vec<&str> = out.lines().collect();
        lines
            .chunks(2)
            .map(|kv| (kv[0].to_owned(), kv.get(1).unwrap_or(&"").to_string()))
            .collect()
    }

    /// Ids of the leases that currently exist.
    pub fn leases(&self) -> Vec<i64> {
        self.etcdctl_ok(&["lease", "list"])
            .lines()
            .skip(1)
            .filter_map(|l| i64::from_str_radix(l.trim(), 16).ok())
            .collect()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for m in &mut self.members {
            m.node.stop(&self.dir.join(format!("{}.log", m.name)));
        }
        self.members.clear();
        super::remove_unless_panicking(&self.dir, "etcd");
    }
}
