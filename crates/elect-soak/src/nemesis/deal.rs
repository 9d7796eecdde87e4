//! Dealing each kind of fault, and healing it: to a service's members
//! (through the lab), to the service itself (through the outside tools),
//! to a candidate (signals, its proxies, its syncs). Each deal says what
//! it hit, how it heals, and why it hit that ([`Dealt`]), or why it could
//! not be dealt (the ledger's `Refusal`).

use std::sync::Mutex;
use std::time::Duration;

use elect_judge::history::FaultKind;
use elect_lab::fault::Traffic;
use elect_lab::{Fault, Lab, Role};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::ledger::{Budget, Heal, Refusal, budget};
use crate::options::Backend;
use crate::rng::Rng;
use crate::sampler::Sampler;
use crate::tools::{self, ToolError};
use crate::world::BackendWorld;

/// What a fault hit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub name: String,
    pub election: Option<String>,
}

impl Target {
    fn plain(name: &str) -> Target {
        Target {
            name: name.to_owned(),
            election: None,
        }
    }
}

/// A fault dealt.
pub struct Dealt {
    pub target: Target,
    /// How it heals; `None` for an instant fault.
    pub heal: Option<Heal>,
    /// Why this target, or how an attempt that failed partway ended.
    pub note: String,
}

/// Whether `kind` hits a candidate.
pub fn is_candidate_fault(kind: FaultKind) -> bool {
    matches!(
        kind,
        FaultKind::CandidateFreeze
            | FaultKind::CandidateKill
            | FaultKind::CandidateResign
            | FaultKind::CandidateCut
            | FaultKind::CandidateStall
            | FaultKind::WatchdogKill
            | FaultKind::GroupKill
            | FaultKind::PriorityChange
            | FaultKind::HealthFlap
            | FaultKind::HealthHang
            | FaultKind::HealthAll
    )
}

/// How long a dealt switchover may take (`--timeout`).
pub const SWITCHOVER_TIMEOUT: Duration = Duration::from_secs(3);

/// The priorities a priority change draws from (0: never, while a
/// positive one is live).
const PRIORITIES: [u32; 4] = [0, 1, 3, 7];

/// Deals a switchover: `elect switchover` to a candidate of an elect
/// election (any: live, or paused, cut off or just killed by the other
/// faults), in a thread of its own whose end heals the fault with the
/// command's report.
pub fn deal_switchover(
    world: &BackendWorld,
    bin: &std::path::Path,
    rng: &mut Rng,
) -> Result<Dealt, Refusal> {
    let elections: Vec<_> = world
        .elections
        .iter()
        .filter(|e| e.meta.contender == "elect" && e.meta.period_ms.is_none())
        .collect();
    if elections.is_empty() {
        return Err(Refusal::NoTarget("no elect election"));
    }
    let e = *rng.pick(&elections);
    let cand = rng.pick(&e.candidates).spec.name.clone();
    let timeout = SWITCHOVER_TIMEOUT;
    let argv: Vec<String> = [
        "switchover",
        "--backend",
        world.backend.name(),
        "--endpoints",
        &world.steer_endpoints,
        "--election",
        &e.name,
        "--to",
        &cand,
        "--timeout",
        &format!("{}ms", timeout.as_millis()),
        "--format",
        "json",
    ]
    .map(str::to_owned)
    .to_vec();
    let bin = bin.to_owned();
    let thread = std::thread::spawn(move || switchover_report(&bin, &argv, timeout));
    Ok(Dealt {
        target: Target {
            name: cand,
            election: Some(e.meta.key.clone()),
        },
        heal: Some(Heal::Switchover(thread)),
        note: String::new(),
    })
}

