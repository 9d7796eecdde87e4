//! While we lead, and at the end of our tenure: following the next in
//! line ([`NextInLine`]), and the release ([`Resignation`]) that hands
//! over to it.
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

#[cfg(test)]
use super::mutation::Mutation;
use crate::backend::etcd::layout::CandidateKey;
use crate::backend::etcd::layout::granted_by_elect;
use crate::backend::recipe::{Recipe, switched_off};
use crate::clock::BootInstant;

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
pub enum NextInLineNext {
    /// One linearizable read of our key and of the younger key `pick`
    /// chooses: [`NextInLineInput::Read`], or [`NextInLineInput::Broke`].
    Read { pick: Pick },
    /// Watch the election's prefix from just after revision `from` and
    /// hand in its events ([`NextInLineInput::Event`]) until the step
    /// changes; [`NextInLineInput::Broke`] if the watch fails,
    /// [`NextInLineInput::Cancelled`] if the server cancels it.
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
    step: NextInLineNext,
    /// The next in line as last known; a next that left stays here until
    /// the next read (a resignation meanwhile touches a key that is gone:
    /// the touch's guard fails, and the successor reads its own turn).
    next: Option<CandidateKey>,
    #[cfg(test)]
    mutation: Option<Mutation>,
}

impl NextInLine {
    /// Follows the next in line after `own`, our key as we created it.
    pub fn new(own: CandidateKey) -> NextInLine {
        NextInLine {
            own,
            step: NextInLineNext::Read { pick: Pick::Oldest },
            next: None,
            #[cfg(test)]
            mutation: None,
        }
    }

    /// The same, with one rule switched off (model check only).
    #[cfg(test)]
    pub fn mutated(mut self, mutation: Option<Mutation>) -> NextInLine {
        self.mutation = mutation;
        self.step = self.read();
        self
    }

    fn read(&self) -> NextInLineNext {
        let pick = if switched_off!(self, NextAnyYounger) {
            Pick::Youngest
        } else {
            Pick::Oldest
        };
        NextInLineNext::Read { pick }
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
    /// candidate (the driver filters `next` alike; the model asks this).
    #[cfg(test)]
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
    fn read_answered(&mut self, own: Option<&CandidateKey>, next: Option<CandidateKey>, at: i64) {
        debug_assert!(matches!(self.step, NextInLineNext::Read { .. }));
        if !own.is_some_and(|own| self.is_own(own)) {
            self.gone();
            return;
        }
        self.next = next;
        self.step = NextInLineNext::Watch { from: at };
    }

    /// Whether `event` changes anything: a watch may skip the others.
    pub fn reacts_to(&self, event: &KeyEvent) -> bool {
        if !matches!(self.step, NextInLineNext::Watch { .. }) {
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
    fn event(&mut self, event: KeyEvent) {
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
    fn cancelled(&mut self) {
        if !matches!(self.step, NextInLineNext::OwnKeyGone) {
            self.step = self.read();
        }
    }

    /// A read or the watch failed: nobody is next until a read says who
    /// is, so a resignation meanwhile touches no one.
    fn broke(&mut self) {
        if !matches!(self.step, NextInLineNext::OwnKeyGone) {
            self.next = None;
            self.step = self.read();
        }
    }

    fn gone(&mut self) {
        self.next = None;
        self.step = NextInLineNext::OwnKeyGone;
    }
}

/// Answers and events while we follow the next in line.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum NextInLineInput {
    /// The read's answer: our key as it reads (`None`: not there), the
    /// younger key picked, and the read's revision.
    Read {
        own: Option<CandidateKey>,
        next: Option<CandidateKey>,
        at: i64,
    },
    /// One of the watch's events.
    Event(KeyEvent),
    /// The server cancelled the watch (compaction): read afresh.
    Cancelled,
    /// A read or the watch failed: nobody is next until a read says who
    /// is, so a resignation meanwhile touches no one.
    Broke,
}

impl Recipe for NextInLine {
    type Input = NextInLineInput;
    type Next = NextInLineNext;

    fn poll(&mut self, _now: BootInstant) -> NextInLineNext {
        self.step.clone()
    }

    fn input(&mut self, _now: BootInstant, input: NextInLineInput) {
        match input {
            NextInLineInput::Read { own, next, at } => self.read_answered(own.as_ref(), next, at),
            NextInLineInput::Event(event) => self.event(event),
            NextInLineInput::Cancelled => self.cancelled(),
            NextInLineInput::Broke => self.broke(),
        }
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
    /// The switchover this touch carries out, if any: the touch happens
    /// only while its record still lives, so a switchover aborted or
    /// timed out while the leader was stopping its work never acts.
    pub switchover: Option<Recorded>,
}

/// A switchover's record as the leader read it: its key and the create
/// revision that is its identity in etcd.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Recorded {
    pub key: Vec<u8>,
    pub create_revision: i64,
}

/// What ending a candidacy asks of the driver.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ResignationNext {
    /// Wait until the work started under our leadership has stopped:
    /// [`ResignationInput::WorkStopped`].
    AwaitWorkStopped,
    /// Send the release (our key's deletion, guarded by its create
    /// revision, the release marker, our tenure marker's deletion), with
    /// this touch if any.
    Release(Option<Touch>),
}

/// A switchover the leader gives way to: its record, and its target,
/// which the leader knows as its next in line.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Steer {
    pub switchover: Recorded,
    pub target: CandidateKey,
    /// An operator's (`elect switchover`), not a leader's failback: the
    /// target pins itself when it leads.
    pub manual: bool,
}

/// The end of a candidacy that may have led: a resignation, which hands
/// over to the `successor` the leader knew, or a loss, which hands over to
/// nobody.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Resignation {
    successor: Option<CandidateKey>,
    /// The switchover the successor was chosen by, if any.
    switchover: Option<Recorded>,
    working: bool,
    #[cfg(test)]
    mutation: Option<Mutation>,
}

