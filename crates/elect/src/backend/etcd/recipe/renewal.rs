//! Renewing the lease through one member ([`Renewal`]): when to ping, what
//! an acknowledged ping proves, and which acknowledgements count.
//!
//! The leadership deadline must never pass the server's expiry of our
//! lease. The server restarts the lease's clock (its TTL) when the ping
//! arrives, never before it was sent, so `send time + TTL`, less what
//! clock rates can add ([`deadline_after`]), is safe, and only the loop
//! that sends knows the send time. So:
//! 1. a ping every TTL/3 after the last acknowledged one's send;
//! 2. a ping unanswered within TTL/6 is given up, its stream with it: a
//!    late acknowledgement must never be credited to a later ping (it
//!    would move the deadline past the server's expiry); each answer
//!    names the ping it answers, and only the outstanding one counts;
//! 3. against servers that acknowledge keepalives without checking they
//!    still lead (before etcd 3.4.31 and 3.5.13, etcd#15247), a ping counts
//!    only once proven: the member's Raft term read before it (its own
//!    read) and after it (a linearizable read, which a leader answers only
//!    once a quorum confirmed it) are the same, so the ping was handled by
//!    that term's leader before any later leader was elected (a later
//!    leader restarts the lease's clock from its election);
//! 4. failures are retried after 50 ms, doubling up to TTL/6;
//! 5. a candidate that is not about to lead renews as a follower
//!    ([`Renewal::following`]): the same ping every TTL/3, but no term
//!    proof. Its acknowledgements keep the lease and its place in line
//!    ([`RenewalNext::Kept`]) but prove no deadline where rule 3 would be
//!    needed: a follower never leads on them. Before it leads it renews
//!    as a leader, and leads only on the deadline that proves
//!    (`FollowerAckCredited` switches this off: the deadline model
//!    catches it beside a deposed leader).

use std::time::Duration;

#[cfg(test)]
use super::mutation::Mutation;
use crate::backend::recipe::{Recipe, switched_off};
use crate::clock::BootInstant;
use crate::leadership::deadline_after;

/// What a lease grant's answer proves: the TTL etcd granted (it raises a
/// TTL below its minimum, so not always the one asked), and the first
/// leadership deadline, counted from the grant's send: etcd starts the
/// lease's clock when the grant arrives, never before it was sent. The
/// driver (`lease.rs`) and the deadline model both take the grant's
/// deadline from here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Grant {
    pub ttl: Duration,
    pub deadline: BootInstant,
}

impl Grant {
    /// A grant sent at `sent`, answered with a TTL of `granted_secs`.
    pub fn answered(sent: BootInstant, granted_secs: i64) -> Grant {
        let ttl = Duration::from_secs(granted_secs.max(0) as u64);
        Grant {
            ttl,
            deadline: deadline_after(sent, ttl),
        }
    }
}

/// What a renewal asks the driver to send, on behalf of ping `ping`.
/// Each is answered by a [`RenewalInput`] naming the same ping, or by
/// [`RenewalInput::GaveUp`] if the time to answer ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RenewalRequest {
    /// Read the member's Raft term: `linearizable`, or from its own state.
    /// Answer: [`RenewalInput::Term`].
    ReadTerm { ping: u64, linearizable: bool },
    /// Send one keepalive on a stream of its own. Answer:
    /// [`RenewalInput::KeptAlive`] or [`RenewalInput::LeaseGone`].
    KeepAlive { ping: u64 },
}

/// Answers, each naming the ping it answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RenewalInput {
    Term {
        ping: u64,
        term: u64,
    },
    /// The keepalive was acknowledged.
    KeptAlive {
        ping: u64,
    },
    /// etcd no longer knows the lease.
    LeaseGone,
    /// The request failed.
    Failed {
        ping: u64,
    },
    /// The ping's time to answer ran out: it is given up (its stream
    /// closed), and tried again after a pause.
    GaveUp,
}