/// Runs `elect switchover`, killed if it outlives its timeout by 5 s:
/// the note the judge reads (`{"exit", "timeout_ms", "report"}`).
fn switchover_report(bin: &std::path::Path, argv: &[String], timeout: Duration) -> String {
    let started = std::time::Instant::now();
    let child = std::process::Command::new(bin)
        .args(argv)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(e) => return serde_json::json!({"exit": -1, "error": e.to_string()}).to_string(),
    };
    let limit = timeout + Duration::from_secs(5);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status.code().unwrap_or(-1),
            Ok(None) if started.elapsed() > limit => {
                let _ = child.kill();
                let _ = child.wait();
                break -1;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(_) => break -1,
        }
    };
    let out = child.wait_with_output().ok();
    let (stdout, stderr) = out.map_or_else(Default::default, |o| {
        (
            String::from_utf8_lossy(&o.stdout).trim().to_owned(),
            String::from_utf8_lossy(&o.stderr).trim().to_owned(),
        )
    });
    let report: serde_json::Value =
        serde_json::from_str(&stdout).unwrap_or(serde_json::Value::Null);
    let said: String = stderr
        .lines()
        .last()
        .unwrap_or_default()
        .chars()
        .take(300)
        .collect();
    serde_json::json!({
        "exit": status,
        "timeout_ms": timeout.as_millis() as u64,
        "report": report,
        "said": said,
    })
    .to_string()
}

/// Deals member fault `kind` to `world`'s service through `lab`: the
/// members `target` names, or the service's leader half of the time.
pub fn deal_member(
    lab: &std::sync::Arc<Mutex<Lab>>,
    kind: FaultKind,
    world: &BackendWorld,
    target: Option<Target>,
    rng: &mut Rng,
) -> Result<Dealt, Refusal> {
    let role = match world.backend {
        Backend::Etcd => Role::Etcd,
        _ => Role::Zk,
    };
    let clients: Vec<(String, String)> = {
        let lab = lab.lock().unwrap();
        lab.members()
            .iter()
            .filter(|m| m.role == role)
            .map(|m| (m.name.clone(), m.health_address().to_owned()))
            .collect()
    };
    if kind == FaultKind::RollingRestart {
        let lab2 = lab.clone();
        let members = clients.clone();
        let handle = std::thread::spawn(move || rolling_restart(&lab2, role, &members));
        let names: Vec<&str> = clients.iter().map(|(n, _)| n.as_str()).collect();
        return Ok(Dealt {
            target: Target::plain(&names.join(",")),
            heal: Some(Heal::Rolling(handle)),
            note: String::new(),
        });
    }
    let (names, note) = match &target {
        Some(t) => (
            t.name.split(',').map(str::to_owned).collect::<Vec<_>>(),
            String::new(),
        ),
        None => members_to_hit(kind, role, &clients, rng),
    };
    let (fault, undo) = match kind {
        FaultKind::MemberKill => (Fault::Kill, Fault::Restart),
        FaultKind::MemberPause | FaultKind::QuorumLoss => (Fault::Pause, Fault::Resume),
        FaultKind::MemberStall => (Fault::Stall, Fault::Unstall),
        FaultKind::MemberStallLog => (Fault::StallLog, Fault::Unstall),
        FaultKind::MemberCut => (Fault::Cut, Fault::Heal),
        _ => unreachable!("not a member fault"),
    };
    let mut undone: Vec<(String, Fault)> = Vec::new();
    for name in &names {
        // The lab's lock is released before the undo below takes it
        // again: a guard in the `if let` itself would live through its
        // block, and the undo would wait on it forever (seed 4107: a
        // quorum loss whose second member refused the fault stopped the
        // nemesis with the first member paused).
        let dealt = lab.lock().unwrap().fault(fault, name);
        if let Err(e) = dealt {
            // Undo what was dealt of it.
            for (n, f) in &undone {
                let _ = lab.lock().unwrap().fault(*f, n);
            }
            return Err(Refusal::Failed(e.to_string()));
        }
        undone.push((name.clone(), undo));
    }
    Ok(Dealt {
        target: Target::plain(&names.join(",")),
        heal: Some(Heal::Members(undone)),
        note,
    })
}