impl Resignation {
    /// `working`: whether work started under our leadership runs now.
    pub fn new(successor: Option<CandidateKey>, working: bool) -> Resignation {
        Resignation {
            successor,
            switchover: None,
            working,
            #[cfg(test)]
            mutation: None,
        }
    }

    /// A leader giving way to a switchover's target: the touch is
    /// guarded by the switchover's record as well. A peer's target is not
    /// touched: it reads its own turn once our key is gone.
    pub fn steered(steer: Steer, working: bool) -> Resignation {
        let target = Some(steer.target).filter(|t| granted_by_elect(t.lease));
        Resignation {
            switchover: Some(steer.switchover),
            ..Resignation::new(target, working)
        }
    }

    /// The same, with one rule switched off (model check only).
    #[cfg(test)]
    pub fn mutated(mut self, mutation: Option<Mutation>) -> Resignation {
        self.mutation = mutation;
        self
    }
}

/// What a resignation hears.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResignationInput {
    /// The work started under our leadership has stopped.
    WorkStopped,
}

impl Recipe for Resignation {
    type Input = ResignationInput;
    type Next = ResignationNext;

    fn input(&mut self, _now: BootInstant, input: ResignationInput) {
        match input {
            ResignationInput::WorkStopped => self.working = false,
        }
    }

