//! elect against a secured etcd cluster: client TLS with
//! `--client-cert-auth`, auth enabled, a user whose role may read and write
//! only under one prefix, and simple tokens that expire every few seconds.
//! Certificates and passwords are made by the lab when it starts.

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use elect_lab::{ETCD_AUTH_TOKEN_TTL, Lab, Role, Security, Spec};
use nix::sys::signal::Signal;
use support::elect::{BIN, Proc, elect_once};

struct Secured {
    lab: Lab,
    endpoints: String,
}

impl Secured {
    fn start() -> Secured {
        let mut spec = Spec::new(support::mode(), 3, 0);
        spec.secure = true;
        let lab = Lab::up(&spec).unwrap_or_else(|e| panic!("starting secured etcd: {e}"));
        let endpoints = lab.endpoints(Role::Etcd).expect("etcd members");
        Secured { lab, endpoints }
    }

    fn security(&self) -> &Security {
        self.lab.security.as_ref().expect("a secured lab")
    }

    fn password(&self) -> String {
        std::fs::read_to_string(&self.security().password_file).unwrap()
    }

    /// The flags of the limited user with the client certificate.
    fn flags(&self) -> Vec<String> {
        let s = self.security();
        let mut flags = vec!["--endpoints".to_owned(), self.endpoints.clone()];
        flags.extend(s.tls_flags());
        flags.extend(s.user_flags());
        flags
    }

    fn election(&self, name: &str) -> String {
        format!("{}{name}", self.security().prefix)
    }

    fn elect(&self, name: &str, args: &[&str]) -> Proc {
        support::elect::elect_with(name, &self.flags(), args)
    }

    fn campaign(&self, election: &str, id: &str) -> Proc {
        self.elect(id, &campaign_args(election, id))
    }

    /// `etcdctl` with the client certificate, as `user:password`.
    fn etcdctl(&self, credentials: &str) -> Command {
        let mut cmd = Command::new(elect_lab::etcd_release::program("etcdctl"));
        cmd.env("ETCDCTL_API", "3")
            .args(["--endpoints", &self.endpoints])
            .args(self.security().tls_flags())
            .args(["--user", credentials, "--command-timeout", "5s"]);
        cmd
    }

