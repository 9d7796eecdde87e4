//! Bad input: a clear message naming the flag, exit code 2, nothing done;
//! an unreachable service: exit 1 within a bounded time.

mod support;

use std::time::Duration;

use support::elect::{BIN, elect_once};

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
    let once = |period: &'static str, extra: &[&'static str]| -> Vec<&'static str> {
        let mut args = vec!["run", "--election", "jobs", "--once", period];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--", "true"]);
        args
    };
    refused(&once("hourly", &[]), "--once");
    refused(&once("1500ms", &[]), "--once");
    refused(&once("400d", &[]), "--once");
    refused(&once("1h", &["--restart", "always"]), "--once");
    refused(
        &[
            "--backend",
            "raft",
            "--endpoints",
            "a=127.0.0.1:7001",
            "--id",
            "a",
            "run",
            "--election",
            "c",
            "--once",
            "1h",
            "--",
            "true",
        ],
        "--once",
    );
    refused(&with(&["--http", "localhost"]), "--http");
    refused(&with(&["--http", "4040"]), "--http");
}

#[test]
fn a_taken_http_port_fails_before_campaigning() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    // The endpoint is unreachable too: the port must be what fails, first.
    let (code, out, err, took) = elect_once(&[
        "campaign",
        "--election",
        "jobs",
        "--endpoints",
        "127.0.0.1:1",
        "--http",
        &addr,
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(out.is_empty(), "{out}");
    assert!(err.contains("--http") && err.contains(&addr), "{err}");
    assert_eq!(
        err.matches("in use").count(),
        1,
        "the OS's error is said once: {err}"
    );
    assert!(
        took < Duration::from_secs(2),
        "failed at once, not after the connect timeout: {took:?}"
    );
}

/// `args` (with a 1 s connect timeout) fail with exit 1 and `message`
/// within 5 s.
fn unreachable(args: &[&str], message: &str) {
    let args = [args, &["--connect-timeout", "1s"]].concat();
    let (code, _, err, took) = elect_once(&args);
    assert_eq!(code, 1, "{args:?}: {err}");
    assert!(err.contains(message), "{args:?}: {err}");
    assert!(took < Duration::from_secs(5), "{args:?} took {took:?}");
}

#[test]
fn unreachable_endpoint_fails_with_exit_1_in_bounded_time() {
    // Nothing listens on port 1 of loopback.
    for cmd in ["campaign", "observe", "leader"] {
        unreachable(
            &[cmd, "--election", "jobs", "--endpoints", "127.0.0.1:1"],
            "cannot reach etcd at http://127.0.0.1:1",
        );
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

/// The variables `elect lab up --format env` prints are read as they
/// are: without `--endpoints` or ELECT_ENDPOINTS, each backend takes its
/// own (`ELECT_ETCD_ENDPOINTS`...); ELECT_ENDPOINTS still wins.
#[test]
fn the_lab_s_endpoint_variables_are_read_as_printed() {
    let attempt = |vars: &[(&str, &str)]| {
        let mut cmd = std::process::Command::new(BIN);
        cmd.args(["campaign", "--election", "jobs", "--connect-timeout", "1s"])
            .env_remove("ELECT_ENDPOINTS")
            .env_remove("ELECT_ELECTION");
        for (k, v) in vars {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = attempt(&[("ELECT_ETCD_ENDPOINTS", "127.0.0.1:1")]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("etcd at http://127.0.0.1:1"), "{err}");
    let (_, err) = attempt(&[
        ("ELECT_ETCD_ENDPOINTS", "127.0.0.1:1"),
        ("ELECT_ENDPOINTS", "127.0.0.1:2"),
    ]);
    assert!(err.contains("etcd at http://127.0.0.1:2"), "{err}");
}

/// Options before the subcommand work (Kubernetes manifests put them
/// there), and `--help` says so.
#[test]
fn options_before_the_subcommand_work_and_help_says_so() {
    let (code, out, _, _) = elect_once(&["--help"]);
    assert_eq!(code, 0);
    assert!(out.contains("may also come before it"), "{out}");
    // Parsed, then failed to connect.
    unreachable(
        &["--election", "jobs", "--endpoints", "127.0.0.1:1", "leader"],
        "cannot reach etcd at http://127.0.0.1:1",
    );
}

#[test]
fn zookeeper_input_is_checked_before_connecting() {
    fn zk<'a>(extra: &[&'a str]) -> Vec<&'a str> {
        [
            &["--backend", "zk", "campaign", "--election", "/jobs"],
            extra,
        ]
        .concat()
    }
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
    refused(&zk(&["--id", &long_id]), "--id");

    unreachable(&zk(&["--endpoints", "127.0.0.1:1"]), "cannot reach zk");
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
    unreachable(
        &[
            "--backend",
            "raft",
            "--election",
            "c",
            "--endpoints",
            "a=127.0.0.1:1",
            "leader",
        ],
        "cannot reach raft",
    );
}

/// A flag that does nothing here is refused when typed (above), but only
/// warned about when it comes from the environment, which other commands
/// may share: the command goes on (and here fails to reach etcd, exit 1).
#[test]
fn flags_that_do_nothing_from_the_environment_are_only_warned_about() {
    let out = std::process::Command::new(support::elect::BIN)
        .args(["leader", "--election", "jobs", "--endpoints", "127.0.0.1:1"])
        .args(["--connect-timeout", "200ms"])
        .env("ELECT_HTTP", "127.0.0.1:4040")
        .env("ELECT_DATA_DIR", "/tmp")
        .env_remove("ELECT_ELECTION")
        .output()
        .expect("running elect");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    for flag in [
        "--http (from ELECT_HTTP)",
        "--data-dir (from ELECT_DATA_DIR)",
    ] {
        assert!(
            err.lines()
                .any(|l| l.starts_with("elect: warning: ") && l.contains(flag)),
            "no warning for {flag}: {err}"
        );
    }
}

#[test]
fn credentials_are_checked_before_connecting_and_passwords_stay_off_argv() {
    let dir = std::env::temp_dir().join(format!("elect-cli-creds-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let junk = dir.join("junk.pem");
    std::fs::write(&junk, "not a certificate").unwrap();
    let empty = dir.join("empty.password");
    std::fs::write(&empty, "\n").unwrap();
    let junk = junk.display().to_string();
    let empty = empty.display().to_string();
    let with = |extra: &[&str]| -> Vec<String> {
        ["campaign", "--election", "jobs"]
            .iter()
            .chain(extra)
            .map(|s| s.to_string())
            .collect()
    };
    let cases: Vec<(Vec<String>, &str)> = vec![
        (with(&["--cacert", "/nonexistent.pem"]), "--cacert"),
        (with(&["--cacert", &junk]), "--cacert"),
        (with(&["--cert", &junk, "--key", &junk]), "--cacert"),
        (with(&["--server-name", "etcd.local"]), "--server-name"),
        (with(&["--user", "alice"]), "--user"),
        (with(&["--password-file", &empty]), "--password-file"),
        (
            with(&["--user", "alice", "--password-file", &empty]),
            "--password-file",
        ),
        (with(&["--endpoints", "https://127.0.0.1:2379"]), "--cacert"),
        (with(&["--password", "hunter2"]), "--password"),
    ];
    for (args, flag) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        refused(&args, flag);
    }
    // Both password sources at once is ambiguous.
    let out = std::process::Command::new(support::elect::BIN)
        .args([
            "campaign",
            "--election",
            "jobs",
            "--user",
            "alice",
            "--password-file",
            &empty,
        ])
        .env("ELECT_PASSWORD", "hunter2")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("ELECT_PASSWORD is set too"), "{err}");
    assert!(!err.contains("hunter2"), "{err}");
    std::fs::remove_dir_all(dir).ok();
}

/// `--help` of the commands that print results, not snapshots, says what
/// they print and write.
#[test]
fn help_says_what_each_command_prints_and_writes() {
    let help = |args: &[&str]| {
        let out = std::process::Command::new(BIN)
            .args(args)
            .arg("--help")
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?} --help");
        String::from_utf8(out.stdout).unwrap()
    };
    for command in ["compare", "simulate"] {
        let text = help(&[command]);
        assert!(!text.contains("snapshot"), "{command} --format:\n{text}");
        assert!(
            text.contains("JSON row per line"),
            "{command} --format:\n{text}"
        );
    }
    let compare = help(&["compare"]);
    for file in ["report.html", "report.md", "rows.json", "SVG"] {
        assert!(compare.contains(file), "compare --report omits {file}");
    }
    let lab_up = help(&["lab", "up"]);
    for secured in ["etcd", "ZooKeeper", "Raft-vote"] {
        assert!(lab_up.contains(secured), "lab up --secure omits {secured}");
    }
}
