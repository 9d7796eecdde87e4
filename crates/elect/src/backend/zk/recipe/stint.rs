//! Leading, from our turn until our znode or our session is gone
//! ([`Stint`]), across disconnections and lapses.
//!
//! The one source of our deadline is the session's lease
//! ([`SessionLease`](crate::backend::zk::lease::SessionLease)): the
//! instant until which answered syncs prove the session cannot have
//! expired on the ZooKeeper leader's tracker, and so nobody else can
//! lead. The stint:
//! 1. starts once the lease gives a deadline ahead of now (right after
//!    syncs failed it may lag), and leads until then, moving the deadline
//!    on with every renewal (never back);
//! 2. steps down at the deadline, connected or not: a disconnection is
//!    ridden out only as long as the lease proves the session alive
//!    (Curator's `LeaderLatch` leads on while SUSPENDED, until LOST);
//! 3. keeps a watch on our znode (it fires once: armed again after each
//!    event, and after a reconnection, which also reads the znode back;
//!    the published view is marked not current from the disconnection
//!    until then). A deletion, or our znode not ours, ends the stint at
//!    once, as does the session's end;
//! 4. after a lapse (stepped down at the deadline, the session perhaps
//!    alive), waits until the lease proves the session alive well ahead
//!    (`resume_ahead`) and a synced read finds our znode still ours, then
//!    leads again with the same token: if the session lived, we were still
//!    first in line and nobody else could lead before it expired;
//! 5. gives way to a switchover (see [`crate::steer`]) whose record lives
//!    once its target is our next in line (every candidate between us has
//!    stepped aside): the stint ends, and the driver deletes our znode
//!    once the work has stopped, in one multi with a check that the
//!    record still lives (`GiveWayUnchecked` gives way whoever is next).

use std::time::Duration;

#[cfg(test)]
use super::mutation::Mutation;
use crate::backend::recipe::{Recipe, switched_off};
use crate::clock::BootInstant;

/// What the stint asks the driver to send. Each is answered by its
/// [`StintInput`] before the stint is polled again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StintRequest {
    /// Check our znode is ours and watch it. Answer:
    /// [`StintInput::OwnWatched`].
    WatchOwn,
    /// A synced read of our znode's owner. Answer:
    /// [`StintInput::Confirmed`].
    ConfirmOwn,
}

/// Answers and events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StintInput {
    /// The session's lease proves it alive until this instant.
    Renewed(BootInstant),
    /// Whether our znode exists and is ours (its watch is armed if so);
    /// `None`: the request failed.
    OwnWatched(Option<bool>),
    /// Whether a synced read found our znode ours; `None`: it failed.
    Confirmed(Option<bool>),
    /// Our znode's watch fired.
    OwnChanged {
        deleted: bool,
    },
    Disconnected,
    /// Connected again within the session.
    Connected,
    /// The session expired or was closed.
    SessionEnded,
    /// The switchover under way, as its record reads (`None`: none), and
    /// the sequence number of the participant next in line, from a
    /// listing made after that read.
    Steering {
        switchover: Option<Steer>,
        next: Option<u64>,
    },
}

/// A switchover the leader gives way to: its record's identity (the
/// record znode's czxid) and its target's sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Steer {
    pub record: i64,
    pub target: u64,
    /// An operator's switchover (the target pins itself), not a leader's
    /// failback.
    pub manual: bool,
}

/// Why the stint ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StintEnd {
    /// Our znode is gone or not ours; the session lives.
    NodeGone,
    /// The session expired or was closed.
    SessionEnded,
    /// We give way to a switchover's target, our next in line.
    GaveWay(Steer),
}

/// Why we no longer lead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Demotion {
    /// Nothing proves the session alive past the deadline: we stepped
    /// down, but the session (and our znode) may live.
    Lapsed,
    /// Our znode was deleted, or is not ours.
    NodeGone,
    SessionEnded,
    /// We give way to a switchover's target.
    GaveWay,
}

