//! Waiting for our turn, from our key's creation to the decision that the
//! way is clear ([`WaitForTurn`]).
//!
//! 1. Read the predecessor, the youngest key older than ours. None: we
//!    were first ([`Turn::First`]; the claim reads our key back).
//! 2. Watch the predecessor's key and our own on one stream, from just
//!    after that read. A put of our own key, unchanged (a resigning
//!    leader's touch, in the transaction that deleted its key): we lead
//!    at that revision with no read of our own. Our key gone: so is our
//!    turn. The watch cancelled (compaction) or broken: a linearizable
//!    read decides.
//! 3. The predecessor deleted at revision `seen`: one read of our turn
//!    (our key still ours, the next older key, the predecessor's release
//!    marker), which the driver may take from one member's own state if
//!    that member had applied `seen`. The watch goes on meanwhile, and a
//!    touch that arrives first still decides; any other event ends that
//!    race, and the read decides.
//! 4. The read: an older key is the new predecessor (back to 2, watching
//!    from the read's revision); no older key and a release marker, or a
//!    predecessor that is not an elect candidate: our turn, as of the
//!    read. No marker from an elect predecessor: its key went without a
//!    release (an operator deleted it), so its work may still run until
//!    its lease ends ([`Turn::AfterLeaseOf`]).

#[cfg(test)]
use super::mutation::Mutation;
use crate::backend::etcd::keywatch::Woken;
use crate::backend::etcd::layout::CandidateKey;
use crate::backend::etcd::layout::granted_by_elect;
use crate::backend::recipe::{Recipe, switched_off};
use crate::clock::BootInstant;

/// What the recipe asks the driver for. Each is answered by an [`TurnInput`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TurnRequest {
    /// Read the youngest key older than ours, linearizably. Answer:
    /// [`TurnInput::Predecessor`].
    FindPredecessor,
    /// Watch the predecessor's key and ours on one stream, from just after
    /// revision `from`, and hand in what it reports: [`TurnInput::Woken`], or
    /// [`TurnInput::WatchBroke`].
    Watch {
        predecessor: CandidateKey,
        from: i64,
    },
    /// Read our turn; from one member's own state only if it had applied
    /// revision `seen` (`None`: linearizably). Answer: [`TurnInput::Checked`].
    /// While [`WaitForTurn::races_the_watch`], what the watch reports
    /// meanwhile is handed in too.
    CheckTurn { seen: Option<i64> },
}

/// What a read of our turn found (one transaction, guarded by our key).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TurnCheck {
    /// Our key is gone, or not ours.
    KeyGone,
    /// A key older than ours, read at revision `at`.
    Older(CandidateKey, i64),
    /// No older key, as of revision `at`; whether the predecessor's
    /// release marker is there.
    Clear { at: i64, released: bool },
}

/// Answers and events.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TurnInput {
    /// The youngest key older than ours, and the read's revision.
    Predecessor {
        key: Option<CandidateKey>,
        at: i64,
    },
    Woken(Woken),
    /// The watch could not be made, or broke.
    WatchBroke,
    Checked(TurnCheck),
}

/// How waiting for our turn ended.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Turn {
    /// No older key is left and our key is ours, as of `confirmed_at` (the
    /// revision of the read that said both, or of the touch that handed
    /// over to us: `handed_over`). `released`: the predecessor's release
    /// marker said so, and is ours to remove.
    Ours {
        confirmed_at: i64,
        handed_over: bool,
        released: Option<CandidateKey>,
    },
    /// No older key is left, but the last predecessor was an elect
    /// candidate whose key went without a release: wait for its lease.
    AfterLeaseOf(CandidateKey),
    /// Nobody was ever ahead of us.
    First,
    /// Our key is gone or not ours.
    KeyGone,
}

/// What the driver does next.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TurnNext {
    Send(TurnRequest),
    Decided(Turn),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum State {
    Finding,
    Watching {
        predecessor: CandidateKey,
        from: i64,
    },
    Checking {
        predecessor: CandidateKey,
        seen: Option<i64>,
        /// The watch still races the read: a touch may decide first.
        racing: bool,
    },
    Decided(Turn),
}

/// One candidacy's wait for its turn, from its key's creation.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WaitForTurn {
    state: State,
    #[cfg(test)]
    mutation: Option<Mutation>,
}

impl Default for WaitForTurn {
    fn default() -> Self {
        WaitForTurn::new()
    }
}

impl WaitForTurn {
    pub fn new() -> WaitForTurn {
        WaitForTurn {
            state: State::Finding,
            #[cfg(test)]
            mutation: None,
        }
    }

    /// The same, with one rule switched off (model check only).
    #[cfg(test)]
    pub fn mutated(mut self, mutation: Option<Mutation>) -> WaitForTurn {
        self.mutation = mutation;
        self
    }

