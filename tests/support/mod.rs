//! Test support: what only tests need on top of the library's lab.
//!
//! Nothing here mocks a coordination service: [`etcd::Cluster`] and
//! [`zk::Ensemble`] are `::elect_lab` labs of real etcd and ZooKeeper
//! members, torn down on drop (their logs kept when a test panics). Where
//! they run is the [`Mode`]: containers on a private Docker network (the
//! default, and what CI runs), or local processes on their own loopback
//! addresses (`ELECT_TEST_MODE=processes`, for machines without Docker).
#![allow(dead_code)]

pub mod docker;
pub mod elect;
pub mod etcd;
pub mod proc;
pub mod raft;
pub mod zk;

use std::time::Duration;

/// Polls `probe` every 10 ms until it returns `Some`, or panics with `what`
/// after `within` (the lab's [`elect_lab::poll`], failing the test).
pub fn eventually<T>(what: &str, within: Duration, probe: impl FnMut() -> Option<T>) -> T {
    ::elect_lab::poll(within, probe)
        .unwrap_or_else(|| panic!("timed out after {within:?} waiting for {what}"))
}

/// Where the ensembles of this test run: each member in its own container
/// (faults by `docker kill`, `pause` and `network disconnect`), or a child
/// process on its own `127.a.b.x` address.
pub use ::elect_lab::Mode;

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

/// Faults on a lab member that panic on failure, as tests want them.
pub trait MemberExt {
    /// SIGKILL to the member, as a crash would.
    fn kill(&mut self);
    /// Starts a killed member again on its own data.
    fn restart(&mut self);
}

impl MemberExt for ::elect_lab::Member {
    fn kill(&mut self) {
        let name = self.name.clone();
        self.apply(::elect_lab::Fault::Kill)
            .unwrap_or_else(|e| panic!("killing {name}: {e}"));
    }

    fn restart(&mut self) {
        let name = self.name.clone();
        self.apply(::elect_lab::Fault::Restart)
            .unwrap_or_else(|e| panic!("restarting {name}: {e}"));
    }
}

pub use ::elect_lab::loopback_net;

pub fn signal_pid(pid: i32, sig: nix::sys::signal::Signal) {
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig);
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
    ::elect_lab::http_get(addr, path, Duration::from_secs(5))
}

/// The value of an unlabelled metric sample that `addr`'s `/metrics`
/// serves.
pub fn metric(addr: &str, name: &str) -> f64 {
    let (code, text) = http_get(addr, "/metrics");
    assert_eq!(code, 200, "/metrics: {text}");
    text.lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in\n{text}"))
}

/// The containment levels (`--contain`) this machine gives, strongest
/// first; each one the machine refuses is named on stderr, with why.
pub fn containment_levels() -> Vec<&'static str> {
    ["pidns", "cgroup", "subreaper"]
        .into_iter()
        .filter(|level| {
            let probe = std::process::Command::new(elect::BIN)
                .args(["__contain-probe", level])
                .output()
                .expect("the elect binary runs");
            if !probe.status.success() {
                eprintln!(
                    "--contain {level} is not available here ({}); its cases are skipped",
                    String::from_utf8_lossy(&probe.stderr).trim()
                );
            }
            probe.status.success()
        })
        .collect()
}

/// The arguments of `container` in a Kubernetes manifest, as written
/// there (its `args:` list, one `- ` item per line).
pub fn manifest_args<'a>(manifest: &'a str, container: &str) -> Vec<&'a str> {
    manifest
        .split(&format!("- name: {container}\n"))
        .nth(1)
        .unwrap_or_else(|| panic!("no container {container}"))
        .split("args:")
        .nth(1)
        .expect("its args")
        .lines()
        .skip(1)
        .map_while(|l| l.trim().strip_prefix("- "))
        .collect()
}
