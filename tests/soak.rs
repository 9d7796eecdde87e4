//! `elect lab soak`: bad input refused before anything starts; a planted
//! violation judged again through `--check`; and the short soak CI runs,
//! every backend side by side with the peers beside elect, a fixed seed,
//! every fault kind dealt at least once, and every check held for elect.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::elect::{BIN, elect_once};

/// The seed CI soaks with.
const SEED: &str = "41";

fn refused(args: &[&str], flag: &str) {
    let mut all = vec!["lab", "soak"];
    all.extend_from_slice(args);
    let (code, out, err, took) = elect_once(&all);
    assert_eq!(code, 2, "{all:?}: {err}");
    assert!(out.is_empty(), "{all:?} printed {out}");
    assert!(
        err.contains(flag),
        "{all:?}: the message does not name {flag}: {err}"
    );
    assert!(
        took.as_secs() < 10,
        "{all:?} took {took:?}: did it start something?"
    );
}

#[test]
fn bad_input_is_refused_before_anything_starts() {
    refused(&["--duration", "10s"], "--duration");
    refused(&["--duration", "soon"], "--duration");
    refused(&["--backend", "consul"], "--backend");
    refused(&["--candidates", "8"], "--candidates");
    refused(&["--candidates", "1"], "--candidates");
    refused(&["--backend", "raft", "--peers"], "--peers");
    refused(&["--schedule", "/nonexistent/schedule.json"], "--schedule");
    refused(&["--check", "/nonexistent"], "--check");
    let dir = tmp("bad-schedule");
    std::fs::write(dir.join("schedule.json"), "{ not json").unwrap();
    refused(
        &["--schedule", dir.join("schedule.json").to_str().unwrap()],
        "--schedule",
    );
}

