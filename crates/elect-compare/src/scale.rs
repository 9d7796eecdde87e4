//! The scale scenario: N candidates in this one process, through the
//! library, each with a session or lease of its own, as a fleet of
//! sidecars would be. Measures handover time, server-side notifications
//! per leader change (a herd would show N-1), and memory and connections
//! per candidate.

use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow, bail};
use elect::backend::{self, Campaign};
use elect::config::ElectionConfig;
use tokio::sync::mpsc;

use crate::arena::SOON;
use crate::probe::{Counters, Probe};
use crate::progress::Progress;
use elect::Backend;

/// One point of the scale curve.
pub struct ScalePoint {
    pub samples: Vec<Duration>,
    /// `None` where a member did not answer for its counters.
    pub counters: Option<Counters>,
    /// Campaign wake-ups over the handovers.
    pub wakeups: u64,
    pub changes: usize,
    /// Private memory this process gained per candidate, in KiB (see
    /// [`elect_lab::host::private_kib`]), once every candidate renewed.
    pub memory_kib_per_candidate: f64,
    /// Sockets this process opened per candidate (its connections).
    pub sockets_per_candidate: f64,
}

/// Candidates started at once, so 1000 sessions do not all connect in the
/// same millisecond.
const BATCH: usize = 50;

pub fn run(
    backend: Backend,
    endpoints: &str,
    ttl: Duration,
    n: usize,
    handovers: usize,
    probe: &Probe,
    progress: &Progress,
) -> anyhow::Result<ScalePoint> {
    elect_lab::raise_fd_limit();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let election = match backend {
        Backend::Zk => format!("/elect-compare-scale-{n}"),
        _ => format!("elect-compare-scale-{n}"),
    };
    let base = match backend {
        Backend::Etcd => ElectionConfig::etcd(endpoints.split(','), &election)?,
        Backend::Zk => ElectionConfig::zk(endpoints, &election)?,
        Backend::Raft => bail!("scale runs on etcd and ZooKeeper"),
    }
    .with_ttl(ttl)?;
    let queued = |want: usize| {
        elect_lab::poll(SOON, || {
            (probe.queued(&election) == Some(want)).then_some(())
        })
        .ok_or_else(|| {
            anyhow!(
                "{want} candidates were not queued in {election} within {SOON:?} (saw {:?})",
                probe.queued(&election)
            )
        })
    };
    rt.block_on(async {
        let (elected_tx, mut elected) = mpsc::unbounded_channel();

        let private_before = elect_lab::host::private_kib();
        let sockets_before = elect_lab::host::open_sockets();
        let mut next_id = 0;
        let mut campaigns: Vec<Option<Campaign>> = Vec::new();
        let spawn_batch = |count: usize, next_id: &mut usize| {
            let mut set = tokio::task::JoinSet::new();
            for _ in 0..count {
                let cfg = base.clone().with_id(&format!("s{next_id}"));
                let i = *next_id;
                *next_id += 1;
                set.spawn(async move {
                    let campaign = match cfg {
                        Ok(cfg) => backend::campaign(&cfg, elect::work::WorkWatch::none()).await,
                        Err(e) => Err(e),
                    };
                    (i, campaign)
                });
            }
            set
        };
        while campaigns.len() < n {
            let mut set = spawn_batch(BATCH.min(n - campaigns.len()), &mut next_id);
            while let Some(joined) = set.join_next().await {
                let (i, campaign) = joined?;
                let campaign = campaign.with_context(|| format!("candidate s{i}"))?;
                watch_for_election(i, &campaign, elected_tx.clone());
                campaigns.resize_with(campaigns.len().max(i + 1), || None);
                campaigns[i] = Some(campaign);
            }
        }
        tokio::task::block_in_place(|| queued(n))?;
        // Footprint in the steady state: after a round of renewals (the
        // first ping of each lease's keepalive loop goes TTL/3 after the
        // grant), with every stream and connection it opens.
        tokio::time::sleep(ttl / 3 + Duration::from_secs(1)).await;
        let memory_kib_per_candidate =
            elect_lab::host::private_kib().saturating_sub(private_before) as f64 / n as f64;
        let sockets_per_candidate =
            elect_lab::host::open_sockets().saturating_sub(sockets_before) as f64 / n as f64;
        let before = tokio::task::block_in_place(|| probe.counters());
        let woken_before = elect::counters::snapshot().wakeups;
        let (mut leader, _) = recv(&mut elected).await?;
        let mut samples = Vec::new();
        for _ in 0..handovers {
            let old = campaigns[leader].take().context("the leader's campaign")?;
            let sent = Instant::now();
            let resigned = tokio::spawn(old.resign());
            let (next, at) = recv(&mut elected).await?;
            samples.push(at - sent);
            resigned.await??;
            leader = next;
            // Back to n candidates before the next handover.
            let mut set = spawn_batch(1, &mut next_id);
            while let Some(joined) = set.join_next().await {
                let (i, campaign) = joined?;
                let campaign = campaign?;
                watch_for_election(i, &campaign, elected_tx.clone());
                campaigns.resize_with(campaigns.len().max(i + 1), || None);
                campaigns[i] = Some(campaign);
            }
            tokio::task::block_in_place(|| queued(n))?;
            progress.inc();
        }
        let counters = tokio::task::block_in_place(|| probe.counters()).since(before);
        let woken = elect::counters::snapshot().wakeups - woken_before;
        let mut set = tokio::task::JoinSet::new();
        for c in campaigns.into_iter().flatten() {
            set.spawn(c.resign());
        }
        while let Some(r) = set.join_next().await {
            r??;
        }
        tokio::task::block_in_place(|| queued(0))?;
        Ok(ScalePoint {
            samples,
            counters,
            wakeups: woken,
            changes: handovers,
            memory_kib_per_candidate,
            sockets_per_candidate,
        })
    })
}

/// Reports `(i, instant)` on `tx` whenever candidate `i` becomes leader.
fn watch_for_election(i: usize, campaign: &Campaign, tx: mpsc::UnboundedSender<(usize, Instant)>) {
    let mut rx = campaign.leadership();
    tokio::spawn(async move {
        let mut leading = false;
        loop {
            let now = rx.borrow_and_update().is_self;
            if now && !leading && tx.send((i, Instant::now())).is_err() {
                return;
            }
            leading = now;
            if rx.changed().await.is_err() {
                return;
            }
        }
    });
}

async fn recv(
    rx: &mut mpsc::UnboundedReceiver<(usize, Instant)>,
) -> anyhow::Result<(usize, Instant)> {
    tokio::time::timeout(SOON, rx.recv())
        .await
        .map_err(|_| anyhow!("no candidate was elected within {SOON:?}"))?
        .context("every candidate stopped")
}
