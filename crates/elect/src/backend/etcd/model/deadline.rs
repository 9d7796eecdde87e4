//! The etcd backend's local deadline against the server's lease clock,
//! every interleaving up to a bound, under stateright.
//!
//! The client is the production renewal, `recipe::Renewal`, driven
//! unchanged: it pings when it says, one ping at a time, and a ping may be
//! given up at any moment (the driver gives up at TTL/6); every answer
//! that arrives is handed to it, late ones included (the driver drops a
//! given-up ping's stream, so those never arrive at all: the recipe's own
//! check is what is tested). A counted answer moves the local deadline to
//! `leadership::deadline_after(sent, ttl)`: the ping's send time on the
//! client's clock, plus the TTL, minus the margin. The server extends the
//! lease when the ping arrives, by the TTL on its own clock; a change of
//! etcd's leader gives every lease a whole TTL again, from the new
//! leader's start; once expired, the lease is gone and a successor may
//! lead. Clocks run at their own rates (the client's and the server's up
//! to 1% from true, 2% apart); requests and answers take any time within
//! the bound, or are lost.
//!
//! Two kinds of servers:
//! - **with the leadership check** (etcd 3.4.31, 3.5.13 and later): only
//!   the leader that holds its quorum acknowledges a keepalive;
//! - **without it** (etcd#15247): the member we talk to may be the leader
//!   of the old term, cut off from its quorum and not yet aware of its
//!   successor. Until it hears of the new term it acknowledges keepalives
//!   from its own lessor (the lease that counts, the new leader's, is not
//!   touched), answers a read of its term from its own state with the old
//!   term, and cannot answer a linearizable read; it may hear of the new
//!   term at any moment. The recipe proves each ping there (`proves`):
//!   the term read before it and the one read linearizably after it must
//!   be the same.
//!
//! The leader's stint (`recipe::Stint`), driven unchanged, is handed
//! every deadline the renewal proves and polled at each step of the
//! client's clock.
//!
//! A candidate may start as a follower (`follows`): its renewal pings at
//! the follower's cadence, without the proof, until at any moment its
//! turn comes; then, as the driver does, the follower's renewal is
//! dropped with whatever it had in flight, a leader's takes over with its
//! first ping at once, and the stint starts on the latest deadline
//! proven so far, however old. A follower's acknowledgement through a
//! deposed member credited as a deadline (`FollowerAckCredited`) is
//! caught.
//!
//! Invariants, in every state: the client's deadline, in global time, is
//! never after the server's expiry, and the stint does not lead once the
//! lease may have expired. Teeth, each a rule of the recipes
//! switched off: a stint that leads on past its deadline, counting from
//! the answer's arrival instead of the ping's
//! send, or crediting a late answer to the ping that is out, is caught;
//! without the leadership check, renewing without the term proof, or
//! reading the terms without comparing them, is caught.

use std::time::Duration;

use stateright::{Checker, Model, Property};

use crate::model_check::breadth_first;

use crate::backend::etcd::recipe::{
    Grant, Mutation, Renewal, RenewalInput, RenewalNext, RenewalRequest, Stint, StintInput,
    StintNext,
};
use crate::backend::recipe::Recipe;
use crate::clock::BootInstant;

/// The TTL etcd granted.
const TTL: Duration = Duration::from_secs(3);
/// The model's time step: pings every TTL/3, given up after TTL/6 (as the
/// client does); messages take whole steps.
const STEP: Duration = Duration::from_millis(250);

