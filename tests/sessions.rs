//! Many elections on one session, against real etcd clusters and
//! ZooKeeper ensembles: each election keeps its own leader and fencing
//! tokens; resigning in one hands over in that election alone, at once;
//! the session's end ends every term on it; closing leaves nothing behind.

mod support;

use std::time::{Duration, Instant};

use elect::backend::{Campaign, Session, Term};
use elect::config::ElectionConfig;
use elect::work::WorkWatch;
use elect::{Backend, Error};

const SOON: Duration = Duration::from_secs(10);

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn name(backend: Backend, i: usize) -> String {
    match backend {
        Backend::Zk => format!("/sessions/e{i}"),
        _ => format!("sessions/e{i}"),
    }
}

fn config(backend: Backend, endpoints: &str, ttl: Duration) -> ElectionConfig {
    match backend {
        Backend::Zk => ElectionConfig::zk(endpoints, &name(backend, 0)),
        _ => ElectionConfig::etcd(endpoints.split(','), &name(backend, 0)),
    }
    .unwrap()
    .with_ttl(ttl)
    .unwrap()
}

async fn elected(campaign: Campaign) -> Term {
    tokio::time::timeout(SOON, campaign.elected())
        .await
        .expect("elected in time")
        .expect("elected")
}

/// Three elections on session A, a second candidate for each on session
/// B: A leads all three with tokens of their own; A's resignation in one
/// election hands it to B within milliseconds (no TTL waited) and no
/// other, and leaves nothing of A's behind though A's session lives on;
/// closing A hands over the rest. `queued` counts an election's
/// candidates, `stored` everything stored under its name.
async fn elections_share_a_session(
    backend: Backend,
    endpoints: &str,
    queued: impl Fn(&str) -> usize,
    stored: impl Fn(&str) -> usize,
) {
    let cfg = config(backend, endpoints, Duration::from_secs(4));
    let a = Session::open(&cfg).await.unwrap();
    let b = Session::open(&cfg).await.unwrap();
    let mut terms = Vec::new();
    for i in 0..3 {
        let campaign = a
            .campaign(&name(backend, i), &format!("a{i}"), WorkWatch::none())
            .unwrap();
        terms.push(elected(campaign).await);
    }
    for (i, term) in terms.iter().enumerate() {
        assert_eq!(term.id(), format!("a{i}"));
        assert!(term.is_valid());
    }
    let mut waiting: Vec<Campaign> = (0..3)
        .map(|i| {
            b.campaign(&name(backend, i), &format!("b{i}"), WorkWatch::none())
                .unwrap()
        })
        .collect();
    for i in 0..3 {
        let election = name(backend, i);
        support::eventually("the second candidates queued", SOON, || {
            (queued(&election) == 2).then_some(())
        });
    }
    // Time for each to find its predecessor and wait on it.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let woken_before = elect::counters::snapshot().wakeups;

    let first = terms.remove(0);
    let first_token = first.token();
    let asked = Instant::now();
    first.resign().await.unwrap();
    let successor = elected(waiting.remove(0)).await;
    let took = asked.elapsed();
    assert!(
        took < Duration::from_secs(2),
        "a resignation on a shared session waited {took:?}: the release did not reach the successor"
    );
    assert_eq!(successor.id(), "b0");
    support::eventually(
        "nothing of the resigned candidacy left (etcd: its release marker)",
        SOON,
        || (stored(&name(backend, 0)) == 1).then_some(()),
    );
    assert!(
        successor.token() > first_token,
        "tokens grow within an election"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        elect::counters::snapshot().wakeups - woken_before,
        1,
        "one leader change woke one candidate, in its own election"
    );
    for (w, term) in waiting.iter().zip(&terms) {
        assert!(!w.leadership().borrow().is_self);
        assert!(term.is_valid(), "the other elections kept their leader");
    }

    // Closing A ends its terms and hands the other elections to B.
    let losses: Vec<_> = terms.iter().map(Term::cancellation).collect();
    a.close().await;
    for lost in losses {
        tokio::time::timeout(SOON, lost.cancelled())
            .await
            .expect("closing the session ended its terms");
    }
    for w in waiting {
        elected(w).await.resign().await.unwrap();
    }
    successor.resign().await.unwrap();
    b.close().await;
}

