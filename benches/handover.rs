//! Graceful handover on a local 3-member etcd cluster: time from SIGTERM to
//! the leader until its successor reports being elected, for `elect` and
//! for `etcdctl elect` side by side on the same cluster.
//!
//! `cargo bench --bench handover -- --trials 100`

#[path = "../tests/support/mod.rs"]
mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use support::elect::{BIN, Proc, etcdctl_elect};
use support::etcd::Cluster;
use support::eventually;

const SOON: Duration = Duration::from_secs(10);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let trials = args
        .iter()
        .position(|a| a == "--trials")
        .and_then(|i| args.get(i + 1))
        .map_or(100, |n| n.parse().expect("--trials N"));

    let etcd = Cluster::start();
    println!("graceful handover: SIGTERM to the leader -> successor elected");
    println!(
        "3-member etcd {} on loopback, {trials} trials each\n",
        etcd_version()
    );
    println!(
        "{:<14} {:>9} {:>9} {:>9} {:>9}",
        "", "p50", "p99", "max", "mean"
    );
    let elect = measure(&etcd, trials, "bench-elect", spawn_elect, |p, _| {
        p.wait_event("elected", SOON).0
    });
    report("elect", &elect);
    let go = measure(&etcd, trials, "bench-etcdctl", spawn_etcdctl, |p, id| {
        p.wait_line("etcdctl elected", SOON, |l| l.text == id).at
    });
    report("etcdctl elect", &go);
}

fn spawn_elect(etcd: &Cluster, election: &str, id: &str) -> Proc {
    let mut cmd = Command::new(BIN);
    cmd.args([
        "campaign",
        "--endpoints",
        &etcd.endpoints,
        "--election",
        election,
    ])
    .args(["--id", id, "--ttl", "10", "--format", "json"])
    .env("RUST_LOG", "warn");
    Proc::spawn(id, cmd)
}

fn spawn_etcdctl(etcd: &Cluster, election: &str, id: &str) -> Proc {
    etcdctl_elect(&etcd.endpoints, &[election, id])
}

/// Keeps one leader and one waiting candidate; each trial terminates the
/// leader and times the waiter's election, then queues a new waiter.
fn measure(
    etcd: &Cluster,
    trials: usize,
    election: &str,
    spawn: fn(&Cluster, &str, &str) -> Proc,
    elected: fn(&mut Proc, &str) -> Instant,
) -> Vec<Duration> {
    let queued = |n: usize| {
        eventually("candidates queued", SOON, || {
            (etcd.candidates(election).len() == n).then_some(())
        })
    };
    let mut leader = spawn(etcd, election, "c0");
    elected(&mut leader, "c0");
    let mut waiter = spawn(etcd, election, "c1");
    queued(2);
    let mut samples = Vec::with_capacity(trials);
    for i in 0..trials {
        let next_id = format!("c{}", i + 1);
        let sent = Instant::now();
        leader.signal(Signal::SIGTERM);
        samples.push(elected(&mut waiter, &next_id) - sent);
        leader.wait_exit(SOON);
        leader = waiter;
        waiter = spawn(etcd, election, &format!("c{}", i + 2));
        queued(2);
    }
    samples
}

fn report(name: &str, samples: &[Duration]) {
    let mut sorted = samples.to_vec();
    sorted.sort();
    let pick =
        |q: f64| sorted[((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1];
    let mean = sorted.iter().sum::<Duration>() / sorted.len() as u32;
    let ms = |d: Duration| format!("{:.2}ms", d.as_secs_f64() * 1e3);
    println!(
        "{name:<14} {:>9} {:>9} {:>9} {:>9}",
        ms(pick(0.5)),
        ms(pick(0.99)),
        ms(*sorted.last().unwrap()),
        ms(mean)
    );
}

fn etcd_version() -> String {
    let out = Command::new("etcd")
        .arg("--version")
        .output()
        .expect("etcd");
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .next()
        .and_then(|l| l.split_whitespace().last())
        .unwrap_or("?")
        .to_owned()
}
