//! What the library's model checks share: a breadth-first search on both
//! cores that says what it explored (distinct states, depth, time) for
//! the book's tables and the closing notes. The first counterexample it
//! finds is a short one, but on two threads not always the shortest, nor
//! the same from run to run.

use std::hash::Hash;

use stateright::{Checker, CheckerBuilder, HasDiscoveries, Model};

/// Runs `builder` breadth-first to its end (or its `finish_when`), and
/// prints `what` with the states and depth explored.
pub fn breadth_first<M>(builder: CheckerBuilder<M>, what: &str) -> impl Checker<M> + use<M>
where
    M: Model + Send + Sync + 'static,
    M::State: Hash + Send + Sync + Clone + PartialEq + 'static,
    M::Action: Clone + PartialEq,
{
    let started = std::time::Instant::now();
    let checker = builder.threads(2).spawn_bfs().join();
    eprintln!(
        "{what}: {} distinct states, depth {}, {:.1?}",
        checker.unique_state_count(),
        checker.max_depth(),
        started.elapsed()
    );
    checker
}

/// When a check may stop: at its end when every rule holds (every
/// property is checked); at the first failure when one is switched off
/// (`rule_off`), since its teeth need one counterexample.
pub fn finish<T>(rule_off: &Option<T>) -> HasDiscoveries {
    match rule_off {
        None => HasDiscoveries::All,
        Some(_) => HasDiscoveries::AnyFailures,
    }
}

/// Asserts that `checker`, run with `rule` switched off, found a
/// counterexample to the property `broken`, and prints its steps.
pub fn assert_caught<M>(checker: &impl Checker<M>, rule: impl std::fmt::Debug, broken: &'static str)
where
    M: Model,
    M::State: Clone + PartialEq,
    M::Action: Clone + PartialEq + std::fmt::Debug,
{
    let path = checker
        .discovery(broken)
        .unwrap_or_else(|| panic!("{rule:?} off must break \"{broken}\""));
    let actions = path.into_actions();
    eprintln!(
        "{rule:?} off: \"{broken}\" broken in {} steps: {actions:?}",
        actions.len()
    );
}
