//! A real 3-member ZooKeeper ensemble from Debian's `zookeeper` package, run
//! with the machine's Java. tickTime is 200 ms, so the server accepts
//! session timeouts from 400 ms to 4 s and tests fail over quickly.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;

use super::docker::Network;
use super::{Node, eventually, member_hosts};

pub const TICK: Duration = Duration::from_millis(200);

/// A small heap and a quick-starting JIT: three members share two cores.
const JVM: &str = "-Xmx192m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
    -Dzookeeper.root.logger=INFO,CONSOLE -Dzookeeper.console.threshold=INFO \
    -cp /etc/zookeeper/conf:/usr/share/java/zookeeper.jar";
const MAIN: &str = "org.apache.zookeeper.server.quorum.QuorumPeerMain";

pub struct Ensemble {
    members: Vec<Member>,
    /// The private network in container mode (dropped after the members).
    network: Option<Network>,
    dir: PathBuf,
    /// The connect string, `host:port,...`.
    pub endpoints: String,
}

pub struct Member {
    pub client: String,
    pub node: Node,
}

impl Ensemble {
    pub fn start() -> Ensemble {
        let (network, hosts) = member_hosts("zk", 20);
        let dir =
            std::env::temp_dir().join(format!("elect-zk-{}-{}", hosts[0], std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let servers: String = hosts
            .iter()
            .enumerate()
            .map(|(i, host)| format!("server.{}={host}:2888:3888\n", i + 1))
            .collect();
        let mut members = Vec::new();
        for (i, host) in hosts.iter().enumerate() {
            let id = i + 1;
            let config = |data: &str| {
                format!(
                    "tickTime={}\ninitLimit=50\nsyncLimit=10\ndataDir={data}\nclientPort=2181\n\
                     clientPortAddress={host}\n4lw.commands.whitelist=*\n\
                     admin.enableServer=false\nstandaloneEnabled=false\n{servers}",
                    TICK.as_millis(),
                )
            };
            let node = match &network {
                Some(network) => {
                    let script = format!(
                        "mkdir -p /data/zk && echo {id} > /data/zk/myid && printf '{}' > /data/zoo.cfg && exec java {JVM} {MAIN} /data/zoo.cfg",
                        config("/data/zk").replace('\n', "\\n")
                    );
                    Node::Container(network.run(
                        &format!("zk{id}"),
                        20 + id as u8,
                        &dir.join(format!("zk{id}")),
                        &["sh", "-c", &script],
                    ))
                }
                None => {
                    let data = dir.join(format!("zk{id}"));
                    std::fs::create_dir_all(&data).unwrap();
                    std::fs::write(data.join("myid"), format!("{id}\n")).unwrap();
                    let cfg = data.join("zoo.cfg");
                    std::fs::write(&cfg, config(&data.display().to_string())).unwrap();
                    let log = std::fs::File::create(dir.join(format!("zk{id}.log"))).unwrap();
                    let mut command = Command::new("sh");
                    command
                        .arg("-c")
                        .arg(format!("exec java {JVM} {MAIN} \"$0\""))
                        .arg(&cfg)
                        .stdout(log.try_clone().unwrap())
                        .stderr(log);
                    Node::spawn(command, "java and Debian's zookeeper")
                }
            };
            members.push(Member {
                client: format!("{host}:2181"),
                node,
            });
        }
        let endpoints = members
            .iter()
            .map(|m| m.client.clone())
            .collect::<Vec<_>>()
            .join(",");
        let ensemble = Ensemble {
            members,
            network,
            dir,
            endpoints,
        };
        eventually(
            "ZooKeeper ensemble serving",
            Duration::from_secs(60),
            || {
                ensemble
                    .members
                    .iter()
                    .all(|m| {
                        let srvr = four_letter(&m.client, "srvr");
                        srvr.contains("Mode: leader") || srvr.contains("Mode: follower")
                    })
                    .then_some(())
            },
        );
        ensemble
    }

    pub fn member(&self, i: usize) -> &Member {
        &self.members[i]
    }

    pub fn member_mut(&mut self, i: usize) -> &mut Member {
        &mut self.members[i]
    }

    /// The ensemble's private network; panics in process mode.
    pub fn network(&self) -> &Network {
        self.network
            .as_ref()
            .expect("a container-only test in process mode")
    }

    pub fn members(&self) -> impl Iterator<Item = &str> {
        self.members.iter().map(|m| m.client.as_str())
    }

    /// Index of the member serving session `sid` (as `0x...`), from `cons`.
    pub fn member_serving(&self, sid: &str) -> Option<usize> {
        self.members()
            .position(|m| four_letter(m, "cons").contains(&format!("sid={sid}")))
    }

    /// Kills member `i` (SIGKILL), as a crash would.
    pub fn kill(&mut self, i: usize) {
        self.members[i].node.kill();
    }

    /// Sends a four-letter word to every member and joins the answers.
    pub fn four_letter_all(&self, word: &str) -> String {
        self.members()
            .map(|m| four_letter(m, word))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Runs a kazoo snippet with `zk` connected; returns its stdout.
    pub fn kazoo(&self, code: &str) -> Output {
        let script = format!(
            "import sys\nfrom kazoo.client import KazooClient\n\
             zk = KazooClient(hosts={:?}, timeout=5)\nzk.start(timeout=15)\n{code}\nzk.stop()\n",
            self.endpoints
        );
        Command::new("/usr/bin/python3")
            .arg("-c")
            .arg(script)
            .output()
            .expect("Debian python3 with python3-kazoo")
    }

    /// Children of `path` (empty if it does not exist).
    pub fn children(&self, path: &str) -> Vec<String> {
        let out = self.kazoo(&format!(
            "print('\\n'.join(sorted(zk.get_children({path:?}))) if zk.exists({path:?}) else '')"
        ));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect()
    }

    /// Deletes a znode as an operator would.
    pub fn delete(&self, path: &str) {
        let out = self.kazoo(&format!("zk.delete({path:?})"));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// One four-letter-word exchange; empty on any failure.
pub fn four_letter(addr: &str, word: &str) -> String {
    let Ok(mut stream) = TcpStream::connect(addr) else {
        return String::new();
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let mut answer = String::new();
    if stream.write_all(word.as_bytes()).is_ok() {
        let _ = stream.read_to_string(&mut answer);
    }
    answer
}

impl Drop for Ensemble {
    fn drop(&mut self) {
        for (i, m) in self.members.iter_mut().enumerate() {
            m.node.stop(&self.dir.join(format!("zk{}.log", i + 1)));
        }
        self.members.clear();
        super::remove_unless_panicking(&self.dir, "ZooKeeper");
    }
}
