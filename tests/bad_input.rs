//! The input contract itself, through the real binary: every bad input,
//! on every subcommand, by flag, variable or file, is refused with exit 2,
//! a message naming what was wrong, within a few seconds, with nothing
//! changed on disk and no process left behind. The cases are generated:
//! bad values crossed with the flags and variables that take them, and
//! special files (FIFOs without a writer, devices, `/dev/zero`,
//! directories, links, torn and garbled files) crossed with every flag
//! that names a file. A second test stops commands with signals while
//! they wait to connect; a third holds the exit-codes page to the codes
//! the binary gives.

mod support;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::elect::BIN;

/// How long a refusal may take: it comes before any I/O, so a debug
/// build answers in milliseconds; this bounds a hang, not a speed.
const PROMPTLY: Duration = Duration::from_secs(5);

/// The variable each case's processes carry, so that one left behind is
/// found by scanning /proc.
const MARKER: &str = "ELECT_BAD_INPUT_CASE";

/// One bad invocation and what its message must name.
struct Case {
    args: Vec<OsString>,
    env: Vec<(String, OsString)>,
    names: String,
}

fn case(args: &[&str], names: &str) -> Case {
    Case {
        args: args.iter().map(OsString::from).collect(),
        env: Vec::new(),
        names: names.to_owned(),
    }
}

impl Case {
    fn env(mut self, var: &str, value: impl Into<OsString>) -> Case {
        self.env.push((var.to_owned(), value.into()));
        self
    }

    fn arg(mut self, arg: impl Into<OsString>) -> Case {
        self.args.push(arg.into());
        self
    }
}

/// The scratch directory every case's files live in, and the case runs
/// in: its whole tree is compared before and after each case.
struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    fn new() -> Scratch {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bad-input");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch { dir }
    }

    fn path(&self, name: &str) -> String {
        self.dir.join(name).to_str().unwrap().to_owned()
    }

    fn write(&self, name: &str, text: impl AsRef<[u8]>) -> String {
        let path = self.dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_owned()
    }

    fn fifo(&self, name: &str) -> String {
        let path = self.dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::S_IRWXU).unwrap();
        path.to_str().unwrap().to_owned()
    }

    fn mkdir(&self, name: &str) -> String {
        std::fs::create_dir_all(self.dir.join(name)).unwrap();
        self.path(name)
    }

    fn link(&self, name: &str, to: &str) -> String {
        let path = self.dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(to, &path).unwrap();
        path.to_str().unwrap().to_owned()
    }

    /// Every entry under the scratch directory: its type, size, mode and
    /// modification time, and a regular file's contents.
    fn snapshot(&self) -> BTreeMap<PathBuf, String> {
        let mut out = BTreeMap::new();
        let mut todo = vec![self.dir.clone()];
        while let Some(dir) = todo.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                let meta = std::fs::symlink_metadata(&path).unwrap();
                let mut seen = format!(
                    "{:o} {} {}.{}",
                    meta.mode(),
                    meta.len(),
                    meta.mtime(),
                    meta.mtime_nsec()
                );
                if meta.is_file() {
                    seen.push_str(&format!(" {:?}", std::fs::read(&path).unwrap()));
                } else if meta.is_dir() {
                    todo.push(path.clone());
                }
                out.insert(path, seen);
            }
        }
        out
    }
}

/// Processes still running that carry `marker`'s value of [`MARKER`].
fn left_behind(marker: &str) -> Vec<String> {
    let wanted = format!("{MARKER}={marker}").into_bytes();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        if environ.split(|&b| b == 0).any(|v| v == wanted) {
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            found.push(String::from_utf8_lossy(&cmdline).replace('\0', " "));
        }
    }
    found
}

/// The devices the cases name, as they were: none may be replaced.
fn devices() -> Vec<(PathBuf, u64)> {
    ["/dev/null", "/dev/zero"]
        .iter()
        .map(|d| {
            let meta = std::fs::symlink_metadata(d).unwrap();
            assert!(
                meta.file_type().is_char_device_like(),
                "{d} is not a device"
            );
            (PathBuf::from(d), meta.rdev())
        })
        .collect()
}

trait CharDevice {
    fn is_char_device_like(&self) -> bool;
}

impl CharDevice for std::fs::FileType {
    fn is_char_device_like(&self) -> bool {
        std::os::unix::fs::FileTypeExt::is_char_device(self)
    }
}