/// (client rate, server rate) against global time.
const RATES: [(f64, f64); 4] = [(1.01, 0.99), (0.99, 1.01), (1.0, 1.0), (1.01, 1.01)];

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct World {
    /// Global time, in steps.
    now: u32,
    rates: usize,
    /// The client: the production recipe.
    renewal: Renewal,
    /// Whether a ping is out (sent, neither answered nor given up), as
    /// the recipe says.
    out: bool,
    /// The request on its way to the member.
    request: Option<RenewalRequest>,
    /// An answer on its way back.
    answer: Option<RenewalInput>,
    /// Pings given up.
    given_up: u32,
    /// The client's deadline, in global ns.
    deadline: u64,
    /// The leader's stint, the production recipe, fed the renewal's
    /// deadlines (none while the candidate follows); and whether it
    /// leads, as it last said.
    stint: Option<Stint>,
    leading: bool,
    /// The latest deadline the renewal proved, on the client's clock.
    proven: BootInstant,
    /// The candidate renews as a follower; its turn has not come.
    following: bool,
    /// The server's expiry, in global ns.
    expiry: u64,
    leader_changes: u8,
    /// etcd's Raft term, and the term the member we talk to knows.
    term: u64,
    member_term: u64,
    /// The member we talk to led the old term and has not heard of the
    /// new one (servers without the leadership check only).
    member_deposed: bool,
    /// A deposed member acknowledged a keepalive (the world is reached).
    deposed_acked: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Action {
    ServerGets,
    ClientGets,
    LoseRequest,
    LoseAnswer,
    GiveUp,
    LeaderChange,
    /// The deposed member hears of the new term.
    MemberHearsNewTerm,
    /// A follower's turn comes: it renews as a leader and leads.
    TurnComes,
    Tick,
}

/// Which servers the client renews against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Servers {
    /// Only the leader that holds its quorum acknowledges a keepalive; the
    /// recipe does not prove its pings.
    Checked,
    /// A deposed leader may acknowledge keepalives (etcd#15247); `proves`:
    /// the recipe proves each ping by the member's term, as elect does
    /// against these servers.
    Unchecked { proves: bool },
}

#[derive(Clone)]
struct Lease {
    horizon: u32,
    /// A rule of the recipe switched off, or none.
    mutation: Option<Mutation>,
    servers: Servers,
    /// The candidate starts as a follower.
    follows: bool,
}

fn step_ns(steps: u32) -> u64 {
    steps as u64 * STEP.as_nanos() as u64
}

impl World {
    fn client_clock(&self) -> u64 {
        (step_ns(self.now) as f64 * RATES[self.rates].0) as u64
    }

    fn client_now(&self) -> BootInstant {
        BootInstant::from_nanos(self.client_clock())
    }

    /// Takes what the recipe has to say now: a deadline it proved moves
    /// ours (the latest of all, as `keep_alive` keeps it); a ping it
    /// sends is on its way.
    fn drive(&mut self) {
        let now = self.client_now();
        loop {
            match self.renewal.poll(now) {
                RenewalNext::Renewed { deadline: local } => {
                    let deadline = self.client_global(local.as_nanos());
                    self.deadline = self.deadline.max(deadline);
                    self.proven = self.proven.max(local);
                    if let Some(stint) = &mut self.stint {
                        stint.input(now, StintInput::Renewed(local));
                    }
                }
                // Kept, proving nothing: no deadline moves.
                RenewalNext::Kept { .. } => {}
                RenewalNext::Send { request, .. } => {
                    self.out = true;
                    self.request = Some(request);
                    break;
                }
                RenewalNext::Wait(_) => break,
                RenewalNext::LeaseGone => {
                    if let Some(stint) = &mut self.stint {
                        stint.input(now, StintInput::LeaseEnded);
                    }
                    break;
                }
            }
        }
        self.lead();
    }

    /// Does what the stint says at the client's now: whether we lead.
    fn lead(&mut self) {
        let now = self.client_now();
        let Some(stint) = &mut self.stint else {
            return;
        };
        loop {
            match stint.poll(now) {
                StintNext::Lead { .. } => self.leading = true,
                StintNext::Demoted { .. } => self.leading = false,
                StintNext::Ended(_) => {
                    self.leading = false;
                    return;
                }
                StintNext::Wait(_) => return,
                StintNext::Send(request) => unreachable!("{request:?}: our key is never lost here"),
            }
        }
    }

