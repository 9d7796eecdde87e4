//! Campaign, observe and leader against a real 3-member etcd cluster.

mod support;

use std::time::{Duration, Instant};

use elect_lab::fault::{Proxy, Traffic};
use nix::sys::signal::Signal;
use support::elect::{Proc, campaign, elect, leader_once};
use support::etcd::Cluster;
use support::{eventually, loopback_net, metric};

const SOON: Duration = Duration::from_secs(10);

#[test]
fn one_candidate_is_elected_with_its_key_in_go_layout() {
    let etcd = Cluster::start();
    let mut a = campaign(&etcd.endpoints, "jobs", "node-a", "5");
    let (_, elected) = a.wait_event("elected", SOON);
    assert_eq!(elected["leader"], "node-a");
    assert_eq!(elected["is_self"], true);
    assert_eq!(elected["backend"], "etcd");
    assert_eq!(elected["election"], "jobs");

    let keys = etcd.candidates("jobs");
    assert_eq!(keys.len(), 1);
    let (key, value) = &keys[0];
    assert_eq!(value, "node-a");
    let lease_hex = key.strip_prefix("jobs/").expect("key under <election>/");
    let lease = i64::from_str_radix(lease_hex, 16).unwrap();
    assert!(etcd.leases().contains(&lease), "key named after its lease");
    // The token is the create revision of the leader's key.
    let rev = etcd.etcdctl_ok(&["get", key, "-w", "json"]);
    let rev: serde_json::Value = serde_json::from_str(&rev).unwrap();
    assert_eq!(elected["token"], rev["kvs"][0]["create_revision"]);

    let (code, out) = leader_once("etcd", &etcd.endpoints, "jobs", "text");
    assert_eq!((code, out.trim()), (0, "node-a"));
}

#[test]
fn candidates_lead_in_creation_order_as_each_resigns() {
    let etcd = Cluster::start();
    let mut procs = Vec::new();
    for (i, id) in ["a", "b", "c"].iter().enumerate() {
        procs.push(campaign(&etcd.endpoints, "order", id, "5"));
        etcd.wait_for_candidates("order", i + 1);
    }
    let (_, first) = procs[0].wait_event("elected", SOON);
    let (_, seen) = procs[2].wait_event("leader", SOON);
    assert_eq!(
        seen["leader"], "a",
        "a waiting candidate reports the leader"
    );
    let mut token = first["token"].as_u64().unwrap();
    for i in 1..3 {
        procs[i - 1].signal(Signal::SIGTERM);
        assert_eq!(procs[i - 1].wait_exit(SOON), 0);
        let (_, elected) = procs[i].wait_event("elected", SOON);
        let next = elected["token"].as_u64().unwrap();
        assert!(next > token, "fencing tokens only grow");
        token = next;
        for later in &mut procs[i + 1..] {
            assert!(
                !later.sees_event("elected", Duration::ZERO),
                "only one leader"
            );
        }
    }
    procs[2].signal(Signal::SIGTERM);
    assert_eq!(procs[2].wait_exit(SOON), 0);
    assert!(
        etcd.candidates("order").is_empty(),
        "resigned candidates leave no key"
    );
    assert!(
        etcd.leases().is_empty(),
        "resigned candidates leave no lease"
    );
}

#[test]
fn sigterm_to_the_leader_hands_over_within_a_second() {
    let etcd = Cluster::start();
    let mut a = campaign(&etcd.endpoints, "handover", "a", "10");
    a.wait_event("elected", SOON);
    let mut b = campaign(&etcd.endpoints, "handover", "b", "10");
    etcd.wait_for_candidates("handover", 2);
    let sent = Instant::now();
    a.signal(Signal::SIGTERM);
    let (at, _) = b.wait_event("elected", SOON);
    let took = at - sent;
    assert!(took < Duration::from_secs(1), "handover took {took:?}");
    assert_eq!(a.wait_exit(SOON), 0);
}

/// The metric a successor counts the terms it began with no read in.
const LED_WITHOUT_READ: &str = "elect_backend_led_without_read_total";

/// `elect campaign` serving its metrics on `http`.
fn candidate_serving(etcd: &Cluster, election: &str, id: &str, http: &str) -> Proc {
    elect(
        id,
        &etcd.endpoints,
        &[
            "campaign",
            "--election",
            election,
            "--id",
            id,
            "--ttl",
            "10",
            "--http",
            http,
        ],
    )
}

