//! `elect lab soak`: hours of random, overlapping faults against real
//! ensembles, with elect's candidates run as users run them and the peers'
//! tools beside them, recorded from the outside and judged by
//! [`elect_judge`], which shares no code with what it judges.
//!
//! A soak, per backend:
//! - elect candidates, each a separate `elect run` process (as on separate
//!   hosts) at the strongest containment the machine allows, whose command
//!   writes to the fenced store with its token and leaves a daemon that
//!   writes too; a failed candidate is started again (`Restart=on-failure`);
//! - two `run --once` candidates started by a timer every period;
//! - with `--peers`, `etcdctl elect`, kazoo's `Election` and Curator's
//!   `LeaderLatch` (both error policies) in elections of their own, each
//!   wrapping the same writer;
//! - the [`nemesis`], dealing faults drawn from the seed.
//!
//! What is recorded ([`record`]): the [`store`]'s log, the [`sampler`]'s
//! record of which commands were alive and runnable, the candidates' lines
//! ([`candidate`]), the fault log, what each ZooKeeper member held
//! ([`probe`]), what was left at the end. The judge reads only that. The
//! members' own logs are kept beside the history (`members/`).

pub mod candidate;
pub mod nemesis;
pub mod options;
pub mod probe;
pub mod record;
pub mod rng;
pub mod run;
pub mod sampler;
pub mod schedule;
pub mod scripts;
pub mod store;
pub mod tools;
pub mod world;

mod end;

pub use options::{Backend, Error, MAX_CANDIDATES, MIN_CANDIDATES, MIN_DURATION, Options};
pub use run::{Outcome, check, run};
pub use schedule::Schedule;
