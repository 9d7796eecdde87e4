//! How a candidate turns what it observes into the snapshots it publishes,
//! the same for every backend.

use crate::clock::BootInstant;
use tokio::sync::watch;

use crate::leadership::Leadership;

/// A backend's view of who leads, as its observer publishes it.
pub trait Observed: Clone + Send + Sync {
    /// Whether the view names the candidate with `key` (a key or znode
    /// path) as the leader.
    fn names_leader(&self, key: &[u8]) -> bool;
    /// The view as a snapshot of someone else's leadership.
    fn to_leadership(&self) -> Leadership;
}

/// Replaces the value behind `tx` with `next`, waking receivers only if it
/// differs; whether it did.
pub fn publish_if_changed<T: PartialEq>(tx: &watch::Sender<T>, next: T) -> bool {
    tx.send_if_modified(|cur| {
        let changed = *cur != next;
        *cur = next;
        changed
    })
}

/// Republishes an observer's views as snapshots until either side is gone.
pub async fn publish_views<V: Observed>(
    mut views: watch::Receiver<V>,
    out: watch::Sender<Leadership>,
) {
    loop {
        let next = views.borrow_and_update().to_leadership();
        publish_if_changed(&out, next);
        if views.changed().await.is_err() {
            return;
        }
    }
}

/// Publishes a candidate's snapshots.
pub struct Reporter<V> {
    out: watch::Sender<Leadership>,
    pub view: watch::Receiver<V>,
    /// Our key in the current candidacy: shown as leader only once confirmed.
    pub own_key: Vec<u8>,
    pub leading: bool,
}

impl<V: Observed> Reporter<V> {
    pub fn new(out: watch::Sender<Leadership>, view: watch::Receiver<V>) -> Self {
        Reporter {
            out,
            view,
            own_key: Vec::new(),
            leading: false,
        }
    }

    pub fn publish(&self, next: Leadership) {
        publish_if_changed(&self.out, next);
    }

    /// Shows who leads while we do not.
    pub fn show_view(&mut self) {
        let view = self.view.borrow_and_update().clone();
        if self.leading || view.names_leader(&self.own_key) {
            // Our own key leads only once confirmed; until then keep the
            // previous snapshot rather than show ourselves as someone else.
            return;
        }
        self.publish(view.to_leadership());
    }

    /// Reports the loss of our leadership; the work must stop by `deadline`.
    pub fn demoted(&mut self, deadline: BootInstant) {
        self.leading = false;
        let view = self.view.borrow().clone();
        let mut snapshot = if view.names_leader(&self.own_key) {
            Leadership::unknown()
        } else {
            view.to_leadership()
        };
        snapshot.deadline = Some(deadline);
        self.publish(snapshot);
    }
}
