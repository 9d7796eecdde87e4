//! Taking office: from our turn to leading ([`TakeOffice`]).
//!
//! A touch (the resigning leader's handover) wrote our tenure marker with
//! it, so we lead at once. Every other way to our turn claims the tenure
//! first (the `tenure` module: write our marker, guarded by our key, and
//! wait until no other candidacy's is left), so that a leader whose key an
//! operator deleted has stopped its work before we start; after a
//! predecessor whose key went without a release, its lease is waited for
//! first. Where markers cannot be written (a role limited to the
//! election's prefix), our key is read back on its own.

#[cfg(test)]
use super::mutation::Mutation;
use super::turn::Turn;
use crate::backend::etcd::layout::CandidateKey;
use crate::backend::recipe::{Recipe, switched_off};
use crate::clock::BootInstant;

/// How a claim of the tenure ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Claim {
    /// Our marker is written and no other is left, as of this revision.
    Ours(i64),
    /// Our key is gone or not ours: no marker was written.
    KeyGone,
    /// We may not write markers (permission denied): nothing was written,
    /// and our key was not read back.
    Unwritable,
}

/// What taking office asks of the driver, or how it ended.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum OfficeNext {
    /// Waiting for our turn ([`OfficeInput::Turn`]).
    AwaitTurn,
    /// Wait until this predecessor's lease ends: [`OfficeInput::LeaseEnded`].
    AwaitLeaseEnd(CandidateKey),
    /// Claim the tenure: [`OfficeInput::Claimed`].
    Claim,
    /// Read our key back, linearizably: [`OfficeInput::ReadBack`].
    ReadBack,
    /// Lead: no older key is left and our key is ours, as of revision
    /// `confirmed_at` (only a view at or after it can contradict us).
    Lead { confirmed_at: i64 },
    /// Our key is gone: this candidacy is over.
    Vanished,
}

/// Answers to [`OfficeNext`]s.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum OfficeInput {
    /// How the wait for our turn ended.
    Turn(Turn),
    LeaseEnded,
    Claimed(Claim),
    /// Our key's create revision if it is still ours.
    ReadBack(Option<i64>),
}

/// One candidacy's way from its turn to leading.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TakeOffice {
    step: OfficeNext,
    /// The revision as of which our turn was read, if it was.
    confirmed_at: i64,
    #[cfg(test)]
    mutation: Option<Mutation>,
}

impl Default for TakeOffice {
    fn default() -> Self {
        TakeOffice::new()
    }
}

impl TakeOffice {
    pub fn new() -> TakeOffice {
        TakeOffice {
            step: OfficeNext::AwaitTurn,
            confirmed_at: 0,
            #[cfg(test)]
            mutation: None,
        }
    }

    /// The same, with one rule switched off (model check only).
    #[cfg(test)]
    pub fn mutated(mut self, mutation: Option<Mutation>) -> TakeOffice {
        self.mutation = mutation;
        self
    }

    fn claims(&self) -> bool {
        !switched_off!(self, NoTenure)
    }

    /// The claim, or, without tenure markers (the mutation), our key read
    /// back on its own.
    fn claim_or_read_back(&self) -> OfficeNext {
        if self.claims() {
            OfficeNext::Claim
        } else {
            OfficeNext::ReadBack
        }
    }

    fn lead_as_of(&self, revision: i64) -> OfficeNext {
        OfficeNext::Lead {
            confirmed_at: self.confirmed_at.max(revision),
        }
    }
}

impl Recipe for TakeOffice {
    type Input = OfficeInput;
    type Next = OfficeNext;

    fn poll(&mut self, _now: BootInstant) -> OfficeNext {
        self.step.clone()
    }

