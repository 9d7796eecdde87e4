//! Health gating, every interleaving up to a bound, under stateright: the
//! production [`Gate`] turns each candidate's check results into its
//! health, the production [`Failback`] decides the leader's hand-overs,
//! and the production [`steps_aside`] decides each turn.
//!
//! The world is a line of three candidates of equal priority; the first
//! leads. Time moves in ticks; in each tick every present candidate's
//! check may pass or fail (or not have run yet), as the environment
//! pleases, so checks flap as fast as they can. Candidates leave (the
//! next in line takes its turn: one that would step aside goes to the
//! end) and come back at the end. At every tick the leader hands its
//! [`Failback`] its own standing and the line behind it, and hands over
//! to whom it names (the target leads next, the candidates between go to
//! the end, the old leader too).
//!
//! Invariants: someone leads whenever a candidate is present; an
//! unhealthy candidate never becomes leader while a healthy one is
//! present; an unhealthy leader is replaced within the tick while a
//! healthy candidate is present; a candidate whose check failed leads,
//! while another is healthy, only once its checks have passed for a
//! backoff (so a flapping check, which never passes that long, never
//! gets leadership back: the changes it causes are one hand-over away
//! from it per backoff at most); while nobody is healthy the leader
//! keeps leading. Teeth: the failback's rule 3 ([`FailbackRule::Urgent`]), the
//! turn's step aside, and the gate's backoff, each switched off, are
//! caught.

use std::time::Duration;

use stateright::{Checker, Model, Property};

use super::gate::Gate;
use crate::clock::BootInstant;
use crate::model_check::{assert_caught, breadth_first, finish};
use crate::steer::{Failback, FailbackRule, Priority, Standing, steps_aside};

const N: usize = 3;
const TICK_MS: u64 = 100;
const TICKS: u8 = 7;
/// The gate's backoff, in ticks (also the failback delay: the CLI gives
/// one for both).
const BACKOFF_TICKS: u8 = 2;
const LEAVES: u8 = 1;

fn at(tick: u8) -> BootInstant {
    BootInstant::from_nanos(tick as u64 * TICK_MS * 1_000_000)
}

fn backoff() -> Duration {
    Duration::from_millis(BACKOFF_TICKS as u64 * TICK_MS)
}

/// A rule of the health gating, switched off to show the check catches
/// what it prevents.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Off {
    /// The failback's rule 3: an unhealthy leader waits like any other.
    Urgent,
    /// The turn's rule: an unhealthy candidate whose turn comes leads.
    Turn,
    /// The gate's rule 3: a candidate is healthy again at its first pass.
    Backoff,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct World {
    tick: u8,
    /// Present candidates, in line order: the first leads.
    line: Vec<usize>,
    gates: [Gate; N],
    /// Whose check has run this tick.
    checked: [bool; N],
    /// The leader's failback, made when it began to lead.
    failback: Option<Failback>,
    /// Each candidate's check history in this candidacy: whether it
    /// ever failed, and the tick its current run of passes began.
    failed: [bool; N],
    passing_from: [Option<u8>; N],
    leaves: u8,
    /// Broken invariants and witnesses, as seen.
    unhealthy_took_over: bool,
    unhealthy_stayed: bool,
    back_too_soon: bool,
    moved_with_none_healthy: bool,
    health_handovers: u8,
}

struct Health {
    off: Option<Off>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Action {
    Tick,
    Check(usize, bool),
    Leave(usize),
    Join(usize),
}

fn standing(w: &World, c: usize) -> Standing {
    Standing {
        priority: Priority::DEFAULT,
        healthy: w.gates[c].healthy(),
    }
}

fn anyone_healthy(w: &World, except: Option<usize>) -> bool {
    w.line
        .iter()
        .any(|&c| Some(c) != except && w.gates[c].healthy())
}

impl Health {
    fn gate(&self) -> Gate {
        match self.off {
            Some(Off::Backoff) => Gate::new(1, Duration::ZERO),
            _ => Gate::new(1, backoff()),
        }
    }

    /// `w.line[0]` begins to lead: checked against the invariants, with a
    /// fresh failback.
    fn lead(&self, w: &mut World) {
        w.failback = w.line.first().map(|&l| {
            let rule = match self.off {
                Some(Off::Urgent) => Some(FailbackRule::Urgent),
                _ => None,
            };
            Failback::new(standing(w, l), backoff()).without(rule)
        });
        if let Some(&leader) = w.line.first() {
            let others_healthy = anyone_healthy(w, Some(leader));
            w.unhealthy_took_over |= !w.gates[leader].healthy() && others_healthy;
            let recovered = w.passing_from[leader].is_some_and(|p| w.tick >= p + BACKOFF_TICKS);
            w.back_too_soon |= w.failed[leader] && !recovered && others_healthy;
        }
    }

    /// The leader is gone: turns come in line order; one that would step
    /// aside goes to the end.
    fn failover(&self, w: &mut World) {
        for _ in 0..w.line.len() {
            let first = w.line[0];
            let behind: Vec<Standing> = w.line[1..].iter().map(|&c| standing(w, c)).collect();
            let aside = self.off != Some(Off::Turn) && steps_aside(standing(w, first), behind);
            if !aside {
                break;
            }
            w.line.rotate_left(1);
        }
        self.lead(w);
    }

    fn hand_over(&self, w: &mut World, target: usize) {
        let at = w.line.iter().position(|&c| c == target).expect("present");
        let mut line = vec![target];
        line.extend(w.line[at + 1..].iter());
        line.extend(w.line[..at].iter());
        w.line = line;
        self.lead(w);
    }
}

impl Model for Health {
    type State = World;
    type Action = Action;

