//! From our turn to the end of our tenure: taking office
//! ([`TakeOffice`]), following the next in line while we lead
//! ([`NextInLine`]), and the release ([`Resignation`]).
//!
//! Taking office: a touch (the resigning leader's handover) wrote our
//! tenure marker with it, so we lead at once. Every other way to our turn
//! claims the tenure first (the `tenure` module: write our marker, guarded
//! by our key, and wait until no other candidacy's is left), so that a
//! leader whose key an operator deleted has stopped its work before we
//! start; after a predecessor whose key went without a release, its lease
//! is waited for first. Where markers cannot be written (a role limited
//! to the election's prefix), our key is read back on its own.
//!
//! The next in line is the oldest key younger than ours: one read, then
//! the prefix's events. Its deletion means a new read; while nobody
//! queues, the first key created is the next. Our own key changed or gone
//! ends our tenure. Only an elect candidate is handed over to (a Go
//! waiter reads its own turn).
//!
//! The release deletes our key and writes the release marker, and touches
//! the next in line if its key still has the create revision and lease it
//! was read with; it is sent only once the work started under our
//! leadership has stopped.

use super::mutation::Mutation;
use super::turn::Turn;
use crate::backend::etcd::layout::CandidateKey;
use crate::backend::etcd::layout::granted_by_elect;

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
pub enum OfficeStep {
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

/// Answers to [`OfficeStep`]s.
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
    step: OfficeStep,
    /// The revision as of which our turn was read, if it was.
    confirmed_at: i64,
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
            step: OfficeStep::AwaitTurn,
            confirmed_at: 0,
            mutation: None,
        }
    }

    /// The same, with one rule switched off (model check only).
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn mutated(mut self, mutation: Option<Mutation>) -> TakeOffice {
        self.mutation = mutation;
        self
    }

    /// What the driver does now.
    pub fn step(&self) -> &OfficeStep {
        &self.step
    }

    fn claims(&self) -> bool {
        self.mutation != Some(Mutation::NoTenure)
    }

    /// The claim, or, without tenure markers (the mutation), our key read
    /// back on its own.
    fn claim_or_read_back(&self) -> OfficeStep {
        if self.claims() {
            OfficeStep::Claim
        } else {
            OfficeStep::ReadBack
        }
    }

    fn lead_as_of(&self, revision: i64) -> OfficeStep {
        OfficeStep::Lead {
            confirmed_at: self.confirmed_at.max(revision),
        }
    }

    /// Takes an answer.
    pub fn input(&mut self, input: OfficeInput) {
        self.step = match (&self.step, input) {
            (OfficeStep::AwaitTurn, OfficeInput::Turn(turn)) => match turn {
                Turn::KeyGone => OfficeStep::Vanished,
                // The touch wrote our tenure marker for us.
                Turn::Ours {
                    confirmed_at,
                    handed_over: true,
                    ..
                } => OfficeStep::Lead { confirmed_at },
                // The check that found no older key also confirmed ours.
                Turn::Ours { confirmed_at, .. } => {
                    self.confirmed_at = confirmed_at;
                    if self.claims() {
                        OfficeStep::Claim
                    } else {
                        OfficeStep::Lead { confirmed_at }
                    }
                }
                // Its key went without a release (an operator deleted
                // it): its work may run until its lease ends.
                Turn::AfterLeaseOf(predecessor) => OfficeStep::AwaitLeaseEnd(predecessor),
                Turn::First => self.claim_or_read_back(),
            },
            (OfficeStep::AwaitLeaseEnd(_), OfficeInput::LeaseEnded) => self.claim_or_read_back(),
            (OfficeStep::Claim, OfficeInput::Claimed(claim)) => match claim {
                Claim::Ours(at) => self.lead_as_of(at),
                Claim::KeyGone => OfficeStep::Vanished,
                Claim::Unwritable => OfficeStep::ReadBack,
            },
            (OfficeStep::ReadBack, OfficeInput::ReadBack(read)) => match read {
                Some(revision) => self.lead_as_of(revision),
                None => OfficeStep::Vanished,
            },
            (step, input) => unreachable!("{input:?} while {step:?}"),
        };
    }
}