/// Runs `case` (its number `n`) in the scratch directory and checks the
/// contract; the failure, if any.
fn check(n: usize, case: &Case, scratch: &Scratch) -> Result<(), String> {
    let before = scratch.snapshot();
    let devices_before = devices();
    let marker = format!("{}-{n}", std::process::id());
    let mut cmd = Command::new(BIN);
    cmd.args(&case.args)
        .current_dir(&scratch.dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env(MARKER, &marker)
        .env("RUST_LOG", "warn");
    for (var, _) in std::env::vars_os() {
        if var.to_string_lossy().starts_with("ELECT_") && var != MARKER {
            cmd.env_remove(var);
        }
    }
    for (var, value) in &case.env {
        cmd.env(var, value);
    }
    let started = Instant::now();
    let mut child = cmd.spawn().unwrap();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > PROMPTLY {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("still running after {PROMPTLY:?}"));
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let took = started.elapsed();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let mut wrong = Vec::new();
    if status.code() != Some(2) {
        wrong.push(format!("exit {:?}, not 2", status.code()));
    }
    if !stderr.contains(&case.names) {
        wrong.push(format!("stderr does not name {:?}", case.names));
    }
    if !out.stdout.is_empty() {
        wrong.push(format!(
            "printed {:?} on stdout",
            String::from_utf8_lossy(&out.stdout)
        ));
    }
    let after = scratch.snapshot();
    if after != before {
        let changed: Vec<_> = before
            .keys()
            .chain(after.keys())
            .filter(|k| before.get(*k) != after.get(*k))
            .collect();
        wrong.push(format!("changed on disk: {changed:?}"));
    }
    if devices() != devices_before {
        wrong.push("a device node was replaced".into());
    }
    let left = left_behind(&marker);
    if !left.is_empty() {
        wrong.push(format!("left running: {left:?}"));
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} (took {took:?}); stderr: {stderr}",
            wrong.join("; ")
        ))
    }
}

/// Values no duration flag takes.
const BAD_DURATIONS: [&str; 8] = [
    "soon",
    "-1s",
    "1.5.3s",
    "",
    "10 parsecs",
    "1e3s",
    "99999999999999999999999s",
    "   ",
];

/// Every flag that takes a duration, as (args before, flag, args after).
fn duration_flags() -> Vec<(Vec<&'static str>, &'static str, Vec<&'static str>)> {
    let e = vec!["--election", "jobs"];
    vec![
        ([vec!["campaign"], e.clone()].concat(), "--ttl", vec![]),
        ([vec!["observe"], e.clone()].concat(), "--ttl", vec![]),
        (
            [vec!["campaign"], e.clone()].concat(),
            "--connect-timeout",
            vec![],
        ),
        (
            [vec!["leader"], e.clone()].concat(),
            "--connect-timeout",
            vec![],
        ),
        (
            [vec!["run"], e.clone()].concat(),
            "--grace",
            vec!["--", "true"],
        ),
        (
            [vec!["run"], e.clone()].concat(),
            "--once",
            vec!["--", "true"],
        ),
        (vec!["lab", "soak"], "--duration", vec![]),
    ]
}

