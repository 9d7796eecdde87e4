//! Waiting for our turn, from our znode's creation to the decision that
//! it is ours ([`WaitForTurn`]).
//!
//! Claiming needs two facts: nobody is queued ahead of us, and our znode
//! is ours (`ephemeralOwner` = our session) as the quorum knows it, read
//! by a synced read. The recipe:
//! 1. lists the queue; unless a synced read found our znode ours within
//!    the last `refresh_every`, it reads our znode's owner in the same
//!    round trip (a session's requests are answered in order, so both see
//!    one state, or the owner a later one). Not ours, or not queued: gone.
//!    First in the queue: lead;
//! 2. otherwise watches its predecessor only (no herd effect); if that is
//!    gone already, back to 1;
//! 3. the next in line (its predecessor is the first participant, as our
//!    listing or the election's view shows) also watches its own znode, so
//!    that a deletion by hand is known before it could claim, and keeps
//!    the second fact fresh with a synced read every `refresh_every`;
//! 4. when the predecessor changes: the next in line whose predecessor
//!    was deleted, with our znode confirmed fresh, leads without another
//!    read (deletions are final, and nobody queues ahead of an existing
//!    znode: sequence numbers only grow); anyone else goes back to 1.
//!
//! Events of one session arrive in the order of the changes; the driver
//! hands in our own znode's event before the predecessor's when both are
//! ready.

use std::time::Duration;

#[cfg(test)]
use super::mutation::Mutation;
use crate::backend::recipe::{Recipe, switched_off};
use crate::clock::BootInstant;

/// What the recipe asks the driver to send. Each is answered by its
/// [`TurnInput`] before the recipe is asked again.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TurnRequest {
    /// List the queue; with `owner`, also read our znode's owner in a
    /// synced read, in the same round trip. Answer: [`TurnInput::Read`].
    Read { owner: bool },
    /// Check that the znode exists and watch it. Answer:
    /// [`TurnInput::PredecessorWatched`].
    WatchPredecessor(String),
    /// Check our znode is ours and watch it. Answer: [`TurnInput::OwnWatched`].
    WatchOwn,
    /// A synced read of our znode's owner. Answer: [`TurnInput::Confirmed`].
    ConfirmOwn,
}

/// Answers and events.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TurnInput {
    /// The queue's znode names in order, and with an owner read, whether
    /// our znode exists and is our session's.
    Read {
        queue: Vec<String>,
        ours: Option<bool>,
    },
    PredecessorWatched {
        exists: bool,
    },
    /// Whether our znode exists and is ours (its watch is armed if so).
    OwnWatched {
        ours: bool,
    },
    Confirmed {
        ours: bool,
    },
    /// Our znode's watch fired.
    OwnChanged {
        deleted: bool,
    },
    /// The predecessor's watch fired.
    PredecessorChanged {
        deleted: bool,
    },
    /// The election's view names this znode (its full path) as the leader.
    LeaderSeen(Option<String>),
}

/// What the driver does next.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TurnNext {
    Send(TurnRequest),
    /// Wait for a watch or the view, or until this instant (a refresh).
    Wait(Option<BootInstant>),
    /// It is our turn; `read_free` when the predecessor's deletion alone
    /// said so.
    Lead {
        read_free: bool,
    },
    Gone(Gone),
}

