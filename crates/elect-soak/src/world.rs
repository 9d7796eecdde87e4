//! What a soak starts: the ensembles (through the lab), and per backend
//! the elections with their candidates, each etcd and ZooKeeper candidate
//! behind a fault proxy of its own per member, the Raft-vote peers behind
//! a proxy per pair, so that one candidate can be cut off.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use elect_judge::history::ElectionMeta;
use elect_lab::fault::Proxy;
use elect_lab::peers::{self, Leading, Peer};
use elect_lab::{Lab, Mode, Role, Spec, loopback_net};

use crate::candidate::{Candidate, HealthMarkers, Spec as CandidateSpec};
use crate::options::{Backend, Error, Options};
use crate::record::Recorder;
use crate::scripts;

/// The period of the soak's periodic jobs (`run --once`).
pub const ONCE_PERIOD: Duration = Duration::from_secs(20);

/// Everything one backend's elections need.
pub struct BackendWorld {
    pub backend: Backend,
    pub ttl: Duration,
    pub elections: Vec<Election>,
    /// Member names (etcd and ZooKeeper).
    pub members: Vec<String>,
    /// Members' client addresses, `host:port,...` (etcd and ZooKeeper).
    pub endpoints: String,
    /// What `elect switchover` takes as `--endpoints`: the members'
    /// addresses, or the Raft-vote peers' own (no proxy in between).
    pub steer_endpoints: String,
    /// Per candidate: the proxies that cut it off when blackholed.
    pub cuts: BTreeMap<String, Vec<Arc<Proxy>>>,
}

/// One election and its candidates.
pub struct Election {
    pub meta: ElectionMeta,
    /// Its name as the backend knows it (etcd prefix, znode path).
    pub name: String,
    pub candidates: Vec<Candidate>,
}

impl BackendWorld {
    /// The candidate called `name` in election `key`.
    pub fn candidate(&self, key: &str, name: &str) -> Option<&Candidate> {
        self.elections
            .iter()
            .find(|e| e.meta.key == key)?
            .candidates
            .iter()
            .find(|c| c.spec.name == name)
    }

    /// The election whose key is `key`.
    pub fn election(&self, key: &str) -> Option<&Election> {
        self.elections.iter().find(|e| e.meta.key == key)
    }
}

/// What the candidates of every backend share.
pub struct Shared<'a> {
    pub options: &'a Options,
    pub recorder: &'a Recorder,
    /// The store's `host/port` for bash's `/dev/tcp`.
    pub store: &'a str,
    pub curator: Option<&'a Path>,
    /// This soak's id, in every candidate's environment (`SOAK_ID`).
    pub id: &'a str,
}