    fn input(&mut self, _now: BootInstant, input: OfficeInput) {
        self.step = match (&self.step, input) {
            (OfficeNext::AwaitTurn, OfficeInput::Turn(turn)) => match turn {
                Turn::KeyGone => OfficeNext::Vanished,
                // The touch wrote our tenure marker for us.
                Turn::Ours {
                    confirmed_at,
                    handed_over: true,
                    ..
                } => OfficeNext::Lead { confirmed_at },
                // The check that found no older key also confirmed ours.
                Turn::Ours { confirmed_at, .. } => {
                    self.confirmed_at = confirmed_at;
                    if self.claims() {
                        OfficeNext::Claim
                    } else {
                        OfficeNext::Lead { confirmed_at }
                    }
                }
                // Its key went without a release (an operator deleted
                // it): its work may run until its lease ends.
                Turn::AfterLeaseOf(predecessor) => OfficeNext::AwaitLeaseEnd(predecessor),
                Turn::First => self.claim_or_read_back(),
            },
            (OfficeNext::AwaitLeaseEnd(_), OfficeInput::LeaseEnded) => self.claim_or_read_back(),
            (OfficeNext::Claim, OfficeInput::Claimed(claim)) => match claim {
                Claim::Ours(at) => self.lead_as_of(at),
                Claim::KeyGone => OfficeNext::Vanished,
                Claim::Unwritable if switched_off!(self, NoReadBack) => OfficeNext::Lead {
                    confirmed_at: self.confirmed_at,
                },
                Claim::Unwritable => OfficeNext::ReadBack,
            },
            (OfficeNext::ReadBack, OfficeInput::ReadBack(read)) => match read {
                Some(revision) => self.lead_as_of(revision),
                None => OfficeNext::Vanished,
            },
            (step, input) => unreachable!("{input:?} while {step:?}"),
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

    fn after(turn: Turn) -> TakeOffice {
        let mut office = TakeOffice::new();
        office.input(now(), OfficeInput::Turn(turn));
        office
    }

    #[test]
    fn a_touch_leads_at_once_and_every_other_turn_claims_the_tenure() {
        let mut touched = after(Turn::Ours {
            confirmed_at: 9,
            handed_over: true,
            released: None,
        });
        assert_eq!(touched.poll(now()), OfficeNext::Lead { confirmed_at: 9 });

        let mut read = after(Turn::Ours {
            confirmed_at: 9,
            handed_over: false,
            released: None,
        });
        assert_eq!(read.poll(now()), OfficeNext::Claim);
        read.input(now(), OfficeInput::Claimed(Claim::Ours(7)));
        assert_eq!(read.poll(now()), OfficeNext::Lead { confirmed_at: 9 });

        let mut first = after(Turn::First);
        assert_eq!(first.poll(now()), OfficeNext::Claim);
        first.input(now(), OfficeInput::Claimed(Claim::KeyGone));
        assert_eq!(first.poll(now()), OfficeNext::Vanished);

        assert_eq!(after(Turn::KeyGone).poll(now()), OfficeNext::Vanished);
    }

    #[test]
    fn a_predecessor_without_a_release_is_waited_for_then_the_tenure_claimed() {
        let pred = key(3, true);
        let mut office = after(Turn::AfterLeaseOf(pred.clone()));
        assert_eq!(office.poll(now()), OfficeNext::AwaitLeaseEnd(pred));
        office.input(now(), OfficeInput::LeaseEnded);
        assert_eq!(office.poll(now()), OfficeNext::Claim);
        office.input(now(), OfficeInput::Claimed(Claim::Ours(12)));
        assert_eq!(office.poll(now()), OfficeNext::Lead { confirmed_at: 12 });
    }

    #[test]
    fn without_markers_our_key_is_read_back() {
        let mut office = after(Turn::First);
        office.input(now(), OfficeInput::Claimed(Claim::Unwritable));
        assert_eq!(office.poll(now()), OfficeNext::ReadBack);
        let mut gone = office.clone();
        office.input(now(), OfficeInput::ReadBack(Some(4)));
        assert_eq!(office.poll(now()), OfficeNext::Lead { confirmed_at: 4 });
        gone.input(now(), OfficeInput::ReadBack(None));
        assert_eq!(gone.poll(now()), OfficeNext::Vanished);
    }
}
