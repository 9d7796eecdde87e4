//! What tests add to the lab's containers: `elect` itself in a container
//! (the binary under test bind-mounted, so a code change never waits for an
//! image rebuild), networks of a test's own, and panicking `docker` calls.
//! Everything here carries the label `elect-test`, so `deploy/test.sh` can
//! remove what a killed test run left behind.

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

pub use elect_lab::docker::{Container, IMAGE, Network};

use super::elect::{BIN, Proc};

const LABEL: &str = "elect-test";

/// Runs `docker args...`; panics with its stderr if it fails.
pub fn docker(args: &[&str]) -> String {
    elect_lab::docker::docker(args).unwrap_or_else(|e| panic!("{e}"))
}

/// A network of a test's own (not a lab's); removed on drop.
pub struct TestNetwork(pub Network);

impl TestNetwork {
    pub fn create(purpose: &str) -> TestNetwork {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "elect-{purpose}-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        TestNetwork(Network::create(&name, LABEL).unwrap_or_else(|e| panic!("{e}")))
    }
}

impl std::ops::Deref for TestNetwork {
    type Target = Network;
    fn deref(&self) -> &Network {
        &self.0
    }
}

impl Drop for TestNetwork {
    fn drop(&mut self) {
        let _ = self.0.remove();
    }
}

/// `elect` in a container of its own, attached: its stdout lines reach the
/// test through `proc` (the `docker run` client, which forwards signals).
/// Fields drop in order: `elect` gets SIGTERM first, then the container goes.
pub struct ElectContainer {
    pub proc: Proc,
    pub container: Removed,
}

/// A container removed when dropped.
pub struct Removed(pub Container);

impl std::ops::Deref for Removed {
    type Target = Container;
    fn deref(&self) -> &Container {
        &self.0
    }
}

impl Drop for Removed {
    fn drop(&mut self) {
        self.0.remove();
    }
}

impl Removed {
    /// Takes the container off its network; panics if docker fails.
    pub fn disconnect(&self) {
        self.0.disconnect().unwrap_or_else(|e| panic!("{e}"));
    }

    /// Puts it back, at the same address.
    pub fn connect(&self) {
        self.0.connect().unwrap_or_else(|e| panic!("{e}"));
    }
}

/// Runs `elect args...` as `name` at host number `n` on `network`.
pub fn elect(network: &Network, name: &str, n: u8, args: &[&str]) -> ElectContainer {
    let container = network.container(&format!("{}-{name}", network.name), &network.ip(n));
    let mut cmd = Command::new("docker");
    cmd.arg("run")
        .args(container.run_options())
        .args(["--label", LABEL])
        .args(["-v", &format!("{BIN}:/usr/local/bin/elect:ro")])
        .args(["--tmpfs", "/data"])
        .args(["-e", "RUST_LOG=elect=debug,warn"])
        .args(["--entrypoint", "/usr/local/bin/elect", IMAGE])
        .args(args)
        .stdin(Stdio::null());
    ElectContainer {
        proc: Proc::spawn(name, cmd),
        container: Removed(container),
    }
}

impl ElectContainer {
    /// Host pids of what `elect` started in the container: the watchdog
    /// and the wrapped command's tree, `elect` itself excluded.
    pub fn command_tree(&self) -> Vec<i32> {
        let elect = super::eventually("the container's pid", Duration::from_secs(10), || {
            self.container.host_pid().ok().filter(|&pid| pid > 0)
        });
        super::proc::descendants(elect)
    }
}