/// A resigning leader hands over in its resignation's transaction, which
/// puts the next in line's key again unchanged: the successor leads on
/// that event, with no read of its own, and nobody else's key is touched.
#[test]
fn a_resignation_hands_over_to_the_next_in_line_without_a_read_of_its_own() {
    let etcd = Cluster::start();
    let net = loopback_net();
    let http: Vec<String> = (1..=3).map(|i| format!("{net}.{i}:4040")).collect();
    let mut procs = Vec::new();
    for (i, id) in ["a", "b", "c"].iter().enumerate() {
        procs.push(candidate_serving(&etcd, "touch", id, &http[i]));
        etcd.wait_for_candidates("touch", i + 1);
    }
    let (_, first) = procs[0].wait_event("elected", SOON);
    let mut token = first["token"].as_u64().unwrap();
    for i in 1..3 {
        procs[i - 1].signal(Signal::SIGTERM);
        let (_, elected) = procs[i].wait_event("elected", SOON);
        let next = elected["token"].as_u64().unwrap();
        assert!(next > token, "fencing tokens only grow");
        token = next;
        assert_eq!(procs[i - 1].wait_exit(SOON), 0);
        // It leads on the touch, unless the read its predecessor's
        // deletion started answers first (the two events come in two
        // watch responses, and a loaded etcd may send the second late):
        // both are sound, and the touch below was made either way.
        let led_without_read = metric(&http[i], LED_WITHOUT_READ);
        assert!(
            led_without_read == 0.0 || led_without_read == 1.0,
            "one handover, led on at most once: {led_without_read}"
        );
        let touched = etcd.versions("touch");
        let expected: Vec<_> = ["a", "b", "c"][i..]
            .iter()
            .enumerate()
            .map(|(k, id)| (id.to_string(), if k == 0 { 2 } else { 1 }))
            .collect();
        assert_eq!(touched, expected, "only the successor's key was put again");
    }
    procs[2].signal(Signal::SIGTERM);
    assert_eq!(procs[2].wait_exit(SOON), 0);
    assert!(etcd.candidates("touch").is_empty(), "no key left behind");
    assert!(etcd.leases().is_empty(), "no lease left behind");
}

/// The leader keeps track of who is next while candidates come and go: a
/// newcomer after it led alone, then the next in line leaving.
#[test]
fn the_leader_hands_over_to_whoever_is_next_when_it_resigns() {
    let etcd = Cluster::start();
    let net = loopback_net();
    let http: Vec<String> = (1..=3).map(|i| format!("{net}.{i}:4040")).collect();
    let mut a = candidate_serving(&etcd, "next", "a", &http[0]);
    a.wait_event("elected", SOON);
    let mut b = candidate_serving(&etcd, "next", "b", &http[1]);
    etcd.wait_for_candidates("next", 2);
    let mut c = candidate_serving(&etcd, "next", "c", &http[2]);
    etcd.wait_for_candidates("next", 3);
    b.signal(Signal::SIGTERM);
    assert_eq!(b.wait_exit(SOON), 0);
    etcd.wait_for_candidates("next", 2);
    // The leader learns of b's departure from its watch on b's key and
    // reads who is next now. (Had it not yet, the touch of b's gone key
    // would fail and c would read its turn instead: slower, as sound.)
    eventually("the leader knows c is next", SOON, || {
        a.stderr().contains("next in line next=\"c\"").then_some(())
    });
    a.signal(Signal::SIGTERM);
    c.wait_event("elected", SOON);
    assert_eq!(a.wait_exit(SOON), 0);
    assert_eq!(metric(&http[2], LED_WITHOUT_READ), 1.0);
    assert_eq!(etcd.versions("next"), vec![("c".to_string(), 2)]);
}

/// A waiting candidate whose key is deleted by hand learns it from its
/// watch, queues again with a fresh lease and key, and leads in its turn.
#[test]
fn a_waiting_candidate_whose_key_is_deleted_queues_again() {
    let etcd = Cluster::start();
    let mut a = campaign(&etcd.endpoints, "deleted", "a", "10");
    a.wait_event("elected", SOON);
    let mut b = campaign(&etcd.endpoints, "deleted", "b", "10");
    etcd.wait_for_candidates("deleted", 2);
    let (key, _) = etcd.candidates("deleted").pop().unwrap();
    etcd.etcdctl_ok(&["del", &key]);
    eventually("b queued again under a new key", SOON, || {
        let keys = etcd.candidates("deleted");
        (keys.len() == 2 && keys[1].0 != key).then_some(())
    });
    assert!(!b.sees_event("elected", Duration::ZERO), "b waits its turn");
    a.signal(Signal::SIGTERM);
    b.wait_event("elected", SOON);
    assert_eq!(a.wait_exit(SOON), 0);
}

