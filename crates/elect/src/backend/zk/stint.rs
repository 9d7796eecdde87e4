//! Leading: the I/O of the [`Stint`] recipe, from our turn until our
//! znode or our session is gone, across disconnections and lapses.

use std::future::Future;

use std::time::Duration;
use tracing::{debug, info};

use zookeeper_client::{Acls, Client, CreateMode, Error as ZkError, EventType, SessionState};

use super::campaign::{Candidacy, End};
use super::layout;
use super::observe::is_terminal;
use super::recipe::{Demotion, Steer, Stint, StintEnd, StintInput, StintNext, StintRequest};
use super::switchover::{self, SwitchoverWatch};
use super::znode::{OneShotWatch, owns, watch_own};
use crate::backend::recipe::{Heard, Io, Recipe, Step, drive};
use crate::clock::{self, BootInstant};
use crate::counters::warn_counted;
use crate::leadership::Leadership;
use crate::steer::Failback;

impl Candidacy<'_> {
    /// Leads, across disconnections within the session, until leadership
    /// is lost for good or we resign, doing what [`Stint`] decides. When
    /// nothing proves the session alive by the deadline we step down but
    /// keep our znode: if the session lives we are still first in line and
    /// nobody else can lead before it expires, so once syncs prove it
    /// alive again and our znode is still ours, we lead again with the
    /// same token.
    pub(super) async fn lead(&mut self, path: &str, token: u64) -> End {
        let mut stint = Stint::for_session(self.client.session_timeout());
        let proven = *self.lease.borrow_and_update();
        if let Some(proven) = proven {
            stint.input(BootInstant::now(), StintInput::Renewed(proven));
        }
        let own = path.rsplit('/').next().and_then(layout::participant);
        let switchover = SwitchoverWatch::start(
            self.client.clone(),
            self.cfg.election.clone(),
            own.as_ref().map_or(u64::MAX, |p| p.sequence),
        );
        let failback = Failback::new(*self.priority.borrow_and_update(), self.cfg.failback_delay);
        let mut io = StintIo {
            candidacy: self,
            path,
            token,
            own_watch: None,
            switchover: switchover.seen(),
            steering: Steering {
                failback,
                look_at: BootInstant::now(),
                pinned: false,
                own: own.map_or(u64::MAX, |p| p.sequence),
            },
            led: false,
        };
        match Box::pin(drive(&mut stint, &mut io)).await {
            Led::Ended(StintEnd::NodeGone) => self.after_loss(path).await,
            Led::Ended(StintEnd::SessionEnded) => End::SessionEnded,
            Led::Ended(StintEnd::GaveWay(steer)) => {
                let end = self.give_way(path, steer).await;
                switchover::withdraw_own(self.client, &self.cfg.election).await;
                end
            }
            Led::Resigned => End::Resigned,
        }
    }

    /// Gives way to a switchover's target (the stint's rule 5): once the
    /// work has stopped (at most a session timeout), our znode is deleted
    /// in one multi with a check that the switchover's record still
    /// lives; if it does not, a plain delete (the candidates between us
    /// and the target stood aside already). Then we campaign again,
    /// behind the target.
    async fn give_way(&mut self, path: &str, steer: Steer) -> End {
        let idle = self.work.stopped();
        let _ = tokio::time::timeout(self.client.session_timeout(), idle).await;
        let record = layout::switchover_record(&self.cfg.election);
        let mut multi = self.client.new_multi_writer();
        let built = multi
            .add_check_version(&record, 0)
            .and_then(|()| multi.add_delete(path, None));
        let guarded = match built {
            Ok(()) => multi.commit().await.map(|_| ()),
            Err(e) => Err(e.into()),
        };
        match guarded {
            Ok(()) => info!(
                target = steer.target,
                "handed over to the switchover's target"
            ),
            Err(e) => {
                debug!("the switchover ended before our release ({e}): a plain handover");
                if let Err(e) = self.client.delete(path, None).await {
                    debug!("deleting {path}: {e}");
                }
            }
        }
        End::NodeGone
    }

    /// Publishes that we lead until `deadline` with `token`.
    fn publish_lead(&mut self, token: u64, deadline: BootInstant, current: bool, led: &mut bool) {
        if !*led {
            info!(token, "elected");
        } else if !self.reporter.leading {
            info!("the session is proven alive again and our znode is ours");
        }
        *led = true;
        self.reporter.leading = true;
        let mut us = Leadership::elected(self.cfg.id.clone(), token, deadline);
        us.current = current;
        self.reporter.publish(us);
    }

    /// Publishes that we no longer lead: the work must stop by `stop_by`.
    fn publish_demotion(&mut self, stop_by: BootInstant, why: Demotion) {
        match why {
            Demotion::Lapsed => warn_counted!(
                "nothing proves our ZooKeeper session alive past the deadline; stepping down"
            ),
            Demotion::NodeGone => {
                warn_counted!("our znode was deleted, or is not our session's")
            }
            Demotion::SessionEnded => {
                warn_counted!("our ZooKeeper session ended: leadership lost")
            }
            Demotion::GaveWay => info!("giving way to a switchover"),
        }
        // The supervisor starts the command again only once the old one
        // is gone.
        self.reporter.demoted(stop_by);
    }

    /// Waits until `wake` for what the stint hears: a renewal, our
    /// znode's watch, the session's state, or resignation.
    async fn wait(
        &mut self,
        stint: &Stint,
        own_watch: &mut Option<OneShotWatch>,
        switchover: &mut SwitchoverSeen,
        steering: &mut Steering,
        wake: BootInstant,
    ) -> Heard<StintInput, Led> {
        let leading = stint.leads_until().is_some();
        let look_at = steering.look_at;
        if !leading {
            self.reporter.show_view();
        }
        let input = tokio::select! {
            _ = self.resign.cancelled() => return Heard::Done(Led::Resigned),
            () = clock::sleep_until(wake) => return Heard::Nothing,
            changed = self.lease.changed() => match changed {
                Ok(()) => {
                    let proven = *self.lease.borrow_and_update();
                    match proven {
                        Some(proven) => StintInput::Renewed(proven),
                        None => return Heard::Nothing,
                    }
                }
                // The session's keeper is gone with the session.
                Err(_) => StintInput::SessionEnded,
            },
            event = async { own_watch.as_mut().expect("armed").await }, if own_watch.is_some() => {
                *own_watch = None;
                if is_terminal(event.session_state) {
                    StintInput::SessionEnded
                } else {
                    debug!(event = ?event.event_type, "our znode's watch fired");
                    StintInput::OwnChanged {
                        deleted: event.event_type == EventType::NodeDeleted,
                    }
                }
            }
            state = self.state.changed() => match state {
                SessionState::Disconnected => {
                    if let Some(deadline) = stint.leads_until() {
                        warn_counted!(
                            "disconnected from ZooKeeper: leading on for {:?} while the session provably lives",
                            deadline.saturating_duration_since(BootInstant::now())
                        );
                    }
                    StintInput::Disconnected
                }
                SessionState::SyncConnected | SessionState::ConnectedReadOnly => {
                    if stint.leads_until().is_some() {
                        info!("reconnected within the session; confirming our znode");
                    }
                    *own_watch = None;
                    StintInput::Connected
                }
                s if is_terminal(s) => StintInput::SessionEnded,
                _ => return Heard::Nothing,
            },
            Ok(()) = self.reporter.view.changed(), if !leading => return Heard::Nothing,
            Ok(()) = switchover.changed() => {
                let (switchover, next) = *switchover.borrow_and_update();
                if let Some(s) = switchover.filter(|s| s.manual && s.target == steering.own) {
                    // A resignation does not wait for the pin (a cut-off
                    // leader must stop leading at once).
                    let resign = self.resign.clone();
                    tokio::select! {
                        () = self.pin(steering, s) => {}
                        () = resign.cancelled() => return Heard::Done(Led::Resigned),
                        () = clock::sleep_until(wake) => return Heard::Nothing,
                    }
                }
                StintInput::Steering { switchover, next }
            }
            () = clock::sleep_until(look_at), if leading => {
                // Nor for a failback's read.
                let resign = self.resign.clone();
                tokio::select! {
                    () = self.look_for_failback(steering) => {}
                    () = resign.cancelled() => return Heard::Done(Led::Resigned),
                    // Nor the deadline: the stint steps down on time.
                    () = clock::sleep_until(wake) => {}
                }
                return Heard::Nothing;
            }
            Ok(()) = self.priority.changed() => {
                steering.failback.set_own(*self.priority.borrow_and_update());
                steering.look_at = BootInstant::now();
                return Heard::Nothing;
            }
        };
        Heard::Input(input)
    }
}

