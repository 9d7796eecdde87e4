//! Switchovers among Raft-vote peers (see [`crate::steer`]): the line as
//! the leader sees it, and the request that asks it to hand over to a
//! named peer.
//!
//! The line is the leader's order of succession, which it sends with
//! every heartbeat; the first in line is whom a transfer goes to, and
//! whom the voters expect to campaign first. A switchover asks the leader
//! (`Body::Switchover` on a connection of its own) to put its target
//! first ([`elect_raft::Node::prefer`]): the others step aside by that
//! alone. The ask carries the term it was planned in and lives as long
//! as its connection stays open and its time lasts, so a switchover that
//! is over, or planned under another leader, never acts. Once the target
//! is next in line the leader says it no longer leads, waits for its
//! work to stop, then transfers (TimeoutNow) as a resignation does: the
//! target leads in a higher term, its token.
//!
//! Who may ask: with TLS, only a connection whose certificate names one
//! of the peers; without, anyone who reaches a peer's port, as for
//! everything else on a plaintext transport.

use std::time::{Duration, Instant};

use tokio::time::timeout;

use super::reach::{peer_addresses, peer_tls, query};
use super::transport::{
    self, Body, BoxStream, Frame, PeerTls, SwitchoverAsk, WireRefusal, WireStatus,
};
use crate::backend_kind::Backend;
use crate::config::ElectionConfig;
use crate::error::{Error, Result};
use crate::steer::{
    InLine, Line, Outcome, Priority, Refusal, Report, Started, Target, fresh_identity,
};

/// The leader's status (or, with nobody leading, any peer's).
async fn leader_status(cfg: &ElectionConfig, tls: Option<&PeerTls>) -> Result<WireStatus> {
    let mut stream = query(cfg, tls).await?;
    let any = timeout(cfg.connect_timeout, transport::next_status(&mut stream))
        .await
        .map_err(|_| cfg.unreachable("no status received"))?
        .map_err(|e| cfg.unreachable(e))?;
    let Some(leader) = any.leader.clone() else {
        return Ok(any);
    };
    let addresses = peer_addresses(cfg);
    let Some(addr) = addresses.get(&leader) else {
        return Ok(any);
    };
    let asked = transport::status_of(&cfg.election, &cfg.id, (&leader, addr), tls);
    match timeout(cfg.connect_timeout, asked).await {
        Ok(Ok(status)) if status.leader.as_deref() == Some(leader.as_str()) => Ok(status),
        // The leader itself did not answer, or leads no more: what the
        // peer we asked knows.
        _ => Ok(any),
    }
}

fn as_line(cfg: &ElectionConfig, status: &WireStatus) -> Line {
    // The leader's view; the default for a peer it has no word of.
    let priority_of = |id: &str| {
        status
            .priorities
            .get(id)
            .and_then(|p| Priority::new(*p))
            .unwrap_or(Priority::DEFAULT)
    };
    let healthy = |id: &str| !status.unhealthy.iter().any(|u| u == id);
    let mut candidates = Vec::new();
    if let Some(leader) = &status.leader {
        candidates.push(InLine {
            id: leader.clone(),
            token: Some(status.term),
            leads: true,
            priority: priority_of(leader),
            healthy: healthy(leader),
            live: true,
            by: "elect",
        });
    }
    let rest = status.successors.iter().cloned();
    let unlisted = peer_addresses(cfg)
        .into_keys()
        .filter(|p| Some(p) != status.leader.as_ref() && !status.successors.contains(p));
    for id in rest.chain(unlisted) {
        let live = status.live.contains(&id);
        candidates.push(InLine {
            priority: priority_of(&id),
            healthy: healthy(&id),
            id,
            token: None,
            leads: false,
            live,
            by: "elect",
        });
    }
    Line {
        backend: Backend::Raft,
        election: cfg.election.clone(),
        candidates,
    }
}

/// Reads the line once, from the leader.
///
/// # Errors
/// [`Error::Unreachable`] when no peer answers.
///
/// # Cancel safety
/// Cancel safe: it only reads.
pub async fn line(cfg: &ElectionConfig) -> Result<Line> {
    let tls = peer_tls(cfg)?;
    let status = leader_status(cfg, tls.as_deref()).await?;
    Ok(as_line(cfg, &status))
}

/// Asks the leader to hand over to `to`, and waits (at most `timeout`)
/// for `to` to lead.
///
/// # Errors
/// [`Error::SwitchoverRefused`] by the plan or by the leader, before
/// anything changed; [`Error::Auth`] when our certificate names no peer;
/// [`Error::Unreachable`].
///
/// # Cancel safety
/// A dropped future closes the connection the switchover lives on: the
/// leader drops it, and it never acts after that.
pub async fn switchover(cfg: &ElectionConfig, to: &Target, within: Duration) -> Result<Report> {
    let started = Instant::now();
    let refused = |refusal| Error::SwitchoverRefused {
        election: cfg.election.clone(),
        refusal,
    };
    let tls = peer_tls(cfg)?;
    let status = leader_status(cfg, tls.as_deref()).await?;
    let line = as_line(cfg, &status);
    let plan = line.plan(to).map_err(refused)?;
    let (leader, target) = (&line.candidates[plan.leader], &line.candidates[plan.target]);
    let begun = Started::new(started, &leader.id, &target.id);
    if plan.nothing_to_do() {
        pin(cfg, tls.as_deref(), &target.id, status.term).await;
        return Ok(begun.nothing_to_do(status.term));
    }
    let ask = SwitchoverAsk {
        id: begun.identity.clone(),
        to: target.id.clone(),
        term: status.term,
        within_ms: within.as_millis() as u64,
    };
    // Held open until the end: the leader drops the switchover with it.
    let _asking = match ask_leader(cfg, tls.as_deref(), &leader.id, ask).await? {
        Ok(stream) => stream,
        Err(refusal) => return Err(wire_refusal(cfg, refusal, &target.id)),
    };
    let until = tokio::time::Instant::from_std(started + within);
    let outcome = wait_for(cfg, tls.as_deref(), &target.id, status.term, until).await;
    if let Outcome::Done { token, .. } = &outcome {
        pin(cfg, tls.as_deref(), &target.id, *token).await;
    }
    Ok(begun.ended(outcome))
}

