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
//! client's clock, plus the TTL, minus the margin. The proof a ping needs
//! against servers before etcd's leadership check (etcd#15247) is not
//! modelled here: its unit tests and the fault suite's stalled member
//! cover it. The server extends the lease when the ping arrives, by the TTL on its own
//! clock; a change of etcd's leader gives every lease a whole TTL again,
//! from the new leader's start; once expired, the lease is gone and a
//! successor may lead. Clocks run at their own rates (the client's and the
//! server's up to 1% from true, 2% apart); pings and answers take any time
//! within the bound, or are lost.
//!
//! Invariant, in every state: the client's deadline, in global time, is
//! never after the server's expiry. Teeth, each a rule of the recipe
//! switched off: counting from the answer's arrival instead of the ping's
//! send, or crediting a late answer to the ping that is out, is caught.

use std::time::Duration;

use stateright::{Checker, Model, Property};

use crate::backend::model_check::breadth_first;

use super::recipe::{Mutation, Renewal, RenewalInput, RenewalNext, RenewalRequest};
use crate::clock::BootInstant;
use crate::leadership::deadline_after;

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
    /// The ping on its way to the server.
    request: Option<u64>,
    /// An answer on its way: the ping it answers.
    answer: Option<u64>,
    /// Pings given up.
    given_up: u32,
    /// The client's deadline, in global ns.
    deadline: u64,
    /// The server's expiry, in global ns.
    expiry: u64,
    leader_changes: u8,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Action {
    ServerGets,
    ClientGets,
    LoseRequest,
    LoseAnswer,
    GiveUp,
    LeaderChange,
    Tick,
}

#[derive(Clone)]
struct Lease {
    horizon: u32,
    /// A rule of the recipe switched off, or none.
    mutation: Option<Mutation>,
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
        loop {
            match self.renewal.poll(self.client_now()) {
                RenewalNext::Renewed { deadline } => {
                    let deadline = self.client_global(deadline.as_nanos());
                    self.deadline = self.deadline.max(deadline);
                }
                RenewalNext::Send {
                    request: RenewalRequest::KeepAlive { ping },
                    ..
                } => {
                    self.out = true;
                    self.request = Some(ping);
                    return;
                }
                RenewalNext::Send { request, .. } => unreachable!("unproven: {request:?}"),
                RenewalNext::Wait(_) | RenewalNext::LeaseGone => return,
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
                let mut w = World {
                    now: 0,
                    rates,
                    renewal: Renewal::new(TTL, BootInstant::from_nanos(0), false)
                        .mutated(self.mutation),
                    out: false,
                    request: None,
                    answer: None,
                    given_up: 0,
                    deadline: 0,
                    expiry: 0,
                    leader_changes: 0,
                };
                // The grant: sent at 0, granted on arrival at 0.
                w.expiry = w.server_ttl_from_now();
                let local = deadline_after(BootInstant::from_nanos(0), TTL);
                w.deadline = w.client_global(local.as_nanos());
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
        if w.now < self.horizon {
            actions.push(Action::Tick);
        }
    }

    fn next_state(&self, last: &World, action: Action) -> Option<World> {
        let mut w = last.clone();
        let expired = step_ns(w.now) >= w.expiry;
        match action {
            Action::ServerGets => {
                let ping = w.request.take()?;
                // An expired lease is gone: the keepalive says so.
                if !expired {
                    w.expiry = w.expiry.max(w.server_ttl_from_now());
                    w.answer = Some(ping);
                }
            }
            Action::ClientGets => {
                let ping = w.answer.take()?;
                let now = w.client_now();
                w.renewal.input(now, RenewalInput::KeptAlive { ping });
                w.out = w.renewal.awaits_answer();
                w.drive();
            }
            Action::LoseRequest => w.request = None,
            Action::LoseAnswer => w.answer = None,
            Action::GiveUp => {
                w.renewal.gave_up(w.client_now());
                w.out = false;
                w.given_up += 1;
                w.drive();
            }
            Action::LeaderChange => {
                if !expired {
                    w.expiry = w.expiry.max(w.server_ttl_from_now());
                }
                w.leader_changes += 1;
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
            Property::always("the deadline is never after the expiry", |_, w: &World| {
                w.deadline <= w.expiry
            }),
            Property::sometimes("the lease is renewed past the grant", |_, w: &World| {
                w.deadline > step_ns(12)
            }),
        ]
    }
}

fn check(mutation: Option<Mutation>) -> impl Checker<Lease> {
    let model = Lease {
        horizon: 28,
        mutation,
    };
    breadth_first(
        model.checker(),
        &format!("etcd deadline model ({mutation:?})"),
    )
}

#[test]
fn the_etcd_deadline_never_passes_the_servers_expiry() {
    check(None).assert_properties();
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
        let checker = check(Some(mutation));
        let path = checker
            .discovery("the deadline is never after the expiry")
            .unwrap_or_else(|| panic!("{what} must be caught"));
        eprintln!(
            "{what}: caught in {} steps: {:?}",
            path.clone().into_actions().len(),
            path.into_actions()
        );
    }
}