/// The leader's steering: whether to fail back to a candidate of higher
/// priority, when to look next, and whether a manual switchover chose us.
struct Steering {
    failback: Failback,
    look_at: BootInstant,
    pinned: bool,
    /// Our znode's sequence.
    own: u64,
}

impl Candidacy<'_> {
    /// A manual switchover chose us: we pin ourselves (ephemeral, so the
    /// pin goes when we do), and priorities no longer move us.
    async fn pin(&mut self, steering: &mut Steering, _: Steer) {
        if steering.pinned {
            return;
        }
        let election = &self.cfg.election;
        let own = layout::candidate_sequence_name(self.reporter.own_key.as_slice());
        let acls = super::znode::acls(self.cfg.user.as_ref());
        let ephemeral = CreateMode::Ephemeral.with_acls(Acls::new(&acls));
        let pin = layout::pin_node(election);
        let created = match self.client.create(&pin, own.as_bytes(), &ephemeral).await {
            Ok(_) => Ok(()),
            // A pin of a leader gone before us, whose session has not
            // ended yet: ours replaces it.
            Err(ZkError::NodeExists) => self
                .client
                .set_data(&pin, own.as_bytes(), None)
                .await
                .map(|_| ()),
            Err(e) => Err(e),
        };
        match created {
            Ok(()) => {
                info!("a switchover chose us: pinned, priorities do not move us");
                steering.pinned = true;
                steering.failback.set_pinned(true);
            }
            Err(e) => warn_counted!("could not pin ourselves after a switchover: {e}"),
        }
    }

    /// Reads who waits behind us with which priority, and proposes a
    /// failback when [`Failback`] says so (the stint then gives way as to
    /// any switchover).
    async fn look_for_failback(&mut self, steering: &mut Steering) {
        let delay = self.cfg.failback_delay;
        let every = (delay / 4).clamp(Duration::from_millis(200), Duration::from_secs(2));
        let now = BootInstant::now();
        steering.look_at = now + every;
        let read = switchover::read_standings(self.client, &self.cfg.election);
        let Ok(Ok((line, pin))) = tokio::time::timeout(self.cfg.connect_timeout, read).await else {
            return;
        };
        let own_name = layout::candidate_sequence_name(self.reporter.own_key.as_slice());
        steering.pinned = pin.as_deref() == Some(own_name.as_str());
        steering.failback.set_pinned(steering.pinned);
        let Some(us) = line
            .iter()
            .position(|p| p.participant.sequence == steering.own)
        else {
            return;
        };
        let behind = &line[us + 1..];
        // Only elect's candidates can be handed over to, and only up to
        // the first peer's: one cannot step aside.
        let seen: Vec<_> = behind
            .iter()
            .take_while(|p| layout::made_by(&p.participant.name) == "elect")
            .map(|p| (p.participant.name.clone(), p.standing))
            .collect();
        steering.failback.saw(now, &seen);
        if let Some(at) = steering.failback.next_change() {
            steering.look_at = steering
                .look_at
                .min(at.max(now + Duration::from_millis(10)));
        }
        let Some(target) = steering.failback.decide(now) else {
            return;
        };
        // Decided: read the znodes of those the switchover names.
        let read = switchover::read_line(self.client, &self.cfg.election);
        let Ok(Ok((line, _))) = tokio::time::timeout(self.cfg.connect_timeout, read).await else {
            return;
        };
        let us = line
            .iter()
            .position(|p| p.participant.sequence == steering.own);
        let at = line.iter().position(|p| p.participant.name == target);
        let (Some(us), Some(at)) = (us, at) else {
            return;
        };
        if at <= us {
            return;
        }
        let aside: Vec<_> = line[us + 1..at].iter().collect();
        let proposed = switchover::propose(self.client, self.cfg, &line[us], &line[at], &aside);
        match tokio::time::timeout(self.cfg.connect_timeout, proposed).await {
            Ok(Ok(())) => info!(
                to = line[at].id.as_str(),
                standing = %line[at].standing,
                "handing over to a candidate healthier or of higher priority"
            ),
            Ok(Err(e)) => debug!("failback not proposed: {e}"),
            Err(_) => debug!("failback not proposed in time"),
        }
    }
}

