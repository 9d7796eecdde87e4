//! `elect compare`: the same scenarios on every backend, side by side, and
//! the peers' own tools beside elect on the same ensembles. The `elect`
//! binary turns its flags into [`Options`]; this crate does the rest.
//!
//! - [`contender`]: who campaigns (elect on a backend, `etcdctl elect`,
//!   kazoo, Curator) and how each says it was elected;
//! - [`arena`]: one election's candidates as real processes;
//! - [`scenario`]: the trials (handover, failover, freeze...);
//! - [`scale`]: many candidates in one process, through the library;
//! - [`steady`]: what candidates cost the servers while nothing happens;
//! - [`probe`]: what the servers count (queued candidates, notifications,
//!   requests);
//! - [`row`], [`table`] and [`report`]: a measured combination (a JSON
//!   line), the tables, charts and page.
//!
//! And how a run goes: [`plan`] checks the options, [`run()`] walks the
//! plan (`ensembles` where the backends run, `measure` what each scenario
//! measured).
//!
//! Errors are `anyhow` reports: compare is a tool whose failures are read
//! by people; what a caller acts on is typed ([`PlanError`] for the
//! flags, the exit code for safety).
//!
//! Ensembles come from the lab (local processes, or `--containers`) unless
//! the user names them; whatever compare started is gone when it ends,
//! also on Ctrl-C (the lab's interrupt flag ends every wait, and the
//! `Drop`s of arenas and the lab tear down).

pub mod arena;
pub mod contender;
pub mod elections;
mod ensembles;
pub mod floor;
mod measure;
pub mod palette;
pub mod plan;
pub mod probe;
pub mod progress;
mod random;
pub mod report;
pub mod row;
mod run;
pub mod scale;
pub mod scenario;
pub mod steady;
pub mod table;
pub mod verdict;

pub use plan::{Options, Plan, PlanError};
pub use run::{SAFETY_FAILED, run};
pub use scenario::Scenario;
