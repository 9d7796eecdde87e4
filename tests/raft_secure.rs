//! Who may take part in a Raft-vote election. Without TLS, one forged
//! frame from anyone who reaches a port deposes the leader (shown here,
//! so the secured half means something). With mutual TLS, strangers
//! without a certificate, with one from another CA, with one for another
//! id, or a reader's, cannot change who leads or raise the term, whether
//! they send well-formed frames, garbage, or nothing at all.

mod support;

use std::io::Write;
use std::time::{Duration, Instant};

use elect::backend::raft::transport::{self, Body, Frame, PeerTls};
use elect::credentials::Tls;
use elect_lab::{Lab, Role, Spec, pki::Authority, raft::CLUSTER};
use elect_raft::Message;
use support::elect::elect_once;

fn lab(secure: bool) -> Lab {
    let mut spec = Spec::new(support::mode(), 0, 0);
    spec.raft = 3;
    spec.secure = secure;
    spec.elect_bin = Some(support::elect::BIN.into());
    Lab::up(&spec).unwrap_or_else(|e| panic!("starting raft peers: {e}"))
}

/// `(leader, term)` as `elect leader` reports it, with `tls_flags`.
fn leader(lab: &Lab, tls_flags: &[String]) -> Option<(String, u64)> {
    let endpoints = lab.endpoints(Role::Raft).unwrap();
    let mut args = vec![
        "leader",
        "--backend",
        "raft",
        "--endpoints",
        &endpoints,
        "--election",
        CLUSTER,
        "--format",
        "json",
    ];
    args.extend(tls_flags.iter().map(String::as_str));
    let (code, out, err, _) = elect_once(&args);
    if code == 3 {
        return None; // No leader (yet).
    }
    assert_eq!(code, 0, "elect leader: {err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).expect("json");
    Some((v["leader"].as_str()?.to_owned(), v["token"].as_u64()?))
}

fn settled(lab: &Lab, flags: &[String]) -> (String, u64) {
    support::eventually("a leader", Duration::from_secs(20), || leader(lab, flags))
}

fn reader_flags(lab: &Lab) -> Vec<String> {
    lab.security.as_ref().expect("secured").tls_flags()
}

/// The forged frames a stranger sends, claiming to be peer `claimed`: a
/// heartbeat of a far later term, a TimeoutNow, a vote request.
fn forgeries(claimed: &str, term: u64) -> Vec<Frame> {
    let frame = |msg| Frame {
        cluster: CLUSTER.into(),
        from: claimed.into(),
        body: Body::Peer(msg),
        priority: None,
        unhealthy: false,
    };
    vec![
        frame(Message::Heartbeat {
            term: term + 100,
            round: 1,
            successors: vec![claimed.into()],
        }),
        frame(Message::TimeoutNow { term }),
        frame(Message::Vote {
            term: term + 200,
            transfer: true,
        }),
    ]
}

fn peers(lab: &Lab) -> Vec<(String, String)> {
    lab.members()
        .iter()
        .filter(|m| m.role == Role::Raft)
        .map(|m| (m.name.clone(), m.client.clone()))
        .collect()
}

/// Sends `frames` to every peer over connections made by `tls` (plain
/// TCP when `None`); returns how many connections got through.
fn send_everywhere(lab: &Lab, tls: Option<&PeerTls>, frames: &[Frame]) -> usize {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut through = 0;
        for (id, addr) in peers(lab) {
            let Ok(Ok(mut stream)) =
                tokio::time::timeout(Duration::from_secs(3), transport::dial(&id, &addr, tls))
                    .await
            else {
                continue;
            };
            let mut sent = true;
            for f in frames {
                sent &= transport::write_frame(&mut stream, f).await.is_ok();
            }
            // Close properly (TLS: close_notify), so the peer reads every
            // frame before the end of the stream.
            let _ = tokio::io::AsyncWriteExt::shutdown(&mut stream).await;
            through += usize::from(sent);
        }
        through
    })
}

#[test]
fn without_tls_one_forged_frame_deposes_the_leader() {
    let lab = lab(false);
    let (leader_before, term) = settled(&lab, &[]);
    let other = peers(&lab)
        .into_iter()
        .map(|(id, _)| id)
        .find(|id| *id != leader_before)
        .unwrap();
    assert_eq!(send_everywhere(&lab, None, &forgeries(&other, term)), 3);
    // The forged heartbeat raises the term (fails the test if it never does).
    support::eventually("the forged term adopted", Duration::from_secs(20), || {
        leader(&lab, &[]).filter(|(_, t)| *t >= term + 100)
    });
}

