//! Containers on private Docker networks, driven through the `docker` CLI.
//!
//! The images come from `deploy/images/build.sh` (no registry is needed).
//! Containers run `elect-base:bookworm` with the `elect` binary under test
//! bind-mounted, so a code change never waits for an image rebuild. Every
//! network and container carries the label `elect-test`, so `deploy/test.sh`
//! can remove what a killed test run left behind.

use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use super::elect::{BIN, Proc};

pub const IMAGE: &str = "elect-base:bookworm";
const LABEL: &str = "elect-test";

/// Runs `docker args...`; panics with its stderr if it fails.
pub fn docker(args: &[&str]) -> String {
    let out = docker_output(args);
    assert!(
        out.status.success(),
        "docker {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn docker_output(args: &[&str]) -> Output {
    Command::new("docker")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("the docker CLI is installed (or set ELECT_TEST_MODE=processes)")
}

/// Panics loudly unless the engine answers and the base image exists.
pub fn require_engine() {
    let out = docker_output(&["image", "inspect", "--format", "{{.Id}}", IMAGE]);
    if !out.status.success() {
        let info = docker_output(&["info", "--format", "{{.ServerVersion}}"]);
        if !info.status.success() {
            panic!(
                "container mode: the Docker engine is not usable ({}); start it, or run the \
                 suite in process mode with ELECT_TEST_MODE=processes",
                String::from_utf8_lossy(&info.stderr).trim()
            );
        }
        panic!("container mode: image {IMAGE} is missing; build it with deploy/images/build.sh");
    }
}

/// A user-defined bridge network of our own; removed on drop.
pub struct Network {
    pub name: String,
    /// The first three octets of the network's subnet, e.g. `172.19.0`.
    prefix: String,
}

impl Network {
    /// Creates the network on a /24 of Docker's own default address pool
    /// (172.18-31.x.0), trying another when one is taken (parallel tests).
    /// A subnet of our choosing is what lets members have fixed addresses.
    pub fn create(purpose: &str) -> Network {
        require_engine();
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "elect-{purpose}-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let mut seed = std::process::id().wrapping_mul(2_654_435_761)
            ^ std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .subsec_nanos();
        let mut failures = Vec::new();
        for _ in 0..20 {
            seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            let prefix = format!("172.{}.{}", 18 + (seed >> 8) % 14, (seed >> 16) % 256);
            let subnet = format!("{prefix}.0/24");
            let out = docker_output(&[
                "network", "create", "--label", LABEL, "--subnet", &subnet, &name,
            ]);
            if out.status.success() {
                return Network { name, prefix };
            }
            failures.push(String::from_utf8_lossy(&out.stderr).trim().to_owned());
        }
        panic!("no free subnet for network {name}: {failures:?}");
    }

    /// The address host number `n` gets on this network.
    pub fn ip(&self, n: u8) -> String {
        format!("{}.{n}", self.prefix)
    }

    /// Starts a detached container `<network>-<name>` at host number `n`,
    /// running `command` (argv) in the base image with `elect` mounted and
    /// the host directory `data` as `/data`, so that a member killed and
    /// started again (`Container::start`) finds its state, as a restarted
    /// server would.
    pub fn run(&self, name: &str, n: u8, data: &std::path::Path, command: &[&str]) -> Container {
        let container = self.container(name, n);
        std::fs::create_dir_all(data).unwrap();
        let mut args: Vec<String> = vec!["run".into(), "-d".into()];
        args.extend(container.run_options(name));
        args.extend(["-v".into(), format!("{}:/data", data.display())]);
        args.extend(["--entrypoint".into(), command[0].into(), IMAGE.into()]);
        args.extend(command[1..].iter().map(|a| a.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = docker_output(&args);
        if !out.status.success() {
            // `docker run` may have created the container before failing.
            let _ = docker_output(&["rm", "-f", &container.name]);
            panic!(
                "docker {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        container
    }

    /// The container `<network>-<name>` at host number `n` (not started).
    fn container(&self, name: &str, n: u8) -> Container {
        Container {
            name: format!("{}-{name}", self.name),
            network: self.name.clone(),
            ip: self.ip(n),
        }
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        let _ = docker_output(&["network", "rm", &self.name]);
    }
}

/// One container; removed (with its logs kept if the test failed) on drop.
pub struct Container {
    pub name: String,
    network: String,
    pub ip: String,
}

impl Container {
    /// `docker run` options every container of ours gets: its name, host
    /// name, label, network and address, and the `elect` under test.
    fn run_options(&self, hostname: &str) -> Vec<String> {
        [
            "--name",
            &self.name,
            "--hostname",
            hostname,
            "--label",
            LABEL,
            "--network",
            &self.network,
            "--ip",
            &self.ip,
            "-v",
            &format!("{BIN}:/usr/local/bin/elect:ro"),
        ]
        .map(str::to_owned)
        .into()
    }

    /// SIGKILL to the container's main process, as a crash would.
    pub fn kill(&self) {
        let _ = docker_output(&["kill", &self.name]);
    }

    /// Starts a killed container again, at the same address.
    pub fn start(&self) {
        docker(&["start", &self.name]);
    }

    /// Freezes every process of the container (cgroup freezer).
    pub fn pause(&self) {
        docker(&["pause", &self.name]);
    }

    pub fn unpause(&self) {
        docker(&["unpause", &self.name]);
    }

    /// Takes the container off its network: its peers' packets go nowhere.
    pub fn disconnect(&self) {
        docker(&["network", "disconnect", &self.network, &self.name]);
    }

    /// Puts it back, at the same address.
    pub fn connect(&self) {
        docker(&[
            "network",
            "connect",
            "--ip",
            &self.ip,
            &self.network,
            &self.name,
        ]);
    }

    /// The host pid of the container's first process.
    pub fn host_pid(&self) -> i32 {
        docker(&["inspect", "--format", "{{.State.Pid}}", &self.name])
            .parse()
            .expect("a running container has a pid")
    }

    /// Runs `command` inside the container.
    pub fn exec(&self, command: &[&str]) -> Output {
        let mut args = vec!["exec", self.name.as_str()];
        args.extend_from_slice(command);
        docker_output(&args)
    }

    /// Copies the container's output to `path`.
    pub fn save_logs(&self, path: &std::path::Path) {
        let out = docker_output(&["logs", &self.name]);
        let mut text = out.stdout;
        text.extend_from_slice(&out.stderr);
        let _ = std::fs::write(path, text);
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = docker_output(&["rm", "-f", "-v", &self.name]);
    }
}

/// `elect` in a container of its own, attached: its stdout lines reach the
/// test through `proc` (the `docker run` client, which forwards signals).
/// Fields drop in order: `elect` gets SIGTERM first, then the container goes.
pub struct ElectContainer {
    pub proc: Proc,
    pub container: Container,
}

impl Network {
    /// Runs `elect args...` as `name` at host number `n` on this network.
    pub fn elect(&self, name: &str, n: u8, args: &[&str]) -> ElectContainer {
        let container = self.container(name, n);
        let mut cmd = Command::new("docker");
        cmd.arg("run")
            .args(container.run_options(name))
            .args(["--tmpfs", "/data"])
            .args(["-e", "RUST_LOG=elect=debug,warn"])
            .args(["--entrypoint", "/usr/local/bin/elect", IMAGE])
            .args(args);
        ElectContainer {
            proc: Proc::spawn(name, cmd),
            container,
        }
    }
}

impl ElectContainer {
    /// Host pids of what `elect` started in the container: the watchdog
    /// and the wrapped command's tree, `elect` itself excluded.
    pub fn command_tree(&self) -> Vec<i32> {
        let elect = super::eventually("the container's pid", Duration::from_secs(10), || {
            let out = docker_output(&[
                "inspect",
                "--format",
                "{{.State.Pid}}",
                &self.container.name,
            ]);
            String::from_utf8_lossy(&out.stdout)
                .trim()
                .parse::<i32>()
                .ok()
                .filter(|&pid| pid > 0)
        });
        super::proc::descendants(elect)
    }
}