/// Which younger key a leader's read takes as its next in line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Pick {
    /// The oldest: the one whose turn comes next.
    Oldest,
    /// The youngest (a mutation's choice).
    Youngest,
}

/// What following the next in line asks of the driver.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum NextStep {
    /// One linearizable read of our key and of the younger key `pick`
    /// chooses: [`NextInLine::read`], or [`NextInLine::broke`].
    Read { pick: Pick },
    /// Watch the election's prefix from just after revision `from` and
    /// hand in its events ([`NextInLine::event`]) until the step changes;
    /// [`NextInLine::broke`] if the watch fails, [`NextInLine::cancelled`]
    /// if the server cancels it.
    Watch { from: i64 },
    /// Our key is gone (deleted, created again, or put without our
    /// lease): our tenure is over.
    OwnKeyGone,
}

/// A change of a key under the election's prefix, as a watch reports it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum KeyEvent {
    /// A put: the key as it now reads, and its version (1: created).
    Put(CandidateKey, i64),
    Delete(Vec<u8>),
}

/// While we lead: our key and the next in line (`LeaderWatch`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NextInLine {
    own: CandidateKey,
    step: NextStep,
    /// The next in line as last known; a next that left stays here until
    /// the next read (a resignation meanwhile touches a key that is gone:
    /// the touch's guard fails, and the successor reads its own turn).
    next: Option<CandidateKey>,
    mutation: Option<Mutation>,
}

impl NextInLine {
    /// Follows the next in line after `own`, our key as we created it.
    pub fn new(own: CandidateKey) -> NextInLine {
        NextInLine {
            own,
            step: NextStep::Read { pick: Pick::Oldest },
            next: None,
            mutation: None,
        }
    }

    /// The same, with one rule switched off (model check only).
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn mutated(mut self, mutation: Option<Mutation>) -> NextInLine {
        self.mutation = mutation;
        self.step = self.read();
        self
    }

    fn read(&self) -> NextStep {
        let pick = match self.mutation {
            Some(Mutation::NextAnyYounger) => Pick::Youngest,
            _ => Pick::Oldest,
        };
        NextStep::Read { pick }
    }

    pub fn step(&self) -> &NextStep {
        &self.step
    }

    /// Our key as we created it.
    pub fn own(&self) -> &CandidateKey {
        &self.own
    }

    /// The next in line as last known.
    pub fn next(&self) -> Option<&CandidateKey> {
        self.next.as_ref()
    }

    /// Whom a resignation may touch: the next in line if it is an elect
    /// candidate.
    pub fn successor(&self) -> Option<CandidateKey> {
        self.next
            .clone()
            .filter(|next| granted_by_elect(next.lease))
    }

    /// Whether `kv`, a put of our key's name, is still our key.
    fn is_own(&self, key: &CandidateKey) -> bool {
        key.key == self.own.key
            && key.create_revision == self.own.create_revision
            && key.lease == self.own.lease
    }

    /// The read's answer: our key as it reads (`None`: not there), the
    /// younger key picked, and the read's revision.
    pub fn read_answered(
        &mut self,
        own: Option<&CandidateKey>,
        next: Option<CandidateKey>,
        at: i64,
    ) {
        debug_assert!(matches!(self.step, NextStep::Read { .. }));
        if !own.is_some_and(|own| self.is_own(own)) {
            self.gone();
            return;
        }
        self.next = next;
        self.step = NextStep::Watch { from: at };
    }

    /// Whether `event` changes anything: a watch may skip the others.
    pub fn reacts_to(&self, event: &KeyEvent) -> bool {
        if !matches!(self.step, NextStep::Watch { .. }) {
            return false;
        }
        match event {
            KeyEvent::Put(key, _) if key.key == self.own.key => !self.is_own(key),
            KeyEvent::Delete(key) if *key == self.own.key => true,
            KeyEvent::Delete(key) => self.next.as_ref().is_some_and(|n| n.key == *key),
            // Nobody was queued at the read: the first key created since
            // is the next in line (events come in revision order).
            KeyEvent::Put(_, version) => self.next.is_none() && *version == 1,
        }
    }