/// Every watch is bounded as requests are (`WatchBounds`): a waiting
/// candidate whose watch sits on a member that stopped answering (here
/// cut off behind its proxy, as a pause or a partition does) finds it
/// silent, asks for progress, gets no answer, and opens it again on
/// another member within its connect timeout and a quarter; the
/// connection's pings alone take 3 to 9 s. Which member serves b's turn
/// watch is read from etcd's own gauge of watchers: the one that gained
/// the two of its stream (its predecessor's key and its own). The leader
/// talks to the members directly, so its resignation does not wait.
#[test]
fn a_waiting_candidates_watch_on_a_silent_member_is_opened_again_elsewhere() {
    let etcd = Cluster::start();
    let members: Vec<String> = etcd.endpoints.split(',').map(str::to_owned).collect();
    let watchers = || watchers(&etcd);
    let mut a = campaign(&etcd.endpoints, "silent-watch", "a", "10");
    a.wait_event("elected", SOON);
    // a's own watches (its observer's, its leader's watch) open after it
    // says it leads: count from once they have settled.
    let before = watchers_settled(&etcd);
    let host = format!("{}.1", loopback_net());
    let (proxies, through) = Proxy::in_front_of(&host, &etcd.endpoints).unwrap();
    let args = [
        "--connect-timeout",
        "1s",
        "campaign",
        "--election",
        "silent-watch",
        "--id",
        "b",
        "--ttl",
        "10",
    ];
    let mut b = elect("b", &through, &args);
    etcd.wait_for_candidates("silent-watch", 2);
    // b's observer opens one watch, its turn two on one stream: three in
    // all, the turn's member gaining two of them.
    let serving = eventually("b's turn watch", SOON, || {
        let now = watchers();
        let gained: Vec<f64> = (0..members.len()).map(|i| now[i] - before[i]).collect();
        let all = gained.iter().sum::<f64>() == 3.0;
        (0..members.len()).find(|&i| all && gained[i] >= 2.0)
    });
    proxies[serving].set(Traffic::Blackhole);
    let sent = Instant::now();
    a.signal(Signal::SIGTERM);
    let (at, _) = b.wait_event("elected", Duration::from_secs(20));
    let took = at - sent;
    let said = b.stderr();
    assert!(
        said.contains("watching a key failed: its member did not answer a progress request"),
        "b's turn watch was not found silent:\n{said}"
    );
    assert!(
        took < Duration::from_secs(6),
        "b led {took:?} after a resigned:\n{said}"
    );
    assert_eq!(a.wait_exit(SOON), 0);
    proxies[serving].set(Traffic::Pass);
    b.signal(Signal::SIGTERM);
    assert_eq!(b.wait_exit(SOON), 0);
}

#[test]
fn sigkill_of_the_leader_fails_over_within_ttl_plus_two_seconds() {
    let etcd = Cluster::start();
    let mut a = campaign(&etcd.endpoints, "failover", "a", "2");
    a.wait_event("elected", SOON);
    let mut b = campaign(&etcd.endpoints, "failover", "b", "2");
    etcd.wait_for_candidates("failover", 2);
    let sent = Instant::now();
    a.signal(Signal::SIGKILL);
    let (at, _) = b.wait_event("elected", SOON);
    let took = at - sent;
    assert!(took < Duration::from_secs(4), "failover took {took:?}");
    // The killed leader's lease expired with its key: only b's is left.
    assert_eq!(etcd.candidates("failover").len(), 1);
}

