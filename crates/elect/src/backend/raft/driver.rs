//! The tokio side of a Raft-vote peer: owns the clock, the sockets and the
//! disk, feeds the core, persists before sending, and publishes who leads.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, watch};
use tokio::time::{sleep_until, timeout};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

use super::store::Persister;
use super::transport::{
    self, Body, Frame, Outgoing, PeerTls, Steering, SwitchoverAsk, WireRefusal, WireStatus,
    write_frame,
};
use crate::clock::{BootInstant, BootTimer};
use crate::counters::warn_counted;
use crate::error::Result;
use crate::leadership::Leadership;
use crate::steer::{self, Failback, Standing};
use crate::work::WorkWatch;
use elect_raft::{Message, Node, Ready, Status};

/// Everything the driver loop owns.
pub struct Driver {
    pub node: Node,
    pub store: Persister,
    pub cluster: String,
    pub addresses: BTreeMap<String, String>,
    pub inbound: mpsc::Receiver<(String, Message)>,
    pub outbound: BTreeMap<String, mpsc::Sender<Outgoing>>,
    pub leadership: watch::Sender<Leadership>,
    pub status: watch::Sender<WireStatus>,
    /// The instant the core's time counts from, on the boot clock: the
    /// leader lease the core computes is a deadline like any other.
    pub origin: BootInstant,
    pub resign: CancellationToken,
    /// Mutual TLS with the peers, if configured.
    pub tls: Option<Arc<PeerTls>>,
    /// Switchovers asked of us (see [`crate::steer`]).
    pub steering: mpsc::Receiver<Steering>,
    /// Whether work started under our leadership still runs.
    pub work: WorkWatch,
    /// The switchover under way, if we lead and accepted one.
    pub switchover: Option<Switchover>,
    /// Our priority, as the campaign's owner wishes it.
    pub priority: watch::Receiver<Standing>,
    /// The peers' priorities, as their frames carried them.
    pub heard: transport::Heard,
    /// How long a peer of higher priority must be there before we hand
    /// over to it.
    pub failback_delay: Duration,
    /// While we lead: whether to fail back.
    pub failback: Option<Failback>,
    /// The term in which a manual switchover chose us, if any.
    pub pinned_in: Option<u64>,
}

/// A switchover the leader accepted: it lives while its client's
/// connection is open, until its time is up, and while we lead in the
/// term it was planned in.
pub struct Switchover {
    ask: SwitchoverAsk,
    ended: CancellationToken,
    /// On the core's clock.
    until: Duration,
    /// We have published that we no longer lead and wait for the work
    /// to stop before the transfer.
    giving_way: bool,
    /// An operator's (its client pins the target), not our failback: for
    /// the log.
    manual: bool,
}

impl Driver {
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    /// Runs until resignation is requested, then hands leadership over.
    ///
    /// Errors: the vote could not be persisted; continuing would risk
    /// voting twice in a term.
    pub async fn run(mut self) -> Result<()> {
        let mut timer = BootTimer::new();
        loop {
            let next = self.origin + self.node.next_deadline();
            let ended = self.switchover.as_ref().map(|s| s.ended.clone());
            let giving_way = self.switchover.as_ref().is_some_and(|s| s.giving_way);
            let ready = tokio::select! {
                () = timer.sleep_until(next) => {
                    let now = self.now();
                    self.node.tick(now)
                }
                Some((from, msg)) = self.inbound.recv() => {
                    let now = self.now();
                    tracing::trace!(%from, ?msg, "received");
                    self.node.step(now, &from, msg)
                }
                () = self.resign.cancelled() => {
                    let term = self.node.term();
                    self.hand_over().await?;
                    return self.linger(term).await;
                }
                Some(steering) = self.steering.recv() => {
                    self.take_switchover(steering);
                    Ready::default()
                }
                () = async { ended.as_ref().expect("guarded").cancelled().await }, if ended.is_some() => {
                    Ready::default()
                }
                () = self.work.stopped(), if giving_way => {
                    let term = self.node.term();
                    if self.switchover_lives() {
                        self.switchover = None;
                        self.hand_over().await?;
                        self.linger(term).await?;
                    }
                    Ready::default()
                }
            };
            self.publish_step_down();
            self.apply(ready).await?;
            self.steer();
            self.publish();
        }
    }

