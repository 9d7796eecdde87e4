//! Leading, from the confirmation of our key until we resign or may no
//! longer lead ([`Stint`]), named after ZooKeeper's counterpart.
//!
//! The one source of our deadline is the lease's renewal
//! ([`Renewal`](super::Renewal)): the instant until which an acknowledged
//! keepalive proves the lease cannot have expired on etcd's leader, and
//! so nobody waiting on our key, our lease or our tenure marker can lead.
//! The stint:
//! 1. leads only while that deadline is ahead of now, moving it on with
//!    every renewal (never back), and steps down at it, whatever else is
//!    known (`LeadPastDeadline` switches this off: the deadline model
//!    catches it, and the handover model where a lease lapses once its
//!    holder's deadline has passed);
//! 2. ends at once, the work to stop now, when the server says the lease
//!    is gone (revoked or expired): a successor may lead already;
//! 3. steps down when our key is gone (its watch saw it deleted, created
//!    again, or put without our lease), or when a view of the election at
//!    or after the revision we confirmed our key at names another leader
//!    or none (older views may predate us; a view from a broken watch
//!    proves nothing). The work may run on until our deadline: while our
//!    lease lives, every successor waits for it or for our tenure marker
//!    bound to it. So the stint asks whether the lease lives, by the
//!    deadline: if it does not, or the answer does not come, the work
//!    must stop now;
//! 4. ends on resignation; the release that follows is [`Resignation`](super::Resignation)'s;
//! 5. gives way to a switchover (see [`crate::steer`]) while its record
//!    lives and once its target is our next in line (every candidate
//!    between us has stepped aside): the stint ends, the work to stop
//!    before the release touches the target, guarded by the record
//!    (`GiveWayUnchecked` gives way whoever is next; `SwitchoverUnguarded`
//!    drops the record's guard).
//!
//! Rules 2 and 3 keep a successor's wait short and a key deleted by hand
//! from being led on; they are not what keeps two leaders apart (the
//! tenure markers and rule 1 are): see the safety page's second table.

use super::handover::Steer;
#[cfg(test)]
use super::mutation::Mutation;
use crate::backend::etcd::layout::CandidateKey;
use crate::backend::recipe::{Recipe, switched_off};
use crate::clock::BootInstant;

/// What the stint asks the driver to send. Answered by its
/// [`StintInput`] before the stint is polled again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StintRequest {
    /// Whether our lease still lives (a time-to-live request), not
    /// waited for past our deadline. Answer: [`StintInput::LeaseLives`].
    AskLease,
}

/// Answers and events.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum StintInput {
    /// The renewal proves the lease alive until this instant.
    Renewed(BootInstant),
    /// The server said the lease is gone (revoked or expired).
    LeaseEnded,
    /// Our key is gone: deleted, created again, or put without our lease.
    OwnKeyGone,
    /// The election as the observer sees it: whether the leader it names
    /// is our key, as of `revision`; `current`: the view's watch is live
    /// (a broken one proves nothing).
    Viewed {
        ours: bool,
        revision: i64,
        current: bool,
    },
    /// Resignation was requested.
    Resign,
    /// Whether the lease lives; `None`: the request failed or did not
    /// answer by our deadline.
    LeaseLives(Option<bool>),
    /// The switchover under way, as its record reads (`None`: none, or
    /// it is over).
    Switchover(Option<Steer>),
    /// The elect candidate next in line, as the leader's watch knows it.
    NextInLine(Option<CandidateKey>),
}

/// Why we no longer lead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Demotion {
    /// The deadline passed: nothing proves the lease alive past it.
    Lapsed,
    /// The server said the lease is gone.
    LeaseEnded,
    /// Our key is gone.
    KeyGone,
    /// A view at or after our confirmation names another leader, or none.
    OtherLeader,
}

/// Why the stint ended.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum StintEnd {
    /// Resignation was requested while we led.
    Resigned,
    /// We give way to a switchover's target, our next in line.
    GaveWay(Steer),
    /// We may no longer lead: the work must stop by `stop_by`. `led`:
    /// whether we led at all (a deadline already passed at the start
    /// never leads).
    Lost { led: bool, stop_by: BootInstant },
}

