//! Keeping a ZooKeeper session: the loop of syncs whose answers the
//! [`SessionLease`] turns into the leadership deadline, and the session's
//! close.

use std::time::Duration;

use tokio::sync::watch;
use tracing::debug;
use zookeeper_client::{Client, Error as ZkError};

use super::lease::SessionLease;
use super::observe;
use crate::backend::cadence::Cadence;
use crate::clock::{self, BootInstant};
use crate::counters::{PROCESS, warn_counted};

/// Syncs through the ZooKeeper leader for as long as the session lasts,
/// as often as the `cadence` asked for says (see
/// [`SessionLease::renew_every`]), and publishes the leadership deadline
/// the answers prove (see [`SessionLease`]). Each sync is sent only after
/// the previous one was answered or given up, as the lease's argument
/// needs; a change of cadence sends the next sync at once.
///
/// A sync is waited for up to a session timeout, not given up soon: the
/// session's requests are answered in order, so a sync behind a queue of
/// the session's own requests (a thousand elections starting at once)
/// would be answered no sooner for another sent behind it, and its late
/// answer still proves its send time. Given up after two renewal periods,
/// as before, every sync behind such a queue went unheard and the lease
/// lapsed for nothing. A member that stops answering is the library's to
/// notice (the connection timeout): it fails the sync, and the next one
/// goes to the member it moves to.
pub(super) async fn keep_session(
    client: Client,
    mut lease: SessionLease,
    out: watch::Sender<Option<BootInstant>>,
    mut cadence: watch::Receiver<Cadence>,
) {
    let patience = client.session_timeout();
    loop {
        let every = lease.renew_every(*cadence.borrow_and_update());
        let sent = BootInstant::now();
        match tokio::time::timeout(patience, client.sync("/")).await {
            Ok(Ok(())) => {
                lease.renewed(sent, BootInstant::now());
                PROCESS.renewed();
                out.send_replace(lease.deadline());
            }
            Ok(Err(e @ (ZkError::SessionExpired | ZkError::ClientClosed))) => {
                debug!("session keeper: {e}");
                return;
            }
            Ok(Err(e)) => debug!("session sync: {e}"),
            Err(_) => debug!("session sync unanswered"),
        }
        tokio::select! {
            () = clock::sleep_until(sent + every) => {}
            Ok(()) = cadence.changed() => {}
        }
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
