//! How often a candidate renews what it holds on the servers: as a
//! follower, at the peers' cost, or as a leader, with the proof a
//! leadership deadline needs.
//!
//! Only a leader acts on its deadline, and proving one costs requests the
//! peers never send (etcd: every member and a term read on each side of
//! each ping; ZooKeeper: syncs through the ensemble's leader every T/20).
//! A candidate that waits only needs its lease or session to live and its
//! place in line kept, so it renews as cheaply as that allows: on etcd as
//! Go's session does (a keepalive every TTL/3 through one member, no
//! proof); on ZooKeeper with syncs in place of the pings its client
//! library would send an idle session anyway. The next in line renews as
//! the leader does, so a handover finds its deadline proven already;
//! anyone else whose turn comes renews as a leader from then on and
//! leads only once that proves a deadline.

use tokio::sync::watch;

/// How a lease or session is renewed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cadence {
    /// A waiting candidate's: keep the lease or session alive, proving
    /// nothing.
    Following,
    /// The leader's and the next in line's: a deadline always ready to
    /// lead on.
    Leading,
}

impl Cadence {
    /// The leader's cadence where `leads_or_next`, a follower's otherwise.
    pub fn for_next_in_line(leads_or_next: bool) -> Cadence {
        if leads_or_next {
            Cadence::Leading
        } else {
            Cadence::Following
        }
    }

    /// Makes this the cadence `renewal` says, waking whoever renews only
    /// when it changes.
    pub fn set_on(self, renewal: &watch::Sender<Cadence>) {
        renewal.send_if_modified(|c| std::mem::replace(c, self) != self);
    }
}
