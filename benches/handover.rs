//! Leadership handover on local 3-member ensembles, `elect` beside the
//! peers' own tools on the same ensemble:
//! - etcd: graceful handover (SIGTERM to the leader until the successor
//!   reports being elected), `elect` vs `etcdctl elect`;
//! - ZooKeeper: graceful handover, `elect` vs kazoo's `Election`, and crash
//!   failover (SIGKILL) as a multiple of the negotiated session timeout.
//!
//! `cargo bench --bench handover -- [--backend etcd|zk] [--trials 100] [--crash-trials 20]`

#[path = "../tests/support/mod.rs"]
mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use support::elect::{BIN, Proc, etcdctl_elect};
use support::etcd::Cluster;
use support::eventually;
use support::zk::Ensemble;

const SOON: Duration = Duration::from_secs(20);
const ZK_SESSION: Duration = Duration::from_secs(2);

fn main() {
    let arg = support::bench_arg;
    let trials = arg("--trials").map_or(100, |n| n.parse().expect("--trials N"));
    let crash_trials = arg("--crash-trials").map_or(20, |n| n.parse().expect("--crash-trials N"));
    let backend = arg("--backend");
    let backend = backend.as_deref();

    println!(
        "{:<34} {:>9} {:>9} {:>9} {:>9}",
        "", "p50", "p99", "max", "mean"
    );
    if backend.is_none_or(|b| b == "etcd") {
        let etcd = Cluster::start();
        let endpoints = etcd.endpoints.clone();
        let queued = |election: &str, n: usize| etcd.candidates(election).len() == n;
        let elect = measure(
            trials,
            "bench-elect",
            &queued,
            Signal::SIGTERM,
            |id| {
                spawn_elect(
                    &[
                        "--endpoints",
                        &endpoints,
                        "--election",
                        "bench-elect",
                        "--ttl",
                        "10",
                    ],
                    id,
                )
            },
            elected_line,
        );
        report(&format!("etcd handover, elect ({trials})"), &elect);
        let go = measure(
            trials,
            "bench-etcdctl",
            &queued,
            Signal::SIGTERM,
            |id| etcdctl_elect(&endpoints, &["bench-etcdctl", id]),
            |p, id| p.wait_line("etcdctl elected", SOON, |l| l.text == id).at,
        );
        report(&format!("etcd handover, etcdctl elect ({trials})"), &go);
    }
    if backend.is_none_or(|b| b == "zk") {
        let zk = Ensemble::start();
        let endpoints = zk.endpoints.clone();
        let queued = |election: &str, n: usize| zk.children(election).len() == n;
        let zk_elect = |election: &'static str| {
            let endpoints = endpoints.clone();
            move |id: &str| {
                spawn_elect(
                    &[
                        "--backend",
                        "zk",
                        "--endpoints",
                        &endpoints,
                        "--election",
                        election,
                        "--ttl",
                        "2s",
                    ],
                    id,
                )
            }
        };
        let elect = measure(
            trials,
            "/bench-elect",
            &queued,
            Signal::SIGTERM,
            zk_elect("/bench-elect"),
            elected_line,
        );
        report(&format!("zk handover, elect ({trials})"), &elect);
        let kazoo = measure(
            trials,
            "/bench-kazoo",
            &queued,
            Signal::SIGTERM,
            |id| spawn_kazoo(&endpoints, "/bench-kazoo", id),
            |p, id| {
                p.wait_line("kazoo elected", SOON, |l| l.text == format!("ELECTED {id}"))
                    .at
            },
        );
        report(&format!("zk handover, kazoo Election ({trials})"), &kazoo);
        let crash = measure(
            crash_trials,
            "/bench-crash",
            &queued,
            Signal::SIGKILL,
            zk_elect("/bench-crash"),
            elected_line,
        );
        report(
            &format!("zk crash failover, elect ({crash_trials})"),
            &crash,
        );
        let ratio = |d: Duration| d.as_secs_f64() / ZK_SESSION.as_secs_f64();
        let mut sorted = crash.clone();
        sorted.sort();
        println!(
            "  as a multiple of the {}s session timeout: p50 {:.2}, max {:.2}",
            ZK_SESSION.as_secs(),
            ratio(sorted[sorted.len() / 2]),
            ratio(*sorted.last().unwrap())
        );
    }
}

fn spawn_elect(args: &[&str], id: &str) -> Proc {
    let mut cmd = Command::new(BIN);
    cmd.arg("campaign")
        .args(args)
        .args(["--id", id, "--format", "json"])
        .env("RUST_LOG", "warn");
    Proc::spawn(id, cmd)
}

fn elected_line(p: &mut Proc, _id: &str) -> Instant {
    p.wait_event("elected", SOON).0
}

/// A kazoo `Election` candidate that resigns (its lock is released on
/// exit) on SIGTERM, as a careful kazoo user writes it.
fn spawn_kazoo(endpoints: &str, election: &str, id: &str) -> Proc {
    let script = format!(
        "import signal, sys, time\nfrom kazoo.client import KazooClient\n\
         signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))\n\
         zk = KazooClient(hosts={endpoints:?}, timeout=2)\nzk.start(timeout=15)\n\
         def lead():\n    print('ELECTED {id}', flush=True)\n    while True: time.sleep(1)\n\
         try:\n    zk.Election({election:?}, {id:?}).run(lead)\nfinally:\n    zk.stop()\n"
    );
    let mut cmd = Command::new("/usr/bin/python3");
    cmd.arg("-c").arg(script);
    Proc::spawn(id, cmd)
}

/// Keeps one leader and one waiting candidate; each trial signals the
/// leader and times the waiter's election, then queues a new waiter.
fn measure(
    trials: usize,
    election: &str,
    queued: &dyn Fn(&str, usize) -> bool,
    signal: Signal,
    spawn: impl Fn(&str) -> Proc,
    elected: impl Fn(&mut Proc, &str) -> Instant,
) -> Vec<Duration> {
    let wait_queued = |n: usize| {
        eventually("candidates queued", SOON, || {
            queued(election, n).then_some(())
        })
    };
    let mut leader = spawn("c0");
    elected(&mut leader, "c0");
    let mut waiter = spawn("c1");
    wait_queued(2);
    let mut samples = Vec::with_capacity(trials);
    for i in 0..trials {
        let next_id = format!("c{}", i + 1);
        let sent = Instant::now();
        leader.signal(signal);
        samples.push(elected(&mut waiter, &next_id) - sent);
        leader.wait_exit(SOON);
        leader = waiter;
        waiter = spawn(&format!("c{}", i + 2));
        wait_queued(2);
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
        "{name:<34} {:>9} {:>9} {:>9} {:>9}",
        ms(pick(0.5)),
        ms(pick(0.99)),
        ms(*sorted.last().unwrap()),
        ms(mean)
    );
}