    fn init_states(&self) -> Vec<World> {
        // Every candidate's first check passed before it joined.
        let mut gates = [self.gate(), self.gate(), self.gate()];
        for gate in &mut gates {
            gate.observe(at(0), true);
        }
        let mut w = World {
            tick: 0,
            line: (0..N).collect(),
            gates,
            checked: [false; N],
            failback: None,
            failed: [false; N],
            passing_from: [Some(0); N],
            leaves: 0,
            unhealthy_took_over: false,
            unhealthy_stayed: false,
            back_too_soon: false,
            moved_with_none_healthy: false,
            health_handovers: 0,
        };
        self.lead(&mut w);
        vec![w]
    }

    fn actions(&self, w: &World, actions: &mut Vec<Action>) {
        if w.tick < TICKS {
            actions.push(Action::Tick);
        }
        for c in 0..N {
            let present = w.line.contains(&c);
            if present && !w.checked[c] {
                actions.push(Action::Check(c, true));
                actions.push(Action::Check(c, false));
            }
            if present && w.leaves < LEAVES {
                actions.push(Action::Leave(c));
            }
            if !present {
                actions.push(Action::Join(c));
            }
        }
    }

    fn next_state(&self, last: &World, action: Action) -> Option<World> {
        let mut w = last.clone();
        match action {
            Action::Check(c, passed) => {
                w.checked[c] = true;
                w.gates[c].observe(at(w.tick), passed);
                w.failed[c] |= !passed;
                w.passing_from[c] = match passed {
                    true => w.passing_from[c].or(Some(w.tick)),
                    false => None,
                };
            }
            Action::Tick => {
                w.tick += 1;
                w.checked = [false; N];
                let now = at(w.tick);
                let leader = *w.line.first()?;
                let behind: Vec<(String, Standing)> = w.line[1..]
                    .iter()
                    .map(|&c| (c.to_string(), standing(&w, c)))
                    .collect();
                let own = standing(&w, leader);
                let none_healthy = !anyone_healthy(&w, None);
                let failback = w.failback.as_mut()?;
                failback.set_own(own);
                failback.saw(now, &behind);
                if let Some(target) = failback.decide(now).map(str::to_owned) {
                    let target = target.parse::<usize>().expect("an index");
                    w.moved_with_none_healthy |= none_healthy;
                    if !own.healthy {
                        w.health_handovers += 1;
                    }
                    self.hand_over(&mut w, target);
                }
                let leader = *w.line.first()?;
                w.unhealthy_stayed |= !w.gates[leader].healthy() && anyone_healthy(&w, None);
            }
            Action::Leave(c) => {
                let led = w.line.first() == Some(&c);
                w.line.retain(|&x| x != c);
                w.leaves += 1;
                w.gates[c] = self.gate();
                if led && !w.line.is_empty() {
                    self.failover(&mut w);
                } else if w.line.is_empty() {
                    w.failback = None;
                }
            }
            Action::Join(c) => {
                // Its first check passed before it joined.
                w.gates[c] = self.gate();
                w.gates[c].observe(at(w.tick), true);
                w.checked[c] = true;
                (w.failed[c], w.passing_from[c]) = (false, Some(w.tick));
                w.line.push(c);
                if w.line.len() == 1 {
                    self.lead(&mut w);
                }
            }
        }
        Some(w)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(NO_STALL, |_, w: &World| {
                w.line.is_empty() || w.failback.is_some()
            }),
            Property::always(PASSED_OVER, |_, w: &World| !w.unhealthy_took_over),
            Property::always(REPLACED, |_, w: &World| !w.unhealthy_stayed),
            Property::always(BACKOFF, |_, w: &World| !w.back_too_soon),
            Property::always(NONE_HEALTHY_KEEPS, |_, w: &World| {
                !w.moved_with_none_healthy
            }),
            Property::sometimes(HANDS_OVER, |_, w: &World| w.health_handovers >= 2),
        ]
    }
}

const NO_STALL: &str = "someone leads whenever a candidate is present";
const PASSED_OVER: &str =
    "an unhealthy candidate never becomes leader while a healthy one is present";
const REPLACED: &str =
    "an unhealthy leader is replaced within a tick while a healthy one is present";
const BACKOFF: &str = "a candidate whose check failed leads, while another is healthy, only once its checks have passed for a backoff";
const NONE_HEALTHY_KEEPS: &str = "while nobody is healthy, the leader keeps leading";
const HANDS_OVER: &str = "unhealthy leaders hand over twice";

fn check(off: Option<Off>) -> impl Checker<Health> {
    let finish = finish(&off);
    let label = format!("health model (rule off: {off:?}, {TICKS} ticks)");
    breadth_first(Health { off }.checker().finish_when(finish), &label)
}

#[test]
fn unhealthy_candidates_are_passed_over_replaced_and_kept_out_for_a_backoff() {
    let checker = check(None);
    for property in [NO_STALL, PASSED_OVER, REPLACED, BACKOFF, NONE_HEALTHY_KEEPS] {
        checker.assert_no_discovery(property);
    }
    assert!(checker.discovery(HANDS_OVER).is_some(), "never handed over");
}

#[test]
fn each_health_rule_switched_off_is_caught() {
    for (rule, broken) in [
        (Off::Urgent, REPLACED),
        (Off::Turn, PASSED_OVER),
        (Off::Backoff, BACKOFF),
    ] {
        assert_caught(&check(Some(rule)), rule, broken);
    }
}
