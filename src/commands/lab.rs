//! `elect lab`: a lab that outlives the command that started it. `up`
//! detaches the members and saves the lab's state in its directory; the
//! other actions load it from there. `soak` ([`soak`]) starts a lab of its
//! own for the length of the soak.

mod soak;

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use elect_lab::{self, Lab, Mode, Role, Spec};

use clap::{Args, Subcommand, ValueEnum};

use crate::args::backend_endpoints_var as endpoints_var;
use crate::usage::UsageError;
use elect::Backend;

#[derive(Debug, Args)]
pub struct LabArgs {
    #[command(subcommand)]
    action: LabAction,

    /// The lab's directory: its state, member data and logs [default:
    /// elect-lab-UID in the temporary directory].
    #[arg(long, env = "ELECT_LAB_DIR", global = true)]
    dir: Option<PathBuf>,

    /// How `up` and `status` print: text for people, json for programs,
    /// env for lines a shell can eval.
    #[arg(
        long,
        env = "ELECT_FORMAT",
        value_enum,
        default_value = "text",
        global = true
    )]
    format: FormatArg,
}

/// `lab --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FormatArg {
    /// Sentences for people.
    Text,
    /// One JSON object.
    Json,
    /// `up` and `status` only: shell lines to eval.
    Env,
}

#[derive(Debug, Subcommand)]
enum LabAction {
    /// Start an etcd cluster and a ZooKeeper ensemble (3 members each, or
    /// what --etcd, --zk and --raft say), wait until healthy, print the
    /// endpoints. `--format env` prints lines a shell can eval.
    Up {
        /// etcd members (0, 1, 3, 5 or 7); with only --zk given, none.
        #[arg(long)]
        etcd: Option<usize>,
        /// ZooKeeper servers (0, 1, 3, 5 or 7); with only --etcd given, none.
        #[arg(long)]
        zk: Option<usize>,
        /// Raft-vote peers, `elect campaign` processes electing among
        /// themselves (0, 1, 3, 5 or 7) [default: 0].
        #[arg(long)]
        raft: Option<usize>,
        /// Run members as containers (deploy/images) instead of local
        /// processes.
        #[arg(long)]
        containers: bool,
        /// Secure them, with a CA made now: etcd with client TLS, client
        /// certificates and auth (root, and a user limited to `secured/`);
        /// ZooKeeper with a TLS client port (client certificates required)
        /// and digest credentials on elect's znodes; Raft-vote peers with
        /// mutual TLS. Prints the files to pass as --cacert, --cert, --key,
        /// --user and --password-file.
        #[arg(long)]
        secure: bool,
    },
    /// Each member's address and state, and whether it is healthy.
    Status,
    /// Deal a fault to one member (named like etcd-2 or zk-1).
    Fault {
        /// kill (SIGKILL), restart (on its data), pause (SIGSTOP), resume,
        /// cut (off the network; containers), heal.
        #[arg(value_enum)]
        fault: FaultArg,
        /// The member, as `elect lab status` names it.
        member: String,
    },
    /// Put the whole machine under load (stress-ng: a CPU worker on every
    /// core and an fsync writer), as busy production hosts are, or take
    /// it off; `down` takes it off too.
    Load {
        #[arg(value_enum)]
        switch: LoadSwitch,
    },
    /// Stop every member; remove containers, network and directory.
    Down,
    /// Hours of random, overlapping faults on ensembles of its own, elect's
    /// candidates (and with --peers the peers' tools) beside them, judged
    /// from the outside; exit 0 when every check held, 4 when one failed.
    Soak(soak::SoakArgs),
}

/// `elect lab load on|off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum LoadSwitch {
    On,
    Off,
}

/// `elect lab fault`'s faults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum FaultArg {
    /// SIGKILL, as a crash would.
    Kill,
    /// Start a killed member again on its data.
    Restart,
    /// Freeze it (SIGSTOP or docker pause).
    Pause,
    /// Let a paused member go on.
    Resume,
    /// Take its container off the network.
    Cut,
    /// Put it back.
    Heal,
    /// Hold every fsync of its process (strace), as a hung disk does.
    Stall,
    /// Hold the fsyncs of its log alone (etcd's WAL, ZooKeeper's
    /// transaction log), as when the log's own disk hangs.
    StallLog,
    /// Let its held fsyncs complete.
    Unstall,
}

impl From<FaultArg> for elect_lab::Fault {
    fn from(f: FaultArg) -> Self {
        use elect_lab::Fault;
        match f {
            FaultArg::Kill => Fault::Kill,
            FaultArg::Restart => Fault::Restart,
            FaultArg::Pause => Fault::Pause,
            FaultArg::Resume => Fault::Resume,
            FaultArg::Cut => Fault::Cut,
            FaultArg::Heal => Fault::Heal,
            FaultArg::Stall => Fault::Stall,
            FaultArg::StallLog => Fault::StallLog,
            FaultArg::Unstall => Fault::Unstall,
        }
    }
}