/// What the driver does next.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum StintNext {
    /// Publish that we lead until `deadline`.
    Lead {
        deadline: BootInstant,
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

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Phase {
    /// Not published yet: the first poll leads, or ends if the deadline
    /// has already passed.
    Starting,
    Leading,
    /// Demoted by our key's loss (`why`); `asked`: the lease's question
    /// is out.
    Stepping {
        why: Demotion,
        asked: bool,
    },
    Ended(StintEnd),
}

/// One candidacy's leadership, from the confirmation of its key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Stint {
    phase: Phase,
    /// The latest deadline the renewal proved.
    deadline: BootInstant,
    /// The revision at which our key was confirmed ours: a view older
    /// than this may predate us.
    confirmed_at: i64,
    /// Something to publish: a change of our leadership.
    publish: Option<StintNext>,
    /// The switchover under way, if any.
    switchover: Option<Steer>,
    /// The elect candidate next in line, if known.
    next: Option<CandidateKey>,
    #[cfg(test)]
    mutation: Option<Mutation>,
}

impl Stint {
    /// Our key was confirmed ours at revision `confirmed_at`, and the
    /// renewal proves the lease alive until `deadline`.
    pub fn new(confirmed_at: i64, deadline: BootInstant) -> Stint {
        Stint {
            phase: Phase::Starting,
            deadline,
            confirmed_at,
            publish: None,
            switchover: None,
            next: None,
            #[cfg(test)]
            mutation: None,
        }
    }

    /// The same, with one rule switched off (model check only).
    #[cfg(test)]
    pub fn mutated(mut self, mutation: Option<Mutation>) -> Stint {
        self.mutation = mutation;
        self
    }

    /// Our deadline while we lead (the tests ask).
    #[cfg(test)]
    pub fn leads_until(&self) -> Option<BootInstant> {
        matches!(self.phase, Phase::Leading).then_some(self.deadline)
    }

    /// Ends the stint; a leader is demoted first.
    fn end(&mut self, end: StintEnd, why: Demotion) {
        if let StintEnd::Lost { led: true, stop_by } = end {
            self.publish = Some(StintNext::Demoted { stop_by, why });
        }
        self.phase = Phase::Ended(end);
    }

    /// Rule 5: the switchover to give way to now, if any.
    fn giving_way(&self) -> Option<Steer> {
        let steer = self.switchover.as_ref()?;
        let next = self.next.as_ref();
        let ready = next == Some(&steer.target) || switched_off!(self, GiveWayUnchecked);
        ready.then(|| steer.clone())
    }

    /// Our key's loss, or a view that says another leads: stop by the
    /// deadline, and ask whether the lease lives.
    fn key_lost(&mut self, why: Demotion) {
        if self.phase != Phase::Leading || switched_off!(self, KeyLossIgnored) {
            return;
        }
        self.phase = Phase::Stepping { why, asked: false };
        self.publish = Some(StintNext::Demoted {
            stop_by: self.deadline,
            why,
        });
    }
}

impl Recipe for Stint {
    type Input = StintInput;
    type Next = StintNext;

    fn poll(&mut self, now: BootInstant) -> StintNext {
        if let Some(next) = self.publish.take() {
            return next;
        }
        let past = now >= self.deadline && !switched_off!(self, LeadPastDeadline);
        match self.phase.clone() {
            Phase::Ended(end) => StintNext::Ended(end),
            Phase::Starting if past => {
                self.phase = Phase::Ended(StintEnd::Lost {
                    led: false,
                    stop_by: self.deadline,
                });
                self.poll(now)
            }
            Phase::Starting => {
                self.phase = Phase::Leading;
                StintNext::Lead {
                    deadline: self.deadline,
                }
            }
            Phase::Leading if past => {
                let stop_by = self.deadline;
                self.end(StintEnd::Lost { led: true, stop_by }, Demotion::Lapsed);
                self.poll(now)
            }
            Phase::Leading if self.giving_way().is_some() => {
                let steer = self.giving_way().expect("checked");
                self.phase = Phase::Ended(StintEnd::GaveWay(steer));
                self.poll(now)
            }
            Phase::Leading if switched_off!(self, LeadPastDeadline) => StintNext::Wait(None),
            Phase::Leading => StintNext::Wait(Some(self.deadline)),
            // The driver bounds the question by our deadline.
            Phase::Stepping { asked: true, .. } => StintNext::Wait(None),
            Phase::Stepping { why, asked: false } => {
                self.phase = Phase::Stepping { why, asked: true };
                StintNext::Send(StintRequest::AskLease)
            }
        }
    }

