//! Taking office: the I/O of the [`TakeOffice`] recipe, from our turn
//! to leading: the tenure claim (see [`tenure`](super::tenure)), the wait
//! for a predecessor's lease, or a read of our key back.

use std::time::Duration;

use etcd_client::{Client, GetOptions};
use tokio::sync::watch;
use tokio::time::{Instant, sleep};
use tracing::info;

use super::bounds::SHORTEST_ATTEMPT;
use super::campaign::{Candidate, Outcome};
use super::connection::retry;
use super::errors::etcd_error;
use super::layout::{self, CandidateKey, Ours};
use super::lease::Lease;
use super::recipe::{OfficeInput, OfficeNext, TakeOffice, Turn};
use super::renewal::LeaseState;
use super::tenure;
use crate::backend::recipe::{Heard, Io, Recipe, Step, drive};
use crate::clock::BootInstant;
use crate::counters::warn_counted;
use crate::error::Result;

impl Candidate {
    /// From our `turn` to leading, as [`TakeOffice`] decides: the revision
    /// our leadership is confirmed at, or how the candidacy ended.
    pub(super) async fn take_office(
        &mut self,
        lease_state: &mut watch::Receiver<LeaseState>,
        lease: &Lease,
        ours: Ours<'_>,
        turn: Turn,
    ) -> std::result::Result<i64, Outcome> {
        let mut office = TakeOffice::new();
        office.input(BootInstant::now(), OfficeInput::Turn(turn));
        let mut io = OfficeIo {
            candidate: self,
            lease_state,
            lease,
            ours,
        };
        drive(&mut office, &mut io).await
    }
}

/// The way to office's I/O: the tenure claim, the wait for a
/// predecessor's lease, the read of our key back, each given up when the
/// candidacy ends meanwhile ([`Candidate::until_lost`]).
struct OfficeIo<'c, 'l, 'o> {
    candidate: &'c mut Candidate,
    lease_state: &'l mut watch::Receiver<LeaseState>,
    lease: &'l Lease,
    ours: Ours<'o>,
}

impl Io<TakeOffice> for OfficeIo<'_, '_, '_> {
    /// Every step on the way is a request: the step itself.
    type Request = OfficeNext;
    type Outcome = std::result::Result<i64, Outcome>;

    fn step(&mut self, next: OfficeNext) -> Step<OfficeNext, Self::Outcome> {
        match next {
            OfficeNext::Lead { confirmed_at } => Step::Done(Ok(confirmed_at)),
            OfficeNext::Vanished => {
                warn_counted!("our key vanished before we could lead; campaigning again");
                Step::Done(Err(Outcome::Lost {
                    led: false,
                    deadline: self.lease.state().deadline,
                }))
            }
            OfficeNext::AwaitTurn => unreachable!("the turn was handed in"),
            request => Step::Send(request),
        }
    }

    async fn send(
        &mut self,
        _: &mut TakeOffice,
        request: OfficeNext,
    ) -> Heard<OfficeInput, Self::Outcome> {
        let c = &mut *self.candidate;
        let client = c.client.clone();
        let patience = c.cfg.connect_timeout;
        let election = c.cfg.election.clone();
        let ours = self.ours;
        let answer = match request {
            OfficeNext::AwaitLeaseEnd(pred) => {
                let ended = wait_for_lease_end(&client, &election, pred);
                c.until_lost(self.lease_state, ended)
                    .await
                    .map(|()| OfficeInput::LeaseEnded)
            }
            OfficeNext::Claim => {
                let claim = tenure::claim(&client, &election, ours, patience);
                c.until_lost(self.lease_state, claim)
                    .await
                    .map(OfficeInput::Claimed)
            }
            OfficeNext::ReadBack => {
                let lease = self.lease.id;
                let read_back = confirm(&client, ours.key, lease, ours.create_revision, patience);
                c.until_lost(self.lease_state, read_back)
                    .await
                    .map(OfficeInput::ReadBack)
            }
            step => unreachable!("{step:?} is no request"),
        };
        match answer {
            Ok(input) => Heard::Input(input),
            Err(outcome) => Heard::Done(Err(outcome)),
        }
    }

    async fn wait(
        &mut self,
        _: &TakeOffice,
        _: Option<BootInstant>,
    ) -> Heard<OfficeInput, Self::Outcome> {
        unreachable!("the way to office never waits but on its requests")
    }
}

/// Waits (at most one of its TTLs) until the lease of our last predecessor
/// has ended, i.e. its holder has stopped acting as leader.
async fn wait_for_lease_end(client: &Client, election: &str, pred: CandidateKey) {
    let started = Instant::now();
    let mut poll = Duration::from_millis(2);
    let mut limit = None;
    let marker = layout::release_marker(election, pred.create_revision);
    loop {
        // Each ask gets the shortest attempt's time and stays in flight
        // past it: a member that does not answer (cut off, but its
        // connection not yet given up) keeps a request waiting, so the
        // balancer sends the next ask elsewhere instead of holding this
        // one until the connection's pings fail (8 s).
        let mut leases = client.lease_client();
        let lease = pred.lease;
        let asking = tokio::spawn(async move { leases.time_to_live(lease, None).await });
        let ttl = match tokio::time::timeout(SHORTEST_ATTEMPT, asking).await {
            Ok(Ok(answer)) => answer.map_err(|e| e.to_string()),
            Ok(Err(e)) => Err(format!("the ask's task: {e}")),
            Err(_) => Err(format!("no answer within {SHORTEST_ATTEMPT:?}")),
        };
        match ttl {
            Ok(resp) if resp.ttl() <= 0 => return,
            Ok(resp) => {
                // A lease shared by a session outlives the candidacy: its
                // holder says the work is over with a release marker.
                let released = Box::pin(
                    client
                        .kv_client()
                        .get(marker.as_str(), Some(GetOptions::new().with_count_only())),
                )
                .await;
                if released.is_ok_and(|r| r.count() > 0) {
                    let _ = Box::pin(client.kv_client().delete(marker.as_str(), None)).await;
                    return;
                }
                let granted = Duration::from_secs(resp.granted_ttl().max(0) as u64);
                let limit = *limit.get_or_insert_with(|| {
                    info!(
                        holder = %pred.id,
                        "predecessor's key is gone but its lease lives; waiting for it to end"
                    );
                    started + granted
                });
                if Instant::now() >= limit {
                    warn_counted!(holder = %pred.id, "predecessor's lease outlived its TTL; going ahead");
                    return;
                }
            }
            Err(e) => warn_counted!("asking for the predecessor's lease: {e}"),
        }
        sleep(poll).await;
        poll = (poll * 2).min(Duration::from_millis(100));
    }
}

/// Reads our key back: it must still exist, on our lease, with our create
/// revision. Returns the revision of the read, or `None` if it is gone.
async fn confirm(
    client: &Client,
    key: &str,
    lease: i64,
    my_rev: i64,
    patience: Duration,
) -> Option<i64> {
    retry("confirming our key", patience, || {
        confirm_once(client, key, lease, my_rev)
    })
    .await
}

async fn confirm_once(client: &Client, key: &str, lease: i64, my_rev: i64) -> Result<Option<i64>> {
    let resp = Box::pin(client.kv_client().get(key, None))
        .await
        .map_err(|e| etcd_error("confirming our key", e))?;
    let ours = resp
        .kvs()
        .first()
        .is_some_and(|kv| kv.lease() == lease && kv.create_revision() == my_rev);
    Ok(ours.then(|| resp.header().map_or(0, |h| h.revision())))
}
