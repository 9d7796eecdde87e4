//! The deployment files as shipped:
//! - `deploy/systemd/elect@.service`: systemd's own checker accepts it,
//!   and with its restart policy a command that finished is not run again
//!   while one that failed is;
//! - `deploy/kubernetes/sidecar.yaml`: valid against Kubernetes' schemas
//!   (offline, `kubernetes-validate --strict`), and it rolls out: no
//!   readiness probe waits for leadership. (Its sidecar's arguments are
//!   run as written in `http_export.rs`, its etcd role in
//!   `etcd_secure.rs`.)

mod support;

use std::path::Path;
use std::time::Duration;

use support::elect::BIN;
use support::proc::scratch;
use support::raft::Cluster;

const SOON: Duration = Duration::from_secs(15);
const MANIFEST: &str = include_str!("../deploy/kubernetes/sidecar.yaml");
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

/// Where deploy/test.sh installs the schema validator (a virtualenv of
/// the repository's own), unless `KUBERNETES_VALIDATE` names another.
fn kubernetes_validate() -> Option<std::path::PathBuf> {
    let path = std::env::var_os("KUBERNETES_VALIDATE")
        .map(Into::into)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("target/tools/k8s/bin/kubernetes-validate")
        });
    path.exists().then_some(path)
}

#[test]
fn the_kubernetes_manifest_is_valid_for_kubernetes() {
    let Some(validator) = kubernetes_validate() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "kubernetes-validate is needed in CI (deploy/test.sh installs it)"
        );
        eprintln!("no kubernetes-validate here: not tried");
        return;
    };
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/kubernetes/sidecar.yaml");
    // The oldest Kubernetes still supported upstream when this was
    // written, and the newest the validator knows.
    for version in ["1.31.0", "1.37.0"] {
        let checked = std::process::Command::new(&validator)
            .args(["--strict", "--kubernetes-version", version])
            .arg(&manifest)
            .output()
            .unwrap();
        let said =
            String::from_utf8_lossy(&checked.stdout) + String::from_utf8_lossy(&checked.stderr);
        assert!(checked.status.success(), "Kubernetes {version}:\n{said}");
        for kind in ["deployment/my-app", "service/my-app-peers"] {
            assert!(
                said.contains(&format!("passed for resource {kind}")),
                "{said}"
            );
        }
    }
}

/// A rolling update of the Deployment must be able to replace every pod:
/// a readiness probe that only the leader passes would keep the new pods
/// unready, so the old leader could never go. And the leader-only route
/// the manifest documents exists: the pods' subdomain is a headless
/// Service that names them ready or not.
#[test]
fn the_kubernetes_manifest_rolls_out_and_routes_to_the_leader() {
    let probes: Vec<&str> = MANIFEST
        .split("readinessProbe:")
        .skip(1)
        .filter_map(|probe| probe.lines().find(|l| l.contains("path:")))
        .collect();
    assert!(
        probes.iter().all(|p| !p.contains("/readyz")),
        "a readiness probe only the leader passes: {probes:?}"
    );
    let subdomain = MANIFEST
        .lines()
        .find_map(|l| l.trim().strip_prefix("subdomain: "))
        .expect("the pods' subdomain");
    let service = MANIFEST
        .split("---")
        .find(|doc| doc.contains("kind: Service") && doc.contains(&format!("name: {subdomain}")))
        .unwrap_or_else(|| panic!("no Service {subdomain}"));
    assert!(service.contains("clusterIP: None"), "{service}");
    assert!(
        service.contains("publishNotReadyAddresses: true"),
        "{service}"
    );
}
