//! elect against a secured ZooKeeper ensemble: TLS on the secure client
//! port with a client certificate required, digest credentials, and
//! znodes whose ACL lets everyone read but only their creator's identity
//! write or delete. Curator and kazoo take part with the same digest.

mod support;

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use elect_lab::{Lab, Role, Security, Spec};
use nix::sys::signal::Signal;
use support::elect::{Proc, elect_once};
use support::eventually;
use support::zk::{compile_latch_driver, curator_latch};

const SOON: Duration = Duration::from_secs(20);

struct Secured {
    lab: Lab,
    /// The TLS client addresses.
    endpoints: String,
    /// The plain client addresses (tools without TLS).
    plain: String,
}

impl Secured {
    fn start() -> Secured {
        let mut spec = Spec::new(support::mode(), 0, 3);
        spec.secure = true;
        let lab = Lab::up(&spec).unwrap_or_else(|e| panic!("starting secured ZooKeeper: {e}"));
        let endpoints = lab.endpoints(Role::Zk).expect("zk members");
        let plain = lab
            .members()
            .iter()
            .map(|m| m.health_address().to_owned())
            .collect::<Vec<_>>()
            .join(",");
        Secured {
            lab,
            endpoints,
            plain,
        }
    }

    fn security(&self) -> &Security {
        self.lab.security.as_ref().expect("secured")
    }

    fn digest(&self) -> String {
        let s = self.security();
        format!(
            "{}:{}",
            s.user,
            std::fs::read_to_string(&s.password_file).unwrap()
        )
    }

    fn tls_flags(&self, cert: &Path, key: &Path) -> Vec<String> {
        let s = self.security();
        vec![
            "--backend".into(),
            "zk".into(),
            "--endpoints".into(),
            self.endpoints.clone(),
            "--cacert".into(),
            s.ca.display().to_string(),
            "--cert".into(),
            cert.display().to_string(),
            "--key".into(),
            key.display().to_string(),
        ]
    }

    fn flags(&self, password_file: &Path) -> Vec<String> {
        let s = self.security();
        let mut flags = self.tls_flags(&s.client.cert, &s.client.key);
        flags.extend(["--user".into(), s.user.clone(), "--password-file".into()]);
        flags.push(password_file.display().to_string());
        flags
    }

    fn elect(&self, name: &str, args: &[&str]) -> Proc {
        support::elect::elect_with(name, &self.flags(&self.security().password_file), args)
    }

    fn campaign(&self, election: &str, id: &str) -> Proc {
        self.elect(
            id,
            &[
                "campaign",
                "--election",
                election,
                "--id",
                id,
                "--ttl",
                "2s",
            ],
        )
    }

    /// A kazoo snippet on the plain port, authenticated with `digest` if
    /// given; its output.
    fn kazoo(&self, digest: Option<&str>, code: &str) -> Output {
        support::zk::kazoo(&self.plain, digest, code)
    }

    fn children(&self, path: &str) -> Vec<String> {
        support::zk::children(&self.plain, path)
    }
}

