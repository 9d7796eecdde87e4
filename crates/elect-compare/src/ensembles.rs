//! Where the backends run: ensembles the lab starts (local processes or
//! containers), or those the user names; a backend whose ensemble cannot
//! start is reported as not run, with how to enable it.

use std::cell::RefCell;

use elect::Backend;
use elect_lab::{self, Lab, Mode, Role, Spec};

use crate::plan::Plan;

/// Where the backends run.
pub(crate) struct Ensembles {
    /// The lab, where compare started one.
    pub(crate) lab: Option<RefCell<Lab>>,
    etcd: Result<String, String>,
    zk: Result<String, String>,
    /// The members' plain addresses (health, metrics, four-letter words),
    /// where they differ from the client endpoints (a secured lab).
    etcd_plain: Option<String>,
    zk_plain: Option<String>,
    /// A secured lab's credentials.
    pub(crate) security: Option<elect_lab::Security>,
}

/// How long a named member may take to accept a connection.
const REACH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

/// Whether some member of `endpoints` (checked `host:port,...`, a
/// ZooKeeper chroot after the list) accepts a TCP connection within
/// [`REACH_TIMEOUT`]: a named ensemble nobody answers at fails the run at
/// once instead of trials waiting on it one by one.
fn accepts_connections(endpoints: &str) -> Result<(), String> {
    use std::net::ToSocketAddrs;
    let hosts = endpoints.split('/').next().unwrap_or(endpoints);
    let mut last = String::from("no address");
    for member in hosts.split(',').map(str::trim) {
        let member = member.trim_start_matches("http://").trim_end_matches('/');
        let addrs = match member.to_socket_addrs() {
            Ok(a) => a,
            Err(e) => {
                last = format!("{member}: {e}");
                continue;
            }
        };
        for addr in addrs {
            match std::net::TcpStream::connect_timeout(&addr, REACH_TIMEOUT) {
                Ok(_) => return Ok(()),
                Err(e) => last = format!("{addr}: {e}"),
            }
        }
    }
    Err(format!(
        "no member of {endpoints} accepts connections ({last})"
    ))
}

impl Ensembles {
    /// The ensembles `plan` names, and those it needs started: a lab of
    /// three members per backend. A backend whose ensemble cannot start
    /// is given the reason, for the table's "not run" lines.
    ///
    /// # Errors
    /// Only an interrupt (Ctrl-C) while the lab starts.
    pub(crate) fn prepare(plan: &Plan) -> anyhow::Result<Ensembles> {
        let wants = |b| plan.backends.contains(&b);
        let named = |e: &Option<String>| e.clone().ok_or_else(|| "not started".to_owned());
        let mut ens = Ensembles {
            etcd_plain: None,
            zk_plain: None,
            security: None,
            lab: None,
            etcd: named(&plan.etcd_endpoints),
            zk: named(&plan.zk_endpoints),
        };
        for (flag, given) in [
            ("--etcd-endpoints", &plan.etcd_endpoints),
            ("--zk-endpoints", &plan.zk_endpoints),
        ] {
            if let Some(endpoints) = given {
                accepts_connections(endpoints).map_err(|why| anyhow::anyhow!("{flag}: {why}"))?;
            }
        }
        let mut etcd = usize::from(wants(Backend::Etcd) && plan.etcd_endpoints.is_none()) * 3;
        let mut zk = usize::from(wants(Backend::Zk) && plan.zk_endpoints.is_none()) * 3;
        if plan.mode == Mode::Processes {
            ens.check_programs(&mut etcd, &mut zk);
        }
        if etcd + zk > 0 {
            ens.start_lab(plan, etcd, zk)?;
        }
        Ok(ens)
    }

    /// Process mode needs the programs: says what is missing per backend
    /// (and starts none of it) rather than giving up on both.
    fn check_programs(&mut self, etcd: &mut usize, zk: &mut usize) {
        if *etcd > 0 {
            match elect_lab::EtcdRelease::chosen() {
                Err(e) => {
                    self.etcd = Err(e.to_string());
                    *etcd = 0;
                }
                Ok(release) if release.version.is_none() => {
                    self.etcd = Err(
                        "etcd is not installed: apt-get install etcd-server, or use --containers, \
                         or pass --etcd-endpoints"
                            .into(),
                    );
                    *etcd = 0;
                }
                Ok(_) => {}
            }
        }
        let java = elect_lab::which("java").is_some();
        if *zk > 0 && (!java || !std::path::Path::new(elect_lab::zk::JAR).exists()) {
            self.zk = Err(
                "ZooKeeper is not installed: apt-get install zookeeper (and a Java runtime), \
                 or use --containers, or pass --zk-endpoints"
                    .into(),
            );
            *zk = 0;
        }
    }

    /// Starts `etcd` and `zk` members in a lab of compare's own.
    fn start_lab(&mut self, plan: &Plan, etcd: usize, zk: usize) -> anyhow::Result<()> {
        let mut spec = Spec::new(plan.mode, etcd, zk);
        spec.dir = std::env::temp_dir().join(format!("elect-compare-{}", std::process::id()));
        spec.secure = plan.secure;
        // etcd's default: tokens that expire between trials would put a
        // password check (bcrypt) on the measured path.
        spec.etcd_auth_token_ttl = 300;
        let what = match (etcd > 0, zk > 0) {
            (true, true) => "a 3-member etcd cluster and a 3-server ZooKeeper ensemble",
            (true, false) => "a 3-member etcd cluster",
            _ => "a 3-server ZooKeeper ensemble",
        };
        let how = match plan.mode {
            Mode::Processes => "local processes",
            Mode::Containers => "containers",
        };
        eprintln!("compare: starting {what} as {how}");
        match Lab::up(&spec) {
            Ok(lab) => {
                let plain = |role: Role| {
                    let list: Vec<&str> = lab
                        .members()
                        .iter()
                        .filter(|m| m.role == role)
                        .map(|m| m.health_address())
                        .collect();
                    (!list.is_empty()).then(|| list.join(","))
                };
                if etcd > 0 {
                    self.etcd = Ok(lab.endpoints(Role::Etcd).expect("started"));
                    self.etcd_plain = plain(Role::Etcd);
                }
                if zk > 0 {
                    self.zk = Ok(lab.endpoints(Role::Zk).expect("started"));
                    self.zk_plain = plain(Role::Zk);
                }
                self.security = lab.security.clone();
                self.lab = Some(RefCell::new(lab));
            }
            Err(elect_lab::Error::Interrupted) => anyhow::bail!("interrupted"),
            Err(e) => {
                let reason = format!("the lab could not start it: {e}");
                if etcd > 0 {
                    self.etcd = Err(reason.clone());
                }
                if zk > 0 {
                    self.zk = Err(reason);
                }
            }
        }
        Ok(())
    }

    /// The plain addresses of `backend`'s members (for probes).
    pub(crate) fn plain(&self, backend: Backend) -> Option<&str> {
        match backend {
            Backend::Etcd => self.etcd_plain.as_deref(),
            Backend::Zk => self.zk_plain.as_deref(),
            Backend::Raft => None,
        }
    }

    pub(crate) fn endpoints(&self, backend: Backend) -> Result<String, String> {
        match backend {
            Backend::Etcd => self.etcd.clone(),
            Backend::Zk => self.zk.clone(),
            Backend::Raft => Ok(String::new()),
        }
    }
}
