//! The elections scenario: E elections in this one process on one session
//! (one etcd lease, one ZooKeeper session), as a service with a leader per
//! shard runs them. Measures how long each election takes to elect its
//! candidate, the renewal traffic per TTL (the session's, whatever E),
//! resident memory per election, and that a leader change in one election
//! wakes no candidate of another.

use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow, bail};
use elect::Backend;
use elect::backend::{Campaign, Session};
use elect::config::ElectionConfig;
use elect::counters;
use elect::work::WorkWatch;

use crate::arena::SOON;
use crate::probe::Probe;
use crate::progress::Progress;

/// What one run measured.
pub struct ElectionsPoint {
    /// Per election: from the start of the campaigns to its `elected`.
    pub samples: Vec<Duration>,
    /// Renewals the session's service answered per TTL, all elections
    /// together.
    pub renewals_per_ttl: f64,
    /// Private memory this process gained per election, in KiB (see
    /// [`elect_lab::host::private_kib`]).
    pub memory_kib_per_election: f64,
    /// Campaign wake-ups, in every election, caused by one leader change
    /// in one election (one is the successor's; more would be a herd
    /// across elections).
    pub wakeups: u64,
}

/// Candidates of the second session, waiting behind the first session's
/// leaders in the first elections, so a wake-up in the wrong election
/// would show.
const WAITING: usize = 100;

pub fn run(
    backend: Backend,
    endpoints: &str,
    ttl: Duration,
    elections: usize,
    renewal_window_ttls: u32,
    probe: &Probe,
    progress: &Progress,
) -> anyhow::Result<ElectionsPoint> {
    elect_lab::raise_fd_limit();
    let name = |i: usize| match backend {
        Backend::Zk => format!("/elect-compare-elections/e{i}"),
        _ => format!("elect-compare-elections/e{i}"),
    };
    let base = match backend {
        Backend::Etcd => ElectionConfig::etcd(endpoints.split(','), &name(0))?,
        Backend::Zk => ElectionConfig::zk(endpoints, &name(0))?,
        Backend::Raft => bail!("a Raft-vote cluster serves one election"),
    }
    .with_ttl(ttl)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async {
        let memory_before = elect_lab::host::private_kib();
        let first = Session::open(&base).await.context("opening the session")?;
        let (mut leaders, samples) = elect_everyone(&first, elections, &name, progress).await?;
        let memory_kib_per_election =
            elect_lab::host::private_kib().saturating_sub(memory_before) as f64 / elections as f64;

        // The renewals of a few TTLs, all elections on the one session.
        let before = counters::snapshot().renewals;
        tokio::time::sleep(ttl * renewal_window_ttls).await;
        let renewals_per_ttl =
            (counters::snapshot().renewals - before) as f64 / f64::from(renewal_window_ttls);

        let (wakeups, second, waiting) =
            one_leader_change(&base, &mut leaders, elections, &name, probe).await?;
        drop(waiting);
        drop(leaders);
        second.close().await;
        first.close().await;
        Ok(ElectionsPoint {
            samples,
            renewals_per_ttl,
            memory_kib_per_election,
            wakeups,
        })
    })
}

/// Campaigns in every election on `first`, and waits until each elected
/// its candidate: the campaigns, and each election's time to elect from
/// the start.
async fn elect_everyone(
    first: &Session,
    elections: usize,
    name: &impl Fn(usize) -> String,
    progress: &Progress,
) -> anyhow::Result<(Vec<Campaign>, Vec<Duration>)> {
    let started = Instant::now();
    let leaders: Vec<Campaign> = (0..elections)
        .map(|i| first.campaign(&name(i), &format!("a{i}"), WorkWatch::none()))
        .collect::<Result<_, _>>()?;
    let mut waits = tokio::task::JoinSet::new();
    for c in &leaders {
        let mut rx = c.leadership();
        waits.spawn(async move {
            rx.wait_for(|l| l.is_self).await.ok()?;
            Some(started.elapsed())
        });
    }
    let mut samples = Vec::with_capacity(elections);
    let all_elected = SOON + Duration::from_millis(2 * elections as u64);
    let gathering = async {
        while let Some(took) = waits.join_next().await {
            samples.push(took?.context("a campaign ended before it was elected")?);
            progress.inc();
        }
        anyhow::Ok(())
    };
    tokio::time::timeout(all_elected, gathering)
        .await
        .map_err(|_| anyhow!("not every election elected within {all_elected:?}"))??;
    Ok((leaders, samples))
}

/// A second session waits in the first elections, and the first
/// election's leader resigns: the campaign wake-ups that one change
/// caused in every election, and the second session with its candidates
/// (closed by the caller, in order).
async fn one_leader_change(
    base: &ElectionConfig,
    leaders: &mut Vec<Campaign>,
    elections: usize,
    name: &impl Fn(usize) -> String,
    probe: &Probe,
) -> anyhow::Result<(u64, Session, Vec<Campaign>)> {
    // A second session waits in the first elections; one leader change.
    let second = Session::open(base)
        .await
        .context("opening a second session")?;
    let waiting: Vec<Campaign> = (0..WAITING.min(elections))
        .map(|i| second.campaign(&name(i), &format!("b{i}"), WorkWatch::none()))
        .collect::<Result<_, _>>()?;
    // Queued once each has seen its election's leader.
    for c in &waiting {
        let mut rx = c.leadership();
        tokio::time::timeout(SOON, rx.wait_for(|l| l.leader.is_some() && l.current))
            .await
            .context("a waiting candidate saw no leader")??;
    }
    // The successor-to-be queued, and waiting on its predecessor.
    let first_election = name(0);
    tokio::task::block_in_place(|| {
        elect_lab::poll(SOON, || {
            (probe.queued(&first_election) == Some(2)).then_some(())
        })
    })
    .context("the second candidate of the first election did not queue")?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let woken_before = counters::snapshot().wakeups;
    let mut successor = waiting[0].leadership();
    leaders.swap_remove(0).resign().await?;
    tokio::time::timeout(SOON, successor.wait_for(|l| l.is_self))
        .await
        .context("the successor in the first election was not elected")??;
    // Time for any wrong wake-up to show.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let wakeups = counters::snapshot().wakeups - woken_before;

    Ok((wakeups, second, waiting))
}