/// Tells the target, which leads in `term`, that an operator chose it:
/// no failback undoes that while it leads. Best effort: an unpinned
/// leader hands over only to a higher priority, after the failback delay.
async fn pin(cfg: &ElectionConfig, tls: Option<&PeerTls>, target: &str, term: u64) {
    let ask = SwitchoverAsk {
        id: fresh_identity(),
        to: target.to_owned(),
        term,
        within_ms: 0,
    };
    match ask_leader(cfg, tls, target, ask).await {
        Ok(Ok(_)) => {}
        Ok(Err(refusal)) => tracing::debug!(?refusal, "the target did not pin itself"),
        Err(e) => tracing::debug!("pinning the target: {e}"),
    }
}

/// Sends the ask to the leader and reads its answer: the open connection
/// if accepted.
async fn ask_leader(
    cfg: &ElectionConfig,
    tls: Option<&PeerTls>,
    leader: &str,
    ask: SwitchoverAsk,
) -> Result<std::result::Result<BoxStream, WireRefusal>> {
    let addresses = peer_addresses(cfg);
    let addr = addresses
        .get(leader)
        .ok_or_else(|| cfg.unreachable(format!("the leader {leader:?} is not among the peers")))?;
    let asked = async {
        let mut stream = transport::dial(leader, addr, tls).await?;
        let frame = Frame {
            cluster: cfg.election.clone(),
            from: cfg.id.clone(),
            body: Body::Switchover(ask),
            priority: None,
            unhealthy: false,
        };
        transport::write_frame(&mut stream, &frame).await?;
        loop {
            if let Body::SwitchoverAnswer(answer) = transport::read_frame(&mut stream).await?.body {
                return Ok::<_, std::io::Error>(answer.map(|()| stream));
            }
        }
    };
    match timeout(cfg.connect_timeout, asked).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(e)) => Err(cfg.unreachable(format!("asking the leader {leader}: {e}"))),
        Err(_) => Err(cfg.unreachable(format!("the leader {leader} did not answer"))),
    }
}

fn wire_refusal(cfg: &ElectionConfig, refusal: WireRefusal, target: &str) -> Error {
    let refusal = match refusal {
        WireRefusal::NotLeader | WireRefusal::TermChanged => Refusal::LineChanged,
        WireRefusal::NotLive => Refusal::NotLive(target.to_owned()),
        WireRefusal::Busy => Refusal::Busy,
        WireRefusal::NeverLeads => Refusal::NeverLeads(target.to_owned()),
        WireRefusal::Unhealthy => Refusal::Unhealthy(target.to_owned()),
        WireRefusal::NotAllowed => {
            return Error::Auth {
                backend: Backend::Raft,
                detail: "switchover refused: the certificate names no peer of the cluster (only peers' credentials may steer)".into(),
            };
        }
    };
    Error::SwitchoverRefused {
        election: cfg.election.clone(),
        refusal,
    }
}

/// Follows the target's own status until it leads in a term above
/// `from_term`, or `until`.
async fn wait_for(
    cfg: &ElectionConfig,
    tls: Option<&PeerTls>,
    target: &str,
    from_term: u64,
    until: tokio::time::Instant,
) -> Outcome {
    let mut last: Option<WireStatus> = None;
    let addresses = peer_addresses(cfg);
    let following = async {
        loop {
            let Some(addr) = addresses.get(target) else {
                return;
            };
            let opened = transport::open_query(&cfg.election, &cfg.id, (target, addr), tls).await;
            let Ok(mut stream) = opened else {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            while let Ok(status) = transport::next_status(&mut stream).await {
                let led = status.leader.as_deref() == Some(target) && status.term > from_term;
                last = Some(status);
                if led {
                    return;
                }
            }
        }
    };
    let timed_out = tokio::time::timeout_at(until, following).await.is_err();
    let leader = last.as_ref().and_then(|s| s.leader.clone());
    let token = last.as_ref().map(|s| s.term);
    match (timed_out, leader) {
        (false, Some(leader)) => Outcome::Done {
            leader,
            token: token.unwrap_or_default(),
            changed: true,
        },
        (_, leader) => Outcome::NotDone {
            reason: "not done within the timeout; the leader gave no way (is it paused, cut off, or the target?)".into(),
            token: leader.as_ref().and(token),
            leader,
        },
    }
}
