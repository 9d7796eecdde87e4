//! Our znode: its creation, protected against lost replies (Curator's
//! protected mode), its ACLs, and the synced read and the watch that tell
//! whether it is still ours. What the wait for our turn and the stint
//! both ask of it.

use std::future::Future;

use tracing::debug;
use zookeeper_client::{
    Acl, Acls, AuthId, Client, CreateMode, Error as ZkError, Permission, WatchedEvent,
};

use super::errors::zk_error;
use super::layout;
use crate::backend::backoff::Backoff;
use crate::backend_kind::Backend;
use crate::clock::BootInstant;
use crate::credentials::User;
use crate::error::{Error, Result};

/// ZooKeeper refused us a znode under `election` (NoAuth).
fn not_allowed(election: &str, e: ZkError) -> Error {
    Error::Auth {
        backend: Backend::Zk,
        detail: format!(
            "not allowed to create under {election} ({e}): its ACL does not let this identity \
             create; use the credentials (--user, password) of whoever made it"
        ),
    }
}

/// The ACLs of the znodes we create. With digest credentials: our digest
/// identity may do anything, everyone else may only read. Deleting a child
/// needs DELETE on its parent, so a parent made with these ACLs keeps
/// strangers from deleting the leader's znode. The identity is named
/// explicitly (`digest:user:hash`) rather than as `auth`, which would also
/// grant the session's other identities (the x509 one of a TLS client
/// certificate that others may share). Without credentials: open to all,
/// as Curator and kazoo do by default.
pub(super) fn acls(user: Option<&User>) -> Vec<Acl> {
    match user {
        Some(user) => vec![
            Acl::new(Permission::ALL, AuthId::new("digest", &digest_id(user))),
            Acl::new(Permission::READ, AuthId::anyone()),
        ],
        None => Acls::anyone_all().to_vec(),
    }
}

/// ZooKeeper's digest identity: `user:base64(sha1(user:password))`.
fn digest_id(user: &User) -> String {
    use base64::Engine;
    let text = format!("{}:{}", user.name(), user.password().expose());
    let hash = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, text.as_bytes());
    format!(
        "{}:{}",
        user.name(),
        base64::engine::general_purpose::STANDARD.encode(hash.as_ref())
    )
}

/// Our znode, just created.
pub(super) struct Created {
    pub path: String,
    /// Our fencing token: its creation's zxid (czxid).
    pub token: u64,
    /// When the request that proved it ours was sent: the create itself,
    /// or the synced read that found it after a lost reply (see
    /// [`WaitForTurn::created_at`](super::recipe::WaitForTurn::created_at)).
    pub proven_at: BootInstant,
}

/// Creates our znode, protected against lost replies: its path, our
/// fencing token and when it was proven ours.
///
/// The token is the creation's zxid (czxid).
/// Not its sequence number, which Curator's naming puts in its name: that
/// counts per parent, and starts again at 0 when the parent is deleted
/// and created again (Curator makes it a container znode, which the
/// server deletes once empty; an operator's `deleteall` does the same),
/// below a frozen old leader's token. A zxid only grows, across parents
/// and ZooKeeper leaders, and orders the znodes of one parent as their
/// sequence numbers do.
///
/// Errors when the session has ended, or when the ACLs forbid us to
/// create it.
pub(super) async fn create_node(
    client: &Client,
    election: &str,
    id: &str,
    user: Option<&User>,
) -> Result<Created> {
    let uuid = layout::fresh_uuid();
    let prefix = layout::candidate_prefix(election, &uuid);
    let acls = acls(user);
    let ephemeral = CreateMode::EphemeralSequential.with_acls(Acls::new(&acls));
    let parent = CreateMode::Persistent.with_acls(Acls::new(&acls));
    let mut backoff = Backoff::new();
    loop {
        let sent = BootInstant::now();
        match client.create(&prefix, id.as_bytes(), &ephemeral).await {
            Ok((stat, sequence)) => {
                return Ok(Created {
                    path: format!("{prefix}{sequence}"),
                    token: stat.czxid as u64,
                    proven_at: sent,
                });
            }
            Err(ZkError::NoNode) => match client.mkdir(election, &parent).await {
                // Created by us or by another candidate meanwhile.
                Ok(()) | Err(ZkError::NodeExists) => continue,
                Err(e @ ZkError::NoAuth) => return Err(not_allowed(election, e)),
                Err(e) => backoff.warn_once(format_args!(
                    "cannot create {election}: {e} (does the chroot of --endpoints exist?)"
                )),
            },
            Err(e @ (ZkError::SessionExpired | ZkError::ClientClosed)) => {
                return Err(zk_error("creating our znode", e));
            }
            Err(e @ ZkError::NoAuth) => return Err(not_allowed(election, e)),
            Err(e) => {
                // The create may have happened with its reply lost (the
                // connection dropped, a timeout): creating again before a
                // listing has answered would queue us twice.
                let sent = BootInstant::now();
                if let Some(name) = find_ours(client, election, &uuid).await? {
                    let path = format!("{election}/{name}");
                    // Behind find_ours's sync in the session's order.
                    match client.check_stat(&path).await {
                        Ok(Some(stat)) if stat.ephemeral_owner == client.session_id().0 => {
                            return Ok(Created {
                                path,
                                token: stat.czxid as u64,
                                proven_at: sent,
                            });
                        }
                        // Gone already (our session moved on and ended):
                        // the session's end is what the caller hears next.
                        // (Another session's cannot bear our fresh uuid.)
                        Ok(_) => {}
                        Err(e) => return Err(zk_error("reading our znode", e)),
                    }
                }
                backoff.warn_once(format_args!("creating our znode: {e}"));
            }
        }
        backoff.wait().await;
    }
}

