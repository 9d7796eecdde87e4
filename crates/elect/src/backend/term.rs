//! One term of our leadership as a value a program holds.
//!
//! [`Campaign::elected`] waits until this candidate leads and hands over a
//! [`Term`]: the fencing token to pass along with every write, the local
//! deadline, and a cancellation that fires at any loss and at the deadline
//! if no renewal moved it, so leader-only work can `select!` on it (as
//! client-go hands `OnStartedLeading` a context cancelled on loss). The
//! deadline is the last instant this process may act as leader: it comes
//! before the server could let anyone else lead (see
//! [`crate::leadership::safety_margin`]), so work that stops when the
//! cancellation fires never overlaps a successor's.

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

use super::handle::Campaign;
use crate::clock::{self, BootInstant};
use crate::error::Result;
use crate::leadership::Leadership;

/// One term of our leadership. Dropping it drops the campaign, which
/// resigns in the background; [`Term::resign`] waits for that.
#[must_use = "dropping a Term resigns at once; keep it for as long as you lead"]
pub struct Term {
    campaign: Campaign,
    id: String,
    token: u64,
    lost: CancellationToken,
    watcher: JoinHandle<()>,
}

impl Campaign {
    /// Waits until this candidate leads, and returns the term.
    ///
    /// # Errors
    /// The campaign ended before we were elected: its error, or
    /// [`Error::CampaignEnded`](crate::Error::CampaignEnded).
    ///
    /// # Cancel safety
    /// Not cancel safe: the campaign is consumed, so dropping the future
    /// drops it, which resigns in the background.
    pub async fn elected(self) -> Result<Term> {
        let mut leadership = self.leadership();
        let snapshot = leadership
            .wait_for(|l| l.leads_at(BootInstant::now()))
            .await
            .map(|l| l.clone());
        let Ok(snapshot) = snapshot else {
            // The campaign task ended: learn why.
            return Err(match self.resign().await {
                Err(e) => e,
                Ok(()) => crate::Error::CampaignEnded,
            });
        };
        let token = snapshot.token.unwrap_or(0);
        let lost = CancellationToken::new();
        let watcher = tokio::spawn(watch_term(leadership, token, lost.clone()));
        Ok(Term {
            id: snapshot.leader.unwrap_or_default(),
            token,
            campaign: self,
            lost,
            watcher,
        })
    }
}

/// Cancels `lost` once the snapshots stop saying we lead in the term of
/// `token`, or the deadline passes with no renewal that moves it.
async fn watch_term(
    mut leadership: watch::Receiver<Leadership>,
    token: u64,
    lost: CancellationToken,
) {
    loop {
        let deadline = {
            let l = leadership.borrow_and_update();
            if !l.is_self || l.token != Some(token) {
                break;
            }
            match l.deadline {
                Some(d) if d > BootInstant::now() => d,
                _ => break,
            }
        };
        tokio::select! {
            () = clock::sleep_until(deadline) => {
                // A renewal may have moved the deadline just now.
                if !leadership.borrow().leads_at(BootInstant::now()) {
                    break;
                }
            }
            changed = leadership.changed() => if changed.is_err() { break },
        }
    }
    lost.cancel();
}

impl Term {
    /// The fencing token of this term: pass it with every write the leader
    /// makes, so a store can refuse writes of an older term.
    pub fn token(&self) -> u64 {
        self.token
    }

    /// The id we lead under.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The local deadline now: the last instant we may act as leader. It
    /// moves forward with each acknowledged renewal.
    pub fn deadline(&self) -> BootInstant {
        self.campaign
            .leadership
            .borrow()
            .deadline
            .unwrap_or_else(BootInstant::now)
    }

    /// Whether we still lead in this term (its cancellation has not fired).
    pub fn is_valid(&self) -> bool {
        !self.lost.is_cancelled()
            && self
                .campaign
                .leadership
                .borrow()
                .leads_at(BootInstant::now())
    }

    /// Completes when this term ends: any loss, or the deadline passing
    /// without a renewal.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub fn lost(&self) -> WaitForCancellationFuture<'_> {
        self.lost.cancelled()
    }

    /// A token cancelled when this term ends, to hand to leader-only tasks.
    pub fn cancellation(&self) -> CancellationToken {
        self.lost.child_token()
    }

    /// The campaign's snapshots, as [`Campaign::leadership`] gives them.
    pub fn leadership(&self) -> watch::Receiver<Leadership> {
        self.campaign.leadership()
    }

    /// Ends this term and the campaign: stop leader-only work first. The
    /// successor takes over in round trips.
    ///
    /// # Errors
    /// Only if the campaign had already failed.
    ///
    /// # Cancel safety
    /// Not cancel safe: dropping the future leaves the resignation to
    /// finish in the background.
    pub async fn resign(self) -> Result<()> {
        let Term {
            campaign, watcher, ..
        } = self;
        watcher.abort();
        campaign.resign().await
    }

    /// The campaign, to wait for a later term with [`Campaign::elected`]
    /// (after this one was lost).
    pub fn into_campaign(self) -> Campaign {
        self.watcher.abort();
        self.campaign
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn leading(token: u64, for_: Duration) -> Leadership {
        Leadership::elected("a".into(), token, BootInstant::now() + for_)
    }

    #[tokio::test]
    async fn the_term_ends_at_a_loss() {
        let (tx, rx) = watch::channel(leading(7, Duration::from_secs(60)));
        let lost = CancellationToken::new();
        let watcher = tokio::spawn(watch_term(rx, 7, lost.clone()));
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!lost.is_cancelled());
        tx.send_replace(Leadership::observed(Some(("b".into(), 8))));
        tokio::time::timeout(Duration::from_secs(5), lost.cancelled())
            .await
            .expect("cancelled at the loss");
        watcher.await.unwrap();
    }

    #[tokio::test]
    async fn the_term_ends_at_a_deadline_no_renewal_moved() {
        let (tx, rx) = watch::channel(leading(7, Duration::from_millis(150)));
        let lost = CancellationToken::new();
        let started = BootInstant::now();
        tokio::spawn(watch_term(rx, 7, lost.clone()));
        // One renewal moves the deadline; then silence.
        tokio::time::sleep(Duration::from_millis(50)).await;
        tx.send_replace(leading(7, Duration::from_millis(150)));
        tokio::time::timeout(Duration::from_secs(5), lost.cancelled())
            .await
            .expect("cancelled at the deadline");
        let took = BootInstant::now() - started;
        assert!(took >= Duration::from_millis(195), "{took:?}");
    }

    #[tokio::test]
    async fn a_new_term_of_ours_is_a_different_term() {
        let (tx, rx) = watch::channel(leading(7, Duration::from_secs(60)));
        let lost = CancellationToken::new();
        tokio::spawn(watch_term(rx, 7, lost.clone()));
        tx.send_replace(leading(9, Duration::from_secs(60)));
        tokio::time::timeout(Duration::from_secs(5), lost.cancelled())
            .await
            .expect("token 9 is not our term");
    }
}
