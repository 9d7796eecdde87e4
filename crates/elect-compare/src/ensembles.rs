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

impl Ensembles {
    pub(crate) fn prepare(plan: &Plan) -> anyhow::Result<Ensembles> {
        let wants = |b| plan.backends.contains(&b);
        let start_etcd = wants(Backend::Etcd) && plan.etcd_endpoints.is_none();
        let start_zk = wants(Backend::Zk) && plan.zk_endpoints.is_none();
        let mut ens = Ensembles {
            etcd_plain: None,
            zk_plain: None,
            security: None,
            lab: None,
            etcd: plan
                .etcd_endpoints
                .clone()
                .ok_or_else(|| "not started".to_owned()),
            zk: plan
                .zk_endpoints
                .clone()
                .ok_or_else(|| "not started".to_owned()),
        };
        if !(start_etcd || start_zk) {
            return Ok(ens);
        }
        let mut etcd = usize::from(start_etcd) * 3;
        let mut zk = usize::from(start_zk) * 3;
        // Process mode needs the programs; say what is missing per backend
        // rather than giving up on both.
        if plan.mode == Mode::Processes {
            if etcd > 0 && elect_lab::which("etcd").is_none() {
                ens.etcd = Err(format!(
                    "etcd is not installed: {}, or pass --etcd-endpoints",
                    "apt-get install etcd-server, or use --containers"
                ));
                etcd = 0;
            }
            if zk > 0
                && (elect_lab::which("java").is_none()
                    || !std::path::Path::new(elect_lab::zk::JAR).exists())
            {
                ens.zk = Err(
                    "ZooKeeper is not installed: apt-get install zookeeper (and a Java runtime), \
                     or use --containers, or pass --zk-endpoints"
                        .into(),
                );
                zk = 0;
            }
        }
        if etcd + zk == 0 {
            return Ok(ens);
        }
        let mut spec = Spec::new(plan.mode, etcd, zk);
        spec.dir = std::env::temp_dir().join(format!("elect-compare-{}", std::process::id()));
        spec.secure = plan.secure;
        // etcd's default: tokens that expire between trials would put a
        // password check (bcrypt) on the measured path.
        spec.etcd_auth_token_ttl = 300;
        eprintln!(
            "compare: starting {}{}{} as {}",
            if etcd > 0 {
                "a 3-member etcd cluster"
            } else {
                ""
            },
            if etcd > 0 && zk > 0 { " and " } else { "" },
            if zk > 0 {
                "a 3-server ZooKeeper ensemble"
            } else {
                ""
            },
            match plan.mode {
                Mode::Processes => "local processes",
                Mode::Containers => "containers",
            }
        );
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
                    ens.etcd = Ok(lab.endpoints(Role::Etcd).expect("started"));
                    ens.etcd_plain = plain(Role::Etcd);
                }
                if zk > 0 {
                    ens.zk = Ok(lab.endpoints(Role::Zk).expect("started"));
                    ens.zk_plain = plain(Role::Zk);
                }
                ens.security = lab.security.clone();
                ens.lab = Some(RefCell::new(lab));
            }
            Err(elect_lab::Error::Interrupted) => anyhow::bail!("interrupted"),
            Err(e) => {
                let reason = format!("the lab could not start it: {e}");
                if etcd > 0 {
                    ens.etcd = Err(reason.clone());
                }
                if zk > 0 {
                    ens.zk = Err(reason);
                }
            }
        }
        Ok(ens)
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
