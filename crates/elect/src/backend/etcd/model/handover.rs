//! The etcd backend's handover, every interleaving up to a bound, under
//! stateright: the argument of `handover.rs` and the campaign's paths
//! beside it, checked rather than only argued. Every decision is the
//! production recipes' (`recipe`), driven unchanged: the wait for our
//! turn (`WaitForTurn`), the way to office (`TakeOffice`), the leader's
//! stint (`Stint`: when it stops leading, and by when its work must stop)
//! and its following of its next in line (`NextInLine`), and the release
//! (`Resignation`). The model answers their requests from the key space
//! and hands them the watches' events, as `campaign.rs` and `handover.rs`
//! do; what is modelled is etcd (the key space, its revisions, leases,
//! what a transaction does) and the claim's wait (until no other marker
//! is left). The claim's and the release's transactions, the touch
//! nested in the release included, are the production ones
//! (`recipe::Transaction`), evaluated as etcd evaluates them: the role's
//! permissions over both branches, the compares against the store as it
//! was, a put bound to an ended lease or a refresh of a missing key
//! refusing the whole transaction; and the production code reads the
//! answer (`Answer::claimed`).
//!
//! The world is etcd's key space as an election uses it, one revision at a
//! time, with every past revision kept: a watch reads the revisions after
//! its start in order, a linearizable read reads the newest, and a read
//! served by one member from its own state (serializable) reads any
//! revision that member may have applied, however far behind. Keys are
//! named by their lease (Go's layout), so a candidacy that starts again on
//! a session's lease creates the same key again, younger.
//!
//! Three `elect` candidates campaign as `campaign.rs` does: create the key,
//! then the recipe reads the predecessor, watches it and our own key on
//! one stream, leads at once on a put of our own key (the resigning
//! leader's touch), and on the predecessor's deletion races the watch
//! against a read (any member's revision if it had applied the deletion,
//! else the newest: the driver's rule, modelled here); with no older key,
//! it goes on if the predecessor left its release marker, else waits for
//! its lease to end and reads our key back; then claim the tenure (write our
//! marker if our key is still ours, and lead once no other marker is
//! left). A leader follows its own key and its next in line as
//! `LeaderWatch` does (one read, then the prefix's events; a stale next
//! stays published until the next read), stops its work, then resigns
//! with one transaction guarded by its key's create revision: the release
//! marker, its key's and its tenure marker's deletion, and the touch of its
//! next, guarded by that key's create revision and lease, which also
//! writes the next's tenure marker. A lost candidacy stops its work first,
//! then revokes its lease (own leases) or releases (a session's lease),
//! and campaigns again.
//!
//! The environment lets a lease lapse, and in some worlds an operator
//! deletes one key by hand, any key. A lease lapses only after its
//! holder's work has stopped (the local deadline comes first:
//! `model::deadline` checks that rule), and a candidate past its
//! lease's end never starts to lead, for its deadline has passed. A
//! leader's deadline may pass (`DeadlinePasses`): its stint is polled at
//! the deadline, and a stint that leads on past it finds its lease
//! expired right after. A leader whose key is gone while its lease lives
//! is told by its stint to stop its work by the deadline, not at once:
//! the work runs on (`Lost { working }`) until it stops, and only then is
//! the lease revoked or released.
//!
//! Invariants, in every state: at most one candidate's work runs, and
//! nobody starts to lead while a key older than its own is left.
//!
//! The model found the need for tenure markers: before them, when an
//! operator deleted the working leader's key, a successor that was waiting
//! on that key waited for its lease, but a candidate that was not (a
//! newcomer, or one queued behind another key that went) found no older
//! key and nothing that said the old leader's work was still stopping, and
//! led at once (`Mutation::NoTenure`, caught in 7 steps).
//!
//! Teeth, each a rule of the production recipes switched off
//! ([`Mutation`]): leading without a tenure marker, a release sent before
//! the work stopped, a stint that leads on past its deadline (overlap); a
//! next in line that is not the oldest younger key, a touch without its
//! guard (by hand only: its world needs nine revisions, CI checks it to
//! eight), a deletion of the predecessor taken as our turn without a read
//! (out of order). The recipe's wait for
//! a predecessor's lease has no counterexample where tenure markers are
//! written: the claim covers it (see
//! `the_lease_wait_is_covered_by_the_tenure_claim`).
//! Found too: the read's check that the member had applied the deletion
//! is not needed for safety (a member behind it still holds the
//! predecessor's key, or not yet ours, so it never says the way is
//! clear); it keeps a lagging member from making a candidate believe its
//! key is gone.
//!
//! Where markers cannot be written (a role limited to the election's
//! prefix, `Markers::Unwritable`), a claim says so and the candidate reads
//! its key back, and a release is refused whole: one leader at a time, in
//! order, with or without a key deleted by hand that is not a working
//! leader's; leading without the read back is caught (7 steps). A working
//! leader's key deleted by hand lets a newcomer lead beside it there: the
//! role's known gap, shown by its own test.
//!
//! A Go candidate (`etcdctl elect`; see [`Go`]) campaigns beside two elect
//! candidates in a world of its own: it writes no markers and waits for no
//! lease, so there the claim's guard (our key's create revision and lease)
//! is what keeps an elect candidate whose key was deleted while it took
//! office from leading beside it (`Mutation::ClaimUnguarded`, caught).
//!
//! In a world of their own, watches break or are cancelled by a
//! compaction (one in a world, a waiting candidate's or the leader's, at
//! any moment): the driver reads afresh, and a broken stream never decides
//! a race against the read of our turn.
//!
//! Not modelled: the wait for a lease that gives up after one TTL.

use stateright::{Checker, HasDiscoveries, Model, Property};

use crate::model_check::breadth_first;

use crate::backend::etcd::keywatch::Woken as Reported;
use crate::backend::etcd::layout::{self, CandidateKey, ELECT_LEASE_TAG, Ours};
use crate::backend::etcd::recipe::{
    Answer, Claim, ClaimAnswer, Compare, KeyEvent, Mutation, NextInLine, NextInLineInput,
    NextInLineNext, OfficeInput, OfficeNext, Op, OpResult, Pick, Resignation, ResignationInput,
    ResignationNext, Stint, StintEnd, StintInput, StintNext, StintRequest, TakeOffice, Transaction,
    Turn, TurnCheck, TurnInput, TurnNext, TurnRequest, WaitForTurn,
};
use crate::backend::etcd::recipe::{Recorded, Steer};
use crate::backend::recipe::Recipe;
use crate::clock::BootInstant;
use crate::steer::{InLine, Line, Priority, Target};

/// The recipes here keep no time: every instant is this one, but for a
/// leader's deadline, which is `DEADLINE` until it passes.
const NOW: BootInstant = BootInstant::from_nanos(0);
const DEADLINE: BootInstant = BootInstant::from_nanos(1_000_000_000);

/// What `recipe` asks for now, without changing it: the model's actions
/// only look.
fn peek<R: Recipe + Clone>(recipe: &R) -> R::Next {
    recipe.clone().poll(NOW)
}

const CANDIDATES: usize = 3;
/// Candidacies per candidate: a lost one starts once more.
const CANDIDACIES: u8 = 2;
/// Own leases: candidate `c`'s `k`-th candidacy holds lease
/// `c * CANDIDACIES + k`; a session's: lease `c` throughout.
const LEASES: usize = CANDIDATES * CANDIDACIES as usize;
/// The Go candidate's lease, in the worlds that have one: the last slot.
const GO_LEASE: u8 = LEASES as u8;
/// Lease slots: the elect candidates' and the Go candidate's.
const SLOTS: usize = LEASES + 1;
/// Keys deleted by hand, and leases that lapse, in one world.
const DELETES: u8 = 1;
const LAPSES: u8 = 1;
/// Watches that break, or that the server cancels (compaction), in one
/// world that has them.
const BREAKS: u8 = 1;

/// A candidate key: named by its lease, ordered by its create revision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Key {
    lease: u8,
    create: u8,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
struct Store {
    /// Each lease's key: its create revision, 0 if there is none.
    keys: [u8; SLOTS],
    /// Release markers: the create revision of the key released, and the
    /// lease the marker is bound to.
    markers: Vec<(u8, u8)>,
    /// Leases revoked or expired.
    ended: [bool; SLOTS],
    /// Tenure markers: the leases whose holder may lead (bound to them).
    tenures: Vec<u8>,
    /// The switchover record: its create revision (0 if there is none)
    /// and its target's key.
    switchover: (u8, Option<Key>),
}

impl Key {
    /// The lease id etcd would have granted: an elect candidate's is
    /// tagged (`ELECT_LEASE_TAG`), the Go candidate's is not.
    fn lease_id(lease: u8) -> i64 {
        let tag = match lease {
            GO_LEASE => 1,
            _ => ELECT_LEASE_TAG,
        };
        ((lease as i64 + 1) << 16) | tag
    }

    /// The model's lease of the lease id `id` (see [`Key::lease_id`]).
    fn lease_of(id: i64) -> u8 {
        ((id >> 16) - 1) as u8
    }

    /// As the recipe reads it.
    fn candidate(self) -> CandidateKey {
        let lease = Key::lease_id(self.lease);
        CandidateKey {
            key: layout::candidate_key(ELECTION, lease).into_bytes(),
            id: format!("l{}", self.lease),
            create_revision: self.create as i64,
            lease,
        }
    }

    fn of(key: &CandidateKey) -> Key {
        Key {
            lease: Key::lease_of(key.lease),
            create: key.create_revision as u8,
        }
    }
}

/// The election's name: its keys are `e/<lease id>`.
const ELECTION: &str = "e";

/// What a key the recipes' transactions name is, in the model's terms.
#[derive(Clone, Copy, Debug)]
enum Named {
    /// A candidate's key, by its lease.
    Candidate(u8),
    /// A tenure marker, by the lease it names.
    Tenure(u8),
    /// A release marker, by the create revision of the key released.
    Release(u8),
    /// The switchover record.
    Switchover,
}

impl Named {
    fn of(key: &[u8]) -> Named {
        let key = std::str::from_utf8(key).expect("the model's keys are text");
        let hex = |rest: &str| i64::from_str_radix(rest, 16).expect("a hex suffix");
        if key == layout::switchover_record(ELECTION) {
            Named::Switchover
        } else if let Some(rest) = key.strip_prefix(&layout::tenure_prefix(ELECTION)) {
            Named::Tenure(Key::lease_of(hex(rest)))
        } else if let Some(rest) = key.strip_prefix(&layout::release_prefix(ELECTION)) {
            Named::Release(hex(rest) as u8)
        } else if let Some(rest) = key.strip_prefix(&layout::prefix(ELECTION)) {
            Named::Candidate(Key::lease_of(hex(rest)))
        } else {
            unreachable!("a key outside the model's election: {key:?}")
        }
    }