/// Why we cannot take our turn with this znode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Gone {
    /// It is gone, or not our session's.
    NotOurs,
    /// It is not in the queue.
    NotQueued,
    /// It was deleted while we waited.
    Deleted,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum State {
    Listing,
    Reading {
        sent: BootInstant,
        owner: bool,
    },
    Watching {
        predecessor: String,
        next_in_line: bool,
    },
    Waiting(Waiting),
    Done(TurnNext),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Waiting {
    predecessor: String,
    next_in_line: bool,
    own_watch: OwnWatch,
    refresh_at: BootInstant,
    /// A confirming read sent at this instant is under way.
    confirming: Option<BootInstant>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum OwnWatch {
    Unarmed,
    Arming,
    Armed,
}

/// One candidate's wait for its turn, from its znode's creation.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WaitForTurn {
    election: String,
    own: String,
    refresh_every: Duration,
    /// The send time of the last synced read that found our znode ours.
    confirmed: Option<BootInstant>,
    /// The leader's znode as the election's view last named it.
    leader_seen: Option<String>,
    state: State,
    #[cfg(test)]
    mutation: Option<Mutation>,
}

impl WaitForTurn {
    /// Waits with our znode `own` (its name) in `election`, keeping the
    /// proof that it is ours fresh every `refresh_every` (a third of the
    /// session timeout, as a leader renews).
    pub fn new(election: &str, own: &str, refresh_every: Duration) -> WaitForTurn {
        WaitForTurn {
            election: election.to_owned(),
            own: own.to_owned(),
            refresh_every,
            confirmed: None,
            leader_seen: None,
            state: State::Listing,
            #[cfg(test)]
            mutation: None,
        }
    }

    /// The wait a session of `session_timeout` runs, as the driver and the
    /// model checker both build it (one source for its timing): the proof
    /// that our znode is ours is refreshed every [`refresh_for`] of it.
    ///
    /// [`refresh_for`]: WaitForTurn::refresh_for
    pub fn for_session(election: &str, own: &str, session_timeout: Duration) -> WaitForTurn {
        WaitForTurn::new(election, own, WaitForTurn::refresh_for(session_timeout))
    }

    /// Our znode's creation was answered, its create sent at `sent`: the
    /// create went through the ZooKeeper leader and its quorum, as a
    /// synced read does, and made the znode our session's, so it proves
    /// the znode ours from `sent` on as a synced read sent then would
    /// (from its commit, in truth, which is later). The first listing
    /// then needs no owner read of its own: of the three requests a new
    /// candidacy's first read would send, one is left.
    pub fn created_at(mut self, sent: BootInstant) -> WaitForTurn {
        self.confirmed = Some(sent);
        self
    }

    /// How often the proof is refreshed in a session of `session_timeout`:
    /// a third of it, as a leader renews.
    pub fn refresh_for(session_timeout: Duration) -> Duration {
        session_timeout / 3
    }

    /// The same, with one rule switched off (model check only).
    #[cfg(test)]
    pub fn mutated(mut self, mutation: Option<Mutation>) -> WaitForTurn {
        self.mutation = mutation;
        self
    }

    fn fresh(&self, now: BootInstant) -> bool {
        self.confirmed
            .is_some_and(|at| now < at + self.refresh_every)
    }

    /// Whether the recipe waits on the predecessor as the next in line.
    pub fn next_in_line(&self) -> bool {
        matches!(&self.state, State::Waiting(w) if w.next_in_line)
    }

    fn read(
        &mut self,
        sent: BootInstant,
        owner: bool,
        queue: &[String],
        ours: Option<bool>,
    ) -> State {
        if owner {
            if ours != Some(true) {
                return State::Done(TurnNext::Gone(Gone::NotOurs));
            }
            self.confirmed = Some(sent);
        }
        match queue.iter().position(|name| *name == self.own) {
            None => State::Done(TurnNext::Gone(Gone::NotQueued)),
            Some(0) => State::Done(TurnNext::Lead { read_free: false }),
            Some(at) => State::Watching {
                predecessor: format!("{}/{}", self.election, queue[at - 1]),
                next_in_line: at == 1,
            },
        }
    }
}

impl Recipe for WaitForTurn {
    type Input = TurnInput;
    type Next = TurnNext;

    /// What to do at `now`. A request returned must be answered (with
    /// [`Recipe::input`]) before the next call.
    fn poll(&mut self, now: BootInstant) -> TurnNext {
        match &mut self.state {
            State::Listing => {
                let owner = !self.fresh(now);
                self.state = State::Reading { sent: now, owner };
                TurnNext::Send(TurnRequest::Read { owner })
            }
            State::Reading { .. } => unreachable!("a read is under way"),
            State::Watching { predecessor, .. } => {
                TurnNext::Send(TurnRequest::WatchPredecessor(predecessor.clone()))
            }
            State::Waiting(w) => {
                if w.next_in_line
                    && w.own_watch == OwnWatch::Unarmed
                    && !switched_off!(self, NoOwnWatch)
                {
                    w.own_watch = OwnWatch::Arming;
                    return TurnNext::Send(TurnRequest::WatchOwn);
                }
                if w.next_in_line && w.confirming.is_none() && now >= w.refresh_at {
                    w.confirming = Some(now);
                    return TurnNext::Send(TurnRequest::ConfirmOwn);
                }
                TurnNext::Wait(w.next_in_line.then_some(w.refresh_at))
            }
            State::Done(next) => next.clone(),
        }
    }

    /// Takes an answer or an event at `now`.
    fn input(&mut self, now: BootInstant, input: TurnInput) {
        if let TurnInput::LeaderSeen(leader) = input {
            self.leader_seen = leader;
            if let State::Waiting(w) = &mut self.state {
                // Any view that ever showed our predecessor leading shows
                // that nothing is left before it: deletions are final.
                w.next_in_line |= self.leader_seen.as_ref() == Some(&w.predecessor);
            }
            return;
        }
        let state = std::mem::replace(&mut self.state, State::Listing);
        self.state = match (state, input) {
            (State::Reading { sent, owner }, TurnInput::Read { queue, ours }) => {
                self.read(sent, owner, &queue, ours)
            }
            (State::Watching { .. }, TurnInput::PredecessorWatched { exists: false }) => {
                State::Listing
            }
            (
                State::Watching {
                    predecessor,
                    next_in_line,
                },
                TurnInput::PredecessorWatched { exists: true },
            ) => {
                let next_in_line = next_in_line || self.leader_seen.as_ref() == Some(&predecessor);
                State::Waiting(Waiting {
                    predecessor,
                    next_in_line,
                    own_watch: OwnWatch::Unarmed,
                    refresh_at: self.confirmed.unwrap_or(now) + self.refresh_every,
                    confirming: None,
                })
            }
            (State::Waiting(mut w), TurnInput::OwnWatched { ours }) => {
                if ours {
                    w.own_watch = OwnWatch::Armed;
                    State::Waiting(w)
                } else {
                    State::Done(TurnNext::Gone(Gone::NotOurs))
                }
            }
            (State::Waiting(mut w), TurnInput::Confirmed { ours }) => match w.confirming.take() {
                Some(sent) if ours => {
                    self.confirmed = Some(sent);
                    w.refresh_at = sent + self.refresh_every;
                    State::Waiting(w)
                }
                _ => State::Done(TurnNext::Gone(Gone::NotOurs)),
            },
            (State::Waiting(_), TurnInput::OwnChanged { deleted: true }) => {
                State::Done(TurnNext::Gone(Gone::Deleted))
            }
            (State::Waiting(mut w), TurnInput::OwnChanged { deleted: false }) => {
                // Watches fire once: arm it again.
                w.own_watch = OwnWatch::Unarmed;
                State::Waiting(w)
            }
            (State::Waiting(w), TurnInput::PredecessorChanged { deleted }) => {
                let may_lead = w.next_in_line || switched_off!(self, LeadOnAnyDeletion);
                if may_lead && deleted && self.fresh(now) {
                    State::Done(TurnNext::Lead { read_free: true })
                } else {
                    State::Listing
                }
            }
            (state @ State::Done(_), _) => state,
            (state, input) => unreachable!("{input:?} in {state:?}"),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EVERY: Duration = Duration::from_secs(2);
    const T0: BootInstant = BootInstant::from_nanos(0);

    fn ms(n: u64) -> BootInstant {
        BootInstant::from_nanos(n * 1_000_000)
    }

    fn queue(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    /// Reads the queue `names`, with an owner read answered `ours`.
    fn read(turn: &mut WaitForTurn, now: BootInstant, names: &[&str]) -> TurnNext {
        let TurnNext::Send(TurnRequest::Read { owner }) = turn.poll(now) else {
            panic!("a read");
        };
        let ours = owner.then_some(true);
        turn.input(
            now,
            TurnInput::Read {
                queue: queue(names),
                ours,
            },
        );
        turn.poll(now)
    }

    #[test]
    fn the_first_in_the_queue_leads_after_one_read_with_the_owner() {
        let mut turn = WaitForTurn::new("/e", "n1", EVERY);
        assert_eq!(
            turn.poll(ms(0)),
            TurnNext::Send(TurnRequest::Read { owner: true })
        );
        turn.input(
            ms(0),
            TurnInput::Read {
                queue: queue(&["n1", "n2"]),
                ours: Some(true),
            },
        );
        assert_eq!(turn.poll(ms(1)), TurnNext::Lead { read_free: false });
    }

    #[test]
    fn a_znode_not_ours_or_not_queued_is_gone() {
        let mut turn = WaitForTurn::new("/e", "n1", EVERY);
        turn.poll(ms(0));
        turn.input(
            ms(0),
            TurnInput::Read {
                queue: queue(&["n1"]),
                ours: Some(false),
            },
        );
        assert_eq!(turn.poll(ms(1)), TurnNext::Gone(Gone::NotOurs));

        let mut turn = WaitForTurn::new("/e", "n1", EVERY);
        assert_eq!(
            read(&mut turn, ms(0), &["n0"]),
            TurnNext::Gone(Gone::NotQueued)
        );
    }

    #[test]
    fn the_next_in_line_watches_itself_and_leads_on_the_deletion_alone() {
        let mut turn = WaitForTurn::new("/e", "n2", EVERY);
        assert_eq!(
            read(&mut turn, ms(0), &["n1", "n2", "n3"]),
            TurnNext::Send(TurnRequest::WatchPredecessor("/e/n1".into()))
        );
        turn.input(ms(1), TurnInput::PredecessorWatched { exists: true });
        assert_eq!(turn.poll(ms(1)), TurnNext::Send(TurnRequest::WatchOwn));
        turn.input(ms(2), TurnInput::OwnWatched { ours: true });
        assert_eq!(turn.poll(ms(2)), TurnNext::Wait(Some(T0 + EVERY)));
        turn.input(ms(500), TurnInput::PredecessorChanged { deleted: true });
        assert_eq!(turn.poll(ms(500)), TurnNext::Lead { read_free: true });
    }

    #[test]
    fn the_next_in_line_refreshes_its_proof_and_leads_read_free_only_while_fresh() {
        let mut turn = WaitForTurn::new("/e", "n2", EVERY);
        read(&mut turn, ms(0), &["n1", "n2"]);
        turn.input(ms(1), TurnInput::PredecessorWatched { exists: true });
        turn.poll(ms(1));
        turn.input(ms(1), TurnInput::OwnWatched { ours: true });
        // At the refresh instant: a synced read of the owner.
        assert_eq!(
            turn.poll(T0 + EVERY),
            TurnNext::Send(TurnRequest::ConfirmOwn)
        );
        turn.input(ms(5) + EVERY, TurnInput::Confirmed { ours: true });
        assert_eq!(
            turn.poll(ms(5) + EVERY),
            TurnNext::Wait(Some(T0 + EVERY * 2))
        );
        // Its answer lost, the proof goes stale: a deletion then sends it
        // back to the listing, with the owner read again.
        let mut stale = turn.clone();
        stale.input(
            T0 + EVERY * 3,
            TurnInput::PredecessorChanged { deleted: true },
        );
        assert_eq!(
            stale.poll(T0 + EVERY * 3),
            TurnNext::Send(TurnRequest::Read { owner: true })
        );
        // A refresh that finds our znode not ours ends the wait.
        assert_eq!(
            turn.poll(T0 + EVERY * 2),
            TurnNext::Send(TurnRequest::ConfirmOwn)
        );
        turn.input(T0 + EVERY * 2, TurnInput::Confirmed { ours: false });
        assert_eq!(turn.poll(T0 + EVERY * 2), TurnNext::Gone(Gone::NotOurs));
    }

    #[test]
    fn a_waiter_further_back_reads_again_when_its_predecessor_goes() {
        let mut turn = WaitForTurn::new("/e", "n3", EVERY);
        read(&mut turn, ms(0), &["n1", "n2", "n3"]);
        turn.input(ms(1), TurnInput::PredecessorWatched { exists: true });
        // Not next in line: no own watch, no refresh.
        assert_eq!(turn.poll(ms(1)), TurnNext::Wait(None));
        turn.input(ms(9), TurnInput::PredecessorChanged { deleted: true });
        // Confirmed within the last third: the listing alone.
        assert_eq!(
            turn.poll(ms(9)),
            TurnNext::Send(TurnRequest::Read { owner: false })
        );
    }

    #[test]
    fn the_view_naming_the_predecessor_leader_makes_us_next_in_line() {
        let mut turn = WaitForTurn::new("/e", "n3", EVERY);
        read(&mut turn, ms(0), &["n1", "n2", "n3"]);
        turn.input(ms(1), TurnInput::PredecessorWatched { exists: true });
        assert!(!turn.next_in_line());
        turn.input(ms(2), TurnInput::LeaderSeen(Some("/e/n2".into())));
        assert!(turn.next_in_line());
        assert_eq!(turn.poll(ms(2)), TurnNext::Send(TurnRequest::WatchOwn));
    }

    #[test]
    fn our_deletion_seen_first_ends_the_wait_and_a_vanished_predecessor_reads_again() {
        let mut turn = WaitForTurn::new("/e", "n2", EVERY);
        read(&mut turn, ms(0), &["n1", "n2"]);
        turn.input(ms(1), TurnInput::PredecessorWatched { exists: true });
        turn.poll(ms(1));
        turn.input(ms(1), TurnInput::OwnWatched { ours: true });
        turn.input(ms(3), TurnInput::OwnChanged { deleted: true });
        assert_eq!(turn.poll(ms(3)), TurnNext::Gone(Gone::Deleted));

        let mut turn = WaitForTurn::new("/e", "n2", EVERY);
        read(&mut turn, ms(0), &["n1", "n2"]);
        turn.input(ms(1), TurnInput::PredecessorWatched { exists: false });
        assert_eq!(
            turn.poll(ms(1)),
            TurnNext::Send(TurnRequest::Read { owner: false })
        );
    }
}
