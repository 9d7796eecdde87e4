//! Keeping a ZooKeeper session: the loop of syncs whose answers the
//! [`SessionLease`] turns into the leadership deadline, and the session's
//! close.

use std::time::Duration;

use tokio::sync::watch;
use tracing::debug;
use zookeeper_client::{Client, Error as ZkError};

use super::lease::SessionLease;
use super::observe;
use crate::clock::{self, BootInstant};
use crate::counters::{PROCESS, warn_counted};

/// Syncs through the ZooKeeper leader when the lease asks for a renewal
/// ([`SessionLease::next_renewal`]: in pairs, a pair every T/9) for as long
/// as the session lasts, and publishes the leadership deadline the answers
/// prove (see [`SessionLease`]). Each sync is sent only after the previous
/// one was answered or given up, as the lease's argument needs.
///
/// A sync is waited for up to a session timeout, not given up soon: the
/// session's requests are answered in order, so a sync behind a queue of
/// the session's own requests (a thousand elections starting at once)
/// would be answered no sooner for another sent behind it, and its late
/// answer still proves its send time. Given up after two renewal periods,
/// as before, every sync behind such a queue went unheard and the lease
/// lapsed for nothing. A member that stops answering is the library's to
/// notice (the connection timeout): it fails the sync, and the next one
/// goes to the member it moves to, soon after (`retry_after`).
pub(super) async fn keep_session(
    client: Client,
    mut lease: SessionLease,
    out: watch::Sender<Option<BootInstant>>,
) {
    let patience = client.session_timeout();
    loop {
        let sent = BootInstant::now();
        let next = match tokio::time::timeout(patience, client.sync("/")).await {
            Ok(Ok(())) => {
                let answered = BootInstant::now();
                lease.renewed(sent, answered);
                PROCESS.renewed();
                out.send_replace(lease.deadline());
                lease.next_renewal(answered)
            }
            Ok(Err(e @ (ZkError::SessionExpired | ZkError::ClientClosed))) => {
                debug!("session keeper: {e}");
                return;
            }
            failed => {
                match failed {
                    Ok(Err(e)) => debug!("session sync: {e}"),
                    _ => debug!("session sync unanswered"),
                }
                lease.missed();
                sent + lease.retry_after()
            }
        };
        clock::sleep_until(next).await;
    }
}

/// Closes the session: dropping the last clone of the client makes the
/// library send CloseSession, which also removes anything ephemeral we
/// might have left; waits (at most `within`) until the server confirmed.
pub(super) async fn close(client: Client, within: Duration) {
    let mut state = client.state_watcher();
    drop(client);
    let closed = async {
        while !observe::is_terminal(state.state()) {
            state.changed().await;
        }
    };
    if tokio::time::timeout(within, closed).await.is_err() {
        warn_counted!("closing the ZooKeeper session timed out; it will expire");
    } else {
        debug!("ZooKeeper session closed");
    }
}
