//! The etcd backend's decisions, every interleaving up to a bound, under
//! stateright: the production recipes (`recipe`) driven unchanged, each
//! rule switched off in turn to show the checker finds what it prevents.
//! Test builds only.
//!
//! - [`handover`]: one leader at a time, in order, through resignations,
//!   handovers, hand deletes and expiries;
//! - [`deadline`]: the local deadline never passes the server's expiry.

mod deadline;
mod handover;