/// Every case: see the module's doc.
fn cases(s: &Scratch) -> Vec<Case> {
    let mut all = Vec::new();

    // Durations, typed and from their variables.
    for (before, flag, after) in duration_flags() {
        for bad in BAD_DURATIONS {
            let args: Vec<&str> = [before.as_slice(), &[flag, bad], after.as_slice()].concat();
            all.push(case(&args, flag));
        }
    }
    for bad in ["forever", "-5s", "12 o'clock"] {
        all.push(case(&["compare", "--ttl", &format!("etcd={bad}")], "--ttl"));
    }
    for (var, flag, args) in [
        ("ELECT_TTL", "--ttl", vec!["campaign", "--election", "jobs"]),
        (
            "ELECT_CONNECT_TIMEOUT",
            "--connect-timeout",
            vec!["leader", "--election", "jobs"],
        ),
        (
            "ELECT_GRACE",
            "--grace",
            vec!["run", "--election", "jobs", "--", "true"],
        ),
        (
            "ELECT_ONCE",
            "--once",
            vec!["run", "--election", "jobs", "--", "true"],
        ),
    ] {
        for bad in ["banana", "-1s", "1.5.3s", "10 parsecs"] {
            all.push(case(&args, &format!("{flag} (from {var})")).env(var, bad));
        }
    }
    // Values out of a backend's bounds, with the value in the message.
    for (args, names) in [
        (vec!["--ttl", "99999999999s"], "--ttl"),
        (vec!["--ttl", "500ms"], "500ms"),
        (vec!["--connect-timeout", "1ms"], "1ms"),
        (vec!["--connect-timeout", "25h"], "--connect-timeout"),
    ] {
        all.push(case(
            &[&["campaign", "--election", "jobs"], args.as_slice()].concat(),
            names,
        ));
    }
    all.push(case(
        &[
            "campaign",
            "--backend",
            "zk",
            "--election",
            "/j",
            "--ttl",
            "9999999s",
        ],
        "--ttl",
    ));
    for once in ["hourly", "1500ms", "400d", "0s"] {
        all.push(case(
            &["run", "--election", "jobs", "--once", once, "--", "true"],
            "--once",
        ));
    }

    // Endpoints, per backend, on the commands that take them.
    let etcd_bad = [
        "localhost",
        "::1:2379",
        "ftp://x:1",
        "h:99999",
        "h:0",
        "a:1,,b:2",
        "[::1:2379",
        "u@h:1",
        "http://",
        ":2379",
        "a b:1",
        "h:1,h:1",
    ];
    for sub in ["campaign", "observe", "leader"] {
        for bad in etcd_bad {
            all.push(case(
                &[sub, "--election", "jobs", "--endpoints", bad],
                "--endpoints",
            ));
        }
    }
    let zk_bad = [
        "ftp://x",
        "127.0.0.1",
        "::1:2181",
        "a:2181//x",
        "a:0",
        "a:2181/x/",
        "h:1,h:1",
        "a:2181/zookeeper/x",
    ];
    for sub in ["campaign", "leader"] {
        for bad in zk_bad {
            all.push(case(
                &[
                    sub,
                    "--backend",
                    "zk",
                    "--election",
                    "/j",
                    "--endpoints",
                    bad,
                ],
                "--endpoints",
            ));
        }
    }
    for bad in [
        "a",
        "a=h",
        "=h:1",
        "a=h:1,a=h:2",
        "a=h:0",
        "a=::1:1",
        "a=h:1,b=h:1",
    ] {
        all.push(case(
            &[
                "campaign",
                "--backend",
                "raft",
                "--election",
                "c",
                "--id",
                "a",
                "--endpoints",
                bad,
            ],
            "--endpoints",
        ));
    }
    for bad in ["localhost", "::1:2379", "ftp://x:1", "h:99999"] {
        all.push(
            case(
                &["campaign", "--election", "jobs"],
                "--endpoints (from ELECT_ENDPOINTS)",
            )
            .env("ELECT_ENDPOINTS", bad),
        );
    }
    for (flag, bad) in [
        ("--etcd-endpoints", "ftp://x"),
        ("--etcd-endpoints", "127.0.0.1:99999"),
        ("--etcd-endpoints", "::1:2379"),
        ("--etcd-endpoints", "a:1,,b:2"),
        ("--zk-endpoints", "127.0.0.1"),
        ("--zk-endpoints", "ftp://x"),
        ("--zk-endpoints", "a:0"),
        ("--zk-endpoints", "h:1,h:1"),
    ] {
        all.push(case(&["compare", flag, bad], flag));
    }

    // Election names.
    for bad in ["", "jobs/", "a\tb"] {
        all.push(case(&["campaign", "--election", bad], "--election"));
    }
    for bad in ["jobs", "/", "/a/", "/a//b", "/zookeeper/x", "/a/../b"] {
        all.push(case(
            &["leader", "--backend", "zk", "--election", bad],
            "--election",
        ));
    }
    all.push(case(&["campaign"], "--election"));
    all.push(case(
        &["campaign", "--election", "jobs", "--id", ""],
        "--id",
    ));
    all.push(case(
        &["campaign", "--election", "jobs", "--backend", "consul"],
        "--backend",
    ));

    // Files elect reads: TLS material and passwords.
    let pki = elect_lab::pki::Authority::new(&s.dir.join("pki"), "bad-input-ca").unwrap();
    let a = pki.issue("a", &["127.0.0.1"]).unwrap();
    let b = pki.issue("b", &["127.0.0.1"]).unwrap();
    let ca = pki.ca().to_str().unwrap().to_owned();
    let (a_cert, a_key) = (a.cert.to_str().unwrap(), a.key.to_str().unwrap());
    let b_key = b.key.to_str().unwrap().to_owned();
    let fifo = s.fifo("fifo");
    let dir = s.mkdir("adir");
    let empty = s.write("empty", "");
    let garbage = s.write("garbage", "not a file of any kind\n");
    let junk_cert = s.write(
        "junk.pem",
        "-----BEGIN CERTIFICATE-----\nAAAAAAAA\n-----END CERTIFICATE-----\n",
    );
    let missing = s.path("missing/file");
    let specials = [
        fifo.as_str(),
        "/dev/zero",
        "/dev/null",
        dir.as_str(),
        missing.as_str(),
        empty.as_str(),
        garbage.as_str(),
        junk_cert.as_str(),
    ];
    for sub in ["campaign", "leader"] {
        for bad in specials {
            all.push(case(
                &[sub, "--election", "jobs", "--cacert", bad],
                "--cacert",
            ));
        }
    }
    for bad in [
        fifo.as_str(),
        "/dev/zero",
        dir.as_str(),
        missing.as_str(),
        junk_cert.as_str(),
        empty.as_str(),
    ] {
        all.push(case(
            &[
                "campaign",
                "--election",
                "jobs",
                "--cacert",
                &ca,
                "--cert",
                bad,
                "--key",
                a_key,
            ],
            "--cert",
        ));
    }
    for bad in [
        fifo.as_str(),
        "/dev/zero",
        dir.as_str(),
        missing.as_str(),
        garbage.as_str(),
        b_key.as_str(),
    ] {
        all.push(case(
            &[
                "campaign",
                "--election",
                "jobs",
                "--cacert",
                &ca,
                "--cert",
                a_cert,
                "--key",
                bad,
            ],
            "--key",
        ));
    }
    // A key that is not the certificate's, on each backend.
    all.push(case(
        &[
            "leader",
            "--backend",
            "zk",
            "--election",
            "/j",
            "--cacert",
            &ca,
            "--cert",
            a_cert,
            "--key",
            &b_key,
        ],
        "--key",
    ));
    all.push(case(
        &[
            "campaign",
            "--backend",
            "raft",
            "--election",
            "c",
            "--id",
            "a",
            "--endpoints",
            "a=127.0.0.1:1",
            "--cacert",
            &ca,
            "--cert",
            a_cert,
            "--key",
            &b_key,
        ],
        "--key",
    ));
    all.push(case(
        &[
            "campaign",
            "--election",
            "jobs",
            "--cert",
            a_cert,
            "--key",
            a_key,
        ],
        "--cacert",
    ));
    all.push(case(
        &["campaign", "--election", "jobs", "--server-name", "x"],
        "--server-name",
    ));
    for bad in [
        fifo.as_str(),
        "/dev/zero",
        "/dev/null",
        dir.as_str(),
        missing.as_str(),
        empty.as_str(),
    ] {
        all.push(case(
            &[
                "campaign",
                "--election",
                "jobs",
                "--user",
                "u",
                "--password-file",
                bad,
            ],
            "--password-file",
        ));
    }
    all.push(
        case(
            &["campaign", "--election", "jobs", "--user", "u"],
            "--password-file (from ELECT_PASSWORD_FILE)",
        )
        .env("ELECT_PASSWORD_FILE", "/dev/zero"),
    );
    all.push(case(
        &["campaign", "--election", "jobs", "--user", "u"],
        "--user",
    ));
    all.push(
        case(
            &["campaign", "--election", "jobs", "--user", "a:b"],
            "--user",
        )
        .env("ELECT_PASSWORD", "p"),
    );

    // The leader file: only a regular file of ours, in a writable
    // directory, is ever replaced.
    let kept = s.write("keep/leader", "someone else's\n");
    let link = s.link("keep/link", &kept);
    let dir_slash = format!("{dir}/");
    let under_file = format!("{kept}/leader");
    let leader_files = [
        "/dev/null",
        fifo.as_str(),
        dir.as_str(),
        missing.as_str(),
        link.as_str(),
        dir_slash.as_str(),
        "/dev/null/leader",
        under_file.as_str(),
    ];
    for (sub, tail) in [
        ("campaign", vec![]),
        ("observe", vec![]),
        ("run", vec!["--", "true"]),
    ] {
        for bad in leader_files {
            let args: Vec<&str> = [
                &[sub, "--election", "jobs", "--leader-file", bad],
                tail.as_slice(),
            ]
            .concat();
            all.push(case(&args, "--leader-file"));
        }
    }
    all.push(
        case(
            &["campaign", "--election", "jobs"],
            "--leader-file (from ELECT_LEADER_FILE)",
        )
        .env("ELECT_LEADER_FILE", "/dev/null"),
    );
    for bad in ["localhost", "4040", "1.2.3.4", "[::1]", "0.0.0.0:99999"] {
        all.push(case(
            &["campaign", "--election", "jobs", "--http", bad],
            "--http",
        ));
    }

    // The Raft-vote state: a file where the directory should be, a torn
    // state, a state that is a FIFO.
    let port = free_port();
    let peers = format!("a=127.0.0.1:{port}");
    let raft = |data_dir: &str| -> Vec<String> {
        [
            "campaign",
            "--backend",
            "raft",
            "--election",
            "c",
            "--id",
            "a",
            "--endpoints",
            &peers,
            "--data-dir",
            data_dir,
        ]
        .map(str::to_owned)
        .to_vec()
    };
    let torn = s.write("torn/raft-vote.state", [7u8; 100]);
    let torn_dir = Path::new(&torn)
        .parent()
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    let fifo_state = s.fifo("fifo-state/raft-vote.state");
    let fifo_state_dir = Path::new(&fifo_state)
        .parent()
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    let legacy = s.write("legacy/raft-vote.json", "{\"term\": ");
    let legacy_dir = Path::new(&legacy)
        .parent()
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    for data_dir in [
        garbage.as_str(),
        &torn_dir,
        &fifo_state_dir,
        &legacy_dir,
        "/dev/null",
    ] {
        let args = raft(data_dir);
        all.push(case(
            &args.iter().map(String::as_str).collect::<Vec<_>>(),
            "--data-dir",
        ));
    }
    all.push(case(
        &["campaign", "--election", "jobs", "--data-dir", &dir],
        "--data-dir",
    ));

    // The command of `run`.
    let not_executable = s.write("not-executable", "#!/bin/sh\n");
    for (cmd, names) in [
        ("/nonexistent/prog", "CMD"),
        ("no-such-program-anywhere", "CMD"),
        (dir.as_str(), "CMD"),
        (not_executable.as_str(), "CMD"),
    ] {
        all.push(case(&["run", "--election", "jobs", "--", cmd], names));
    }
    all.push(case(&["run", "--election", "jobs"], "CMD"));
    all.push(case(
        &[
            "run",
            "--backend",
            "raft",
            "--endpoints",
            "a=127.0.0.1:1",
            "--id",
            "a",
            "--election",
            "c",
            "--once",
            "1h",
            "--",
            "true",
        ],
        "--once",
    ));
    all.push(case(
        &[
            "run",
            "--election",
            "jobs",
            "--once",
            "1h",
            "--restart",
            "always",
            "--",
            "true",
        ],
        "--once",
    ));

    // Arguments that are not UTF-8.
    let not_utf8 = || OsString::from_vec(vec![b'j', 0xff, b'b']);
    for flag in ["--election", "--id", "--endpoints", "--ttl"] {
        all.push(
            case(&["campaign", "--election", "jobs"], flag)
                .arg(flag)
                .arg(not_utf8()),
        );
    }
    let mut inline = OsString::from("--election=");
    inline.push(not_utf8());
    all.push(case(&["leader"], "--election").arg(inline));

    // The soak's schedules and histories.
    let schedule = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/soak-schedules/seed-41.json"),
    )
    .unwrap();
    let mut bad_schedules = vec![
        fifo.clone(),
        "/dev/zero".into(),
        dir.clone(),
        missing.clone(),
        empty.clone(),
        garbage.clone(),
        s.write("sched/truncated.json", &schedule[..schedule.len() / 2]),
    ];
    for (name, from, to) in [
        ("kind", "\"watchdog-kill\"", "\"watchdog-explode\""),
        ("target", "\"c3\"", "\"nobody\""),
        ("member", "\"etcd-2\"", "\"etcd-9\""),
        (
            "backend",
            "\"backend\": \"etcd\"",
            "\"backend\": \"consul\"",
        ),
        ("end", "\"end\": 5011008", "\"end\": 11"),
    ] {
        assert!(
            schedule.contains(from),
            "{name}: {from} not in the schedule"
        );
        bad_schedules.push(s.write(
            &format!("sched/{name}.json"),
            schedule.replacen(from, to, 1),
        ));
    }
    for bad in &bad_schedules {
        all.push(case(&["lab", "soak", "--schedule", bad], "--schedule"));
    }
    let history = write_history(&s.dir.join("history"));
    let variants: Vec<(&str, Spoil)> = vec![
        ("store-cut", (|h: &Path| cut(&h.join("store.jsonl")))),
        ("faults-cut", (|h: &Path| cut(&h.join("faults.jsonl")))),
        (
            "procs-garbled",
            (|h: &Path| append(&h.join("procs.jsonl"), "{\"k\": \"proc\", \"t\"\n")),
        ),
        (
            "lines-garbage",
            (|h: &Path| append(&h.join("lines.jsonl"), "garbage\n")),
        ),
        ("meta-cut", (|h: &Path| cut(&h.join("meta.json")))),
        (
            "store-fifo",
            (|h: &Path| {
                std::fs::remove_file(h.join("store.jsonl")).unwrap();
                nix::unistd::mkfifo(&h.join("store.jsonl"), nix::sys::stat::Mode::S_IRWXU).unwrap();
            }),
        ),
        (
            "store-dir",
            (|h: &Path| {
                std::fs::remove_file(h.join("store.jsonl")).unwrap();
                std::fs::create_dir(h.join("store.jsonl")).unwrap();
            }),
        ),
        (
            "lines-zero",
            (|h: &Path| {
                std::fs::remove_file(h.join("lines.jsonl")).unwrap();
                std::os::unix::fs::symlink("/dev/zero", h.join("lines.jsonl")).unwrap();
            }),
        ),
        ("end-cut", (|h: &Path| cut(&h.join("end.json")))),
        (
            "faults-missing",
            (|h: &Path| std::fs::remove_file(h.join("faults.jsonl")).unwrap()),
        ),
    ];
    for (name, spoil) in variants {
        let copy = s.dir.join(format!("histories/{name}/history"));
        copy_dir(&history, &copy);
        spoil(&copy);
        all.push(case(
            &["lab", "soak", "--check", copy.to_str().unwrap()],
            copy.to_str().unwrap(),
        ));
    }
    all.push(case(&["lab", "soak", "--check", &missing], "--check"));
    all.push(case(&["lab", "soak", "--check", &dir], "--check"));
    for (args, flag) in [
        (vec!["--candidates", "1"], "--candidates"),
        (vec!["--candidates", "99"], "--candidates"),
        (vec!["--backend", "consul"], "--backend"),
        (vec!["--backend", "raft", "--peers"], "--peers"),
    ] {
        all.push(case(&[&["lab", "soak"], args.as_slice()].concat(), flag));
    }

    // The lab's state file.
    let torn_lab = s.write("torn-lab/lab.json", "{\"id\": \"x\", \"members\": [");
    let torn_lab_dir = Path::new(&torn_lab)
        .parent()
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    let fifo_lab = s.fifo("fifo-lab/lab.json");
    let fifo_lab_dir = Path::new(&fifo_lab)
        .parent()
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    s.mkdir("dir-lab/lab.json");
    let dir_lab = s.path("dir-lab");
    for lab_dir in [&torn_lab_dir, &fifo_lab_dir, &dir_lab] {
        for action in [
            vec!["status"],
            vec!["down"],
            vec!["fault", "kill", "etcd-1"],
            vec!["load", "on"],
        ] {
            let args: Vec<&str> = [&["lab", "--dir", lab_dir.as_str()], action.as_slice()].concat();
            all.push(case(&args, "lab.json"));
        }
    }
    all.push(case(&["lab", "--format", "env", "down"], "--format"));
    for action in ["up", "status", "down"] {
        all.push(case(&["lab", "--dir", "/dev/null", action], "--dir"));
        all.push(case(&["lab", "--dir", garbage.as_str(), action], "--dir"));
    }

    // ELECT_ETCD_BIN, wherever an etcd would be started: refused before
    // anything starts, the variable and its value named.
    let no_etcd = s.mkdir("etcd-bin-empty");
    let not_etcd = s.write("etcd-bin-file", "not a directory");
    let fifo_etcd = s.fifo("etcd-bin-fifo/etcd");
    let fifo_etcd_dir = Path::new(&fifo_etcd)
        .parent()
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    let new_lab = s.path("etcd-bin-lab");
    for bin in [&no_etcd, &not_etcd, &fifo_etcd_dir, &"/dev/null".to_owned()] {
        for args in [
            vec![
                "lab",
                "--dir",
                new_lab.as_str(),
                "up",
                "--etcd",
                "1",
                "--zk",
                "0",
            ],
            vec!["compare", "--backends", "etcd", "--trials", "1"],
            vec!["lab", "soak", "--backend", "etcd", "--duration", "1m"],
        ] {
            all.push(case(&args, "ELECT_ETCD_BIN").env("ELECT_ETCD_BIN", bin.as_str()));
        }
    }

    // compare and simulate.
    for (args, flag) in [
        (vec!["--backends", "consul"], "--backends"),
        (vec!["--scenarios", "nope"], "--scenarios"),
        (vec!["--trials", "0"], "--trials"),
        (vec!["--raft-peers", "4"], "--raft-peers"),
        (vec!["--report", "/dev/null/r"], "--report"),
        (vec!["--report", garbage.as_str()], "--report"),
        (vec!["--report", missing.as_str()], "--report"),
        (vec!["--ttl", "consul=1s"], "--ttl"),
    ] {
        all.push(case(&[&["compare"], args.as_slice()].concat(), flag));
    }
    for (args, flag) in [
        (vec!["--algorithm", "ring", "--runs", "0"], "--runs"),
        (
            vec!["--algorithm", "ring", "--runs", "1000000000"],
            "--runs",
        ),
        (vec!["--algorithm", "ring", "--nodes", "1"], "--nodes"),
        (vec!["--algorithm", "ring", "--nodes", "5000"], "--nodes"),
        (vec!["--algorithm", "ring", "--sweep", "4,x"], "--sweep"),
        (
            vec!["--algorithm", "ring", "--sweep", "4,8", "--nodes", "100"],
            "--sweep",
        ),
        (vec!["--algorithm", "nope"], "--algorithm"),
        (vec!["--algorithm", "ring", "--compare"], "--compare"),
        (
            vec!["--algorithm", "ring", "--false-suspicion", "2"],
            "--false-suspicion",
        ),
        (
            vec!["--algorithm", "chang-roberts", "--partition"],
            "--partition",
        ),
        (vec!["--algorithm", "ring", "--plot", "x.svg"], "--plot"),
        (vec![], "--algorithm"),
        (
            vec![
                "--algorithm",
                "ring",
                "--sweep",
                "4,8",
                "--plot",
                fifo.as_str(),
            ],
            "--plot",
        ),
        (
            vec![
                "--algorithm",
                "ring",
                "--sweep",
                "4,8",
                "--plot",
                "/dev/null",
            ],
            "--plot",
        ),
    ] {
        all.push(case(&[&["simulate"], args.as_slice()].concat(), flag));
    }
    all.push(case(&["demo"], "ELECT_DEMO_LOG").env("ELECT_DEMO_LOG", "[[["));
    all.push(case(&["man", "--out", "/dev/null"], "--out"));
    all.push(case(&["man", "--out", &garbage], "--out"));
    let man_fifo = s.fifo("man/elect.1");
    let man_dir = Path::new(&man_fifo)
        .parent()
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    all.push(case(&["man", "--out", &man_dir], "--out"));
    all.push(case(&["completions", "tcsh"], "tcsh"));
    // Steering: the target, the switchover's timeout, the priority and
    // the failback delay.
    let switchover = ["switchover", "--election", "jobs"];
    all.push(case(&switchover, "--to"));
    all.push(case(&[&switchover[..], &["--to", ""]].concat(), "--to"));
    for bad in ["0s", "50ms", "11m", "soon"] {
        let args = [&switchover[..], &["--to", "b", "--timeout", bad]].concat();
        all.push(case(&args, "--timeout"));
    }
    for bad in ["-1", "1000001", "high", "1.5"] {
        all.push(case(
            &["campaign", "--election", "jobs", "--priority", bad],
            "--priority",
        ));
    }
    for bad in ["1ms", "25h", "soon"] {
        let args = [
            "run",
            "--election",
            "jobs",
            "--failback-delay",
            bad,
            "--",
            "true",
        ];
        all.push(case(&args, "--failback-delay"));
    }
    // Health checks: the check, its interval and failures.
    let campaign = ["campaign", "--election", "jobs"];
    for (flag, bad) in [
        ("--health-cmd", " "),
        ("--health-url", "https://db/"),
        ("--health-url", "db:80"),
        ("--health-url", "http://db:99999/"),
        ("--health-url", "http://"),
    ] {
        all.push(case(&[&campaign[..], &[flag, bad]].concat(), flag));
    }
    for bad in ["0s", "50ms", "2h", "soon"] {
        let args = [
            &campaign[..],
            &["--health-cmd", "true", "--health-interval", bad],
        ]
        .concat();
        all.push(case(&args, "--health-interval"));
    }
    for bad in ["0", "101", "-1", "many"] {
        let args = [
            &campaign[..],
            &["--health-url", "http://db/", "--health-failures", bad],
        ]
        .concat();
        all.push(case(&args, "--health-failures"));
    }
    all.push(case(
        &[&campaign[..], &["--health-interval", "1s"]].concat(),
        "--health-interval",
    ));
    all
}