    /// Whether a role limited to the election's prefix may touch it.
    fn in_prefix(self) -> bool {
        matches!(self, Named::Candidate(_))
    }
}

/// Why etcd refuses a whole transaction, writing nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Refused {
    /// The role may not touch a key it names (in either branch).
    PermissionDenied,
    /// A put in the branch taken is bound to a lease that has ended.
    LeaseNotFound,
    /// A refresh in the branch taken names a key that does not exist.
    KeyNotFound,
}

/// A [`Transaction`] of the recipes, evaluated as etcd does: the role's
/// permissions over both branches first, then every compare (the nested
/// ones too) against the store as it was, the branch taken checked
/// (leases alive, refreshed keys there), then its operations in order.
/// `pre` is the store before; `post` takes the writes and `events` what
/// the election's watchers see.
fn evaluate(
    pre: &Store,
    post: &mut Store,
    txn: &Transaction,
    events: &mut Vec<Event>,
) -> Result<Answer, Refused> {
    let succeeded = txn.when.iter().all(|c| pre.compare(c));
    let branch = if succeeded { &txn.then } else { &txn.otherwise };
    let mut results = Vec::new();
    for op in branch {
        results.push(match op {
            Op::Put { key, lease } => {
                let bound = Key::lease_of(*lease);
                if pre.ended[bound as usize] {
                    return Err(Refused::LeaseNotFound);
                }
                match Named::of(key) {
                    Named::Tenure(l) => {
                        assert_eq!(l, bound, "a tenure marker is bound to the lease it names");
                        if !post.tenures.contains(&l) {
                            post.tenures.push(l);
                        }
                    }
                    Named::Release(create) => {
                        if !post.markers.contains(&(create, bound)) {
                            post.markers.push((create, bound));
                        }
                    }
                    Named::Candidate(_) | Named::Switchover => {
                        unreachable!("the recipes create no key or record in a transaction")
                    }
                }
                OpResult::Written
            }
            Op::Refresh { key } => {
                let Named::Candidate(l) = Named::of(key) else {
                    unreachable!("only candidate keys are refreshed")
                };
                if pre.keys[l as usize] == 0 {
                    return Err(Refused::KeyNotFound);
                }
                events.push(Event::Put(l));
                OpResult::Written
            }
            Op::Delete { key } => {
                match Named::of(key) {
                    Named::Candidate(l) => {
                        if std::mem::take(&mut post.keys[l as usize]) != 0 {
                            events.push(Event::Deleted(l));
                        }
                    }
                    Named::Tenure(l) => post.tenures.retain(|&t| t != l),
                    Named::Release(create) => post.markers.retain(|&(c, _)| c != create),
                    Named::Switchover => unreachable!("the recipes never delete the record"),
                }
                OpResult::Written
            }
            Op::ListKeys { prefix } => {
                assert_eq!(prefix, layout::tenure_prefix(ELECTION).as_bytes());
                OpResult::Keys(
                    post.tenures
                        .iter()
                        .map(|&l| layout::tenure_marker(ELECTION, Key::lease_id(l)).into_bytes())
                        .collect(),
                )
            }
            Op::Txn(nested) => OpResult::Txn(evaluate(pre, post, nested, events)?),
        });
    }
    Ok(Answer {
        revision: 0,
        succeeded,
        results,
    })
}

fn compare_key(compare: &Compare) -> &[u8] {
    match compare {
        Compare::CreateRevision { key, .. } | Compare::Lease { key, .. } => key,
    }
}

/// Whether a role limited to the election's prefix may send `txn`: etcd
/// checks every key of both branches, nested ones included.
fn within_prefix(txn: &Transaction) -> bool {
    txn.then.iter().chain(&txn.otherwise).all(|op| match op {
        Op::Put { key, .. } | Op::Refresh { key } | Op::Delete { key } => {
            Named::of(key).in_prefix()
        }
        Op::ListKeys { .. } => false,
        Op::Txn(nested) => within_prefix(nested),
    })
}

/// Gives `answer`, and the answers nested in it, the revision `rev`.
fn at_revision(mut answer: Answer, rev: i64) -> Answer {
    answer.revision = rev;
    answer.results = answer
        .results
        .into_iter()
        .map(|r| match r {
            OpResult::Txn(nested) => OpResult::Txn(at_revision(nested, rev)),
            r => r,
        })
        .collect();
    answer
}

impl Store {
    /// Whether one compare of a transaction holds (a missing key's fields
    /// are 0).
    fn compare(&self, compare: &Compare) -> bool {
        let field = |key: &[u8], of: fn(u8, u8) -> i64| match Named::of(key) {
            Named::Candidate(l) => match self.keys[l as usize] {
                0 => 0,
                create => of(l, create),
            },
            other => unreachable!("the recipes compare only candidate keys: {other:?}"),
        };
        if let (Named::Switchover, Compare::CreateRevision { is, .. }) =
            (Named::of(compare_key(compare)), compare)
        {
            return self.switchover.0 as i64 == *is;
        }
        match compare {
            Compare::CreateRevision { key, is } => field(key, |_, create| create as i64) == *is,
            Compare::Lease { key, is } => field(key, |l, _| Key::lease_id(l)) == *is,
        }
    }

    fn holds(&self, key: Key) -> bool {
        self.keys[key.lease as usize] == key.create
    }

    fn existing(&self) -> impl Iterator<Item = Key> + '_ {
        (0..SLOTS as u8)
            .map(|lease| Key {
                lease,
                create: self.keys[lease as usize],
            })
            .filter(|k| k.create != 0)
    }

    /// The youngest key older than `create`: the predecessor.
    fn older_than(&self, create: u8) -> Option<Key> {
        self.existing()
            .filter(|k| k.create < create)
            .max_by_key(|k| k.create)
    }

    /// The oldest key younger than `create`: the next in line.
    fn younger_than(&self, create: u8) -> Option<Key> {
        self.existing()
            .filter(|k| k.create > create)
            .min_by_key(|k| k.create)
    }

    /// The youngest key of all younger than `create` (a mutation's next).
    fn youngest_after(&self, create: u8) -> Option<Key> {
        self.existing()
            .filter(|k| k.create > create)
            .max_by_key(|k| k.create)
    }

    fn released(&self, key: Key) -> bool {
        self.markers.iter().any(|&(create, _)| create == key.create)
    }
}

/// What a watch on the election's keys sees; markers live outside them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Event {
    Created(u8),
    /// A put of an existing key, value and lease unchanged (a touch).
    Put(u8),
    Deleted(u8),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Revision {
    store: Store,
    events: Vec<Event>,
}

/// Where a watch stands: the next event it has not seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Pos {
    rev: u8,
    event: u8,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Phase {
    Idle,
    /// Our key was created at `mine`; the production recipe
    /// (`Candidate::turn`) waits for our turn. `watch`: where its stream
    /// stands, once it has reported something.
    Turn {
        mine: u8,
        watch: Option<Pos>,
    },
    /// Our turn came; the production recipe (`TakeOffice`) takes us to
    /// leading: the tenure claim (our marker written once `claimed`, and
    /// we lead once no other candidate's is left), or the wait for a
    /// predecessor's lease, or a read of our key back.
    Office {
        mine: u8,
        claimed: bool,
    },
    /// Leading; the production recipe (`NextInLine`) follows the next in
    /// line. `watch`: where its stream stands, once it has reported
    /// something since its last read.
    Leading {
        mine: u8,
        watch: Option<Pos>,
    },
    /// Resigning: the production recipe (`Resignation`) sends the release
    /// once the work has stopped (`working` until then).
    Releasing {
        mine: u8,
        working: bool,
    },
    /// Released; the lease is revoked next (own leases), or the work
    /// stopped late (the mutation).
    Released {
        mine: u8,
        working: bool,
    },
    /// The candidacy is lost; once its work has stopped (`working` until
    /// then: a leader whose key is gone while its lease lives may work
    /// until its deadline), what remains is the revoke or the marker, then
    /// a new candidacy.
    Lost {
        mine: u8,
        working: bool,
    },
    Done,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Candidate {
    lease: u8,
    candidacy: u8,
    phase: Phase,
    /// The production recipes: while our turn is waited for, on the way
    /// to leading, while leading, and while resigning.
    turn: Option<WaitForTurn>,
    office: Option<TakeOffice>,
    line: Option<NextInLine>,
    stint: Option<Stint>,
    resignation: Option<Resignation>,
    /// The create revision of the switchover record our stint gave way
    /// to, while we release for it.
    gave_way_to: Option<u8>,
}

impl Candidate {
    fn works(&self) -> bool {
        matches!(
            self.phase,
            Phase::Leading { .. }
                | Phase::Lost { working: true, .. }
                | Phase::Releasing { working: true, .. }
                | Phase::Released { working: true, .. }
        )
    }
}

/// A Go candidate (`concurrency.Election`, as `etcdctl elect` runs it):
/// it creates its key, then waits until no older key is left (a
/// linearizable read of the youngest older key, a watch for that key's
/// deletion from the read's revision, and again), leads, and resigns by
/// deleting its key once its work has stopped. It writes no markers, waits
/// for no lease, and does not check that its own key is still its own
/// (etcd#19597): its key is never deleted by hand here, for that gap is
/// Go's recipe's, not elect's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Go {
    Absent,
    Idle,
    /// Its key was created at `mine`; `on`: the older key's lease it
    /// watches, and where the watch stands, once a read found one.
    Waiting {
        mine: u8,
        on: Option<(u8, Pos)>,
    },
    Leading {
        mine: u8,
    },
    Done,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct World {
    history: Vec<Revision>,
    candidates: Vec<Candidate>,
    go: Go,
    /// The Go candidate led (a witness that its world is not vacuous).
    go_led: bool,
    deletes: u8,
    lapses: u8,
    breaks: u8,
    /// Someone started to lead after a watch broke (a witness that the
    /// breaks' world is not vacuous).
    led_after_break: bool,
    /// Someone led on a touch, without a read (a sanity witness).
    touched: bool,
    /// Someone led on a read from a member's own, older state.
    led_on_older_state: bool,
    /// Someone read its key back and found it (markers unwritable).
    read_back: bool,
    /// Someone started to lead while a key older than its own existed.
    out_of_order: bool,
    /// Switchovers recorded, and records withdrawn, in this world.
    switchovers: u8,
    withdrawn: u8,
    /// A switchover's target was handed over to while its record lived.
    steered: bool,
    /// A touch carrying a switchover happened after its record was gone.
    stale_acted: bool,
}

impl World {
    fn now(&self) -> u8 {
        (self.history.len() - 1) as u8
    }

    fn store(&self) -> &Store {
        &self.history.last().expect("revision 0").store
    }

    /// Sends a recipe's transaction (see [`evaluate`]): commits a revision
    /// if it changed anything (a transaction that changed nothing, as a
    /// claim sent again, is a revision no party of the model could tell
    /// from the one before), and answers as of the newest one.
    fn transact(&mut self, txn: &Transaction, markers: Markers) -> Result<Answer, Refused> {
        if markers == Markers::Unwritable && !within_prefix(txn) {
            return Err(Refused::PermissionDenied);
        }
        let pre = self.store().clone();
        let mut post = pre.clone();
        let mut events = Vec::new();
        let answer = evaluate(&pre, &mut post, txn, &mut events)?;
        if post != pre || !events.is_empty() {
            self.history.push(Revision {
                store: post,
                events,
            });
        }
        Ok(at_revision(answer, self.now() as i64))
    }

    /// Commits one revision: `change` edits a copy of the newest store and
    /// says what the election's watchers see.
    fn commit(&mut self, change: impl FnOnce(&mut Store, u8) -> Vec<Event>) {
        let mut store = self.store().clone();
        let rev = self.now() + 1;
        let events = change(&mut store, rev);
        self.history.push(Revision { store, events });
    }

    /// How many candidates' work runs, the Go candidate's included.
    fn working(&self) -> usize {
        let go = matches!(self.go, Go::Leading { .. }) as usize;
        self.candidates.iter().filter(|c| c.works()).count() + go
    }

    /// Ends `lease`: its key and markers go with it.
    fn end_lease(&mut self, lease: u8) {
        self.commit(|s, _| {
            s.ended[lease as usize] = true;
            s.markers.retain(|&(_, l)| l != lease);
            s.tenures.retain(|&l| l != lease);
            let key = &mut s.keys[lease as usize];
            if *key == 0 {
                return vec![];
            }
            *key = 0;
            vec![Event::Deleted(lease)]
        });
    }

    /// The events from `at` on, each with its position.
    fn events_from(&self, at: Pos) -> impl Iterator<Item = (Pos, Event)> + '_ {
        self.history
            .iter()
            .enumerate()
            .skip(at.rev as usize)
            .flat_map(move |(rev, r)| {
                let skip = if rev == at.rev as usize {
                    at.event as usize
                } else {
                    0
                };
                r.events.iter().enumerate().skip(skip).map(move |(i, &e)| {
                    (
                        Pos {
                            rev: rev as u8,
                            event: i as u8,
                        },
                        e,
                    )
                })
            })
    }
}

