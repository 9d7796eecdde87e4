//! Leading: the I/O of the [`Stint`] recipe, from the confirmation of our
//! key until we resign or may no longer lead. The stint decides; this
//! publishes what it says, hands it the renewals, our key's watch, the
//! observer's views and resignation, and asks etcd whether our lease
//! lives when it wants to know.

use std::time::Duration;

use etcd_client::Client;
use tokio::sync::watch;
use tracing::{debug, info};

use super::bounds::WatchBounds;
use super::campaign::{Candidate, Outcome, Tenure};
use super::handover::LeaderWatch;
use super::layout::{self, CandidateKey};
use super::priority;
use super::recipe::{Demotion, Steer, Stint, StintEnd, StintInput, StintNext, StintRequest};
use super::renewal::LeaseState;
use super::switchover::{self, SwitchoverWatch};
use crate::backend::recipe::{Heard, Io, Step, drive};
use crate::clock::{BootInstant, sleep_until};
use crate::counters::warn_counted;
use crate::leadership::Leadership;
use crate::steer::Failback;

impl Candidate {
    /// Leads until [`Stint`] says we may not, or resignation.
    pub(super) async fn lead(
        &mut self,
        lease_state: &mut watch::Receiver<LeaseState>,
        tenure: Tenure<'_>,
    ) -> Outcome {
        let proven = lease_state.borrow_and_update().deadline;
        let mut stint = Stint::new(tenure.confirmed_at, proven);
        // Our own key is watched directly, so its deletion is acted on at
        // the event rather than one read later through the observer; the
        // same watch keeps who is next for our resignation.
        let own = CandidateKey {
            key: tenure.key.as_bytes().to_vec(),
            id: self.cfg.id.clone(),
            create_revision: tenure.token,
            lease: tenure.lease,
        };
        let own_key = own.clone();
        let bounds = WatchBounds::new(self.cfg.connect_timeout);
        let prefix = layout::prefix(&self.cfg.election);
        let watch = LeaderWatch::start(self.client.clone(), prefix, own, bounds);
        let key_gone = watch.key_gone();
        let next = watch.next_in_line();
        self.leader_watch = Some(watch);
        let switchover = SwitchoverWatch::start(self.client.clone(), &self.cfg.election, bounds);
        let failback = Failback::new(*self.priority.borrow_and_update(), self.cfg.failback_delay);
        let mut io = StintIo {
            candidate: self,
            lease_state,
            watches: LeaderWatches {
                key_gone,
                next,
                switchover: switchover.steer(),
                failback,
                look_at: BootInstant::now(),
                pinned: false,
                own: own_key.clone(),
            },
            tenure,
            led: false,
        };
        Box::pin(drive(&mut stint, &mut io)).await
    }