/// A crash of the leader and of etcd's own Raft leader at once: the new
/// etcd leader extends every lease by its election timeout and grants
/// each its whole TTL again (lease checkpoints are off by default, on
/// 3.4 and 3.5 alike), so the successor waits for etcd's election, that
/// extension and the TTL: at most TTL + 3.5 s with etcd's default 1 s
/// election timeout. It must still lead within the bound the soak's
/// liveness check assumes after a heal, two TTLs and 2 s; the time taken
/// is printed for the record. At the soak's own TTL of 2 s the margin is
/// half a second (4.4 to 5.2 s measured on 3.4.23 and 3.5.1, bound 6 s);
/// at 3 s, here, a loaded CI machine has 1.5 s.
#[test]
fn sigkill_of_the_leader_and_etcds_own_leader_fails_over_within_the_soaks_bound() {
    let mut etcd = Cluster::start();
    let version = etcd.version();
    let mut a = campaign(&etcd.endpoints, "crash", "a", "3");
    a.wait_event("elected", SOON);
    let mut b = campaign(&etcd.endpoints, "crash", "b", "3");
    etcd.wait_for_candidates("crash", 2);
    let raft_leader = eventually("a Raft leader", SOON, || etcd.leader_member());
    let sent = Instant::now();
    a.signal(Signal::SIGKILL);
    etcd.kill(raft_leader);
    let (at, _) = b.wait_event("elected", Duration::from_secs(30));
    let took = at - sent;
    eprintln!("etcd {version}: b led {took:?} after a and etcd's leader were killed");
    let bound = Duration::from_secs(2 * 3 + 2);
    assert!(took < bound, "etcd {version}: failover took {took:?}");
}

/// What a candidate says at start of the release it met: the term proof
/// (etcd#15247) on every release before 3.4.31 and 3.5.13, the data that
/// can diverge after a crash (etcd#13766) on 3.5.0 to 3.5.2, the members
/// that crash on an abandoned read (etcd#14110) on 3.5.0 to 3.5.4.
#[test]
fn the_release_is_warned_of_as_its_version_says() {
    let etcd = Cluster::start();
    let version = etcd.version();
    let mut a = campaign(&etcd.endpoints, "release", "a", "2");
    a.wait_event("elected", SOON);
    let said = a.stderr();
    let (proof, diverging, fragile) = match etcd.version_numbers() {
        [3, 4, patch] => (patch < 31, false, false),
        [3, 5, patch] => (patch < 13, patch <= 2, patch <= 4),
        _ => (false, false, false),
    };
    assert_eq!(
        said.contains("etcd#14110"),
        fragile,
        "etcd {version}:\n{said}"
    );
    assert_eq!(
        said.contains("etcd#15247"),
        proof,
        "etcd {version}:\n{said}"
    );
    assert_eq!(
        said.contains("etcd#13766"),
        diverging,
        "etcd {version}:\n{said}"
    );
    a.signal(Signal::SIGTERM);
    assert_eq!(a.wait_exit(SOON), 0);
}

/// etcd#14110: members of etcd 3.5.0 to 3.5.4 crash when a read-only
/// transaction's client goes away while it is applied. elect's reads
/// (the successor's local turn check given 200 ms, the leader's polls of
/// the line) were dropped that way: on 3.5.1, 400 handovers of `elect
/// compare` (its own cluster, this build) killed a member in each of two
/// runs, and the floor's trials after them found it gone. They now run
/// to their end.
#[test]
fn four_hundred_handovers_leave_every_member_serving() {
    let (code, out, err, _) = support::elect::elect_once(&[
        "compare",
        "--backends",
        "etcd",
        "--scenarios",
        "handover",
        "--trials",
        "400",
    ]);
    assert_eq!(code, 0, "a member died, or the run failed:\n{out}{err}");
}

#[test]
fn observe_reports_changes_and_leader_exits_3_without_one() {
    let etcd = Cluster::start();
    let (code, out) = leader_once("etcd", &etcd.endpoints, "obs", "text");
    assert_eq!((code, out.as_str()), (3, ""));

    let mut observer = elect(
        "observer",
        &etcd.endpoints,
        &["observe", "--election", "obs"],
    );
    observer.wait_event("none", SOON);
    let mut a = campaign(&etcd.endpoints, "obs", "a", "5");
    a.wait_event("elected", SOON);
    let (_, seen) = observer.wait_event("leader", SOON);
    assert_eq!(seen["leader"], "a");
    assert_eq!(seen["is_self"], false);
    a.signal(Signal::SIGTERM);
    observer.wait_event("none", SOON);
    observer.signal(Signal::SIGTERM);
    assert_eq!(observer.wait_exit(SOON), 0);
    assert!(etcd.leases().is_empty(), "observe takes no lease");
}