/// The members a drawn member fault hits (two for a quorum loss), the
/// service's own leader first half of the time, on purpose; and the note
/// that says so.
fn members_to_hit(
    kind: FaultKind,
    role: Role,
    clients: &[(String, String)],
    rng: &mut Rng,
) -> (Vec<String>, String) {
    let leader = clients
        .iter()
        .find(|(_, c)| elect_lab::is_service_leader(role, c))
        .map(|(n, _)| n.clone());
    let mut order: Vec<String> = clients.iter().map(|(n, _)| n.clone()).collect();
    rng.shuffle(&mut order);
    let mut note = String::new();
    if let Some(l) = leader
        && rng.chance(0.5)
    {
        order.retain(|n| *n != l);
        order.insert(0, l);
        note = "it led the service".into();
    }
    let n = if kind == FaultKind::QuorumLoss { 2 } else { 1 };
    (order.into_iter().take(n).collect(), note)
}

/// Deals service fault `kind` (a compaction, an operator's delete) to
/// `world`: the election `target` names, or one drawn (elect's own two
/// times in three).
pub fn deal_service(
    kind: FaultKind,
    world: &BackendWorld,
    target: Option<Target>,
    rng: &mut Rng,
) -> Result<Dealt, Refusal> {
    match kind {
        // An attempt that fails partway may have done part of its work
        // (compacted, deleted some znodes): it is recorded all the same,
        // saying how it ended, so the judge knows it happened.
        FaultKind::Compaction => {
            let note = match tools::compact(&world.endpoints) {
                Ok(()) => "compact, then defrag each member".to_owned(),
                Err(e) => format!("compact, then defrag each member; failed partway: {e}"),
            };
            Ok(Dealt {
                target: Target::plain("every member"),
                heal: None,
                note,
            })
        }
        FaultKind::OperatorDelete | FaultKind::ParentDelete => {
            let election = match target.and_then(|t| t.election) {
                Some(key) => world
                    .election(&key)
                    .ok_or(Refusal::NoTarget("no such election"))?,
                None => {
                    let choices: Vec<_> = world
                        .elections
                        .iter()
                        .filter(|e| e.meta.period_ms.is_none())
                        .collect();
                    if rng.chance(0.66) {
                        choices[0]
                    } else {
                        *rng.pick(&choices)
                    }
                }
            };
            let deleted = if kind == FaultKind::ParentDelete {
                tools::zk_delete_all(&world.endpoints, &election.name)
            } else {
                tools::delete_leader(world.backend, &world.endpoints, &election.name)
            };
            let (name, note) = match deleted {
                Ok(name) => (name, String::new()),
                // Nothing there to delete: nothing happened.
                Err(ToolError::NothingThere(what)) => return Err(Refusal::NoTarget(what)),
                Err(e) => (election.name.clone(), format!("failed partway: {e}")),
            };
            Ok(Dealt {
                target: Target {
                    name,
                    election: Some(election.meta.key.clone()),
                },
                heal: None,
                note,
            })
        }
        _ => unreachable!("{kind} is not a service fault"),
    }
}

/// Deals candidate fault `kind` in `world`: to the candidate `target`
/// names, or one drawn among the elections `busy` does not say are hit.
pub fn deal_candidate(
    kind: FaultKind,
    world: &BackendWorld,
    target: Option<Target>,
    sampler: &Sampler,
    rng: &mut Rng,
    busy: impl Fn(&str) -> bool,
) -> Result<Dealt, Refusal> {
    let (key, cand) = match target {
        Some(Target {
            name,
            election: Some(key),
        }) => (key, name),
        _ => pick_candidate(kind, world, sampler, rng, busy)?,
    };
    let heal = hit_candidate(kind, world, &key, &cand, sampler)?;
    Ok(Dealt {
        target: Target {
            name: cand,
            election: Some(key),
        },
        heal,
        note: String::new(),
    })
}

