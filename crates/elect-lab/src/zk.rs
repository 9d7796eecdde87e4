//! Real ZooKeeper servers (Debian's `zookeeper`, run with the machine's
//! Java): how to start an ensemble, and its four-letter words.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use super::member::{Member, Role, Runner};
use super::pki::Authority;
use crate::error::Result;
use crate::member::Placement;

/// The ensemble's tick. Servers accept session timeouts from 2 to 20 ticks,
/// so 200 ms allows 400 ms to 4 s and failovers stay quick.
pub const TICK: Duration = Duration::from_millis(200);

/// The ticks a follower may be silent before the ZooKeeper leader drops
/// it (and the leader before its followers give up on it): 2 s, which
/// keeps the ensemble steady on a loaded two-core machine. A replaced
/// leader may answer syncs for `(syncLimit + 1)` ticks (ZOOKEEPER-1675),
/// 2.2 s here, more than a third of the sessions most tests ask for (2 to
/// 4 s): elect warns of it at start, as it should. (With 2, the
/// window fitted 2 s sessions, but a ZooKeeper fault test in CI saw the
/// ensemble take over a second to settle after its leader was killed.)
pub const SYNC_LIMIT: u32 = 10;

/// The longest session a server grants: a minute, where ZooKeeper's
/// default (20 ticks) would clamp every session to 4 s, below the 6.6 s
/// from which this lab's timing fits elect's disconnection rule.
pub const MAX_SESSION: Duration = Duration::from_secs(60);

/// A small heap and a quick-starting JIT: several members share two cores.
/// Debian's log4j binding is on the class path, so members log at INFO to
/// their output (kept as `member.log`): without it SLF4J falls back to
/// logging nothing, and a session's expiry or a leader change leaves no
/// trace to read after a soak.
const JVM: &str = "-Xmx192m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
    -Dzookeeper.root.logger=INFO,CONSOLE -Dzookeeper.console.threshold=INFO \
    -cp /etc/zookeeper/conf:/usr/share/java/zookeeper.jar:/usr/share/java/netty-codec.jar:\
    /usr/share/java/netty-resolver.jar:/usr/share/java/netty-transport-native-unix-common.jar:\
    /usr/share/java/slf4j-log4j12.jar:/usr/share/java/log4j-1.2.jar";
const MAIN: &str = "org.apache.zookeeper.server.quorum.QuorumPeerMain";
/// Where Debian's package puts the server.
pub const JAR: &str = "/usr/share/java/zookeeper.jar";

/// The TLS client port of a secured server (the plain one stays 2181).
pub const SECURE_PORT: u16 = 2182;

/// Starts one server per host, each named `zk-<i>`. With an `authority`,
/// each also serves TLS clients on [`SECURE_PORT`] (Netty, PEM key and
/// trust stores), wanting a client certificate from the CA.
pub(crate) fn start(
    place: &Placement,
    hosts: &[String],
    authority: Option<&Authority>,
    sync_limit: u32,
) -> Result<Vec<Member>> {
    let servers: String = hosts
        .iter()
        .enumerate()
        .map(|(i, host)| format!("server.{}={host}:2888:3888\n", i + 1))
        .collect();
    let mut members = Vec::new();
    for (i, host) in hosts.iter().enumerate() {
        let id = i + 1;
        let name = format!("zk-{id}");
        let dir = place.dir.join(&name);
        std::fs::create_dir_all(&dir)?;
        if let Some(ca) = authority {
            let issued = ca.issue(&name, &[host.as_str(), "localhost"])?;
            // ZooKeeper's PEM key store holds the key and the certificate.
            let both =
                std::fs::read_to_string(&issued.key)? + &std::fs::read_to_string(&issued.cert)?;
            super::pki::write_private(&dir.join("server.pem"), &both)?;
            std::fs::copy(ca.ca(), dir.join("ca.pem"))?;
        }
        let config = |data: &str| {
            let member_dir = std::path::Path::new(data)
                .parent()
                .map(|p| p.display().to_string())
                .unwrap_or_default();
            let secure = match authority {
                None => String::new(),
                Some(_) => format!(
                    "secureClientPort={SECURE_PORT}\nsecureClientPortAddress={host}\n\
                     serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory\n\
                     ssl.keyStore.location={member_dir}/server.pem\nssl.keyStore.type=PEM\n\
                     ssl.trustStore.location={member_dir}/ca.pem\nssl.trustStore.type=PEM\n\
                     ssl.clientAuth=need\n"
                ),
            };
            format!(
                "tickTime={}\ninitLimit=50\nsyncLimit={sync_limit}\ndataDir={data}\nclientPort=2181\n\
                 clientPortAddress={host}\n4lw.commands.whitelist=*\n\
                 admin.enableServer=false\nstandaloneEnabled=false\nmaxClientCnxns=0\n\
                 maxSessionTimeout={}\n{secure}{servers}",
                TICK.as_millis(),
                MAX_SESSION.as_millis(),
            )
        };
        let runner = match &place.network {
            Some(network) => {
                let container = network.container(&format!("{}-{name}", place.id), host);
                let script = format!(
                    "mkdir -p /data/zk && echo {id} > /data/zk/myid && printf '{}' > /data/zoo.cfg \
                     && exec java {JVM} {MAIN} /data/zoo.cfg",
                    config("/data/zk").replace('\n', "\\n")
                );
                network.run(&container, &dir, &[], &["sh", "-c", &script])?;
                Runner::Container {
                    container,
                    cut: false,
                }
            }
            None => {
                let data = dir.join("data");
                std::fs::create_dir_all(&data)?;
                std::fs::write(data.join("myid"), format!("{id}\n"))?;
                let cfg = dir.join("zoo.cfg");
                std::fs::write(&cfg, config(&data.display().to_string()))?;
                let mut argv = vec!["java".to_owned()];
                argv.extend(JVM.split_whitespace().map(str::to_owned));
                argv.extend([MAIN.to_owned(), cfg.display().to_string()]);
                Member::spawn_process(argv, dir.join("member.log"))?
            }
        };
        members.push(Member {
            name,
            role: Role::Zk,
            client: match authority {
                Some(_) => format!("{host}:{SECURE_PORT}"),
                None => format!("{host}:2181"),
            },
            health: authority.map(|_| format!("{host}:2181")),
            dir,
            runner,
            stalled_by: None,
        });
    }
    Ok(members)
}