/// Exit code when the lab is not in the state the action needs (`up` with
/// a lab already up).
pub const WRONG_STATE: u8 = 1;

/// A validated `elect lab` invocation.
#[derive(Debug)]
pub struct Request {
    action: Action,
    dir: PathBuf,
    format: FormatArg,
}

#[derive(Debug)]
enum Action {
    Up(Spec),
    Status,
    Fault(elect_lab::Fault, String),
    /// On or off.
    Load(bool),
    Down,
    Soak(soak::Request),
}

impl LabArgs {
    pub fn validate(self) -> Result<Request, UsageError> {
        let dir = self.dir.clone().unwrap_or_else(|| {
            std::env::temp_dir().join(format!("elect-lab-{}", unsafe { libc::getuid() }))
        });
        if let Ok(meta) = std::fs::metadata(&dir)
            && !meta.is_dir()
        {
            return Err(UsageError::new(
                "--dir",
                format!("{} exists and is not a directory", dir.display()),
            ));
        }
        if let LabAction::Soak(soak) = self.action {
            if self.format != FormatArg::Text {
                return Err(UsageError::new(
                    "--format",
                    "a soak writes its report (--report); --format is for `lab up` and `lab status`",
                ));
            }
            return Ok(Request {
                action: Action::Soak(soak.validate()?),
                dir,
                format: self.format,
            });
        }
        let (args, format) = (&self, self.format);
        let size = |flag: &str, n: usize| match n {
            0 | 1 | 3 | 5 | 7 => Ok(n),
            _ => Err(UsageError::new(
                flag,
                format!(
                    "{n} members: use 0, 1, 3, 5 or 7 (an odd size tolerates as many failures as the next even one)"
                ),
            )),
        };
        let action = match &args.action {
            LabAction::Up {
                etcd,
                zk,
                raft,
                containers,
                secure,
            } => {
                let (etcd, zk) = match (etcd, zk, raft) {
                    (None, None, None) => (3, 3),
                    (e, z, _) => (e.unwrap_or(0), z.unwrap_or(0)),
                };
                let (etcd, zk) = (size("--etcd", etcd)?, size("--zk", zk)?);
                let raft = size("--raft", raft.unwrap_or(0))?;
                if etcd + zk + raft == 0 {
                    return Err(UsageError::new(
                        "--etcd",
                        "--zk and --raft are all 0: the lab would start nothing",
                    ));
                }
                let mode = if *containers {
                    Mode::Containers
                } else {
                    Mode::Processes
                };
                let mut spec = Spec::new(mode, etcd, zk);
                spec.raft = raft;
                spec.dir = dir.clone();
                spec.secure = *secure;
                Action::Up(spec)
            }
            LabAction::Status => Action::Status,
            LabAction::Fault { fault, member } => Action::Fault((*fault).into(), member.clone()),
            LabAction::Load { switch } => Action::Load(*switch == LoadSwitch::On),
            LabAction::Down => Action::Down,
            LabAction::Soak(_) => unreachable!("taken above"),
        };
        if format == FormatArg::Env && !matches!(action, Action::Up(_) | Action::Status) {
            return Err(UsageError::new(
                "--format",
                "env is for `lab up` and `lab status`",
            ));
        }
        Ok(Request {
            action,
            dir,
            format,
        })
    }
}

fn state_file(dir: &Path) -> PathBuf {
    dir.join("lab.json")
}