    /// Takes one of the watch's events.
    pub fn event(&mut self, event: KeyEvent) {
        if !self.reacts_to(&event) {
            return;
        }
        match event {
            KeyEvent::Put(key, _) if key.key == self.own.key => self.gone(),
            KeyEvent::Delete(key) if key == self.own.key => self.gone(),
            // The next in line left: read who is next now.
            KeyEvent::Delete(_) => self.step = self.read(),
            KeyEvent::Put(key, _) => self.next = Some(key),
        }
    }

    /// The server cancelled the watch (compaction): read afresh.
    pub fn cancelled(&mut self) {
        if !matches!(self.step, NextStep::OwnKeyGone) {
            self.step = self.read();
        }
    }

    /// A read or the watch failed: nobody is next until a read says who
    /// is, so a resignation meanwhile touches no one.
    pub fn broke(&mut self) {
        if !matches!(self.step, NextStep::OwnKeyGone) {
            self.next = None;
            self.step = self.read();
        }
    }

    fn gone(&mut self) {
        self.next = None;
        self.step = NextStep::OwnKeyGone;
    }
}

/// A touch of the next in line in the release's transaction: put its key
/// again, value and lease unchanged, and write its tenure marker, if
/// (`guarded`) its key still has the create revision and the lease it was
/// read with.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Touch {
    pub next: CandidateKey,
    pub guarded: bool,
}

/// What ending a candidacy asks of the driver.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ReleaseStep {
    /// Wait until the work started under our leadership has stopped:
    /// [`Resignation::work_stopped`].
    AwaitWorkStopped,
    /// Send the release (our key's deletion, guarded by its create
    /// revision, the release marker, our tenure marker's deletion), with
    /// this touch if any.
    Release(Option<Touch>),
}

/// The end of a candidacy that may have led: a resignation, which hands
/// over to the `successor` the leader knew, or a loss, which hands over to
/// nobody.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Resignation {
    successor: Option<CandidateKey>,
    working: bool,
    mutation: Option<Mutation>,
}

impl Resignation {
    /// `working`: whether work started under our leadership runs now.
    pub fn new(successor: Option<CandidateKey>, working: bool) -> Resignation {
        Resignation {
            successor,
            working,
            mutation: None,
        }
    }

    /// The same, with one rule switched off (model check only).
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn mutated(mut self, mutation: Option<Mutation>) -> Resignation {
        self.mutation = mutation;
        self
    }

    /// The work has stopped.
    pub fn work_stopped(&mut self) {
        self.working = false;
    }

