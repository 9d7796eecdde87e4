//! `elect` and `etcdctl elect` (Go's `concurrency.Election`) in one
//! election, against a real etcd cluster.

mod support;

use std::time::Duration;

use nix::sys::signal::Signal;
use support::elect::{campaign, elect, etcdctl_elect};
use support::etcd::Cluster;
use support::eventually;

const SOON: Duration = Duration::from_secs(10);

#[test]
fn etcdctl_observer_sees_our_leader() {
    let etcd = Cluster::start();
    let mut a = campaign(&etcd.endpoints, "interop", "node-a", "5");
    a.wait_event("elected", SOON);
    let mut observer = etcdctl_elect(&etcd.endpoints, &["-l", "interop"]);
    // etcdctl prints the leader's key, then its value.
    observer.wait_line("our key", SOON, |l| l.text.starts_with("interop/"));
    observer.wait_line("our id", SOON, |l| l.text == "node-a");
}

#[test]
fn elect_observes_a_leader_elected_by_etcdctl() {
    let etcd = Cluster::start();
    let mut go = etcdctl_elect(&etcd.endpoints, &["interop", "go-proposal"]);
    go.wait_line("etcdctl elected", SOON, |l| l.text == "go-proposal");
    let mut observer = elect(
        "observer",
        &etcd.endpoints,
        &["observe", "--election", "interop"],
    );
    let (_, seen) = observer.wait_event("leader", SOON);
    assert_eq!(seen["leader"], "go-proposal");
}

/// A Go leader may proclaim a new value (Go's `Election.Proclaim`: a put of
/// its key, lease kept); elect's observer reports it, as Go's `Observe`
/// does. (elect's own leaders never proclaim, so their followers do not
/// watch for it.)
#[test]
fn elect_observes_a_go_leaders_proclaim() {
    let etcd = Cluster::start();
    let mut go = etcdctl_elect(&etcd.endpoints, &["proclaims", "go-proposal"]);
    go.wait_line("etcdctl elected", SOON, |l| l.text == "go-proposal");
    let mut observer = elect(
        "observer",
        &etcd.endpoints,
        &["observe", "--election", "proclaims"],
    );
    let (_, seen) = observer.wait_event("leader", SOON);
    assert_eq!(seen["leader"], "go-proposal");
    let (key, _) = etcd.candidates("proclaims").remove(0);
    etcd.etcdctl_ok(&["put", &key, "go-proclaimed", "--ignore-lease"]);
    observer.wait_leader("go-proclaimed", SOON);
}

/// elect, etcdctl, elect join in that order and lead in that order.
#[test]
fn etcdctl_and_elect_candidates_take_turns_in_creation_order() {
    let etcd = Cluster::start();
    let joined = |n: usize| {
        eventually(&format!("{n} candidates"), SOON, || {
            (etcd.candidates("turns").len() == n).then_some(())
        })
    };
    let mut a = campaign(&etcd.endpoints, "turns", "a", "5");
    a.wait_event("elected", SOON);
    let mut go = etcdctl_elect(&etcd.endpoints, &["turns", "go"]);
    joined(2);
    let mut c = campaign(&etcd.endpoints, "turns", "c", "5");
    joined(3);
    let (_, seen) = c.wait_event("leader", SOON);
    assert_eq!(seen["leader"], "a");

    a.signal(Signal::SIGTERM);
    assert_eq!(a.wait_exit(SOON), 0);
    go.wait_line("etcdctl elected", SOON, |l| l.text == "go");
    let (_, seen) = c.wait_event("leader", SOON);
    assert_eq!(seen["leader"], "go", "c sees etcdctl's candidate lead");
    // elect hands over by putting an elect successor's key again; a Go
    // candidate's key is left as Go made it (it reads its own turn).
    assert_eq!(
        etcd.versions("turns"),
        vec![("go".to_string(), 1), ("c".to_string(), 1)]
    );

    go.signal(Signal::SIGINT);
    let (_, elected) = c.wait_event("elected", SOON);
    assert_eq!(elected["leader"], "c");
    c.signal(Signal::SIGTERM);
    assert_eq!(c.wait_exit(SOON), 0);
    eventually("no key left", SOON, || {
        etcd.candidates("turns").is_empty().then_some(())
    });
}