/// Runs the request; the exit code.
pub fn run(request: Request) -> anyhow::Result<u8> {
    let state = state_file(&request.dir);
    match request.action {
        Action::Soak(soak) => soak::run(soak),
        Action::Up(spec) => {
            if state.exists() {
                eprintln!(
                    "elect lab up: a lab is already up in {} (see `elect lab status`); \
                     take it down with `elect lab down` first",
                    request.dir.display()
                );
                return Ok(WRONG_STATE);
            }
            if spec.etcd > 0 {
                elect_lab::EtcdRelease::chosen().map_err(crate::usage::release_refused)?;
            }
            elect_lab::interrupt::install();
            eprintln!(
                "starting {} etcd, {} ZooKeeper and {} Raft-vote members as {} in {}",
                spec.etcd,
                spec.zk,
                spec.raft,
                match spec.mode {
                    Mode::Processes => "local processes",
                    Mode::Containers => "containers",
                },
                spec.dir.display()
            );
            let started = std::time::Instant::now();
            let mut lab = Lab::up(&spec).context("up")?;
            lab.save(&state).context("saving the lab's state")?;
            eprintln!("healthy after {:.1}s", started.elapsed().as_secs_f64());
            print_lab(&mut lab, request.format);
            lab.detach();
            Ok(0)
        }
        Action::Status => {
            let mut lab = load(&state)?;
            print_lab(&mut lab, request.format);
            lab.save(&state)?;
            Ok(0)
        }
        Action::Fault(fault, member) => {
            let mut lab = load(&state)?;
            lab.fault(fault, &member)
                .with_context(|| format!("fault {fault} {member}"))?;
            lab.save(&state)?;
            let state = lab.member_mut(&member)?.state();
            println!("{member}: {state}");
            Ok(0)
        }
        Action::Load(on) => {
            let mut lab = load(&state)?;
            let was = lab.set_load(on).context("load")?;
            lab.save(&state)?;
            println!(
                "load: {}{}",
                if on { "on" } else { "off" },
                if was == on { " (already)" } else { "" }
            );
            if on {
                eprintln!(
                    "stress-ng {} until `elect lab load off` or `down`",
                    elect_lab::load::STRESS_ARGS.join(" ")
                );
            }
            Ok(0)
        }
        Action::Down => {
            if !state.exists() {
                eprintln!(
                    "elect lab down: no lab is up in {}; nothing to do",
                    request.dir.display()
                );
                return Ok(0);
            }
            let lab = load(&state)?;
            let n = lab.members().len();
            lab.down().context("down")?;
            eprintln!("took down {n} members; {} removed", request.dir.display());
            Ok(0)
        }
    }
}

fn load(state: &Path) -> anyhow::Result<Lab> {
    if !state.exists() {
        anyhow::bail!(
            "no lab is up in {} (start one with `elect lab up`, or name its directory with --dir)",
            state.parent().unwrap_or(state).display()
        );
    }
    Lab::load(state).map_err(|e| match e {
        // The state file is the user's input (a --dir that is not a lab's,
        // a torn or hand-edited lab.json): named, and exit 2.
        elect_lab::Error::State(why) => UsageError::new("--dir", why).into(),
        other => other.into(),
    })
}

fn print_lab(lab: &mut Lab, format: FormatArg) {
    let etcd = lab.endpoints(Role::Etcd);
    let zk = lab.endpoints(Role::Zk);
    let raft = lab.endpoints(Role::Raft);
    let status = lab.status();
    match format {
        FormatArg::Env => {
            println!("export ELECT_LAB_DIR='{}'", lab.dir.display());
            if let Some(e) = &etcd {
                println!("export {}='{e}'", endpoints_var(Backend::Etcd));
            }
            if let Some(z) = &zk {
                println!("export {}='{z}'", endpoints_var(Backend::Zk));
            }
            if let Some(r) = &raft {
                println!("export {}='{r}'", endpoints_var(Backend::Raft));
            }
            if let Some(s) = &lab.security {
                println!("export ELECT_CACERT='{}'", s.ca.display());
                println!("export ELECT_CERT='{}'", s.client.cert.display());
                println!("export ELECT_KEY='{}'", s.client.key.display());
                println!("export ELECT_USER='{}'", s.user);
                println!("export ELECT_PASSWORD_FILE='{}'", s.password_file.display());
            }
        }
        FormatArg::Json => {
            let value = serde_json::json!({
                "id": lab.id,
                "dir": lab.dir,
                "mode": lab.mode,
                "etcd_endpoints": etcd,
                "zk_endpoints": zk,
                "raft_endpoints": raft,
                "security": lab.security,
                "etcd_release": lab.etcd_release,
                "members": status,
            });
            println!("{value}");
        }
        FormatArg::Text => {
            let mode = match lab.mode {
                Mode::Processes => "local processes",
                Mode::Containers => "containers",
            };
            println!("lab {} ({mode}) in {}", lab.id, lab.dir.display());
            if let Some(e) = &etcd {
                println!("etcd endpoints: {e}");
            }
            if let Some(z) = &zk {
                println!("zk endpoints:   {z}");
            }
            if let Some(r) = &raft {
                println!(
                    "raft endpoints: {r} (election {})",
                    elect_lab::raft::CLUSTER
                );
            }
            if let Some(s) = &lab.security {
                println!(
                    "secured: --cacert {} --cert {} --key {} --user {} --password-file {} \
                     (elections under {:?})",
                    s.ca.display(),
                    s.client.cert.display(),
                    s.client.key.display(),
                    s.user,
                    s.password_file.display(),
                    s.prefix
                );
            }
            if let Some(release) = &lab.etcd_release {
                println!("etcd release:   {}", release.describe());
            }
            for m in status {
                let health = if m.healthy { "healthy" } else { "not serving" };
                match &m.version {
                    Some(v) => println!(
                        "  {:<8} {:<22} {:<8} {health:<11} etcd {v}",
                        m.name, m.client, m.state
                    ),
                    None => println!("  {:<8} {:<22} {:<8} {health}", m.name, m.client, m.state),
                }
            }
        }
    }
}