/// What a waiting candidate's stream (its predecessor's key and its own)
/// reports, as `TurnWatch::next` does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Woken {
    PredecessorGone(u8),
    HandedOver,
    OwnKeyGone,
}

fn turn_event(w: &World, pos: Pos, event: Event, own: Key, pred: Key) -> Option<Woken> {
    match event {
        Event::Deleted(l) if l == pred.lease => Some(Woken::PredecessorGone(pos.rev)),
        // A proclaim, or the name created again: not a deletion.
        Event::Created(l) | Event::Put(l) if l == pred.lease => None,
        Event::Put(l) if l == own.lease && w.history[pos.rev as usize].store.holds(own) => {
            Some(Woken::HandedOver)
        }
        Event::Created(l) | Event::Put(l) | Event::Deleted(l) if l == own.lease => {
            Some(Woken::OwnKeyGone)
        }
        _ => None,
    }
}

/// The first thing from `at` on that the stream reports.
fn next_turn_event(w: &World, at: Pos, own: Key, pred: Key) -> Option<(Pos, Woken)> {
    w.events_from(at)
        .find_map(|(pos, e)| turn_event(w, pos, e, own, pred).map(|woken| (pos, woken)))
}

/// `event`, at `pos`, as the leader's watch on the prefix reports it.
fn key_event(w: &World, pos: Pos, event: Event) -> KeyEvent {
    match event {
        Event::Created(lease) => KeyEvent::Put(
            Key {
                lease,
                create: pos.rev,
            }
            .candidate(),
            1,
        ),
        Event::Put(lease) => {
            let create = w.history[pos.rev as usize].store.keys[lease as usize];
            KeyEvent::Put(Key { lease, create }.candidate(), 2)
        }
        Event::Deleted(lease) => KeyEvent::Delete(Key { lease, create: 0 }.candidate().key),
    }
}

/// The first event from `at` on that the leader's recipe reacts to.
fn next_leader_event(w: &World, at: Pos, line: &NextInLine) -> Option<(Pos, KeyEvent)> {
    w.events_from(at)
        .map(|(pos, e)| (pos, key_event(w, pos, e)))
        .find(|(_, e)| line.reacts_to(e))
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Rule {
    Production,
    /// The woken candidate's read is taken from a member however far
    /// behind the deletion it is.
    AnyMember,
    /// A rule of the production recipes switched off.
    Recipe(Mutation),
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Leases {
    /// Each candidacy on a lease of its own (`elect campaign`, `run`).
    Own,
    /// Every candidacy of a candidate on one session's lease.
    Session,
}

/// Whether an operator deletes a key by hand.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum HandDeletes {
    None,
    /// Any one key, the working leader's included.
    Any,
    /// Any one key but a working leader's.
    NotAWorkingLeaders,
    /// Any one key but one whose holder may lead: its work runs, or it
    /// holds a tenure marker (its claim's, or the one the touch that
    /// handed over to it wrote: it leads as of that touch, heard or
    /// not). Beside a Go candidate, which waits for no marker, deleting
    /// such a key lets the Go candidate lead beside it: the gap the book
    /// names, as with a working leader's key where markers cannot be
    /// written.
    NotALeaders,
}

/// Whether candidates may write the markers beside the election's keys.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Markers {
    Writable,
    /// A role limited to the election's prefix: a claim says
    /// `Claim::Unwritable` and writes nothing, and a release (its
    /// transaction writes the release marker) is refused whole, so the
    /// key goes with the lease, once the work has stopped.
    Unwritable,
}

struct Election {
    rule: Rule,
    /// elect candidates: [`CANDIDATES`], or fewer beside a Go candidate.
    elect_candidates: usize,
    /// Whether a Go candidate campaigns in the same election.
    go: bool,
    leases: Leases,
    hand_deletes: HandDeletes,
    markers: Markers,
    /// Revisions in a world, the initial empty one included.
    revisions: usize,
    /// Candidacies per candidate, at most [`CANDIDACIES`].
    candidacies: u8,
    /// Whether a watch may break, or be cancelled by a compaction, at
    /// any moment ([`BREAKS`] in a world).
    breaks: bool,
    /// Whether an operator switches over (once in a world) and may
    /// withdraw the switchover (its timeout) at any moment.
    switchovers: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Action {
    Create(usize),
    ReadPredecessor(usize),
    Watch(usize),
    /// The woken candidate's read, served at this member revision.
    ReadTurn(usize, u8),
    LeaseOver(usize),
    /// Writes our tenure marker and reads the others', or reads them again.
    Claim(usize),
    /// Reads our key back (a candidacy that cannot write markers).
    ReadBack(usize),
    LeaderRead(usize),
    LeaderWatch(usize),
    Resign(usize),
    Release(usize),
    Revoke(usize),
    StopWork(usize),
    DeadlinePasses(usize),
    Recover(usize),
    DeleteByHand(u8),
    LeaseLapses(u8),
    /// A waiting candidate's stream breaks (its driver reads afresh).
    WatchBreaks(usize),
    /// A waiting candidate's watch is cancelled by the server: its start
    /// revision was compacted.
    Compacted(usize),
    /// The leader's watch on the prefix breaks, or is cancelled.
    LeaderWatchBreaks(usize),
    LeaderCompacted(usize),
    GoCreate,
    GoRead,
    GoWatch,
    /// The Go leader's work stops and it deletes its key.
    GoResign,
    /// An operator's switchover to the candidate on this lease, checked
    /// by the production plan (`steer::Line::plan`).
    Switchover(u8),
    /// The switchover's record goes (its timeout, its command killed).
    Withdraw,
    /// The leader's watch on the record reports it (and its next in line).
    SeeSwitchover(usize),
}

impl Election {
    fn own_key(c: &Candidate, mine: u8) -> Key {
        Key {
            lease: c.lease,
            create: mine,
        }
    }

    /// The recipe's mutation, if the rule is one.
    fn mutation(&self) -> Option<Mutation> {
        match self.rule {
            Rule::Recipe(m) => Some(m),
            _ => None,
        }
    }

    /// What a read of our turn at `rev` answers (`turn_txn`).
    fn turn_read(w: &World, c: &Candidate, mine: u8, pred: Key, rev: u8) -> TurnCheck {
        let store = &w.history[rev as usize].store;
        if !store.holds(Self::own_key(c, mine)) {
            return TurnCheck::KeyGone;
        }
        match store.older_than(mine) {
            Some(older) => TurnCheck::Older(older.candidate(), rev as i64),
            None => TurnCheck::Clear {
                at: rev as i64,
                released: store.released(pred),
            },
        }
    }

    /// Hands `input` to candidate `i`'s recipe; once it has decided, the
    /// turn goes to the next recipe, as in `campaign.rs`.
    fn take(&self, w: &mut World, i: usize, input: TurnInput) {
        let c = &mut w.candidates[i];
        let Phase::Turn { mine, .. } = c.phase else {
            return;
        };
        let recipe = c.turn.as_mut().expect("a turn under way");
        recipe.input(NOW, input);
        let TurnNext::Decided(turn) = peek(recipe) else {
            return;
        };
        if matches!(
            turn,
            Turn::Ours {
                handed_over: true,
                ..
            }
        ) {
            w.touched = true;
        }
        let c = &mut w.candidates[i];
        c.turn = None;
        c.office = Some(TakeOffice::new().mutated(self.mutation()));
        c.phase = Phase::Office {
            mine,
            claimed: false,
        };
        self.answer_office(w, i, OfficeInput::Turn(turn));
    }

    /// Hands `input` to candidate `i`'s way to office; once it leads, the
    /// next in line is followed, as `LeaderWatch` does.
    fn answer_office(&self, w: &mut World, i: usize, input: OfficeInput) {
        let c = &mut w.candidates[i];
        let Phase::Office { mine, .. } = c.phase else {
            return;
        };
        let office = c.office.as_mut().expect("on the way to office");
        office.input(NOW, input);
        match peek(office) {
            OfficeNext::Lead { confirmed_at } => {
                let own = Self::own_key(c, mine).candidate();
                c.line = Some(NextInLine::new(own).mutated(self.mutation()));
                let mut stint = Stint::new(confirmed_at, DEADLINE).mutated(self.mutation());
                let lead = stint.poll(NOW);
                debug_assert!(matches!(lead, StintNext::Lead { .. }), "{lead:?}");
                c.stint = Some(stint);
                c.office = None;
                c.phase = Phase::Leading { mine, watch: None };
            }
            OfficeNext::Vanished => {
                c.office = None;
                c.phase = Phase::Lost {
                    mine,
                    working: false,
                };
            }
            _ => {}
        }
    }