    /// `etcdctl <args>` as root; its output.
    fn etcdctl_root(&self, args: &[&str]) -> String {
        let root = std::fs::read_to_string(&self.security().root_password_file).unwrap();
        let out = self
            .etcdctl(&format!("root:{root}"))
            .args(args)
            .output()
            .expect("etcdctl");
        assert!(
            out.status.success(),
            "etcdctl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Two candidates in `election` as `user`: the first leads, a clean
    /// exit hands over to the second, which then exits too, and nothing
    /// is left. How long the handover took, and what both said on stderr.
    fn handover_as(&self, user: &str, password: &str, election: &str) -> (Duration, String) {
        let password_file = support::proc::scratch(&format!("{user}-role")).join("password");
        std::fs::write(&password_file, password).unwrap();
        let mut flags = vec!["--endpoints".to_owned(), self.endpoints.clone()];
        flags.extend(self.security().tls_flags());
        flags.extend([
            "--user".to_owned(),
            user.to_owned(),
            "--password-file".to_owned(),
            password_file.display().to_string(),
        ]);
        let campaign =
            |id: &str| support::elect::elect_with(id, &flags, &campaign_args(election, id));
        let mut a = campaign("a");
        a.wait_event("elected", Duration::from_secs(15));
        let mut b = campaign("b");
        b.wait_leader("a", Duration::from_secs(15));
        let stopped = Instant::now();
        a.signal(Signal::SIGTERM);
        assert_eq!(a.wait_exit(Duration::from_secs(10)), 0, "{}", a.stderr());
        b.wait_event("elected", Duration::from_secs(10));
        let took = stopped.elapsed();
        b.signal(Signal::SIGTERM);
        assert_eq!(b.wait_exit(Duration::from_secs(10)), 0, "{}", b.stderr());
        let (keys, _) = self.leftovers(election);
        assert!(keys.is_empty(), "keys left: {keys}");
        (took, a.stderr() + &b.stderr())
    }

    /// Keys under `election` and leases, as root sees them.
    fn leftovers(&self, election: &str) -> (String, String) {
        let keys = self.etcdctl_root(&["get", "--prefix", "--keys-only", election]);
        let leases = self.etcdctl_root(&["lease", "list"]);
        (keys.trim().to_owned(), leases)
    }
}

/// `campaign` as `id` in `election`, on a 3 s lease.
fn campaign_args<'a>(election: &'a str, id: &'a str) -> [&'a str; 7] {
    [
        "campaign",
        "--election",
        election,
        "--id",
        id,
        "--ttl",
        "3s",
    ]
}

fn no_leases(listing: &str) -> bool {
    listing.trim() == "found 0 leases"
}

#[test]
fn a_prefix_limited_user_campaigns_hands_over_and_leaves_nothing() {
    let etcd = Secured::start();
    let election = etcd.election("handover");
    let mut a = etcd.campaign(&election, "a");
    a.wait_event("elected", Duration::from_secs(15));
    let mut b = etcd.campaign(&election, "b");
    b.wait_leader("a", Duration::from_secs(15));

    // etcdctl with the same credentials sees elect's leader.
    let mut observer = etcd.etcdctl(&format!("{}:{}", etcd.security().user, etcd.password()));
    observer.args(["elect", "-l", &election]);
    let mut observer = Proc::spawn("etcdctl elect -l", observer);
    observer.wait_line("etcdctl sees a", Duration::from_secs(10), |l| {
        l.text.trim() == "a"
    });

    // A clean exit resigns: b takes over in well under the TTL.
    let stopped = Instant::now();
    a.signal(Signal::SIGTERM);
    assert_eq!(a.wait_exit(Duration::from_secs(10)), 0, "{}", a.stderr());
    b.wait_event("elected", Duration::from_secs(10));
    assert!(
        stopped.elapsed() < Duration::from_secs(2),
        "handover took {:?}",
        stopped.elapsed()
    );
    b.signal(Signal::SIGTERM);
    assert_eq!(b.wait_exit(Duration::from_secs(10)), 0, "{}", b.stderr());
    observer.signal(Signal::SIGKILL);

    // etcdctl's observer holds a session lease of its own (60 s): only
    // elect's leases, as logged, must be gone.
    let (keys, leases) = etcd.leftovers(&election);
    assert!(keys.is_empty(), "keys left: {keys}");
    for p in [&a, &b] {
        let log = p.stderr();
        let lease = log
            .split("lease granted lease=")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_else(|| panic!("{} logged no lease: {log}", p.name));
        assert!(
            !leases.contains(lease),
            "{}'s lease {lease} is left: {leases}",
            p.name
        );
    }
}

/// A role limited to exactly `<election>/`, as users of `etcdctl elect`
/// grant it (`role grant-permission --prefix=true ROLE readwrite
/// <election>/`): elect's release and tenure markers lie outside it.
/// Candidates with that role still elect, and a clean exit still hands
/// over, through the lease (the narrow role costs the marker's speed, not
/// the election). Before, the successor's every turn check was refused
/// and it never led.
#[test]
fn a_role_limited_to_the_election_still_elects_and_hands_over() {
    let etcd = Secured::start();
    let election = etcd.election("narrow");
    let (user, password) = ("narrow", "narrow-secret");
    etcd.etcdctl_root(&["user", "add", &format!("{user}:{password}")]);
    etcd.etcdctl_root(&["role", "add", "narrow-role"]);
    etcd.etcdctl_root(&[
        "role",
        "grant-permission",
        "--prefix=true",
        "narrow-role",
        "readwrite",
        &format!("{election}/"),
    ]);
    etcd.etcdctl_root(&["user", "grant-role", user, "narrow-role"]);
    let (handover, said) = etcd.handover_as(user, password, &election);
    eprintln!("a role limited to {election}/: handover in {handover:?}");
    assert!(
        said.contains("cannot write our tenure marker (permission denied)"),
        "the narrow role is not said:\n{said}"
    );
}

#[test]
fn leadership_outlives_token_expiry_and_an_idle_follower_still_takes_over() {
    let etcd = Secured::start();
    let election = etcd.election("tokens");
    let mut a = etcd.campaign(&election, "a");
    a.wait_event("elected", Duration::from_secs(15));
    let mut b = etcd.campaign(&election, "b");
    b.wait_leader("a", Duration::from_secs(15));
    // Both sit idle across several token lifetimes.
    std::thread::sleep(Duration::from_secs(3 * ETCD_AUTH_TOKEN_TTL + 1));
    assert!(
        a.try_event("demoted").is_none(),
        "a saw a leadership change while idle: {}",
        a.stderr()
    );
    // The idle follower's next requests carry an expired token.
    a.signal(Signal::SIGTERM);
    assert_eq!(a.wait_exit(Duration::from_secs(10)), 0, "{}", a.stderr());
    b.wait_event("elected", Duration::from_secs(10));
    // And the new leader keeps its lease across more expiries.
    std::thread::sleep(Duration::from_secs(2 * ETCD_AUTH_TOKEN_TTL + 1));
    assert!(b.try_event("demoted").is_none(), "{}", b.stderr());
    b.signal(Signal::SIGTERM);
    assert_eq!(b.wait_exit(Duration::from_secs(10)), 0, "{}", b.stderr());
    for p in [&a, &b] {
        assert!(
            !p.stderr().contains(&etcd.password()),
            "the password leaked into {}'s log",
            p.name
        );
    }
    let (keys, leases) = etcd.leftovers(&election);
    assert!(keys.is_empty() && no_leases(&leases), "{keys} {leases}");
}

#[test]
fn run_on_a_secured_cluster_keeps_the_password_from_the_command() {
    let etcd = Secured::start();
    let election = etcd.election("run");
    let out = std::env::temp_dir().join(format!("elect-secure-run-{}", std::process::id()));
    let script = format!(
        "echo \"pw=${{ELECT_PASSWORD:-none}} leader=$ELECT_LEADER_ID\" > {}; sleep 60",
        out.display()
    );
    let mut cmd = Command::new(BIN);
    let flags: Vec<String> = etcd
        .flags()
        .into_iter()
        .filter(|f| !f.starts_with("--password-file") && !f.ends_with(".password"))
        .collect();
    cmd.args(flags)
        .args([
            "--format",
            "json",
            "run",
            "--election",
            &election,
            "--id",
            "r",
        ])
        .args(["--", "sh", "-c", &script])
        .env("ELECT_PASSWORD", etcd.password())
        .env("RUST_LOG", "elect=debug,warn");
    let mut run = Proc::spawn("run", cmd);
    run.wait_event("elected", Duration::from_secs(15));
    let written = support::eventually("the command's output", Duration::from_secs(10), || {
        std::fs::read_to_string(&out)
            .ok()
            .filter(|t| t.ends_with('\n'))
    });
    assert!(written.starts_with("pw=none"), "{written}");
    run.signal(Signal::SIGTERM);
    // elect exits with the command's status: killed by SIGTERM.
    assert_eq!(
        run.wait_exit(Duration::from_secs(15)),
        128 + 15,
        "{}",
        run.stderr()
    );
    std::fs::remove_file(&out).ok();
    let (keys, leases) = etcd.leftovers(&election);
    assert!(keys.is_empty() && no_leases(&leases), "{keys} {leases}");
}

#[test]
fn refusals_say_what_was_refused_in_bounded_time() {
    let etcd = Secured::start();
    let s = etcd.security().clone();
    let dir = std::env::temp_dir().join(format!("elect-secure-refusals-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let wrong = dir.join("wrong.password");
    std::fs::write(&wrong, "not-the-password\n").unwrap();
    let other_ca = elect_lab::pki::Authority::new(&dir.join("other"), "another CA").unwrap();
    let stranger = other_ca.issue("stranger", &["stranger"]).unwrap();
    let path = |p: &std::path::Path| p.display().to_string();
    let base = |cert: &std::path::Path, key: &std::path::Path, password: &std::path::Path| {
        vec![
            "leader".to_owned(),
            "--endpoints".into(),
            etcd.endpoints.clone(),
            "--election".into(),
            etcd.election("refused"),
            "--cacert".into(),
            path(&s.ca),
            "--cert".into(),
            path(cert),
            "--key".into(),
            path(key),
            "--user".into(),
            s.user.clone(),
            "--password-file".into(),
            path(password),
            "--connect-timeout".into(),
            "3s".into(),
        ]
    };
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            base(&s.client.cert, &s.client.key, &wrong),
            "authentication failed",
        ),
        (
            base(&stranger.cert, &stranger.key, &s.password_file),
            "TLS handshake",
        ),
        (
            {
                let mut args = base(&s.client.cert, &s.client.key, &s.password_file);
                args[4] = "elsewhere".into();
                args
            },
            "permission denied: the user needs readwrite on the election's name as a prefix, \"elsewhere\"",
        ),
        (
            {
                // No client certificate: etcd wants one.
                let mut args = base(&s.client.cert, &s.client.key, &s.password_file);
                args.drain(7..11);
                args
            },
            "TLS handshake",
        ),
    ];
    for (args, expected) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, _, stderr, took) = elect_once(&args);
        assert_eq!(code, 1, "{args:?}: {stderr}");
        assert!(
            stderr.contains(expected),
            "{args:?}: expected {expected:?} in {stderr}"
        );
        assert!(!stderr.contains("not-the-password"), "{stderr}");
        assert!(took < Duration::from_secs(10), "{args:?} took {took:?}");
    }
    std::fs::remove_dir_all(dir).ok();
}