/// What the driver does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StintNext {
    /// Publish that we lead until `deadline`; `current`: our znode was
    /// read back since the last disconnection.
    Lead {
        deadline: BootInstant,
        current: bool,
    },
    /// Publish that we no longer lead: the work must stop by `stop_by`.
    Demoted {
        stop_by: BootInstant,
        why: Demotion,
    },
    Send(StintRequest),
    /// Wait for an input, or until this instant.
    Wait(Option<BootInstant>),
    Ended(StintEnd),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Phase {
    /// Waiting until the lease proves the session alive `ahead` of now,
    /// then (`read_own`) until a synced read finds our znode ours.
    Proving {
        ahead: Duration,
        read_own: bool,
        confirm: Confirm,
    },
    Leading {
        deadline: BootInstant,
        current: bool,
        own_watch: OwnWatch,
    },
    Ended(StintEnd),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Confirm {
    /// Not asked yet, or asked again from this instant on (a failure).
    DueAt(Option<BootInstant>),
    Sent,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum OwnWatch {
    /// To be armed from this instant on (at once after an event, a
    /// failure's retry later).
    DueAt(BootInstant),
    Arming,
    Armed,
}

/// One candidacy's leadership, from its turn.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Stint {
    phase: Phase,
    /// The latest deadline the lease proved.
    proven: Option<BootInstant>,
    connected: bool,
    /// Something to publish: a change of our leadership.
    publish: Option<StintNext>,
    rearm_every: Duration,
    resume_ahead: Duration,
    /// The switchover under way, if any.
    switchover: Option<Steer>,
    /// The participant next in line, if known.
    next: Option<u64>,
    #[cfg(test)]
    mutation: Option<Mutation>,
}

impl Stint {
    /// Our turn has come, our znode confirmed ours: lead once the lease
    /// proves a deadline ahead. A failed watch or read is tried again
    /// every `rearm_every`; after a lapse, the lease must prove the
    /// session alive `resume_ahead` of now before we lead again.
    pub fn new(rearm_every: Duration, resume_ahead: Duration) -> Stint {
        Stint {
            phase: Phase::Proving {
                ahead: Duration::ZERO,
                read_own: false,
                confirm: Confirm::DueAt(None),
            },
            proven: None,
            connected: true,
            publish: None,
            rearm_every,
            resume_ahead,
            switchover: None,
            next: None,
            #[cfg(test)]
            mutation: None,
        }
    }

    /// The stint a session of `timeout` runs, as the driver and the model
    /// checker both build it (one source for its timing): a failed watch or
    /// read is tried again at the session keeper's cadence (`timeout / 20`,
    /// [`SessionLease::renew_every`](crate::backend::zk::lease::SessionLease::renew_every)),
    /// and after a lapse the lease must prove the session alive a quarter
    /// of the session ahead before we lead again: a leader that comes back
    /// then holds office for a while, instead of flapping at every late
    /// sync.
    pub fn for_session(timeout: Duration) -> Stint {
        Stint::new(timeout / 20, timeout / 4)
    }

    /// The same, with one rule switched off (model check only).
    #[cfg(test)]
    pub fn mutated(mut self, mutation: Option<Mutation>) -> Stint {
        self.mutation = mutation;
        self
    }

    /// Our deadline while we lead.
    pub fn leads_until(&self) -> Option<BootInstant> {
        match self.phase {
            Phase::Leading { deadline, .. } => Some(deadline),
            _ => None,
        }
    }

    /// Ends the stint; a leader is demoted at once.
    fn end(&mut self, now: BootInstant, end: StintEnd) {
        if matches!(self.phase, Phase::Ended(_)) {
            return;
        }
        let leading = matches!(self.phase, Phase::Leading { .. });
        self.phase = Phase::Ended(end);
        self.publish = leading.then_some(StintNext::Demoted {
            stop_by: now,
            why: match end {
                StintEnd::NodeGone => Demotion::NodeGone,
                StintEnd::SessionEnded => Demotion::SessionEnded,
                StintEnd::GaveWay(_) => Demotion::GaveWay,
            },
        });
    }

    /// Rule 5: the switchover to give way to now, if any.
    fn giving_way(&self) -> Option<Steer> {
        let steer = self.switchover?;
        let ready = self.next == Some(steer.target) || switched_off!(self, GiveWayUnchecked);
        ready.then_some(steer)
    }

    fn lead(&mut self, now: BootInstant, deadline: BootInstant) -> StintNext {
        self.phase = Phase::Leading {
            deadline,
            current: self.connected,
            own_watch: OwnWatch::DueAt(now),
        };
        StintNext::Lead {
            deadline,
            current: self.connected,
        }
    }
}

impl Recipe for Stint {
    type Input = StintInput;
    type Next = StintNext;

    /// What to do at `now`. A request returned must be answered (with
    /// [`Recipe::input`]) before the next call.
    fn poll(&mut self, now: BootInstant) -> StintNext {
        if let Some(next) = self.publish.take() {
            return next;
        }
        match self.phase {
            Phase::Ended(end) => StintNext::Ended(end),
            Phase::Proving {
                ahead,
                read_own,
                confirm,
            } => {
                let proven = self.proven.filter(|&d| d > now + ahead);
                let Some(deadline) = proven else {
                    return StintNext::Wait(None);
                };
                if !read_own {
                    return self.lead(now, deadline);
                }
                match confirm {
                    Confirm::Sent => StintNext::Wait(None),
                    Confirm::DueAt(Some(at)) if now < at => StintNext::Wait(Some(at)),
                    Confirm::DueAt(_) => {
                        self.phase = Phase::Proving {
                            ahead,
                            read_own,
                            confirm: Confirm::Sent,
                        };
                        StintNext::Send(StintRequest::ConfirmOwn)
                    }
                }
            }
            Phase::Leading {
                deadline,
                current,
                own_watch,
            } => {
                let rides_out = switched_off!(self, LeadThroughDisconnection) && !self.connected;
                if let Some(steer) = self.giving_way().filter(|_| now < deadline) {
                    self.end(now, StintEnd::GaveWay(steer));
                    return self.poll(now);
                }
                if now >= deadline && !rides_out {
                    self.phase = Phase::Proving {
                        ahead: self.resume_ahead,
                        read_own: !switched_off!(self, NoReadAfterLapse),
                        confirm: Confirm::DueAt(None),
                    };
                    return StintNext::Demoted {
                        stop_by: deadline,
                        why: Demotion::Lapsed,
                    };
                }
                match own_watch {
                    OwnWatch::DueAt(at) if self.connected && now >= at => {
                        self.phase = Phase::Leading {
                            deadline,
                            current,
                            own_watch: OwnWatch::Arming,
                        };
                        StintNext::Send(StintRequest::WatchOwn)
                    }
                    OwnWatch::DueAt(at) if self.connected => {
                        StintNext::Wait(Some(at.min(deadline)))
                    }
                    _ if rides_out => StintNext::Wait(None),
                    _ => StintNext::Wait(Some(deadline)),
                }
            }
        }
    }

    /// Takes an answer or an event.
    fn input(&mut self, now: BootInstant, input: StintInput) {
        match input {
            StintInput::Renewed(deadline) => self.renewed(deadline),
            StintInput::Disconnected => self.disconnected(now),
            StintInput::Connected => self.reconnected(now),
            StintInput::SessionEnded => self.end(now, StintEnd::SessionEnded),
            StintInput::OwnWatched(answer) => self.own_watched(now, answer),
            StintInput::OwnChanged { deleted: true } => {
                if !switched_off!(self, IgnoreOwnDeletion) {
                    self.end(now, StintEnd::NodeGone)
                }
            }
            StintInput::OwnChanged { deleted: false } => {
                if let Phase::Leading { own_watch, .. } = &mut self.phase {
                    *own_watch = OwnWatch::DueAt(now);
                }
            }
            StintInput::Confirmed(answer) => self.confirmed(now, answer),
            StintInput::Steering { switchover, next } => {
                self.switchover = switchover;
                self.next = next;
            }
        }
    }
}

/// The inputs' effects, one each.
impl Stint {
    /// The lease proves the session alive until `deadline`: a leader's
    /// deadline moves on (never back).
    fn renewed(&mut self, deadline: BootInstant) {
        self.proven = self.proven.max(Some(deadline));
        if let Phase::Leading {
            deadline: ours,
            current,
            ..
        } = &mut self.phase
            && deadline > *ours
        {
            *ours = deadline;
            self.publish = Some(StintNext::Lead {
                deadline,
                current: *current,
            });
        }
    }

    /// A disconnection: the view is no longer current, and a watch armed
    /// before is of no use until the reconnection reads our znode back.
    fn disconnected(&mut self, now: BootInstant) {
        self.connected = false;
        let trusted = switched_off!(self, TrustWatchAcrossReconnection);
        if let Phase::Leading {
            deadline,
            current,
            own_watch,
        } = &mut self.phase
        {
            if !trusted {
                *own_watch = OwnWatch::DueAt(now);
            }
            if *current {
                *current = false;
                self.publish = Some(StintNext::Lead {
                    deadline: *deadline,
                    current: false,
                });
            }
        }
    }

    /// Connected again within the session.
    fn reconnected(&mut self, now: BootInstant) {
        self.connected = true;
        let trusted = switched_off!(self, TrustWatchAcrossReconnection);
        if let Phase::Leading { own_watch, .. } = &mut self.phase
            && !trusted
        {
            // Read our znode back (arming its watch) before the
            // view is current again.
            *own_watch = OwnWatch::DueAt(now);
        }
    }

    /// Whether our znode was found ours, its watch armed (`None`: the
    /// request failed, to be tried again).
    fn own_watched(&mut self, now: BootInstant, answer: Option<bool>) {
        let Phase::Leading {
            deadline,
            current,
            own_watch: OwnWatch::Arming,
        } = self.phase
        else {
            return;
        };
        match answer {
            Some(true) => {
                self.phase = Phase::Leading {
                    deadline,
                    current: true,
                    own_watch: OwnWatch::Armed,
                };
                if !current {
                    self.publish = Some(StintNext::Lead {
                        deadline,
                        current: true,
                    });
                }
            }
            Some(false) => self.end(now, StintEnd::NodeGone),
            None => {
                self.phase = Phase::Leading {
                    deadline,
                    current,
                    own_watch: OwnWatch::DueAt(now + self.rearm_every),
                }
            }
        }
    }

    /// Whether the synced read after a lapse found our znode ours.
    fn confirmed(&mut self, now: BootInstant, answer: Option<bool>) {
        let Phase::Proving {
            ahead,
            read_own,
            confirm: Confirm::Sent,
        } = self.phase
        else {
            return;
        };
        match answer {
            Some(true) => {
                let deadline = self.proven.expect("proven before the read");
                self.publish = Some(self.lead(now, deadline));
            }
            Some(false) => self.end(now, StintEnd::NodeGone),
            None => {
                self.phase = Phase::Proving {
                    ahead,
                    read_own,
                    confirm: Confirm::DueAt(Some(now + self.rearm_every)),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EVERY: Duration = Duration::from_millis(100);
    const AHEAD: Duration = Duration::from_millis(500);

    fn at(ms: u64) -> BootInstant {
        BootInstant::from_nanos(ms * 1_000_000)
    }

    /// A stint leading until `deadline_ms`, its watch armed at 0.
    fn leading(deadline_ms: u64) -> Stint {
        let mut stint = Stint::new(EVERY, AHEAD);
        assert_eq!(stint.poll(at(0)), StintNext::Wait(None));
        stint.input(at(0), StintInput::Renewed(at(deadline_ms)));
        assert_eq!(
            stint.poll(at(0)),
            StintNext::Lead {
                deadline: at(deadline_ms),
                current: true
            }
        );
        assert_eq!(stint.poll(at(0)), StintNext::Send(StintRequest::WatchOwn));
        stint.input(at(0), StintInput::OwnWatched(Some(true)));
        assert_eq!(stint.poll(at(0)), StintNext::Wait(Some(at(deadline_ms))));
        stint
    }

    #[test]
    fn a_switchover_is_given_way_to_once_its_target_is_next_in_line() {
        let steer = Steer {
            record: 77,
            target: 9,
            manual: true,
        };
        let steering = |switchover, next| StintInput::Steering { switchover, next };
        let mut stint = leading(1000);
        stint.input(at(10), steering(Some(steer), Some(8)));
        assert_eq!(stint.poll(at(10)), StintNext::Wait(Some(at(1000))));
        stint.input(at(20), steering(None, Some(9)));
        assert_eq!(stint.poll(at(20)), StintNext::Wait(Some(at(1000))));
        stint.input(at(30), steering(Some(steer), Some(9)));
        assert_eq!(
            stint.poll(at(30)),
            StintNext::Demoted {
                stop_by: at(30),
                why: Demotion::GaveWay
            }
        );
        assert_eq!(
            stint.poll(at(30)),
            StintNext::Ended(StintEnd::GaveWay(steer))
        );
    }

    #[test]
    fn a_stale_deadline_does_not_start_a_stint() {
        let mut stint = Stint::new(EVERY, AHEAD);
        stint.input(at(50), StintInput::Renewed(at(40)));
        assert_eq!(stint.poll(at(50)), StintNext::Wait(None));
        assert_eq!(stint.leads_until(), None);
    }

    #[test]
    fn renewals_move_the_deadline_on_never_back() {
        let mut stint = leading(1000);
        stint.input(at(10), StintInput::Renewed(at(1500)));
        assert_eq!(
            stint.poll(at(10)),
            StintNext::Lead {
                deadline: at(1500),
                current: true
            }
        );
        stint.input(at(20), StintInput::Renewed(at(1200)));
        assert_eq!(stint.poll(at(20)), StintNext::Wait(Some(at(1500))));
    }

    #[test]
    fn a_disconnection_is_ridden_out_until_the_deadline_only() {
        let mut stint = leading(1000);
        stint.input(at(100), StintInput::Disconnected);
        assert_eq!(
            stint.poll(at(100)),
            StintNext::Lead {
                deadline: at(1000),
                current: false
            }
        );
        assert_eq!(stint.poll(at(100)), StintNext::Wait(Some(at(1000))));
        assert_eq!(
            stint.poll(at(1000)),
            StintNext::Demoted {
                stop_by: at(1000),
                why: Demotion::Lapsed
            }
        );
        assert_eq!(stint.leads_until(), None);
    }

    #[test]
    fn a_reconnection_reads_our_znode_back_before_the_view_is_current() {
        let mut stint = leading(1000);
        stint.input(at(100), StintInput::Disconnected);
        stint.poll(at(100));
        stint.input(at(200), StintInput::Connected);
        assert_eq!(stint.poll(at(200)), StintNext::Send(StintRequest::WatchOwn));
        stint.input(at(210), StintInput::OwnWatched(Some(true)));
        assert_eq!(
            stint.poll(at(210)),
            StintNext::Lead {
                deadline: at(1000),
                current: true
            }
        );
    }

    #[test]
    fn our_znode_deleted_or_not_ours_or_the_session_ended_demotes_at_once() {
        for input in [
            StintInput::OwnChanged { deleted: true },
            StintInput::SessionEnded,
        ] {
            let mut stint = leading(1000);
            stint.input(at(300), input);
            assert!(matches!(
                stint.poll(at(300)),
                StintNext::Demoted { stop_by, .. } if stop_by == at(300)
            ));
            assert!(matches!(stint.poll(at(300)), StintNext::Ended(_)));
        }
        let mut stint = leading(1000);
        stint.input(at(300), StintInput::OwnChanged { deleted: false });
        assert_eq!(stint.poll(at(300)), StintNext::Send(StintRequest::WatchOwn));
        stint.input(at(300), StintInput::OwnWatched(Some(false)));
        assert!(matches!(
            stint.poll(at(300)),
            StintNext::Demoted {
                why: Demotion::NodeGone,
                ..
            }
        ));
        assert_eq!(stint.poll(at(300)), StintNext::Ended(StintEnd::NodeGone));
    }

    #[test]
    fn a_failed_watch_is_tried_again_later() {
        let mut stint = leading(1000);
        stint.input(at(300), StintInput::OwnChanged { deleted: false });
        stint.poll(at(300));
        stint.input(at(300), StintInput::OwnWatched(None));
        assert_eq!(stint.poll(at(300)), StintNext::Wait(Some(at(400))));
        assert_eq!(stint.poll(at(400)), StintNext::Send(StintRequest::WatchOwn));
    }

    #[test]
    fn after_a_lapse_we_lead_again_once_proven_well_ahead_and_our_znode_ours() {
        let mut stint = leading(1000);
        stint.poll(at(1000));
        // Proven, but not far enough ahead.
        stint.input(at(1100), StintInput::Renewed(at(1400)));
        assert_eq!(stint.poll(at(1100)), StintNext::Wait(None));
        stint.input(at(1200), StintInput::Renewed(at(2000)));
        assert_eq!(
            stint.poll(at(1200)),
            StintNext::Send(StintRequest::ConfirmOwn)
        );
        stint.input(at(1210), StintInput::Confirmed(Some(true)));
        assert_eq!(
            stint.poll(at(1210)),
            StintNext::Lead {
                deadline: at(2000),
                current: true
            }
        );
        assert_eq!(stint.leads_until(), Some(at(2000)));

        let mut gone = leading(1000);
        gone.poll(at(1000));
        gone.input(at(1200), StintInput::Renewed(at(2000)));
        gone.poll(at(1200));
        gone.input(at(1210), StintInput::Confirmed(Some(false)));
        assert_eq!(gone.poll(at(1210)), StintNext::Ended(StintEnd::NodeGone));
    }
}
