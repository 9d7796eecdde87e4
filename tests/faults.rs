//! The fault suite: real ensembles (or Raft-vote peers), real `elect run`
//! candidates whose commands write to a fenced store, real faults. After
//! every scenario: no two tenures overlap (but for the whole-tree pause,
//! where a frozen process cannot stop itself), no stale write was
//! accepted, nothing is left behind (keys, leases, znodes, processes).
//!
//! Each scenario prints a row of the table (scenario, backend, failovers,
//! max overlap, stale writes accepted, step-down latency p50/p99) and
//! appends it to `target/tmp/fault-table.md`.

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime};

use elect_lab::fault::{FencedStore, Interval, Proxy, Traffic, check};
use elect_lab::stats::Summary;
use nix::sys::signal::Signal;
use support::elect::{Proc, elect};
use support::proc::descendants;
use support::{MemberExt, etcd, eventually, loopback_net, raft, signal_pid, zk};

const SOON: Duration = Duration::from_secs(30);
const ELECTION: &str = "/faults";

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Backend {
    Etcd,
    Zk,
    Raft,
}

impl Backend {
    fn name(self) -> &'static str {
        match self {
            Backend::Etcd => "etcd",
            Backend::Zk => "zk",
            Backend::Raft => "raft",
        }
    }

    /// The TTL candidates use: etcd's minimum for a 1 s election timeout,
    /// ten ZooKeeper ticks, a Raft election timeout.
    fn ttl(self) -> Duration {
        match self {
            Backend::Raft => Duration::from_secs(1),
            _ => Duration::from_secs(2),
        }
    }
}

/// One scenario's world: the service, the fenced store, the candidates and
/// a proxy per candidate per member (so one candidate can be cut off).
struct Rig {
    backend: Backend,
    etcd: Option<etcd::Cluster>,
    zk: Option<zk::Ensemble>,
    raft: Option<raft::Cluster>,
    store: FencedStore,
    net: String,
    candidates: BTreeMap<String, Proc>,
    proxies: BTreeMap<String, Vec<Proxy>>,
    /// Step-down latencies measured by the scenario.
    step_downs: Vec<Duration>,
}

impl Rig {
    fn new(backend: Backend) -> Rig {
        Rig::with_zk(backend, zk::Ensemble::start)
    }

    fn with_zk(backend: Backend, zk: impl FnOnce() -> zk::Ensemble) -> Rig {
        Rig {
            backend,
            etcd: (backend == Backend::Etcd).then(etcd::Cluster::start),
            zk: (backend == Backend::Zk).then(zk),
            raft: (backend == Backend::Raft).then(|| raft::Cluster::new(3, "1s")),
            store: FencedStore::start().expect("the fenced store listens"),
            net: loopback_net(),
            candidates: BTreeMap::new(),
            proxies: BTreeMap::new(),
            step_downs: Vec::new(),
        }
    }

    fn members(&self) -> Vec<String> {
        let endpoints = match self.backend {
            Backend::Etcd => &self.etcd.as_ref().unwrap().endpoints,
            Backend::Zk => &self.zk.as_ref().unwrap().endpoints,
            Backend::Raft => unreachable!("Raft-vote peers talk to each other"),
        };
        endpoints.split(',').map(str::to_owned).collect()
    }

    /// Starts candidate `id` (for Raft-vote: peer `id`, one of p0..p2).
    fn start(&mut self, id: &str) {
        let script = self.store.writer_script();
        let ttl = format!("{}s", self.backend.ttl().as_secs());
        let proc = match self.backend {
            Backend::Raft => self.raft.as_ref().unwrap().run_argv(
                id,
                &["--grace", "1s"],
                &["bash", "-c", &script],
            ),
            backend => {
                if !self.proxies.contains_key(id) {
                    let n = self.proxies.len() + 1;
                    let proxies = self
                        .members()
                        .iter()
                        .map(|m| {
                            Proxy::start(&format!("{}.{n}:0", self.net), m)
                                .expect("the proxy listens")
                        })
                        .collect();
                    self.proxies.insert(id.to_owned(), proxies);
                }
                let endpoints = self.proxies[id]
                    .iter()
                    .map(|p| p.addr.clone())
                    .collect::<Vec<_>>()
                    .join(",");
                elect(
                    id,
                    &endpoints,
                    &[
                        "--backend",
                        backend.name(),
                        "--election",
                        ELECTION,
                        "--id",
                        id,
                        "--ttl",
                        &ttl,
                        "run",
                        "--grace",
                        "1s",
                        "--",
                        "bash",
                        "-c",
                        &script,
                    ],
                )
            }
        };
        self.candidates.insert(id.to_owned(), proc);
    }