/// The Kubernetes guide's user and the manifest's election, as written:
/// `deploy/kubernetes/etcd-users.sh` adds the manifest's `--user` (auth is
/// on already here, so as root), and with its role the markers are
/// written, so a clean exit hands over at a commit's cost: no permission
/// is refused along the way, and the successor leads within a second.
#[test]
fn the_manifests_role_covers_the_election_and_its_markers() {
    let manifest = include_str!("../deploy/kubernetes/sidecar.yaml");
    let etcd = Secured::start();
    let s = etcd.security();
    let user = manifest
        .lines()
        .find_map(|l| l.trim().strip_prefix("- --user="))
        .expect("the sidecar's user");
    let election = manifest
        .lines()
        .find_map(|l| l.trim().strip_prefix("- --election="))
        .expect("the sidecar's election");
    let password = "manifest-secret";
    let root = std::fs::read_to_string(&s.root_password_file).unwrap();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/kubernetes/etcd-users.sh"
    );
    let added = Command::new(script)
        .arg(user)
        .env("ETCDCTL_ENDPOINTS", &etcd.endpoints)
        .env("ETCDCTL_CACERT", &s.ca)
        .env("ETCDCTL_CERT", &s.client.cert)
        .env("ETCDCTL_KEY", &s.client.key)
        .env("ETCDCTL_USER", format!("root:{root}"))
        .env("USER_PASSWORD", password)
        .output()
        .expect("etcd-users.sh");
    assert!(
        added.status.success(),
        "etcd-users.sh {user}: {}",
        String::from_utf8_lossy(&added.stderr)
    );
    let (took, said) = etcd.handover_as(user, password, election);
    eprintln!("the manifest's role: handover in {took:?}");
    assert!(
        !said.contains("permission denied"),
        "a permission was refused:\n{said}"
    );
    assert!(took < Duration::from_secs(1), "handover took {took:?}");
}

