//! Containers on private Docker networks, driven through the `docker` CLI.
//!
//! Images come from `deploy/images/build.sh` (built from Debian packages, so
//! no registry is needed). Every network and container carries the label
//! [`LABEL`] with the lab's id as its value, so whatever an interrupted run
//! left behind can be found and removed.

use std::process::{Command, Output, Stdio};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The image lab members run: Debian bookworm with etcd, ZooKeeper and a JRE.
pub const IMAGE: &str = "elect-base:bookworm";
/// The label on everything the lab creates; its value is the lab's id.
pub const LABEL: &str = "elect-lab";

/// Runs `docker args...`; its stdout, trimmed, or an error with its stderr.
pub fn docker(args: &[&str]) -> Result<String> {
    let out = docker_output(args)?;
    if !out.status.success() {
        return Err(Error::Docker {
            command: args.join(" "),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn docker_output(args: &[&str]) -> Result<Output> {
    Command::new("docker")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| Error::Missing {
            what: format!("the docker CLI ({e})"),
            hint: "install Docker, or use local processes (without --containers)".into(),
        })
}

/// Fails with a clear error unless the engine answers and [`IMAGE`] exists.
pub fn require_engine() -> Result<()> {
    if docker(&["image", "inspect", "--format", "{{.Id}}", IMAGE]).is_ok() {
        return Ok(());
    }
    if let Err(e) = docker(&["info", "--format", "{{.ServerVersion}}"]) {
        return Err(Error::Missing {
            what: format!("a usable Docker engine ({e})"),
            hint: "start the engine, or use local processes (without --containers)".into(),
        });
    }
    Err(Error::Missing {
        what: format!("the image {IMAGE}"),
        hint: "build it with deploy/images/build.sh (from Debian packages; no registry needed)"
            .into(),
    })
}

/// Fails with `hint` unless `image` exists.
pub fn require_image(image: &str, hint: String) -> Result<()> {
    match docker(&["image", "inspect", "--format", "{{.Id}}", image]) {
        Ok(_) => Ok(()),
        Err(_) => Err(Error::Missing {
            what: format!("the image {image}"),
            hint,
        }),
    }
}

/// A user-defined bridge network of the lab's own, on a /24 it chose.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Network {
    /// The network's name.
    pub name: String,
    /// The first three octets of its subnet, e.g. `172.19.0`.
    pub prefix: String,
    /// The lab id its label carries.
    pub lab: String,
}

impl Network {
    /// Creates `name` on a /24 of Docker's default address pool
    /// (172.18-31.x.0), trying another when one is taken: a subnet of our
    /// choosing is what gives members fixed addresses, so a member killed
    /// and started again comes back where its peers expect it.
    pub fn create(name: &str, lab: &str) -> Result<Network> {
        require_engine()?;
        let mut seed = std::process::id().wrapping_mul(2_654_435_761)
            ^ std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .subsec_nanos();
        let label = format!("{LABEL}={lab}");
        let mut last = None;
        for _ in 0..20 {
            seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            let prefix = format!("172.{}.{}", 18 + (seed >> 8) % 14, (seed >> 16) % 256);
            let subnet = format!("{prefix}.0/24");
            match docker(&[
                "network", "create", "--label", &label, "--subnet", &subnet, name,
            ]) {
                Ok(_) => {
                    return Ok(Network {
                        name: name.to_owned(),
                        prefix,
                        lab: lab.to_owned(),
                    });
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.expect("at least one attempt"))
    }

    /// The address host number `n` gets on this network.
    pub fn ip(&self, n: u8) -> String {
        format!("{}.{n}", self.prefix)
    }

    /// The container `name` at address `ip` on this network (not started:
    /// see [`Network::run`]).
    pub fn container(&self, name: &str, ip: &str) -> Container {
        Container {
            name: name.to_owned(),
            network: self.name.clone(),
            ip: ip.to_owned(),
            lab: self.lab.clone(),
        }
    }

    /// Starts `container` detached, running `command` (argv) in [`IMAGE`]
    /// with the host directory `data` as `/data` (so a member started again
    /// finds its state) and `extra` options before the image.
    pub fn run(
        &self,
        container: &Container,
        data: &std::path::Path,
        extra: &[String],
        command: &[&str],
    ) -> Result<()> {
        self.run_image(IMAGE, container, data, extra, command)
    }

    /// [`Network::run`] in `image` (an etcd release's, see
    /// [`EtcdRelease::image`](crate::EtcdRelease::image)).
    pub fn run_image(
        &self,
        image: &str,
        container: &Container,
        data: &std::path::Path,
        extra: &[String],
        command: &[&str],
    ) -> Result<()> {
        std::fs::create_dir_all(data)?;
        let mut args: Vec<String> = vec!["run".into(), "-d".into()];
        args.extend(container.run_options());
        args.extend(["-v".into(), format!("{}:/data", data.display())]);
        args.extend(extra.iter().cloned());
        args.extend(["--entrypoint".into(), command[0].into(), image.into()]);
        args.extend(command[1..].iter().map(|a| a.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        docker(&args).map(drop).inspect_err(|_| {
            // `docker run` may have created the container before failing.
            container.remove();
        })
    }

    /// Removes the network (its containers must be gone).
    pub fn remove(&self) -> Result<()> {
        docker(&["network", "rm", &self.name]).map(drop)
    }
}

/// One container of the lab's.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Container {
    /// The container's name.
    pub name: String,
    /// The network it is attached to.
    pub network: String,
    /// Its fixed address there.
    pub ip: String,
    lab: String,
}

impl Container {
    /// `docker run` options every lab container gets: its name, host name,
    /// label, network and address.
    pub fn run_options(&self) -> Vec<String> {
        [
            "--name",
            &self.name,
            "--hostname",
            &self.name,
            "--label",
            &format!("{LABEL}={}", self.lab),
            "--network",
            &self.network,
            "--ip",
            &self.ip,
        ]
        .map(str::to_owned)
        .into()
    }

    /// SIGKILL to the container's main process, as a crash would.
    pub fn kill(&self) -> Result<()> {
        docker(&["kill", &self.name]).map(drop)
    }

    /// Starts a killed container again, at the same address.
    pub fn start(&self) -> Result<()> {
        docker(&["start", &self.name]).map(drop)
    }

    /// Freezes every process of the container (cgroup freezer). A freeze
    /// that times out ("unable to freeze": a process busy in the kernel,
    /// a JVM's fsync on a loaded disk) leaves the container running, as
    /// runc thaws it again; it is tried again, a few times.
    pub fn pause(&self) -> Result<()> {
        let mut tries = 0;
        loop {
            match docker(&["pause", &self.name]) {
                Err(Error::Docker { stderr, .. })
                    if stderr.contains("unable to freeze") && tries < 4 =>
                {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(200));
                }
                done => return done.map(drop),
            }
        }
    }

    /// Lets a paused container go on.
    pub fn unpause(&self) -> Result<()> {
        docker(&["unpause", &self.name]).map(drop)
    }

    /// Takes the container off its network: its peers' packets go nowhere.
    pub fn disconnect(&self) -> Result<()> {
        docker(&["network", "disconnect", &self.network, &self.name]).map(drop)
    }

    /// Puts it back, at the same address.
    pub fn connect(&self) -> Result<()> {
        docker(&[
            "network",
            "connect",
            "--ip",
            &self.ip,
            &self.network,
            &self.name,
        ])
        .map(drop)
    }

    /// Drops every packet between this container and `peer` (both ways,
    /// with a blackhole route on each side), while both still reach
    /// everyone else, the host's clients included: a partition inside the
    /// ensemble that clients do not see.
    pub fn partition_from(&self, peer: &Container) -> Result<()> {
        self.route(&peer.ip, "add")?;
        peer.route(&self.ip, "add")
    }

    /// Undoes [`partition_from`](Self::partition_from).
    pub fn mend_partition_from(&self, peer: &Container) -> Result<()> {
        let mine = self.route(&peer.ip, "del");
        peer.route(&self.ip, "del").and(mine)
    }

    /// `ip route add|del blackhole IP/32` in the container's network
    /// namespace, entered from the host with `nsenter` (the image's own
    /// `ip`, through its mount namespace). Needs root: the members hold no
    /// network capabilities, and `docker exec --privileged` is refused
    /// where the engine itself runs without every capability.
    fn route(&self, ip: &str, verb: &str) -> Result<()> {
        let pid = self.host_pid()?.to_string();
        let target = format!("{ip}/32");
        let argv = [
            "-t",
            &pid,
            "-n",
            "-m",
            "ip",
            "route",
            verb,
            "blackhole",
            &target,
        ];
        let failed = |stderr: String| Error::Docker {
            command: format!("nsenter {}", argv.join(" ")),
            stderr,
        };
        let out = Command::new("nsenter")
            .args(argv)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| failed(e.to_string()))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(failed(
                String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            ))
        }
    }

    /// `running`, `paused`, `exited`... or `missing`.
    pub fn state(&self) -> String {
        docker(&["inspect", "--format", "{{.State.Status}}", &self.name])
            .unwrap_or_else(|_| "missing".into())
    }

    /// The host pid of the container's first process.
    pub fn host_pid(&self) -> Result<i32> {
        let pid = docker(&["inspect", "--format", "{{.State.Pid}}", &self.name])?;
        pid.parse().map_err(|_| Error::Docker {
            command: format!("inspect {}", self.name),
            stderr: format!("no pid in {pid:?}"),
        })
    }

    /// The container's output so far.
    pub fn logs(&self) -> Vec<u8> {
        let Ok(out) = docker_output(&["logs", &self.name]) else {
            return Vec::new();
        };
        let mut text = out.stdout;
        text.extend_from_slice(&out.stderr);
        text
    }

    /// Removes the container and its anonymous volumes, running or not.
    pub fn remove(&self) {
        let _ = docker_output(&["rm", "-f", "-v", &self.name]);
    }
}

/// Removes every container and network labelled as lab `lab`'s: what a
/// killed run left behind.
pub fn remove_all(lab: &str) {
    let filter = format!("label={LABEL}={lab}");
    if let Ok(ids) = docker(&["ps", "-aq", "--filter", &filter]) {
        for id in ids.split_whitespace() {
            let _ = docker_output(&["rm", "-f", "-v", id]);
        }
    }
    if let Ok(ids) = docker(&["network", "ls", "-q", "--filter", &filter]) {
        for id in ids.split_whitespace() {
            let _ = docker_output(&["network", "rm", id]);
        }
    }
}