    /// Candidate `i`'s candidacy is lost: its work stopped with it.
    fn lose(w: &mut World, i: usize, mine: u8) {
        let c = &mut w.candidates[i];
        c.phase = Phase::Lost {
            mine,
            working: false,
        };
        c.office = None;
        c.line = None;
        c.stint = None;
    }

    /// Hands candidate `i`'s stint `input` at `now` and does what it then
    /// says: asked whether the lease lives, the store answers; ended, the
    /// candidacy is lost, its work stopped now or (`stop_by` ahead) still
    /// stopping. A stint that leads on leaves the candidate leading.
    fn drive_stint(
        w: &mut World,
        i: usize,
        now: BootInstant,
        input: Option<StintInput>,
        mutation: Option<Mutation>,
    ) {
        let Phase::Leading { mine, .. } = w.candidates[i].phase else {
            return;
        };
        let lease = w.candidates[i].lease;
        let ended = w.store().ended[lease as usize];
        let Some(mut stint) = w.candidates[i].stint.take() else {
            return;
        };
        if let Some(input) = input {
            stint.input(now, input);
        }
        loop {
            match stint.poll(now) {
                StintNext::Lead { .. } | StintNext::Demoted { .. } => {}
                StintNext::Send(StintRequest::AskLease) => {
                    stint.input(now, StintInput::LeaseLives(Some(!ended)));
                }
                StintNext::Wait(_) => {
                    w.candidates[i].stint = Some(stint);
                    return;
                }
                StintNext::Ended(StintEnd::GaveWay(steer)) => {
                    let c = &mut w.candidates[i];
                    c.line = None;
                    c.gave_way_to = Some(steer.switchover.create_revision as u8);
                    // The work runs until it is stopped.
                    c.resignation = Some(Resignation::steered(steer, true).mutated(mutation));
                    c.phase = Phase::Releasing {
                        mine,
                        working: true,
                    };
                    return;
                }
                StintNext::Ended(StintEnd::Lost { stop_by, .. }) if stop_by > now => {
                    Self::lose(w, i, mine);
                    w.candidates[i].phase = Phase::Lost {
                        mine,
                        working: true,
                    };
                    return;
                }
                StintNext::Ended(_) => return Self::lose(w, i, mine),
            }
        }
    }

    /// A candidate that has just decided to lead: past its lease's end
    /// its deadline has passed too (`model::deadline`), so it steps
    /// down instead; else it notes whether it jumped the queue.
    fn settle(last: &World, w: &mut World, i: usize) {
        let (before, now) = (&last.candidates[i].phase, w.candidates[i].phase);
        let Phase::Leading { mine, .. } = now else {
            return;
        };
        if matches!(before, Phase::Leading { .. }) {
            return;
        }
        let lease = w.candidates[i].lease;
        if w.store().ended[lease as usize] {
            Self::lose(w, i, mine);
            return;
        }
        w.out_of_order |= w.store().older_than(mine).is_some();
        w.led_after_break |= w.breaks > 0;
    }
}

/// The actions' effects, one each: `None` where the action does not
/// apply to the state.
impl Election {
    fn on_create(&self, w: &mut World, i: usize) -> Option<()> {
        let lease = w.candidates[i].lease;
        if w.store().ended[lease as usize] {
            // A session whose lease is gone: no more candidacies.
            w.candidates[i].phase = Phase::Done;
            return Some(());
        }
        let existing = w.store().keys[lease as usize];
        let mine = if existing != 0 {
            existing
        } else {
            w.commit(|s, rev| {
                s.keys[lease as usize] = rev;
                vec![Event::Created(lease)]
            });
            w.now()
        };
        w.candidates[i].phase = Phase::Turn { mine, watch: None };
        w.candidates[i].turn = Some(WaitForTurn::new().mutated(self.mutation()));
        Some(())
    }

    fn on_read_predecessor(&self, w: &mut World, i: usize) -> Option<()> {
        let Phase::Turn { mine, .. } = w.candidates[i].phase else {
            return None;
        };
        let input = TurnInput::Predecessor {
            key: w.store().older_than(mine).map(Key::candidate),
            at: w.now() as i64,
        };
        self.take(w, i, input);
        Some(())
    }

    fn on_watch(&self, w: &mut World, i: usize) -> Option<()> {
        let c = &w.candidates[i];
        let Phase::Turn { mine, watch } = c.phase else {
            return None;
        };
        let recipe = c.turn.as_ref()?;
        // A new stream from just after the read that named the
        // predecessor; else the one racing the read goes on.
        let (pred, at) = match peek(recipe) {
            TurnNext::Send(TurnRequest::Watch { predecessor, from }) => (
                Key::of(&predecessor),
                Pos {
                    rev: from as u8 + 1,
                    event: 0,
                },
            ),
            _ => (Key::of(recipe.predecessor()?), watch?),
        };
        let (pos, woken) = next_turn_event(w, at, Self::own_key(c, mine), pred)?;
        let reported = match woken {
            Woken::PredecessorGone(seen) => Reported::PredecessorGone(seen as i64),
            Woken::HandedOver => Reported::HandedOver(pos.rev as i64),
            Woken::OwnKeyGone => Reported::OwnKeyGone,
        };
        w.candidates[i].phase = Phase::Turn {
            mine,
            watch: Some(Pos {
                rev: pos.rev,
                event: pos.event + 1,
            }),
        };
        self.take(w, i, TurnInput::Woken(reported));
        Some(())
    }

    fn on_read_turn(&self, w: &mut World, i: usize, member: u8) -> Option<()> {
        let c = &w.candidates[i];
        let Phase::Turn { mine, .. } = c.phase else {
            return None;
        };
        let recipe = c.turn.as_ref()?;
        let TurnNext::Send(TurnRequest::CheckTurn { seen }) = peek(recipe) else {
            return None;
        };
        let pred = Key::of(recipe.predecessor()?);
        // A member that had not applied the deletion: the
        // linearizable read instead (`check_turn_locally`).
        let applied = seen.is_some_and(|seen| member as i64 >= seen);
        let rev = if applied || self.rule == Rule::AnyMember {
            member
        } else {
            w.now()
        };
        let check = Self::turn_read(w, c, mine, pred, rev);
        self.take(w, i, TurnInput::Checked(check));
        let claims = matches!(
            w.candidates[i].phase,
            Phase::Office { .. } | Phase::Leading { .. }
        );
        if claims && rev < w.now() {
            w.led_on_older_state = true;
        }
        Some(())
    }

    fn on_lease_over(&self, w: &mut World, i: usize) -> Option<()> {
        self.answer_office(w, i, OfficeInput::LeaseEnded);
        Some(())
    }

    fn on_read_back(&self, w: &mut World, i: usize) -> Option<()> {
        let c = &w.candidates[i];
        let Phase::Office { mine, .. } = c.phase else {
            return None;
        };
        let read = w
            .store()
            .holds(Self::own_key(c, mine))
            .then_some(mine as i64);
        w.read_back |= read.is_some();
        self.answer_office(w, i, OfficeInput::ReadBack(read));
        Some(())
    }

    fn on_claim(&self, w: &mut World, i: usize) -> Option<()> {
        let c = w.candidates[i].clone();
        let Phase::Office { mine, .. } = c.phase else {
            return None;
        };
        let own = Self::own_key(&c, mine).candidate();
        let ours = Ours {
            key: std::str::from_utf8(&own.key).expect("text"),
            lease: own.lease,
            create_revision: own.create_revision,
        };
        let mut txn = Transaction::claim(ELECTION, ours);
        if self.mutation() == Some(Mutation::ClaimUnguarded) {
            txn.when.clear();
        }
        let claim = match w.transact(&txn, self.markers) {
            // The role may not write outside the election's prefix.
            Err(Refused::PermissionDenied) => Claim::Unwritable,
            // A put on an ended lease fails: the claim is retried
            // until the deadline, which has passed.
            Err(_) => {
                Self::lose(w, i, mine);
                return Some(());
            }
            Ok(answer) => match answer.claimed(ELECTION, own.lease) {
                ClaimAnswer::KeyGone => Claim::KeyGone,
                ClaimAnswer::Alone(at) => Claim::Ours(at),
                // Our marker is written; the claim waits for a
                // deletion of the others' and reads again.
                ClaimAnswer::Others(..) => {
                    w.candidates[i].phase = Phase::Office {
                        mine,
                        claimed: true,
                    };
                    return Some(());
                }
            },
        };
        self.answer_office(w, i, OfficeInput::Claimed(claim));
        Some(())
    }

    fn on_leader_read(&self, w: &mut World, i: usize) -> Option<()> {
        let c = &w.candidates[i];
        let Phase::Leading { mine, .. } = c.phase else {
            return None;
        };
        let line = c.line.as_ref()?;
        let NextInLineNext::Read { pick } = peek(line) else {
            return None;
        };
        let store = w.store();
        let own = Key {
            lease: c.lease,
            create: store.keys[c.lease as usize],
        };
        let own = (own.create != 0).then(|| own.candidate());
        let next = match pick {
            Pick::Oldest => store.younger_than(mine),
            Pick::Youngest => store.youngest_after(mine),
        };
        let at = w.now() as i64;
        let c = &mut w.candidates[i];
        let line = c.line.as_mut()?;
        line.input(
            NOW,
            NextInLineInput::Read {
                own,
                next: next.map(Key::candidate),
                at,
            },
        );
        let gone = peek(line) == NextInLineNext::OwnKeyGone;
        c.phase = Phase::Leading { mine, watch: None };
        if gone {
            Self::drive_stint(w, i, NOW, Some(StintInput::OwnKeyGone), self.mutation());
        }
        Some(())
    }

    fn on_leader_watch(&self, w: &mut World, i: usize) -> Option<()> {
        let c = &w.candidates[i];
        let Phase::Leading { mine, watch } = c.phase else {
            return None;
        };
        let line = c.line.as_ref()?;
        let NextInLineNext::Watch { from } = peek(line) else {
            return None;
        };
        let at = watch.unwrap_or(Pos {
            rev: from as u8 + 1,
            event: 0,
        });
        let (pos, event) = next_leader_event(w, at, line)?;
        let c = &mut w.candidates[i];
        let line = c.line.as_mut()?;
        line.input(NOW, NextInLineInput::Event(event));
        let gone = peek(line) == NextInLineNext::OwnKeyGone;
        c.phase = Phase::Leading {
            mine,
            watch: Some(Pos {
                rev: pos.rev,
                event: pos.event + 1,
            }),
        };
        if gone {
            Self::drive_stint(w, i, NOW, Some(StintInput::OwnKeyGone), self.mutation());
        }
        Some(())
    }