    /// What the driver does now: the request to answer, or the turn.
    fn next(&self) -> TurnNext {
        match &self.state {
            State::Finding => TurnNext::Send(TurnRequest::FindPredecessor),
            State::Watching { predecessor, from } => TurnNext::Send(TurnRequest::Watch {
                predecessor: predecessor.clone(),
                from: *from,
            }),
            State::Checking { seen, .. } => TurnNext::Send(TurnRequest::CheckTurn { seen: *seen }),
            State::Decided(turn) => TurnNext::Decided(turn.clone()),
        }
    }

    /// Whether what the watch reports still matters while our turn is
    /// read: a touch then decides before the read.
    pub fn races_the_watch(&self) -> bool {
        match self.state {
            State::Checking { racing, .. } => racing || switched_off!(self, RaceUnended),
            _ => false,
        }
    }

    /// The predecessor we wait on, if any.
    pub fn predecessor(&self) -> Option<&CandidateKey> {
        match &self.state {
            State::Watching { predecessor, .. } | State::Checking { predecessor, .. } => {
                Some(predecessor)
            }
            _ => None,
        }
    }

    fn checked(&self, predecessor: CandidateKey, check: TurnCheck) -> State {
        match check {
            TurnCheck::KeyGone => State::Decided(Turn::KeyGone),
            TurnCheck::Older(key, at) => State::Watching {
                predecessor: key,
                from: at,
            },
            TurnCheck::Clear { at, released } => {
                let waits_for_lease = !released
                    && granted_by_elect(predecessor.lease)
                    && !switched_off!(self, NoLeaseWait);
                if waits_for_lease {
                    State::Decided(Turn::AfterLeaseOf(predecessor))
                } else {
                    State::Decided(Turn::Ours {
                        confirmed_at: at,
                        handed_over: false,
                        released: released.then_some(predecessor),
                    })
                }
            }
        }
    }
}

impl Recipe for WaitForTurn {
    type Input = TurnInput;
    type Next = TurnNext;

    fn poll(&mut self, _now: BootInstant) -> TurnNext {
        self.next()
    }

