//! Priorities and health in ZooKeeper (see [`crate::steer`]): each
//! candidacy whose standing is not the default (priority 1, healthy)
//! publishes it ([`Standing::encode`]) in an ephemeral child of the
//! election, `priority-<its sequence>` ([`layout::priority_node`]), which
//! no recipe counts as a participant; Curator's and kazoo's candidates
//! have none and count as default.

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::debug;
use zookeeper_client::{Acls, Client, CreateMode, Error as ZkError};

use super::layout;
use super::znode::acls;
use crate::backend::backoff::Backoff;
use crate::credentials::User;
use crate::steer::Standing;

/// Keeps the priority znode of our candidacy (`sequence`) as `wished`
/// says, until aborted; [`unpublish`] removes it then.
pub fn publish(
    client: Client,
    election: &str,
    sequence: u64,
    user: Option<User>,
    mut wished: watch::Receiver<Standing>,
) -> JoinHandle<()> {
    let path = layout::priority_node(election, sequence);
    tokio::spawn(async move {
        let acls = acls(user.as_ref());
        let ephemeral = CreateMode::Ephemeral.with_acls(Acls::new(&acls));
        let mut published = Standing::DEFAULT;
        loop {
            let want = *wished.borrow_and_update();
            let mut backoff = Backoff::new();
            while want != published {
                let data = want.encode();
                let done = match (published == Standing::DEFAULT, want == Standing::DEFAULT) {
                    (_, true) => match client.delete(&path, None).await {
                        Ok(()) | Err(ZkError::NoNode) => Ok(()),
                        Err(e) => Err(e),
                    },
                    (true, false) => client
                        .create(&path, data.as_bytes(), &ephemeral)
                        .await
                        .map(|_| ()),
                    (false, false) => client
                        .set_data(&path, data.as_bytes(), None)
                        .await
                        .map(|_| ()),
                };
                match done {
                    Ok(()) => {
                        debug!(standing = %want, "priority published");
                        published = want;
                    }
                    Err(ZkError::SessionExpired | ZkError::ClientClosed) => return,
                    Err(e) => {
                        debug!("publishing our priority: {e}");
                        backoff.wait().await;
                    }
                }
            }
            if wished.changed().await.is_err() {
                return;
            }
        }
    })
}

/// Removes our candidacy's priority znode, if any (it would otherwise
/// stay until the session ends).
pub async fn unpublish(client: &Client, election: &str, sequence: u64) {
    let path = layout::priority_node(election, sequence);
    match client.delete(&path, None).await {
        Ok(()) | Err(ZkError::NoNode) => {}
        Err(e) => debug!("removing our priority: {e}"),
    }
}