    /// The operator's switchover: the production plan over the line as
    /// it reads now; refused, nothing changes (the action does not
    /// apply). Planned, one revision records it and deletes the keys
    /// between leader and target, each with a release marker (bound here
    /// to that candidate's own lease: the command's, in production, which
    /// outlives the successor's read as this one does).
    fn on_switchover(&self, w: &mut World, target: u8) -> Option<()> {
        let line: Vec<Key> = {
            let mut keys: Vec<Key> = w.store().existing().collect();
            keys.sort_by_key(|k| k.create);
            keys
        };
        let leads = |k: &Key| w.candidates.iter().any(|c| c.lease == k.lease && c.works());
        let as_line = Line {
            backend: crate::backend_kind::Backend::Etcd,
            election: ELECTION.into(),
            candidates: line
                .iter()
                .enumerate()
                .map(|(place, k)| InLine {
                    id: format!("l{}", k.lease),
                    token: Some(k.create as u64),
                    leads: place == 0 && leads(k),
                    priority: Priority::DEFAULT,
                    healthy: true,
                    live: true,
                    by: if k.lease == GO_LEASE { "go" } else { "elect" },
                })
                .collect(),
        };
        let plan = as_line
            .plan(&Target::Candidate(format!("l{target}")))
            .ok()?;
        if plan.nothing_to_do() {
            return None;
        }
        let (to, aside): (Key, Vec<Key>) = (
            line[plan.target],
            plan.step_aside.iter().map(|&i| line[i]).collect(),
        );
        w.switchovers += 1;
        w.commit(|s, rev| {
            s.switchover = (rev, Some(to));
            aside
                .iter()
                .map(|k| {
                    s.keys[k.lease as usize] = 0;
                    s.markers.push((k.create, k.lease));
                    Event::Deleted(k.lease)
                })
                .collect()
        });
        Some(())
    }

    fn on_withdraw(&self, w: &mut World) -> Option<()> {
        w.withdrawn += 1;
        w.commit(|s, _| {
            s.switchover = (0, None);
            vec![]
        });
        Some(())
    }

    /// The leader's watch on the record reports it as it now is, after
    /// its next in line as its own watch knows it.
    fn on_see_switchover(&self, w: &mut World, i: usize) -> Option<()> {
        let c = &w.candidates[i];
        let next = c.line.as_ref()?.next().cloned();
        let steer = match w.store().switchover {
            (rev, Some(target)) if rev != 0 => Some(Steer {
                switchover: Recorded {
                    key: layout::switchover_record(ELECTION).into_bytes(),
                    create_revision: rev as i64,
                },
                target: target.candidate(),
                manual: true,
            }),
            _ => None,
        };
        c.stint.as_ref()?;
        let before = c.clone();
        Self::drive_stint(
            w,
            i,
            NOW,
            Some(StintInput::NextInLine(next)),
            self.mutation(),
        );
        Self::drive_stint(
            w,
            i,
            NOW,
            Some(StintInput::Switchover(steer)),
            self.mutation(),
        );
        (w.candidates[i] != before).then_some(())
    }

    fn on_resign(&self, w: &mut World, i: usize) -> Option<()> {
        let c = &mut w.candidates[i];
        let Phase::Leading { mine, .. } = c.phase else {
            return None;
        };
        let mut stint = c.stint.take()?;
        stint.input(NOW, StintInput::Resign);
        if stint.poll(NOW) != StintNext::Ended(StintEnd::Resigned) {
            return None;
        }
        let successor = c.line.take()?.successor();
        // The work runs until it is stopped.
        c.resignation = Some(Resignation::new(successor, true).mutated(self.mutation()));
        c.phase = Phase::Releasing {
            mine,
            working: true,
        };
        Some(())
    }

    fn on_release(&self, w: &mut World, i: usize) -> Option<()> {
        let c = w.candidates[i].clone();
        let Phase::Releasing { mine, working } = c.phase else {
            return None;
        };
        let ResignationNext::Release(touch) = peek(c.resignation.as_ref()?) else {
            return None;
        };
        // Refused whole (a put bound to an ended lease, a marker
        // the role may not write): nothing changes, and a
        // successor waits for the lease.
        let own = Self::own_key(&c, mine).candidate();
        let key = std::str::from_utf8(&own.key).expect("text");
        let release = Transaction::release(
            ELECTION,
            key,
            own.create_revision,
            own.lease,
            touch.as_ref(),
        );
        let recorded = w.store().switchover.0;
        let answer = w.transact(&release, self.markers);
        let touched = answer.is_ok_and(|a| a.touched());
        if let Some(switchover) = w.candidates[i].gave_way_to.take() {
            let live = switchover == recorded;
            w.stale_acted |= touched && !live;
            w.steered |= touched && live;
        }
        let c = &mut w.candidates[i];
        c.resignation = None;
        c.phase = match self.leases {
            Leases::Own => Phase::Released { mine, working },
            Leases::Session if working => Phase::Released { mine, working },
            Leases::Session => Phase::Done,
        };
        Some(())
    }

    fn on_revoke(&self, w: &mut World, i: usize) -> Option<()> {
        let lease = w.candidates[i].lease;
        w.end_lease(lease);
        w.candidates[i].phase = Phase::Done;
        Some(())
    }

    fn on_stop_work(&self, w: &mut World, i: usize) -> Option<()> {
        let c = &mut w.candidates[i];
        match &mut c.phase {
            Phase::Releasing { working, .. }
            | Phase::Released { working, .. }
            | Phase::Lost { working, .. } => *working = false,
            _ => return None,
        }
        if let Some(resignation) = &mut c.resignation {
            resignation.input(NOW, ResignationInput::WorkStopped);
        }
        Some(())
    }

    fn on_deadline_passes(&self, w: &mut World, i: usize) -> Option<()> {
        let c = &w.candidates[i];
        let Phase::Leading { .. } = c.phase else {
            return None;
        };
        let lease = c.lease;
        w.lapses += 1;
        Self::drive_stint(w, i, DEADLINE, None, self.mutation());
        if matches!(w.candidates[i].phase, Phase::Leading { .. }) {
            // Led on past the deadline (the rule off): the lease's
            // expiry may come right after it.
            w.end_lease(lease);
        }
        Some(())
    }

    fn on_recover(&self, w: &mut World, i: usize) -> Option<()> {
        let c = w.candidates[i].clone();
        let Phase::Lost {
            mine,
            working: false,
        } = c.phase
        else {
            return None;
        };
        match self.leases {
            Leases::Own => w.end_lease(c.lease),
            // `release(lease, None)`: the key if still ours, and
            // the marker either way.
            Leases::Session if w.store().ended[c.lease as usize] => {}
            Leases::Session => w.commit(|s, _| {
                s.markers.push((mine, c.lease));
                s.tenures.retain(|&l| l != c.lease);
                if s.holds(Self::own_key(&c, mine)) {
                    s.keys[c.lease as usize] = 0;
                    vec![Event::Deleted(c.lease)]
                } else {
                    vec![]
                }
            }),
        }
        let again = c.candidacy + 1 < self.candidacies;
        let cand = &mut w.candidates[i];
        if !again {
            cand.phase = Phase::Done;
        } else {
            cand.candidacy += 1;
            if self.leases == Leases::Own {
                cand.lease += 1;
            }
            cand.phase = Phase::Idle;
        }
        Some(())
    }

    fn on_delete_by_hand(&self, w: &mut World, lease: u8) -> Option<()> {
        w.deletes += 1;
        w.commit(|s, _| {
            s.keys[lease as usize] = 0;
            vec![Event::Deleted(lease)]
        });
        Some(())
    }

    fn on_lease_lapses(&self, w: &mut World, lease: u8) -> Option<()> {
        w.lapses += 1;
        w.end_lease(lease);
        Some(())
    }

    fn on_watch_breaks(&self, w: &mut World, i: usize, action: Action) -> Option<()> {
        let Phase::Turn { mine, .. } = w.candidates[i].phase else {
            return None;
        };
        w.breaks += 1;
        // The driver's next watch starts afresh, from the read
        // the recipe asks for.
        w.candidates[i].phase = Phase::Turn { mine, watch: None };
        let input = match action {
            Action::Compacted(_) => TurnInput::Woken(Reported::Cancelled),
            _ => TurnInput::WatchBroke,
        };
        self.take(w, i, input);
        Some(())
    }

    fn on_leader_watch_breaks(&self, w: &mut World, i: usize, action: Action) -> Option<()> {
        let c = &mut w.candidates[i];
        let Phase::Leading { mine, .. } = c.phase else {
            return None;
        };
        let line = c.line.as_mut()?;
        line.input(
            NOW,
            match action {
                Action::LeaderCompacted(_) => NextInLineInput::Cancelled,
                _ => NextInLineInput::Broke,
            },
        );
        c.phase = Phase::Leading { mine, watch: None };
        w.breaks += 1;
        Some(())
    }

    fn on_go_create(&self, w: &mut World) -> Option<()> {
        w.commit(|s, rev| {
            s.keys[GO_LEASE as usize] = rev;
            vec![Event::Created(GO_LEASE)]
        });
        w.go = Go::Waiting {
            mine: w.now(),
            on: None,
        };
        Some(())
    }

    fn on_go_read(&self, w: &mut World) -> Option<()> {
        let Go::Waiting { mine, .. } = w.go else {
            return None;
        };
        // Its lease gone, its session is done: it never leads.
        if w.store().ended[GO_LEASE as usize] {
            w.go = Go::Done;
            return Some(());
        }
        w.go = match w.store().older_than(mine) {
            None => {
                w.go_led = true;
                Go::Leading { mine }
            }
            Some(older) => Go::Waiting {
                mine,
                on: Some((
                    older.lease,
                    Pos {
                        rev: w.now() + 1,
                        event: 0,
                    },
                )),
            },
        };
        Some(())
    }

    fn on_go_watch(&self, w: &mut World) -> Option<()> {
        let Go::Waiting { mine, .. } = w.go else {
            return None;
        };
        w.go = Go::Waiting { mine, on: None };
        Some(())
    }

