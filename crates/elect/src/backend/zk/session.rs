//! One ZooKeeper session that many elections share: what
//! [`crate::backend::Session`] opens on ZooKeeper.

use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use zookeeper_client::Client;

use super::campaign::{Candidacy, SessionEnd};
use super::connection::Opened;
use super::keeper::{close, keep_session};
use super::observe::{self, Follower, View};
use crate::backend::cadence::Cadence;
use crate::backend::candidates::Candidates;
use crate::backend::publish::Reporter;
use crate::backend_kind::Backend;
use crate::clock::BootInstant;
use crate::config::ElectionConfig;
use crate::error::{Error, Result};
use crate::leadership::Leadership;
use crate::work::WorkWatch;

/// One ZooKeeper session that many elections share: one client, one sync
/// loop proving the session alive (so one leadership deadline for every
/// election on it), and a candidate per election, each watching only its
/// predecessor in its own election. When the session ends, every
/// candidate on it ends with [`Error::SessionEnded`].
pub(crate) struct SharedSession {
    client: Client,
    lease: watch::Receiver<Option<BootInstant>>,
    keeper: tokio::task::JoinHandle<()>,
    connect_timeout: Duration,
    candidates: Candidates,
}

impl SharedSession {
    pub(crate) fn start(opened: Opened, connect_timeout: Duration) -> SharedSession {
        let Opened { client, lease } = opened;
        let (lease_tx, lease_rx) = watch::channel(lease.deadline());
        // Its elections lead or are next in line at any time: one session,
        // renewed as a leader's (the sender may go: the cadence stays).
        let cadence = watch::channel(Cadence::Leading).1;
        let keeper = tokio::spawn(keep_session(client.clone(), lease, lease_tx, cadence));
        SharedSession {
            client,
            lease: lease_rx,
            keeper,
            connect_timeout,
            candidates: Candidates::new(),
        }
    }

    /// Campaigns in `cfg`'s election on this session until resignation
    /// (our znode deleted) or the end of the session: the token that asks
    /// it to resign, and its task.
    pub(crate) fn campaign(
        &self,
        cfg: ElectionConfig,
        out: watch::Sender<Leadership>,
        work: WorkWatch,
    ) -> (CancellationToken, tokio::task::JoinHandle<Result<()>>) {
        let client = self.client.clone();
        let lease = self.lease.clone();
        self.candidates.spawn(|resign| async move {
            let (view_tx, view_rx) = watch::channel(View::unknown());
            let mut session = Candidacy {
                client: &client,
                cfg: &cfg,
                reporter: Reporter::new(out.clone(), view_rx),
                follower: Follower::new(&cfg.election, view_tx),
                work,
                resign: &resign,
                state: client.state_watcher(),
                lease,
                cadence: None,
                priority: watch::channel(crate::steer::Standing::healthy(cfg.priority)).1,
            };
            let end = session.campaign().await;
            session.follower.stop().await;
            out.send_replace(Leadership::unknown());
            match end {
                SessionEnd::Resigned => Ok(()),
                SessionEnd::Refused(e) => Err(e),
                SessionEnd::Ended => Err(Error::SessionEnded {
                    backend: Backend::Zk,
                }),
            }
        })
    }

    /// Whether the session still lives.
    pub(crate) fn is_alive(&self) -> bool {
        !observe::is_terminal(self.client.state())
    }

    /// Closes the session: every candidate on it resigns first (their
    /// znodes deleted), then the session ends.
    pub(crate) async fn close(self) {
        self.candidates.close(self.connect_timeout).await;
        self.keeper.abort();
        let _ = self.keeper.await;
        close(self.client, self.connect_timeout).await;
    }
}