    fn input(&mut self, _now: BootInstant, input: TurnInput) {
        let state = std::mem::replace(&mut self.state, State::Finding);
        self.state = match (state, input) {
            (State::Finding, TurnInput::Predecessor { key, at }) => match key {
                None => State::Decided(Turn::First),
                Some(predecessor) => State::Watching {
                    predecessor,
                    from: at,
                },
            },
            (State::Watching { predecessor, .. }, TurnInput::Woken(woken)) => match woken {
                Woken::HandedOver(at) => State::Decided(Turn::Ours {
                    confirmed_at: at,
                    handed_over: true,
                    released: None,
                }),
                Woken::OwnKeyGone => State::Decided(Turn::KeyGone),
                Woken::PredecessorGone(seen) if switched_off!(self, LeadOnDeletion) => {
                    State::Decided(Turn::Ours {
                        confirmed_at: seen,
                        handed_over: false,
                        released: None,
                    })
                }
                Woken::PredecessorGone(seen) => State::Checking {
                    predecessor,
                    seen: Some(seen),
                    racing: true,
                },
                // Compacted: read afresh.
                Woken::Cancelled => State::Checking {
                    predecessor,
                    seen: None,
                    racing: false,
                },
            },
            (State::Watching { predecessor, .. }, TurnInput::WatchBroke) => State::Checking {
                predecessor,
                seen: None,
                racing: false,
            },
            (
                State::Checking {
                    predecessor,
                    seen,
                    racing,
                },
                TurnInput::Woken(woken),
            ) => match woken {
                Woken::HandedOver(at) if racing || switched_off!(self, RaceUnended) => {
                    State::Decided(Turn::Ours {
                        confirmed_at: at,
                        handed_over: true,
                        released: None,
                    })
                }
                // Anything else ends the race: the read decides.
                _ => State::Checking {
                    predecessor,
                    seen,
                    racing: false,
                },
            },
            (
                State::Checking {
                    predecessor, seen, ..
                },
                TurnInput::WatchBroke,
            ) => State::Checking {
                predecessor,
                seen,
                racing: false,
            },
            (State::Checking { predecessor, .. }, TurnInput::Checked(check)) => {
                self.checked(predecessor, check)
            }
            (state @ State::Decided(_), _) => state,
            (state, input) => unreachable!("{input:?} while {state:?}"),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::key;
    use super::*;

    fn now() -> BootInstant {
        BootInstant::from_nanos(0)
    }

    fn waiting_on(pred: &CandidateKey, at: i64) -> WaitForTurn {
        let mut turn = WaitForTurn::new();
        assert_eq!(turn.next(), TurnNext::Send(TurnRequest::FindPredecessor));
        turn.input(
            now(),
            TurnInput::Predecessor {
                key: Some(pred.clone()),
                at,
            },
        );
        assert_eq!(
            turn.next(),
            TurnNext::Send(TurnRequest::Watch {
                predecessor: pred.clone(),
                from: at
            })
        );
        turn
    }

    #[test]
    fn the_first_has_nobody_to_wait_on() {
        let mut turn = WaitForTurn::new();
        turn.input(now(), TurnInput::Predecessor { key: None, at: 5 });
        assert_eq!(turn.next(), TurnNext::Decided(Turn::First));
    }

    #[test]
    fn a_touch_hands_over_without_a_read() {
        let mut turn = waiting_on(&key(3, true), 7);
        turn.input(now(), TurnInput::Woken(Woken::HandedOver(9)));
        assert_eq!(
            turn.next(),
            TurnNext::Decided(Turn::Ours {
                confirmed_at: 9,
                handed_over: true,
                released: None
            })
        );
    }

    #[test]
    fn a_deletion_is_read_and_a_touch_during_the_read_still_decides() {
        let pred = key(3, true);
        let mut turn = waiting_on(&pred, 7);
        turn.input(now(), TurnInput::Woken(Woken::PredecessorGone(8)));
        assert_eq!(
            turn.next(),
            TurnNext::Send(TurnRequest::CheckTurn { seen: Some(8) })
        );
        assert!(turn.races_the_watch());
        let mut touched = turn.clone();
        touched.input(now(), TurnInput::Woken(Woken::HandedOver(8)));
        assert!(matches!(
            touched.next(),
            TurnNext::Decided(Turn::Ours {
                handed_over: true,
                ..
            })
        ));
        // Another event first: the race is over, the read decides.
        turn.input(now(), TurnInput::Woken(Woken::OwnKeyGone));
        assert!(!turn.races_the_watch());
        turn.input(now(), TurnInput::Woken(Woken::HandedOver(9)));
        assert_eq!(
            turn.next(),
            TurnNext::Send(TurnRequest::CheckTurn { seen: Some(8) })
        );
        turn.input(now(), TurnInput::Checked(TurnCheck::KeyGone));
        assert_eq!(turn.next(), TurnNext::Decided(Turn::KeyGone));
    }

    /// The switch the model check turns off does change the recipe: with
    /// `RaceUnended`, a touch after our key's deletion decides. The model
    /// shows no world delivers one (`a_race_that_never_ends_is_still_safe`).
    #[test]
    fn an_unended_race_takes_a_touch_after_our_key_went() {
        let mut turn = waiting_on(&key(3, true), 7).mutated(Some(Mutation::RaceUnended));
        turn.input(now(), TurnInput::Woken(Woken::PredecessorGone(8)));
        turn.input(now(), TurnInput::Woken(Woken::OwnKeyGone));
        assert!(turn.races_the_watch());
        turn.input(now(), TurnInput::Woken(Woken::HandedOver(9)));
        assert!(matches!(
            turn.next(),
            TurnNext::Decided(Turn::Ours {
                handed_over: true,
                ..
            })
        ));
    }

    #[test]
    fn an_older_key_is_waited_on_next() {
        let mut turn = waiting_on(&key(3, true), 7);
        turn.input(now(), TurnInput::Woken(Woken::PredecessorGone(8)));
        let older = key(2, false);
        turn.input(
            now(),
            TurnInput::Checked(TurnCheck::Older(older.clone(), 8)),
        );
        assert_eq!(
            turn.next(),
            TurnNext::Send(TurnRequest::Watch {
                predecessor: older,
                from: 8
            })
        );
    }

    #[test]
    fn a_release_marker_or_a_go_predecessor_is_our_turn_else_its_lease_is_waited_for() {
        let elect = key(3, true);
        let mut released = waiting_on(&elect, 7);
        released.input(now(), TurnInput::Woken(Woken::PredecessorGone(8)));
        released.input(
            now(),
            TurnInput::Checked(TurnCheck::Clear {
                at: 8,
                released: true,
            }),
        );
        assert_eq!(
            released.next(),
            TurnNext::Decided(Turn::Ours {
                confirmed_at: 8,
                handed_over: false,
                released: Some(elect.clone())
            })
        );

        let mut deleted = waiting_on(&elect, 7);
        deleted.input(now(), TurnInput::Woken(Woken::PredecessorGone(8)));
        deleted.input(
            now(),
            TurnInput::Checked(TurnCheck::Clear {
                at: 8,
                released: false,
            }),
        );
        assert_eq!(deleted.next(), TurnNext::Decided(Turn::AfterLeaseOf(elect)));

        let go = key(3, false);
        let mut from_go = waiting_on(&go, 7);
        from_go.input(now(), TurnInput::Woken(Woken::PredecessorGone(8)));
        from_go.input(
            now(),
            TurnInput::Checked(TurnCheck::Clear {
                at: 9,
                released: false,
            }),
        );
        assert!(matches!(
            from_go.next(),
            TurnNext::Decided(Turn::Ours {
                confirmed_at: 9,
                ..
            })
        ));
    }

    #[test]
    fn a_broken_or_compacted_watch_reads_linearizably() {
        for broken in [TurnInput::WatchBroke, TurnInput::Woken(Woken::Cancelled)] {
            let mut turn = waiting_on(&key(3, true), 7);
            turn.input(now(), broken);
            assert_eq!(
                turn.next(),
                TurnNext::Send(TurnRequest::CheckTurn { seen: None })
            );
            assert!(!turn.races_the_watch());
        }
    }
}