/// Whether the server at `client` serves as leader or follower.
pub fn healthy(client: &str) -> bool {
    let srvr = four_letter(client, "srvr");
    srvr.contains("Mode: leader") || srvr.contains("Mode: follower")
}

/// Whether the server at `client` is its ensemble's leader.
pub fn is_leader(client: &str) -> bool {
    four_letter(client, "srvr").contains("Mode: leader")
}

/// Whether every server of `endpoints` (TLS client addresses) opens a
/// session over TLS with the lab's client certificate.
pub fn serves_tls(endpoints: &str, security: &super::Security) -> bool {
    let Ok(tls) = elect::credentials::Tls::from_files(
        &security.ca,
        Some(&security.client.cert),
        Some(&security.client.key),
    ) else {
        return false;
    };
    let Ok(options) = elect::backend::zk_tls_options(&tls) else {
        return false;
    };
    let servers: Vec<String> = endpoints.split(',').map(str::to_owned).collect();
    let sessions = async move {
        for server in servers {
            let connecting = zookeeper_client::Client::connector()
                .with_tls(options.clone())
                .with_session_timeout(Duration::from_secs(4))
                .with_fail_eagerly()
                .secure_connect(&server);
            match tokio::time::timeout(Duration::from_secs(5), connecting).await {
                Ok(Ok(client)) => drop(client),
                _ => return false,
            }
        }
        true
    };
    crate::bridge::block_on(sessions).unwrap_or(false)
}

/// One four-letter-word exchange; empty on any failure.
pub fn four_letter(addr: &str, word: &str) -> String {
    // Bounded everywhere: a member cut off or frozen must not hold the
    // caller (the soak's dealing thread asks who leads before each fault).
    let timeout = Duration::from_secs(2);
    let Some(sock) = std::net::ToSocketAddrs::to_socket_addrs(addr)
        .ok()
        .and_then(|mut a| a.next())
    else {
        return String::new();
    };
    let Ok(mut stream) = TcpStream::connect_timeout(&sock, timeout) else {
        return String::new();
    };
    let _ = stream.set_read_timeout(Some(timeout));
    let _ = stream.set_write_timeout(Some(timeout));
    let mut answer = String::new();
    if stream.write_all(word.as_bytes()).is_ok() {
        let _ = stream.read_to_string(&mut answer);
    }
    answer
}

/// The server's `mntr` numbers by name (`zk_packets_received`...).
pub fn mntr(client: &str) -> std::collections::BTreeMap<String, f64> {
    four_letter(client, "mntr")
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once('\t')?;
            Some((k.to_owned(), v.trim().parse().ok()?))
        })
        .collect()
}
