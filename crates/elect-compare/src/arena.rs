//! One compared election in progress: its candidates as real processes,
//! the instants they said `elected`, and for Raft-vote the fixed set of
//! peers (each restarted on its own data after a fault).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow, bail};
use elect_lab::fault::{FencedStore, Proxy, Traffic};
use elect_lab::process::{Line, Watched, descendants};
use elect_lab::{interrupt, loopback_net};

use crate::contender::{
    Contender, LED_WITHOUT_READ_METRIC, RaftPeers, Role, Spawned, WAKEUPS_METRIC,
};
use crate::probe::Probe;
use elect::Backend;

/// Long enough for anything a healthy ensemble does; a wait past it is a
/// failed run, not a slow sample.
pub const SOON: Duration = Duration::from_secs(60);

/// The cluster name every Raft-vote peer of a compared election shares.
const RAFT_CLUSTER: &str = "elect-compare";

/// How candidates reach the ensemble.
pub enum Reach {
    /// Straight to the members.
    Direct,
    /// Through fault proxies of their own, so one can be cut off.
    Proxied,
}

/// A candidate slot.
pub struct Slot {
    pub id: String,
    pub proc: Watched,
    /// The proxies between this candidate and the ensemble (or the other
    /// peers), when proxied.
    pub proxies: Vec<Proxy>,
    /// The endpoints this candidate was given.
    pub endpoints: String,
    /// Where an elect candidate serves `/metrics`.
    metrics: Option<String>,
    /// What its campaign counted when last asked (a killed candidate can
    /// no longer be).
    counts: CampaignCounts,
    /// Every line read so far.
    lines: Vec<Line>,
    /// How many of `lines` were looked at for `elected`.
    checked: usize,
}

impl Slot {
    fn new(id: String, spawned: Spawned, proxies: Vec<Proxy>, endpoints: String) -> Slot {
        Slot {
            id,
            proc: spawned.proc,
            proxies,
            endpoints,
            metrics: spawned.metrics,
            counts: CampaignCounts::default(),
            lines: Vec::new(),
            checked: 0,
        }
    }

    fn pull(&mut self) {
        self.lines.extend(self.proc.drain());
    }

    /// Asks the candidate's metrics what its campaign counted so far
    /// (keeping the last answer when it cannot say).
    fn ask_counts(&mut self) -> CampaignCounts {
        if let Some(addr) = &self.metrics {
            let (status, text) = elect_lab::http_get(addr, "/metrics", Duration::from_secs(1));
            if status == 200 {
                let sums = elect_lab::sum_prometheus(&text);
                let count = |metric| sums.get(metric).map_or(0, |n| *n as usize);
                self.counts = CampaignCounts {
                    wakeups: count(WAKEUPS_METRIC),
                    led_without_read: count(LED_WITHOUT_READ_METRIC),
                };
            }
        }
        self.counts
    }

    /// Whom it last said leads: itself after `elected`, the leader a
    /// `leader` or `demoted` line names (a thawed leader that hears its
    /// successor first goes straight from leading to following, and says
    /// no more while that leader leads); `None` while it knows of none.
    fn view(&self) -> Option<String> {
        current_view(&self.lines)
    }
}

/// Whom `lines` (a candidate's) last said leads (see `Slot::view`). Only
/// the last event counts: under load Raft peers may elect several leaders
/// in a row, and a peer that once followed one may since follow another.
fn current_view(lines: &[Line]) -> Option<String> {
    let last = lines.iter().rev().find_map(Line::json)?;
    match last["event"].as_str()? {
        "elected" | "leader" | "demoted" => last["leader"].as_str().map(str::to_owned),
        _ => None,
    }
}

/// What elect candidates' campaigns counted, from their metrics.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CampaignCounts {
    /// Wake-ups by a change of the predecessor.
    pub wakeups: usize,
    /// Terms begun with no read after the predecessor's end.
    pub led_without_read: usize,
}

