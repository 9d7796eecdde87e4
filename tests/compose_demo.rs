//! The compose demo users run (deploy/compose/demo.sh): three app
//! containers wrapping their work in `elect run` against containerized
//! ensembles. Brought up, failed over and torn down as a user would, with
//! the `elect` under test mounted into the apps.

mod support;

use std::process::Command;

use support::containers_only;
use support::docker::{IMAGE, docker};
use support::elect::BIN;
use support::proc::scratch;

struct Demo {
    project: String,
    backend: &'static str,
    extra: std::path::PathBuf,
}

impl Demo {
    fn new(backend: &'static str) -> Demo {
        let dir = scratch(&format!("compose-{backend}"));
        let extra = dir.join("elect-under-test.yml");
        let mount = format!("      volumes: [\"{BIN}:/usr/local/bin/elect:ro\"]\n");
        let services: String = ["app1", "app2", "app3"]
            .iter()
            .map(|app| format!("  {app}:\n{mount}"))
            .collect();
        std::fs::write(&extra, format!("version: \"2.4\"\nservices:\n{services}")).unwrap();
        Demo {
            project: format!("electdemo{backend}{}", std::process::id()),
            backend,
            extra,
        }
    }

    /// `demo.sh <action>`; panics unless it succeeds; returns its stdout.
    fn run(&self, action: &str) -> String {
        let out = Command::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/deploy/compose/demo.sh"
        ))
        .arg(action)
        .env("ELECT_COMPOSE_PROJECT", &self.project)
        .env("ELECT_COMPOSE_EXTRA", &self.extra)
        .env("ELECT_IMAGE", IMAGE)
        .env("ELECT_DEMO_BACKEND", self.backend)
        .output()
        .expect("running demo.sh");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "demo.sh {action}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    }

    fn containers(&self) -> String {
        docker(&[
            "ps",
            "-aq",
            "--filter",
            &format!("label=com.docker.compose.project={}", self.project),
        ])
    }

    fn logs(&self, app: &str) -> String {
        let id = docker(&[
            "ps",
            "-aq",
            "--filter",
            &format!("label=com.docker.compose.project={}", self.project),
            "--filter",
            &format!("label=com.docker.compose.service={app}"),
        ]);
        let out = Command::new("docker").args(["logs", &id]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = std::panic::catch_unwind(|| self.run("down"));
    }
}

fn demo_leads_fails_over_and_leaves_nothing(backend: &'static str) {
    let demo = Demo::new(backend);
    let up = demo.run("up");
    let first = up
        .split(": ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or_else(|| panic!("demo.sh up names the leader: {up}"))
        .to_owned();
    assert!(demo.logs(&first).contains("starts work"), "{first} works");

    let failover = demo.run("failover");
    eprintln!("{backend}: {failover}");
    let new = failover
        .split("; ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or_else(|| panic!("demo.sh failover names the successor: {failover}"))
        .to_owned();
    assert_ne!(new, first);
    support::eventually(
        "the successor working",
        std::time::Duration::from_secs(10),
        || demo.logs(&new).contains("starts work").then_some(()),
    );
    // Only the leader ever started work.
    for app in ["app1", "app2", "app3"] {
        if app != first && app != new {
            assert!(!demo.logs(app).contains("starts work"), "{app} never led");
        }
    }

    demo.run("down");
    assert_eq!(demo.containers(), "", "no container left");
    let networks = docker(&[
        "network",
        "ls",
        "-q",
        "--filter",
        &format!("name={}", demo.project),
    ]);
    assert_eq!(networks, "", "no network left");
}

#[test]
fn compose_demo_on_etcd_leads_fails_over_and_leaves_nothing() {
    if containers_only("compose demo (etcd)") {
        demo_leads_fails_over_and_leaves_nothing("etcd");
    }
}

#[test]
fn compose_demo_on_zookeeper_leads_fails_over_and_leaves_nothing() {
    if containers_only("compose demo (zk)") {
        demo_leads_fails_over_and_leaves_nothing("zk");
    }
}
