//! The deployment files as shipped:
//! - `deploy/systemd/elect@.service`: systemd's own checker accepts it,
//!   and with its restart policy a command that finished is not run again
//!   while one that failed is;
//! - `deploy/systemd/elect-once@.service` and its timer (periodic jobs):
//!   systemd accepts both, and the service's period is one `elect run
//!   --once` takes;
//! - `deploy/kubernetes/sidecar.yaml`: valid against Kubernetes' schemas
//!   (offline, `kubernetes-validate --strict`), and it rolls out: no
//!   readiness probe waits for leadership. (Its sidecar's arguments are
//!   run as written in `http_export.rs`, its etcd role in
//!   `etcd_secure.rs`.)
//! - `deploy/kubernetes/cronjob.yaml`: valid against the same schemas.
//!   (What `--once` does is run against real ensembles in `periodic.rs`.)

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
const ONCE_UNIT: &str = include_str!("../deploy/systemd/elect-once@.service");
const ONCE_TIMER: &str = include_str!("../deploy/systemd/elect-once@.timer");
const ONCE_ENV_EXAMPLE: &str = include_str!("../deploy/systemd/nightly-report.env.example");

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

/// Whether systemd-analyze is here (it must be in CI).
fn have_systemd_analyze() -> bool {
    let here = std::process::Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_ok();
    if !here {
        assert!(
            std::env::var_os("CI").is_none(),
            "systemd-analyze is needed in CI (deploy/test.sh installs it)"
        );
        eprintln!("no systemd-analyze here: not tried");
    }
    here
}

/// `systemd-analyze verify` on units as shipped, pointed at this build
/// and at `env` as their environment file; `units` are (file name, text),
/// named as `systemctl enable` names instances.
fn verify_units(purpose: &str, env: &str, units: &[(&str, &str)]) {
    let dir = scratch(purpose);
    let env_file = dir.join("job.env");
    std::fs::write(&env_file, env).unwrap();
    let paths: Vec<_> = units
        .iter()
        .map(|(name, text)| {
            let unit = text
                .replace("/usr/local/bin/elect", BIN)
                .replace("/etc/elect/%i.env", env_file.to_str().unwrap());
            let path = dir.join(name);
            std::fs::write(&path, unit).unwrap();
            path
        })
        .collect();
    let verified = std::process::Command::new("systemd-analyze")
        .arg("verify")
        .args(&paths)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&verified.stderr);
    for (name, _) in units {
        assert!(
            verified.status.success() && !said.contains(name),
            "systemd-analyze verify {name}:\n{said}"
        );
    }
}

#[test]
fn systemd_accepts_the_unit() {
    if have_systemd_analyze() {
        verify_units("systemd-unit", ENV_EXAMPLE, &[("elect@job.service", UNIT)]);
    }
}