    /// The global instant the client's clock reads `local`.
    fn client_global(&self, local: u64) -> u64 {
        (local as f64 / RATES[self.rates].0).ceil() as u64
    }

    /// The global instant a TTL counted on the server's clock from now
    /// ends.
    fn server_ttl_from_now(&self) -> u64 {
        step_ns(self.now) + (TTL.as_nanos() as f64 / RATES[self.rates].1).floor() as u64
    }
}

impl Model for Lease {
    type State = World;
    type Action = Action;

    fn init_states(&self) -> Vec<World> {
        (0..RATES.len())
            .map(|rates| {
                // The grant: sent at 0, and (the harshest case) granted on
                // arrival at 0; its deadline is the driver's, from the
                // production `Grant`.
                let grant = Grant::answered(BootInstant::from_nanos(0), TTL.as_secs() as i64);
                let mut renewal =
                    Renewal::new(grant.ttl, BootInstant::from_nanos(0), self.proves())
                        .mutated(self.mutation);
                if self.follows {
                    renewal = renewal.following();
                }
                let stint = Stint::new(1, grant.deadline).mutated(self.mutation);
                let mut w = World {
                    now: 0,
                    rates,
                    renewal,
                    out: false,
                    request: None,
                    answer: None,
                    given_up: 0,
                    deadline: 0,
                    stint: (!self.follows).then_some(stint),
                    leading: false,
                    proven: grant.deadline,
                    following: self.follows,
                    expiry: 0,
                    leader_changes: 0,
                    term: 1,
                    member_term: 1,
                    member_deposed: false,
                    deposed_acked: false,
                };
                w.expiry = w.server_ttl_from_now();
                w.deadline = w.client_global(grant.deadline.as_nanos());
                w.drive();
                w
            })
            .collect()
    }

    fn actions(&self, w: &World, actions: &mut Vec<Action>) {
        if w.request.is_some() {
            actions.push(Action::ServerGets);
            actions.push(Action::LoseRequest);
        }
        if w.answer.is_some() {
            actions.push(Action::ClientGets);
            actions.push(Action::LoseAnswer);
        }
        if w.out {
            actions.push(Action::GiveUp);
        }
        if w.leader_changes < 1 {
            actions.push(Action::LeaderChange);
        }
        if w.member_deposed {
            actions.push(Action::MemberHearsNewTerm);
        }
        if w.following {
            actions.push(Action::TurnComes);
        }
        if w.now < self.horizon {
            actions.push(Action::Tick);
        }
    }

    fn next_state(&self, last: &World, action: Action) -> Option<World> {
        let mut w = last.clone();
        let expired = step_ns(w.now) >= w.expiry;
        match action {
            Action::ServerGets => {
                let request = w.request.take()?;
                w.answer = w.member_answers(request, expired);
            }
            Action::ClientGets => {
                let answer = w.answer.take()?;
                let now = w.client_now();
                w.renewal.input(now, answer);
                w.out = w.renewal.awaits_answer();
                w.drive();
            }
            Action::LoseRequest => w.request = None,
            Action::LoseAnswer => w.answer = None,
            Action::GiveUp => {
                let now = w.client_now();
                w.renewal.input(now, RenewalInput::GaveUp);
                w.out = false;
                w.given_up += 1;
                w.drive();
            }
            Action::LeaderChange => {
                if !expired {
                    w.expiry = w.expiry.max(w.server_ttl_from_now());
                }
                w.leader_changes += 1;
                w.term += 1;
                // Without the leadership check, the member we talk to is
                // the worst it can be: the deposed leader. (It may hear of
                // the new term at once, which is the other case.)
                match self.servers {
                    Servers::Checked => w.member_term = w.term,
                    Servers::Unchecked { .. } => w.member_deposed = true,
                }
            }
            Action::MemberHearsNewTerm => {
                w.member_deposed = false;
                w.member_term = w.term;
            }
            Action::TurnComes => {
                // The driver drops the follower's renewal, its stream
                // and all: nothing it sent is answered any more.
                let now = w.client_now();
                w.following = false;
                w.request = None;
                w.answer = None;
                w.out = false;
                w.renewal = Renewal::first_ping_at(TTL, now, self.proves()).mutated(self.mutation);
                w.stint = Some(Stint::new(1, w.proven).mutated(self.mutation));
                w.drive();
            }
            Action::Tick => {
                w.now += 1;
                w.drive();
            }
        }
        Some(w)
    }