    fn on_go_resign(&self, w: &mut World) -> Option<()> {
        let Go::Leading { mine } = w.go else {
            return None;
        };
        // `Resign`: delete the key if it still has our create
        // revision.
        if w.store().keys[GO_LEASE as usize] == mine {
            w.commit(|s, _| {
                s.keys[GO_LEASE as usize] = 0;
                vec![Event::Deleted(GO_LEASE)]
            });
        }
        w.go = Go::Done;
        Some(())
    }
}

/// The actions each party may take, one function each.
impl Election {
    /// What candidate `i`, `c`, may do next, as its recipes say.
    fn candidate_actions(
        &self,
        w: &World,
        i: usize,
        c: &Candidate,
        room: bool,
        actions: &mut Vec<Action>,
    ) {
        match c.phase {
            Phase::Idle if room => actions.push(Action::Create(i)),
            Phase::Turn { mine, watch } => self.turn_actions(w, i, c, (mine, watch), actions),
            Phase::Office { mine, claimed } => {
                let store = w.store();
                match peek(c.office.as_ref().expect("on the way to office")) {
                    OfficeNext::Claim => {
                        let others = store.tenures.iter().any(|&l| l != c.lease);
                        let gone = !store.holds(Self::own_key(c, mine));
                        if (!claimed && room) || (claimed && (gone || !others)) {
                            actions.push(Action::Claim(i));
                        }
                    }
                    OfficeNext::AwaitLeaseEnd(pred) => {
                        let pred = Key::of(&pred);
                        if store.ended[pred.lease as usize] || store.released(pred) {
                            actions.push(Action::LeaseOver(i));
                        }
                    }
                    OfficeNext::ReadBack => actions.push(Action::ReadBack(i)),
                    step => unreachable!("{step:?} is not a step on the way"),
                }
            }
            Phase::Leading { watch, .. } => {
                let line = c.line.as_ref().expect("a leader follows its next");
                match peek(line) {
                    NextInLineNext::Read { .. } => actions.push(Action::LeaderRead(i)),
                    NextInLineNext::Watch { from } => {
                        let at = watch.unwrap_or(Pos {
                            rev: from as u8 + 1,
                            event: 0,
                        });
                        if next_leader_event(w, at, line).is_some() {
                            actions.push(Action::LeaderWatch(i));
                        }
                        if self.breaks && w.breaks < BREAKS {
                            actions.push(Action::LeaderWatchBreaks(i));
                            actions.push(Action::LeaderCompacted(i));
                        }
                    }
                    // Led on by a stint whose rule is off.
                    NextInLineNext::OwnKeyGone => {}
                }
                if room {
                    actions.push(Action::Resign(i));
                }
                if w.lapses < LAPSES {
                    actions.push(Action::DeadlinePasses(i));
                }
                if self.switchovers {
                    actions.push(Action::SeeSwitchover(i));
                }
            }
            Phase::Releasing { working, .. } => {
                let resignation = c.resignation.as_ref().expect("resigning");
                let sends = matches!(peek(resignation), ResignationNext::Release(_));
                if room && sends {
                    actions.push(Action::Release(i));
                }
                if working {
                    actions.push(Action::StopWork(i));
                }
            }
            Phase::Released { working, .. } => {
                if working {
                    actions.push(Action::StopWork(i));
                } else if room && self.leases == Leases::Own {
                    actions.push(Action::Revoke(i));
                }
            }
            Phase::Lost { working: true, .. } => actions.push(Action::StopWork(i)),
            Phase::Lost { .. } if room => actions.push(Action::Recover(i)),
            _ => {}
        }
    }

    /// What candidate `i`, `c`, waiting for its turn on its key created
    /// at `mine`, may do: its recipe's request, and a break of its watch
    /// where watches break (`watch`: where its stream stands).
    fn turn_actions(
        &self,
        w: &World,
        i: usize,
        c: &Candidate,
        (mine, watch): (u8, Option<Pos>),
        actions: &mut Vec<Action>,
    ) {
        let recipe = c.turn.as_ref().expect("a turn under way");
        let own = Self::own_key(c, mine);
        if self.breaks && w.breaks < BREAKS {
            match peek(recipe) {
                TurnNext::Send(TurnRequest::Watch { .. }) => {
                    actions.push(Action::WatchBreaks(i));
                    actions.push(Action::Compacted(i));
                }
                TurnNext::Send(TurnRequest::CheckTurn { .. }) if recipe.races_the_watch() => {
                    actions.push(Action::WatchBreaks(i));
                }
                _ => {}
            }
        }
        match peek(recipe) {
            TurnNext::Send(TurnRequest::FindPredecessor) => {
                actions.push(Action::ReadPredecessor(i));
            }
            TurnNext::Send(TurnRequest::Watch { predecessor, from }) => {
                let at = Pos {
                    rev: from as u8 + 1,
                    event: 0,
                };
                if next_turn_event(w, at, own, Key::of(&predecessor)).is_some() {
                    actions.push(Action::Watch(i));
                }
            }
            TurnNext::Send(TurnRequest::CheckTurn { seen }) => {
                let pred = Key::of(recipe.predecessor().expect("a predecessor"));
                let reports = watch.is_some_and(|at| next_turn_event(w, at, own, pred).is_some());
                if recipe.races_the_watch() && reports {
                    actions.push(Action::Watch(i));
                }
                // A member behind `seen` is not asked: the
                // newest revision is read instead (see
                // `ReadTurn`).
                let from = match (self.rule, seen) {
                    (Rule::AnyMember, _) => 0,
                    (_, Some(seen)) => seen as u8,
                    (_, None) => w.now(),
                };
                for rev in from..=w.now() {
                    actions.push(Action::ReadTurn(i, rev));
                }
            }
            TurnNext::Decided(_) => {}
        }
    }

    /// What the environment may do: an operator's delete, a lease's
    /// lapse.
    fn environment_actions(&self, w: &World, room: bool, actions: &mut Vec<Action>) {
        if self.switchovers && room {
            if w.switchovers < 1 && w.store().switchover.0 == 0 {
                for k in w.store().existing() {
                    actions.push(Action::Switchover(k.lease));
                }
            }
            if w.withdrawn < 1 && w.store().switchover.0 != 0 {
                actions.push(Action::Withdraw);
            }
        }
        if room && self.hand_deletes != HandDeletes::None && w.deletes < DELETES {
            for k in w.store().existing().filter(|k| k.lease != GO_LEASE) {
                let a_working_leaders =
                    w.candidates.iter().any(|c| c.lease == k.lease && c.works());
                let deletable = match self.hand_deletes {
                    HandDeletes::Any => true,
                    HandDeletes::NotAWorkingLeaders => !a_working_leaders,
                    HandDeletes::NotALeaders => {
                        !a_working_leaders && !w.store().tenures.contains(&k.lease)
                    }
                    HandDeletes::None => false,
                };
                if deletable {
                    actions.push(Action::DeleteByHand(k.lease));
                }
            }
        }
        if room && w.lapses < LAPSES {
            // A lease lapses only once its holder's work has stopped.
            for c in w.candidates.iter().filter(|c| !c.works()) {
                if !w.store().ended[c.lease as usize] {
                    actions.push(Action::LeaseLapses(c.lease));
                }
            }
            let go_idle = matches!(w.go, Go::Waiting { .. });
            if go_idle && !w.store().ended[GO_LEASE as usize] {
                actions.push(Action::LeaseLapses(GO_LEASE));
            }
        }
    }

    /// What the Go candidate may do next.
    fn go_actions(w: &World, room: bool, actions: &mut Vec<Action>) {
        match w.go {
            Go::Idle if room => actions.push(Action::GoCreate),
            Go::Waiting { on: None, .. } => actions.push(Action::GoRead),
            Go::Waiting {
                on: Some((lease, at)),
                ..
            } if w.events_from(at).any(|(_, e)| e == Event::Deleted(lease)) => {
                actions.push(Action::GoWatch);
            }
            Go::Leading { .. } if room => actions.push(Action::GoResign),
            _ => {}
        }
    }
}

impl Model for Election {
    type State = World;
    type Action = Action;

    fn init_states(&self) -> Vec<World> {
        let candidates = (0..self.elect_candidates)
            .map(|c| Candidate {
                lease: match self.leases {
                    Leases::Own => c as u8 * CANDIDACIES,
                    Leases::Session => c as u8,
                },
                candidacy: 0,
                phase: Phase::Idle,
                turn: None,
                office: None,
                line: None,
                stint: None,
                resignation: None,
                gave_way_to: None,
            })
            .collect();
        vec![World {
            history: vec![Revision {
                store: Store::default(),
                events: vec![],
            }],
            candidates,
            go: if self.go { Go::Idle } else { Go::Absent },
            go_led: false,
            deletes: 0,
            lapses: 0,
            breaks: 0,
            led_after_break: false,
            touched: false,
            led_on_older_state: false,
            read_back: false,
            out_of_order: false,
            switchovers: 0,
            withdrawn: 0,
            steered: false,
            stale_acted: false,
        }]
    }

    fn actions(&self, w: &World, actions: &mut Vec<Action>) {
        let room = w.history.len() < self.revisions;
        for (i, c) in w.candidates.iter().enumerate() {
            self.candidate_actions(w, i, c, room, actions);
        }
        self.environment_actions(w, room, actions);
        Self::go_actions(w, room, actions);
    }

    fn next_state(&self, last: &World, action: Action) -> Option<World> {
        let mut w = last.clone();
        match action {
            Action::Create(i) => self.on_create(&mut w, i)?,
            Action::ReadPredecessor(i) => self.on_read_predecessor(&mut w, i)?,
            Action::Watch(i) => self.on_watch(&mut w, i)?,
            Action::ReadTurn(i, member) => self.on_read_turn(&mut w, i, member)?,
            Action::LeaseOver(i) => self.on_lease_over(&mut w, i)?,
            Action::ReadBack(i) => self.on_read_back(&mut w, i)?,
            Action::Claim(i) => self.on_claim(&mut w, i)?,
            Action::LeaderRead(i) => self.on_leader_read(&mut w, i)?,
            Action::LeaderWatch(i) => self.on_leader_watch(&mut w, i)?,
            Action::Resign(i) => self.on_resign(&mut w, i)?,
            Action::Release(i) => self.on_release(&mut w, i)?,
            Action::Revoke(i) => self.on_revoke(&mut w, i)?,
            Action::StopWork(i) => self.on_stop_work(&mut w, i)?,
            Action::DeadlinePasses(i) => self.on_deadline_passes(&mut w, i)?,
            Action::Recover(i) => self.on_recover(&mut w, i)?,
            Action::DeleteByHand(lease) => self.on_delete_by_hand(&mut w, lease)?,
            Action::LeaseLapses(lease) => self.on_lease_lapses(&mut w, lease)?,
            Action::WatchBreaks(i) | Action::Compacted(i) => {
                self.on_watch_breaks(&mut w, i, action)?
            }
            Action::LeaderWatchBreaks(i) | Action::LeaderCompacted(i) => {
                self.on_leader_watch_breaks(&mut w, i, action)?
            }
            Action::GoCreate => self.on_go_create(&mut w)?,
            Action::GoRead => self.on_go_read(&mut w)?,
            Action::GoWatch => self.on_go_watch(&mut w)?,
            Action::GoResign => self.on_go_resign(&mut w)?,
            Action::Switchover(lease) => self.on_switchover(&mut w, lease)?,
            Action::Withdraw => self.on_withdraw(&mut w)?,
            Action::SeeSwitchover(i) => self.on_see_switchover(&mut w, i)?,
        }
        for i in 0..w.candidates.len() {
            Self::settle(last, &mut w, i);
        }
        Some(w)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(ONE_AT_A_TIME, |_, w: &World| w.working() <= 1),
            Property::always(IN_ORDER, |_, w: &World| !w.out_of_order),
            Property::sometimes("a successor leads on the touch", |_, w: &World| w.touched),
            Property::sometimes(
                "a successor leads on a member's older state",
                |_, w: &World| w.led_on_older_state,
            ),
            // Not vacuous where markers cannot be written: a candidate
            // reads its key back, and finds it.
            Property::sometimes(READ_BACK, |m: &Election, w: &World| {
                m.markers == Markers::Writable || w.read_back
            }),
            Property::sometimes(GO_LEADS, |m: &Election, w: &World| !m.go || w.go_led),
            Property::always(NO_STALE_SWITCHOVER, |_, w: &World| !w.stale_acted),
            Property::sometimes(SWITCHED_OVER, |m: &Election, w: &World| {
                !m.switchovers || w.steered
            }),
            Property::sometimes(LED_AFTER_BREAK, |m: &Election, w: &World| {
                !m.breaks || w.led_after_break
            }),
        ]
    }
}