impl Shared<'_> {
    fn env(&self, key: &str, cand: &str) -> Vec<(String, String)> {
        [
            ("SOAK_ID", self.id),
            ("SOAK_ELECTION", key),
            ("SOAK_CAND", cand),
            ("SOAK_STORE", self.store),
            ("SOAK_WRITE", scripts::WRITE),
            ("SOAK_ONCE", scripts::ONCE),
            ("RUST_LOG", "info"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
    }

    fn log(&self, key: &str, cand: &str) -> PathBuf {
        let dir = self.recorder.dir().join("logs");
        let _ = std::fs::create_dir_all(&dir);
        dir.join(format!("{}-{cand}.log", key.replace('/', "-")))
    }

    fn start(
        &self,
        key: &str,
        cand: &str,
        argv: Vec<String>,
        elect: bool,
        on_demand: bool,
    ) -> Candidate {
        // elect's own `run` candidates are gated on a health check the
        // nemesis can fail; a periodic job's are not.
        let health = (elect && !on_demand).then(|| {
            let dir = self.recorder.dir().join("health");
            let _ = std::fs::create_dir_all(&dir);
            HealthMarkers::new(&dir, key, cand)
        });
        Candidate::start(
            CandidateSpec {
                election: key.to_owned(),
                name: cand.to_owned(),
                argv,
                env: self.env(key, cand),
                log: self.log(key, cand),
                elect,
                on_demand,
                health,
            },
            self.recorder.clone(),
        )
    }

    fn elect_argv(
        &self,
        backend: Backend,
        endpoints: &str,
        election: &str,
        id: &str,
        ttl: Duration,
    ) -> Vec<String> {
        let ttl = format!("{}ms", ttl.as_millis());
        [
            self.options.bin.display().to_string().as_str(),
            "--backend",
            backend.name(),
            "--endpoints",
            endpoints,
            "--election",
            election,
            "--id",
            id,
            "--ttl",
            &ttl,
            "--format",
            "json",
        ]
        .into_iter()
        .map(str::to_owned)
        .collect()
    }
}

/// Starts the lab's ensembles for the backends that need one.
pub fn lab(options: &Options, dir: &Path) -> Result<Option<Arc<Mutex<Lab>>>, Error> {
    let etcd = options.backends.contains(&Backend::Etcd);
    let zk = options.backends.contains(&Backend::Zk);
    if !etcd && !zk {
        return Ok(None);
    }
    let mut spec = Spec::new(
        options.mode,
        if etcd { 3 } else { 0 },
        if zk { 3 } else { 0 },
    );
    // The directory's name is the lab's id, its containers' and network's
    // prefix: one of its own, so two soaks never share a network.
    spec.dir = dir.join(format!("lab-{}", std::process::id()));
    let lab = Lab::up(&spec)?;
    Ok(Some(Arc::new(Mutex::new(lab))))
}

/// Starts one backend's elections and candidates.
pub fn start(
    backend: Backend,
    lab: Option<&Mutex<Lab>>,
    shared: &Shared,
) -> Result<BackendWorld, Error> {
    match backend {
        Backend::Raft => start_raft(shared),
        _ => start_service(backend, lab.expect("a lab for etcd and ZooKeeper"), shared),
    }
}

fn start_service(
    backend: Backend,
    lab: &Mutex<Lab>,
    shared: &Shared,
) -> Result<BackendWorld, Error> {
    let role = match backend {
        Backend::Etcd => Role::Etcd,
        _ => Role::Zk,
    };
    let ttl = Duration::from_secs(2);
    let (members, endpoints) = {
        let lab = lab.lock().unwrap();
        let members: Vec<String> = lab
            .members()
            .iter()
            .filter(|m| m.role == role)
            .map(|m| m.name.clone())
            .collect();
        (members, lab.endpoints(role).unwrap_or_default())
    };
    let mut building = Building {
        backend,
        shared,
        ttl,
        endpoints,
        net: loopback_net(),
        cuts: BTreeMap::new(),
    };
    let mut elections = vec![building.elect()?, building.periodic()];
    if shared.options.peers {
        elections.extend(building.peers()?);
    }
    Ok(BackendWorld {
        backend,
        ttl,
        elections,
        members,
        steer_endpoints: building.endpoints.clone(),
        endpoints: building.endpoints,
        cuts: building.cuts,
    })
}

/// One service's elections as they are set up.
struct Building<'a> {
    backend: Backend,
    shared: &'a Shared<'a>,
    ttl: Duration,
    /// The members' client addresses, comma-separated.
    endpoints: String,
    /// The loopback /24 the candidates' proxies listen in.
    net: String,
    /// Each candidate's proxies, one per member, to cut it off with.
    cuts: BTreeMap<String, Vec<Arc<Proxy>>>,
}