    /// Takes a switchover asked of us, or refuses it: we must lead in
    /// the term it was planned in, the target must have answered us
    /// within an election timeout, and no other may be under way.
    fn take_switchover(&mut self, steering: Steering) {
        let Steering { ask, answer, ended } = steering;
        let now = self.now();
        if ask.to == self.node.id() {
            // The target pins itself: no failback undoes an operator's
            // choice while it leads.
            let leads = self.node.status(now).is_self && ask.term == self.node.term();
            if leads {
                info!("a switchover chose us: pinned, priorities do not move us");
                self.pinned_in = Some(ask.term);
            }
            let _ = answer.send(if leads {
                Ok(())
            } else {
                Err(WireRefusal::NotLeader)
            });
            return;
        }
        let refusal = if !self.node.status(now).is_self {
            Some(WireRefusal::NotLeader)
        } else if ask.term != self.node.term() {
            Some(WireRefusal::TermChanged)
        } else if !self.node.live_followers(now).contains(&ask.to) {
            Some(WireRefusal::NotLive)
        } else if self.switchover.is_some() {
            Some(WireRefusal::Busy)
        } else {
            self.outranked(&ask.to)
        };
        if let Some(refusal) = refusal {
            debug!(to = %ask.to, ?refusal, "switchover refused");
            let _ = answer.send(Err(refusal));
            return;
        }
        info!(to = %ask.to, switchover = %ask.id, "switchover accepted");
        self.node.prefer(now, Some(&ask.to));
        let until = now + Duration::from_millis(ask.within_ms);
        self.switchover = Some(Switchover {
            ask,
            ended,
            until,
            giving_way: false,
            manual: true,
        });
        let _ = answer.send(Ok(()));
    }

    /// The peers heard from within an election timeout, in the order of
    /// succession, with their standings.
    fn present(&self) -> Vec<(String, Standing)> {
        let t = self.node.election_timeout();
        let heard = self.heard.lock().unwrap_or_else(|e| e.into_inner());
        self.node
            .successors()
            .into_iter()
            .filter_map(|id| {
                let (priority, at) = heard.get(&id)?;
                (at.elapsed() < t).then_some((id, *priority))
            })
            .collect()
    }

    /// Our standing and each live peer's, by id.
    fn standings(&self) -> BTreeMap<String, Standing> {
        let mut all: BTreeMap<String, Standing> = self.present().into_iter().collect();
        all.insert(self.node.id().to_owned(), *self.priority.borrow());
        all
    }

    /// Why peer `id` may not be switched over to, if it may not: another
    /// live peer (us included) is of a higher tier ([`Standing::tier`]),
    /// so it would not act as leader and would hand over at once.
    fn outranked(&self, id: &str) -> Option<WireRefusal> {
        let all = self.standings();
        let own = all.get(id)?;
        let above = all
            .iter()
            .any(|(other, s)| other != id && s.tier() > own.tier());
        match (above, own.healthy) {
            (false, _) => None,
            (true, false) => Some(WireRefusal::Unhealthy),
            (true, true) => Some(WireRefusal::NeverLeads),
        }
    }

    /// Unhealthy or priority 0 while a live peer is of a higher tier: we
    /// do not act as leader (and hand over to it at once).
    fn holds_back(&self) -> bool {
        steer::steps_aside(
            *self.priority.borrow(),
            self.present().into_iter().map(|(_, s)| s),
        )
    }

    /// While we lead: hands over to a peer of higher priority once
    /// [`Failback`] says so, as a switchover of our own.
    fn fail_back(&mut self) {
        let now = self.now();
        let status = self.node.status(now);
        if !status.is_self {
            self.failback = None;
            return;
        }
        let own = *self.priority.borrow();
        let present = self.present();
        let pinned = self.pinned_in == Some(status.term);
        let failback = self
            .failback
            .get_or_insert_with(|| Failback::new(own, self.failback_delay));
        failback.set_own(own);
        failback.set_pinned(pinned);
        failback.saw(BootInstant::now(), &present);
        if self.switchover.is_some() {
            return;
        }
        let Some(target) = failback.decide(BootInstant::now()).map(str::to_owned) else {
            return;
        };
        info!(to = %target, "handing over to a peer healthier or of higher priority");
        self.node.prefer(now, Some(&target));
        self.switchover = Some(Switchover {
            ask: SwitchoverAsk {
                id: crate::steer::fresh_identity(),
                to: target,
                term: status.term,
                within_ms: (self.failback_delay.as_millis() as u64).max(1000),
            },
            ended: CancellationToken::new(),
            until: now + self.failback_delay.max(Duration::from_secs(1)),
            giving_way: false,
            manual: false,
        });
    }

