//! Priorities, every interleaving up to a bound, under stateright: the
//! production [`Failback`] decides every handover the leader starts, and
//! the production [`Line::plan`] checks every operator's switchover.
//!
//! The world is a line of four candidates with fixed priorities (1, 5,
//! 3, 0: the second preferred, the last one `never`), in the order they
//! joined; the first leads. Time moves in ticks of half the failback
//! delay. Candidates leave (their lease or session ends: the next in line
//! leads, a failover) and come back at the end of the line; the preferred
//! one flaps, as often as the bound allows. At every tick the leader
//! hands its [`Failback`] the line behind it and hands over to whom it
//! names (a graceful handover: the target leads next, the old leader
//! queues again at the end). An operator's switchover, planned by the
//! production plan, moves leadership to its target and pins it (so, as
//! in production, a leader chosen by hand is never failed back).
//!
//! Invariants: whenever a candidate is present, someone leads (no
//! stalls: a failback only ever hands over to a present candidate, and a
//! leader of priority 0 steps aside only to a positive one); failbacks
//! change the leader at most once per failback delay, whatever flaps; a
//! failback goes only to a candidate back for the delay, so one that
//! flaps faster never leads by it; a leader chosen by an operator is
//! never failed back; a leader of
//! priority 0 hands over while a positive candidate is present (once
//! time has moved); and a refused switchover changes nothing. Teeth: each
//! of [`Failback`]'s rules switched off ([`FailbackRule`]) is caught.

use stateright::{Checker, Model, Property};

use super::line::{InLine, Line, Target};
use super::priority::{Failback, FailbackRule, Priority, Standing};
use crate::backend_kind::Backend;
use crate::clock::BootInstant;
use crate::model_check::{assert_caught, breadth_first, finish};

const PRIORITIES: [u32; N] = [1, 5, 3, 0];
const N: usize = 4;
/// Ticks of half a delay each.
const DELAY_TICKS: u8 = 2;
const TICK_MS: u64 = 50;
const TICKS: u8 = 10;
const LEAVES: u8 = 3;
const SWITCHOVERS: u8 = 1;

fn at(tick: u8) -> BootInstant {
    BootInstant::from_nanos(tick as u64 * TICK_MS * 1_000_000)
}