impl Building<'_> {
    /// Starts `cand`'s proxies, one per member, on an address of its own:
    /// the endpoints it is to use.
    fn proxied(&mut self, cand: &str) -> Result<String, Error> {
        let host = format!("{}.{}", self.net, self.cuts.len() + 1);
        let (proxies, list) = Proxy::in_front_of(&host, &self.endpoints)?;
        let proxies = proxies.into_iter().map(Arc::new).collect();
        self.cuts.insert(cand.to_owned(), proxies);
        Ok(list)
    }

    /// An election's name as the backend spells it.
    fn path(&self, name: &str) -> String {
        match self.backend {
            Backend::Zk => format!("/{name}"),
            _ => name.to_owned(),
        }
    }

    fn meta(&self, key: &str, contender: &str, cands: &[String], decides: bool) -> ElectionMeta {
        ElectionMeta {
            key: key.to_owned(),
            backend: self.backend.name().to_owned(),
            contender: contender.to_owned(),
            ttl_ms: self.ttl.as_millis() as u64,
            period_ms: None,
            liveness_bound: liveness_bound(self.ttl).as_micros() as u64,
            decides_exit: decides,
            candidates: cands.to_vec(),
        }
    }

    /// elect's own election: `run` with a daemonizing writer, each
    /// candidate through proxies of its own.
    fn elect(&mut self) -> Result<Election, Error> {
        let (backend, shared, ttl) = (self.backend, self.shared, self.ttl);
        let key = format!("{}/elect", backend.name());
        let name = self.path("soak-elect");
        let names: Vec<String> = (1..=shared.options.candidates)
            .map(|i| format!("c{i}"))
            .collect();
        let mut candidates = Vec::new();
        for cand in &names {
            let mut argv = shared.elect_argv(backend, &self.proxied(cand)?, &name, cand, ttl);
            argv.extend(run_args());
            argv.extend(["bash", "-c", scripts::ELECT_COMMAND, "soak-writer"].map(str::to_owned));
            candidates.push(shared.start(&key, cand, argv, true, false));
        }
        Ok(Election {
            meta: self.meta(&key, "elect", &names, true),
            name,
            candidates,
        })
    }

    /// Periodic jobs: started by a timer each period, straight to the
    /// members.
    fn periodic(&self) -> Election {
        let (backend, shared, ttl) = (self.backend, self.shared, self.ttl);
        let key = format!("{}/elect-once", backend.name());
        let name = self.path("soak-once");
        let names: Vec<String> = (1..=2).map(|i| format!("o{i}")).collect();
        let mut candidates = Vec::new();
        for cand in &names {
            let mut argv = shared.elect_argv(backend, &self.endpoints, &name, cand, ttl);
            argv.extend(
                [
                    "run",
                    "--once",
                    &format!("{}s", ONCE_PERIOD.as_secs()),
                    "--grace",
                    "200ms",
                    "--",
                ]
                .map(str::to_owned),
            );
            argv.extend(["bash", "-c", scripts::ONCE_COMMAND, "soak-once"].map(str::to_owned));
            candidates.push(shared.start(&key, cand, argv, true, true));
        }
        let mut meta = self.meta(&key, "elect --once", &names, true);
        meta.period_ms = Some(ONCE_PERIOD.as_millis() as u64);
        Election {
            meta,
            name,
            candidates,
        }
    }

    /// The peers' elections beside elect's: etcdctl on etcd; kazoo,
    /// Curator's latch and Curator on one session on ZooKeeper.
    fn peers(&mut self) -> Result<Vec<Election>, Error> {
        let (backend, shared, ttl) = (self.backend, self.shared, self.ttl);
        let mut elections = Vec::new();
        for peer in Peer::on(backend) {
            let key = format!("{}/{}", backend.name(), peer.key());
            let name = self.path(&format!("soak-{}", peer.key()));
            let names: Vec<String> = (1..=PEER_CANDIDATES)
                .map(|i| format!("{}{i}", candidate_letter(peer)))
                .collect();
            let mut candidates = Vec::new();
            for cand in &names {
                let endpoints = self.proxied(cand)?;
                let campaign = peers::Campaign {
                    endpoints: &endpoints,
                    election: &name,
                    ttl,
                    curator: shared.curator,
                };
                let argv = peer.argv(&campaign, Leading::RunsWriter);
                candidates.push(shared.start(&key, cand, argv, false, false));
            }
            // etcdctl elect has no TTL flag: its sessions last 60 s.
            let mut meta = self.meta(&key, peer.key(), &names, shared.options.peers_decide);
            if peer == Peer::Etcdctl {
                meta.ttl_ms = 60_000;
                meta.liveness_bound = liveness_bound(Duration::from_secs(60)).as_micros() as u64;
            }
            elections.push(Election {
                meta,
                name,
                candidates,
            });
        }
        Ok(elections)
    }
}