/// The election and candidate a drawn candidate fault of `kind` hits:
/// the first election more often; its leader half of the time, always
/// for the faults only a leader has a target for.
fn pick_candidate(
    kind: FaultKind,
    world: &BackendWorld,
    sampler: &Sampler,
    rng: &mut Rng,
    busy: impl Fn(&str) -> bool,
) -> Result<(String, String), Refusal> {
    let health = matches!(
        kind,
        FaultKind::HealthFlap | FaultKind::HealthHang | FaultKind::HealthAll
    );
    let elect_only = health
        || matches!(
            kind,
            FaultKind::WatchdogKill | FaultKind::GroupKill | FaultKind::CandidateStall
        );
    let leaders: Vec<(String, String)> = sampler
        .alive()
        .into_iter()
        .filter(|(_, t)| t.role == "writer")
        .map(|(_, t)| (t.election, t.cand))
        .collect();
    let elections: Vec<_> = world
        .elections
        .iter()
        .filter(|e| e.meta.period_ms.is_none())
        .filter(|e| !elect_only || e.meta.contender == "elect")
        .filter(|e| budget(kind) != Budget::Candidate || !busy(&e.meta.key))
        .collect();
    if elections.is_empty() {
        // The budget: one fault per election's candidates.
        return Err(Refusal::Busy);
    }
    let e = if rng.chance(0.6) {
        elections[0]
    } else {
        *rng.pick(&elections)
    };
    let leader = leaders
        .iter()
        .find(|(k, _)| *k == e.meta.key)
        .map(|(_, c)| c.clone());
    let cand = match leader {
        // A health fault hits the leader most often: its hand-off is
        // what is judged.
        Some(l) if (elect_only && !health) || rng.chance(if health { 0.7 } else { 0.5 }) => l,
        _ if elect_only && !health && kind != FaultKind::CandidateStall => {
            return Err(Refusal::NoTarget("no leader to hit"));
        }
        _ => rng.pick(&e.candidates).spec.name.clone(),
    };
    Ok((e.meta.key.clone(), cand))
}

/// Deals candidate fault `kind` to `cand` in election `key`: how to heal
/// it, if it heals.
fn hit_candidate(
    kind: FaultKind,
    world: &BackendWorld,
    key: &str,
    cand: &str,
    sampler: &Sampler,
) -> Result<Option<Heal>, Refusal> {
    let c = world
        .candidate(key, cand)
        .ok_or(Refusal::NoTarget("no such candidate"))?;
    let running = || c.pid().ok_or(Refusal::NoTarget("not running"));
    let failed = |e: nix::Error| Refusal::Failed(e.to_string());
    // A peer's tool runs as a service would, under systemd: a crash or a
    // stop reaches its whole control group (its wrapper, the tool, the
    // writer it started). elect is hit alone: its watchdog and
    // containment are what is tested.
    let writers: Vec<i32> = sampler
        .alive()
        .into_iter()
        .filter(|(_, tag)| tag.election == key && tag.cand == cand)
        .map(|(p, _)| p)
        .collect();
    let whole = |sig: Signal| {
        c.signal_group(sig);
        for w in &writers {
            let _ = kill(Pid::from_raw(*w), sig);
        }
    };
    let heal = match kind {
        FaultKind::CandidateFreeze if !c.spec.elect => {
            let pid = running()?;
            kill(Pid::from_raw(-pid), Signal::SIGSTOP).map_err(failed)?;
            Some(Heal::ResumeGroup(pid))
        }
        FaultKind::CandidateFreeze => {
            let pid = running()?;
            kill(Pid::from_raw(pid), Signal::SIGSTOP).map_err(failed)?;
            Some(Heal::Resume(pid))
        }
        FaultKind::CandidateKill | FaultKind::CandidateResign => {
            let sig = if kind == FaultKind::CandidateKill {
                Signal::SIGKILL
            } else {
                Signal::SIGTERM
            };
            c.hold();
            if c.spec.elect {
                c.signal(sig);
            } else {
                whole(sig);
            }
            Some(Heal::Release(key.to_owned(), cand.to_owned()))
        }
        FaultKind::CandidateCut => {
            let proxies = world
                .cuts
                .get(cand)
                .ok_or(Refusal::NoTarget("no proxies"))?
                .clone();
            proxies.iter().for_each(|p| p.set(Traffic::Blackhole));
            Some(Heal::Uncut(proxies))
        }
        FaultKind::CandidateStall => {
            let pid = running()?;
            let tracer = elect_lab::stall::hold_syncs(pid as u32, None).map_err(Refusal::Failed)?;
            Some(Heal::Unstall(tracer))
        }
        FaultKind::WatchdogKill => {
            let pid = running()?;
            let watchdog = elect_lab::process::descendants(pid)
                .into_iter()
                .find(|d| tools::cmdline(*d).iter().any(|a| a == "__watchdog"))
                .ok_or(Refusal::NoTarget("no watchdog (not leading)"))?;
            let _ = kill(Pid::from_raw(watchdog), Signal::SIGKILL);
            None
        }
        FaultKind::PriorityChange => {
            if !c.spec.elect {
                return Err(Refusal::NoTarget("a peer's candidate has no priority"));
            }
            let priority = PRIORITIES[(c.starts() + key.len()) % PRIORITIES.len()];
            c.set_priority(priority);
            c.hold();
            c.signal(Signal::SIGTERM);
            Some(Heal::Release(key.to_owned(), cand.to_owned()))
        }
        FaultKind::HealthFlap | FaultKind::HealthHang | FaultKind::HealthAll => {
            let markers = c
                .spec
                .health
                .as_ref()
                .ok_or(Refusal::NoTarget("no health check there"))?;
            let marker = match kind {
                FaultKind::HealthFlap => &markers.sick,
                FaultKind::HealthHang => &markers.hang,
                _ => &markers.all,
            };
            std::fs::write(marker, b"").map_err(|e| Refusal::Failed(e.to_string()))?;
            Some(Heal::Unmark(marker.clone()))
        }
        FaultKind::GroupKill => {
            let writer = sampler
                .alive()
                .into_iter()
                .find(|(_, tag)| tag.election == key && tag.cand == cand && tag.role == "writer")
                .map(|(p, _)| p)
                .ok_or(Refusal::NoTarget("no command running"))?;
            let group = tools::pgid(writer).ok_or(Refusal::NoTarget("its command is gone"))?;
            let _ = kill(Pid::from_raw(-group), Signal::SIGKILL);
            None
        }
        _ => unreachable!("{kind} is not a candidate fault"),
    };
    Ok(heal)
}