impl std::ops::Add for CampaignCounts {
    type Output = CampaignCounts;
    fn add(self, other: CampaignCounts) -> CampaignCounts {
        CampaignCounts {
            wakeups: self.wakeups + other.wakeups,
            led_without_read: self.led_without_read + other.led_without_read,
        }
    }
}

impl std::ops::Sub for CampaignCounts {
    type Output = CampaignCounts;
    fn sub(self, other: CampaignCounts) -> CampaignCounts {
        CampaignCounts {
            wakeups: self.wakeups.saturating_sub(other.wakeups),
            led_without_read: self.led_without_read.saturating_sub(other.led_without_read),
        }
    }
}

/// What a stretch of time cost the election, from the candidates' lines.
pub struct Cost {
    /// Tenures that ended: the larger of the losses the candidates said
    /// and the elections they said (an implementation that says nothing
    /// when it loses still shows the successor's election).
    pub losses: usize,
    /// Time without a known leader: from a loss to the next election, or
    /// (elect) the longest any waiting candidate reported no current leader.
    pub leaderless: Duration,
    /// Who leads at the end, if anyone is known to.
    pub leader: Option<usize>,
}

/// The health scenario's check interval.
pub const HEALTH_INTERVAL: &str = "200ms";

/// A running election.
pub struct Arena<'a> {
    pub contender: &'a Contender,
    pub election: String,
    /// etcd or ZooKeeper members (`host:port,...`); for Raft, unused.
    endpoints: String,
    probe: Option<&'a Probe>,
    pub slots: Vec<Option<Slot>>,
    next_id: usize,
    /// The fenced store the leaders' commands write to (scenarios that run
    /// a command).
    pub store: Option<FencedStore>,
    raft: Option<RaftPeers>,
    /// Raft proxies: `matrix[i][j]` carries peer i's traffic to peer j.
    raft_matrix: Vec<Vec<Option<Proxy>>>,
    reach: Reach,
    /// Rotate each candidate's endpoint list so candidate i lists member
    /// i first (member-kill).
    rotate: bool,
    /// What the campaigns of candidates that have exited counted.
    retired: CampaignCounts,
    /// The health scenario's: where each candidate's marker file makes
    /// its health check fail (`<dir>/<id>`).
    pub health: Option<PathBuf>,
}