/// When the session itself ends under them, every campaign on it fails
/// with SessionEnded and every term's cancellation fires.
async fn the_end_of_the_session_ends_every_term(
    backend: Backend,
    endpoints: &str,
    end_it: impl FnOnce(),
) {
    let cfg = config(backend, endpoints, Duration::from_secs(2));
    let s = Session::open(&cfg).await.unwrap();
    let mut terms = Vec::new();
    for i in 0..3 {
        let campaign = s
            .campaign(&name(backend, 10 + i), "x", WorkWatch::none())
            .unwrap();
        terms.push(elected(campaign).await);
    }
    let losses: Vec<_> = terms.iter().map(Term::cancellation).collect();
    end_it();
    for lost in losses {
        tokio::time::timeout(SOON, lost.cancelled())
            .await
            .expect("the session's end ended the term");
    }
    for term in terms {
        let campaign = term.into_campaign();
        // The campaign ends by itself: its snapshots' sender goes.
        let mut rx = campaign.leadership();
        tokio::time::timeout(SOON, async { while rx.changed().await.is_ok() {} })
            .await
            .expect("the campaign ended with its session");
        match tokio::time::timeout(SOON, campaign.resign()).await {
            Ok(Err(Error::SessionEnded { backend: b })) => assert_eq!(b, backend),
            other => panic!("expected SessionEnded, got {other:?}"),
        }
    }
    assert!(!s.is_alive());
    assert!(matches!(
        s.campaign(&name(backend, 20), "y", WorkWatch::none()),
        Err(Error::SessionEnded { .. })
    ));
    s.close().await;
}

#[test]
fn etcd_elections_share_one_lease() {
    let etcd = support::etcd::Cluster::start();
    runtime().block_on(elections_share_a_session(
        Backend::Etcd,
        &etcd.endpoints,
        |election| etcd.candidates(election).len(),
        // Candidates' keys, and the release markers beside them; not the
        // tenure marker the leader holds, which a handover writes for the
        // successor (the check at the end finds any left behind).
        |election| {
            let keys = etcd.etcdctl_ok(&["get", election, "--prefix", "--keys-only"]);
            keys.lines()
                .filter(|l| !l.is_empty() && !l.contains("\0leading/"))
                .count()
        },
    ));
    // Every key, marker and lease is gone.
    let left = etcd.etcdctl_ok(&["get", "sessions", "--prefix", "--keys-only"]);
    assert!(left.trim().is_empty(), "left behind: {left}");
    eventually_no_leases(&etcd);
}

#[test]
fn zk_elections_share_one_session() {
    let zk = support::zk::Ensemble::start();
    runtime().block_on(elections_share_a_session(
        Backend::Zk,
        &zk.endpoints,
        |election| zk.children(election).len(),
        |election| zk.children(election).len(),
    ));
    for i in 0..3 {
        let left = zk.children(&format!("/sessions/e{i}"));
        assert!(left.is_empty(), "left behind in e{i}: {left:?}");
    }
}

#[test]
fn etcd_a_revoked_session_lease_ends_every_term() {
    let etcd = support::etcd::Cluster::start();
    let endpoints = etcd.endpoints.clone();
    runtime().block_on(the_end_of_the_session_ends_every_term(
        Backend::Etcd,
        &endpoints,
        || {
            for lease in etcd.leases() {
                etcd.etcdctl_ok(&["lease", "revoke", &format!("{lease:x}")]);
            }
        },
    ));
}

#[test]
fn zk_an_expired_session_ends_every_term() {
    let mut zk = support::zk::Ensemble::start();
    let endpoints = zk.endpoints.clone();
    runtime().block_on(the_end_of_the_session_ends_every_term(
        Backend::Zk,
        &endpoints,
        || {
            // Every server freezes past the session timeout: when they
            // resume, the session has expired.
            for i in 0..3 {
                zk.member_mut(i).apply(elect_lab::Fault::Pause).unwrap();
            }
            std::thread::sleep(Duration::from_secs(4));
            for i in 0..3 {
                zk.member_mut(i).apply(elect_lab::Fault::Resume).unwrap();
            }
        },
    ));
}

#[test]
fn raft_has_no_session_to_share() {
    let cfg = ElectionConfig::raft([("a", "127.0.0.1:1")], "c").unwrap();
    let err = runtime().block_on(Session::open(&cfg)).err().unwrap();
    assert!(matches!(err, Error::Unsupported { .. }), "{err}");
}

fn eventually_no_leases(etcd: &support::etcd::Cluster) {
    support::eventually("no lease left", SOON, || {
        etcd.leases().is_empty().then_some(())
    });
}