/// The switchover under way and the participant next in line, as the
/// leader's [`SwitchoverWatch`] last saw them.
type SwitchoverSeen = tokio::sync::watch::Receiver<(Option<Steer>, Option<u64>)>;

/// How a stint's drive ended.
enum Led {
    Ended(StintEnd),
    Resigned,
}

/// The stint's I/O: our znode's watch and reads, the session's lease and
/// state, the reporter.
struct StintIo<'c, 'a, 'p> {
    candidacy: &'c mut Candidacy<'a>,
    path: &'p str,
    token: u64,
    /// Our znode's watch, while armed.
    own_watch: Option<OneShotWatch>,
    switchover: SwitchoverSeen,
    steering: Steering,
    /// Whether we led in this candidacy (the log says "elected" once).
    led: bool,
}

impl Io<Stint> for StintIo<'_, '_, '_> {
    type Request = StintRequest;
    type Outcome = Led;

    fn step(&mut self, next: StintNext) -> Step<StintRequest, Led> {
        match next {
            StintNext::Lead { deadline, current } => {
                let c = &mut *self.candidacy;
                c.publish_lead(self.token, deadline, current, &mut self.led);
                Step::Said
            }
            StintNext::Demoted { stop_by, why } => {
                self.candidacy.publish_demotion(stop_by, why);
                self.own_watch = None;
                Step::Said
            }
            StintNext::Ended(end) => Step::Done(Led::Ended(end)),
            StintNext::Send(request) => Step::Send(request),
            StintNext::Wait(until) => Step::Wait(until),
        }
    }

    async fn send(&mut self, stint: &mut Stint, request: StintRequest) -> Heard<StintInput, Led> {
        let client = self.candidacy.client;
        Heard::Input(match request {
            StintRequest::WatchOwn => {
                let (input, armed) = watch_own_by(stint.leads_until(), client, self.path).await;
                if armed.is_some() {
                    self.own_watch = armed;
                }
                input
            }
            StintRequest::ConfirmOwn => {
                confirm_own_by(stint.leads_until(), client, self.path).await
            }
        })
    }

    async fn wait(&mut self, stint: &Stint, until: Option<BootInstant>) -> Heard<StintInput, Led> {
        let timeout = self.candidacy.client.session_timeout();
        let wake = until.unwrap_or(BootInstant::now() + timeout);
        let (switchover, steering) = (&mut self.switchover, &mut self.steering);
        self.candidacy
            .wait(stint, &mut self.own_watch, switchover, steering, wake)
            .await
    }
}

