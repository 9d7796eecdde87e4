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

mod support;

use std::time::{Duration, Instant};

use elect_lab::fault::{Proxy, Traffic};
use nix::sys::signal::Signal;
use support::elect::{campaign, campaign_zk};
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