const ONE_AT_A_TIME: &str = "at most one candidate's work runs";
const IN_ORDER: &str = "nobody leads while a key older than its own is left";
const READ_BACK: &str = "a candidate reads its key back where markers cannot be written";
const GO_LEADS: &str = "the Go candidate leads";
const NO_STALE_SWITCHOVER: &str = "a switchover whose record is gone never hands over";
const SWITCHED_OVER: &str = "a switchover's target is handed over to";
const LED_AFTER_BREAK: &str = "a candidate starts to lead after a watch broke";

fn check(rule: Rule, leases: Leases, hand_deletes: HandDeletes) -> impl Checker<Election> {
    check_with(rule, leases, hand_deletes, Markers::Writable)
}

fn check_with(
    rule: Rule,
    leases: Leases,
    hand_deletes: HandDeletes,
    markers: Markers,
) -> impl Checker<Election> {
    check_model(election(rule, leases, hand_deletes, markers))
}

/// The world CI checks for these settings: three elect candidates, and
/// the revisions that keep each check to seconds. The ignored
/// `deeper_one_leader_at_a_time_in_order` goes a revision further.
fn election(rule: Rule, leases: Leases, hand_deletes: HandDeletes, markers: Markers) -> Election {
    // A delete by hand multiplies the worlds: fewer revisions, and with
    // own leases one candidacy each (a key is created again under its old
    // name only on a session's lease).
    let (revisions, candidacies) = match (hand_deletes, leases, markers) {
        (HandDeletes::None, Leases::Own, Markers::Writable) => (10, CANDIDACIES),
        (HandDeletes::None, Leases::Own, Markers::Unwritable) => (11, CANDIDACIES),
        (HandDeletes::None, Leases::Session, _) => (12, CANDIDACIES),
        (_, Leases::Own, _) => (8, 1),
        (_, Leases::Session, _) => (8, CANDIDACIES),
    };
    let revisions = match rule {
        // A read from any member multiplies the worlds again.
        Rule::AnyMember => revisions.min(11),
        _ => revisions,
    };
    Election {
        rule,
        elect_candidates: CANDIDATES,
        go: false,
        leases,
        hand_deletes,
        markers,
        revisions,
        candidacies,
        breaks: false,
        switchovers: false,
    }
}

fn check_model(model: Election) -> impl Checker<Election> {
    // A mutation is done once it is caught; the production rules are
    // checked in every state within the bounds.
    let finish = match model.rule {
        Rule::Production
        | Rule::AnyMember
        | Rule::Recipe(Mutation::NoLeaseWait | Mutation::KeyLossIgnored) => HasDiscoveries::All,
        _ => HasDiscoveries::AnyFailures,
    };
    let label = format!(
        "etcd handover model ({:?}, {:?} leases, hand deletes: {:?}, markers {:?}, {} revisions)",
        model.rule, model.leases, model.hand_deletes, model.markers, model.revisions
    );
    breadth_first(model.checker().finish_when(finish), &label)
}

/// Two elect candidates and a Go candidate (`etcdctl elect`,
/// `concurrency.Election`) in one election, own leases, one key deleted
/// by hand that is neither a leader's ([`HandDeletes::NotALeaders`]) nor
/// the Go candidate's (see [`Go`]), one lease lapse.
fn check_beside_go(rule: Rule) -> impl Checker<Election> {
    let model = beside_go(rule);
    let finish = match rule {
        Rule::Production => HasDiscoveries::All,
        _ => HasDiscoveries::AnyFailures,
    };
    let label = format!(
        "etcd handover model ({rule:?}, beside a Go candidate, {} revisions)",
        model.revisions
    );
    breadth_first(model.checker().finish_when(finish), &label)
}

/// The Go candidate's world (see [`check_beside_go`]).
fn beside_go(rule: Rule) -> Election {
    Election {
        rule,
        elect_candidates: 2,
        go: true,
        leases: Leases::Own,
        hand_deletes: HandDeletes::NotALeaders,
        markers: Markers::Writable,
        revisions: 10,
        candidacies: CANDIDACIES,
        breaks: false,
        switchovers: false,
    }
}

/// A Go candidate writes no tenure marker and waits for no lease, so the
/// claim's guard is what keeps an elect candidate whose key was deleted
/// while it took office from leading beside the Go candidate that went
/// ahead: one leader at a time, in order, and the Go candidate leads.
#[test]
fn one_leader_at_a_time_in_order_beside_a_go_candidate() {
    let checker = check_beside_go(Rule::Production);
    checker.assert_no_discovery(ONE_AT_A_TIME);
    checker.assert_no_discovery(IN_ORDER);
    assert!(
        checker.discovery(GO_LEADS).is_some(),
        "the Go candidate never leads"
    );
}

/// What a Go candidate in the election gives up, as the book's safety
/// page says: it waits for no tenure marker, so with the key of an elect
/// candidate that leads deleted by hand (here one handed over to by a
/// touch it has not heard yet), the Go candidate finds no older key and
/// leads beside it until that candidate hears of the deletion.
#[test]
fn beside_a_go_candidate_a_leaders_key_deleted_by_hand_lets_it_lead_beside() {
    let model = Election {
        hand_deletes: HandDeletes::NotAWorkingLeaders,
        ..beside_go(Rule::Production)
    };
    let checker = breadth_first(
        model
            .checker()
            .finish_when(HasDiscoveries::AnyOf([ONE_AT_A_TIME].into())),
        "etcd handover model (beside a Go candidate, a leader's key deleted by hand)",
    );
    let path = checker
        .discovery(ONE_AT_A_TIME)
        .expect("the gap beside a Go candidate must show");
    eprintln!(
        "beside a Go candidate, a leader's key deleted by hand: \"{ONE_AT_A_TIME}\" broken in \
         {} steps: {:?}",
        path.clone().into_actions().len(),
        path.into_actions()
    );
}

/// The claim without its guard (our key's create revision and lease):
/// beside a Go candidate, an elect candidate whose key was deleted by
/// hand while it took office writes its marker, finds no other, and leads
/// beside the Go candidate, which found no older key. Where every
/// candidate writes markers the claims serialise them, and the removal is
/// not caught (the other worlds).
#[test]
fn an_unguarded_claim_is_caught_beside_a_go_candidate() {
    let checker = check_beside_go(Rule::Recipe(Mutation::ClaimUnguarded));
    let path = checker
        .discovery(ONE_AT_A_TIME)
        .expect("an unguarded claim must be caught beside a Go candidate");
    eprintln!(
        "ClaimUnguarded: \"{ONE_AT_A_TIME}\" broken in {} steps: {:?}",
        path.clone().into_actions().len(),
        path.into_actions()
    );
}

/// The switchovers' world: three elect candidates on their own leases,
/// an operator's switchover to any of them (checked by the production
/// plan), withdrawn at any moment (its timeout).
fn switchovers(rule: Rule, revisions: usize) -> Election {
    Election {
        rule,
        elect_candidates: CANDIDATES,
        go: false,
        leases: Leases::Own,
        hand_deletes: HandDeletes::None,
        markers: Markers::Writable,
        revisions,
        candidacies: 1,
        breaks: false,
        switchovers: true,
    }
}

fn check_switchovers(rule: Rule, revisions: usize) -> impl Checker<Election> {
    let model = switchovers(rule, revisions);
    let finish = match rule {
        Rule::Production => HasDiscoveries::All,
        _ => HasDiscoveries::AnyFailures,
    };
    let label = format!("etcd handover model ({rule:?}, switchovers, {revisions} revisions)");
    breadth_first(model.checker().finish_when(finish), &label)
}

/// A switchover to any candidate, the leader's stint giving way once its
/// target is next (the candidates between them stepped aside in the
/// record's revision), withdrawn at any moment: one leader at a time, in
/// order (so the target's token is the higher), the target is handed
/// over to, and a switchover whose record is gone never hands over.
#[test]
fn switchovers_hand_over_to_their_target_and_a_withdrawn_one_never_acts() {
    let checker = check_switchovers(Rule::Production, 9);
    checker.assert_no_discovery(ONE_AT_A_TIME);
    checker.assert_no_discovery(IN_ORDER);
    checker.assert_no_discovery(NO_STALE_SWITCHOVER);
    assert!(
        checker.discovery(SWITCHED_OVER).is_some(),
        "no switchover ever handed over"
    );
}

/// The touch that carries out a switchover without the record's guard:
/// a switchover withdrawn while the leader stopped its work still hands
/// over.
#[test]
fn a_switchover_touch_without_the_records_guard_is_caught() {
    let checker = check_switchovers(Rule::Recipe(Mutation::SwitchoverUnguarded), 9);
    let path = checker
        .discovery(NO_STALE_SWITCHOVER)
        .expect("an unguarded switchover touch must be caught");
    eprintln!(
        "SwitchoverUnguarded: \"{NO_STALE_SWITCHOVER}\" broken in {} steps: {:?}",
        path.clone().into_actions().len(),
        path.into_actions()
    );
}

/// The world where watches break and compactions cancel them: on a
/// session's lease (keys come back under the same name), 12 revisions.
fn broken_watches(rule: Rule) -> Election {
    Election {
        rule,
        elect_candidates: CANDIDATES,
        go: false,
        leases: Leases::Session,
        hand_deletes: HandDeletes::None,
        markers: Markers::Writable,
        revisions: 12,
        candidacies: CANDIDACIES,
        breaks: true,
        switchovers: false,
    }
}

/// Watches break and are cancelled by compactions: any one of them, a
/// waiting candidate's (before it reported anything, or while its
/// stream races the read of our turn) or the leader's, at any moment.
/// The driver then reads afresh, and a stream that broke never decides
/// a race (`WaitForTurn::races_the_watch`). One leader at a time, in
/// order, on a session's lease, whose keys come back under the same name.
#[test]
fn one_leader_at_a_time_in_order_with_broken_watches_and_compaction() {
    let model = broken_watches(Rule::Production);
    let checker = breadth_first(
        model.checker().finish_when(HasDiscoveries::All),
        "etcd handover model (Production, Session leases, watches break, 12 revisions)",
    );
    checker.assert_no_discovery(ONE_AT_A_TIME);
    checker.assert_no_discovery(IN_ORDER);
    assert!(
        checker.discovery(LED_AFTER_BREAK).is_some(),
        "nobody leads after a watch broke"
    );
}