/// The first letter of a peer's candidates' names in the history.
fn candidate_letter(peer: Peer) -> char {
    match peer {
        Peer::Etcdctl => 'g',
        Peer::Kazoo => 'k',
        Peer::Curator => 'l',
        Peer::CuratorSession => 's',
    }
}

/// Candidates per peer election.
pub const PEER_CANDIDATES: usize = 2;

/// `run`'s flags for every elect candidate: a short grace, so a stepping
/// down leader's command goes quickly; the strongest containment (auto).
fn run_args() -> Vec<String> {
    ["run", "--grace", "200ms", "--"]
        .map(str::to_owned)
        .to_vec()
}

/// After every fault has healed, a write must come within two TTLs and 2 s
/// (a new leader's wait for the old one's lease or session, and the
/// service's own recovery).
pub fn liveness_bound(ttl: Duration) -> Duration {
    2 * ttl + Duration::from_secs(2)
}

fn start_raft(shared: &Shared) -> Result<BackendWorld, Error> {
    let ttl = Duration::from_secs(1);
    let n = shared.options.candidates;
    let net = loopback_net();
    let ids: Vec<String> = (0..n).map(|i| format!("p{i}")).collect();
    let real: Vec<String> = (0..n).map(|i| format!("{net}.{}:7000", i + 1)).collect();
    let dir = shared.recorder.dir().join("raft");
    let _ = std::fs::remove_dir_all(&dir);
    // Peer i reaches peer j through a proxy of its own; cutting peer i
    // blackholes its row (what it sends) and its column (what it is sent).
    let mut matrix: Vec<Vec<Option<Arc<Proxy>>>> = Vec::new();
    let mut views = Vec::new();
    for i in 0..n {
        let mut row = Vec::new();
        let mut view = Vec::new();
        for j in 0..n {
            if i == j {
                row.push(None);
                view.push(format!("{}={}", ids[j], real[j]));
            } else {
                let p = Arc::new(Proxy::start(&format!("{net}.{}:0", 101 + i), &real[j])?);
                view.push(format!("{}={}", ids[j], p.addr));
                row.push(Some(p));
            }
        }
        matrix.push(row);
        views.push(view.join(","));
    }
    let mut cuts = BTreeMap::new();
    for (i, id) in ids.iter().enumerate() {
        let mut mine: Vec<Arc<Proxy>> = matrix[i].iter().flatten().cloned().collect();
        mine.extend(matrix.iter().filter_map(|row| row[i].clone()));
        cuts.insert(id.clone(), mine);
    }
    let key = "raft/elect".to_owned();
    let steer_endpoints = ids
        .iter()
        .zip(&real)
        .map(|(id, addr)| format!("{id}={addr}"))
        .collect::<Vec<_>>()
        .join(",");
    let mut candidates = Vec::new();
    for (i, id) in ids.iter().enumerate() {
        let mut argv = shared.elect_argv(Backend::Raft, &views[i], "soak", id, ttl);
        argv.extend(["--data-dir".to_owned(), dir.join(id).display().to_string()]);
        argv.extend(run_args());
        argv.extend(["bash", "-c", scripts::ELECT_COMMAND, "soak-writer"].map(str::to_owned));
        candidates.push(shared.start(&key, id, argv, true, false));
    }
    Ok(BackendWorld {
        backend: Backend::Raft,
        ttl,
        elections: vec![Election {
            meta: ElectionMeta {
                key,
                backend: "raft".into(),
                contender: "elect".into(),
                ttl_ms: ttl.as_millis() as u64,
                period_ms: None,
                liveness_bound: liveness_bound(ttl).as_micros() as u64,
                decides_exit: true,
                candidates: ids,
            },
            name: "soak".into(),
            candidates,
        }],
        members: Vec::new(),
        endpoints: String::new(),
        steer_endpoints,
        cuts,
    })
}

/// Whether the ensembles run as containers.
pub fn containers(mode: Mode) -> bool {
    mode == Mode::Containers
}
