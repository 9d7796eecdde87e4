//! A deterministic simulator for leader-election algorithms.
//!
//! Election is taught, and chosen, by comparing the classical algorithms:
//! how many messages they send, how long they take, what they do when the
//! network splits. Here each algorithm is a sans-IO [`Process`]: it reacts
//! to its start, to messages and to its timers by asking [`Io`] to send
//! messages and set timers, and says whom it believes leads. The
//! [`engine::Sim`] delivers what they send in a seeded, reproducible order,
//! with a delay model, drops, partitions and crashes, and counts.
//!
//! Counting conventions (the tests hold them exactly):
//! - one message transmission takes one time unit (unless a delay model
//!   says otherwise), and a process acts on a message the instant it
//!   arrives;
//! - a message sent to a crashed process, or across a partition, counts as
//!   sent and is lost;
//! - completion time is the arrival of the last message delivered;
//! - messages are counted by kind (`election`, `elected`, `ok`,
//!   `coordinator`...), and in total.

pub mod bully;
pub mod bully_variants;
pub mod chang_roberts;
#[cfg(feature = "chart")]
pub mod chart;
pub mod engine;
pub mod formula;
pub mod hirschberg_sinclair;
pub mod invitation;
pub mod peterson;
pub mod process;
pub mod raft;
mod random;
pub mod ring;
pub mod run;
pub mod trace;

pub use process::{Io, Message, Pid, Process};
