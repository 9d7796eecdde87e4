//! Raft-vote with real `elect` peers on loopback: crash failover (SIGKILL
//! of the leader until another peer reports `elected`; with five peers also
//! of the leader and the first in line together) at several election
//! timeouts and cluster sizes and graceful transfer (SIGTERM), through
//! `elect compare`; beside them etcd's own Raft election on a lab cluster,
//! and the cost of an idle peer.
//!
//! `cargo bench --bench raft -- [--trials 200] [--ttl 150ms,1s] [--peers 3,5] [--transfers 100] [--etcd-trials 20]`
//!
//! Beside it, etcd's own Raft leader election with the same timing.

#[path = "../tests/support/mod.rs"]
mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use support::elect::Proc;
use support::raft::Cluster;

const SOON: Duration = Duration::from_secs(30);

fn main() {
    let arg = support::bench_arg;
    let trials: usize = arg("--trials").map_or(200, |n| n.parse().unwrap());
    let transfers: usize = arg("--transfers").map_or(100, |n| n.parse().unwrap());
    let ttls = arg("--ttl").unwrap_or_else(|| "150ms,1s".into());
    let peers = arg("--peers").unwrap_or_else(|| "3,5".into());

    // Crash failover and transfer through `elect compare`, one run per
    // timeout and cluster size.
    for ttl in ttls.split(',') {
        for n in peers.split(',') {
            let failover = trials.to_string();
            let transfer = transfers.to_string();
            let mut runs = vec![("failover", failover.as_str())];
            if n == "3" {
                runs.push(("handover", transfer.as_str()));
            } else {
                // The first in line killed with the leader: the second
                // takes over; with three peers no majority would be left.
                runs.push(("failover-next", failover.as_str()));
            }
            for (scenario, trials) in runs {
                let status = Command::new(env!("CARGO_BIN_EXE_elect"))
                    .args(["compare", "--backends", "raft", "--scenarios", scenario])
                    .args(["--ttl", &format!("raft={ttl}"), "--raft-peers", n])
                    .args(["--trials", trials])
                    .status()
                    .expect("running elect compare");
                assert!(status.success(), "elect compare failed");
            }
        }
    }
    let etcd_trials: usize = arg("--etcd-trials").map_or(20, |n| n.parse().unwrap());
    println!(
        "\netcd's own Raft leader election, 3 members, heartbeat T/10, election timeout T (SIGKILL of the leader member)"
    );
    for ttl in ttls.split(',') {
        let t = humantime::parse_duration(ttl).unwrap();
        let times = etcd_failovers(t, etcd_trials);
        report(&format!("etcd T={ttl}"), &times, t);
    }
    idle_cost();
}

/// SIGKILL of an etcd cluster's leader member until a survivor knows a new
/// leader, on a fresh cluster each trial.
fn etcd_failovers(t: Duration, trials: usize) -> Vec<Duration> {
    let mut times = Vec::with_capacity(trials);
    for _ in 0..trials {
        let ms = t.as_millis() as u64;
        let mut etcd = support::etcd::Cluster::start_with_timing((ms / 10).max(1), ms);
        let leader = support::eventually("an etcd leader", SOON, || etcd.leader_member());
        let old = etcd.leader_seen_by(leader).unwrap();
        let killed = Instant::now();
        etcd.kill(leader);
        let survivor = (leader + 1) % 3;
        // Polled every millisecond: `eventually`'s 10 ms would blur T=150ms.
        while etcd.leader_seen_by(survivor).is_none_or(|l| l == old) {
            assert!(killed.elapsed() < SOON, "etcd elected no new leader");
            std::thread::sleep(Duration::from_millis(1));
        }
        times.push(killed.elapsed());
    }
    times
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn report(name: &str, times: &[Duration], t: Duration) {
    let mut sorted = times.to_vec();
    sorted.sort();
    let mean = sorted.iter().sum::<Duration>() / sorted.len() as u32;
    let p99 = sorted[(sorted.len() * 99).div_ceil(100) - 1];
    let max = *sorted.last().unwrap();
    println!(
        "{name:<16} {:>8.1}ms {:>8.1}ms {:>8.1}ms {:>8.2} {:>8.2}",
        ms(mean),
        ms(p99),
        ms(max),
        mean.as_secs_f64() / t.as_secs_f64(),
        p99.as_secs_f64() / t.as_secs_f64(),
    );
}

/// CPU time (utime + stime, in clock ticks) and RSS (kB) of a process.
fn usage(pid: i32) -> (u64, u64) {
    let ticks = elect_lab::process::cpu_ticks(pid).unwrap();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let rss = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap()
        .parse()
        .unwrap();
    (ticks, rss)
}

fn idle_cost() {
    let cluster = Cluster::new(3, "1s");
    let mut procs: Vec<Proc> = cluster.ids.iter().map(|id| cluster.campaign(id)).collect();
    let leader = support::eventually("a leader", SOON, || {
        procs
            .iter_mut()
            .position(|p| p.try_event("elected").is_some())
    });
    let follower = (leader + 1) % 3;
    std::thread::sleep(Duration::from_secs(2));
    let window = Duration::from_secs(10);
    let before: Vec<(u64, u64)> = procs.iter().map(|p| usage(p.pid())).collect();
    std::thread::sleep(window);
    let after: Vec<(u64, u64)> = procs.iter().map(|p| usage(p.pid())).collect();
    let hz = 100.0; // USER_HZ on Linux
    for (role, i) in [("leader", leader), ("follower", follower)] {
        let cpu = (after[i].0 - before[i].0) as f64 / hz / window.as_secs_f64();
        println!(
            "idle {role} (3 peers, T=1s): RSS {} kB, CPU {:.2} ms per second",
            after[i].1,
            cpu * 1e3
        );
    }
}