/// Kills and restarts each member in turn, each once the service is
/// healthy again (at most 30 s each).
fn rolling_restart(lab: &Mutex<Lab>, role: Role, members: &[(String, String)]) {
    for (name, client) in members {
        let _ = lab.lock().unwrap().fault(Fault::Kill, name);
        std::thread::sleep(Duration::from_millis(300));
        let _ = lab.lock().unwrap().fault(Fault::Restart, name);
        elect_lab::poll(Duration::from_secs(30), || {
            elect_lab::healthy(role, client).then_some(())
        });
    }
}

/// Heals a fault: `lab` for member faults, `worlds` for the candidates.
pub fn heal(heal: Heal, lab: Option<&Mutex<Lab>>, worlds: &[BackendWorld]) {
    match heal {
        Heal::Members(list) => {
            if let Some(lab) = lab {
                for (member, fault) in list {
                    let _ = lab.lock().unwrap().fault(fault, &member);
                }
            }
        }
        Heal::Release(key, cand) => {
            if let Some(c) = worlds.iter().find_map(|w| w.candidate(&key, &cand)) {
                c.release();
            }
        }
        Heal::Resume(pid) => {
            let _ = kill(Pid::from_raw(pid), Signal::SIGCONT);
        }
        Heal::ResumeGroup(group) => {
            let _ = kill(Pid::from_raw(-group), Signal::SIGCONT);
        }
        Heal::Uncut(proxies) => proxies.iter().for_each(|p| p.set(Traffic::Pass)),
        Heal::Unstall(tracer) => elect_lab::stall::release_syncs(tracer),
        Heal::LoadOff(pid) => elect_lab::load::stop(pid),
        Heal::Rolling(h) => {
            let _ = h.join();
        }
        Heal::Switchover(_) => unreachable!("a switchover's report is taken by the nemesis"),
        Heal::Unmark(marker) => {
            let _ = std::fs::remove_file(marker);
        }
    }
}
