//! `elect` with the JVM's and Python's ZooKeeper election recipes, on a
//! real ensemble: a Curator `LeaderLatch` (Debian's libcurator-recipes-java,
//! driven by crates/elect-lab/src/LatchDriver.java compiled here) and kazoo's
//! `Election` (Debian's python3-kazoo).

mod support;

use std::process::Command;
use std::time::Duration;

use nix::sys::signal::Signal;
use support::elect::{Proc, campaign_zk, elect_zk};
use support::eventually;
use support::zk::{Ensemble, compile_latch_driver, curator_latch};

const SOON: Duration = Duration::from_secs(20);
/// elect, Curator, elect join in that order; each side sees the other lead
/// in turn.
#[test]
fn curator_leader_latch_and_elect_take_turns() {
    let zk = Ensemble::start();
    let classes = compile_latch_driver();
    let joined = |n: usize| {
        eventually(&format!("{n} participants"), SOON, || {
            (zk.children("/latch").len() == n).then_some(())
        })
    };
    let mut a = campaign_zk(&zk.endpoints, "/latch", "a", "2s");
    a.wait_event("elected", SOON);
    let mut curator = curator_latch(&classes, &zk.endpoints, "/latch", "curator", None);
    joined(2);
    curator.wait_line("Curator sees a", SOON, |l| l.text == "SEES a");
    let mut b = campaign_zk(&zk.endpoints, "/latch", "b", "2s");
    joined(3);

    a.signal(Signal::SIGTERM);
    assert_eq!(a.wait_exit(SOON), 0);
    curator.wait_line("Curator leads", SOON, |l| l.text == "LEADER");
    b.wait_leader("curator", SOON);

    curator.signal(Signal::SIGTERM);
    let (_, elected) = b.wait_event("elected", SOON);
    assert_eq!(elected["leader"], "b");
    b.signal(Signal::SIGTERM);
    assert_eq!(b.wait_exit(SOON), 0);
    eventually("no znode left", SOON, || {
        zk.children("/latch").is_empty().then_some(())
    });
}

#[test]
fn elect_observes_a_kazoo_election() {
    let zk = Ensemble::start();
    let script = format!(
        "import sys, time\nfrom kazoo.client import KazooClient\n\
         zk = KazooClient(hosts={:?})\nzk.start(timeout=15)\n\
         def lead():\n    print('ELECTED', flush=True)\n    time.sleep(1000)\n\
         zk.Election('/kazoo', 'kazoo-a').run(lead)\n",
        zk.endpoints
    );
    let mut cmd = Command::new("/usr/bin/python3");
    cmd.arg("-c").arg(script);
    let mut kazoo = Proc::spawn("kazoo", cmd);
    kazoo.wait_line("kazoo elected", SOON, |l| l.text == "ELECTED");
    let children = zk.children("/kazoo");
    assert!(children[0].contains("__lock__"), "{children:?}");

    let mut observer = elect_zk(
        "observer",
        &zk.endpoints,
        &["observe", "--election", "/kazoo"],
    );
    let (_, seen) = observer.wait_event("leader", SOON);
    assert_eq!(seen["leader"], "kazoo-a");
    kazoo.signal(Signal::SIGKILL);
    observer.wait_event("none", SOON);
}
