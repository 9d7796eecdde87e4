//! Switchovers in ZooKeeper (see [`crate::steer`]): the line as a
//! listing sees it, the record `elect switchover` creates, and the
//! leader's watch on it.
//!
//! The record is an ephemeral child of the election,
//! [`layout::switchover_record`], of the command's own session: a
//! command that ends, however it ends, takes it with it (it closes its
//! session; a killed one's expires), so a switchover that is over never
//! acts. Creating it takes the election's CREATE permission, which is
//! what joining takes: whoever may campaign may switch over, nobody else.
//! It names no recipe's marker, so no recipe counts it as a participant
//! (Curator's `getParticipants` lists it while it lives).
//!
//! One multi creates the record, checks that the leader's and the
//! target's znodes still exist, and deletes the znodes between them:
//! those candidates (elect's only; [`Line::plan`](crate::steer::Line::plan)
//! refuses otherwise) campaign again within their sessions, behind the
//! target. The leader, once the target is its next in line, stops its
//! work and deletes its znode in a multi that checks the record still
//! exists ([`Stint`](super::recipe::Stint)'s rule 5); the target, which
//! waits on the leader's znode, leads with a higher czxid.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio_util::task::AbortOnDropHandle;
use tracing::debug;
use zookeeper_client::{Client, CreateMode, Error as ZkError, MultiWriteError};

use super::connection::first_contact;
use super::errors::zk_error;
use super::keeper::close;
use super::layout::{self, Participant};
use super::recipe::Steer;
use super::znode::acls;
use crate::backend::backoff::Backoff;
use crate::backend_kind::Backend;
use crate::config::ElectionConfig;
use crate::error::{Error, Result};
use crate::steer::{
    InLine, Line, Outcome, Refusal, Report, Standing, Started, Target, WITHDRAWAL_WITHIN,
    fresh_identity,
};

/// The record's data.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Record {
    switchover: String,
    from: String,
    to: String,
    /// The target's znode name and sequence number.
    target: String,
    target_sequence: u64,
    /// An operator's switchover (the target pins itself), not a leader's
    /// failback.
    #[serde(default = "operators")]
    manual: bool,
}

fn operators() -> bool {
    true
}

/// One participant as a listing and a read of its znode found it.
#[derive(Debug, Clone)]
pub(super) struct Placed {
    pub participant: Participant,
    pub id: String,
    /// Its czxid: the token it leads with.
    pub token: u64,
    /// Its priority and health (the default where it published none).
    pub standing: Standing,
}

/// One participant as a listing found it, with its priority and health
/// (the default where it published none); its znode unread.
#[derive(Debug, Clone)]
pub(super) struct Listed {
    pub participant: Participant,
    pub standing: Standing,
}

/// The participants of the election, in line order, with their
/// priorities, and the pin's data: one listing, and a read of each
/// priority published (few: the default publishes none) and of the pin.
/// What a leader's failback looks at every few seconds; reading every
/// participant's znode as well made a leader's cost grow with the line
/// (half a read per candidate per second, beside a follower's 1.6 at a
/// TTL of 10 s).
pub(super) async fn read_standings(
    client: &Client,
    election: &str,
) -> Result<(Vec<Listed>, Option<String>)> {
    let children = match client.list_children(election).await {
        Ok(children) => children,
        Err(ZkError::NoNode) => return Ok((Vec::new(), None)),
        Err(e) => return Err(zk_error("listing the election", e)),
    };
    let mut priorities = std::collections::BTreeMap::new();
    for sequence in children.iter().filter_map(|c| layout::priority_of(c)) {
        let path = layout::priority_node(election, sequence);
        if let Ok((data, _)) = client.get_data(&path).await
            && let Some(priority) = std::str::from_utf8(&data).ok().and_then(Standing::decode)
        {
            priorities.insert(sequence, priority);
        }
    }
    let pin = match children.iter().any(|c| c == "pinned") {
        true => client
            .get_data(&layout::pin_node(election))
            .await
            .ok()
            .map(|(data, _)| String::from_utf8_lossy(&data).into_owned()),
        false => None,
    };
    let listed = layout::queue(&children)
        .into_iter()
        .map(|participant| Listed {
            standing: priorities
                .get(&participant.sequence)
                .copied()
                .unwrap_or_default(),
            participant,
        })
        .collect();
    Ok((listed, pin))
}

