//! The floors of a handover, of a failover and of many elections on one
//! session, on a service.
//!
//! The floor of a handover on a service: what any implementation must
//! wait for when a leader resigns, and nothing else. One client deletes a
//! key (a znode) that a second client watches; a sample is the time from
//! sending the delete to the watcher seeing its event: one commit among
//! the members, with their disk writes, and one notification. Measured in
//! this one process, through the client libraries elect uses, beside the
//! handover rows of the same run, so that a handover can be read as this
//! floor plus what the implementation adds (its signal handling, its
//! requests, its output).

use std::time::{Duration, Instant};

use anyhow::Context as _;
use elect::Backend;
use elect_lab::fault::{Proxy, Traffic};
use etcd_client::{EventType, WatchOptions};

use crate::progress::Progress;
use crate::random::Xorshift;
use crate::scenario::HANDOVER_WARMUP;

/// How long one sample may take before the run gives up.
const WITHIN: Duration = Duration::from_secs(10);

/// `trials` samples of the floor of `backend` at `endpoints`.
pub fn samples(
    backend: Backend,
    endpoints: &str,
    trials: usize,
    progress: &Progress,
) -> anyhow::Result<Vec<Duration>> {
    on_service(
        backend,
        etcd(endpoints, trials, progress),
        zk(endpoints, trials, progress),
    )
}

/// Why a Raft-vote cluster has no floor row.
const NO_SERVICE: &str = "the Raft vote has no service to measure";

/// The runtime every floor runs on: two workers, as the scenarios'.
fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
}