fn key(c: usize) -> String {
    format!("c{c}")
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct World {
    tick: u8,
    /// Present candidates, in line order: the first leads.
    line: Vec<usize>,
    /// Each candidate's current presence's number (a new key each time
    /// it comes back).
    incarnation: [u8; N],
    /// The leader's failback, made when it began to lead.
    failback: Option<Failback>,
    /// Ticks at which a failback changed the leader (from a leader of
    /// positive priority: a `never` leader's hand-over follows the
    /// failover that made it lead, one per failover).
    failbacks: Vec<u8>,
    /// The tick of the last change of leader, of any kind.
    changed_at: u8,
    /// A failback came less than a delay after the change before it.
    too_soon: bool,
    /// A `never` leader handed over (a witness).
    yielded: bool,
    /// The tick each candidate last came back at.
    joined_at: [u8; N],
    /// A leader of priority 0 kept leading through a tick with a positive
    /// candidate present.
    never_stayed: bool,
    /// A failback went to a candidate back for less than the delay: a
    /// flapping one would get leadership, and lose it, at every flap.
    to_unsettled: bool,
    leaves: u8,
    switchovers: u8,
    /// Broken invariants, as witnessed.
    pinned_moved: bool,
    refusal_changed: bool,
}

struct Priorities {
    off: Option<FailbackRule>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Action {
    Tick,
    Leave(usize),
    Join(usize),
    Switchover(usize),
}

impl Priorities {
    fn failback_for(&self, leader: usize) -> Failback {
        let own = Standing::healthy(Priority::new(PRIORITIES[leader]).expect("in range"));
        let delay = std::time::Duration::from_millis(DELAY_TICKS as u64 * TICK_MS);
        Failback::new(own, delay).without(self.off)
    }

    /// A new leader (or none): a fresh failback.
    fn lead(&self, w: &mut World) {
        w.failback = w.line.first().map(|&l| self.failback_for(l));
    }

    fn as_line(w: &World) -> Line {
        Line {
            backend: Backend::Etcd,
            election: "e".into(),
            candidates: w
                .line
                .iter()
                .enumerate()
                .map(|(place, &c)| InLine {
                    id: key(c),
                    token: None,
                    leads: place == 0,
                    priority: Priority::new(PRIORITIES[c]).expect("in range"),
                    healthy: true,
                    live: true,
                    by: "elect",
                })
                .collect(),
        }
    }

    /// Hands over to `target`: it leads next, the old leader queues
    /// again at the end; the candidates between it step aside (to the end,
    /// in their order), as the switchover's record makes them.
    fn hand_over(&self, w: &mut World, target: usize) {
        let at = w.line.iter().position(|&c| c == target).expect("present");
        let mut line = vec![target];
        line.extend(w.line[at + 1..].iter());
        line.extend(w.line[..at].iter());
        w.line = line;
        self.lead(w);
    }
}

impl Model for Priorities {
    type State = World;
    type Action = Action;

    fn init_states(&self) -> Vec<World> {
        let mut w = World {
            tick: 0,
            line: (0..N).collect(),
            incarnation: [0; N],
            failback: None,
            failbacks: Vec::new(),
            changed_at: 0,
            too_soon: false,
            yielded: false,
            joined_at: [0; N],
            to_unsettled: false,
            never_stayed: false,
            leaves: 0,
            switchovers: 0,
            pinned_moved: false,
            refusal_changed: false,
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
            if present && w.leaves < LEAVES {
                actions.push(Action::Leave(c));
            }
            if !present {
                actions.push(Action::Join(c));
            }
            if w.switchovers < SWITCHOVERS {
                actions.push(Action::Switchover(c));
            }
        }
    }

    fn next_state(&self, last: &World, action: Action) -> Option<World> {
        let mut w = last.clone();
        match action {
            Action::Tick => {
                w.tick += 1;
                let now = at(w.tick);
                let behind: Vec<(String, Standing)> = w
                    .line
                    .iter()
                    .skip(1)
                    .map(|&c| {
                        let incarnated = format!("{}.{}", key(c), w.incarnation[c]);
                        let priority = Priority::new(PRIORITIES[c]).expect("in range");
                        (incarnated, Standing::healthy(priority))
                    })
                    .collect();
                let failback = w.failback.as_mut()?;
                failback.saw(now, &behind);
                let (pinned, urgent) = (
                    failback.pinned(),
                    failback.own().priority == Priority::NEVER,
                );
                let positive_behind = behind.iter().any(|(_, s)| s.priority > Priority::NEVER);
                let decided = failback.decide(now).map(str::to_owned);
                w.never_stayed |= urgent && !pinned && positive_behind && decided.is_none();
                if let Some(target) = decided {
                    let c = target[1..2].parse::<usize>().expect("c<n>.<i>");
                    w.pinned_moved |= pinned;
                    match urgent {
                        true => w.yielded = true,
                        false => {
                            w.failbacks.push(w.tick);
                            w.to_unsettled |= w.tick < w.joined_at[c] + DELAY_TICKS;
                            w.too_soon |= w.tick < w.changed_at + DELAY_TICKS;
                        }
                    }
                    w.changed_at = w.tick;
                    self.hand_over(&mut w, c);
                }
            }
            Action::Leave(c) => {
                let led = w.line.first() == Some(&c);
                w.line.retain(|&x| x != c);
                w.leaves += 1;
                if led {
                    w.changed_at = w.tick;
                    self.lead(&mut w);
                }
            }
            Action::Join(c) => {
                w.incarnation[c] += 1;
                w.joined_at[c] = w.tick;
                w.line.push(c);
                if w.line.len() == 1 {
                    self.lead(&mut w);
                }
            }
            Action::Switchover(c) => {
                w.switchovers += 1;
                match Self::as_line(&w).plan(&Target::Candidate(key(c))) {
                    Ok(plan) if !plan.nothing_to_do() => {
                        w.changed_at = w.tick;
                        self.hand_over(&mut w, c);
                        if let Some(f) = w.failback.as_mut() {
                            f.set_pinned(true);
                        }
                    }
                    Ok(_) => {
                        if let Some(f) = w.failback.as_mut() {
                            f.set_pinned(true);
                        }
                    }
                    Err(_) => {
                        let mut unchanged = last.clone();
                        unchanged.switchovers = w.switchovers;
                        w.refusal_changed |= unchanged != w;
                    }
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
            Property::always(BOUNDED, |_, w: &World| !w.too_soon),
            Property::always(PIN_STANDS, |_, w: &World| !w.pinned_moved),
            Property::always(FLAPPER_WAITS, |_, w: &World| !w.to_unsettled),
            Property::always(REFUSAL_CHANGES_NOTHING, |_, w: &World| !w.refusal_changed),
            Property::always(NEVER_YIELDS, |_, w: &World| !w.never_stayed),
            Property::sometimes(FAILS_BACK, |_, w: &World| !w.failbacks.is_empty()),
            Property::sometimes(YIELDS, |_, w: &World| w.yielded),
        ]
    }
}

const NO_STALL: &str = "someone leads whenever a candidate is present";
const BOUNDED: &str =
    "a failback changes the leader no sooner than a delay after the change before it";
const FLAPPER_WAITS: &str =
    "a failback goes only to a candidate back for the delay (a flapping one never leads)";
const PIN_STANDS: &str = "a leader an operator chose is never failed back";
const REFUSAL_CHANGES_NOTHING: &str = "a refused switchover changes nothing";
const NEVER_YIELDS: &str = "a leader of priority 0 hands over to a positive one";
const FAILS_BACK: &str = "a leader fails back";
const YIELDS: &str = "a leader of priority 0 hands over";

fn check(off: Option<FailbackRule>) -> impl Checker<Priorities> {
    let finish = finish(&off);
    let label = format!("priorities model (rule off: {off:?}, {TICKS} ticks)");
    breadth_first(Priorities { off }.checker().finish_when(finish), &label)
}

#[test]
fn failbacks_never_stall_never_ping_pong_and_never_undo_an_operator() {
    let checker = check(None);
    for property in [
        NO_STALL,
        BOUNDED,
        FLAPPER_WAITS,
        PIN_STANDS,
        REFUSAL_CHANGES_NOTHING,
        NEVER_YIELDS,
    ] {
        checker.assert_no_discovery(property);
    }
    assert!(checker.discovery(FAILS_BACK).is_some(), "never failed back");
    assert!(
        checker.discovery(YIELDS).is_some(),
        "priority 0 never handed over"
    );
}

#[test]
fn each_failback_rule_switched_off_is_caught() {
    for (rule, broken) in [
        (FailbackRule::Settled, BOUNDED),
        (FailbackRule::Pinned, PIN_STANDS),
    ] {
        assert_caught(&check(Some(rule)), rule, broken);
    }
}