impl<'a> Arena<'a> {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        contender: &'a Contender,
        election: String,
        endpoints: &str,
        probe: Option<&'a Probe>,
        raft_peers: usize,
        store: bool,
        reach: Reach,
        rotate: bool,
    ) -> anyhow::Result<Arena<'a>> {
        let store = store
            .then(FencedStore::start)
            .transpose()
            .context("starting the fenced store")?;
        let mut arena = Arena {
            contender,
            election,
            endpoints: endpoints.to_owned(),
            probe,
            slots: Vec::new(),
            next_id: 0,
            store,
            raft: None,
            raft_matrix: Vec::new(),
            reach,
            rotate,
            retired: CampaignCounts::default(),
            health: None,
        };
        if contender.backend == Backend::Raft {
            arena.raft = Some(arena.raft_peers(raft_peers)?);
        }
        Ok(arena)
    }

    fn raft_peers(&mut self, n: usize) -> anyhow::Result<RaftPeers> {
        let net = loopback_net();
        let ids: Vec<String> = (0..n).map(|i| format!("p{i}")).collect();
        let real: Vec<String> = (0..n).map(|i| format!("{net}.{}:7000", i + 1)).collect();
        let dir =
            std::env::temp_dir().join(format!("elect-compare-raft-{net}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut endpoints = Vec::new();
        for i in 0..n {
            let mut row = Vec::new();
            let mut list = Vec::new();
            for j in 0..n {
                if i == j || matches!(self.reach, Reach::Direct) {
                    row.push(None);
                    list.push(format!("{}={}", ids[j], real[j]));
                } else {
                    // Peer i's own way to peer j, on an address of i's.
                    let proxy = Proxy::start(&format!("{net}.{}:0", 101 + i), &real[j])?;
                    list.push(format!("{}={}", ids[j], proxy.addr));
                    row.push(Some(proxy));
                }
            }
            self.raft_matrix.push(row);
            endpoints.push(list.join(","));
        }
        Ok(RaftPeers {
            ids,
            endpoints,
            addresses: real,
            dir,
        })
    }

    /// Raft peer count, or `None` for etcd and ZooKeeper.
    pub fn peers(&self) -> Option<usize> {
        self.raft.as_ref().map(|r| r.ids.len())
    }

    /// Adds a new candidate (etcd and ZooKeeper) or starts the next peer
    /// that is not running (Raft). Its slot index.
    pub fn spawn(&mut self) -> anyhow::Result<usize> {
        if let Some(raft) = &self.raft {
            let i = self
                .slots
                .iter()
                .position(Option::is_none)
                .or_else(|| (self.slots.len() < raft.ids.len()).then_some(self.slots.len()))
                .ok_or_else(|| anyhow!("every Raft peer already runs"))?;
            return self.start_peer(i);
        }
        let id = format!("c{}", self.next_id);
        self.next_id += 1;
        let members: Vec<&str> = self.endpoints.split(',').collect();
        let mut order: Vec<&str> = members.clone();
        if self.rotate {
            order.rotate_left((self.next_id - 1) % members.len());
        }
        let (endpoints, proxies) = match self.reach {
            Reach::Direct => (order.join(","), Vec::new()),
            Reach::Proxied => {
                let host = format!("{}.1", loopback_net());
                let (proxies, list) = Proxy::in_front_of(&host, &order.join(","))?;
                (list, proxies)
            }
        };
        let script = self.store.as_ref().map(FencedStore::writer_script);
        let role = Role::with(script.as_deref());
        let spawned = self.contender.spawn(
            &self.election,
            &id,
            &endpoints,
            None,
            role,
            &self.health_flags(&id),
        )?;
        self.slots
            .push(Some(Slot::new(id, spawned, proxies, endpoints)));
        Ok(self.slots.len() - 1)
    }

    fn start_peer(&mut self, i: usize) -> anyhow::Result<usize> {
        let raft = self.raft.as_ref().expect("raft");
        let id = raft.ids[i].clone();
        let endpoints = raft.endpoints[i].clone();
        let dir: PathBuf = raft.dir.join(&id);
        let script = self.store.as_ref().map(FencedStore::writer_script);
        let role = Role::with(script.as_deref());
        let spawned = self.contender.spawn(
            RAFT_CLUSTER,
            &id,
            &endpoints,
            Some(&dir),
            role,
            &self.health_flags(&id),
        )?;
        let slot = Slot::new(id, spawned, Vec::new(), endpoints);
        if i < self.slots.len() {
            self.slots[i] = Some(slot);
        } else {
            self.slots.push(Some(slot));
        }
        Ok(i)
    }

    /// The health check of candidate `id`, in the health scenario: every
    /// 200 ms, failing while its marker exists; unhealthy at the first
    /// failure, healthy again after passing for a second.
    fn health_flags(&self, id: &str) -> Vec<String> {
        let Some(dir) = &self.health else {
            return Vec::new();
        };
        let check = format!("test ! -e '{}'", dir.join(id).display());
        [
            "--health-cmd",
            &check,
            "--health-interval",
            HEALTH_INTERVAL,
            "--health-failures",
            "1",
            "--failback-delay",
            "1s",
        ]
        .map(str::to_owned)
        .into()
    }

    /// The marker that makes candidate `i`'s check fail, in the health
    /// scenario.
    pub fn health_marker(&self, i: usize) -> Option<PathBuf> {
        let slot = self.slots.get(i)?.as_ref()?;
        Some(self.health.as_ref()?.join(&slot.id))
    }

    /// The candidates' ids in line order, the leader first, as `elect
    /// candidates` reads them.
    pub fn line(&self) -> anyhow::Result<Vec<String>> {
        let out = std::process::Command::new(&self.contender.bin)
            .args(self.steering_flags("candidates"))
            .args(["--format", "json"])
            .output()
            .context("running elect candidates")?;
        let line: serde_json::Value = serde_json::from_slice(&out.stdout).with_context(|| {
            format!(
                "elect candidates said: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        })?;
        Ok(line["candidates"]
            .as_array()
            .context("no candidates listed")?
            .iter()
            .filter_map(|c| c["id"].as_str().map(str::to_owned))
            .collect())
    }

    /// Starts `elect switchover --to id`; the caller waits for it.
    pub fn switchover(&self, id: &str) -> anyhow::Result<std::process::Child> {
        std::process::Command::new(&self.contender.bin)
            .args(self.steering_flags("switchover"))
            .args(["--to", id, "--timeout", "5s"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .context("running elect switchover")
    }

    /// `command` with this election's backend, endpoints and name.
    fn steering_flags(&self, command: &str) -> Vec<String> {
        let (election, endpoints) = match &self.raft {
            Some(raft) => (RAFT_CLUSTER.to_owned(), raft.endpoints[0].clone()),
            None => (self.election.clone(), self.endpoints.clone()),
        };
        [
            command,
            "--backend",
            self.contender.backend.name(),
            "--endpoints",
            &endpoints,
            "--election",
            &election,
        ]
        .map(str::to_owned)
        .to_vec()
    }

    /// The slot of the candidate called `id`.
    pub fn slot_of(&self, id: &str) -> Option<usize> {
        self.slots
            .iter()
            .position(|s| s.as_ref().is_some_and(|s| s.id == id))
    }

    /// When candidate `i` last said it lost leadership at or after
    /// `since`, if it did.
    /// When candidate `i` (elect's) first said, at or after `since`, that
    /// its health check fails: the end of its failed check.
    pub fn said_unhealthy_after(&mut self, i: usize, since: Instant) -> Option<Instant> {
        let slot = self.slots[i].as_mut()?;
        slot.pull();
        slot.lines
            .iter()
            .filter(|l| l.at >= since)
            .find(|l| {
                l.json()
                    .is_some_and(|v| v["event"] == "health" && v["healthy"] == false)
            })
            .map(|l| l.at)
    }

    pub fn said_demoted_after(&mut self, i: usize, since: Instant) -> Option<Instant> {
        let slot = self.slots[i].as_mut()?;
        slot.pull();
        slot.lines
            .iter()
            .rev()
            .filter(|l| l.at >= since && self.contender.lost(l, &slot.id))
            .map(|l| l.at)
            .next()
    }

    /// The live slots' indices.
    pub fn live(&self) -> Vec<usize> {
        (0..self.slots.len())
            .filter(|&i| self.slots[i].is_some())
            .collect()
    }

    /// The next candidate (other than `skip`) to say `elected`: its slot,
    /// the instant, and its fencing token where reported. Lines before
    /// that are read and dropped. Of several read in one pass, the latest
    /// (highest token): under load a Raft peer may win a term and lose it
    /// before the next pass, and a leader already gone is no successor.
    pub fn wait_elected(
        &mut self,
        skip: Option<usize>,
        within: Duration,
    ) -> anyhow::Result<(usize, Instant, Option<u64>)> {
        let until = Instant::now() + within;
        loop {
            let mut latest: Option<(usize, Instant, Option<u64>)> = None;
            for (i, slot) in self.slots.iter_mut().enumerate() {
                let Some(slot) = slot else { continue };
                slot.pull();
                for line in &slot.lines[slot.checked..] {
                    if Some(i) != skip && self.contender.elected(line, &slot.id) {
                        let seen = (i, line.at, self.contender.token(line));
                        if latest.is_none_or(|(_, at, token)| (seen.2, seen.1) > (token, at)) {
                            latest = Some(seen);
                        }
                    }
                }
                slot.checked = slot.lines.len();
            }
            if let Some(elected) = latest {
                // A leader wakes no more; it may be killed next, after
                // which it cannot be asked.
                if let Some(slot) = self.slots[elected.0].as_mut() {
                    slot.ask_counts();
                }
                return Ok(elected);
            }
            if interrupt::requested() {
                bail!("interrupted");
            }
            if Instant::now() >= until {
                bail!(
                    "no candidate of {} on {} said elected within {within:?}{}",
                    self.contender.imp.name(),
                    self.contender.backend.name(),
                    self.stderr_tail()
                );
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// Waits until `n` candidates are queued: the ensemble holds their keys
    /// or znodes. Raft peers have no queue: it returns at once.
    pub fn wait_queued(&mut self, n: usize) -> anyhow::Result<()> {
        if self.raft.is_some() {
            return Ok(());
        }
        let probe = self.probe.expect("a probe for etcd and ZooKeeper");
        let election = self.election.clone();
        elect_lab::poll(SOON, || (probe.queued(&election) == Some(n)).then_some(())).ok_or_else(
            || {
                anyhow!(
                    "{n} candidates were not queued in {election} within {SOON:?} (saw {:?}){}",
                    probe.queued(&election),
                    self.stderr_tail()
                )
            },
        )
    }

    /// For Raft, waits until every live peer names one leader, which says
    /// it leads, and returns it: `leader` unless leadership moved on since
    /// (under load a new leader may lose its term at once). Every line read
    /// is marked as looked at, so a later wait sees only what follows.
    /// etcd and ZooKeeper: `leader`.
    pub fn wait_agreed(&mut self, leader: usize) -> anyhow::Result<usize> {
        if self.raft.is_none() {
            return Ok(leader);
        }
        let agreed = elect_lab::poll(SOON, || self.agreed_leader());
        if interrupt::requested() {
            bail!("interrupted");
        }
        let Some(agreed) = agreed else {
            let views: Vec<String> = self
                .slots
                .iter()
                .flatten()
                .map(|s| format!("{} follows {:?}", s.id, s.view()))
                .collect();
            bail!(
                "the Raft peers did not agree on a leader within {SOON:?} ({}){}",
                views.join(", "),
                self.stderr_tail()
            );
        };
        for slot in self.slots.iter_mut().flatten() {
            slot.checked = slot.lines.len();
        }
        Ok(agreed)
    }

    /// The slot of the leader every live peer names now, if they agree
    /// (the leader naming itself, after `elected`).
    fn agreed_leader(&mut self) -> Option<usize> {
        for slot in self.slots.iter_mut().flatten() {
            slot.pull();
        }
        let mut live = self.slots.iter().flatten();
        let first = live.next()?.view()?;
        if !live.all(|s| s.view().as_ref() == Some(&first)) {
            return None;
        }
        self.slots
            .iter()
            .position(|s| s.as_ref().is_some_and(|s| s.id == first))
    }

    /// The slot that comes next after `leader` if it goes: for Raft the
    /// first in the order of succession the leader's heartbeats carry (as
    /// it answers a status query), for etcd and ZooKeeper the next in the
    /// queue, which is the order the candidates were spawned in.
    pub fn first_in_line(&self, leader: usize) -> anyhow::Result<usize> {
        let Some(raft) = &self.raft else {
            return self
                .live()
                .into_iter()
                .find(|&i| i > leader)
                .context("no candidate queued behind the leader");
        };
        let peer = (raft.ids[leader].as_str(), raft.addresses[leader].as_str());
        let (id, address) = (peer.0.to_owned(), peer.1.to_owned());
        let status = elect_lab::bridge::block_on(async move {
            tokio::time::timeout(
                SOON,
                elect::backend::raft::transport::status_of(
                    RAFT_CLUSTER,
                    "compare",
                    (&id, &address),
                    None,
                ),
            )
            .await
        })?
        .context("the leader did not answer a status query")?
        .context("asking the leader for its order of succession")?;
        let first = status
            .successors
            .first()
            .with_context(|| format!("{} has published no order of succession", peer.0))?;
        raft.ids
            .iter()
            .position(|id| id == first)
            .with_context(|| format!("{first} is not a peer"))
    }

    /// What the time since `since` cost, `leader` leading at its start.
    /// Every line read is marked as looked at.
    pub fn cost_since(&mut self, since: Instant, leader: usize) -> Cost {
        let mut events: Vec<(usize, Line)> = Vec::new();
        for (i, slot) in self.slots.iter_mut().enumerate() {
            let Some(slot) = slot else { continue };
            slot.pull();
            slot.checked = slot.lines.len();
            events.extend(
                slot.lines
                    .iter()
                    .filter(|l| l.at >= since)
                    .map(|l| (i, l.clone())),
            );
        }
        events.sort_by_key(|(_, l)| l.at);
        let now = Instant::now();
        let (mut elected, mut lost) = (0, 0);
        let mut current = Some(leader);
        let mut gap_from: Option<Instant> = None;
        let mut leaderless = Duration::ZERO;
        // elect's waiting candidates: since when each has reported no
        // current leader, and the total per candidate.
        let mut unknown_from: std::collections::BTreeMap<usize, Instant> = Default::default();
        let mut unknown_total: std::collections::BTreeMap<usize, Duration> = Default::default();
        for (i, line) in &events {
            let id = self.slots[*i].as_ref().map_or("", |s| s.id.as_str());
            if self.contender.lost(line, id) {
                lost += 1;
                if current == Some(*i) {
                    current = None;
                    gap_from = Some(line.at);
                }
            } else if self.contender.elected(line, id) {
                elected += 1;
                if let Some(from) = gap_from.take() {
                    leaderless += line.at - from;
                }
                current = Some(*i);
            }
            if let Some(event) = line
                .json()
                .and_then(|v| v["event"].as_str().map(str::to_owned))
            {
                match event.as_str() {
                    "unknown" | "none" if Some(*i) != current => {
                        unknown_from.entry(*i).or_insert(line.at);
                    }
                    _ => {
                        if let Some(from) = unknown_from.remove(i) {
                            *unknown_total.entry(*i).or_default() += line.at - from;
                        }
                    }
                }
            }
        }
        if let Some(from) = gap_from {
            leaderless += now - from;
        }
        for (i, from) in unknown_from {
            *unknown_total.entry(i).or_default() += now - from;
        }
        let observed = unknown_total.values().max().copied().unwrap_or_default();
        Cost {
            losses: elected.max(lost),
            leaderless: leaderless.max(observed),
            leader: current,
        }
    }

    /// Frees the slots of candidates (etcd and ZooKeeper) that exited on
    /// their own; what each said last, for the notes.
    pub fn reap_exited(&mut self) -> Vec<String> {
        if self.raft.is_some() {
            return Vec::new();
        }
        let mut gone = Vec::new();
        for slot in &mut self.slots {
            let Some(s) = slot else { continue };
            if let Some(code) = s.proc.try_exit() {
                s.proc.wait_stderr_read(Duration::from_secs(1));
                let last = s
                    .proc
                    .stderr()
                    .lines()
                    .last()
                    .unwrap_or_default()
                    .to_owned();
                gone.push(format!("{} exited ({code}): {last}", s.proc.name));
                self.retired = self.retired + s.counts;
                *slot = None;
            }
        }
        gone
    }

    /// Signals slot `i`'s process.
    pub fn signal(&self, i: usize, sig: nix::sys::signal::Signal) {
        if let Some(s) = &self.slots[i] {
            s.proc.signal(sig);
        }
    }

    /// Waits for slot `i` to exit and frees it.
    pub fn reap(&mut self, i: usize) -> anyhow::Result<()> {
        if let Some(mut slot) = self.slots[i].take() {
            if slot.proc.wait_exit(SOON).is_none() {
                bail!("{} did not exit within {SOON:?}", slot.proc.name);
            }
            self.retired = self.retired + slot.counts;
        }
        Ok(())
    }

    /// What the elect candidates' campaigns counted so far (exited ones
    /// too), from their metrics.
    pub fn campaign_counts(&mut self) -> CampaignCounts {
        self.slots
            .iter_mut()
            .flatten()
            .map(Slot::ask_counts)
            .fold(self.retired, |sum, counts| sum + counts)
    }

    /// Cuts slot `i` off (everything through its proxies stops), or heals.
    pub fn cut(&self, i: usize, cut: bool) {
        let traffic = if cut {
            Traffic::Blackhole
        } else {
            Traffic::Pass
        };
        if let Some(s) = &self.slots[i] {
            for p in &s.proxies {
                p.set(traffic);
            }
        }
        for (a, row) in self.raft_matrix.iter().enumerate() {
            for (b, proxy) in row.iter().enumerate() {
                if let Some(p) = proxy.as_ref().filter(|_| a == i || b == i) {
                    p.set(traffic);
                }
            }
        }
    }

    /// The endpoints slot `i` lists first (member-kill's victim).
    pub fn first_member(&self, i: usize) -> Option<String> {
        let s = self.slots[i].as_ref()?;
        s.endpoints.split(',').next().map(str::to_owned)
    }

    /// Host pids of slot `i`'s process and all its descendants.
    pub fn tree(&self, i: usize) -> Vec<i32> {
        let Some(s) = &self.slots[i] else {
            return Vec::new();
        };
        let mut pids = vec![s.proc.pid()];
        pids.extend(descendants(s.proc.pid()));
        pids
    }

    fn stderr_tail(&self) -> String {
        let mut text = String::new();
        for s in self.slots.iter().flatten() {
            let err = s.proc.stderr();
            let tail: Vec<&str> = err.lines().rev().take(5).collect();
            if !tail.is_empty() {
                text.push_str(&format!("\n  {}: ", s.proc.name));
                text.push_str(&tail.into_iter().rev().collect::<Vec<_>>().join("\n    "));
            }
        }
        text
    }

    /// Stops every candidate (SIGTERM, so each resigns) and waits.
    pub fn stop_all(&mut self) {
        for s in self.slots.iter().flatten() {
            s.proc.signal(nix::sys::signal::Signal::SIGCONT);
            s.proc.signal(nix::sys::signal::Signal::SIGTERM);
        }
        for s in self.slots.iter_mut().flatten() {
            if s.proc.wait_exit(Duration::from_secs(10)).is_none() {
                s.proc.signal(nix::sys::signal::Signal::SIGKILL);
            }
        }
        self.slots.clear();
    }
}

impl Drop for Arena<'_> {
    fn drop(&mut self) {
        self.stop_all();
        if let Some(raft) = &self.raft {
            let _ = std::fs::remove_dir_all(&raft.dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(text: &str) -> Line {
        Line {
            at: Instant::now(),
            text: text.to_owned(),
        }
    }

    #[test]
    fn only_the_last_event_says_whom_a_peer_follows() {
        // As a thawed Raft-vote leader said it under load: no `leader`
        // line, the `demoted` one names its successor.
        let thawed = [
            line(r#"{"leader":"p2","is_self":true,"event":"elected"}"#),
            line(r#"{"leader":"p0","is_self":false,"event":"demoted"}"#),
        ];
        assert_eq!(current_view(&thawed).as_deref(), Some("p0"));
        let elected = &thawed[..1];
        assert_eq!(current_view(elected).as_deref(), Some("p2"));
        // It followed p1 once; p1 has lost its term since.
        let moved_on = [
            line(r#"{"leader":"p1","is_self":false,"event":"leader"}"#),
            line("not json"),
            line(r#"{"leader":null,"is_self":false,"event":"none"}"#),
        ];
        assert_eq!(current_view(&moved_on), None);
        assert_eq!(current_view(&moved_on[..2]).as_deref(), Some("p1"));
        assert_eq!(current_view(&[line("not json")]), None);
    }
}
