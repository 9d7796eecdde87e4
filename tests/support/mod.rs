//! Test support: real ensembles, real `elect` processes, and a few probes.
//!
//! Nothing here mocks a coordination service: [`etcd::Cluster`] and
//! [`zk::Ensemble`] start real etcd and ZooKeeper members from the Debian
//! packages and tear them down on drop (also when a test panics). Where they
//! run is the [`Mode`]: containers on a private Docker network (the default,
//! and what CI runs), or local processes on their own loopback addresses
//! (`ELECT_TEST_MODE=processes`, for machines without Docker).
#![allow(dead_code)]

pub mod docker;
pub mod elect;
pub mod etcd;
pub mod fault;
pub mod proc;
pub mod raft;
pub mod zk;

use std::time::{Duration, Instant};

/// Polls `probe` every 10 ms until it returns `Some`, or panics with `what`
/// after `within`.
pub fn eventually<T>(what: &str, within: Duration, mut probe: impl FnMut() -> Option<T>) -> T {
    let until = Instant::now() + within;
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(
            Instant::now() < until,
            "timed out after {within:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Where the ensembles of this test run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Each member in its own container; faults by `docker kill`, `pause`
    /// and `network disconnect`.
    Containers,
    /// Each member a child process on its own `127.a.b.x` address.
    Processes,
}

/// The mode `ELECT_TEST_MODE` chooses: `containers` unless it says
/// `processes`. Never falls back silently: container mode panics if Docker
/// is unusable.
pub fn mode() -> Mode {
    match std::env::var("ELECT_TEST_MODE").as_deref() {
        Err(_) | Ok("") | Ok("containers") => Mode::Containers,
        Ok("processes") => Mode::Processes,
        Ok(other) => panic!("ELECT_TEST_MODE={other:?}: expected containers or processes"),
    }
}

/// For tests that only make sense with containers (network disconnects,
/// `docker pause`): true in container mode; in process mode says why the
/// test does nothing and returns false.
pub fn containers_only(test: &str) -> bool {
    if mode() == Mode::Containers {
        return true;
    }
    eprintln!("{test}: needs container mode (ELECT_TEST_MODE=containers); skipped");
    false
}

/// Where one ensemble member runs.
pub enum Node {
    Process {
        child: Option<std::process::Child>,
        /// What started it, to start it again after a kill.
        command: std::process::Command,
    },
    Container(docker::Container),
}

impl Node {
    /// Spawns `command` as a member process.
    pub fn spawn(mut command: std::process::Command, what: &str) -> Node {
        let child = command.spawn().unwrap_or_else(|e| {
            panic!("starting {what}: {e}; run the README's test command to install it")
        });
        Node::Process {
            child: Some(child),
            command,
        }
    }

    /// SIGKILL to the member, as a crash would.
    pub fn kill(&mut self) {
        match self {
            Node::Process { child, .. } => kill_and_reap(child),
            Node::Container(c) => c.kill(),
        }
    }

    /// Starts a killed member again on its own data, as a restarted server.
    pub fn restart(&mut self) {
        match self {
            Node::Process { child, command } => {
                assert!(child.is_none(), "restarting a member that runs");
                *child = Some(command.spawn().expect("the member starts again"));
            }
            Node::Container(c) => c.start(),
        }
    }

    /// Freezes the member (SIGSTOP, or `docker pause`).
    pub fn pause(&self) {
        self.freeze(true);
    }

    /// Lets a frozen member go on.
    pub fn resume(&self) {
        self.freeze(false);
    }

    fn freeze(&self, frozen: bool) {
        use nix::sys::signal::Signal::{SIGCONT, SIGSTOP};
        match (self, frozen) {
            (
                Node::Process {
                    child: Some(child), ..
                },
                _,
            ) => signal_pid(child.id() as i32, if frozen { SIGSTOP } else { SIGCONT }),
            (Node::Process { child: None, .. }, _) => {}
            (Node::Container(c), true) => c.pause(),
            (Node::Container(c), false) => c.unpause(),
        }
    }

    /// The member's container; panics in process mode.
    pub fn container(&self) -> &docker::Container {
        match self {
            Node::Container(c) => c,
            Node::Process { .. } => panic!("a container-only fault in process mode"),
        }
    }

    /// Stops the member; a container's output is saved to `log` first if
    /// the test failed (a process writes its log there all along).
    pub fn stop(&mut self, log: &std::path::Path) {
        match self {
            Node::Process { child, .. } => kill_and_reap(child),
            Node::Container(c) if std::thread::panicking() => c.save_logs(log),
            Node::Container(_) => {}
        }
    }
}

/// Where the three members of an ensemble live: in container mode a
/// network of their own (`purpose` names it) with members at host numbers
/// `first + 1..=first + 3`; in process mode three `127.a.b.x` addresses.
pub fn member_hosts(purpose: &str, first: u8) -> (Option<docker::Network>, Vec<String>) {
    match mode() {
        Mode::Containers => {
            let network = docker::Network::create(purpose);
            let hosts = (1..=3).map(|i| network.ip(first + i)).collect();
            (Some(network), hosts)
        }
        Mode::Processes => {
            let net = loopback_net();
            (None, (1..=3).map(|i| format!("{net}.{i}")).collect())
        }
    }
}

/// A loopback network of our own: `127.<a>.<b>.x`, chosen per test process
/// so parallel tests never share an address or a port.
pub fn loopback_net() -> String {
    let seed = std::process::id() as u64
        ^ (std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos() as u64)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let a = 1 + (seed % 250);
    let b = 1 + ((seed >> 8) % 250);
    format!("127.{a}.{b}")
}

pub fn signal_pid(pid: i32, sig: nix::sys::signal::Signal) {
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig);
}

/// Kills (SIGKILL) and reaps the process in `slot`, if any.
pub fn kill_and_reap(slot: &mut Option<std::process::Child>) {
    if let Some(mut p) = slot.take() {
        let _ = p.kill();
        let _ = p.wait();
    }
}

/// Removes a launcher's directory, unless the test failed: then its logs
/// are kept and named.
pub fn remove_unless_panicking(dir: &std::path::Path, what: &str) {
    if std::thread::panicking() {
        eprintln!("{what} logs kept in {}", dir.display());
    } else {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// The value after `--name` in a benchmark's arguments.
pub fn bench_arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

/// `GET path` from an HTTP/1.1 server at `addr`: the status code and body
/// (status 0 when nothing answers).
pub fn http_get(addr: &str, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(addr) else {
        return (0, String::new());
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let request = format!("GET {path} HTTP/1.1\r\nHost: elect\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return (0, String::new());
    }
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}
