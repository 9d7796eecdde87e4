//! A real 3-member ZooKeeper ensemble from Debian's `zookeeper` package, run
//! with the machine's Java. tickTime is 200 ms, so the server accepts
//! session timeouts from 400 ms to 4 s and tests fail over quickly.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Output};
use std::time::Duration;

use super::{eventually, loopback_net};

pub const TICK: Duration = Duration::from_millis(200);

pub struct Ensemble {
    members: Vec<Member>,
    dir: PathBuf,
    /// The connect string, `host:port,...`.
    pub endpoints: String,
}

pub struct Member {
    pub client: String,
    process: Option<Child>,
}

impl Ensemble {
    pub fn start() -> Ensemble {
        let net = loopback_net();
        let dir = std::env::temp_dir().join(format!("elect-zk-{net}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let servers: String = (1..=3)
            .map(|i| format!("server.{i}={net}.{i}:2888:3888\n"))
            .collect();
        let mut members = Vec::new();
        for i in 1..=3 {
            let data = dir.join(format!("zk{i}"));
            std::fs::create_dir_all(&data).unwrap();
            std::fs::write(data.join("myid"), format!("{i}\n")).unwrap();
            let cfg = data.join("zoo.cfg");
            std::fs::write(
                &cfg,
                format!(
                    "tickTime={}\ninitLimit=50\nsyncLimit=10\ndataDir={}\nclientPort=2181\n\
                     clientPortAddress={net}.{i}\n4lw.commands.whitelist=*\n\
                     admin.enableServer=false\nstandaloneEnabled=false\n{servers}",
                    TICK.as_millis(),
                    data.display()
                ),
            )
            .unwrap();
            let log = std::fs::File::create(dir.join(format!("zk{i}.log"))).unwrap();
            let process = Command::new("java")
                .args(["-Xmx192m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"])
                .args([
                    "-Dzookeeper.root.logger=INFO,CONSOLE",
                    "-Dzookeeper.console.threshold=INFO",
                ])
                .args(["-cp", "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar"])
                .arg("org.apache.zookeeper.server.quorum.QuorumPeerMain")
                .arg(&cfg)
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .expect("java and Debian's zookeeper are installed; run the README's test command");
            members.push(Member {
                client: format!("{net}.{i}:2181"),
                process: Some(process),
            });
        }
        let endpoints = members
            .iter()
            .map(|m| m.client.clone())
            .collect::<Vec<_>>()
            .join(",");
        let ensemble = Ensemble {
            members,
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
        super::kill_and_reap(&mut self.members[i].process);
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
        for m in &mut self.members {
            super::kill_and_reap(&mut m.process);
        }
        super::remove_unless_panicking(&self.dir, "ZooKeeper");
    }
}
