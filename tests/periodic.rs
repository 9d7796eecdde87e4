//! `elect run --once PERIOD`: a periodic job that every host starts runs
//! once per period, against real etcd and ZooKeeper ensembles. Each test
//! goes through the recipe's four cases on one ensemble, an election each:
//! candidates started together; one started late in the period; a run
//! that fails; a leader that dies mid-job.

mod support;

use std::path::Path;
use std::time::Duration;

use nix::sys::signal::Signal;
use support::elect::{Proc, elect, elect_zk};
use support::etcd::Cluster;
use support::eventually;
use support::proc::scratch;
use support::zk::Ensemble;

const SOON: Duration = Duration::from_secs(30);

/// A period whose boundaries (multiples of 366 days since 1970) no test
/// run comes near.
const PERIOD: &str = "366d";

/// Starts `elect run --once` for one host.
type Start<'a> = dyn Fn(&str, &str, &str) -> Proc + 'a;

/// `elect run --once` of `script` as host `id`.
fn once_args<'a>(election: &'a str, id: &'a str, ttl: &'a str, script: &'a str) -> Vec<&'a str> {
    vec![
        "run",
        "--election",
        election,
        "--id",
        id,
        "--ttl",
        ttl,
        "--once",
        PERIOD,
        "--",
        "sh",
        "-c",
        script,
    ]
}

/// The lines the job appended to `runs`.
fn runs(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// A job that appends its leader's id to `runs` when it completes.
fn job(runs: &Path, seconds: f32) -> String {
    format!(
        "sleep {seconds}; echo \"$ELECT_LEADER_ID\" >> {}",
        runs.display()
    )
}

fn all_together_then_one_late(start: &Start) {
    let runs_file = scratch("once-together").join("runs");
    let mut hosts: Vec<Proc> = ["a", "b", "c"]
        .iter()
        .map(|id| start("together", id, &job(&runs_file, 1.0)))
        .collect();
    for host in &mut hosts {
        assert_eq!(host.wait_exit(SOON), 0, "{}", host.stderr());
    }
    assert_eq!(runs(&runs_file).len(), 1, "three hosts, one run");
    // Late in the period: it sees the record and does not campaign.
    let mut late = start("together", "d", &job(&runs_file, 0.0));
    assert_eq!(late.wait_exit(SOON), 0);
    assert!(
        late.stderr().contains("is done already"),
        "{}",
        late.stderr()
    );
    assert_eq!(runs(&runs_file).len(), 1, "the late host did not run it");
}

fn a_failed_run_is_retried(start: &Start) {
    let dir = scratch("once-failed");
    let runs_file = dir.join("runs");
    // The first run fails; any later one completes.
    let script = format!(
        "if mkdir {} 2>/dev/null; then exit 3; fi; {}",
        dir.join("failed-once").display(),
        job(&runs_file, 0.0)
    );
    let mut first = start("failing", "a", &script);
    first.wait_event("elected", SOON);
    let mut second = start("failing", "b", &script);
    let codes = [first.wait_exit(SOON), second.wait_exit(SOON)];
    assert_eq!(codes, [3, 0], "the failure is reported, the retry succeeds");
    assert_eq!(runs(&runs_file), ["b"]);
    let mut late = start("failing", "c", &script);
    assert_eq!(late.wait_exit(SOON), 0);
    assert_eq!(runs(&runs_file), ["b"], "done once it succeeded");
}

fn a_leader_that_dies_mid_job_is_replaced(start: &Start) {
    let dir = scratch("once-died");
    let runs_file = dir.join("runs");
    let started = dir.join("started");
    let script = format!(
        "echo \"$ELECT_LEADER_ID\" >> {}; {}",
        started.display(),
        job(&runs_file, 3.0)
    );
    let mut a = start("dying", "a", &script);
    a.wait_event("elected", SOON);
    let mut b = start("dying", "b", &script);
    eventually("a's job started", SOON, || {
        (!runs(&started).is_empty()).then_some(())
    });
    // The leader dies; its watchdog kills the job at the deadline, and b
    // runs it once the leadership has expired.
    a.signal(Signal::SIGKILL);
    assert_eq!(b.wait_exit(SOON), 0, "{}", b.stderr());
    assert_eq!(runs(&started), ["a", "b"]);
    assert_eq!(runs(&runs_file), ["b"], "a's job died with a");
}

#[test]
fn etcd_runs_a_periodic_job_once() {
    let etcd = Cluster::start();
    let start = |election: &str, id: &str, script: &str| {
        elect(id, &etcd.endpoints, &once_args(election, id, "2", script))
    };
    all_together_then_one_late(&start);
    a_failed_run_is_retried(&start);
    a_leader_that_dies_mid_job_is_replaced(&start);
    assert!(
        etcd.candidates("together").is_empty(),
        "every candidate resigned"
    );
}

#[test]
fn zookeeper_runs_a_periodic_job_once() {
    let zk = Ensemble::start();
    let start = |election: &str, id: &str, script: &str| {
        let path = format!("/elect/{election}");
        elect_zk(id, &zk.endpoints, &once_args(&path, id, "2s", script))
    };
    all_together_then_one_late(&start);
    a_failed_run_is_retried(&start);
    a_leader_that_dies_mid_job_is_replaced(&start);
    assert_eq!(
        zk.children("/elect/together.done").len(),
        1,
        "one record, beside the election"
    );
    assert!(
        zk.children("/elect/together").is_empty(),
        "every candidate resigned"
    );
}