#[test]
fn with_mutual_tls_strangers_cannot_change_who_leads() {
    let lab = lab(true);
    let flags = reader_flags(&lab);
    let (leader_before, term) = settled(&lab, &flags);
    let other = peers(&lab)
        .into_iter()
        .map(|(id, _)| id)
        .find(|id| *id != leader_before)
        .unwrap();
    let frames = forgeries(&other, term);
    let s = lab.security.as_ref().unwrap();
    let dir = lab.dir.join("strangers");
    let theirs = Authority::new(&dir, "another CA").unwrap();
    let load = |ca: &std::path::Path, issued: &elect_lab::pki::Issued| {
        PeerTls::new(&Tls::from_files(ca, Some(&issued.cert), Some(&issued.key)).unwrap()).unwrap()
    };
    let foreign = load(
        &theirs.ca(),
        &theirs.issue(&other, &[other.as_str()]).unwrap(),
    );
    let reader = load(&s.ca, &s.client);
    // A real peer's certificate (the third peer's), used to claim to be
    // another peer.
    let third = lab
        .members()
        .iter()
        .find(|m| m.role == Role::Raft && m.name != leader_before && m.name != other)
        .unwrap();
    let impostor = load(
        &s.ca,
        &elect_lab::pki::Issued {
            cert: third.dir.join("peer.pem"),
            key: third.dir.join("peer-key.pem"),
        },
    );

    // No certificate at all: plain TCP to a TLS port.
    send_everywhere(&lab, None, &frames);
    // A certificate from another CA, even one naming a real peer.
    assert_eq!(send_everywhere(&lab, Some(&foreign), &frames), 0);
    // A certificate from the right CA that names someone else (the
    // reader's): the connection is accepted, the frames are not.
    assert_eq!(send_everywhere(&lab, Some(&reader), &frames), 3);
    // A peer's certificate, claiming to be another peer.
    assert_eq!(send_everywhere(&lab, Some(&impostor), &frames), 3);
    // Garbage, and connections that say nothing (slow-loris).
    let mut idle = Vec::new();
    for (_, addr) in peers(&lab) {
        for _ in 0..20 {
            if let Ok(mut c) = std::net::TcpStream::connect(&addr) {
                let _ = c.write_all(b"\x00\x00\x00\x10{\"cluster\":\"lab\"");
                idle.push(c);
            }
        }
        if let Ok(mut c) = std::net::TcpStream::connect(&addr) {
            let _ = c.write_all(&[0x16, 0x03, 0x01, 0xff, 0xff, 1, 2, 3]);
        }
    }
    // Past the handshake timeout the idle connections are closed, and the
    // cluster answers readers all along.
    let until = Instant::now() + Duration::from_secs(4);
    while Instant::now() < until {
        let (leader_now, term_now) = settled(&lab, &flags);
        assert_eq!(
            (leader_now.as_str(), term_now),
            (leader_before.as_str(), term),
            "a stranger changed the leader or the term"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    drop(idle);
    // The peers said why they refused.
    let logs: String = lab
        .members()
        .iter()
        .map(|m| std::fs::read_to_string(m.dir.join("member.log")).unwrap_or_default())
        .collect();
    if support::mode() == elect_lab::Mode::Processes {
        assert!(
            logs.contains("does not name its sender"),
            "no refusal logged: {logs}"
        );
    }
}

#[test]
fn raft_tls_flags_are_checked_before_anything_starts() {
    let dir = std::env::temp_dir().join(format!("elect-raft-tls-{}", std::process::id()));
    let ca = Authority::new(&dir, "test CA").unwrap();
    let p1 = ca.issue("p1", &["p1"]).unwrap();
    let path = |p: &std::path::Path| p.display().to_string();
    let base = [
        "campaign",
        "--backend",
        "raft",
        "--endpoints",
        "p1=127.0.0.1:1,p2=127.0.0.1:2,p3=127.0.0.1:3",
        "--election",
        "c",
        "--cacert",
        &path(&ca.ca()),
    ];
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["--id".into(), "p1".into()],
            "--cert: is required with raft",
        ),
        (
            vec![
                "--id".into(),
                "p2".into(),
                "--cert".into(),
                path(&p1.cert),
                "--key".into(),
                path(&p1.key),
            ],
            "does not name this peer's id \"p2\"",
        ),
        (
            vec!["--id".into(), "p1".into(), "--user".into(), "u".into()],
            "--cert",
        ),
    ];
    for (extra, expected) in cases {
        let mut args: Vec<String> = base.iter().map(|s| s.to_string()).collect();
        args.extend(extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, _, err, _) = elect_once(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(
            err.contains(expected),
            "{args:?}: expected {expected:?} in {err}"
        );
    }
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn secured_peers_elect_hand_over_and_run_the_command_on_the_leader_only() {
    let cluster = support::raft::Cluster::secured(3, "300ms");
    let out = std::env::temp_dir().join(format!("elect-raft-secure-run-{}", std::process::id()));
    std::fs::create_dir_all(&out).unwrap();
    let script = format!("echo $ELECT_LEADER_ID >> {}/ran; sleep 60", out.display());
    let mut procs: Vec<_> = cluster
        .ids
        .iter()
        .map(|id| cluster.run(id, &script))
        .collect();
    let find_elected = |procs: &mut Vec<support::elect::Proc>, skip: Option<usize>| {
        support::eventually("an elected peer", Duration::from_secs(15), || {
            procs
                .iter_mut()
                .enumerate()
                .filter(|(i, _)| Some(*i) != skip)
                .find_map(|(i, p)| p.try_event("elected").map(|(at, v)| (i, at, v)))
        })
    };
    let (first, _, v) = find_elected(&mut procs, None);
    let term = v["token"].as_u64().unwrap();
    // Only the leader runs the command.
    let ran = support::eventually("the command ran", Duration::from_secs(10), || {
        std::fs::read_to_string(out.join("ran"))
            .ok()
            .filter(|t| !t.is_empty())
    });
    assert_eq!(ran.trim(), cluster.ids[first]);
    // A clean exit hands over by transfer: well within one timeout.
    let stopped = Instant::now();
    procs[first].signal(nix::sys::signal::Signal::SIGTERM);
    let (next, at, v) = find_elected(&mut procs, Some(first));
    assert_ne!(next, first);
    assert!(v["token"].as_u64().unwrap() > term);
    assert!(
        at - stopped < Duration::from_millis(300),
        "the transfer took {:?}",
        at - stopped
    );
    for p in &mut procs {
        p.signal(nix::sys::signal::Signal::SIGTERM);
        p.wait_exit(Duration::from_secs(10));
    }
    std::fs::remove_dir_all(out).ok();
}