    /// Pings given up: two are enough for a late answer to meet a later
    /// ping.
    fn within_boundary(&self, w: &World) -> bool {
        w.given_up <= 2
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(NEVER_PAST_EXPIRY, |_, w: &World| w.deadline <= w.expiry),
            Property::always(NOBODY_LEADS_PAST_EXPIRY, |_, w: &World| {
                !w.leading || step_ns(w.now) < w.expiry
            }),
            Property::sometimes("the lease is renewed past the grant", |_, w: &World| {
                w.deadline > step_ns(12)
            }),
            Property::sometimes("a candidate leads", |_, w: &World| w.leading),
            // Not vacuous: without the check, a deposed leader does
            // acknowledge a keepalive.
            Property::sometimes(
                "a deposed leader acknowledges a keepalive",
                |m: &Lease, w: &World| m.servers == Servers::Checked || w.deposed_acked,
            ),
        ]
    }
}

impl World {
    /// The member's answer to `request` (`None`: none comes), with what
    /// the request does to the lease that counts.
    fn member_answers(&mut self, request: RenewalRequest, expired: bool) -> Option<RenewalInput> {
        match request {
            RenewalRequest::KeepAlive { ping } if self.member_deposed => {
                // Its own lessor's acknowledgement: the new leader's
                // lease, the one that counts, is not touched.
                self.deposed_acked = true;
                Some(RenewalInput::KeptAlive { ping })
            }
            // An expired lease is gone: the keepalive says so.
            RenewalRequest::KeepAlive { .. } if expired => None,
            RenewalRequest::KeepAlive { ping } => {
                self.expiry = self.expiry.max(self.server_ttl_from_now());
                Some(RenewalInput::KeptAlive { ping })
            }
            // A linearizable read needs the quorum a deposed leader lost.
            RenewalRequest::ReadTerm {
                linearizable: true, ..
            } if self.member_deposed => None,
            RenewalRequest::ReadTerm { ping, .. } => Some(RenewalInput::Term {
                ping,
                term: self.member_term,
            }),
        }
    }
}

impl Lease {
    fn proves(&self) -> bool {
        matches!(self.servers, Servers::Unchecked { proves: true })
    }
}

const NEVER_PAST_EXPIRY: &str = "the deadline is never after the expiry";
const NOBODY_LEADS_PAST_EXPIRY: &str = "nobody leads once the lease may have expired";

/// The bounds CI checks: two pings given up, and 7 s of model time (2.3
/// TTL), or 5 s (1.7 TTL) where each ping is proven (three requests each,
/// and a member that may be deposed: ten times the states per second).
fn bounded(servers: Servers, mutation: Option<Mutation>) -> Lease {
    Lease {
        horizon: match servers {
            Servers::Checked => 28,
            Servers::Unchecked { .. } => 20,
        },
        mutation,
        servers,
        follows: false,
    }
}

/// The same, the candidate a follower until its turn comes, to 4 s of
/// model time (1.3 TTL: a turn at any step, then two of the leader's
/// pings): the turn's moment multiplies the states.
fn following(servers: Servers, mutation: Option<Mutation>) -> Lease {
    Lease {
        follows: true,
        horizon: 16,
        ..bounded(servers, mutation)
    }
}

