//! Test support: real ensembles, real `elect` processes, and a few probes.
//!
//! Nothing here mocks a coordination service: [`etcd::Cluster`] and
//! [`zk::Ensemble`] start real etcd and ZooKeeper members from the Debian
//! packages, each on its own loopback address, and tear them down on drop
//! (also when a test panics).
#![allow(dead_code)]

pub mod elect;
pub mod etcd;
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
