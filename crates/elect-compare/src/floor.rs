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
use etcd_client::{EventType, WatchOptions};

use crate::progress::Progress;
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
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async {
        match backend {
            Backend::Etcd => etcd(endpoints, trials, progress).await,
            Backend::Zk => zk(endpoints, trials, progress).await,
            Backend::Raft => anyhow::bail!("the Raft vote has no service to measure"),
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
        let rev = put.header().map_or(0, |h| h.revision());
        let options = WatchOptions::new().with_start_revision(rev + 1);
        let mut stream = watcher
            .watch_client()
            .watch(key.as_str(), Some(options))
            .await?;
        // Created: the watcher is in place before the delete is sent.
        stream.message().await?.context("the watch stream closed")?;
        let sent = Instant::now();
        let (mut kv, deleted) = (writer.kv_client(), key.clone());
        let deleting = tokio::spawn(async move { kv.delete(deleted, None).await });
        let seen = tokio::time::timeout(WITHIN, async {
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
        .context("no delete event in time")??;
        deleting.await??;
        Ok(seen - sent)
    })
    .await
}

async fn zk(endpoints: &str, trials: usize, progress: &Progress) -> anyhow::Result<Vec<Duration>> {
    use zookeeper_client::{Acls, Client, CreateMode, EventType as ZkEvent};
    let connect = || Client::connect(endpoints);
    let (writer, watcher) = (connect().await?, connect().await?);
    let path = format!("/elect-compare-floor-{}", std::process::id());
    let mode = CreateMode::Ephemeral.with_acls(Acls::anyone_all());
    measure(trials, progress, async || {
        writer.create(&path, b"x", &mode).await?;
        // The watcher's session must see the znode before it watches it.
        watcher.sync(&path).await?;
        let (stat, watch) = watcher.check_and_watch_stat(&path).await?;
        anyhow::ensure!(stat.is_some(), "the watcher did not see {path}");
        let sent = Instant::now();
        let deleting = {
            let (writer, path) = (writer.clone(), path.clone());
            tokio::spawn(async move { writer.delete(&path, None).await })
        };
        let event = tokio::time::timeout(WITHIN, watch.changed())
            .await
            .context("no delete event in time")?;
        let seen = Instant::now();
        anyhow::ensure!(
            event.event_type == ZkEvent::NodeDeleted,
            "unexpected event {:?}",
            event.event_type
        );
        deleting.await??;
        Ok(seen - sent)
    })
    .await
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
