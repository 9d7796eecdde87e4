//! `--health-cmd` and `--health-url` against real ensembles, on every
//! backend: an unhealthy leader stops its work and hands over at once to
//! a healthy candidate (passing over an unhealthy one in between), and
//! leads again only after its backoff; when nobody is healthy the leader
//! keeps leading; a check that hangs is a failed check, its tree killed
//! by the interval.

mod support;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use support::elect::{Proc, elect, elect_zk};
use support::etcd::Cluster;
use support::raft::Cluster as RaftCluster;
use support::zk::Ensemble;

const SOON: Duration = Duration::from_secs(20);

/// A directory of "sick" marker files: a candidate's check fails while
/// its file exists.
struct Ward(PathBuf);

impl Ward {
    fn new(name: &str) -> Ward {
        let dir = std::env::temp_dir().join(format!("elect-health-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Ward(dir)
    }

    fn marker(&self, id: &str) -> PathBuf {
        self.0.join(id)
    }

    /// The health flags of candidate `id`: checked every 500 ms, one
    /// failure is enough, healthy again after passing for a second. (At
    /// 200 ms, a first check on a machine under stress-ng's load could
    /// outlast its interval: the candidate joined unhealthy.)
    fn flags(&self, id: &str) -> Vec<String> {
        let check = format!("test ! -e {}", self.marker(id).display());
        [
            "--health-cmd",
            &check,
            "--health-interval",
            "500ms",
            "--health-failures",
            "1",
            "--failback-delay",
            "1s",
        ]
        .map(String::from)
        .into()
    }

    fn sicken(&self, id: &str) {
        std::fs::write(self.marker(id), b"").unwrap();
    }

    fn heal(&self, id: &str) {
        let _ = std::fs::remove_file(self.marker(id));
    }
}

impl Drop for Ward {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The index of the candidate that says it was elected, and its line.
fn first_elected(procs: &mut [Proc]) -> (usize, serde_json::Value) {
    let started = Instant::now();
    while started.elapsed() < SOON {
        for (i, p) in procs.iter_mut().enumerate() {
            if let Some((_, line)) = p.try_event("elected") {
                return (i, line);
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("nobody was elected within {SOON:?}");
}

/// The next `health` line of `p`, which must say `healthy`.
fn wait_health(p: &mut Proc, healthy: bool) {
    let line = p.wait_line(&format!("health {healthy}"), SOON, |l| {
        l.json()
            .is_some_and(|v| v["event"] == "health" && v["healthy"] == healthy)
    });
    assert!(line.json().is_some());
}

/// Three candidates started by `start` (each given its health flags):
/// the leader's check fails with one unhealthy follower and one healthy
/// one; leadership goes to the healthy one, in order, with a higher
/// token; then, nobody healthy, it stays.
fn hands_over_to_the_healthy(ward: &Ward, ids: [&str; 3], start: impl Fn(&str, &[String]) -> Proc) {
    let mut procs: Vec<Proc> = ids.iter().map(|id| start(id, &ward.flags(id))).collect();
    let (leader, elected) = first_elected(&mut procs);
    let token = elected["token"].as_u64().unwrap();
    assert_eq!(elected["healthy"], true, "lines say the health: {elected}");
    let (sick, well) = match leader {
        0 => (1, 2),
        1 => (2, 0),
        _ => (0, 1),
    };
    // Let every candidate join, and the leader hear of them.
    std::thread::sleep(Duration::from_millis(1500));

    ward.sicken(ids[sick]);
    wait_health(&mut procs[sick], false);
    std::thread::sleep(Duration::from_millis(500));
    ward.sicken(ids[leader]);
    let failed_at = Instant::now();
    wait_health(&mut procs[leader], false);
    let (demoted_at, _) = procs[leader].wait_event("demoted", SOON);
    let (elected_at, elected) = procs[well].wait_event("elected", SOON);
    assert!(demoted_at <= elected_at, "one leader at a time");
    assert!(elected["token"].as_u64().unwrap() > token, "a higher token");
    eprintln!(
        "from the marker to the healthy successor: {:?}",
        elected_at - failed_at
    );
    assert!(
        !procs[sick].sees_event("elected", Duration::from_millis(500)),
        "the unhealthy candidate was passed over"
    );

    // Nobody healthy: the leader keeps leading.
    ward.sicken(ids[well]);
    wait_health(&mut procs[well], false);
    assert!(
        !procs[well].sees_event("demoted", Duration::from_secs(2)),
        "nobody healthy: the last leader keeps leading"
    );
    // The old leader heals: after its backoff it counts as healthy and,
    // the leader being unhealthy, leads again.
    ward.heal(ids[leader]);
    wait_health(&mut procs[leader], true);
    procs[leader].wait_event("elected", SOON);
    procs[well].wait_event("demoted", SOON);
}

#[test]
fn an_etcd_leader_hands_over_to_a_healthy_candidate() {
    let etcd = Cluster::start();
    let ward = Ward::new("etcd");
    hands_over_to_the_healthy(&ward, ["a", "b", "c"], |id, flags| {
        let mut args = vec![
            "campaign",
            "--election",
            "health",
            "--id",
            id,
            "--ttl",
            "10",
        ];
        args.extend(flags.iter().map(String::as_str));
        elect(id, &etcd.endpoints, &args)
    });
}

#[test]
fn a_zookeeper_leader_hands_over_to_a_healthy_candidate() {
    let zk = Ensemble::start();
    let ward = Ward::new("zk");
    hands_over_to_the_healthy(&ward, ["a", "b", "c"], |id, flags| {
        let mut args = vec![
            "campaign",
            "--election",
            "/health",
            "--id",
            id,
            "--ttl",
            "10",
        ];
        args.extend(flags.iter().map(String::as_str));
        elect_zk(id, &zk.endpoints, &args)
    });
}

#[test]
fn a_raft_leader_hands_over_to_a_healthy_peer() {
    let cluster = RaftCluster::new(3, "1s");
    let ward = Ward::new("raft");
    hands_over_to_the_healthy(&ward, ["p0", "p1", "p2"], |id, flags| {
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        cluster.campaign_with(id, &flags)
    });
}

/// Whether a `sleep <tag>` runs (the check's, or its daemon's).
fn running(tag: &str) -> bool {
    sleeping(tag) > 0
}

/// How many `sleep <tag>` run.
fn sleeping(tag: &str) -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|entry| {
            std::fs::read(entry.path().join("cmdline")).is_ok_and(|c| {
                let argv: Vec<&[u8]> = c.split(|b| *b == 0).collect();
                argv.len() >= 2 && argv[0].ends_with(b"sleep") && argv[1] == tag.as_bytes()
            })
        })
        .count()
}

#[test]
fn a_hanging_check_fails_by_its_interval_and_its_tree_dies() {
    let etcd = Cluster::start();
    let ward = Ward::new("hang");
    let mut healthy = elect(
        "well",
        &etcd.endpoints,
        &[
            &["campaign", "--election", "hang", "--id", "well"][..],
            &ward
                .flags("well")
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
        ]
        .concat(),
    );
    healthy.wait_event("elected", SOON);
    // A check that starts a daemon and hangs: both die by the interval.
    let tag = format!("600.{}", std::process::id());
    let hang = format!("(sleep {tag} &) ; sleep {tag}");
    let http = format!("{}.1:4041", support::loopback_net());
    let mut hung = elect(
        "hung",
        &etcd.endpoints,
        &[
            "campaign",
            "--election",
            "hang",
            "--id",
            "hung",
            "--health-cmd",
            &hang,
            "--health-interval",
            "300ms",
            "--http",
            &http,
        ],
    );
    support::eventually("the check running", SOON, || running(&tag).then_some(()));
    // Its health is served: /leader and the metrics say it fails.
    support::eventually("/leader serving", SOON, || {
        let (code, body) = support::http_get(&http, "/leader");
        let body: serde_json::Value = serde_json::from_str(&body).ok()?;
        (code == 200 && body["leader"] == "well").then_some(body)
    });
    let (_, body) = support::http_get(&http, "/leader");
    let body: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["healthy"], false, "{body}");
    assert_eq!(support::metric(&http, "elect_healthy"), 0.0);
    // Each check's tree (the hanging sleep and the daemon it left) dies
    // by its interval: five intervals on, no more than one check's run.
    std::thread::sleep(Duration::from_millis(1500));
    assert!(sleeping(&tag) <= 2, "{} left running", sleeping(&tag));
    healthy.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(healthy.wait_exit(SOON), 0);
    // Alone, the hung candidate leads (an election is never emptied by
    // its checks), unhealthy.
    let (_, elected) = hung.wait_event("elected", SOON);
    assert_eq!(elected["healthy"], false, "{elected}");
    hung.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(hung.wait_exit(SOON), 0);
    support::eventually("the hung check's tree gone", Duration::from_secs(5), || {
        (!running(&tag)).then_some(())
    });
}