/// Who may switch over is who may write the election's name as a prefix
/// (its keys and what lies beside them): the lab's user may; a role
/// limited to `<election>/` may elect but not switch over (its record
/// lies beside the keys), and the switchover changes nothing.
#[test]
fn only_a_role_that_writes_the_election_may_switch_over() {
    let etcd = Secured::start();
    let election = etcd.election("steer");
    let mut a = etcd.campaign(&election, "a");
    a.wait_event("elected", Duration::from_secs(15));
    let mut b = etcd.campaign(&election, "b");
    b.wait_leader("a", Duration::from_secs(15));

    let (user, password) = ("narrow-steer", "narrow-secret");
    etcd.etcdctl_root(&["user", "add", &format!("{user}:{password}")]);
    etcd.etcdctl_root(&["role", "add", "narrow-steer-role"]);
    etcd.etcdctl_root(&[
        "role",
        "grant-permission",
        "--prefix=true",
        "narrow-steer-role",
        "readwrite",
        &format!("{election}/"),
    ]);
    etcd.etcdctl_root(&["user", "grant-role", user, "narrow-steer-role"]);
    let password_file = support::proc::scratch("narrow-steer").join("password");
    std::fs::write(&password_file, password).unwrap();
    let security = etcd.security();
    let mut narrow: Vec<String> = ["switchover", "--endpoints", &etcd.endpoints]
        .map(str::to_owned)
        .to_vec();
    narrow.extend(security.tls_flags());
    narrow.extend(["--user".into(), user.into(), "--password-file".into()]);
    narrow.push(password_file.display().to_string());
    narrow.extend([
        "--election".into(),
        election.clone(),
        "--to".into(),
        "b".into(),
    ]);
    let args: Vec<&str> = narrow.iter().map(String::as_str).collect();
    let (code, _, err, _) = support::elect::elect_once(&args);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("permission denied"), "{err}");
    assert!(
        !a.sees_event("demoted", Duration::from_millis(500)),
        "nothing changed, but a stepped down; its log:\n{}",
        a.stderr()
    );

    let mut allowed: Vec<String> = vec!["switchover".into()];
    allowed.extend(etcd.flags());
    allowed.extend([
        "--election".into(),
        election.clone(),
        "--to".into(),
        "b".into(),
    ]);
    let args: Vec<&str> = allowed.iter().map(String::as_str).collect();
    let (code, out, err, _) = support::elect::elect_once(&args);
    assert_eq!(code, 0, "{out}{err}");
    b.wait_event("elected", Duration::from_secs(10));
}