/// The participants of the election, in line order, each read with its
/// priority (one gone meanwhile is left out), and the pin's data.
pub(super) async fn read_line(
    client: &Client,
    election: &str,
) -> Result<(Vec<Placed>, Option<String>)> {
    let (listed, pin) = read_standings(client, election).await?;
    let mut placed = Vec::new();
    for Listed {
        participant,
        standing,
    } in listed
    {
        let path = format!("{election}/{}", participant.name);
        match client.get_data(&path).await {
            Ok((data, stat)) => placed.push(Placed {
                standing,
                participant,
                id: String::from_utf8_lossy(&data).into_owned(),
                token: stat.czxid as u64,
            }),
            Err(ZkError::NoNode) => {}
            Err(e) => return Err(zk_error("reading a participant", e)),
        }
    }
    Ok((placed, pin))
}

fn as_line(election: &str, placed: &[Placed]) -> Line {
    Line {
        backend: Backend::Zk,
        election: election.to_owned(),
        candidates: placed
            .iter()
            .enumerate()
            .map(|(i, p)| InLine {
                id: p.id.clone(),
                token: Some(p.token),
                live: true,
                leads: i == 0,
                priority: p.standing.priority,
                healthy: p.standing.healthy,
                by: layout::made_by(&p.participant.name),
            })
            .collect(),
    }
}

/// Reads the line once.
///
/// Errors: [`Error::Unreachable`] when no session can be established.
pub async fn line(cfg: &ElectionConfig) -> Result<Line> {
    let client = first_contact(cfg).await?.client;
    let read = read_line(&client, &cfg.election).await;
    close(client, cfg.connect_timeout).await;
    Ok(as_line(&cfg.election, &read?.0))
}

/// Moves leadership to `to` within `timeout` (see the module's doc).
///
/// Errors: [`Error::SwitchoverRefused`] before anything changed;
/// [`Error::Auth`] when the election's ACLs forbid the record;
/// [`Error::Unreachable`]. A switchover that started says how it ended
/// in its [`Report`].
pub async fn switchover(cfg: &ElectionConfig, to: &Target, timeout: Duration) -> Result<Report> {
    let started = Instant::now();
    let client = first_contact(cfg).await?.client;
    let done = run(&client, cfg, to, started, timeout).await;
    // The record goes with the session (unanswered, when it expires).
    close(client, cfg.connect_timeout.min(WITHDRAWAL_WITHIN)).await;
    done
}

async fn run(
    client: &Client,
    cfg: &ElectionConfig,
    to: &Target,
    started: Instant,
    timeout: Duration,
) -> Result<Report> {
    let refused = |refusal| Error::SwitchoverRefused {
        election: cfg.election.clone(),
        refusal,
    };
    let (placed, _) = read_line(client, &cfg.election).await?;
    let plan = as_line(&cfg.election, &placed).plan(to).map_err(refused)?;
    let (leader, target) = (&placed[plan.leader], &placed[plan.target]);
    let begun = Started::new(started, &leader.id, &target.id);
    if plan.nothing_to_do() {
        return Ok(begun.nothing_to_do(target.token));
    }
    let record = Record {
        switchover: begun.identity.clone(),
        from: leader.id.clone(),
        to: target.id.clone(),
        target: target.participant.name.clone(),
        target_sequence: target.participant.sequence,
        manual: true,
    };
    let aside: Vec<&Placed> = plan.step_aside.iter().map(|&i| &placed[i]).collect();
    // Every step is held to the timeout: a server that does not answer
    // must not keep the command past it (the record, if it landed, goes
    // with the session).
    let until = tokio::time::Instant::from_std(started + timeout);
    let recording = record_it(client, cfg, &record, [leader, target], &aside);
    tokio::time::timeout_at(until, recording)
        .await
        .map_err(|_| cfg.unreachable("recording the switchover: no answer by the timeout"))?
        .map_err(|e| match e {
            Recording::Refused(refusal) => refused(refusal),
            Recording::Failed(e) => e,
        })?;
    debug!(switchover = %begun.identity, "switchover recorded");
    let mut outcome = wait_for(client, &cfg.election, target, until).await;
    // First in line is ZooKeeper's word; that an elect target leads is
    // its own, said by its pin (a target paused or cut off is first in
    // line and leads nobody).
    if matches!(outcome, Outcome::Done { .. })
        && layout::made_by(&target.participant.name) == "elect"
        && !wait_for_pin(client, &cfg.election, &target.participant.name, until).await
    {
        outcome = not_done(
            "the target is first in line but did not take leadership by the timeout (paused, or cut off?)",
            Some(target),
        );
    }
    Ok(begun.ended(outcome))
}

