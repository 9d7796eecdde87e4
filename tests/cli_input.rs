//! Bad input: a clear message naming the flag, exit code 2, nothing done;
//! an unreachable service: exit 1 within a bounded time.

mod support;

use std::time::Duration;

use support::elect::elect_once;

fn refused(args: &[&str], flag: &str) {
    let (code, out, err, _) = elect_once(args);
    assert_eq!(code, 2, "{args:?}: {err}");
    assert!(out.is_empty(), "{args:?} printed {out}");
    assert!(
        err.contains(flag),
        "{args:?}: message does not name {flag}: {err}"
    );
}

#[test]
fn malformed_input_names_the_flag_and_exits_2() {
    let e = ["campaign", "--election", "jobs"];
    let with = |extra: &[&'static str]| -> Vec<&str> { e.iter().chain(extra).copied().collect() };
    refused(&with(&["--endpoints", "localhost"]), "--endpoints");
    refused(&with(&["--endpoints", "h:99999"]), "--endpoints");
    refused(&with(&["--endpoints", "a:1,,b:2"]), "--endpoints");
    refused(&with(&["--ttl", "soon"]), "--ttl");
    refused(&with(&["--ttl", "500ms"]), "--ttl");
    refused(&with(&["--connect-timeout", "x"]), "--connect-timeout");
    refused(&with(&["--id", ""]), "--id");
    refused(&with(&["--backend", "consul"]), "--backend");
    refused(&["campaign", "--election", "jobs/"], "--election");
    refused(&["campaign", "--election", ""], "--election");
    refused(&["campaign"], "--election");
    refused(
        &[
            "run",
            "--election",
            "jobs",
            "--grace",
            "forever",
            "--",
            "true",
        ],
        "--grace",
    );
    refused(&["run", "--election", "jobs"], "CMD");
}

#[test]
fn unreachable_endpoint_fails_with_exit_1_in_bounded_time() {
    // Nothing listens on port 1 of loopback.
    for cmd in ["campaign", "observe", "leader"] {
        let (code, _, err, took) = elect_once(&[
            cmd,
            "--election",
            "jobs",
            "--endpoints",
            "127.0.0.1:1",
            "--connect-timeout",
            "1s",
        ]);
        assert_eq!(code, 1, "{cmd}: {err}");
        assert!(
            err.contains("cannot reach etcd at http://127.0.0.1:1"),
            "{cmd}: {err}"
        );
        assert!(took < Duration::from_secs(5), "{cmd} took {took:?}");
    }
    let (code, _, err, _) = elect_once(&[
        "run",
        "--election",
        "jobs",
        "--endpoints",
        "127.0.0.1:1",
        "--connect-timeout",
        "1s",
        "--",
        "touch",
        "/nonexistent/never-run",
    ]);
    assert_eq!(code, 1, "{err}");
}

#[test]
fn zookeeper_input_is_checked_before_connecting() {
    let zk = |extra: &[&'static str]| -> Vec<&'static str> {
        ["--backend", "zk", "campaign", "--election", "/jobs"]
            .iter()
            .chain(extra)
            .copied()
            .collect()
    };
    for bad in ["jobs", "/jobs/", "/a//b", "/a/../b", "/a\u{1}b"] {
        refused(
            &["--backend", "zk", "campaign", "--election", bad],
            "--election",
        );
    }
    refused(&zk(&["--endpoints", "localhost"]), "--endpoints");
    refused(&zk(&["--endpoints", "h:2181//x"]), "--endpoints");
    refused(&zk(&["--ttl", "10ms"]), "--ttl");
    let long_id = "x".repeat(2000);
    let long_id: &'static str = Box::leak(long_id.into_boxed_str());
    refused(&zk(&["--id", long_id]), "--id");

    let (code, _, err, took) = elect_once(&zk(&[
        "--endpoints",
        "127.0.0.1:1",
        "--connect-timeout",
        "1s",
    ]));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("cannot reach zk"), "{err}");
    assert!(took < Duration::from_secs(5), "took {took:?}");
}

#[test]
fn raft_peers_are_checked_before_anything_starts() {
    let raft = |endpoints: &'static str, id: &'static str| -> Vec<&'static str> {
        vec![
            "--backend",
            "raft",
            "--election",
            "c",
            "--endpoints",
            endpoints,
            "--id",
            id,
            "campaign",
        ]
    };
    refused(
        &raft("a=127.0.0.1:7001,a=127.0.0.1:7002", "a"),
        "--endpoints",
    );
    refused(&raft("127.0.0.1:7001,b=127.0.0.1:7002", "b"), "--endpoints");
    refused(&raft("a=127.0.0.1,b=127.0.0.1:7002", "a"), "--endpoints");
    refused(&raft("a=127.0.0.1:7001,b=127.0.0.1:7002", "z"), "--id");
    refused(
        &[
            "--backend",
            "raft",
            "--election",
            "c",
            "--endpoints",
            "a=127.0.0.1:7001",
            "campaign",
        ],
        "--id",
    );
    let (code, _, err, took) = elect_once(&[
        "--backend",
        "raft",
        "--election",
        "c",
        "--endpoints",
        "a=127.0.0.1:1",
        "--connect-timeout",
        "1s",
        "leader",
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("cannot reach raft"), "{err}");
    assert!(took < Duration::from_secs(5));
}