fn check(servers: Servers, mutation: Option<Mutation>) -> impl Checker<Lease> {
    breadth_first(
        bounded(servers, mutation).checker(),
        &format!("etcd deadline model ({servers:?}, {mutation:?})"),
    )
}

#[test]
fn the_etcd_deadline_never_passes_the_servers_expiry() {
    check(Servers::Checked, None).assert_properties();
}

/// etcd#15247: the member we renew through may be a deposed leader that
/// acknowledges keepalives; the term proof keeps the deadline safe.
#[test]
fn the_term_proof_keeps_the_deadline_beside_a_deposed_leader() {
    check(Servers::Unchecked { proves: true }, None).assert_properties();
}

/// A follower renews without the proof; once its turn comes it leads
/// only on what a leader's renewal proved, beside a deposed leader too.
#[test]
fn a_follower_leads_only_on_a_deadline_it_proved() {
    for servers in [Servers::Checked, Servers::Unchecked { proves: true }] {
        breadth_first(
            following(servers, None).checker(),
            &format!("etcd deadline model, a follower's turn ({servers:?})"),
        )
        .assert_properties();
    }
}

/// Crediting a follower's unproven acknowledgement as a deadline is
/// caught beside a deposed leader.
#[test]
fn a_follower_crediting_its_unproven_pings_is_caught() {
    caught(
        following(
            Servers::Unchecked { proves: true },
            Some(Mutation::FollowerAckCredited),
        ),
        "a follower's unproven ping credited",
    );
}

/// The same to 7 s of model time, by hand (15.8 million states, 31 s):
/// `cargo test --lib etcd::model::deadline -- --ignored`.
#[test]
#[ignore]
fn deeper_the_term_proof_keeps_the_deadline_beside_a_deposed_leader() {
    let model = Lease {
        horizon: 28,
        ..bounded(Servers::Unchecked { proves: true }, None)
    };
    breadth_first(model.checker(), "etcd deadline model, deeper").assert_properties();
}

/// Against servers without the leadership check, renewing without the
/// term proof, or reading the terms without comparing them, is caught.
#[test]
fn renewing_beside_a_deposed_leader_without_the_term_proof_is_caught() {
    for (servers, mutation, what) in [
        (
            Servers::Unchecked { proves: false },
            None,
            "renewing without the term proof",
        ),
        (
            Servers::Unchecked { proves: true },
            Some(Mutation::TermUnchecked),
            "reading the terms without comparing them",
        ),
    ] {
        caught(bounded(servers, mutation), what);
    }
}

#[test]
fn counting_from_the_answer_or_crediting_a_late_answer_is_caught() {
    for (mutation, what) in [
        (Mutation::DeadlineFromAnswer, "counting from the answer"),
        (
            Mutation::LateAnswerCredited,
            "crediting a late answer to the next ping",
        ),
    ] {
        caught(bounded(Servers::Checked, Some(mutation)), what);
    }
}

/// A stint that leads on past its deadline is caught: the lease expires
/// while it leads.
#[test]
fn leading_past_the_deadline_is_caught() {
    caught_breaking(
        bounded(Servers::Checked, Some(Mutation::LeadPastDeadline)),
        "leading past the deadline",
        NOBODY_LEADS_PAST_EXPIRY,
    );
}

/// Checks `model` until the deadline's safety property breaks
/// (breadth-first, so on a short trace), and says in how many steps.
fn caught(model: Lease, what: &str) {
    caught_breaking(model, what, NEVER_PAST_EXPIRY);
}

fn caught_breaking(model: Lease, what: &str, property: &'static str) {
    let finish = stateright::HasDiscoveries::AnyOf([property].into());
    let checker = breadth_first(
        model.checker().finish_when(finish),
        &format!("etcd deadline model, {what}"),
    );
    let path = checker
        .discovery(property)
        .unwrap_or_else(|| panic!("{what} must be caught"));
    eprintln!(
        "{what}: caught ({property}) in {} steps: {:?}",
        path.clone().into_actions().len(),
        path.into_actions()
    );
}
