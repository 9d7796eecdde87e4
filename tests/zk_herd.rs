//! No herd effect: with 30 candidates, a leader change wakes exactly one
//! waiting candidate's campaign, and each znode is watched by at most its
//! successor (plus, for the leader's znode, the observers that report it,
//! and for the next in line's, its own session, which will claim on the
//! leader's deletion alone).

mod support;

use std::collections::HashMap;
use std::time::Duration;

use nix::sys::signal::Signal;
use support::elect::{Proc, campaign_zk};
use support::eventually;
use support::zk::Ensemble;

const CANDIDATES: usize = 30;
const SOON: Duration = Duration::from_secs(60);

fn wakeups(p: &Proc) -> usize {
    p.stderr().matches("woke: predecessor changed").count()
}

/// Whether `p`'s campaign said it was elected (its log line, whichever
/// module of the backend says it: the layout moves them).
fn elected(p: &Proc) -> bool {
    p.stderr()
        .lines()
        .any(|l| l.contains(" INFO elect::backend::zk::") && l.contains(": elected token="))
}

/// Sessions watching each path, from the servers' `wchp`.
fn watchers_by_path(zk: &Ensemble) -> HashMap<String, usize> {
    let mut by_path = HashMap::new();
    let mut current = None;
    for line in zk.four_letter_all("wchp").lines() {
        if line.starts_with('/') {
            current = Some(line.trim().to_owned());
        } else if line.trim().starts_with("0x") {
            *by_path.entry(current.clone().unwrap()).or_insert(0) += 1;
        }
    }
    by_path
}

#[test]
fn a_leader_change_wakes_exactly_one_waiting_candidate() {
    let zk = Ensemble::start();
    let mut procs: Vec<Proc> = (0..CANDIDATES)
        .map(|i| campaign_zk(&zk.endpoints, "/herd", &format!("c{i:02}"), "4s"))
        .collect();
    let nodes = eventually("30 znodes", SOON, || {
        let c = zk.children("/herd");
        (c.len() == CANDIDATES).then_some(c)
    });
    // Everyone but the leader waits on its predecessor.
    eventually("29 waiting candidates", SOON, || {
        let waiting = procs
            .iter()
            .filter(|p| p.stderr().contains("waiting on our predecessor"))
            .count();
        (waiting == CANDIDATES - 1).then_some(())
    });
    let leader_at = eventually("the leader", SOON, || procs.iter().position(elected));

    let mut sorted = nodes.clone();
    sorted.sort_by_key(|n| n[n.len() - 10..].to_owned());
    let watched = watchers_by_path(&zk);
    assert_eq!(
        watched.get("/herd"),
        None,
        "nobody watches the election's children"
    );
    for (place, node) in sorted.iter().enumerate().skip(1) {
        let n = watched.get(&format!("/herd/{node}")).copied().unwrap_or(0);
        let most = if place == 1 { 2 } else { 1 };
        assert!(
            n <= most,
            "{node}, {place} in line, is watched by {n} sessions"
        );
    }

    let before: Vec<usize> = procs.iter().map(wakeups).collect();
    procs[leader_at].signal(Signal::SIGTERM);
    let successor = eventually("a successor", SOON, || {
        procs
            .iter()
            .enumerate()
            .find(|(i, p)| *i != leader_at && elected(p))
            .map(|(i, _)| i)
    });
    // Give any stray wake-up time to show.
    std::thread::sleep(Duration::from_secs(1));
    let woken: Vec<usize> = procs
        .iter()
        .enumerate()
        .filter(|(i, p)| *i != leader_at && wakeups(p) > before[*i])
        .map(|(i, _)| i)
        .collect();
    assert_eq!(
        woken,
        vec![successor],
        "exactly the successor's campaign woke"
    );
    let _ = procs[leader_at].wait_exit(SOON);
    drop(procs);
}
