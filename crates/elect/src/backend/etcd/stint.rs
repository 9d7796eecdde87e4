//! Leading: the I/O of the [`Stint`] recipe, from the confirmation of our
//! key until we resign or may no longer lead. The stint decides; this
//! publishes what it says, hands it the renewals, our key's watch, the
//! observer's views and resignation, and asks etcd whether our lease
//! lives when it wants to know.

use std::time::Duration;

use etcd_client::Client;
use tokio::sync::watch;
use tracing::info;

use super::bounds::WatchBounds;
use super::campaign::{Candidate, Outcome, Tenure};
use super::handover::LeaderWatch;
use super::layout::{self, CandidateKey};
use super::recipe::{Demotion, Stint, StintEnd, StintInput, StintNext, StintRequest};
use super::renewal::LeaseState;
use crate::backend::recipe::Recipe;
use crate::clock::{BootInstant, sleep_until};
use crate::counters::warn_counted;
use crate::leadership::Leadership;

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
        let bounds = WatchBounds::new(self.cfg.connect_timeout);
        let prefix = layout::prefix(&self.cfg.election);
        let watch = LeaderWatch::start(self.client.clone(), prefix, own, bounds);
        let mut key_gone = watch.key_gone();
        self.leader_watch = Some(watch);
        let mut led = false;
        loop {
            let input = match stint.poll(BootInstant::now()) {
                StintNext::Lead { deadline } => {
                    if !led {
                        info!(token = tenure.token, "elected");
                        led = true;
                    }
                    self.reporter.leading = true;
                    let us =
                        Leadership::elected(self.cfg.id.clone(), tenure.token as u64, deadline);
                    self.reporter.publish(us);
                    continue;
                }
                StintNext::Demoted { stop_by, why } => {
                    warn_demoted(why);
                    self.reporter.demoted(stop_by);
                    continue;
                }
                StintNext::Ended(StintEnd::Resigned) => return Outcome::Resigned { led: true },
                StintNext::Ended(StintEnd::Lost { led, stop_by }) => {
                    return Outcome::Lost {
                        led,
                        deadline: stop_by,
                    };
                }
                StintNext::Send(StintRequest::AskLease) => {
                    ask_lease(&self.client, tenure.lease, lease_state).await
                }
                StintNext::Wait(until) => {
                    let key = tenure.key.as_bytes();
                    match self
                        .wait_leading(lease_state, &mut key_gone, key, until)
                        .await
                    {
                        Some(input) => input,
                        None => continue,
                    }
                }
            };
            stint.input(BootInstant::now(), input);
        }
    }

    /// Waits, at most `until`, for what the stint hears: resignation, a
    /// renewal or the lease's end, our key's loss, or a view. `None`: the
    /// time came, or nothing for the stint.
    async fn wait_leading(
        &mut self,
        lease_state: &mut watch::Receiver<LeaseState>,
        key_gone: &mut watch::Receiver<bool>,
        own_key: &[u8],
        until: Option<BootInstant>,
    ) -> Option<StintInput> {
        let wake = async {
            match until {
                Some(at) => sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = self.resign.cancelled() => Some(StintInput::Resign),
            () = wake => None,
            Ok(()) = lease_state.changed() => {
                let state = *lease_state.borrow_and_update();
                Some(if state.expired {
                    StintInput::LeaseEnded
                } else {
                    StintInput::Renewed(state.deadline)
                })
            }
            Ok(_) = key_gone.wait_for(|gone| *gone) => Some(StintInput::OwnKeyGone),
            Ok(()) = self.reporter.view.changed() => {
                let view = self.reporter.view.borrow_and_update();
                Some(StintInput::Viewed {
                    ours: view.leader.as_ref().is_some_and(|l| l.key == own_key),
                    revision: view.revision,
                    current: view.current,
                })
            }
        }
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