/// The race's end is not a safety rule (the safety page's second table):
/// a touch that reaches our stream after it reported our own key gone
/// cannot exist, because the touch's guard compares our key's create
/// revision and a key made again under our name has a new one. So a
/// recipe whose race never ends (`RaceUnended`) reaches the very states
/// the production recipe does (992,857 here; 1,360,633 with any key
/// deleted by hand, run by hand), in the world with broken and compacted
/// watches, where a waiting candidate's key goes with its lease.
#[test]
fn a_race_that_never_ends_is_still_safe() {
    let model = broken_watches(Rule::Recipe(Mutation::RaceUnended));
    let checker = breadth_first(
        model.checker().finish_when(HasDiscoveries::All),
        "etcd handover model (RaceUnended, Session leases, watches break, 12 revisions)",
    );
    checker.assert_no_discovery(ONE_AT_A_TIME);
    checker.assert_no_discovery(IN_ORDER);
}

/// A leader's step-down when its key is gone is not a safety rule (the
/// safety page's second table): while its lease lives, its tenure marker
/// lives with it, and every successor waits for that marker or for the
/// lease; so a stint that leads on without its key (`KeyLossIgnored`)
/// breaks neither property, any key deleted by hand included. It leads on
/// only until its deadline, where it steps down: the rule is what makes a
/// key deleted by hand end a leadership at once.
#[test]
fn a_leader_that_leads_on_without_its_key_is_still_safe() {
    for leases in [Leases::Own, Leases::Session] {
        let checker = check(
            Rule::Recipe(Mutation::KeyLossIgnored),
            leases,
            HandDeletes::Any,
        );
        checker.assert_no_discovery(ONE_AT_A_TIME);
        checker.assert_no_discovery(IN_ORDER);
    }
}

#[test]
fn one_leader_at_a_time_in_order_with_own_leases() {
    check(Rule::Production, Leases::Own, HandDeletes::None).assert_properties();
}

/// The worlds of own leases, and of a read from any member, a revision
/// deeper than CI checks them, by hand (the book's safety table gives
/// the figures): `cargo test --release --lib etcd::model::handover --
/// --ignored`.
#[test]
#[ignore]
fn deeper_one_leader_at_a_time_in_order() {
    let own_leases = Election {
        revisions: 11,
        ..election(
            Rule::Production,
            Leases::Own,
            HandDeletes::None,
            Markers::Writable,
        )
    };
    check_model(own_leases).assert_properties();
    let any_member = Election {
        revisions: 12,
        ..election(
            Rule::AnyMember,
            Leases::Session,
            HandDeletes::None,
            Markers::Writable,
        )
    };
    let checker = check_model(any_member);
    checker.assert_no_discovery(ONE_AT_A_TIME);
    checker.assert_no_discovery(IN_ORDER);
}

#[test]
fn one_leader_at_a_time_in_order_on_a_sessions_lease() {
    check(Rule::Production, Leases::Session, HandDeletes::None).assert_properties();
}

/// The delete that found the need for tenure markers: an operator's
/// delete of the working leader's key, which a newcomer never waited on.
#[test]
fn one_leader_at_a_time_in_order_when_any_key_is_deleted_by_hand() {
    for leases in [Leases::Own, Leases::Session] {
        let checker = check(Rule::Production, leases, HandDeletes::Any);
        checker.assert_no_discovery(ONE_AT_A_TIME);
        checker.assert_no_discovery(IN_ORDER);
    }
}

/// Whether the member that served the woken candidate's read had applied
/// the deletion does not matter for safety: a member behind it still
/// holds the predecessor's key (or not yet ours), so it never says the
/// way is clear. The check saves a needless queueing again.
#[test]
fn a_read_from_a_member_behind_the_deletion_is_safe() {
    let checker = check(Rule::AnyMember, Leases::Session, HandDeletes::None);
    checker.assert_no_discovery(ONE_AT_A_TIME);
    checker.assert_no_discovery(IN_ORDER);
}

/// The recipe's wait for the lease of an elect predecessor whose key went
/// without a release is not what keeps two leaders apart where tenure
/// markers are written: the claim then waits until the predecessor's
/// marker is gone, and it goes only once that work has stopped (or with
/// the lease). Without the lease wait, no state breaks either property,
/// any key deleted by hand included. It is the guard where markers cannot
/// be written (a role limited to the election's prefix, `Claim::Unwritable`),
/// which is `Mutation::NoTenure`'s world, caught in `each_rule_has_teeth`.
#[test]
fn the_lease_wait_is_covered_by_the_tenure_claim() {
    let checker = check(
        Rule::Recipe(Mutation::NoLeaseWait),
        Leases::Own,
        HandDeletes::Any,
    );
    checker.assert_no_discovery(ONE_AT_A_TIME);
    checker.assert_no_discovery(IN_ORDER);
}

/// The least-privilege role (readwrite on `<election>/` only): no marker
/// can be written, so a claim reads our key back instead, and a release
/// is refused whole (the key goes with the lease, once the work has
/// stopped). One leader at a time, in order, with or without a key deleted
/// by hand that is not a working leader's, and the read back is reached.
///
/// Every world's safety is checked before any world's reach: a rule
/// removed shows as the counterexample it is, not as a world that no
/// longer reads back.
#[test]
fn one_leader_at_a_time_in_order_where_markers_cannot_be_written() {
    let worlds = [HandDeletes::None, HandDeletes::NotAWorkingLeaders].map(|hand_deletes| {
        let checker = check_with(
            Rule::Production,
            Leases::Own,
            hand_deletes,
            Markers::Unwritable,
        );
        (hand_deletes, checker)
    });
    for (_, checker) in &worlds {
        checker.assert_no_discovery(ONE_AT_A_TIME);
        checker.assert_no_discovery(IN_ORDER);
    }
    for (hand_deletes, checker) in &worlds {
        assert!(
            checker.discovery(READ_BACK).is_some(),
            "no candidate reads its key back ({hand_deletes:?})"
        );
    }
}

/// The world the touch's guard needs: a session's lease, a waiting
/// candidate's key deleted by hand and made again under its old name
/// behind another key before the leader's release, nine revisions. CI
/// checks that world to 8 (a debug build would take minutes at 10), so
/// this by-hand run is the only one that catches the guard's removal
/// (`TouchUnguarded`), and it first checks the production rules as deep
/// (the book's safety page gives the figures): `cargo test --release --lib
/// etcd::model::handover -- --ignored`.
#[test]
#[ignore]
fn deeper_on_a_sessions_lease_with_hand_deletes_the_touch_is_guarded() {
    let world = |rule| Election {
        revisions: 10,
        ..election(
            rule,
            Leases::Session,
            HandDeletes::NotALeaders,
            Markers::Writable,
        )
    };
    let checker = check_model(world(Rule::Production));
    checker.assert_no_discovery(ONE_AT_A_TIME);
    checker.assert_no_discovery(IN_ORDER);
    let rule = Rule::Recipe(Mutation::TouchUnguarded);
    let path = check_model(world(rule))
        .discovery(IN_ORDER)
        .expect("an unguarded touch must be caught");
    eprintln!(
        "{rule:?}: caught in {} steps: {:?}",
        path.clone().into_actions().len(),
        path.into_actions()
    );
}

/// Where markers cannot be written, the read back is the claim's guard:
/// leading without it on a key deleted by hand while we waited lets a
/// younger candidate, which finds no older key, lead beside us.
#[test]
fn without_markers_leading_without_the_read_back_is_caught() {
    let checker = check_with(
        Rule::Recipe(Mutation::NoReadBack),
        Leases::Own,
        HandDeletes::NotAWorkingLeaders,
        Markers::Unwritable,
    );
    let path = checker
        .discovery(ONE_AT_A_TIME)
        .expect("leading without the read back must be caught");
    eprintln!(
        "NoReadBack: \"{ONE_AT_A_TIME}\" broken in {} steps: {:?}",
        path.clone().into_actions().len(),
        path.into_actions()
    );
}

/// What the least-privilege role gives up, as the book's safety page
/// says: with a working leader's key deleted by hand, a newcomer finds no
/// marker to wait for and leads beside it (the fencing token is then what
/// is left).
#[test]
fn without_markers_a_working_leaders_key_deleted_by_hand_lets_another_lead_beside_it() {
    let checker = check_with(
        Rule::Production,
        Leases::Own,
        HandDeletes::Any,
        Markers::Unwritable,
    );
    let path = checker
        .discovery(ONE_AT_A_TIME)
        .expect("the role's known gap must show");
    eprintln!(
        "without markers, a key deleted by hand: \"{ONE_AT_A_TIME}\" broken in {} steps: {:?}",
        path.clone().into_actions().len(),
        path.into_actions()
    );
}

#[test]
fn each_rule_has_teeth() {
    for (rule, leases, hand_deletes, property) in [
        (
            Rule::Recipe(Mutation::NoTenure),
            Leases::Own,
            HandDeletes::Any,
            ONE_AT_A_TIME,
        ),
        (
            Rule::Recipe(Mutation::ReleaseBeforeStop),
            Leases::Own,
            HandDeletes::None,
            ONE_AT_A_TIME,
        ),
        (
            Rule::Recipe(Mutation::NextAnyYounger),
            Leases::Own,
            HandDeletes::None,
            IN_ORDER,
        ),
        (
            Rule::Recipe(Mutation::LeadOnDeletion),
            Leases::Own,
            HandDeletes::None,
            IN_ORDER,
        ),
        // The lease may expire right after the deadline a leader ignores.
        (
            Rule::Recipe(Mutation::LeadPastDeadline),
            Leases::Own,
            HandDeletes::None,
            ONE_AT_A_TIME,
        ),
    ] {
        let checker = check(rule, leases, hand_deletes);
        let path = checker
            .discovery(property)
            .unwrap_or_else(|| panic!("{rule:?} must be caught"));
        eprintln!(
            "{rule:?}: caught in {} steps: {:?}",
            path.clone().into_actions().len(),
            path.into_actions()
        );
    }
}

/// The stint's wait until the target is its next in line is not a
/// safety rule: the record's revision deletes the keys between leader
/// and target, so the touch's own guard is all the handover's argument
/// needs; the wait only lets the leader's watch catch up, so that the
/// touch lands instead of falling back to the target's own read. Run by
/// hand (3,251,014 states, 34 s): nothing found. The safety page's
/// second table.
#[test]
#[ignore = "by hand: the rule off changes no safety property (34 s)"]
fn giving_way_before_the_target_is_next_breaks_nothing() {
    let checker = check_switchovers(Rule::Recipe(Mutation::GiveWayUnchecked), 9);
    checker.assert_no_discovery(ONE_AT_A_TIME);
    checker.assert_no_discovery(IN_ORDER);
    checker.assert_no_discovery(NO_STALE_SWITCHOVER);
}