    /// Whether the switchover under way may still act: its client is
    /// there, its time is not up, and we lead in its term.
    fn switchover_lives(&self) -> bool {
        let now = self.now();
        self.switchover.as_ref().is_some_and(|s| {
            !s.ended.is_cancelled()
                && now < s.until
                && self.node.term() == s.ask.term
                && self.node.status(now).is_self
        })
    }

    /// The switchover's next step: dropped once it may no longer act (the
    /// order of succession as it would be, leading again if we had begun
    /// to give way); once its target is next in line, we give way: we
    /// say we no longer lead, and transfer once the work has stopped.
    fn steer(&mut self) {
        self.fail_back();
        if self.switchover.is_none() {
            return;
        }
        let now = self.now();
        if !self.switchover_lives() {
            debug!("the switchover ended before it was carried out");
            self.switchover = None;
            self.node.prefer(now, None);
            return;
        }
        let next = self.node.next_in_line();
        let Some(s) = self.switchover.as_mut() else {
            return;
        };
        if !s.giving_way && next.as_deref() == Some(s.ask.to.as_str()) {
            let why = if s.manual {
                "a switchover"
            } else {
                "our failback"
            };
            info!(to = %s.ask.to, "giving way to {why}");
            s.giving_way = true;
        }
    }

    /// Publishes at once that we no longer lead, if the step just taken
    /// deposed us, before its new term is written: that fsync may take
    /// seconds on a hung disk, and the supervisor and the exports must
    /// hear of the loss first. Only a loss goes out early: a gain, and the
    /// peers' wire status, wait until the state they rest on is durable.
    fn publish_step_down(&self) {
        // Only a published leader can be deposed: a follower's step (most
        // of them) asks the core nothing.
        if !self.leadership.borrow().is_self {
            return;
        }
        let status = self.node.status(self.now());
        if !status.is_self {
            crate::backend::publish::publish_if_changed(&self.leadership, self.snapshot(&status));
        }
    }

    /// After a hand-over, stays a peer until the successor leads, or for
    /// two heartbeat intervals at most: our vote is the quickest it can
    /// get (with three peers, the only one it needs), and closing our
    /// connections now would wake the others just as they vote.
    async fn linger(&mut self, handed_over_in: u64) -> Result<()> {
        let until = tokio::time::Instant::now() + self.node.heartbeat_interval() * 2;
        while self.node.term() == handed_over_in || self.node.status(self.now()).leader.is_none() {
            let ready = tokio::select! {
                () = sleep_until(until) => return Ok(()),
                Some((from, msg)) = self.inbound.recv() => {
                    let now = self.now();
                    self.node.step(now, &from, msg)
                }
            };
            self.apply(ready).await?;
            self.publish();
        }
        Ok(())
    }

    /// Persists, then sends; except that requests (PreVote, Vote) leave
    /// while the state is written (the write starts first, so the disk,
    /// the slowest part, starts soonest), and the voters' fsyncs overlap
    /// ours. That is safe: replies wait behind the persist in this loop,
    /// so a candidate counts no vote, and leads nowhere, before its own
    /// term and vote are durable; a request alone promises nothing.
    async fn apply(&mut self, ready: Ready) -> Result<()> {
        let Some(hard) = ready.persist else {
            self.send(ready.messages);
            return Ok(());
        };
        debug!(term = hard.term, voted_for = ?hard.voted_for, pledge = ?hard.pledge, "persisting");
        let saved = self.store.save(hard);
        let (requests, rest): (Vec<_>, Vec<_>) = ready
            .messages
            .into_iter()
            .partition(|(_, m)| matches!(m, Message::PreVote { .. } | Message::Vote { .. }));
        self.send(requests);
        saved.await?;
        self.send(rest);
        Ok(())
    }

