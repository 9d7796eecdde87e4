//! `--http`: /leader, /healthz, /readyz and /metrics served by real
//! candidates and observers, through elections, handovers and the loss of
//! contact with the backend.

mod support;

use std::time::Duration;

use nix::sys::signal::Signal;
use serde_json::Value;
use support::elect::{Proc, elect, elect_zk};
use support::{eventually, http_get, loopback_net, metric};

const SOON: Duration = Duration::from_secs(20);

fn json(addr: &str, path: &str) -> (u16, Value) {
    let (status, body) = http_get(addr, path);
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

fn status(addr: &str, path: &str) -> u16 {
    http_get(addr, path).0
}

fn candidate(endpoints: &str, id: &str, http: &str) -> Proc {
    elect(
        id,
        endpoints,
        &[
            "--election",
            "/http",
            "--id",
            id,
            "--ttl",
            "2s",
            "--http",
            http,
            "campaign",
        ],
    )
}

#[test]
fn etcd_candidates_serve_the_leader_readiness_and_metrics() {
    let mut etcd = support::etcd::Cluster::start();
    let net = loopback_net();
    let (a_http, b_http, o_http) = (
        format!("{net}.1:4040"),
        format!("{net}.2:4040"),
        format!("{net}.3:4040"),
    );
    let mut a = candidate(&etcd.endpoints, "a", &a_http);
    a.wait_event("elected", SOON);
    let mut b = candidate(&etcd.endpoints, "b", &b_http);
    b.wait_leader("a", SOON);
    let _observer = elect(
        "observer",
        &etcd.endpoints,
        &["--election", "/http", "--http", &o_http, "observe"],
    );
    eventually("the observer serving", SOON, || {
        (status(&o_http, "/healthz") == 200).then_some(())
    });

    for (addr, is_self) in [(&a_http, true), (&b_http, false), (&o_http, false)] {
        let (code, body) = json(addr, "/leader");
        assert_eq!(code, 200, "{addr}: {body}");
        assert_eq!(body["name"], "a", "{body}");
        assert_eq!(body["leader"], "a", "{body}");
        assert_eq!(body["is_self"], is_self, "{body}");
        assert!(body["token"].as_u64().is_some(), "{body}");
        assert!(
            body["since"].as_str().is_some_and(|s| s.ends_with('Z')),
            "{body}"
        );
        assert_eq!(status(addr, "/healthz"), 200);
        assert_eq!(
            status(addr, "/readyz"),
            if is_self { 200 } else { 503 },
            "{addr}"
        );
    }
    assert_eq!(metric(&a_http, "elect_is_leader"), 1.0);
    assert_eq!(metric(&b_http, "elect_is_leader"), 0.0);
    let margin = metric(&a_http, "elect_deadline_margin_seconds");
    assert!(margin > 0.0 && margin <= 2.0, "margin {margin}");

    // A handover: b takes over, everyone's view follows.
    a.signal(Signal::SIGTERM);
    b.wait_event("elected", SOON);
    assert_eq!(a.wait_exit(SOON), 0);
    eventually("b ready", SOON, || {
        (status(&b_http, "/readyz") == 200).then_some(())
    });
    eventually("the observer seeing b", SOON, || {
        (json(&o_http, "/leader").1["name"] == "b").then_some(())
    });
    assert_eq!(metric(&b_http, "elect_is_leader"), 1.0);
    assert_eq!(metric(&o_http, "elect_leader_changes_total"), 2.0);
    assert_eq!(metric(&o_http, "elect_failover_seconds_count"), 1.0);

    // Quorum lost: nobody may read the old leader as fresh.
    etcd.kill(0);
    etcd.kill(1);
    eventually("the observer's view going stale", SOON, || {
        (status(&o_http, "/leader") == 503).then_some(())
    });
    assert_eq!(status(&o_http, "/healthz"), 503);
    eventually("b not ready", SOON, || {
        (status(&b_http, "/readyz") == 503).then_some(())
    });
    assert_eq!(metric(&o_http, "elect_view_current"), 0.0);
    assert!(metric(&o_http, "elect_backend_errors_total") >= 1.0);
}

#[test]
fn a_zookeeper_observer_and_a_raft_peer_serve_the_leader() {
    let zk = support::zk::Ensemble::start();
    let net = loopback_net();
    let zk_http = format!("{net}.1:4040");
    let _a = support::elect::campaign_zk(&zk.endpoints, "/http", "zk-a", "2s");
    let _observer = elect_zk(
        "observer",
        &zk.endpoints,
        &["--election", "/http", "--http", &zk_http, "observe"],
    );
    let body = eventually("the zk leader over HTTP", SOON, || {
        let (code, body) = json(&zk_http, "/leader");
        (code == 200 && body["name"] == "zk-a").then_some(body)
    });
    assert_eq!(body["is_self"], false);

    let cluster = support::raft::Cluster::new(1, "1s");
    let raft_http = format!("{net}.2:4040");
    let mut peer = cluster.campaign_with(&cluster.ids[0].clone(), &["--http", &raft_http]);
    peer.wait_event("elected", SOON);
    let (code, body) = json(&raft_http, "/leader");
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["name"], "p0");
    assert_eq!(body["is_self"], true);
    assert_eq!(status(&raft_http, "/readyz"), 200);
}