    pub fn step(&self) -> ReleaseStep {
        if self.working && self.mutation != Some(Mutation::ReleaseBeforeStop) {
            return ReleaseStep::AwaitWorkStopped;
        }
        let touch = self.successor.clone().map(|next| Touch {
            next,
            guarded: self.mutation != Some(Mutation::TouchUnguarded),
        });
        ReleaseStep::Release(touch)
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::key;
    use super::*;

    fn after(turn: Turn) -> TakeOffice {
        let mut office = TakeOffice::new();
        office.input(OfficeInput::Turn(turn));
        office
    }

    #[test]
    fn a_touch_leads_at_once_and_every_other_turn_claims_the_tenure() {
        let touched = after(Turn::Ours {
            confirmed_at: 9,
            handed_over: true,
            released: None,
        });
        assert_eq!(touched.step(), &OfficeStep::Lead { confirmed_at: 9 });

        let mut read = after(Turn::Ours {
            confirmed_at: 9,
            handed_over: false,
            released: None,
        });
        assert_eq!(read.step(), &OfficeStep::Claim);
        read.input(OfficeInput::Claimed(Claim::Ours(7)));
        assert_eq!(read.step(), &OfficeStep::Lead { confirmed_at: 9 });

        let mut first = after(Turn::First);
        assert_eq!(first.step(), &OfficeStep::Claim);
        first.input(OfficeInput::Claimed(Claim::KeyGone));
        assert_eq!(first.step(), &OfficeStep::Vanished);

        assert_eq!(after(Turn::KeyGone).step(), &OfficeStep::Vanished);
    }

    #[test]
    fn a_predecessor_without_a_release_is_waited_for_then_the_tenure_claimed() {
        let pred = key(3, true);
        let mut office = after(Turn::AfterLeaseOf(pred.clone()));
        assert_eq!(office.step(), &OfficeStep::AwaitLeaseEnd(pred));
        office.input(OfficeInput::LeaseEnded);
        assert_eq!(office.step(), &OfficeStep::Claim);
        office.input(OfficeInput::Claimed(Claim::Ours(12)));
        assert_eq!(office.step(), &OfficeStep::Lead { confirmed_at: 12 });
    }

    #[test]
    fn without_markers_our_key_is_read_back() {
        let mut office = after(Turn::First);
        office.input(OfficeInput::Claimed(Claim::Unwritable));
        assert_eq!(office.step(), &OfficeStep::ReadBack);
        let mut gone = office.clone();
        office.input(OfficeInput::ReadBack(Some(4)));
        assert_eq!(office.step(), &OfficeStep::Lead { confirmed_at: 4 });
        gone.input(OfficeInput::ReadBack(None));
        assert_eq!(gone.step(), &OfficeStep::Vanished);
    }

    fn following(own: &CandidateKey, next: Option<CandidateKey>) -> NextInLine {
        let mut line = NextInLine::new(own.clone());
        assert_eq!(line.step(), &NextStep::Read { pick: Pick::Oldest });
        line.read_answered(Some(own), next, 10);
        assert_eq!(line.step(), &NextStep::Watch { from: 10 });
        line
    }

    #[test]
    fn the_next_in_line_is_read_then_followed() {
        let own = key(2, true);
        let next = key(5, true);
        let mut line = following(&own, Some(next.clone()));
        assert_eq!(line.successor(), Some(next.clone()));
        // A younger key queueing behind changes nothing.
        let later = key(11, true);
        assert!(!line.reacts_to(&KeyEvent::Put(later.clone(), 1)));
        // The next leaving: read again; it stays known until then.
        line.event(KeyEvent::Delete(next.key.clone()));
        assert_eq!(line.step(), &NextStep::Read { pick: Pick::Oldest });
        assert_eq!(line.next(), Some(&next));
        line.read_answered(Some(&own), None, 12);
        // Nobody queued at the read: the first key created is next.
        let newcomer = key(13, false);
        line.event(KeyEvent::Put(newcomer.clone(), 1));
        assert_eq!(line.next(), Some(&newcomer));
        assert_eq!(line.successor(), None, "a Go waiter is not touched");
    }

    #[test]
    fn our_key_changed_or_gone_ends_the_tenure_and_a_failure_forgets_the_next() {
        let own = key(2, true);
        let mut touched_again = following(&own, None);
        touched_again.event(KeyEvent::Put(own.clone(), 2));
        assert_eq!(touched_again.step(), &NextStep::Watch { from: 10 });
        let mut recreated = own.clone();
        recreated.create_revision = 20;
        touched_again.event(KeyEvent::Put(recreated, 1));
        assert_eq!(touched_again.step(), &NextStep::OwnKeyGone);

        let mut deleted = following(&own, Some(key(5, true)));
        deleted.event(KeyEvent::Delete(own.key.clone()));
        assert_eq!(deleted.step(), &NextStep::OwnKeyGone);
        assert_eq!(deleted.successor(), None);

        let mut broken = following(&own, Some(key(5, true)));
        broken.broke();
        assert_eq!(broken.successor(), None);
        assert_eq!(broken.step(), &NextStep::Read { pick: Pick::Oldest });

        let mut missing = NextInLine::new(own);
        missing.read_answered(None, Some(key(5, true)), 10);
        assert_eq!(missing.step(), &NextStep::OwnKeyGone);
    }

    #[test]
    fn the_release_waits_for_the_work_and_touches_the_successor_guarded() {
        let next = key(5, true);
        let mut resignation = Resignation::new(Some(next.clone()), true);
        assert_eq!(resignation.step(), ReleaseStep::AwaitWorkStopped);
        resignation.work_stopped();
        assert_eq!(
            resignation.step(),
            ReleaseStep::Release(Some(Touch {
                next,
                guarded: true
            }))
        );
        assert_eq!(
            Resignation::new(None, false).step(),
            ReleaseStep::Release(None)
        );
    }
}