    fn send(&self, messages: Vec<(String, Message)>) {
        for (to, msg) in messages {
            if let Message::VoteReply {
                term,
                granted: true,
            } = msg
            {
                info!(term, candidate = %to, "voted");
            }
            if let Some(queue) = self.outbound.get(&to) {
                let _ = queue.try_send(msg.into());
            }
        }
    }

    fn publish(&self) {
        let status = self.node.status(self.now());
        let snapshot = self.snapshot(&status);
        let leading = snapshot.is_self;
        if crate::backend::publish::publish_if_changed(&self.leadership, snapshot) && leading {
            // Our lease (the snapshot's deadline) moved: a majority answered.
            crate::counters::PROCESS.renewed();
        }
        crate::backend::publish::publish_if_changed(
            &self.status,
            WireStatus {
                leader: status.leader,
                term: status.term,
                successors: self.node.successors(),
                live: self.node.live_followers(self.now()),
                priorities: match status.is_self {
                    true => self
                        .standings()
                        .into_iter()
                        .map(|(id, s)| (id, s.priority.get()))
                        .collect(),
                    false => Default::default(),
                },
                unhealthy: match status.is_self {
                    true => self
                        .standings()
                        .into_iter()
                        .filter(|(_, s)| !s.healthy)
                        .map(|(id, _)| id)
                        .collect(),
                    false => Vec::new(),
                },
            },
        );
    }

    fn snapshot(&self, status: &Status) -> Leadership {
        if self.switchover.as_ref().is_some_and(|s| s.giving_way)
            || (status.is_self && self.holds_back())
        {
            // Giving way: the work stops now, before the transfer.
            let mut giving_way = Leadership::unknown();
            giving_way.deadline = Some(BootInstant::now());
            return giving_way;
        }
        match (status.is_self, status.lease_until) {
            (true, Some(until)) => {
                Leadership::elected(self.node.id().to_owned(), status.term, self.origin + until)
            }
            _ => Leadership::observed(status.leader.clone().map(|l| (l, status.term))),
        }
    }

    /// Gives the lease up, tells the most responsive peer to campaign at
    /// once and writes our vote for it meanwhile (see
    /// `Node::transfer_leadership`).
    ///
    /// Errors: the vote could not be persisted.
    async fn hand_over(&mut self) -> Result<()> {
        let now = self.now();
        let ready = self.node.transfer_leadership(now);
        self.publish();
        let persisting = async {
            match ready.persist {
                Some(hard) => self.store.save(hard).await,
                None => Ok(()),
            }
        };
        let ((), saved) = tokio::join!(self.send_timeout_now(ready.messages), persisting);
        saved
    }