/// How a copy of a whole history is spoiled.
type Spoil = fn(&Path);

/// A free port on loopback for a peer that is never reached.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A small history that parses whole.
fn write_history(h: &Path) -> PathBuf {
    std::fs::create_dir_all(h).unwrap();
    let meta = serde_json::json!({
        "seed": 5, "started_unix_ms": 0, "ended": 20_000_000, "mode": "processes",
        "sampler_period": 2000, "line_slack": 500_000,
        "elections": [{"key": "etcd/elect", "backend": "etcd", "contender": "elect",
            "ttl_ms": 2000, "liveness_bound": 6_000_000, "decides_exit": true,
            "candidates": ["c1", "c2"]}]
    });
    std::fs::write(h.join("meta.json"), meta.to_string()).unwrap();
    let lines = |rows: &[serde_json::Value]| {
        rows.iter()
            .map(|r| r.to_string() + "\n")
            .collect::<String>()
    };
    std::fs::write(
        h.join("procs.jsonl"),
        lines(&[
            serde_json::json!({"k": "proc", "t": 100_000, "pid": 10, "e": "etcd/elect",
            "cand": "c1", "role": "writer", "state": "run"}),
        ]),
    )
    .unwrap();
    std::fs::write(
        h.join("store.jsonl"),
        lines(&[
            serde_json::json!({"k": "span", "e": "etcd/elect", "c": 1, "token": 7,
                "from": 200_000, "to": 9_000_000, "n": 880}),
            serde_json::json!({"k": "span", "e": "etcd/elect", "c": 1, "token": 7,
                "from": 9_010_000, "to": 19_000_000, "n": 999}),
        ]),
    )
    .unwrap();
    std::fs::write(h.join("lines.jsonl"), "").unwrap();
    std::fs::write(
        h.join("faults.jsonl"),
        lines(&[
            serde_json::json!({"kind": "member-kill", "backend": "etcd", "target": "etcd-1",
            "start": 1_000_000, "end": 2_000_000}),
        ]),
    )
    .unwrap();
    std::fs::write(h.join("end.json"), r#"{"leftovers": []}"#).unwrap();
    h.to_owned()
}

/// Cuts `file` in the middle of its last line.
fn cut(file: &Path) {
    let text = std::fs::read(file).unwrap();
    assert!(text.len() > 4, "{file:?} is too short to cut");
    std::fs::write(file, &text[..text.len() - 3]).unwrap();
}

fn append(file: &Path, line: &str) {
    let mut text = std::fs::read_to_string(file).unwrap();
    text.push_str(line);
    std::fs::write(file, text).unwrap();
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

#[test]
fn every_bad_input_is_refused_promptly_by_name_changing_nothing() {
    let scratch = Scratch::new();
    let cases = cases(&scratch);
    assert!(cases.len() >= 200, "only {} cases", cases.len());
    let mut failed = Vec::new();
    for (n, c) in cases.iter().enumerate() {
        if let Err(why) = check(n, c, &scratch) {
            let shown: Vec<_> = c.args.iter().map(|a| a.to_string_lossy()).collect();
            failed.push(format!("case {n} {shown:?} {:?}: {why}", c.env));
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {} cases broke the contract:\n{}",
        failed.len(),
        cases.len(),
        failed.join("\n")
    );
    // The same history, whole, is judged (a report written), not refused.
    let whole = scratch.dir.join("history");
    let judged = Command::new(BIN)
        .args(["lab", "soak", "--check"])
        .arg(&whole)
        .output()
        .unwrap();
    assert_ne!(
        judged.status.code(),
        Some(2),
        "a whole history was refused: {}",
        String::from_utf8_lossy(&judged.stderr)
    );
    println!("{} bad inputs refused", cases.len());
}

/// A shutdown signal while a command waits to connect (etcd refusing on
/// 127.0.0.1:1; the connect timeout 20 s) ends it at once: the election
/// commands exit 0 as on any stop, `leader` with 128+N, having held
/// nothing.
#[test]
fn signals_during_the_connect_wait_end_the_command_at_once() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let commands: [(&[&str], Signal, i32); 7] = [
        (&["campaign"], Signal::SIGINT, 0),
        (&["campaign"], Signal::SIGTERM, 0),
        (&["observe"], Signal::SIGINT, 0),
        (&["run", "--", "true"], Signal::SIGTERM, 0),
        (&["run", "--once", "1h", "--", "true"], Signal::SIGINT, 0),
        (&["leader"], Signal::SIGINT, 130),
        (&["leader"], Signal::SIGTERM, 143),
    ];
    for (n, (tail, sig, code)) in commands.into_iter().enumerate() {
        let (sub, rest) = tail.split_first().unwrap();
        let marker = format!("{}-signal-{n}", std::process::id());
        let mut child = Command::new(BIN)
            .arg(sub)
            .args([
                "--election",
                "jobs",
                "--endpoints",
                "127.0.0.1:1",
                "--connect-timeout",
                "20s",
            ])
            .args(rest)
            .env(MARKER, &marker)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Once the handler is in place (a signal before it would end the
        // process by its default action, which proves nothing), and the
        // first attempt has been refused.
        let handled = Instant::now();
        while !catches(child.id(), sig) {
            assert!(handled.elapsed() < PROMPTLY, "{tail:?} never caught {sig}");
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(300));
        let sent = Instant::now();
        kill(Pid::from_raw(child.id() as i32), sig).unwrap();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            assert!(
                sent.elapsed() < PROMPTLY,
                "{tail:?} still waits after {sig}"
            );
            std::thread::sleep(Duration::from_millis(2));
        };
        let took = sent.elapsed();
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(status.code(), Some(code), "{tail:?} {sig}: {stderr}");
        assert!(
            stderr.contains("while connecting"),
            "{tail:?} {sig}: {stderr}"
        );
        assert!(left_behind(&marker).is_empty(), "{tail:?} left processes");
        assert!(
            took < Duration::from_secs(2),
            "{tail:?} took {took:?} after {sig}"
        );
    }
}

/// Whether process `pid` has a handler for `sig` (`SigCgt` in its
/// status).
fn catches(pid: u32, sig: nix::sys::signal::Signal) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .is_some_and(|mask| mask & (1 << (sig as i32 - 1)) != 0)
}

/// The exit-codes page lists every code the binary gives, and says what
/// causes it: the codes of this file's tests among them.
#[test]
fn the_exit_codes_page_lists_every_code() {
    let page = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/src/reference/exit-codes.md"),
    )
    .unwrap();
    let listed: Vec<String> = page
        .lines()
        .filter_map(|l| l.strip_prefix("| "))
        .filter_map(|l| l.split(" |").next())
        .map(|c| c.trim().to_owned())
        .filter(|c| c != "code" && !c.starts_with("---"))
        .collect();
    for code in ["0", "1", "2", "3", "4", "5", "6", "125", "128+N"] {
        assert!(
            listed.iter().any(|c| c == code),
            "exit code {code} is not listed: {listed:?}"
        );
    }
    for code in &listed {
        let row = page
            .lines()
            .find(|l| l.starts_with(&format!("| {code} |")))
            .unwrap();
        let said = row
            .rsplit(" | ")
            .next()
            .unwrap_or("")
            .trim_end_matches('|')
            .trim();
        assert!(said.len() > 10, "exit code {code} is not explained: {row}");
    }
}
