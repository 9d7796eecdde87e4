//! The one shape of every sans-IO recipe of the etcd and ZooKeeper
//! backends, and the switch a model check turns a recipe's rule off with.
//!
//! A recipe is a state machine with no I/O and no clock of its own. Its
//! driver (the tokio code beside `recipe/`, named after it) asks it what
//! to do ([`Recipe::poll`]): send a request, wait, publish, or it has
//! decided; and hands it every answer and event ([`Recipe::input`]), with
//! the instant it happened on the boot clock. Every driver has one shape:
//! an [`Io`] of its own (the translation of the recipe's steps into client
//! calls, and of what the client hears into inputs) run by the one loop,
//! [`drive`]. The model checks drive the
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

/// What a driver makes of a recipe's next step ([`Io::step`]).
pub enum Step<Request, Outcome> {
    /// Carry this request out: its answer is the recipe's next input.
    Send(Request),
    /// Wait for an event, or until this instant.
    Wait(Option<BootInstant>),
    /// Said (published, logged) at once: ask the recipe again.
    Said,
    /// The recipe has decided: the drive ends with this.
    Done(Outcome),
}

/// What a request's answer or a wait came to.
pub enum Heard<Input, Outcome> {
    /// The recipe's next input.
    Input(Input),
    /// The time came, or nothing for the recipe: ask it again.
    Nothing,
    /// Something outside the recipe ends the drive (resignation, the
    /// lease or the session gone).
    Done(Outcome),
}

/// A recipe's I/O: the narrow interface between a recipe and one backend's
/// client, all a driver is. It translates the recipe's steps into client
/// calls and publications ([`Io::step`], [`Io::send`]) and what the
/// client hears into the recipe's inputs ([`Io::wait`]); [`drive`] is the
/// one loop that runs them. It is also the seam where a simulated etcd or
/// ZooKeeper could drive a recipe as production does.
pub trait Io<R: Recipe> {
    /// What the driver sends.
    type Request;
    /// What the drive ends with.
    type Outcome;

    /// The recipe's `next` step as the driver takes it: publications
    /// carried out at once ([`Step::Said`]), a request, a wait, or the end.
    fn step(&mut self, next: R::Next) -> Step<Self::Request, Self::Outcome>;

    /// Carries `request` out. A request that races an event stream (a
    /// read of our turn against the watch that may hand it over) hands
    /// `recipe` what the stream says meanwhile, and says [`Heard::Nothing`]
    /// if that decided first.
    async fn send(
        &mut self,
        recipe: &mut R,
        request: Self::Request,
    ) -> Heard<R::Input, Self::Outcome>;

    /// Waits for an event until `until` (`None`: no time limit).
    async fn wait(
        &mut self,
        recipe: &R,
        until: Option<BootInstant>,
    ) -> Heard<R::Input, Self::Outcome>;
}

/// Drives `recipe` through `io` until the recipe or the I/O ends it: the
/// one driver loop of every recipe. Each poll and each input carries the
/// boot clock's instant.
pub async fn drive<R: Recipe, I: Io<R>>(recipe: &mut R, io: &mut I) -> I::Outcome {
    loop {
        let heard = match io.step(recipe.poll(BootInstant::now())) {
            Step::Done(outcome) => return outcome,
            Step::Said => continue,
            Step::Send(request) => io.send(recipe, request).await,
            Step::Wait(until) => io.wait(recipe, until).await,
        };
        match heard {
            Heard::Input(input) => recipe.input(BootInstant::now(), input),
            Heard::Nothing => {}
            Heard::Done(outcome) => return outcome,
        }
    }
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
