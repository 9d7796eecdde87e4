//! `deploy/systemd/elect@.service` as shipped: systemd's own checker
//! accepts it, and with its restart policy a command that finished is not
//! run again while one that failed is.

mod support;

use std::time::Duration;

use support::elect::BIN;
use support::proc::scratch;
use support::raft::Cluster;

const SOON: Duration = Duration::from_secs(15);
const UNIT: &str = include_str!("../deploy/systemd/elect@.service");
const ENV_EXAMPLE: &str = include_str!("../deploy/systemd/elect-job.env.example");

/// The value of `key=` in the unit's `[Service]` section (the last one,
/// as systemd takes it).
fn service_setting(key: &str) -> Option<String> {
    let mut in_service = false;
    let mut value = None;
    for line in UNIT.lines().map(str::trim) {
        if line.starts_with('[') {
            in_service = line == "[Service]";
        } else if in_service && let Some(v) = line.strip_prefix(&format!("{key}=")) {
            value = Some(v.to_owned());
        }
    }
    value
}

/// What systemd does when `elect run` exits with `code` under the unit's
/// `Restart=` (systemd.service(5): `on-failure` restarts on a non-zero
/// code, a signal, a timeout or a watchdog; `always` on anything).
fn restarts(code: i32) -> bool {
    match service_setting("Restart").as_deref() {
        Some("always") => true,
        Some("on-failure" | "on-abnormal") => code != 0,
        Some("no") | None => false,
        Some(other) => panic!("a Restart= this test does not know: {other}"),
    }
}

#[test]
fn a_finished_command_is_not_run_again_and_a_failed_one_is() {
    let cluster = Cluster::new(1, "150ms");
    for (script, code) in [("exit 0", 0), ("exit 3", 3)] {
        let mut run = cluster.run("p0", script);
        assert_eq!(run.wait_exit(SOON), code, "elect run's code");
        assert_eq!(
            restarts(code),
            code != 0,
            "under Restart={:?}, a command that exited {code}",
            service_setting("Restart")
        );
    }
}

#[test]
fn systemd_accepts_the_unit() {
    if std::process::Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        assert!(
            std::env::var_os("CI").is_none(),
            "systemd-analyze is needed in CI (deploy/test.sh installs it)"
        );
        eprintln!("no systemd-analyze here: not tried");
        return;
    }
    let dir = scratch("systemd-unit");
    let env_file = dir.join("job.env");
    std::fs::write(&env_file, ENV_EXAMPLE).unwrap();
    // The unit as shipped, pointed at this build and at the example's
    // settings; an instance name, as `systemctl enable elect@job` gives.
    let unit = UNIT
        .replace("/usr/local/bin/elect", BIN)
        .replace("/etc/elect/%i.env", env_file.to_str().unwrap());
    let path = dir.join("elect@job.service");
    std::fs::write(&path, unit).unwrap();
    let verified = std::process::Command::new("systemd-analyze")
        .arg("verify")
        .arg(&path)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&verified.stderr);
    assert!(
        verified.status.success() && !said.contains(path.file_name().unwrap().to_str().unwrap()),
        "systemd-analyze verify {}:\n{said}",
        path.display()
    );
}