/// Checks our znode is ours and arms its watch (which also reads it back
/// after a reconnection), by the `deadline` we lead until: the answer,
/// and the watch if it was armed.
async fn watch_own_by(
    deadline: Option<BootInstant>,
    client: &Client,
    path: &str,
) -> (StintInput, Option<OneShotWatch>) {
    match by_deadline(deadline, watch_own(client, path)).await {
        Some(Ok(Some(changed))) => (StintInput::OwnWatched(Some(true)), Some(changed)),
        Some(Ok(None)) => (StintInput::OwnWatched(Some(false)), None),
        Some(Err(e)) => {
            debug!("{e}");
            (StintInput::OwnWatched(None), None)
        }
        None => (StintInput::OwnWatched(None), None),
    }
}

/// A synced read of our znode's owner, by the `deadline` we lead until.
async fn confirm_own_by(deadline: Option<BootInstant>, client: &Client, path: &str) -> StintInput {
    match by_deadline(deadline, owns(client, path)).await {
        Some(Ok(ours)) => {
            if !ours {
                warn_counted!("our znode is gone or not our session's");
            }
            StintInput::Confirmed(Some(ours))
        }
        Some(Err(e)) => {
            debug!("{e}");
            StintInput::Confirmed(None)
        }
        None => StintInput::Confirmed(None),
    }
}

/// Awaits `request`, but while we lead not past our `deadline`: the
/// driver must be back at the stint by then to step down on time, even
/// when the request waits on a connection that hangs (a member killed
/// under it, which the client notices only seconds later). `None` when
/// the deadline came first: no answer. (Seen while looking into a soak's
/// violation, which turned out to be a freeze the nemesis dealt: nothing
/// else bounded these two awaits.)
async fn by_deadline<T>(
    deadline: Option<BootInstant>,
    request: impl Future<Output = T>,
) -> Option<T> {
    match deadline {
        None => Some(request.await),
        Some(deadline) => tokio::select! {
            answer = request => Some(answer),
            () = clock::sleep_until(deadline) => None,
        },
    }
}