    /// Waits, at most `until`, for what the stint hears: resignation, a
    /// renewal or the lease's end, our key's loss, or a view. `None`: the
    /// time came.
    async fn wait_leading(
        &mut self,
        lease_state: &mut watch::Receiver<LeaseState>,
        watches: &mut LeaderWatches,
        own_key: &[u8],
        until: Option<BootInstant>,
    ) -> Option<StintInput> {
        let wake = async {
            match until {
                Some(at) => sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        let look_at = watches.look_at;
        let woke = tokio::select! {
            _ = self.resign.cancelled() => return Some(StintInput::Resign),
            () = wake => return None,
            Ok(()) = lease_state.changed() => {
                let state = *lease_state.borrow_and_update();
                return Some(if state.expired {
                    StintInput::LeaseEnded
                } else {
                    StintInput::Renewed(state.deadline)
                });
            }
            Ok(_) = watches.key_gone.wait_for(|gone| *gone) => return Some(StintInput::OwnKeyGone),
            Ok(()) = watches.next.changed() => {
                return Some(StintInput::NextInLine(watches.next.borrow_and_update().clone()));
            }
            Ok(()) = watches.switchover.changed() => Woke::Switchover,
            () = sleep_until(look_at) => Woke::LookTime,
            Ok(()) = self.priority.changed() => Woke::Priority,
            Ok(()) = self.reporter.view.changed() => {
                let view = self.reporter.view.borrow_and_update();
                return Some(StintInput::Viewed {
                    ours: view.leader.as_ref().is_some_and(|l| l.key == own_key),
                    revision: view.revision,
                    current: view.current,
                });
            }
        };
        match woke {
            Woke::Switchover => {
                let steer = watches.switchover.borrow_and_update().clone();
                if let Some(s) = steer
                    .as_ref()
                    .filter(|s| s.manual && s.target.key == own_key)
                {
                    // A resignation does not wait for the pin (a cut-off
                    // leader must stop leading at once).
                    let resign = self.resign.clone();
                    tokio::select! {
                        () = self.pin(watches, &s.target) => {}
                        () = resign.cancelled() => return Some(StintInput::Resign),
                        () = until_or_never(until) => return None,
                    }
                }
                Some(StintInput::Switchover(steer))
            }
            Woke::LookTime => {
                // Nor for a failback's read.
                let own = watches.own.clone();
                let resign = self.resign.clone();
                tokio::select! {
                    () = self.look_for_failback(watches, &own) => None,
                    () = resign.cancelled() => Some(StintInput::Resign),
                    // Nor the deadline: the stint steps down on time.
                    () = until_or_never(until) => None,
                }
            }
            Woke::Priority => {
                watches.failback.set_own(*self.priority.borrow_and_update());
                watches.look_at = BootInstant::now();
                None
            }
        }
    }
}

/// Sleeps until `until`, or for ever.
async fn until_or_never(until: Option<BootInstant>) {
    match until {
        Some(at) => sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// What woke a leader that the stint needs more than an input for.
enum Woke {
    Switchover,
    LookTime,
    Priority,
}

impl Candidate {
    /// A manual switchover chose us: we pin ourselves (bound to our lease,
    /// so the pin goes when we do), and priorities no longer move us.
    async fn pin(&mut self, watches: &mut LeaderWatches, own: &CandidateKey) {
        if watches.pinned {
            return;
        }
        let options = etcd_client::PutOptions::new().with_lease(own.lease);
        let pin = layout::pin_key(&self.cfg.election);
        let mut kv = self.client.kv_client();
        let put = Box::pin(kv.put(pin, own.key.clone(), Some(options)));
        match tokio::time::timeout(self.cfg.connect_timeout, put).await {
            Ok(Ok(_)) => {
                info!("a switchover chose us: pinned, priorities do not move us");
                watches.pinned = true;
                watches.failback.set_pinned(true);
            }
            _ => warn_counted!("could not pin ourselves after a switchover"),
        }
    }

    /// Reads who waits behind us with which priority, and proposes a
    /// failback when [`Failback`] says so (the stint then gives way as to
    /// any switchover).
    async fn look_for_failback(&mut self, watches: &mut LeaderWatches, own: &CandidateKey) {
        let delay = self.cfg.failback_delay;
        let every = (delay / 4).clamp(Duration::from_millis(200), Duration::from_secs(2));
        let now = BootInstant::now();
        watches.look_at = now + every;
        let read = priority::behind(&self.client, &self.cfg.election, own.create_revision);
        let Ok(Ok((behind, pin))) = tokio::time::timeout(self.cfg.connect_timeout, read).await
        else {
            return;
        };
        watches.pinned = pin.as_deref() == Some(own.key.as_slice());
        watches.failback.set_pinned(watches.pinned);
        // Only elect's candidates can be handed over to, and only up to
        // the first peer's: one cannot step aside (nor is its key ours
        // to delete).
        let seen: Vec<_> = behind
            .iter()
            .take_while(|(k, _)| layout::granted_by_elect(k.lease))
            .map(|(k, p)| (String::from_utf8_lossy(&k.key).into_owned(), *p))
            .collect();
        watches.failback.saw(now, &seen);
        if let Some(at) = watches.failback.next_change() {
            watches.look_at = watches.look_at.min(at.max(now + Duration::from_millis(10)));
        }
        let Some(target) = watches.failback.decide(now) else {
            return;
        };
        let Some(at) = seen.iter().position(|(k, _)| k == target) else {
            return;
        };
        let aside: Vec<&CandidateKey> = behind[..at].iter().map(|(k, _)| k).collect();
        let (target, priority) = &behind[at];
        let proposed = switchover::propose(&self.client, &self.cfg, own, target, &aside);
        match tokio::time::timeout(self.cfg.connect_timeout, proposed).await {
            Ok(Ok(_)) => info!(
                to = target.id.as_str(),
                standing = %priority,
                "handing over to a candidate healthier or of higher priority"
            ),
            Ok(Err(e)) => debug!("failback not proposed: {e}"),
            Err(_) => debug!("failback not proposed in time"),
        }
    }
}

/// What the leader's watches tell the stint.
struct LeaderWatches {
    /// Becomes true once the leader's watch finds our key gone.
    key_gone: watch::Receiver<bool>,
    /// The elect candidate next in line.
    next: watch::Receiver<Option<CandidateKey>>,
    /// The switchover under way.
    switchover: watch::Receiver<Option<Steer>>,
    /// Whether to hand over to a candidate of higher priority.
    failback: Failback,
    /// When to read the line's priorities next.
    look_at: BootInstant,
    /// Whether a manual switchover chose us.
    pinned: bool,
    /// Our key.
    own: CandidateKey,
}

/// The stint's I/O: the renewals' lease state, the leader's watches, the
/// observer's views, resignation; the reporter; the lease's time to live.
struct StintIo<'c, 'l, 't> {
    candidate: &'c mut Candidate,
    lease_state: &'l mut watch::Receiver<LeaseState>,
    watches: LeaderWatches,
    tenure: Tenure<'t>,
    /// Whether we led (the log says "elected" once).
    led: bool,
}

impl Io<Stint> for StintIo<'_, '_, '_> {
    type Request = StintRequest;
    type Outcome = Outcome;

    fn step(&mut self, next: StintNext) -> Step<StintRequest, Outcome> {
        let c = &mut *self.candidate;
        match next {
            StintNext::Lead { deadline } => {
                if !self.led {
                    info!(token = self.tenure.token, "elected");
                    self.led = true;
                }
                c.reporter.leading = true;
                let token = self.tenure.token as u64;
                c.reporter
                    .publish(Leadership::elected(c.cfg.id.clone(), token, deadline));
                Step::Said
            }
            StintNext::Demoted { stop_by, why } => {
                warn_demoted(why);
                c.reporter.demoted(stop_by);
                Step::Said
            }
            StintNext::Ended(StintEnd::Resigned) => Step::Done(Outcome::Resigned { led: true }),
            StintNext::Ended(StintEnd::GaveWay(steer)) => {
                info!(to = steer.target.id.as_str(), "giving way to a switchover");
                Step::Done(Outcome::GaveWay(steer))
            }
            StintNext::Ended(StintEnd::Lost { led, stop_by }) => Step::Done(Outcome::Lost {
                led,
                deadline: stop_by,
            }),
            StintNext::Send(request) => Step::Send(request),
            StintNext::Wait(until) => Step::Wait(until),
        }
    }

    async fn send(&mut self, _: &mut Stint, request: StintRequest) -> Heard<StintInput, Outcome> {
        match request {
            StintRequest::AskLease => {
                let lease = self.tenure.lease;
                Heard::Input(ask_lease(&self.candidate.client, lease, self.lease_state).await)
            }
        }
    }

    async fn wait(&mut self, _: &Stint, until: Option<BootInstant>) -> Heard<StintInput, Outcome> {
        let key = self.tenure.key.as_bytes();
        let heard = self
            .candidate
            .wait_leading(self.lease_state, &mut self.watches, key, until)
            .await;
        heard.map_or(Heard::Nothing, Heard::Input)
    }
}

/// Says why we stopped leading.
fn warn_demoted(why: Demotion) {
    match why {
        Demotion::Lapsed => warn_counted!("lease not renewed before the deadline; stepping down"),
        Demotion::LeaseEnded => warn_counted!("our lease is gone (revoked or expired)"),
        Demotion::KeyGone => {
            warn_counted!("our key is gone from etcd (deleted or its lease revoked)")
        }
        Demotion::OtherLeader => warn_counted!("another leader is seen; our key is gone"),
    }
}

/// Whether our lease still lives, asked by our deadline: `None` when the
/// deadline has passed, or the answer failed or did not come by then.
async fn ask_lease(
    client: &Client,
    lease: i64,
    lease_state: &watch::Receiver<LeaseState>,
) -> StintInput {
    let state = *lease_state.borrow();
    if state.expired {
        return StintInput::LeaseLives(Some(false));
    }
    let left = state.deadline.saturating_duration_since(BootInstant::now());
    if left == Duration::ZERO {
        return StintInput::LeaseLives(None);
    }
    let asked = tokio::time::timeout(
        left,
        Box::pin(client.lease_client().time_to_live(lease, None)),
    )
    .await;
    StintInput::LeaseLives(match asked {
        Ok(Ok(resp)) => Some(resp.ttl() > 0),
        _ => None,
    })
}
