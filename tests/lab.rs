//! `elect lab`: real ensembles started in the background, faults dealt to
//! their members, and nothing left once they are taken down; `elect
//! compare` on ensembles it is given by endpoints.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use support::elect::BIN;
use support::{containers_only, eventually};

const SOON: Duration = Duration::from_secs(60);

fn lab(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(BIN)
        .arg("lab")
        .args(args)
        .arg("--dir")
        .arg(dir)
        .env_remove("ELECT_LAB_DIR")
        .output()
        .expect("elect runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn lab_ok(dir: &Path, args: &[&str]) -> String {
    let (code, out, err) = lab(dir, args);
    assert_eq!(code, 0, "elect lab {args:?}: {err}");
    out
}

fn status(dir: &Path) -> Value {
    serde_json::from_str(&lab_ok(dir, &["status", "--format", "json"])).unwrap()
}

fn member_state(dir: &Path, name: &str) -> (String, bool) {
    let s = status(dir);
    let m = s["members"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == name)
        .unwrap_or_else(|| panic!("{name} in {s}"))
        .clone();
    (
        m["state"].as_str().unwrap().to_owned(),
        m["healthy"].as_bool().unwrap(),
    )
}

fn wait_healthy(dir: &Path, name: &str) {
    eventually(&format!("{name} healthy"), SOON, || {
        (member_state(dir, name) == ("running".into(), true)).then_some(())
    });
}

fn scratch(what: &str) -> PathBuf {
    std::env::temp_dir().join(format!("elect-lab-test-{what}-{}", std::process::id()))
}

/// Live processes (zombies aside) whose command line names `dir`.
fn processes_naming(dir: &Path) -> Vec<i32> {
    let needle = dir.as_os_str().as_encoded_bytes().to_vec();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<i32>().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let zombie = stat
                .rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            !zombie && cmdline.windows(needle.len()).any(|w| w == needle)
        })
        .collect()
}

/// Takes the lab down even when the test fails half-way.
struct Down(PathBuf);

impl Drop for Down {
    fn drop(&mut self) {
        let _ = lab(&self.0, &["down"]);
    }
}

