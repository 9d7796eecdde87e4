//! The one shape of every sans-IO recipe of the etcd and ZooKeeper
//! backends, and the switch a model check turns a recipe's rule off with.
//!
//! A recipe is a state machine with no I/O and no clock of its own. Its
//! driver (the tokio code beside `recipe/`, named after it) asks it what
//! to do ([`Recipe::poll`]): send a request, wait, publish, or it has
//! decided; and hands it every answer and event ([`Recipe::input`]), with
//! the instant it happened on the boot clock. The model checks drive the
//! same machines, unchanged, from a model of the server, so whatever a
//! recipe decides is what both the product and the checker see.
//!
//! The Raft core (`elect-raft`) keeps raft-rs's shape instead: `tick` and
//! `step` in, `Ready` (messages to send, state to persist) out. A Raft
//! node is fed by many peers at once and answers with batches, where a
//! recipe has one request out at a time and one driver.

use crate::clock::BootInstant;

/// One recipe: poll it for what to do, feed it what happened.
pub trait Recipe {
    /// An answer to a request the recipe asked for, or an event.
    type Input;
    /// What the driver does next.
    type Next;

    /// What to do at `now`. A request returned is answered (through
    /// [`Recipe::input`]) before the recipe asks for another.
    fn poll(&mut self, now: BootInstant) -> Self::Next;

    /// What happened at `now`.
    fn input(&mut self, now: BootInstant, input: Self::Input);
}

/// Whether a model check switched `rule` off in this recipe (its
/// `mutation` field, set by its `mutated` builder): the model checks'
/// teeth. Only test builds have the switch; elsewhere no rule is off and
/// `Mutation` does not exist.
#[cfg(test)]
macro_rules! switched_off {
    ($recipe:expr, $rule:ident) => {
        $recipe.mutation == Some(Mutation::$rule)
    };
}
#[cfg(not(test))]
macro_rules! switched_off {
    ($recipe:expr, $rule:ident) => {
        false
    };
}
pub(crate) use switched_off;
