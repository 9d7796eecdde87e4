//! The etcd backend's local deadline against the server's lease clock,
//! every interleaving up to a bound, under stateright.
//!
//! The client renews its lease on one stream, one ping at a time, and a
//! ping unanswered in time drops the stream (a late answer must never be
//! credited to a later ping). An answer moves the local deadline to the
//! production rule, `leadership::deadline_after(sent, ttl)`: the ping's
//! send time on the client's clock, plus the TTL, minus the margin. The
//! server extends the lease when the ping arrives, by the TTL on its own
//! clock; a change of etcd's leader gives every lease a whole TTL again,
//! from the new leader's start; once expired, the lease is gone and a
//! successor may lead. Clocks run at their own rates (the client's and the
//! server's up to 1% from true, 2% apart); pings and answers take any time
//! within the bound, or are lost.
//!
//! Invariant, in every state: the client's deadline, in global time, is
//! never after the server's expiry. Teeth: counting from the answer's
//! arrival instead of the ping's send, or crediting a late answer to the
//! next ping, is caught.

use std::time::Duration;

use elect::BootInstant;
use elect::leadership::deadline_after;
use stateright::{Checker, Model, Property};

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
    /// Send time (the client's clock, ns) of the ping on the stream.
    outstanding: Option<u64>,
    /// The ping on its way, with the stream it was sent on.
    request: Option<(u64, u32)>,
    /// An answer on its way: the ping's send time and the stream.
    answer: Option<(u64, u32)>,
    /// The stream's generation: dropped streams' answers are discarded.
    stream: u32,
    /// The client's deadline, in global ns.
    deadline: u64,
    /// The server's expiry, in global ns.
    expiry: u64,
    leader_changes: u8,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Action {
    Ping,
    ServerGets,
    ClientGets,
    LoseRequest,
    LoseAnswer,
    GiveUp,
    LeaderChange,
    Tick,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Rule {
    /// The production rule.
    Production,
    /// Count from the answer's arrival.
    FromAnswer,
    /// Credit a late answer to whatever ping is outstanding.
    LateAnswerCredited,
}

#[derive(Clone)]
struct Lease {
    horizon: u32,
    rule: Rule,
}

fn step_ns(steps: u32) -> u64 {
    steps as u64 * STEP.as_nanos() as u64
}

impl World {
    fn client_clock(&self) -> u64 {
        (step_ns(self.now) as f64 * RATES[self.rates].0) as u64
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
                    outstanding: None,
                    request: None,
                    answer: None,
                    stream: 0,
                    deadline: 0,
                    expiry: 0,
                    leader_changes: 0,
                };
                // The grant: sent at 0, granted on arrival at 0.
                w.expiry = w.server_ttl_from_now();
                let local = deadline_after(BootInstant::from_nanos(0), TTL);
                w.deadline = w.client_global(local.as_nanos());
                w
            })
            .collect()
    }

    fn actions(&self, w: &World, actions: &mut Vec<Action>) {
        if w.outstanding.is_none() && w.request.is_none() {
            actions.push(Action::Ping);
        }
        if w.request.is_some() {
            actions.push(Action::ServerGets);
            actions.push(Action::LoseRequest);
        }
        if w.answer.is_some() {
            actions.push(Action::ClientGets);
            actions.push(Action::LoseAnswer);
        }
        if w.outstanding.is_some() {
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
            Action::Ping => {
                let sent = w.client_clock();
                w.outstanding = Some(sent);
                w.request = Some((sent, w.stream));
            }
            Action::ServerGets => {
                let (sent, stream) = w.request.take()?;
                // An expired lease is gone: the keepalive says so.
                if !expired {
                    w.expiry = w.expiry.max(w.server_ttl_from_now());
                    w.answer = Some((sent, stream));
                }
            }
            Action::ClientGets => {
                let (sent, stream) = w.answer.take()?;
                let credited = match self.rule {
                    Rule::LateAnswerCredited => w.outstanding,
                    _ if stream == w.stream && w.outstanding == Some(sent) => Some(sent),
                    _ => None,
                };
                if let Some(sent) = credited {
                    let from = match self.rule {
                        Rule::FromAnswer => w.client_clock(),
                        _ => sent,
                    };
                    let local = deadline_after(BootInstant::from_nanos(from), TTL);
                    w.deadline = w.deadline.max(w.client_global(local.as_nanos()));
                    w.outstanding = None;
                }
            }
            Action::LoseRequest => w.request = None,
            Action::LoseAnswer => w.answer = None,
            Action::GiveUp => {
                w.outstanding = None;
                w.stream += 1;
            }
            Action::LeaderChange => {
                if !expired {
                    w.expiry = w.expiry.max(w.server_ttl_from_now());
                }
                w.leader_changes += 1;
            }
            Action::Tick => w.now += 1,
        }
        Some(w)
    }

    /// Streams given up: two are enough for a late answer to meet a
    /// later ping.
    fn within_boundary(&self, w: &World) -> bool {
        w.stream <= 2
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

fn check(rule: Rule) -> impl Checker<Lease> {
    let started = std::time::Instant::now();
    let checker = Lease { horizon: 16, rule }
        .checker()
        .threads(2)
        .spawn_bfs()
        .join();
    eprintln!(
        "etcd deadline model: {} distinct states, depth {}, {:.1?}",
        checker.unique_state_count(),
        checker.max_depth(),
        started.elapsed()
    );
    checker
}

#[test]
fn the_etcd_deadline_never_passes_the_servers_expiry() {
    check(Rule::Production).assert_properties();
}

#[test]
fn counting_from_the_answer_or_crediting_a_late_answer_is_caught() {
    for (rule, what) in [
        (Rule::FromAnswer, "counting from the answer"),
        (
            Rule::LateAnswerCredited,
            "crediting a late answer to the next ping",
        ),
    ] {
        let checker = check(rule);
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