    fn poll(&mut self, _now: BootInstant) -> ResignationNext {
        if self.working && !switched_off!(self, ReleaseBeforeStop) {
            return ResignationNext::AwaitWorkStopped;
        }
        let touch = self.successor.clone().map(|next| Touch {
            next,
            guarded: !switched_off!(self, TouchUnguarded),
            switchover: self
                .switchover
                .clone()
                .filter(|_| !switched_off!(self, SwitchoverUnguarded)),
        });
        ResignationNext::Release(touch)
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::key;
    use super::*;

    fn now() -> BootInstant {
        BootInstant::from_nanos(0)
    }

    fn following(own: &CandidateKey, next: Option<CandidateKey>) -> NextInLine {
        let mut line = NextInLine::new(own.clone());
        assert_eq!(
            line.poll(now()),
            NextInLineNext::Read { pick: Pick::Oldest }
        );
        line.input(
            now(),
            NextInLineInput::Read {
                own: Some(own.clone()),
                next,
                at: 10,
            },
        );
        assert_eq!(line.poll(now()), NextInLineNext::Watch { from: 10 });
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
        line.input(
            now(),
            NextInLineInput::Event(KeyEvent::Delete(next.key.clone())),
        );
        assert_eq!(
            line.poll(now()),
            NextInLineNext::Read { pick: Pick::Oldest }
        );
        assert_eq!(line.next(), Some(&next));
        line.input(
            now(),
            NextInLineInput::Read {
                own: Some(own.clone()),
                next: None,
                at: 12,
            },
        );
        // Nobody queued at the read: the first key created is next.
        let newcomer = key(13, false);
        line.input(
            now(),
            NextInLineInput::Event(KeyEvent::Put(newcomer.clone(), 1)),
        );
        assert_eq!(line.next(), Some(&newcomer));
        assert_eq!(line.successor(), None, "a Go waiter is not touched");
    }

    #[test]
    fn our_key_changed_or_gone_ends_the_tenure_and_a_failure_forgets_the_next() {
        let own = key(2, true);
        let mut touched_again = following(&own, None);
        touched_again.input(now(), NextInLineInput::Event(KeyEvent::Put(own.clone(), 2)));
        assert_eq!(
            touched_again.poll(now()),
            NextInLineNext::Watch { from: 10 }
        );
        let mut recreated = own.clone();
        recreated.create_revision = 20;
        touched_again.input(now(), NextInLineInput::Event(KeyEvent::Put(recreated, 1)));
        assert_eq!(touched_again.poll(now()), NextInLineNext::OwnKeyGone);

        let mut deleted = following(&own, Some(key(5, true)));
        deleted.input(
            now(),
            NextInLineInput::Event(KeyEvent::Delete(own.key.clone())),
        );
        assert_eq!(deleted.poll(now()), NextInLineNext::OwnKeyGone);
        assert_eq!(deleted.successor(), None);

        let mut broken = following(&own, Some(key(5, true)));
        broken.input(now(), NextInLineInput::Broke);
        assert_eq!(broken.successor(), None);
        assert_eq!(
            broken.poll(now()),
            NextInLineNext::Read { pick: Pick::Oldest }
        );

        let mut missing = NextInLine::new(own);
        missing.input(
            now(),
            NextInLineInput::Read {
                own: None,
                next: Some(key(5, true)),
                at: 10,
            },
        );
        assert_eq!(missing.poll(now()), NextInLineNext::OwnKeyGone);
    }

    #[test]
    fn the_release_waits_for_the_work_and_touches_the_successor_guarded() {
        let next = key(5, true);
        let mut resignation = Resignation::new(Some(next.clone()), true);
        assert_eq!(resignation.poll(now()), ResignationNext::AwaitWorkStopped);
        resignation.input(now(), ResignationInput::WorkStopped);
        assert_eq!(
            resignation.poll(now()),
            ResignationNext::Release(Some(Touch {
                next,
                guarded: true,
                switchover: None,
            }))
        );
        assert_eq!(
            Resignation::new(None, false).poll(now()),
            ResignationNext::Release(None)
        );
    }

    #[test]
    fn a_steered_release_touches_the_target_only_while_the_switchover_lives() {
        let target = key(9, true);
        let switchover = Recorded {
            key: b"e\0switchover".to_vec(),
            create_revision: 12,
        };
        let steer = Steer {
            switchover: switchover.clone(),
            target: target.clone(),
            manual: true,
        };
        let mut resignation = Resignation::steered(steer, true);
        assert_eq!(resignation.poll(now()), ResignationNext::AwaitWorkStopped);
        resignation.input(now(), ResignationInput::WorkStopped);
        assert_eq!(
            resignation.poll(now()),
            ResignationNext::Release(Some(Touch {
                next: target,
                guarded: true,
                switchover: Some(switchover),
            }))
        );
    }
}
