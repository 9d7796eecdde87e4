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
    /// Over the handovers (each with the join of a candidate that keeps
    /// N), net of the steady state's renewals (see [`ScalePoint::idle`]);
    /// `None` where a member did not answer for its counters.
    pub counters: Option<Counters>,
    /// The steady state with no leader change, per second: every
    /// candidate's renewals, measured over [`crate::probe::IDLE_WINDOW`] before the
    /// handovers and taken out of their counts.
    pub idle: Option<Counters>,
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
/// same millisecond (the scale floor's watchers connect the same way).
pub(crate) const BATCH: usize = 50;

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
    let rt = runtime()?;
    let (election, base) = config(backend, endpoints, ttl, &format!("scale-{n}"))?;
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
    let queued = |want: usize| tokio::task::block_in_place(|| queued(want));
    let counters = || tokio::task::block_in_place(|| probe.counters());
    rt.block_on(async {
        let (elected_tx, mut elected) = mpsc::unbounded_channel();
        let private_before = elect_lab::host::private_kib();
        let sockets_before = elect_lab::host::open_sockets();
        let mut crowd = Crowd {
            base,
            campaigns: Vec::new(),
            next_id: 0,
            elected: elected_tx,
        };
        crowd.grow_to(n).await?;
        queued(n)?;
        // Footprint in the steady state: after a round of renewals (the
        // first ping of each lease's keepalive loop goes TTL/3 after the
        // grant), with every stream and connection it opens.
        tokio::time::sleep(ttl / 3 + Duration::from_secs(1)).await;
        let memory_kib_per_candidate =
            elect_lab::host::private_kib().saturating_sub(private_before) as f64 / n as f64;
        let sockets_per_candidate =
            elect_lab::host::open_sockets().saturating_sub(sockets_before) as f64 / n as f64;
        let idle = tokio::task::block_in_place(|| probe.idle_rate());
        let before = counters();
        let started = Instant::now();
        let woken_before = elect::counters::snapshot().wakeups;
        let (mut leader, _) = recv(&mut elected).await?;
        let mut samples = Vec::new();
        for _ in 0..handovers {
            let (next, took) = crowd.hand_over(leader, &mut elected).await?;
            samples.push(took);
            leader = next;
            // Back to n candidates before the next handover.
            crowd.grow_to(n).await?;
            queued(n)?;
            progress.inc();
        }
        let elapsed = started.elapsed();
        let counters = counters()
            .since(before)
            .zip(idle)
            .map(|(counted, idle)| counted.net_of(idle, elapsed));
        let woken = elect::counters::snapshot().wakeups - woken_before;
        crowd.resign_all().await?;
        queued(0)?;
        Ok(ScalePoint {
            samples,
            counters,
            idle,
            wakeups: woken,
            changes: handovers,
            memory_kib_per_candidate,
            sockets_per_candidate,
        })
    })
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

/// The election `elect-compare-<name>` on `backend`, and its candidates'
/// configuration.
fn config(
    backend: Backend,
    endpoints: &str,
    ttl: Duration,
    name: &str,
) -> anyhow::Result<(String, ElectionConfig)> {
    let election = match backend {
        Backend::Zk => format!("/elect-compare-{name}"),
        _ => format!("elect-compare-{name}"),
    };
    let base = match backend {
        Backend::Etcd => ElectionConfig::etcd(endpoints.split(','), &election)?,
        Backend::Zk => ElectionConfig::zk(endpoints, &election)?,
        Backend::Raft => bail!("runs on etcd and ZooKeeper"),
    }
    .with_ttl(ttl)?;
    Ok((election, base))
}

/// `n` candidates of the election `elect-compare-<name>`, in this process
/// through the library, campaigning while `held` runs (once all are
/// queued and `settle` has passed); then they resign.
pub(crate) fn holding<T>(
    backend: Backend,
    endpoints: &str,
    ttl: Duration,
    (name, n): (&str, usize),
    probe: &Probe,
    settle: Duration,
    held: impl FnOnce() -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    elect_lab::raise_fd_limit();
    let rt = runtime()?;
    let (election, base) = config(backend, endpoints, ttl, name)?;
    let queued = |want: usize| {
        elect_lab::poll(SOON, || {
            (probe.queued(&election) == Some(want)).then_some(())
        })
        .ok_or_else(|| anyhow!("{want} candidates were not queued in {election} within {SOON:?}"))
    };
    rt.block_on(async {
        let mut crowd = Crowd {
            base,
            campaigns: Vec::new(),
            next_id: 0,
            elected: mpsc::unbounded_channel().0,
        };
        crowd.grow_to(n).await?;
        tokio::task::block_in_place(|| queued(n))?;
        tokio::time::sleep(settle).await;
        let value = tokio::task::block_in_place(held);
        crowd.resign_all().await?;
        tokio::task::block_in_place(|| queued(0))?;
        value
    })
}

/// The candidates of one scale point, `s<i>` each, campaigning through
/// the library in this process.
struct Crowd {
    base: ElectionConfig,
    /// By id; `None` once resigned.
    campaigns: Vec<Option<Campaign>>,
    next_id: usize,
    /// Where a candidate says it was elected.
    elected: mpsc::UnboundedSender<(usize, Instant)>,
}

impl Crowd {
    /// Starts candidates, [`BATCH`] at a time, until `n` campaign.
    async fn grow_to(&mut self, n: usize) -> anyhow::Result<()> {
        while self.running() < n {
            let mut set = tokio::task::JoinSet::new();
            for _ in 0..BATCH.min(n - self.running()) {
                let cfg = self.base.clone().with_id(&format!("s{}", self.next_id));
                let i = self.next_id;
                self.next_id += 1;
                set.spawn(async move {
                    let campaign = match cfg {
                        Ok(cfg) => backend::campaign(&cfg, elect::work::WorkWatch::none()).await,
                        Err(e) => Err(e),
                    };
                    (i, campaign)
                });
            }
            while let Some(joined) = set.join_next().await {
                let (i, campaign) = joined?;
                let campaign = campaign.with_context(|| format!("candidate s{i}"))?;
                watch_for_election(i, &campaign, self.elected.clone());
                self.campaigns
                    .resize_with(self.campaigns.len().max(i + 1), || None);
                self.campaigns[i] = Some(campaign);
            }
        }
        Ok(())
    }

    /// Candidates campaigning.
    fn running(&self) -> usize {
        self.campaigns.iter().flatten().count()
    }

    /// The `leader` resigns: who was elected next, and how long after the
    /// resignation was asked for.
    async fn hand_over(
        &mut self,
        leader: usize,
        elected: &mut mpsc::UnboundedReceiver<(usize, Instant)>,
    ) -> anyhow::Result<(usize, Duration)> {
        let old = self.campaigns[leader]
            .take()
            .context("the leader's campaign")?;
        let sent = Instant::now();
        let resigned = tokio::spawn(old.resign());
        let (next, at) = recv(elected).await?;
        resigned.await??;
        Ok((next, at - sent))
    }

    /// Every candidate resigns.
    async fn resign_all(self) -> anyhow::Result<()> {
        let mut set = tokio::task::JoinSet::new();
        for c in self.campaigns.into_iter().flatten() {
            set.spawn(c.resign());
        }
        while let Some(r) = set.join_next().await {
            r??;
        }
        Ok(())
    }
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