#[test]
fn a_ttl_below_the_server_minimum_is_reported_with_the_granted_ttl() {
    let etcd = Cluster::start();
    // election timeout 1 s -> the server's minimum TTL is 2 s.
    let mut a = campaign(&etcd.endpoints, "short", "a", "1");
    a.wait_event("elected", SOON);
    let stderr = a.stderr();
    assert!(
        stderr.contains("granted") && stderr.contains("2s"),
        "{stderr}"
    );
}

/// etcd sends GOAWAY "too_many_pings" to clients that ping more often than
/// its --grpc-keepalive-min-time (5 s): a leader and a waiting candidate
/// left idle for 15 s keep their watches, and nothing is lost or retried.
#[test]
fn idle_candidates_keep_their_connections_to_etcd() {
    let etcd = Cluster::start();
    let mut a = campaign(&etcd.endpoints, "/idle", "a", "10");
    a.wait_event("elected", SOON);
    let mut b = campaign(&etcd.endpoints, "/idle", "b", "10");
    b.wait_leader("a", SOON);
    std::thread::sleep(Duration::from_secs(15));
    for p in [&a, &b] {
        let stderr = p.stderr();
        for sign in ["too_many_pings", "lost contact", "failed"] {
            assert!(!stderr.contains(sign), "{}: {sign} in\n{stderr}", p.name);
        }
    }
    assert!(!b.sees_event("elected", Duration::ZERO));
}

/// The watches each member serves, from etcd's own gauge.
fn watchers(etcd: &Cluster) -> Vec<f64> {
    etcd.endpoints
        .split(',')
        .map(|m| metric(m, "etcd_debugging_mvcc_watcher_total"))
        .collect()
}

/// The watches each member serves once no candidate opens one any more
/// (unchanged for half a second).
fn watchers_settled(etcd: &Cluster) -> Vec<f64> {
    let mut before = watchers(etcd);
    let settled = elect_lab::poll(SOON, || {
        std::thread::sleep(Duration::from_millis(500));
        let now = watchers(etcd);
        let same = now == before;
        before = now;
        same.then_some(())
    });
    assert!(settled.is_some(), "the watches never settled: {before:?}");
    before
}

/// The requests the members received per second over `window`: every
/// candidate's renewals while nothing else happens.
fn requests_per_second(etcd: &Cluster, window: Duration) -> f64 {
    let count = || -> f64 {
        etcd.endpoints
            .split(',')
            .map(|e| {
                let member = e.trim_start_matches("http://");
                elect_lab::etcd::metrics(member)
                    .get("grpc_server_msg_received_total")
                    .copied()
                    .expect("the member's gRPC counter")
            })
            .sum()
    };
    let (before, started) = (count(), Instant::now());
    std::thread::sleep(window);
    (count() - before) / started.elapsed().as_secs_f64()
}

/// Candidates behind the next in line renew as Go's session does (a
/// keepalive every TTL/3 through one member, no term reads: 1.5 requests
/// a second at a TTL of 2 s), where the leader and the next in line ping
/// every member, each ping proven on servers that need it (13.5 a second
/// each on those): ten followers cost the servers less than those two.
/// Before followers had a cadence of their own, each cost what the
/// leader does, five times this bound. The followers still lead in turn.
#[test]
fn followers_behind_the_next_in_line_renew_at_gos_cadence() {
    let etcd = Cluster::start();
    let mut a = campaign(&etcd.endpoints, "steady", "a", "2");
    a.wait_event("elected", SOON);
    let b = campaign(&etcd.endpoints, "steady", "b", "2");
    etcd.wait_for_candidates("steady", 2);
    watchers_settled(&etcd);
    let window = Duration::from_secs(6);
    let two = requests_per_second(&etcd, window);
    let mut followers = Vec::new();
    for i in 0..10 {
        followers.push(campaign(&etcd.endpoints, "steady", &format!("f{i}"), "2"));
        etcd.wait_for_candidates("steady", 3 + i);
    }
    watchers_settled(&etcd);
    let twelve = requests_per_second(&etcd, window);
    let ten_followers = twelve - two;
    assert!(
        ten_followers < two,
        "ten followers cost {ten_followers:.1} requests/s, the leader and the next in line {two:.1}"
    );
    // The first follower leads once a and b are gone, on a proven deadline.
    for mut gone in [a, b] {
        gone.signal(Signal::SIGTERM);
        assert_eq!(gone.wait_exit(SOON), 0);
    }
    followers[0].wait_event("elected", SOON);
}