/// Runs the floor of `backend`, `etcd`'s or `zk`'s (only that one is
/// polled), on a runtime of its own.
fn on_service<T>(
    backend: Backend,
    etcd: impl std::future::Future<Output = anyhow::Result<T>>,
    zk: impl std::future::Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<T> {
    runtime()?.block_on(async {
        match backend {
            Backend::Etcd => etcd.await,
            Backend::Zk => zk.await,
            Backend::Raft => anyhow::bail!(NO_SERVICE),
        }
    })
}

async fn etcd(
    endpoints: &str,
    trials: usize,
    progress: &Progress,
) -> anyhow::Result<Vec<Duration>> {
    let endpoints: Vec<&str> = endpoints.split(',').collect();
    let connect = || etcd_client::Client::connect(&endpoints, None);
    let (writer, watcher) = (connect().await?, connect().await?);
    let key = format!("elect-compare-floor-{}", std::process::id());
    measure(trials, progress, async || {
        let put = writer.kv_client().put(key.as_str(), "x", None).await?;
        let stream = etcd_watch_after(&watcher, &key, &put).await?;
        let sent = Instant::now();
        let (mut kv, deleted) = (writer.kv_client(), key.clone());
        let deleting = tokio::spawn(async move { kv.delete(deleted, None).await });
        let seen = etcd_deleted(stream, "no delete event in time").await?;
        deleting.await??;
        Ok(seen - sent)
    })
    .await
}

/// A watch of `key` from just after `put`, in place (its creation
/// answered) before it is returned.
async fn etcd_watch_after(
    watcher: &etcd_client::Client,
    key: &str,
    put: &etcd_client::PutResponse,
) -> anyhow::Result<etcd_client::WatchStream> {
    let rev = put.header().map_or(0, |h| h.revision());
    let options = WatchOptions::new().with_start_revision(rev + 1);
    let mut stream = watcher.watch_client().watch(key, Some(options)).await?;
    stream.message().await?.context("the watch stream closed")?;
    Ok(stream)
}

/// When `stream` saw its key deleted; an error naming `late` after
/// [`WITHIN`].
async fn etcd_deleted(
    mut stream: etcd_client::WatchStream,
    late: &'static str,
) -> anyhow::Result<Instant> {
    tokio::time::timeout(WITHIN, async {
        loop {
            let resp = stream.message().await?.context("the watch stream closed")?;
            if resp
                .events()
                .iter()
                .any(|e| e.event_type() == EventType::Delete)
            {
                return anyhow::Ok(Instant::now());
            }
        }
    })
    .await
    .context(late)?
}

/// A watch of the znode at `path`, which `watcher` must see exist.
async fn zk_watch_existing(
    watcher: &zookeeper_client::Client,
    path: &str,
) -> anyhow::Result<zookeeper_client::OneshotWatcher> {
    // The watcher's session must see the znode before it watches it.
    watcher.sync(path).await?;
    let (stat, watch) = watcher.check_and_watch_stat(path).await?;
    anyhow::ensure!(stat.is_some(), "the watcher did not see {path}");
    Ok(watch)
}

/// When `watch` saw its znode deleted; an error naming `late` after
/// [`WITHIN`].
async fn zk_deleted(
    watch: zookeeper_client::OneshotWatcher,
    late: &'static str,
) -> anyhow::Result<Instant> {
    let event = tokio::time::timeout(WITHIN, watch.changed())
        .await
        .context(late)?;
    let seen = Instant::now();
    anyhow::ensure!(
        event.event_type == zookeeper_client::EventType::NodeDeleted,
        "unexpected event {:?}",
        event.event_type
    );
    Ok(seen)
}

async fn zk(endpoints: &str, trials: usize, progress: &Progress) -> anyhow::Result<Vec<Duration>> {
    use zookeeper_client::{Acls, Client, CreateMode};
    let connect = || Client::connect(endpoints);
    let (writer, watcher) = (connect().await?, connect().await?);
    let path = format!("/elect-compare-floor-{}", std::process::id());
    let mode = CreateMode::Ephemeral.with_acls(Acls::anyone_all());
    measure(trials, progress, async || {
        writer.create(&path, b"x", &mode).await?;
        let watch = zk_watch_existing(&watcher, &path).await?;
        let sent = Instant::now();
        let deleting = {
            let (writer, path) = (writer.clone(), path.clone());
            tokio::spawn(async move { writer.delete(&path, None).await })
        };
        let seen = zk_deleted(watch, "no delete event in time").await?;
        deleting.await??;
        Ok(seen - sent)
    })
    .await
}

/// The floor of `elections` elections on one session (one ZooKeeper
/// session, one etcd lease): the requests any recipe must make to learn
/// it leads a new election, sent all at once on one client, as the
/// elections scenario's candidates are. On ZooKeeper: the election's
/// znode, a candidate's ephemeral sequential znode under it, and the
/// listing of its children (three requests; ZooKeeper creates no
/// parents). On etcd: one transaction that puts the candidate's key,
/// bound to the lease, and reads the oldest key of the prefix. A sample
/// is an election's time from the start to its last answer, as the
/// elections row's are.
pub fn elections_samples(
    backend: Backend,
    endpoints: &str,
    elections: usize,
    progress: &Progress,
) -> anyhow::Result<Vec<Duration>> {
    on_service(
        backend,
        etcd_elections(endpoints, elections, progress),
        zk_elections(endpoints, elections, progress),
    )
}

async fn etcd_elections(
    endpoints: &str,
    elections: usize,
    progress: &Progress,
) -> anyhow::Result<Vec<Duration>> {
    use etcd_client::{GetOptions, PutOptions, SortOrder, SortTarget, Txn, TxnOp};
    let endpoints: Vec<&str> = endpoints.split(',').collect();
    let client = etcd_client::Client::connect(&endpoints, None).await?;
    let lease = client.lease_client().grant(60, None).await?.id();
    let prefix = format!("elect-compare-elections-floor-{}", std::process::id());
    let started = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for i in 0..elections {
        let mut kv = client.kv_client();
        let election = format!("{prefix}/e{i}/");
        set.spawn(async move {
            let oldest = GetOptions::new()
                .with_prefix()
                .with_sort(SortTarget::Create, SortOrder::Ascend)
                .with_limit(1);
            let txn = Txn::new().and_then([
                TxnOp::put(
                    format!("{election}{lease:x}"),
                    "floor",
                    Some(PutOptions::new().with_lease(lease)),
                ),
                TxnOp::get(election.as_str(), Some(oldest)),
            ]);
            kv.txn(txn).await?;
            anyhow::Ok(started.elapsed())
        });
    }
    let samples = gather(set, progress).await;
    client.lease_client().revoke(lease).await?;
    client
        .kv_client()
        .delete(
            prefix,
            Some(etcd_client::DeleteOptions::new().with_prefix()),
        )
        .await?;
    samples
}

async fn zk_elections(
    endpoints: &str,
    elections: usize,
    progress: &Progress,
) -> anyhow::Result<Vec<Duration>> {
    use zookeeper_client::{Acls, Client, CreateMode};
    let client = Client::connect(endpoints).await?;
    let root = format!("/elect-compare-elections-floor-{}", std::process::id());
    let persistent = CreateMode::Persistent.with_acls(Acls::anyone_all());
    client.create(&root, b"", &persistent).await?;
    let started = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for i in 0..elections {
        let client = client.clone();
        let election = format!("{root}/e{i}");
        set.spawn(async move {
            let persistent = CreateMode::Persistent.with_acls(Acls::anyone_all());
            let ephemeral = CreateMode::EphemeralSequential.with_acls(Acls::anyone_all());
            client.create(&election, b"", &persistent).await?;
            let candidate = format!("{election}/_c_floor-latch-");
            client.create(&candidate, b"floor", &ephemeral).await?;
            client.list_children(&election).await?;
            anyhow::Ok(started.elapsed())
        });
    }
    let samples = gather(set, progress).await;
    let mut cleanup = tokio::task::JoinSet::new();
    for i in 0..elections {
        let client = client.clone();
        let election = format!("{root}/e{i}");
        cleanup.spawn(async move {
            for child in client.list_children(&election).await.unwrap_or_default() {
                let _ = client.delete(&format!("{election}/{child}"), None).await;
            }
            let _ = client.delete(&election, None).await;
        });
    }
    cleanup.join_all().await;
    let _ = client.delete(&root, None).await;
    samples
}

/// Every election's time, as each answers, within [`WITHIN`] of the
/// start per hundred elections.
async fn gather(
    mut set: tokio::task::JoinSet<anyhow::Result<Duration>>,
    progress: &Progress,
) -> anyhow::Result<Vec<Duration>> {
    let mut samples = Vec::with_capacity(set.len());
    let within = WITHIN * (set.len() as u32 / 100).max(1);
    let all = async {
        while let Some(took) = set.join_next().await {
            samples.push(took??);
            progress.inc();
        }
        anyhow::Ok(())
    };
    tokio::time::timeout(within, all)
        .await
        .context("the floor's elections did not all answer in time")??;
    Ok(samples)
}

/// `trials` samples of the failover floor of `backend` at `endpoints`
/// with `ttl`: what any implementation waits for when its leader's host
/// dies. A bare holder (a lease kept alive, or a session left to its
/// client library's own pings) owns a key (an ephemeral znode) through a
/// proxy per member; at a random point of its renewal cycle every proxy
/// goes silent both ways, as a dead host does; a sample is the time from
/// then to a second client's watch seeing the key deleted: the service
/// expiring what nobody renews, plus one notification. The holder renews
/// as the peers' libraries do (a lease every TTL/3, as Go's
/// `concurrency.Session`; a session by its client's pings), so this is the
/// floor of an implementation that proves nothing about its own lease.
pub fn failover_samples(
    backend: Backend,
    endpoints: &str,
    ttl: Duration,
    trials: usize,
    progress: &Progress,
) -> anyhow::Result<Vec<Duration>> {
    let (proxies, through) = Proxy::in_front_of("127.0.0.1", endpoints)?;
    let silence = |on: bool| {
        for p in &proxies {
            p.set(if on {
                Traffic::Blackhole
            } else {
                Traffic::Pass
            });
        }
    };
    // Where in the renewal cycle the host dies: spread evenly over a TTL,
    // after a TTL of steady renewals.
    let mut phase = Xorshift::from_clock();
    runtime()?.block_on(async {
        let mut samples = Vec::with_capacity(trials);
        for _ in 0..trials {
            silence(false);
            let killed_after = ttl + phase.within(ttl);
            let sample = match backend {
                Backend::Etcd => {
                    etcd_failover(endpoints, &through, ttl, killed_after, &silence).await
                }
                Backend::Zk => zk_failover(endpoints, &through, ttl, killed_after, &silence).await,
                Backend::Raft => anyhow::bail!(NO_SERVICE),
            }?;
            samples.push(sample);
            progress.inc();
        }
        silence(false);
        Ok(samples)
    })
}

async fn etcd_failover(
    direct: &str,
    through: &str,
    ttl: Duration,
    killed_after: Duration,
    silence: &impl Fn(bool),
) -> anyhow::Result<Duration> {
    let direct: Vec<&str> = direct.split(',').collect();
    let through: Vec<&str> = through.split(',').collect();
    let watcher = etcd_client::Client::connect(&direct, None).await?;
    let holder = etcd_client::Client::connect(&through, None).await?;
    let key = format!("elect-compare-floor-failover-{}", std::process::id());
    let lease = holder
        .lease_client()
        .grant(ttl.as_secs().max(1) as i64, None)
        .await?
        .id();
    let put = holder
        .kv_client()
        .put(
            key.as_str(),
            "x",
            Some(etcd_client::PutOptions::new().with_lease(lease)),
        )
        .await?;
    let stream = etcd_watch_after(&watcher, &key, &put).await?;
    let (mut keeper, mut answers) = holder.lease_client().keep_alive(lease).await?;
    let renewing = tokio::spawn(async move {
        loop {
            tokio::time::sleep(ttl / 3).await;
            if keeper.keep_alive().await.is_err() || answers.message().await.is_err() {
                return;
            }
        }
    });
    let sample = after_silence(
        killed_after,
        silence,
        etcd_deleted(stream, "the lease did not expire in time"),
    )
    .await;
    renewing.abort();
    sample
}

/// Waits `killed_after`, silences the holder's host, and returns how long
/// it then took until `deleted` saw the key go.
async fn after_silence(
    killed_after: Duration,
    silence: &impl Fn(bool),
    deleted: impl Future<Output = anyhow::Result<Instant>>,
) -> anyhow::Result<Duration> {
    tokio::time::sleep(killed_after).await;
    silence(true);
    let killed = Instant::now();
    Ok(deleted.await? - killed)
}

async fn zk_failover(
    direct: &str,
    through: &str,
    ttl: Duration,
    killed_after: Duration,
    silence: &impl Fn(bool),
) -> anyhow::Result<Duration> {
    use zookeeper_client::{Acls, Client, CreateMode};
    let watcher = Client::connect(direct).await?;
    let holder = Client::connector()
        .with_session_timeout(ttl)
        .connect(through)
        .await?;
    let path = format!("/elect-compare-floor-failover-{}", std::process::id());
    let mode = CreateMode::Ephemeral.with_acls(Acls::anyone_all());
    holder.create(&path, b"x", &mode).await?;
    let watch = zk_watch_existing(&watcher, &path).await?;
    let sample = after_silence(
        killed_after,
        silence,
        zk_deleted(watch, "the session did not expire in time"),
    )
    .await;
    drop(holder);
    sample
}

/// `trials` samples of `one`, after as many unmeasured ones as the
/// handovers have.
async fn measure(
    trials: usize,
    progress: &Progress,
    mut one: impl AsyncFnMut() -> anyhow::Result<Duration>,
) -> anyhow::Result<Vec<Duration>> {
    for _ in 0..HANDOVER_WARMUP {
        one().await?;
    }
    let mut samples = Vec::with_capacity(trials);
    for _ in 0..trials {
        samples.push(one().await?);
        progress.inc();
    }
    Ok(samples)
}

/// The floor of a leader change with `n` candidates, each following the
/// leader as elect's do, on a session or client of its own in this one
/// process (see [`scale_samples`]).
pub fn scale_samples(
    backend: Backend,
    endpoints: &str,
    n: usize,
    trials: usize,
    progress: &Progress,
) -> anyhow::Result<Vec<Duration>> {
    elect_lab::raise_fd_limit();
    on_service(
        backend,
        etcd_scale(endpoints, n, trials, progress),
        zk_scale(endpoints, n, trials, progress),
    )
}

/// `n` of what `connect` makes (`connect(i)` for the `i`-th), made
/// [`crate::scale::BATCH`] at a time, as the scale scenario starts its
/// candidates; in the order they were made.
async fn connect_in_batches<T, F, Fut>(n: usize, connect: F) -> anyhow::Result<Vec<T>>
where
    T: Send + 'static,
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<T>> + Send + 'static,
{
    let mut made = Vec::with_capacity(n);
    for first in (0..n).step_by(crate::scale::BATCH) {
        let mut connecting = tokio::task::JoinSet::new();
        for i in first..n.min(first + crate::scale::BATCH) {
            connecting.spawn(connect(i));
        }
        while let Some(connected) = connecting.join_next().await {
            made.push(connected??);
        }
    }
    Ok(made)
}

/// Which of `n` watchers stands for the successor in trial `trial`: each
/// in turn, spread over the watchers (a prime stride), so a sample is
/// one notification's place among the `n` the server sends at once.
fn successor_of(trial: usize, n: usize) -> usize {
    (trial * 7919) % n
}

/// `trials` deletions seen by `n` bare watchers: one etcd client each
/// (over every member, as a candidate's), each with one watch of the
/// prefix's deletions, as an elect follower has. A sample is the time
/// from sending a key's deletion to [`successor_of`] the trial seeing it,
/// once all `n` saw it.
async fn etcd_scale(
    endpoints: &str,
    n: usize,
    trials: usize,
    progress: &Progress,
) -> anyhow::Result<Vec<Duration>> {
    use etcd_client::WatchFilterType;
    let endpoints: Vec<String> = endpoints.split(',').map(String::from).collect();
    let writer = etcd_client::Client::connect(&endpoints, None).await?;
    let prefix = format!("elect-compare-scale-floor-{}-{n}/", std::process::id());
    let connected = connect_in_batches(n, |i| {
        let (endpoints, prefix) = (endpoints.clone(), prefix.clone());
        async move {
            let client = etcd_client::Client::connect(&endpoints, None).await?;
            let deletions = WatchOptions::new()
                .with_prefix()
                .with_filters([WatchFilterType::NoPut]);
            let mut stream = client.watch_client().watch(prefix, Some(deletions)).await?;
            // In place: its creation answered.
            stream.message().await?.context("the watch stream closed")?;
            anyhow::Ok((i, client, stream))
        }
    })
    .await?;
    let (seen_tx, mut seen) = tokio::sync::mpsc::unbounded_channel();
    let mut watchers = tokio::task::JoinSet::new();
    for (i, client, mut stream) in connected {
        let seen_tx = seen_tx.clone();
        watchers.spawn(async move {
            let _client = client;
            while let Ok(Some(resp)) = stream.message().await {
                if !resp.events().is_empty() && seen_tx.send((i, Instant::now())).is_err() {
                    return;
                }
            }
        });
    }
    let mut trial = 0;
    let samples = measure(trials, progress, async || {
        let key = format!("{prefix}{trial}");
        writer.kv_client().put(key.as_str(), "x", None).await?;
        let sent = Instant::now();
        writer.kv_client().delete(key, None).await?;
        let at = all_saw(&mut seen, n, successor_of(trial, n)).await?;
        trial += 1;
        Ok(at - sent)
    })
    .await;
    watchers.abort_all();
    samples
}

/// `trials` deletions seen by `n` bare watchers: one ZooKeeper session
/// each, each with one watch on the znode that leads, as an elect
/// follower has. A sample is the time from sending the znode's deletion
/// to [`successor_of`] the trial seeing it, once all `n` saw it.
async fn zk_scale(
    endpoints: &str,
    n: usize,
    trials: usize,
    progress: &Progress,
) -> anyhow::Result<Vec<Duration>> {
    use zookeeper_client::{Acls, Client, CreateMode};
    let writer = Client::connect(endpoints).await?;
    let watchers = connect_in_batches(n, |_| {
        let endpoints = endpoints.to_owned();
        async move { anyhow::Ok(Client::connect(&endpoints).await?) }
    })
    .await?;
    let path = format!("/elect-compare-scale-floor-{}-{n}", std::process::id());
    let mode = CreateMode::Ephemeral.with_acls(Acls::anyone_all());
    let (seen_tx, mut seen) = tokio::sync::mpsc::unbounded_channel();
    let mut trial = 0;
    let samples = measure(trials, progress, async || {
        writer.create(&path, b"x", &mode).await?;
        let mut watching = tokio::task::JoinSet::new();
        for (i, watcher) in watchers.iter().enumerate() {
            let (watcher, path) = (watcher.clone(), path.clone());
            watching
                .spawn(async move { anyhow::Ok((i, zk_watch_existing(&watcher, &path).await?)) });
        }
        let mut waiting = tokio::task::JoinSet::new();
        while let Some(watched) = watching.join_next().await {
            let (i, watch) = watched??;
            let seen_tx = seen_tx.clone();
            waiting.spawn(async move {
                if let Ok(at) = zk_deleted(watch, "no delete event in time").await {
                    let _ = seen_tx.send((i, at));
                }
            });
        }
        let sent = Instant::now();
        writer.delete(&path, None).await?;
        let at = all_saw(&mut seen, n, successor_of(trial, n)).await;
        waiting.abort_all();
        trial += 1;
        Ok(at? - sent)
    })
    .await;
    let _ = writer.delete(&path, None).await;
    samples
}

/// Waits until `n` watchers saw a deletion: when `successor` did.
async fn all_saw(
    seen: &mut tokio::sync::mpsc::UnboundedReceiver<(usize, Instant)>,
    n: usize,
    successor: usize,
) -> anyhow::Result<Instant> {
    tokio::time::timeout(WITHIN, async {
        let mut at = None;
        for _ in 0..n {
            let (i, when) = seen.recv().await.context("every watcher stopped")?;
            if i == successor {
                at = Some(when);
            }
        }
        at.context("the successor's watcher saw nothing")
    })
    .await
    .context("not every watcher saw the deletion in time")?
}
