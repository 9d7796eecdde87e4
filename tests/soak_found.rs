//! What the soak found, each pinned down as a test against real
//! ensembles (see docs/src/results/soak.md for the runs and seeds).
//!
//! Seed 41, etcd, 78-83 s: the leader `c2` was cut off from etcd, then its
//! watchdog killed; it killed its command and resigned, but the release
//! could not reach etcd, and it went on exporting itself as the leader
//! (no `demoted` line) until the cut healed 3.7 s later, while `c3`
//! led. Its command was dead, but its stdout, leader file and HTTP said
//! it led past its deadline. A resigning leader now says it no longer
//! leads before it releases anything.
//!
//! Seed 41, containers, 216-224 s: one etcd member of three was paused
//! while a `run --once` leader wrote its period's completion record; the
//! write went to the paused member and timed out after the 5 s connect
//! timeout, so the next candidate ran the period's job again. Records are
//! now read and written in attempts of a quarter of that timeout, the
//! record's lease under an id of our own so a retried grant is the same
//! lease.
//!
//! Seed 4104, containers, 279-292 s: a candidate restarted while one etcd
//! member was paused sent its tenure claim to that member, and waited
//! 13 s for etcd's "request timed out" before its retry: nobody led
//! meanwhile. Every request of a campaign that may be sent again (the
//! key's creation, the reads of its turn, the claim, the read back) is
//! now sent in bounded attempts, as first contacts and records are.

mod support;

use std::time::{Duration, Instant};

use elect_lab::Fault;
use elect_lab::fault::{Proxy, Traffic};
use nix::sys::signal::Signal;
use support::elect::{campaign, campaign_zk, elect};
use support::proc::scratch;
use support::{etcd, loopback_net, zk};

/// Cut off from the service, a leader told to resign says `demoted` at
/// once, not when (or if) its release reaches the service.
fn resigning_while_cut_off_says_so_at_once(
    start: impl FnOnce(&str) -> support::elect::Proc,
    members: &str,
) {
    let net = loopback_net();
    let proxies: Vec<Proxy> = members
        .split(',')
        .map(|m| Proxy::start(&format!("{net}.1:0"), m).expect("the proxy listens"))
        .collect();
    let endpoints = proxies
        .iter()
        .map(|p| p.addr.clone())
        .collect::<Vec<_>>()
        .join(",");
    let mut leader = start(&endpoints);
    leader.wait_event("elected", Duration::from_secs(30));
    proxies.iter().for_each(|p| p.set(Traffic::Blackhole));
    let asked = Instant::now();
    leader.signal(Signal::SIGTERM);
    let (at, _) = leader.wait_event("demoted", Duration::from_secs(10));
    let took = at.saturating_duration_since(asked);
    // The release and the revoke wait up to seconds on the cut; the line
    // comes before them. A generous bound, far below the 2 s TTL.
    assert!(
        took < Duration::from_millis(1000),
        "demoted {took:?} after SIGTERM while cut off"
    );
    proxies.iter().for_each(|p| p.set(Traffic::Pass));
    leader.wait_exit(Duration::from_secs(30));
}

#[test]
fn etcd_leader_cut_off_and_resigning_stops_leading_at_once() {
    let cluster = etcd::Cluster::start();
    resigning_while_cut_off_says_so_at_once(
        |endpoints| campaign(endpoints, "soak-found", "c2", "2s"),
        &cluster.endpoints,
    );
}

#[test]
fn zk_leader_cut_off_and_resigning_stops_leading_at_once() {
    let ensemble = zk::Ensemble::start();
    resigning_while_cut_off_says_so_at_once(
        |endpoints| campaign_zk(endpoints, "/soak-found", "c2", "2s"),
        &ensemble.endpoints,
    );
}

/// With one member of three paused, each of four `run --once` leaders
/// (an election each) records its period as done, and a host started
/// after it in the same period does not run the job again. The job sees
/// the period it runs for in `ELECT_PERIOD_START`.
#[test]
fn etcd_periodic_record_is_written_with_a_member_paused() {
    let mut cluster = etcd::Cluster::start();
    cluster
        .member_mut(0)
        .apply(Fault::Pause)
        .expect("pausing a member");
    let dir = scratch("once-paused");
    for n in 0..4 {
        let election = format!("once-paused-{n}");
        let runs = dir.join(format!("runs-{n}"));
        let script = format!("echo \"$ELECT_PERIOD_START\" >> {}", runs.display());
        let args = |id: &'static str| -> Vec<String> {
            [
                "run",
                "--election",
                &election,
                "--id",
                id,
                "--ttl",
                "2s",
                "--once",
                "366d",
                "--",
                "sh",
                "-c",
                &script,
            ]
            .map(str::to_owned)
            .to_vec()
        };
        for id in ["first", "second"] {
            let argv = args(id);
            let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
            let mut host = elect(id, &cluster.endpoints, &argv);
            assert_eq!(
                host.wait_exit(Duration::from_secs(60)),
                0,
                "{}",
                host.stderr()
            );
            assert!(
                !host.stderr().contains("could not be recorded"),
                "{}",
                host.stderr()
            );
        }
        let starts = std::fs::read_to_string(&runs).unwrap();
        let starts: Vec<u64> = starts.lines().map(|l| l.parse().unwrap()).collect();
        assert_eq!(
            starts.len(),
            1,
            "two hosts in one period, one run: {starts:?}"
        );
        assert_eq!(
            starts[0] % (366 * 86_400),
            0,
            "ELECT_PERIOD_START is the period's start"
        );
    }
    cluster
        .member_mut(0)
        .apply(Fault::Resume)
        .expect("resuming the member");
}

/// With a follower of three paused, each of six candidates, alone in an
/// election of its own, leads within 2 TTL of its start: no request of
/// its campaign waits on the paused member (unbounded, one such request
/// waited until the connection's pings gave up, 9 s, or for etcd's own
/// timeout).
#[test]
fn etcd_candidate_leads_promptly_with_a_member_paused() {
    let mut cluster = etcd::Cluster::start();
    let leader = cluster.leader_member().expect("the cluster has a leader");
    let follower = (leader + 1) % 3;
    cluster
        .member_mut(follower)
        .apply(Fault::Pause)
        .expect("pausing a member");
    let mut took = Vec::new();
    for n in 0..6 {
        let started = Instant::now();
        let mut candidate = campaign(&cluster.endpoints, &format!("paused-{n}"), "c1", "2s");
        let (at, _) = candidate.wait_event("elected", Duration::from_secs(60));
        took.push(at.saturating_duration_since(started));
        candidate.signal(Signal::SIGTERM);
        candidate.wait_exit(Duration::from_secs(30));
    }
    cluster
        .member_mut(follower)
        .apply(Fault::Resume)
        .expect("resuming the member");
    assert!(
        took.iter().all(|t| *t < Duration::from_secs(4)),
        "elected after {took:?} (from each process's start)"
    );
}