    /// Sends the TimeoutNow on the connection already open to its target
    /// (no new handshake: with TLS that alone took milliseconds), and waits
    /// until it is written, so it leaves before this process does; failing
    /// that, on a connection of its own.
    async fn send_timeout_now(&self, messages: Vec<(String, Message)>) {
        for (to, msg) in messages {
            if let Some(queue) = self.outbound.get(&to) {
                let (written, done) = tokio::sync::oneshot::channel();
                let queued = queue.send(Outgoing {
                    msg: msg.clone(),
                    written: Some(written),
                });
                let sent = timeout(Duration::from_millis(500), async {
                    queued.await.is_ok() && done.await == Ok(true)
                })
                .await;
                if sent == Ok(true) {
                    info!(to = %to, "leadership handed over");
                    continue;
                }
            }
            let Some(addr) = self.addresses.get(&to) else {
                continue;
            };
            let frame = Frame {
                cluster: self.cluster.clone(),
                from: self.node.id().to_owned(),
                body: Body::Peer(msg),
                priority: None,
                unhealthy: false,
            };
            let sent = timeout(Duration::from_millis(500), async {
                let mut stream = transport::dial(&to, addr, self.tls.as_deref()).await?;
                write_frame(&mut stream, &frame).await?;
                // TLS: say goodbye properly, so the frame is not taken for
                // a truncated stream.
                stream.shutdown().await
            })
            .await;
            match sent {
                Ok(Ok(())) => info!(to = %to, "leadership handed over"),
                _ => {
                    warn_counted!(to = %to, "could not hand leadership over; it fails over after a timeout")
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a peer under test sent to `to`, skipping heartbeats.
    async fn sent(outbound: &mut BTreeMap<String, mpsc::Receiver<Outgoing>>, to: &str) -> Message {
        let queue = outbound.get_mut(to).expect("a peer");
        loop {
            let msg = timeout(Duration::from_secs(5), queue.recv())
                .await
                .expect("a message in time")
                .expect("the driver runs")
                .msg;
            if !matches!(msg, Message::Heartbeat { .. }) {
                return msg;
            }
        }
    }

    /// A leader deposed by a higher term says so before the new term is
    /// on disk: here the disk never answers that write.
    #[tokio::test]
    async fn a_step_down_is_published_before_the_new_term_is_durable() {
        let peers: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        let config = elect_raft::Config::new("a", &peers, Duration::from_millis(300), 7);
        let node = Node::new(
            config,
            Some(elect_raft::HardState::default()),
            Duration::ZERO,
        );
        let (store, writes) = Persister::by_hand();
        let (inbound_tx, inbound) = mpsc::channel(16);
        let mut outbound_rx = BTreeMap::new();
        let mut outbound = BTreeMap::new();
        for peer in ["b", "c"] {
            let (tx, rx) = mpsc::channel(64);
            outbound.insert(peer.to_owned(), tx);
            outbound_rx.insert(peer.to_owned(), rx);
        }
        let (leadership, mut leads) = watch::channel(Leadership::unknown());
        let (status, _status) = watch::channel(WireStatus {
            leader: None,
            term: 0,
            successors: Vec::new(),
            live: Vec::new(),
            priorities: Default::default(),
            unhealthy: Vec::new(),
        });
        let (_steer, steering) = mpsc::channel(1);
        let driver = Driver {
            node,
            store,
            cluster: "e".into(),
            addresses: BTreeMap::new(),
            inbound,
            outbound,
            leadership,
            status,
            origin: BootInstant::now(),
            resign: CancellationToken::new(),
            tls: None,
            steering,
            work: WorkWatch::none(),
            switchover: None,
            priority: watch::channel(Standing::DEFAULT).1,
            heard: transport::Heard::default(),
            failback_delay: Duration::from_secs(10),
            failback: None,
            pinned_in: None,
        };
        // Every write is durable at once, until the test holds them.
        let holding = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let held = Arc::new(std::sync::Mutex::new(Vec::new()));
        let disk = {
            let (holding, held) = (holding.clone(), held.clone());
            std::thread::spawn(move || {
                for (state, done) in writes.iter() {
                    if holding.load(std::sync::atomic::Ordering::SeqCst) {
                        held.lock().unwrap().push((state, done));
                    } else {
                        let _ = done.send(Ok(()));
                    }
                }
            })
        };
        let running = tokio::spawn(driver.run());

        let Message::PreVote { term } = sent(&mut outbound_rx, "b").await else {
            panic!("a PreVote first");
        };
        let granted = Message::PreVoteReply {
            term,
            granted: true,
        };
        inbound_tx.send(("b".into(), granted)).await.unwrap();
        let Message::Vote { term, .. } = sent(&mut outbound_rx, "b").await else {
            panic!("then a Vote");
        };
        let vote = Message::VoteReply {
            term,
            granted: true,
        };
        inbound_tx.send(("b".into(), vote)).await.unwrap();
        timeout(Duration::from_secs(5), leads.wait_for(|l| l.is_self))
            .await
            .expect("elected in time")
            .unwrap();

        holding.store(true, std::sync::atomic::Ordering::SeqCst);
        let deposing = Message::Vote {
            term: term + 5,
            transfer: true,
        };
        inbound_tx.send(("c".into(), deposing)).await.unwrap();
        timeout(Duration::from_secs(5), leads.wait_for(|l| !l.is_self))
            .await
            .expect("the step-down published while the write hangs")
            .unwrap();
        // The write of the new term was asked for, and is never answered.
        let asked = async {
            while held.lock().unwrap().is_empty() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        timeout(Duration::from_secs(5), asked)
            .await
            .expect("the new term's write asked for");
        running.abort();
        drop(held.lock().unwrap().drain(..));
        drop(disk);
    }
}