/// What the driver does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RenewalNext {
    /// Send this, and hand in its answer if it comes by `give_up_at`.
    Send {
        request: RenewalRequest,
        give_up_at: BootInstant,
    },
    /// Wait until this instant.
    Wait(BootInstant),
    /// A ping counted: the lease is surely alive until `deadline`.
    Renewed { deadline: BootInstant },
    /// A follower's ping was acknowledged: the lease is kept, probably
    /// until `until`, but nothing is proven (rule 5): no leader may count
    /// on it.
    Kept { until: BootInstant },
    /// etcd no longer knows the lease.
    LeaseGone,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Stage {
    TermBefore,
    KeepAlive { term_before: Option<u64> },
    TermAfter { term_before: u64 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Ping {
    id: u64,
    sent: BootInstant,
    stage: Stage,
    /// A request of this stage is out.
    asked: bool,
}

/// One member's share of keeping the lease alive.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Renewal {
    ttl: Duration,
    proves: bool,
    /// Renews as a follower (rule 5): no proof, no deadline where one is
    /// needed.
    following: bool,
    next_at: BootInstant,
    retry: Duration,
    pings: u64,
    ping: Option<Ping>,
    renewed: Option<BootInstant>,
    kept: Option<BootInstant>,
    gone: bool,
    #[cfg(test)]
    mutation: Option<Mutation>,
}

impl Renewal {
    /// Renews a lease of `ttl` from a first ping at `at` (a third of the
    /// TTL after the grant was sent, or at once when a renewal is taken
    /// up mid-lease); `proves`: each ping is proven by the member's Raft
    /// term (servers before the leadership check).
    pub fn first_ping_at(ttl: Duration, at: BootInstant, proves: bool) -> Renewal {
        Renewal {
            ttl,
            proves,
            following: false,
            next_at: at,
            retry: Duration::ZERO,
            pings: 0,
            ping: None,
            renewed: None,
            kept: None,
            gone: false,
            #[cfg(test)]
            mutation: None,
        }
    }

    /// The same, renewing as a follower (rule 5): where pings need the
    /// term proof, they are sent without it and prove nothing.
    pub fn following(mut self) -> Renewal {
        self.following = true;
        self
    }

    /// A renewal of a lease granted by a request sent at `granted_at` (the
    /// tests' and models' shorthand).
    #[cfg(test)]
    pub fn new(ttl: Duration, granted_at: BootInstant, proves: bool) -> Renewal {
        Renewal::first_ping_at(ttl, granted_at + ttl / 3, proves)
    }

    /// Whether its pings prove a deadline (a follower's need not).
    fn proving(&self) -> bool {
        self.proves && !self.following
    }

    /// The same, with one rule switched off (model check only).
    #[cfg(test)]
    pub fn mutated(mut self, mutation: Option<Mutation>) -> Renewal {
        self.mutation = mutation;
        self
    }

    /// Whether a request of the ping that is out awaits its answer.
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn awaits_answer(&self) -> bool {
        self.ping.is_some_and(|ping| ping.asked)
    }

    fn answer_within(&self) -> Duration {
        self.ttl / 6
    }

    fn failed(&mut self, now: BootInstant) {
        self.ping = None;
        self.retry = (self.retry * 2)
            .max(Duration::from_millis(50))
            .min(self.answer_within());
        self.next_at = now + self.retry;
    }

    fn credit(&mut self, now: BootInstant, ping: Ping) {
        let from = if switched_off!(self, DeadlineFromAnswer) {
            now
        } else {
            ping.sent
        };
        let until = deadline_after(from, self.ttl);
        // Rule 5: a follower's unproven ping keeps the lease only.
        if self.following && self.proves && !switched_off!(self, FollowerAckCredited) {
            self.kept = Some(until);
        } else {
            self.renewed = Some(until);
        }
        self.ping = None;
        self.retry = Duration::ZERO;
        self.next_at = ping.sent + self.ttl / 3;
    }
}

impl Recipe for Renewal {
    type Input = RenewalInput;
    type Next = RenewalNext;

    /// What to do at `now`. A request returned must be answered, or given
    /// up, before the next call.
    fn poll(&mut self, now: BootInstant) -> RenewalNext {
        if self.gone {
            return RenewalNext::LeaseGone;
        }
        if let Some(deadline) = self.renewed.take() {
            return RenewalNext::Renewed { deadline };
        }
        if let Some(until) = self.kept.take() {
            return RenewalNext::Kept { until };
        }
        let ping = match self.ping {
            Some(ping) => ping,
            None if now < self.next_at => return RenewalNext::Wait(self.next_at),
            None => {
                self.pings += 1;
                let stage = if self.proving() {
                    Stage::TermBefore
                } else {
                    Stage::KeepAlive { term_before: None }
                };
                Ping {
                    id: self.pings,
                    sent: now,
                    stage,
                    asked: false,
                }
            }
        };
        let give_up_at = ping.sent + self.answer_within();
        if now >= give_up_at {
            // Out of time between two stages.
            self.failed(now);
            return RenewalNext::Wait(self.next_at);
        }
        if ping.asked {
            // The driver hands in the answer or gives up.
            self.ping = Some(ping);
            return RenewalNext::Wait(give_up_at);
        }
        let request = match ping.stage {
            Stage::TermBefore => RenewalRequest::ReadTerm {
                ping: ping.id,
                linearizable: false,
            },
            Stage::KeepAlive { .. } => RenewalRequest::KeepAlive { ping: ping.id },
            Stage::TermAfter { .. } => RenewalRequest::ReadTerm {
                ping: ping.id,
                linearizable: true,
            },
        };
        self.ping = Some(Ping {
            asked: true,
            ..ping
        });
        RenewalNext::Send {
            request,
            give_up_at,
        }
    }

    fn input(&mut self, now: BootInstant, input: RenewalInput) {
        if input == RenewalInput::GaveUp {
            return self.failed(now);
        }
        if input == RenewalInput::LeaseGone {
            self.gone = true;
            return;
        }
        let answers = match input {
            RenewalInput::Term { ping, .. }
            | RenewalInput::KeptAlive { ping }
            | RenewalInput::Failed { ping } => ping,
            RenewalInput::LeaseGone | RenewalInput::GaveUp => unreachable!("handled above"),
        };
        let Some(mut ping) = self.ping else {
            return;
        };
        // An answer to a ping given up is dropped with its stream (the
        // mutation credits it to whatever ping is out).
        if answers != ping.id && !switched_off!(self, LateAnswerCredited) {
            return;
        }
        ping.asked = false;
        ping.stage = match (ping.stage, input) {
            (_, RenewalInput::Failed { .. }) => return self.failed(now),
            (Stage::TermBefore, RenewalInput::Term { term, .. }) => Stage::KeepAlive {
                term_before: Some(term),
            },
            (Stage::KeepAlive { term_before }, RenewalInput::KeptAlive { .. }) => match term_before
            {
                Some(term_before) => Stage::TermAfter { term_before },
                None => return self.credit(now, ping),
            },
            (Stage::TermAfter { term_before }, RenewalInput::Term { term, .. }) => {
                if term == term_before || switched_off!(self, TermUnchecked) {
                    return self.credit(now, ping);
                }
                // Another term around the ping: not credited.
                return self.failed(now);
            }
            // An answer of another stage's kind: a late one (the mutation).
            _ => return,
        };
        self.ping = Some(ping);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL: Duration = Duration::from_secs(3);

    fn at(ms: u64) -> BootInstant {
        BootInstant::from_nanos(ms * 1_000_000)
    }

    fn sends(renewal: &mut Renewal, now: BootInstant) -> RenewalRequest {
        match renewal.poll(now) {
            RenewalNext::Send { request, .. } => request,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_grant_counts_from_its_send_with_the_ttl_etcd_granted() {
        // etcd raised the 3 s asked to its minimum, 5 s.
        let grant = Grant::answered(at(100), 5);
        assert_eq!(grant.ttl, Duration::from_secs(5));
        assert_eq!(
            grant.deadline,
            deadline_after(at(100), Duration::from_secs(5))
        );
        // A lease etcd says has no time left proves nothing beyond the send.
        assert!(Grant::answered(at(100), -1).deadline <= at(100));
    }

    #[test]
    fn a_ping_every_third_of_the_ttl_counts_from_its_send() {
        let mut renewal = Renewal::new(TTL, at(0), false);
        assert_eq!(renewal.poll(at(0)), RenewalNext::Wait(at(1000)));
        assert_eq!(
            renewal.poll(at(1000)),
            RenewalNext::Send {
                request: RenewalRequest::KeepAlive { ping: 1 },
                give_up_at: at(1500)
            }
        );
        renewal.input(at(1300), RenewalInput::KeptAlive { ping: 1 });
        assert_eq!(
            renewal.poll(at(1300)),
            RenewalNext::Renewed {
                deadline: deadline_after(at(1000), TTL)
            }
        );
        assert_eq!(renewal.poll(at(1300)), RenewalNext::Wait(at(2000)));
    }

    #[test]
    fn a_late_answer_is_never_credited_to_a_later_ping() {
        let mut renewal = Renewal::new(TTL, at(0), false);
        sends(&mut renewal, at(1000));
        assert_eq!(renewal.poll(at(1000)), RenewalNext::Wait(at(1500)));
        renewal.input(at(1500), RenewalInput::GaveUp);
        assert_eq!(renewal.poll(at(1500)), RenewalNext::Wait(at(1550)));
        assert_eq!(
            sends(&mut renewal, at(1550)),
            RenewalRequest::KeepAlive { ping: 2 }
        );
        renewal.input(at(1600), RenewalInput::KeptAlive { ping: 1 });
        assert_eq!(renewal.poll(at(1600)), RenewalNext::Wait(at(2050)));
        renewal.input(at(1700), RenewalInput::KeptAlive { ping: 2 });
        assert_eq!(
            renewal.poll(at(1700)),
            RenewalNext::Renewed {
                deadline: deadline_after(at(1550), TTL)
            }
        );
    }

    #[test]
    fn failures_back_off_up_to_a_sixth_of_the_ttl() {
        let mut renewal = Renewal::new(TTL, at(0), false);
        let mut now = at(1000);
        let mut pauses = vec![];
        for _ in 0..6 {
            let RenewalRequest::KeepAlive { ping } = sends(&mut renewal, now) else {
                panic!()
            };
            renewal.input(now, RenewalInput::Failed { ping });
            let RenewalNext::Wait(next) = renewal.poll(now) else {
                panic!()
            };
            pauses.push((next - now).as_millis());
            now = next;
        }
        assert_eq!(pauses, [50, 100, 200, 400, 500, 500]);
    }

    #[test]
    fn against_old_servers_a_ping_counts_only_in_the_term_it_was_sent_in() {
        let mut renewal = Renewal::new(TTL, at(0), true);
        assert_eq!(
            sends(&mut renewal, at(1000)),
            RenewalRequest::ReadTerm {
                ping: 1,
                linearizable: false
            }
        );
        renewal.input(at(1010), RenewalInput::Term { ping: 1, term: 7 });
        assert_eq!(
            sends(&mut renewal, at(1010)),
            RenewalRequest::KeepAlive { ping: 1 }
        );
        renewal.input(at(1020), RenewalInput::KeptAlive { ping: 1 });
        assert_eq!(
            sends(&mut renewal, at(1020)),
            RenewalRequest::ReadTerm {
                ping: 1,
                linearizable: true
            }
        );
        let mut changed = renewal.clone();
        renewal.input(at(1030), RenewalInput::Term { ping: 1, term: 7 });
        assert_eq!(
            renewal.poll(at(1030)),
            RenewalNext::Renewed {
                deadline: deadline_after(at(1000), TTL)
            }
        );
        changed.input(at(1030), RenewalInput::Term { ping: 1, term: 8 });
        assert_eq!(changed.poll(at(1030)), RenewalNext::Wait(at(1080)));
    }

    #[test]
    fn a_follower_pings_without_the_proof_and_proves_nothing_where_it_is_needed() {
        let mut follower = Renewal::new(TTL, at(0), true).following();
        assert_eq!(
            sends(&mut follower, at(1000)),
            RenewalRequest::KeepAlive { ping: 1 }
        );
        follower.input(at(1010), RenewalInput::KeptAlive { ping: 1 });
        assert_eq!(
            follower.poll(at(1010)),
            RenewalNext::Kept {
                until: deadline_after(at(1000), TTL)
            }
        );
        assert_eq!(follower.poll(at(1010)), RenewalNext::Wait(at(2000)));
        // Where servers check leadership, its pings prove as a leader's.
        let mut checked = Renewal::new(TTL, at(0), false).following();
        sends(&mut checked, at(1000));
        checked.input(at(1010), RenewalInput::KeptAlive { ping: 1 });
        assert_eq!(
            checked.poll(at(1010)),
            RenewalNext::Renewed {
                deadline: deadline_after(at(1000), TTL)
            }
        );
    }

    #[test]
    fn a_renewal_taken_up_mid_lease_pings_when_asked() {
        let mut renewal = Renewal::first_ping_at(TTL, at(200), true);
        assert_eq!(renewal.poll(at(0)), RenewalNext::Wait(at(200)));
        assert_eq!(
            sends(&mut renewal, at(200)),
            RenewalRequest::ReadTerm {
                ping: 1,
                linearizable: false
            }
        );
    }

    #[test]
    fn a_lease_etcd_no_longer_knows_ends_the_renewal() {
        let mut renewal = Renewal::new(TTL, at(0), false);
        sends(&mut renewal, at(1000));
        renewal.input(at(1010), RenewalInput::LeaseGone);
        assert_eq!(renewal.poll(at(1010)), RenewalNext::LeaseGone);
    }
}