#[test]
fn systemd_accepts_the_periodic_units_and_their_period() {
    if have_systemd_analyze() {
        verify_units(
            "systemd-once",
            ONCE_ENV_EXAMPLE,
            &[
                ("elect-once@report.service", ONCE_UNIT),
                ("elect-once@report.timer", ONCE_TIMER),
            ],
        );
    }
    // The period the examples set is one elect takes, and the example's
    // command is refused only for the service it cannot reach.
    for text in [ONCE_UNIT, ONCE_ENV_EXAMPLE] {
        let period = text
            .split(|c: char| c.is_whitespace())
            .find_map(|word| word.strip_prefix("ELECT_ONCE="))
            .expect("a period");
        let (code, _, err, _) = support::elect::elect_once(&[
            "run",
            "--election",
            "report",
            "--endpoints",
            "127.0.0.1:1",
            "--connect-timeout",
            "100ms",
            "--once",
            period,
            "--",
            "true",
        ]);
        assert_eq!(code, 1, "--once {period}: {err}");
        assert!(!err.contains("--once"), "--once {period}: {err}");
    }
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
fn the_kubernetes_manifests_are_valid_for_kubernetes() {
    let Some(validator) = kubernetes_validate() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "kubernetes-validate is needed in CI (deploy/test.sh installs it)"
        );
        eprintln!("no kubernetes-validate here: not tried");
        return;
    };
    let manifests = [
        (
            "sidecar.yaml",
            &["deployment/my-app", "service/my-app-peers"][..],
        ),
        ("cronjob.yaml", &["cronjob/nightly-report"][..]),
    ];
    for (file, resources) in manifests {
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("deploy/kubernetes")
            .join(file);
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
            assert!(
                checked.status.success(),
                "{file}, Kubernetes {version}:\n{said}"
            );
            for kind in resources {
                assert!(
                    said.contains(&format!("passed for resource {kind}")),
                    "{file}: {said}"
                );
            }
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

/// The Kubernetes guide's etcd, as written, without a cluster: its
/// certificates from `etcd-certificates.sh`, etcd started with the
/// guide's flags, the app's user from `etcd-users.sh` (auth turned on
/// with a root user), and the manifest's sidecar arguments (paths and
/// addresses swapped for the scratch directory's) lead and write the
/// leader file.
#[test]
fn the_kubernetes_guide_s_etcd_setup_elects_the_sidecar() {
    let guide = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/src/guides/kubernetes.md"),
    )
    .unwrap();
    let dir = scratch("k8s-guide");
    let certs = dir.join("certs");
    let net = support::loopback_net();
    let host = format!("{net}.1");
    let script = |name: &str| {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("deploy/kubernetes")
            .join(name)
    };
    let made = std::process::Command::new(script("etcd-certificates.sh"))
        .arg(&certs)
        .args([host.as_str(), "localhost"])
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    // etcd's flags from the guide, its files in `certs` and its
    // addresses ours.
    let flags: Vec<String> = guide
        .lines()
        .filter(|l| l.starts_with("--cert-file=") || l.starts_with("--listen-client-urls="))
        .flat_map(str::split_whitespace)
        .map(|flag| match flag.split_once('=') {
            Some((name, file)) if file.ends_with(".crt") || file.ends_with(".key") => {
                format!("{name}={}", certs.join(file).display())
            }
            Some(("--listen-client-urls", _)) => {
                format!("--listen-client-urls=https://{host}:2379")
            }
            Some(("--advertise-client-urls", _)) => {
                format!("--advertise-client-urls=https://{host}:2379")
            }
            _ => flag.to_owned(),
        })
        .collect();
    assert_eq!(flags.len(), 6, "the guide's etcd flags: {flags:?}");
    let peer = format!("http://{host}:2380");
    let _etcd = KilledOnDrop(
        std::process::Command::new("etcd")
            .args(&flags)
            .args(["--name", "k8s-guide", "--data-dir"])
            .arg(dir.join("data"))
            .args([
                "--listen-peer-urls",
                &peer,
                "--initial-advertise-peer-urls",
                &peer,
            ])
            .arg(format!("--initial-cluster=k8s-guide={peer}"))
            .stderr(std::fs::File::create(dir.join("etcd.log")).unwrap())
            .spawn()
            .expect("etcd"),
    );
    let endpoint = format!("https://{host}:2379");
    let etcdctl = |program: &Path| {
        let mut cmd = std::process::Command::new(program);
        cmd.env("ETCDCTL_API", "3")
            .env("ETCDCTL_ENDPOINTS", &endpoint)
            .env("ETCDCTL_CACERT", certs.join("ca.crt"))
            .env("ETCDCTL_CERT", certs.join("tls.crt"))
            .env("ETCDCTL_KEY", certs.join("tls.key"))
            .env("ETCDCTL_DIAL_TIMEOUT", "1s");
        cmd
    };
    support::eventually("etcd serving over TLS", SOON, || {
        let health = etcdctl(Path::new("etcdctl"))
            .args(["endpoint", "health"])
            .output()
            .unwrap();
        health.status.success().then_some(())
    });
    let added = etcdctl(&script("etcd-users.sh"))
        .arg("my-app")
        .env("ROOT_PASSWORD", "guide-root")
        .env("USER_PASSWORD", "guide-app")
        .output()
        .unwrap();
    assert!(
        added.status.success() && String::from_utf8_lossy(&added.stdout).contains("auth is on"),
        "etcd-users.sh: {}",
        String::from_utf8_lossy(&added.stderr)
    );
    std::fs::write(dir.join("password"), "guide-app\n").unwrap();

    let manifest = support::manifest_args(MANIFEST, "elect");
    let leader_file = dir.join("leader");
    let args: Vec<String> = manifest
        .iter()
        .map(|a| match a.split_once('=') {
            Some(("--endpoints", _)) => format!("--endpoints={endpoint}"),
            Some(("--http", _)) => format!("--http={host}:4040"),
            Some(("--id", _)) => "--id=my-app-0".to_owned(),
            Some(("--leader-file", _)) => format!("--leader-file={}", leader_file.display()),
            Some(("--password-file", _)) => {
                format!("--password-file={}", dir.join("password").display())
            }
            Some((flag @ ("--cacert" | "--cert" | "--key"), path)) => {
                let file = Path::new(path).file_name().unwrap();
                format!("{flag}={}", certs.join(file).display())
            }
            _ => a.to_string(),
        })
        .collect();
    let mut cmd = std::process::Command::new(BIN);
    cmd.args(&args).args(["--format", "json"]);
    let mut sidecar = support::elect::Proc::spawn("sidecar", cmd);
    sidecar.wait_event("elected", SOON);
    support::eventually("the leader file naming us", SOON, || {
        let written = std::fs::read_to_string(&leader_file).ok()?;
        (written.trim() == "my-app-0").then_some(())
    });
    sidecar.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(sidecar.wait_exit(SOON), 0, "{}", sidecar.stderr());
}

/// A process that dies with the test, passed or not.
struct KilledOnDrop(std::process::Child);

impl Drop for KilledOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