fn tmp(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("soak-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// How a soak run by [`soak`] ended.
struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs `cmd` (a soak) with its output in files beside `report`, not in
/// pipes: a process it leaves behind cannot hold the test open. Past
/// `deadline` the soak is taken to hang: the test fails with the soak's
/// stderr, its threads' stacks and its process tree, after a Ctrl-C (and
/// a SIGKILL a minute later) has torn it down. `interrupt_after`, when
/// given, sends the Ctrl-C itself that long after the start.
fn soak(
    mut cmd: Command,
    report: &Path,
    interrupt_after: Option<Duration>,
    deadline: Duration,
) -> Ran {
    let out_path = report.with_extension("stdout");
    let err_path = report.with_extension("stderr");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let interrupt = || {
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT);
    };
    let started = Instant::now();
    let mut interrupted = false;
    let mut hung = String::new();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        let elapsed = started.elapsed();
        if !interrupted && interrupt_after.is_some_and(|after| elapsed >= after) {
            interrupted = true;
            interrupt();
        }
        if hung.is_empty() && elapsed >= deadline {
            hung = hang_report(child.id());
            interrupt();
        }
        if !hung.is_empty() && elapsed >= deadline + Duration::from_secs(60) {
            let _ = child.kill();
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let ran = Ran {
        code: status.code(),
        stdout: std::fs::read_to_string(&out_path).unwrap_or_default(),
        stderr: std::fs::read_to_string(&err_path).unwrap_or_default(),
    };
    assert!(
        hung.is_empty(),
        "the soak was still running {deadline:?} after it started: it hangs. \
         Its stderr:\n{}\n{hung}",
        ran.stderr
    );
    ran
}

/// What a hung soak is doing: every thread's stack (gdb, when the machine
/// has it) and the processes under it.
fn hang_report(pid: u32) -> String {
    let run = |program: &str, args: &[&str]| {
        Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_else(|e| format!("({program}: {e})"))
    };
    let pid = pid.to_string();
    let stacks = run(
        "timeout",
        &[
            "60",
            "gdb",
            "-p",
            &pid,
            "-batch",
            "-ex",
            "thread apply all bt 30",
        ],
    );
    let tree = run(
        "ps",
        &[
            "-e",
            "--forest",
            "-o",
            "pid,ppid,pgid,stat,wchan:24,etime,args",
        ],
    );
    format!("its threads:\n{stacks}\nthe processes:\n{tree}")
}

/// A history of one election in which two candidates' commands ran
/// together for 300 ms: `--check` refuses it with compare's safety code,
/// and names the overlap and the seed.
#[test]
fn check_judges_a_recorded_history_again() {
    let dir = tmp("planted");
    let h = dir.join("history");
    std::fs::create_dir_all(&h).unwrap();
    let meta = serde_json::json!({
        "seed": 5, "started_unix_ms": 0, "ended": 20_000_000, "mode": "processes",
        "sampler_period": 2000, "line_slack": 500_000,
        "elections": [{"key": "etcd/elect", "backend": "etcd", "contender": "elect",
            "ttl_ms": 2000, "liveness_bound": 6_000_000, "decides_exit": true,
            "candidates": ["c1", "c2"]}]
    });
    std::fs::write(h.join("meta.json"), meta.to_string()).unwrap();
    let lines = |rows: &[Value]| {
        rows.iter()
            .map(|r| r.to_string() + "\n")
            .collect::<String>()
    };
    let proc_ = |t: u64, pid: u64, cand: &str, state: &str| {
        serde_json::json!({"k": "proc", "t": t, "pid": pid, "e": "etcd/elect", "cand": cand,
            "role": "writer", "state": state})
    };
    std::fs::write(
        h.join("procs.jsonl"),
        lines(&[
            proc_(100_000, 10, "c1", "run"),
            proc_(9_000_000, 20, "c2", "run"),
            proc_(9_300_000, 10, "c1", "gone"),
        ]),
    )
    .unwrap();
    let span = |c: u64, token: u64, from: u64, to: u64| {
        serde_json::json!({"k": "span", "e": "etcd/elect", "c": c, "token": token,
            "from": from, "to": to, "n": (to - from) / 10_000})
    };
    std::fs::write(
        h.join("store.jsonl"),
        lines(&[
            span(1, 7, 200_000, 9_000_000),
            span(2, 9, 9_010_000, 19_990_000),
        ]),
    )
    .unwrap();
    for empty in ["lines.jsonl", "faults.jsonl"] {
        std::fs::write(h.join(empty), "").unwrap();
    }
    std::fs::write(h.join("end.json"), r#"{"leftovers": []}"#).unwrap();
    let out = Command::new(BIN)
        .args(["lab", "soak", "--check"])
        .arg(&dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(4), "{stdout}");
    assert!(stdout.contains("etcd/elect overlap"), "{stdout}");
    assert!(stdout.contains("seed 5"), "{stdout}");
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(
        report.starts_with("# Soak: 1 violations by elect"),
        "{report}"
    );
}

/// The fault kinds each backend is dealt in the CI soak (member-cut in
/// containers only).
fn kinds(backend: &str) -> Vec<&'static str> {
    let candidate = [
        "candidate-freeze",
        "candidate-kill",
        "candidate-resign",
        "watchdog-kill",
        "group-kill",
        "candidate-cut",
        "switchover",
        "priority-change",
        "health-flap",
        "health-hang",
        "health-all",
    ];
    let service = [
        "member-kill",
        "member-pause",
        "member-stall",
        "member-stall-log",
        "member-cut",
        "quorum-loss",
        "rolling-restart",
        "operator-delete",
    ];
    let own: &[&str] = match backend {
        "etcd" => &["compaction"],
        "zk" => &["parent-delete"],
        _ => &["candidate-stall"],
    };
    let mut kinds = candidate.to_vec();
    if backend != "raft" {
        kinds.extend(service);
    }
    kinds.extend(own);
    kinds
}

/// A soak of CI's, the peers beside elect, its report kept in
/// target/<name>: `backends` for `ELECT_SOAK_DURATION` (by default
/// `duration`) with `seed`, in containers when the suite runs there. It
/// must find no violation by elect; its report's directory, how it ran
/// and its verdict.
fn ci_soak(name: &str, seed: &str, backends: &str, duration: &str) -> (PathBuf, Ran, Value) {
    let report = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .unwrap()
        .join(name);
    let _ = std::fs::remove_dir_all(&report);
    let duration = std::env::var("ELECT_SOAK_DURATION").unwrap_or_else(|_| duration.into());
    let mut cmd_soak = Command::new(BIN);
    cmd_soak.args(["lab", "soak", "--peers", "--seed", seed]);
    if support::mode() == support::Mode::Containers {
        cmd_soak.arg("--containers");
    }
    cmd_soak
        .args(["--backend", backends, "--duration", &duration])
        .arg("--report")
        .arg(&report);
    // Its length, the ensembles' start and the Curator driver's build
    // before it, the teardown after: well within 4 more minutes.
    let length = humantime::parse_duration(&duration).unwrap();
    let ran = soak(cmd_soak, &report, None, length + Duration::from_secs(240));
    assert_eq!(
        ran.code,
        Some(0),
        "the soak found violations by elect (seed {seed}; report in {}):\n{}\n{}",
        report.display(),
        ran.stdout,
        ran.stderr
    );
    let verdict: Value =
        serde_json::from_str(&std::fs::read_to_string(report.join("verdict.json")).unwrap())
            .unwrap();
    assert_eq!(verdict["held"], true);
    (report, ran, verdict)
}

/// The short soak of CI: etcd, ZooKeeper and Raft-vote side by side, the
/// peers beside elect, seed 41. Every check holds for elect, every fault
/// kind is dealt at least once per backend, and the report opens with the
/// verdict. Its report is kept in target/soak-ci.
#[test]
fn short_soak_holds_with_every_fault_kind_dealt() {
    // Members are cut off the network only in containers.
    let containers = support::mode() == support::Mode::Containers;
    let (report, Ran { stdout, stderr, .. }, verdict) =
        ci_soak("soak-ci", SEED, "etcd,zk,raft", "3m");
    for backend in ["etcd", "zk", "raft"] {
        for kind in kinds(backend) {
            if kind == "member-cut" && !containers {
                continue;
            }
            let dealt = verdict["faults"][backend][kind].as_u64().unwrap_or(0);
            assert!(dealt >= 1, "{backend}: {kind} was never dealt:\n{stderr}");
        }
    }
    assert!(verdict["faults"]["machine"]["load"].as_u64().unwrap_or(0) >= 1);
    let md = std::fs::read_to_string(report.join("report.md")).unwrap();
    assert!(md.starts_with("# Soak: every check held for elect"), "{md}");
    let html = std::fs::read_to_string(report.join("report.html")).unwrap();
    assert!(html.contains("<svg"), "the report draws the timeline");
    // The probe read every ZooKeeper member, serving, and saw elect's
    // znodes there; the members' logs are kept beside the history.
    let service = std::fs::read_to_string(report.join("history/service.jsonl")).unwrap();
    let records: Vec<Value> = service
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for member in ["zk-1", "zk-2", "zk-3"] {
        assert!(
            records.iter().any(
                |r| r["member"] == member && (r["mode"] == "leader" || r["mode"] == "follower")
            ),
            "{member} was never seen serving:\n{service}"
        );
        let log = report.join("members").join(format!("{member}.log"));
        assert!(
            std::fs::metadata(&log)
                .map(|m| m.len() > 0)
                .unwrap_or(false),
            "{} was not kept",
            log.display()
        );
    }
    assert!(
        records.iter().any(|r| r["mode"] == "leader"
            && r["held"]
                .as_array()
                .is_some_and(|h| h.iter().any(|h| h["e"] == "zk/elect"))
            && r["sessions"].as_array().is_some_and(|s| !s.is_empty())),
        "the leader was never seen holding elect's znodes and tracking sessions:\n{service}"
    );
    assert!(md.contains("## The service's own faults"), "{md}");
    eprintln!("{stdout}\n{stderr}");
}

/// The short soak of CI's second etcd release (deploy/test.sh runs it
/// with `ELECT_ETCD_BIN` naming etcd 3.5.1): etcd alone, `etcdctl elect`
/// of the same release beside elect, seed 35. Every check holds for elect,
/// every etcd fault kind is dealt, and the report names the release that
/// ran. Ignored in the main pass, whose soak above covers Debian's etcd.
#[test]
#[ignore = "CI runs it against the other etcd release (ELECT_ETCD_BIN, deploy/test.sh)"]
fn short_etcd_soak_holds_on_the_chosen_release() {
    let containers = support::mode() == support::Mode::Containers;
    let version = elect_lab::EtcdRelease::chosen()
        .expect("ELECT_ETCD_BIN names a release")
        .version
        .expect("an etcd to run");
    let (report, Ran { stdout, stderr, .. }, verdict) =
        ci_soak(&format!("soak-ci-etcd-{version}"), "35", "etcd", "2m");
    for kind in kinds("etcd") {
        if kind == "member-cut" && !containers {
            continue;
        }
        let dealt = verdict["faults"]["etcd"][kind].as_u64().unwrap_or(0);
        assert!(
            dealt >= 1,
            "etcd {version}: {kind} was never dealt:\n{stderr}"
        );
    }
    let md = std::fs::read_to_string(report.join("report.md")).unwrap();
    assert!(
        md.contains(&format!("etcd Version: {version}")),
        "the report names etcd {version}:\n{md}"
    );
    eprintln!("{stdout}\n{stderr}");
}

/// Ctrl-C stops a soak early: every fault healed, every candidate and
/// process it started gone, and the report of what ran still written.
#[test]
fn ctrl_c_tears_down_and_still_reports() {
    let report = tmp("interrupted");
    let mut cmd = Command::new(BIN);
    cmd.args([
        "lab",
        "soak",
        "--backend",
        "raft",
        "--duration",
        "10m",
        "--seed",
        "7",
    ])
    .arg("--report")
    .arg(&report);
    // Long enough for the peers to elect and the first faults to land.
    let ran = soak(
        cmd,
        &report,
        Some(Duration::from_secs(12)),
        Duration::from_secs(120),
    );
    let stderr = ran.stderr;
    assert!(matches!(ran.code, Some(0 | 4)), "{:?}\n{stderr}", ran.code);
    assert!(stderr.contains("interrupted"), "{stderr}");
    let md = std::fs::read_to_string(report.join("report.md")).unwrap();
    assert!(md.contains("stopped early"), "{md}");
    let history = report.join("history");
    assert!(history.join("end.json").exists());
    // Nothing of the soak's is left: no candidate, command, watchdog or
    // stress-ng of this history.
    let marker = history.join("raft");
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline);
        assert!(
            !cmdline.contains(marker.to_str().unwrap()),
            "left running: {cmdline}"
        );
    }
}

/// The schedules that found violations, replayed exactly: the same faults
/// at the same instants and targets (`--schedule`). Each takes its whole
/// length (4 minutes), so CI runs the fixed seed's soak above instead and
/// the focused tests of `soak_found.rs`; run these with `cargo nextest run
/// --test soak --run-ignored only`.
#[test]
#[ignore = "minutes each; CI runs the seed-41 soak and tests/soak_found.rs"]
fn the_schedules_that_found_violations_hold_when_replayed() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/soak-schedules");
    let containers = support::mode() == support::Mode::Containers;
    for entry in std::fs::read_dir(&dir).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        // Member cuts need containers; the processes schedule replays anywhere.
        if name.contains("processes") == containers {
            continue;
        }
        let report = tmp(&format!("replay-{name}"));
        let mut replay = Command::new(BIN);
        replay.args(["lab", "soak", "--schedule"]).arg(entry.path());
        if containers {
            replay.arg("--containers");
        }
        replay.arg("--report").arg(&report);
        let ran = soak(replay, &report, None, Duration::from_secs(480));
        assert_eq!(ran.code, Some(0), "{name}:\n{}\n{}", ran.stdout, ran.stderr);
    }
}