/// Our znode among the election's children, by the uuid in its name
/// (Curator's protected mode): asks until a synced listing answers.
///
/// A listing alone can miss a create whose reply was lost: the create went
/// out on the old connection, and after the client moved the session to
/// another member the create may still be on its way to the ZooKeeper
/// leader (it passed the session check there before the move) while the
/// new member answers the listing from its own state. The sync goes
/// through the leader's pipeline behind that create, and the listing,
/// sent right after it in the session's order, is served once the member
/// has caught up with the sync: it sees the create if it happened at all.
/// (A create that reaches the leader after the move is refused there:
/// the session has moved.) Seen in the fault suite: a second znode of
/// ours, queued behind the first and waiting on it forever.
///
/// Errors: the session ended.
async fn find_ours(client: &Client, election: &str, uuid: &str) -> Result<Option<String>> {
    let mine = format!("_c_{uuid}-");
    let mut backoff = Backoff::new();
    loop {
        let (synced, listed) = tokio::join!(client.sync(election), client.list_children(election));
        match synced.and(listed) {
            Ok(children) => return Ok(children.into_iter().find(|c| c.starts_with(&mine))),
            Err(ZkError::NoNode) => return Ok(None),
            Err(e @ (ZkError::SessionExpired | ZkError::ClientClosed)) => {
                return Err(zk_error("looking for our znode", e));
            }
            Err(e) => debug!("looking for our znode: {e}"),
        }
        backoff.wait().await;
    }
}

/// A one-shot watch on a znode (ours, or our predecessor's), waiting for
/// its change.
pub(super) type OneShotWatch = std::pin::Pin<Box<dyn Future<Output = WatchedEvent> + Send>>;

/// Arms a watch on our znode; `None` when it is gone or not our session's.
pub(super) async fn watch_own(client: &Client, path: &str) -> Result<Option<OneShotWatch>> {
    match client.check_and_watch_stat(path).await {
        Ok((Some(stat), watcher)) if stat.ephemeral_owner == client.session_id().0 => {
            Ok(Some(Box::pin(watcher.changed())))
        }
        Ok(_) => Ok(None),
        Err(e) => Err(zk_error("watching our znode", e)),
    }
}

/// Whether `path` exists and belongs to our session, as the quorum knows
/// it. The `sync` goes through the ZooKeeper leader and the read is
/// answered after it: a follower cut off from the quorum keeps serving
/// reads until it notices (up to syncLimit ticks), and must not vouch for a
/// session the quorum may be expiring. (A listing read before the sync can
/// only be older, so it can only show more predecessors, never fewer.)
pub(super) async fn owns(client: &Client, path: &str) -> Result<bool> {
    let (synced, stat) = tokio::join!(client.sync(path), client.check_stat(path));
    synced.map_err(|e| zk_error("syncing with the quorum", e))?;
    match stat {
        Ok(Some(stat)) => Ok(stat.ephemeral_owner == client.session_id().0),
        Ok(None) => Ok(false),
        Err(e) => Err(zk_error("reading our znode", e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::credentials::Password;

    #[test]
    fn the_digest_identity_is_zookeepers() {
        // As kazoo's make_digest_acl_credential("super", "secret") and ZooKeeper's
        // DigestAuthenticationProvider.generateDigest compute it.
        let user = User::new("super", Password::new("secret")).unwrap();
        assert_eq!(digest_id(&user), "super:lK75jTNcA+U9vtVEw5vB51mj/w4=");
    }
}