/// Waits, until `until`, for the target to pin itself: it leads, and read
/// the record naming it, so no failback undoes the operator's choice (the
/// record must live until then). Whether it did.
async fn wait_for_pin(
    client: &Client,
    election: &str,
    target: &str,
    until: tokio::time::Instant,
) -> bool {
    let pin = layout::pin_node(election);
    loop {
        // A server that does not answer holds no read past the timeout.
        if let Ok(Ok((data, _))) = tokio::time::timeout_at(until, client.get_data(&pin)).await
            && data == target.as_bytes()
        {
            return true;
        }
        if tokio::time::Instant::now() >= until {
            debug!("the target did not pin itself in time");
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A leader's own switchover to `target` (a failback, see
/// [`crate::steer::Failback`]): the record on the leader's session, with
/// the candidates in `aside` stepping aside, as `elect switchover` does.
/// The leader removes it once it has given way.
///
/// Errors: the line changed, or the request failed.
pub(super) async fn propose(
    client: &Client,
    cfg: &ElectionConfig,
    leader: &Placed,
    target: &Placed,
    aside: &[&Placed],
) -> Result<()> {
    let record = Record {
        switchover: fresh_identity(),
        from: leader.id.clone(),
        to: target.id.clone(),
        target: target.participant.name.clone(),
        target_sequence: target.participant.sequence,
        manual: false,
    };
    record_it(client, cfg, &record, [leader, target], aside)
        .await
        .map_err(|e| match e {
            Recording::Refused(refusal) => Error::SwitchoverRefused {
                election: cfg.election.clone(),
                refusal,
            },
            Recording::Failed(e) => e,
        })
}

/// Removes the switchover record if our session made it (our own
/// failback, once we have given way).
pub(super) async fn withdraw_own(client: &Client, election: &str) {
    let path = layout::switchover_record(election);
    if let Ok(Some(stat)) = client.check_stat(&path).await
        && stat.ephemeral_owner == client.session_id().0
        && let Err(e) = client.delete(&path, Some(stat.version)).await
    {
        debug!("removing our failback's record: {e}");
    }
}

/// Why the record was not created.
enum Recording {
    Refused(Refusal),
    Failed(Error),
}

/// The one multi that creates the record, checks the leader and the
/// target are still there, and deletes the znodes between them.
async fn record_it(
    client: &Client,
    cfg: &ElectionConfig,
    record: &Record,
    standing: [&Placed; 2],
    aside: &[&Placed],
) -> std::result::Result<(), Recording> {
    let election = &cfg.election;
    let path = layout::switchover_record(election);
    let data = serde_json::to_vec(record).expect("a record serializes");
    let acls = acls(cfg.user.as_ref());
    let ephemeral = CreateMode::Ephemeral.with_acls(zookeeper_client::Acls::new(&acls));
    let mut multi = client.new_multi_writer();
    let op = |e: ZkError| Recording::Failed(zk_error("recording the switchover", e));
    multi.add_create(&path, &data, &ephemeral).map_err(op)?;
    for p in standing {
        let at = format!("{election}/{}", p.participant.name);
        multi.add_check_version(&at, -1).map_err(op)?;
    }
    for p in aside {
        let at = format!("{election}/{}", p.participant.name);
        multi.add_delete(&at, None).map_err(op)?;
    }
    match multi.commit().await {
        Ok(_) => Ok(()),
        Err(MultiWriteError::OperationFailed {
            index: 0,
            source: ZkError::NodeExists,
        }) => Err(Recording::Refused(Refusal::Busy)),
        Err(MultiWriteError::OperationFailed {
            source: ZkError::NoNode,
            ..
        }) => Err(Recording::Refused(Refusal::LineChanged)),
        Err(MultiWriteError::OperationFailed {
            source: ZkError::NoAuth,
            ..
        }) => Err(Recording::Failed(Error::Auth {
            backend: Backend::Zk,
            detail: format!(
                "not allowed to switch over in {election}: the election's ACLs deny this identity CREATE or DELETE"
            ),
        })),
        Err(e) => Err(op(e.into())),
    }
}

/// Waits until `target` leads, leaves, or `until` passes.
async fn wait_for(
    client: &Client,
    election: &str,
    target: &Placed,
    until: tokio::time::Instant,
) -> Outcome {
    let mut last: Option<Placed> = None;
    let watching = async {
        loop {
            let (children, watcher) = match client.list_and_watch_children(election).await {
                Ok(listed) => listed,
                Err(e) => {
                    debug!("listing the line: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let queue = layout::queue(&children);
            let here = queue.iter().any(|p| p.name == target.participant.name);
            match queue.first() {
                Some(first) if first.name == target.participant.name => {
                    return Outcome::Done {
                        leader: target.id.clone(),
                        token: target.token,
                        changed: true,
                    };
                }
                _ if !here => {
                    let now = read_line(client, election).await.ok();
                    return not_done(
                        "the target left the election",
                        now.and_then(|(l, _)| l.into_iter().next()).as_ref(),
                    );
                }
                _ => {}
            }
            if let Some(first) = queue.first() {
                let known = last
                    .as_ref()
                    .is_some_and(|l| l.participant.name == first.name);
                if !known {
                    last = read_line(client, election)
                        .await
                        .ok()
                        .and_then(|(l, _)| l.into_iter().next());
                }
            }
            watcher.changed().await;
        }
    };
    match tokio::time::timeout_at(until, watching).await {
        Ok(outcome) => outcome,
        Err(_) => not_done(
            "not done within the timeout; the leader gave no way (is it paused, or cut off?)",
            last.as_ref(),
        ),
    }
}

fn not_done(reason: &str, leader: Option<&Placed>) -> Outcome {
    Outcome::NotDone {
        reason: reason.to_owned(),
        leader: leader.map(|p| p.id.clone()),
        token: leader.map(|p| p.token),
    }
}

/// While we lead: the switchover under way and the participant next in
/// line after us (listed only while a switchover is under way: a leader
/// watches the election's children only then). Dropping it stops.
pub struct SwitchoverWatch {
    seen: watch::Receiver<(Option<Steer>, Option<u64>)>,
    _task: AbortOnDropHandle<()>,
}

impl SwitchoverWatch {
    /// Follows `election`'s switchover record while our znode `own` leads.
    pub fn start(client: Client, election: String, own: u64) -> SwitchoverWatch {
        let (out, seen) = watch::channel((None, None));
        let task = tokio::spawn(async move {
            let mut backoff = Backoff::new();
            loop {
                match follow_record(&client, &election, own, &out).await {
                    Ok(()) => backoff.reset(),
                    Err(e) => {
                        debug!("watching the switchover record: {e}");
                        backoff.wait().await;
                    }
                }
            }
        });
        SwitchoverWatch {
            seen,
            _task: AbortOnDropHandle::new(task),
        }
    }

    /// The switchover under way and the next in line, as last read.
    pub fn seen(&self) -> watch::Receiver<(Option<Steer>, Option<u64>)> {
        self.seen.clone()
    }
}

/// One round: the record (watched), and while it exists the children
/// (watched); publishes, then waits for either watch.
async fn follow_record(
    client: &Client,
    election: &str,
    own: u64,
    out: &watch::Sender<(Option<Steer>, Option<u64>)>,
) -> Result<()> {
    let path = layout::switchover_record(election);
    let (data, record_watch) = match client.get_and_watch_data(&path).await {
        Ok((data, stat, watcher)) => (Some((data, stat.czxid)), watcher),
        Err(ZkError::NoNode) => match client.check_and_watch_stat(&path).await {
            Ok((None, watcher)) => (None, watcher),
            Ok((Some(_), _)) => return Ok(()),
            Err(e) => return Err(zk_error("watching the switchover record", e)),
        },
        Err(e) => return Err(zk_error("reading the switchover record", e)),
    };
    let steer = data.and_then(
        |(data, czxid)| match serde_json::from_slice::<Record>(&data) {
            Ok(record) => Some(Steer {
                record: czxid,
                target: record.target_sequence,
                manual: record.manual,
            }),
            Err(e) => {
                debug!("a switchover record that does not parse is ignored: {e}");
                None
            }
        },
    );
    let Some(steer) = steer else {
        out.send_if_modified(|seen| std::mem::take(seen) != (None, None));
        record_watch.changed().await;
        return Ok(());
    };
    let (children, children_watch) = client
        .list_and_watch_children(election)
        .await
        .map_err(|e| zk_error("listing the line", e))?;
    let next = layout::queue(&children)
        .into_iter()
        .map(|p| p.sequence)
        .find(|&s| s > own);
    debug!(target = steer.target, ?next, "a switchover is under way");
    out.send_replace((Some(steer), next));
    tokio::select! {
        _ = record_watch.changed() => {}
        _ = children_watch.changed() => {}
    }
    Ok(())
}
