//! The judge of a soak: reads what `elect lab soak` recorded and says
//! whether every check held, for elect and for the peers beside it.
//!
//! It depends on serde alone, and shares no code with what it judges: not
//! the backends, not the recipes, not compare's verdict. What it reads is
//! recorded from the outside ([`history`]): the fenced store's log of every
//! write, a sampler's record of which commands were alive and runnable
//! (read from /proc), the candidates' lines, and the fault log. So a
//! history can be judged again later (`elect lab soak --check DIR`), and a
//! history with a planted violation shows the judge's teeth (the tests).
//!
//! The checks ([`checks`]), per election:
//! - no two candidates' commands (daemons included) alive and runnable at
//!   once, beyond the sampler's resolution around that instant;
//! - the store never accepted a lower token after a higher one, nor a
//!   write whose token a newer writer had already outgrown; an older
//!   command that still wrote after a newer one (refused) ran beside it;
//! - no candidate said it led while another's writes were accepted,
//!   beyond the stated slack (a frozen candidate says nothing);
//! - once every fault has healed, a write is accepted within the bound;
//! - a periodic job is not run again in a period once its completion
//!   could have been recorded;
//! - nothing is left behind.
//!
//! Beside them, what the service itself got wrong ([`service`]): a
//! ZooKeeper member that kept a dead session's znode, or members that
//! disagreed. Its time is judged like a fault's for liveness, never for
//! safety.
//!
//! An operator who deletes the leader's key or znode takes leadership away
//! by hand: for a TTL after that, two commands may run, and the contract
//! is the fencing token; such overlaps are counted, not violations.

pub mod checks;
pub mod history;
pub mod report;
pub mod service;

pub use checks::{Judgement, Kind, Violation, judge};
pub use history::History;