#[test]
fn lab_in_process_mode_up_faults_compare_down_leaves_nothing() {
    let dir = scratch("processes");
    let _down = Down(dir.clone());
    let env = lab_ok(
        &dir,
        &[
            "up", "--etcd", "3", "--zk", "1", "--raft", "3", "--format", "env",
        ],
    );
    let var = |name: &str| -> String {
        env.lines()
            .find_map(|l| l.strip_prefix(&format!("export {name}='")))
            .and_then(|v| v.strip_suffix('\''))
            .unwrap_or_else(|| panic!("{name} in {env}"))
            .to_owned()
    };
    let etcd = var("ELECT_ETCD_ENDPOINTS");
    let zk = var("ELECT_ZK_ENDPOINTS");
    assert_eq!(etcd.split(',').count(), 3);
    assert_eq!(zk.split(',').count(), 1);
    let raft = var("ELECT_RAFT_ENDPOINTS");
    // The Raft-vote peers elect a leader among themselves.
    let leader = || {
        let out = Command::new(BIN)
            .args([
                "--backend",
                "raft",
                "--endpoints",
                &raft,
                "--election",
                "lab",
            ])
            .args(["--format", "json", "leader"])
            .output()
            .unwrap();
        let line: Value = serde_json::from_slice(&out.stdout).ok()?;
        line["leader"].as_str().map(str::to_owned)
    };
    let first = eventually("a Raft-vote leader in the lab", SOON, leader);

    // From the lab to a job: the variables it printed, as they are, and
    // nothing else to say where etcd and ZooKeeper are.
    for (backend, election) in [("etcd", "lab-job"), ("zk", "/lab-job")] {
        let out = Command::new(BIN)
            .args(["--backend", backend, "--election", election, "--id", "a"])
            .args(["run", "--", "sh", "-c", "test -n \"$ELECT_FENCING_TOKEN\""])
            .env_remove("ELECT_ENDPOINTS")
            .env("ELECT_ETCD_ENDPOINTS", &etcd)
            .env("ELECT_ZK_ENDPOINTS", &zk)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{backend}: a job run with the lab's variables: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    // Up twice: refused, and the running lab is untouched.
    let (code, _, err) = lab(&dir, &["up"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("already up"), "{err}");
    let s = status(&dir);
    assert_eq!(s["members"].as_array().unwrap().len(), 7, "{s}");
    assert!(
        s["members"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["healthy"] == true),
        "{s}"
    );

    lab_ok(&dir, &["fault", "kill", "etcd-2"]);
    assert_eq!(member_state(&dir, "etcd-2"), ("killed".into(), false));
    lab_ok(&dir, &["fault", "restart", "etcd-2"]);
    wait_healthy(&dir, "etcd-2");
    lab_ok(&dir, &["fault", "pause", "zk-1"]);
    assert_eq!(member_state(&dir, "zk-1").0, "paused");
    lab_ok(&dir, &["fault", "resume", "zk-1"]);
    wait_healthy(&dir, "zk-1");
    // A hung log disk: strace holds its syncs until `unstall`. (A
    // ZooKeeper server opens its log at its first write: before, there is
    // nothing to stall, and it says so.)
    lab_ok(&dir, &["fault", "stall-log", "etcd-1"]);
    assert_eq!(member_state(&dir, "etcd-1").0, "stalled");
    let (code, _, err) = lab(&dir, &["fault", "stall", "etcd-1"]);
    assert_eq!(code, 1);
    assert!(err.contains("stalled already"), "{err}");
    lab_ok(&dir, &["fault", "unstall", "etcd-1"]);
    assert_eq!(member_state(&dir, "etcd-1").0, "running");
    wait_healthy(&dir, "etcd-1");
    // The machine under load, then off it: stress-ng's workers come and go.
    let stressing = || {
        let out = Command::new("pgrep")
            .args(["-f", "stress-ng"])
            .output()
            .unwrap();
        !out.stdout.is_empty()
    };
    assert_eq!(lab_ok(&dir, &["load", "on"]).trim(), "load: on");
    assert!(stressing(), "stress-ng runs");
    assert_eq!(lab_ok(&dir, &["load", "on"]).trim(), "load: on (already)");
    assert_eq!(lab_ok(&dir, &["load", "off"]).trim(), "load: off");
    assert!(!stressing(), "stress-ng is gone");

    // The leading peer killed: another takes over; restarted, it serves.
    lab_ok(&dir, &["fault", "kill", &first]);
    eventually("another Raft-vote leader", SOON, || {
        leader().filter(|l| *l != first)
    });
    lab_ok(&dir, &["fault", "restart", &first]);
    wait_healthy(&dir, &first);

    let (code, _, err) = lab(&dir, &["fault", "cut", "etcd-1"]);
    assert_eq!(code, 1);
    assert!(err.contains("--containers"), "{err}");
    let (code, _, err) = lab(&dir, &["fault", "kill", "etcd-9"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("etcd-1, etcd-2, etcd-3, zk-1, raft-1"),
        "{err}"
    );

    // compare on the ensembles it is given.
    let out = Command::new(BIN)
        .args(["compare", "--backends", "etcd,zk", "--scenarios"])
        .args(["handover,member-kill", "--trials", "3", "--format", "json"])
        .args(["--etcd-endpoints", &etcd, "--zk-endpoints", &zk])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let rows: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // Each backend's handover, then its floor (a delete and its event).
    assert_eq!(rows.len(), 4, "{rows:?}");
    let expected = [
        ("etcd", "elect"),
        ("etcd", "floor"),
        ("zk", "elect"),
        ("zk", "floor"),
    ];
    for (row, (backend, implementation)) in rows.iter().zip(expected) {
        assert_eq!(row["backend"], backend);
        assert_eq!(row["implementation"], implementation);
        assert_eq!(row["scenario"], "handover");
        assert_eq!(row["samples_ms"].as_array().unwrap().len(), 3);
    }
    // member-kill needs ensembles it started: said, not skipped silently.
    assert_eq!(stderr.matches("not run").count(), 2, "{stderr}");
    assert!(stderr.contains("member-kill"), "{stderr}");

    // `down` takes the load off too (its writer's files are in the lab's
    // directory, its command line names it).
    lab_ok(&dir, &["load", "on"]);
    lab_ok(&dir, &["down"]);
    assert!(!dir.exists(), "{} is left", dir.display());
    eventually("no member process left", SOON, || {
        processes_naming(&dir).is_empty().then_some(())
    });
    let (code, _, err) = lab(&dir, &["down"]);
    assert_eq!(code, 0);
    assert!(err.contains("no lab is up"), "{err}");
    let (code, _, err) = lab(&dir, &["status"]);
    assert_eq!(code, 1);
    assert!(err.contains("no lab is up"), "{err}");
}

#[test]
fn lab_in_container_mode_cuts_heals_and_leaves_nothing() {
    if !containers_only("lab in container mode") {
        return;
    }
    let dir = scratch("containers");
    let _down = Down(dir.clone());
    lab_ok(&dir, &["up", "--containers", "--etcd", "3", "--zk", "0"]);
    let id = status(&dir)["id"].as_str().unwrap().to_owned();
    let labelled = |what: &[&str]| -> String {
        let filter = format!("label=elect-lab={id}");
        let mut args = what.to_vec();
        args.extend(["-q", "--filter", &filter]);
        support::docker::docker(&args)
    };
    assert_eq!(labelled(&["ps"]).lines().count(), 3);

    lab_ok(&dir, &["fault", "cut", "etcd-3"]);
    assert_eq!(member_state(&dir, "etcd-3"), ("cut".into(), false));
    // Two of three serve on (once they have elected a new etcd leader, if
    // the cut member led).
    wait_healthy(&dir, "etcd-1");
    lab_ok(&dir, &["fault", "heal", "etcd-3"]);
    wait_healthy(&dir, "etcd-3");
    lab_ok(&dir, &["fault", "pause", "etcd-1"]);
    assert_eq!(member_state(&dir, "etcd-1").0, "paused");
    lab_ok(&dir, &["fault", "resume", "etcd-1"]);
    wait_healthy(&dir, "etcd-1");
    lab_ok(&dir, &["fault", "kill", "etcd-2"]);
    assert_eq!(member_state(&dir, "etcd-2").0, "killed");
    lab_ok(&dir, &["fault", "restart", "etcd-2"]);
    wait_healthy(&dir, "etcd-2");
    // strace from the host holds a container's syncs too; `down` lets
    // them go before it removes the container.
    lab_ok(&dir, &["fault", "stall", "etcd-3"]);
    assert_eq!(member_state(&dir, "etcd-3").0, "stalled");

    lab_ok(&dir, &["down"]);
    assert!(labelled(&["ps", "-a"]).is_empty(), "containers left");
    assert!(labelled(&["network", "ls"]).is_empty(), "network left");
    assert!(!dir.exists(), "{} is left", dir.display());
}