    /// The tenure in progress with the highest token, once there is one.
    fn leader(&self) -> Interval {
        let until = Instant::now() + SOON;
        loop {
            let open = self
                .store
                .intervals()
                .into_iter()
                .filter(|i| i.end.is_none());
            if let Some(leader) = open.max_by_key(|i| i.token) {
                return leader;
            }
            if Instant::now() > until {
                let logs: Vec<String> = self
                    .candidates
                    .iter()
                    .map(|(id, p)| format!("--- {id}:\n{}", p.stderr()))
                    .collect();
                panic!(
                    "no leader writing to the fenced store within {SOON:?}\n{}",
                    logs.join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Ensemble member `i`.
    fn member_mut(&mut self, i: usize) -> &mut elect_lab::Member {
        match self.backend {
            Backend::Etcd => self.etcd.as_mut().unwrap().member_mut(i),
            Backend::Zk => self.zk.as_mut().unwrap().member_mut(i),
            Backend::Raft => unreachable!("Raft-vote has no ensemble"),
        }
    }

    /// The ZooKeeper session candidate `id` logged (`0x...`).
    fn session_of(&self, id: &str) -> String {
        self.proc(id)
            .stderr()
            .split("session=")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .expect("the candidate logs its session")
            .to_owned()
    }

    /// ZooKeeper: holds the leader's tenure `old` against what the servers
    /// did with its session (`listed`: the last instant the ZooKeeper
    /// leader still listed it, if it then expired it). An expired session
    /// must find the command dead already; the margin is printed.
    fn dead_before_expiry(
        &self,
        case: &str,
        old: &Interval,
        fault: Instant,
        listed: Option<Instant>,
    ) {
        let ended = self
            .store
            .intervals()
            .into_iter()
            .find(|i| (i.token, i.start) == (old.token, old.start))
            .and_then(|i| i.end);
        match (listed, ended) {
            (Some(listed), Some(ended)) => {
                let margin = listed.checked_duration_since(ended).unwrap_or_else(|| {
                    panic!(
                        "{case}: the command died {:?} after the servers last listed the session",
                        ended - listed
                    )
                });
                eprintln!(
                    "zk {case}: the servers expired the session; the command was dead {:?} after the fault, at least {margin:?} before the expiry",
                    ended - fault
                );
            }
            (Some(listed), None) => panic!(
                "{case}: the servers expired the session ({:?} after the fault) while its command ran; its log:\n{}",
                listed - fault,
                self.proc(&old.id).stderr()
            ),
            (None, Some(ended)) => eprintln!(
                "zk {case}: the session lived; the leader stepped down {:?} after the fault (nothing proved the session alive in time)",
                ended - fault
            ),
            (None, None) => eprintln!("zk {case}: the session lived and the leader led throughout"),
        }
    }

    fn proc(&self, id: &str) -> &Proc {
        &self.candidates[id]
    }

    /// Waits until `tenure` has ended (its command is dead); returns when.
    fn ended(&self, tenure: &Interval, within: Duration) -> Instant {
        eventually("the tenure to end", within, || {
            self.store
                .intervals()
                .into_iter()
                .find(|i| i.token == tenure.token && i.start == tenure.start)
                .and_then(|i| i.end)
        })
    }

    fn pids_of(&self, id: &str) -> Vec<i32> {
        let pid = self.proc(id).pid();
        [vec![pid], descendants(pid)].concat()
    }

    fn cut_off(&self, id: &str, mode: Traffic) {
        for p in &self.proxies[id] {
            p.set(mode);
        }
    }

    /// Stops every candidate, then checks the history, the store and that
    /// nothing is left; prints and records the table row.
    fn finish(mut self, scenario: &str, overlap_allowed: bool) {
        let teardown = Instant::now();
        for (_, p) in std::mem::take(&mut self.candidates) {
            drop(p);
        }
        for p in self.proxies.values().flatten() {
            p.set(Traffic::Pass);
        }
        eventually("every command dead", SOON, || {
            self.store
                .intervals()
                .iter()
                .all(|i| i.end.is_some())
                .then_some(())
        });
        let verdict = check(&self.store.intervals(), teardown);
        let stale = self.store.stale_accepted();
        let step_downs = if self.step_downs.is_empty() {
            "-".to_owned()
        } else {
            let s = Summary::of(&self.step_downs).expect("step-downs");
            let (p50, p99) = (s.p50, s.p99);
            format!(
                "{:.0} / {:.0} ms",
                p50.as_secs_f64() * 1e3,
                p99.as_secs_f64() * 1e3
            )
        };
        let row = format!(
            "| {scenario} | {} | {} | {} | {stale} | {step_downs} |",
            self.backend.name(),
            verdict.failovers,
            if verdict.max_overlap.is_zero() {
                "none".to_owned()
            } else {
                format!("{:.1} ms", verdict.max_overlap.as_secs_f64() * 1e3)
            },
        );
        eprintln!(
            "{row}  (largest gap {:?}, {} stale writes rejected)",
            verdict.max_gap,
            self.store.rejected()
        );
        let table = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("fault-table.md");
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(table)
            .unwrap();
        std::io::Write::write_all(&mut file, format!("{row}\n").as_bytes()).unwrap();

        assert_eq!(
            stale,
            0,
            "{scenario}/{}: stale writes accepted",
            self.backend.name()
        );
        if !overlap_allowed {
            assert!(
                verdict.max_overlap.is_zero(),
                "{scenario}/{}: two tenures overlapped by {:?}: {:#?}",
                self.backend.name(),
                verdict.max_overlap,
                self.store.intervals()
            );
        }
        self.assert_nothing_left();
    }

    fn assert_nothing_left(&self) {
        match self.backend {
            Backend::Etcd => {
                let etcd = self.etcd.as_ref().unwrap();
                eventually("no keys or leases left", SOON, || {
                    (etcd.candidates(ELECTION).is_empty() && etcd.leases().is_empty()).then_some(())
                });
            }
            Backend::Zk => {
                let zk = self.zk.as_ref().unwrap();
                // A SIGKILLed candidate's znode goes with its session.
                eventually("no znodes left", SOON, || {
                    zk.children(ELECTION).is_empty().then_some(())
                });
            }
            Backend::Raft => {}
        }
    }
}

/// SIGSTOP the leader's elect, watchdog and command together, past the
/// TTL; a new leader takes over and writes; SIGCONT: the command is killed
/// at once and none of its writes is accepted. The one scenario where a tenure may
/// overlap: a frozen process cannot stop itself; fencing is what holds.
fn whole_tree_paused(backend: Backend) {
    let mut rig = Rig::new(backend);
    start_all(&mut rig);
    let old = rig.leader();
    let pids = rig.pids_of(&old.id);
    for &pid in &pids {
        signal_pid(pid, Signal::SIGSTOP);
    }
    let new = rig
        .store
        .wait_new_tenure(old.token, SOON)
        .expect("a new tenure in the fenced store");
    // The store can only reject the frozen leader's writes once it has
    // seen the successor's token.
    assert!(
        rig.store.wait_written(new.token, SOON),
        "a write with the new token"
    );
    let resumed = Instant::now();
    for &pid in &pids {
        signal_pid(pid, Signal::SIGCONT);
    }
    let ended = rig.ended(&old, Duration::from_secs(5));
    rig.step_downs
        .push(ended.saturating_duration_since(resumed));
    rig.finish("whole tree paused past TTL", true);
}

/// SIGSTOP of `elect` alone: the watchdog ends the command by the deadline
/// on its own, before anyone else leads.
fn only_elect_paused(backend: Backend) {
    let mut rig = Rig::new(backend);
    start_all(&mut rig);
    let old = rig.leader();
    let elect_pid = rig.proc(&old.id).pid();
    let paused = Instant::now();
    signal_pid(elect_pid, Signal::SIGSTOP);
    let ended = rig.ended(&old, SOON);
    rig.step_downs.push(ended - paused);
    rig.store
        .wait_new_tenure(old.token, SOON)
        .expect("a new tenure in the fenced store");
    signal_pid(elect_pid, Signal::SIGCONT);
    rig.finish("only elect paused", false);
}

/// The leader's connections to every member are blackholed past its TTL:
/// its command dies by the deadline, another candidate leads; healed, the
/// old leader follows. ZooKeeper: the command is dead before the servers
/// expire the session (from their logs), and the margin is printed.
fn leader_cut_off(backend: Backend) {
    let mut rig = Rig::new(backend);
    start_all(&mut rig);
    let old = rig.leader();
    let session = (backend == Backend::Zk).then(|| {
        let sid = rig.session_of(&old.id);
        rig.zk.as_ref().unwrap().watch_session(&sid, SOON)
    });
    let cut = Instant::now();
    rig.cut_off(&old.id, Traffic::Blackhole);
    let ended = rig.ended(&old, SOON);
    rig.step_downs.push(ended - cut);
    if let Some(session) = session {
        let listed = session.join().unwrap();
        assert!(listed.is_some(), "the ZooKeeper leader expires the session");
        rig.dead_before_expiry("leader cut off", &old, cut, listed);
    }
    let new = rig
        .store
        .wait_new_tenure(old.token, SOON)
        .expect("a new tenure in the fenced store");
    rig.cut_off(&old.id, Traffic::Pass);
    let seen = rig
        .candidates
        .get_mut(&old.id)
        .unwrap()
        .wait_leader(&new.id, SOON);
    assert_eq!(seen["is_self"], false, "the old leader follows");
    rig.finish("leader cut off by the proxy", false);
}

/// A cut-off shorter than the TTL: the leader may step down (ZooKeeper
/// does on Disconnected) but no two tenures overlap.
fn short_cut_off(backend: Backend) {
    let mut rig = Rig::new(backend);
    start_all(&mut rig);
    let old = rig.leader();
    rig.cut_off(&old.id, Traffic::Blackhole);
    std::thread::sleep(backend.ttl() / 4);
    rig.cut_off(&old.id, Traffic::Pass);
    // Slow but working: a 50 ms delay each way for a while.
    rig.cut_off(&old.id, Traffic::Delay(Duration::from_millis(50)));
    std::thread::sleep(backend.ttl());
    rig.cut_off(&old.id, Traffic::Pass);
    let _ = rig.leader();
    rig.finish("short cut-off, then delay", false);
}

/// The reply to a candidate's create (ZooKeeper) or campaign txn (etcd)
/// is lost: the connection is cut right after the request is forwarded.
/// The candidate finds its own znode or key again; there is exactly one.
fn lost_create_reply(backend: Backend) {
    let mut rig = Rig::new(backend);
    rig.start("a");
    let _ = rig.leader();
    // b's proxies are made by start(); arm them before b creates anything.
    rig.proxies.insert(
        "b".into(),
        rig.members()
            .iter()
            .map(|m| Proxy::start(&format!("{}.9:0", rig.net), m).expect("the proxy listens"))
            .collect(),
    );
    for p in &rig.proxies["b"] {
        match backend {
            Backend::Zk => p.cut_after_next_zk_create(),
            _ => p.cut_after_next_etcd_key_under(&format!("{ELECTION}/")),
        }
    }
    rig.start("b");
    eventually("b's create cut", SOON, || {
        (rig.proxies["b"].iter().map(Proxy::cuts).sum::<usize>() >= 1).then_some(())
    });
    let registered = || -> Vec<String> {
        match backend {
            Backend::Zk => rig.zk.as_ref().unwrap().children(ELECTION),
            _ => rig
                .etcd
                .as_ref()
                .unwrap()
                .candidates(ELECTION)
                .into_iter()
                .map(|(key, value)| format!("{key}={value}"))
                .collect(),
        }
    };
    let first = eventually("two candidates registered", SOON, || {
        let c = registered();
        (c.len() >= 2).then_some(c)
    });
    std::thread::sleep(Duration::from_secs(3));
    let again = registered();
    assert_eq!(
        again.len(),
        2,
        "exactly one entry each: {first:?} then {again:?}"
    );
    // b takes over on a's resignation with its one znode.
    drop(rig.candidates.remove("a"));
    eventually(
        "b leading with the entry it could not see created",
        SOON,
        || {
            rig.store
                .intervals()
                .iter()
                .any(|i| i.id == "b")
                .then_some(())
        },
    );
    rig.finish("lost create/txn reply", false);
}

/// The ensemble member the leader's client is connected to (ZooKeeper) or
/// etcd's own Raft leader is killed. ZooKeeper: the leader rides it out,
/// the same tenure before and after, unless the member killed was the
/// ZooKeeper leader and the ensemble elected the next one too late: with
/// no leader, no member revalidates the session, and past its deadline
/// the leader must step down (on a busy machine, ZooKeeper's election has
/// taken 2.5 s). A step-down is then allowed only before the client could
/// have revalidated: ZooKeeper's return plus two connection timeouts; or,
/// where elect's log says when the client reconnected, the time the
/// session's lease needs after a reconnection to prove the session alive
/// afresh (see `zk::lease`).
fn member_killed(backend: Backend) {
    let mut rig = Rig::new(backend);
    start_all(&mut rig);
    let old = rig.leader();
    let killed = Instant::now();
    let killed_wall = SystemTime::now();
    // ZooKeeper: when a member leads the ensemble again (at once if the
    // member killed only followed).
    let mut zk_back = None;
    match backend {
        Backend::Zk => {
            let session = rig.session_of(&old.id);
            let zk = rig.zk.as_mut().unwrap();
            let member = zk.member_serving(&session).expect("a member serves it");
            let led = zk.leads(member);
            zk.kill(member);
            // Back once the members left serve again: a new leader, and
            // its follower synced to it (a leader elected is not yet a
            // server that accepts a session: in CI the client was refused
            // for 2 s after the election, and its step-down was counted
            // against that election).
            zk_back = Some(if led {
                eventually("ZooKeeper serving again", SOON, || {
                    let left: Vec<usize> = (0..3).filter(|&i| i != member).collect();
                    (left.iter().any(|&i| zk.leads(i))
                        && left
                            .iter()
                            .all(|&i| elect_lab::zk::healthy(&zk.member(i).client)))
                    .then(Instant::now)
                })
            } else {
                killed
            });
        }
        Backend::Etcd => {
            let etcd = rig.etcd.as_mut().unwrap();
            let member = eventually("etcd's Raft leader", SOON, || etcd.leader_member());
            etcd.kill(member);
        }
        Backend::Raft => unreachable!(),
    }
    // Two TTLs from the kill: a leader that lost its session or lease
    // would show by now.
    std::thread::sleep((backend.ttl() * 2).saturating_sub(killed.elapsed()));
    let now = rig.leader();
    let same = (now.token, now.start) == (old.token, old.start);
    match (backend, zk_back) {
        (_, _) if same => {}
        (Backend::Zk, Some(back)) => {
            let ended = rig.ended(&old, SOON);
            let log = rig.proc(&old.id).stderr();
            // The client gives a silent member up after a connection
            // timeout (T/5); one more attempt finds the one back. But it
            // waits between its rounds of the members, 300 ms and doubling
            // (zookeeper-client 0.11), so an ensemble back just after a
            // round began is tried at the next (in CI: back 595 ms after
            // the kill, reconnected at 1.64 s). Once reconnected, the
            // lease proves the session alive afresh only with a renewal
            // answered a third of the session (Q) after the reconnection
            // and the next one answered: Q, two renewals (T/20 each), and
            // a connection timeout for the answers on a busy machine.
            let reconnected = reconnected_after(&log, killed_wall).map(|after| killed + after);
            let ttl = backend.ttl();
            let could_revalidate = match reconnected {
                Some(at) => at + ttl / 3 + ttl / 10 + ttl / 5,
                None => back + ttl * 2 / 5,
            };
            assert!(
                ended < could_revalidate,
                "the leader stepped down {:?} after the kill, although ZooKeeper served again {:?} \
                 after it and the client reconnected {:?} after it: {:#?}\nits log:\n{}",
                ended - killed,
                back - killed,
                reconnected.map(|r| r - killed),
                rig.store.intervals(),
                log
            );
            eprintln!(
                "zk member killed: ZooKeeper was without a leader for {:?}; the leader stepped down {:?} after the kill",
                back - killed,
                ended - killed
            );
            rig.step_downs.push(ended - killed);
        }
        // etcd's leader may still lose its lease to etcd's own election
        // (issue 22 is open for it): record the step-down.
        _ => rig.step_downs.push(rig.ended(&old, SOON) - killed),
    }
    rig.finish("member the client uses killed", false);
}

/// How long after `since` elect's log (timestamps in UTC, RFC 3339) first
/// says its ZooKeeper client reconnected within the session.
fn reconnected_after(log: &str, since: SystemTime) -> Option<Duration> {
    log.lines()
        .filter(|line| line.contains("reconnected within the session"))
        .filter_map(|line| humantime::parse_rfc3339(line.split_whitespace().next()?).ok())
        .find_map(|at| at.duration_since(since).ok())
}

/// ZooKeeper: the member serving the leader's session is cut off from the
/// other members, not from its clients, for two session timeouts. As a
/// follower it keeps our connection but can no longer forward our syncs
/// or its note of our touches to the ZooKeeper leader; as the leader it
/// loses its quorum after syncLimit and drops its clients. Whether the
/// client revalidates the session elsewhere in time or the servers expire
/// it, the command is dead before any expiry (the margin is printed), and
/// no two tenures overlap. Cut from the leader, a follower costs nothing.
fn member_cut_from_its_peers(backend: Backend) {
    assert_eq!(backend, Backend::Zk);
    if !support::containers_only("ZooKeeper member cut off from its peers") {
        return;
    }
    // A ZooKeeper leader cut from its quorum answers syncs for up to
    // (syncLimit + 1) ticks after it is replaced (ZOOKEEPER-1675); the
    // disconnection rule needs that within a third of the session (see
    // `zk::timing`, and the deadline model's leader change). The lab's
    // syncLimit of 10 (2.2 s) is beyond a 2 s session's 667 ms, and elect
    // warns of it: here, where the leader may be the member cut, the
    // ensemble meets the rule (2 ticks: 600 ms).
    let mut rig = Rig::with_zk(backend, || zk::Ensemble::start_with_sync_limit(2));
    start_all(&mut rig);
    let old = rig.leader();
    let sid = rig.session_of(&old.id);
    let zk = rig.zk.as_ref().unwrap();
    let member = zk.member_serving(&sid).expect("a member serves it");
    let role = if zk.leads(member) {
        "leader"
    } else {
        "follower"
    };
    let session = zk.watch_session(&sid, backend.ttl() * 5);
    let cut = Instant::now();
    zk.isolate(member);
    std::thread::sleep(backend.ttl() * 2);
    zk.rejoin(member);
    let listed = session.join().unwrap();
    rig.dead_before_expiry(
        &format!("member serving the leader ({role}) cut from its peers"),
        &old,
        cut,
        listed,
    );
    if role == "follower" {
        // The sync stuck behind the cut follower makes the client give
        // the connection up after its connection timeout (T/5), and the
        // revalidation elsewhere touches the ZooKeeper leader: well
        // inside the deadline, which is about 0.57 T ahead.
        let now = rig.leader();
        assert_eq!(
            (now.token, now.start),
            (old.token, old.start),
            "the leader rode out the cut of its follower: {}",
            rig.proc(&old.id).stderr()
        );
    }
    let _ = rig.leader();
    rig.finish("member serving the leader cut from its peers", false);
}

/// Two of three members killed (quorum lost) past the TTL, then started
/// again on their data. Raft-vote: the two peers that do not lead.
fn quorum_lost(backend: Backend) {
    let mut rig = Rig::new(backend);
    start_all(&mut rig);
    let old = rig.leader();
    let session = (backend == Backend::Zk).then(|| {
        let sid = rig.session_of(&old.id);
        rig.zk.as_ref().unwrap().watch_session(&sid, SOON)
    });
    let lost = Instant::now();
    let stopped: Vec<String> = match backend {
        Backend::Etcd | Backend::Zk => {
            for i in 0..2 {
                rig.member_mut(i).kill();
            }
            Vec::new()
        }
        Backend::Raft => {
            // The leader alone has no quorum and must step down (CheckQuorum).
            let followers: Vec<String> = ["p0", "p1", "p2"]
                .into_iter()
                .filter(|id| *id != old.id)
                .map(str::to_owned)
                .collect();
            for id in &followers {
                let mut peer = rig.candidates.remove(id).unwrap();
                peer.signal(Signal::SIGKILL);
                peer.wait_exit(SOON);
            }
            followers
        }
    };
    let ended = rig.ended(&old, SOON);
    rig.step_downs.push(ended - lost);
    std::thread::sleep(backend.ttl());
    assert!(
        rig.store.intervals().iter().all(|i| i.end.is_some()),
        "nobody can lead without a quorum: {:#?}",
        rig.store.intervals()
    );
    match backend {
        Backend::Etcd | Backend::Zk => {
            for i in 0..2 {
                rig.member_mut(i).restart();
            }
        }
        Backend::Raft => {
            for id in &stopped {
                rig.start(id);
            }
        }
    }
    // The old leader may lead again (its session or lease survived).
    eventually("a leader after recovery", SOON, || {
        rig.store
            .intervals()
            .iter()
            .any(|i| i.end.is_none())
            .then_some(())
    });
    if let Some(session) = session {
        // Without a quorum nothing expires, and the new ZooKeeper leader
        // gives every session a whole timeout again.
        let listed = session.join().unwrap();
        rig.dead_before_expiry("quorum lost", &old, lost, listed);
    }
    rig.finish("quorum lost and recovered", false);
}

/// Candidates join and leave at random (SIGTERM or SIGKILL) for a minute, the
/// leader on purpose in one round of four:
/// 10 for etcd and ZooKeeper, the 3 peers for Raft-vote.
fn churn(backend: Backend) {
    let mut rig = Rig::new(backend);
    let ids: Vec<String> = match backend {
        Backend::Raft => (0..3).map(|i| format!("p{i}")).collect(),
        _ => (0..10).map(|i| format!("c{i}")).collect(),
    };
    for id in &ids {
        rig.start(id);
    }
    let mut seed: u64 = std::process::id() as u64 | 1;
    let mut random = move |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as usize
    };
    let until = Instant::now() + Duration::from_secs(60);
    while Instant::now() < until {
        // One round in four goes for the leader, so that every run fails
        // over several times; the others pick anyone, leader included.
        let current = rig
            .store
            .intervals()
            .into_iter()
            .find(|i| i.end.is_none())
            .map(|i| i.id);
        let id = match &current {
            Some(leader) if random(4) == 0 => leader.clone(),
            _ => ids[random(ids.len())].clone(),
        };
        let id = &id;
        if let Some(mut p) = rig.candidates.remove(id) {
            let leading = current.as_ref() == Some(id);
            let sig = if random(2) == 0 {
                Signal::SIGTERM
            } else {
                Signal::SIGKILL
            };
            let at = Instant::now();
            p.signal(sig);
            p.wait_exit(SOON);
            if leading {
                let tenure = rig
                    .store
                    .intervals()
                    .into_iter()
                    .filter(|i| &i.id == id)
                    .max_by_key(|i| i.start)
                    .unwrap();
                rig.step_downs
                    .push(rig.ended(&tenure, SOON).saturating_duration_since(at));
            }
        } else {
            rig.start(id);
        }
        std::thread::sleep(Duration::from_millis(200 + random(600) as u64));
    }
    rig.finish("churn", false);
}

fn start_all(rig: &mut Rig) {
    let ids: &[&str] = match rig.backend {
        Backend::Raft => &["p0", "p1", "p2"],
        _ => &["a", "b", "c"],
    };
    for id in ids {
        rig.start(id);
    }
}

macro_rules! scenario {
    ($name:ident, $f:expr, $backend:expr) => {
        #[test]
        fn $name() {
            $f($backend);
        }
    };
}

scenario!(etcd_whole_tree_paused, whole_tree_paused, Backend::Etcd);
scenario!(zk_whole_tree_paused, whole_tree_paused, Backend::Zk);
scenario!(raft_whole_tree_paused, whole_tree_paused, Backend::Raft);
scenario!(etcd_only_elect_paused, only_elect_paused, Backend::Etcd);
scenario!(zk_only_elect_paused, only_elect_paused, Backend::Zk);
scenario!(raft_only_elect_paused, only_elect_paused, Backend::Raft);
scenario!(etcd_leader_cut_off, leader_cut_off, Backend::Etcd);
scenario!(zk_leader_cut_off, leader_cut_off, Backend::Zk);
scenario!(etcd_short_cut_off, short_cut_off, Backend::Etcd);
scenario!(zk_short_cut_off, short_cut_off, Backend::Zk);
scenario!(etcd_member_killed, member_killed, Backend::Etcd);
scenario!(zk_member_killed, member_killed, Backend::Zk);
scenario!(
    zk_member_cut_from_its_peers,
    member_cut_from_its_peers,
    Backend::Zk
);
scenario!(etcd_quorum_lost, quorum_lost, Backend::Etcd);
scenario!(zk_quorum_lost, quorum_lost, Backend::Zk);
scenario!(raft_quorum_lost, quorum_lost, Backend::Raft);
scenario!(etcd_churn, churn, Backend::Etcd);
scenario!(zk_churn, churn, Backend::Zk);
scenario!(raft_churn, churn, Backend::Raft);

scenario!(etcd_lost_txn_reply, lost_create_reply, Backend::Etcd);
scenario!(zk_lost_create_reply, lost_create_reply, Backend::Zk);