    fn input(&mut self, now: BootInstant, input: StintInput) {
        match input {
            StintInput::Renewed(deadline) => {
                if deadline > self.deadline {
                    self.deadline = deadline;
                    if self.phase == Phase::Leading {
                        self.publish = Some(StintNext::Lead { deadline });
                    }
                }
            }
            StintInput::LeaseEnded => {
                if !matches!(self.phase, Phase::Ended(_)) {
                    let led = self.phase != Phase::Starting;
                    let end = StintEnd::Lost { led, stop_by: now };
                    // A leader stepping down already was demoted.
                    let why = Demotion::LeaseEnded;
                    if self.phase == Phase::Leading {
                        self.end(end, why);
                    } else {
                        self.phase = Phase::Ended(end);
                    }
                }
            }
            StintInput::OwnKeyGone => self.key_lost(Demotion::KeyGone),
            StintInput::Viewed {
                ours,
                revision,
                current,
            } => {
                if current && revision >= self.confirmed_at && !ours {
                    self.key_lost(Demotion::OtherLeader);
                }
            }
            StintInput::Resign => match self.phase {
                Phase::Leading => self.phase = Phase::Ended(StintEnd::Resigned),
                // Not led yet: nothing was published, nothing to stop.
                Phase::Starting => {
                    self.phase = Phase::Ended(StintEnd::Lost {
                        led: false,
                        stop_by: now,
                    })
                }
                _ => {}
            },
            StintInput::LeaseLives(answer) => {
                let Phase::Stepping { asked: true, .. } = self.phase else {
                    return;
                };
                let stop_by = match answer {
                    Some(true) => self.deadline,
                    _ => now,
                };
                self.phase = Phase::Ended(StintEnd::Lost { led: true, stop_by });
            }
            StintInput::Switchover(steer) => self.switchover = steer,
            StintInput::NextInLine(next) => self.next = next,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> BootInstant {
        BootInstant::from_nanos(ms * 1_000_000)
    }

    /// A stint confirmed at revision 10, leading until `deadline_ms`.
    fn leading(deadline_ms: u64) -> Stint {
        let mut stint = Stint::new(10, at(deadline_ms));
        assert_eq!(
            stint.poll(at(0)),
            StintNext::Lead {
                deadline: at(deadline_ms)
            }
        );
        assert_eq!(stint.poll(at(0)), StintNext::Wait(Some(at(deadline_ms))));
        stint
    }

    #[test]
    fn a_deadline_already_passed_never_leads() {
        let mut stint = Stint::new(10, at(40));
        assert_eq!(
            stint.poll(at(50)),
            StintNext::Ended(StintEnd::Lost {
                led: false,
                stop_by: at(40)
            })
        );
        assert_eq!(stint.leads_until(), None);
    }

    #[test]
    fn renewals_move_the_deadline_on_never_back() {
        let mut stint = leading(1000);
        stint.input(at(10), StintInput::Renewed(at(1500)));
        assert_eq!(stint.poll(at(10)), StintNext::Lead { deadline: at(1500) });
        stint.input(at(20), StintInput::Renewed(at(1200)));
        assert_eq!(stint.poll(at(20)), StintNext::Wait(Some(at(1500))));
        assert_eq!(stint.leads_until(), Some(at(1500)));
    }

    /// Polled at `now`, `stint` says we no longer lead, for `why`, and
    /// ends: the work to stop by `now`.
    fn demoted_and_lost(stint: &mut Stint, now: BootInstant, why: Demotion) {
        let stop_by = now;
        assert_eq!(stint.poll(now), StintNext::Demoted { stop_by, why });
        let lost = StintEnd::Lost { led: true, stop_by };
        assert_eq!(stint.poll(now), StintNext::Ended(lost));
    }

    #[test]
    fn we_step_down_at_the_deadline() {
        let mut stint = leading(1000);
        demoted_and_lost(&mut stint, at(1000), Demotion::Lapsed);
    }

    #[test]
    fn a_lease_gone_stops_the_work_now() {
        let mut stint = leading(1000);
        stint.input(at(300), StintInput::LeaseEnded);
        demoted_and_lost(&mut stint, at(300), Demotion::LeaseEnded);
    }

    #[test]
    fn our_key_gone_stops_the_work_by_the_deadline_while_the_lease_lives() {
        for (answer, stop_by) in [
            (Some(true), at(1000)),
            (Some(false), at(320)),
            (None, at(320)),
        ] {
            let mut stint = leading(1000);
            stint.input(at(300), StintInput::OwnKeyGone);
            assert_eq!(
                stint.poll(at(300)),
                StintNext::Demoted {
                    stop_by: at(1000),
                    why: Demotion::KeyGone
                }
            );
            assert_eq!(stint.leads_until(), None);
            assert_eq!(stint.poll(at(300)), StintNext::Send(StintRequest::AskLease));
            assert_eq!(stint.poll(at(310)), StintNext::Wait(None));
            stint.input(at(320), StintInput::LeaseLives(answer));
            assert_eq!(
                stint.poll(at(320)),
                StintNext::Ended(StintEnd::Lost { led: true, stop_by })
            );
        }
    }

    #[test]
    fn only_a_live_view_at_or_after_our_confirmation_says_another_leads() {
        let viewed = |ours, revision, current| StintInput::Viewed {
            ours,
            revision,
            current,
        };
        for ignored in [
            viewed(false, 9, true),
            viewed(true, 12, true),
            viewed(false, 20, false),
        ] {
            let mut stint = leading(1000);
            stint.input(at(300), ignored);
            assert_eq!(stint.poll(at(300)), StintNext::Wait(Some(at(1000))));
        }
        for contradicting in [viewed(false, 10, true), viewed(false, 12, true)] {
            let mut stint = leading(1000);
            stint.input(at(300), contradicting);
            assert_eq!(
                stint.poll(at(300)),
                StintNext::Demoted {
                    stop_by: at(1000),
                    why: Demotion::OtherLeader
                }
            );
        }
    }

    #[test]
    fn resignation_ends_the_stint() {
        let mut stint = leading(1000);
        stint.input(at(300), StintInput::Resign);
        assert_eq!(stint.poll(at(300)), StintNext::Ended(StintEnd::Resigned));
        let mut unpublished = Stint::new(10, at(1000));
        unpublished.input(at(0), StintInput::Resign);
        assert!(matches!(
            unpublished.poll(at(0)),
            StintNext::Ended(StintEnd::Lost { led: false, .. })
        ));
    }

    #[test]
    fn a_switchover_is_given_way_to_once_its_target_is_next_in_line() {
        use crate::backend::etcd::recipe::Recorded;
        use crate::backend::etcd::recipe::tests::key;
        let (target, other) = (key(30, true), key(20, true));
        let steer = Steer {
            switchover: Recorded {
                key: b"e\0switchover".to_vec(),
                create_revision: 40,
            },
            target: target.clone(),
            manual: true,
        };
        let mut stint = leading(1000);
        stint.input(at(10), StintInput::NextInLine(Some(other)));
        stint.input(at(10), StintInput::Switchover(Some(steer.clone())));
        assert_eq!(stint.poll(at(10)), StintNext::Wait(Some(at(1000))));
        // Withdrawn before the target came next: nothing happens.
        stint.input(at(20), StintInput::Switchover(None));
        stint.input(at(20), StintInput::NextInLine(Some(target.clone())));
        assert_eq!(stint.poll(at(20)), StintNext::Wait(Some(at(1000))));
        stint.input(at(30), StintInput::Switchover(Some(steer.clone())));
        assert_eq!(
            stint.poll(at(30)),
            StintNext::Ended(StintEnd::GaveWay(steer))
        );
    }

    #[test]
    fn a_stint_past_its_deadline_leads_on_only_when_the_rule_is_off() {
        let mut stint = Stint::new(10, at(1000)).mutated(Some(Mutation::LeadPastDeadline));
        assert_eq!(stint.poll(at(0)), StintNext::Lead { deadline: at(1000) });
        assert_eq!(stint.poll(at(2000)), StintNext::Wait(None));
        assert_eq!(stint.leads_until(), Some(at(1000)));
    }
}