#[test]
fn tls_and_digest_elections_hand_over_and_strangers_cannot_delete_the_leader() {
    let zk = Secured::start();
    let mut a = zk.campaign("/secure", "a");
    a.wait_event("elected", SOON);
    let mut b = zk.campaign("/secure", "b");
    b.wait_leader("a", SOON);
    let children = zk.children("/secure");
    assert_eq!(children.len(), 2, "{children:?}");

    // The election's znode and ours: everyone reads, only our identity
    // writes and deletes.
    let acls = zk.kazoo(
        None,
        "for p in ['/secure'] + ['/secure/' + c for c in zk.get_children('/secure')]:\n    \
         print(p, sorted((a.id.scheme, a.perms) for a in zk.get_acls(p)[0]))",
    );
    let acls = String::from_utf8_lossy(&acls.stdout);
    for line in acls.lines() {
        assert!(
            line.contains("('digest', 31)") && line.contains("('world', 1)"),
            "{line}"
        );
    }
    // A client without the credentials cannot delete the leader's znode.
    let leader_node = format!("/secure/{}", children[0]);
    let out = zk.kazoo(
        None,
        &format!(
            "from kazoo.exceptions import NoAuthError\ntry:\n    zk.delete({leader_node:?})\n    \
             print('DELETED')\nexcept NoAuthError:\n    print('REFUSED')"
        ),
    );
    let out = String::from_utf8_lossy(&out.stdout);
    assert!(out.contains("REFUSED"), "{out}");
    assert!(a.try_event("demoted").is_none(), "{}", a.stderr());

    // Someone with other credentials cannot join.
    let dir = std::env::temp_dir().join(format!("elect-zk-secure-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let wrong = dir.join("wrong.password");
    std::fs::write(&wrong, "guess\n").unwrap();
    let mut args = zk.flags(&wrong);
    args.extend(
        ["campaign", "--election", "/secure", "--id", "mallory"]
            .iter()
            .map(|s| s.to_string()),
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, _, err, took) = elect_once(&args);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("not allowed to create under /secure"), "{err}");
    assert!(!err.contains("guess"), "{err}");
    assert!(took < Duration::from_secs(15), "{took:?}");

    // A clean exit hands over.
    a.signal(Signal::SIGTERM);
    assert_eq!(a.wait_exit(SOON), 0, "{}", a.stderr());
    b.wait_event("elected", SOON);
    b.signal(Signal::SIGTERM);
    assert_eq!(b.wait_exit(SOON), 0, "{}", b.stderr());
    eventually("no znode left", SOON, || {
        zk.children("/secure").is_empty().then_some(())
    });
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn run_over_tls_and_refusals_without_the_right_certificate() {
    let zk = Secured::start();
    let out = std::env::temp_dir().join(format!("elect-zk-secure-run-{}", std::process::id()));
    let script = format!("echo $ELECT_LEADER_ID > {}; sleep 60", out.display());
    let mut run = zk.elect(
        "run",
        &[
            "run",
            "--election",
            "/secure-run",
            "--id",
            "r",
            "--",
            "sh",
            "-c",
            &script,
        ],
    );
    run.wait_event("elected", SOON);
    let written = eventually("the command ran", SOON, || {
        std::fs::read_to_string(&out).ok().filter(|t| !t.is_empty())
    });
    assert_eq!(written.trim(), "r");
    run.signal(Signal::SIGTERM);
    assert_eq!(run.wait_exit(SOON), 128 + 15, "{}", run.stderr());
    std::fs::remove_file(&out).ok();

    // No client certificate, or one from another CA: a TLS refusal, named.
    let dir = std::env::temp_dir().join(format!("elect-zk-refusals-{}", std::process::id()));
    let other = elect_lab::pki::Authority::new(&dir, "another CA").unwrap();
    let stranger = other.issue("stranger", &["stranger"]).unwrap();
    let s = zk.security();
    let mut no_cert = zk.tls_flags(&s.client.cert, &s.client.key);
    no_cert.truncate(6);
    let cases = [no_cert, zk.tls_flags(&stranger.cert, &stranger.key)];
    for mut args in cases {
        args.extend(
            [
                "leader",
                "--election",
                "/secure-run",
                "--connect-timeout",
                "3s",
            ]
            .iter()
            .map(|s| s.to_string()),
        );
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, _, err, took) = elect_once(&args);
        assert_eq!(code, 1, "{args:?}: {err}");
        assert!(err.contains("TLS handshake"), "{args:?}: {err}");
        assert!(took < Duration::from_secs(10), "{took:?}");
    }
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn curator_and_kazoo_with_the_same_digest_take_part() {
    let zk = Secured::start();
    let mut a = zk.campaign("/shared", "a");
    a.wait_event("elected", SOON);

    // Curator's LeaderLatch, authenticated with the same digest, on the
    // plain port: it joins under elect's protected parent and leads next.
    let classes = compile_latch_driver();
    let digest = zk.digest();
    let mut curator = curator_latch(&classes, &zk.plain, "/shared", "curator", Some(&digest));
    curator.wait_line("Curator sees a", SOON, |l| l.text == "SEES a");
    a.signal(Signal::SIGTERM);
    assert_eq!(a.wait_exit(SOON), 0, "{}", a.stderr());
    curator.wait_line("Curator leads", SOON, |l| l.text == "LEADER");

    // kazoo's Election with the digest: elect sees it lead after Curator.
    let mut observer = zk.elect("observer", &["observe", "--election", "/shared"]);
    observer.wait_leader("curator", SOON);
    let mut cmd = Command::new("/usr/bin/python3");
    cmd.arg("-c").arg(format!(
        "import sys, time\nfrom kazoo.client import KazooClient\n\
         zk = KazooClient(hosts={:?}, timeout=5, auth_data=[('digest', {:?})])\n\
         zk.start(timeout=15)\n\
         zk.Election('/shared', 'kazoo').run(lambda: (print('LEADER', flush=True), time.sleep(60)))\n",
        zk.plain,
        zk.digest()
    ));
    let mut kazoo = Proc::spawn("kazoo", cmd);
    eventually("kazoo joined", SOON, || {
        (zk.children("/shared").len() == 2).then_some(())
    });
    curator.signal(Signal::SIGTERM);
    kazoo.wait_line("kazoo leads", SOON, |l| l.text == "LEADER");
    observer.wait_leader("kazoo", SOON);
    kazoo.signal(Signal::SIGKILL);
    observer.signal(Signal::SIGTERM);
}