/// The Kubernetes example's sidecar arguments are real flags: run with
/// them (endpoints, address and paths swapped for the test's), the sidecar
/// writes the leader file and its readiness probe passes on the leader.
#[test]
fn the_kubernetes_sidecar_arguments_work_as_written() {
    let manifest = include_str!("../deploy/kubernetes/sidecar.yaml");
    let args = support::manifest_args(manifest, "elect");
    assert!(args.contains(&"campaign"), "{args:?}");
    // The manifest talks TLS to etcd as a user limited to the election's
    // prefix: a secured lab stands in, its files for the Secret's.
    let mut spec = elect_lab::Spec::new(support::mode(), 3, 0);
    spec.secure = true;
    let lab = elect_lab::Lab::up(&spec).expect("a secured etcd");
    let s = lab.security.clone().expect("secured");
    let endpoints = lab.endpoints(elect_lab::Role::Etcd).expect("etcd");
    let http = format!("{}.1:4040", loopback_net());
    let leader_file = support::proc::scratch("k8s").join("leader");
    let path = |p: &std::path::Path| p.display().to_string();
    let args: Vec<String> = args
        .iter()
        .map(|a| match a.split_once('=') {
            Some(("--endpoints", _)) => format!("--endpoints={endpoints}"),
            Some(("--http", _)) => format!("--http={http}"),
            Some(("--id", _)) => "--id=my-app-0".to_owned(),
            Some(("--leader-file", _)) => format!("--leader-file={}", leader_file.display()),
            Some(("--cacert", _)) => format!("--cacert={}", path(&s.ca)),
            Some(("--cert", _)) => format!("--cert={}", path(&s.client.cert)),
            Some(("--key", _)) => format!("--key={}", path(&s.client.key)),
            Some(("--user", _)) => format!("--user={}", s.user),
            Some(("--password-file", _)) => format!("--password-file={}", path(&s.password_file)),
            Some(("--election", name)) => format!("--election={}{name}", s.prefix),
            _ => a.to_string(),
        })
        .collect();
    let mut cmd = std::process::Command::new(support::elect::BIN);
    cmd.args(&args).args(["--format", "json"]);
    let mut sidecar = Proc::spawn("sidecar", cmd);
    sidecar.wait_event("elected", SOON);
    eventually("readiness on the leader", SOON, || {
        (status(&http, "/readyz") == 200).then_some(())
    });
    // The leader file and the HTTP view are written by separate exporters.
    eventually("the leader file naming us", SOON, || {
        let written = std::fs::read_to_string(&leader_file).ok()?;
        (written.trim() == "my-app-0").then_some(())
    });
}
