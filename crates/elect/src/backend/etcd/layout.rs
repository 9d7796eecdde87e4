//! The key layout of Go's `concurrency.Election`, so `etcdctl elect` and
//! `elect` see each other's candidates: `<election>/<lease id in lowercase
//! hex>`, value = the candidate's id, leader = lowest create revision; and
//! the tag in the lease ids `elect` chooses, which tells its candidates
//! from Go's.

use etcd_client::{GetOptions, KeyValue, SortOrder, SortTarget};

/// The low 16 bits of every lease id `elect` chooses ("e1ec"). An `elect`
/// leader that loses its key keeps its lease until its work is dead and
/// then revokes it, so a successor that sees this tag on its predecessor's
/// lease knows waiting for it is worthwhile. Leases of Go clients (server
/// assigned ids) are not waited for: `etcdctl elect` resigns by deleting
/// its key and keeps its lease for a minute.
pub const ELECT_LEASE_TAG: i64 = 0xe1ec;

/// Whether `id` is a lease granted by `elect` (see [`ELECT_LEASE_TAG`]).
pub fn granted_by_elect(id: i64) -> bool {
    id > 0 && id & 0xffff == ELECT_LEASE_TAG
}

/// The range every candidate key of `election` lives under.
pub fn prefix(election: &str) -> String {
    format!("{election}/")
}

/// The key that says the candidacy whose key had `create_revision` is
/// over and its work has stopped, though its lease (a session's, shared
/// with other elections) lives on: a successor waiting on that lease may
/// go. Outside the election's prefix, so no candidate ever sees it as one
/// (a NUL cannot be part of an election's name).
pub fn release_marker(election: &str, create_revision: i64) -> String {
    format!("{}{create_revision:x}", release_prefix(election))
}

/// Where the release markers of `election` live.
pub fn release_prefix(election: &str) -> String {
    format!("{election}\u{0}released/")
}

/// Where the tenure markers of `election` live (see the `tenure`
/// module): outside the election's prefix, like the release markers.
pub fn tenure_prefix(election: &str) -> String {
    format!("{election}\u{0}leading/")
}

/// The tenure marker of the candidacy on `lease_id`.
pub fn tenure_marker(election: &str, lease_id: i64) -> String {
    format!("{}{lease_id:x}", tenure_prefix(election))
}

/// The completion record of a periodic job's period (see
/// [`crate::periodic`]), outside the election's prefix like the markers.
pub fn completion_record(election: &str, period: &str) -> String {
    format!("{election}\u{0}done/{period}")
}

/// The record of the switchover under way (see [`crate::steer`]), bound
/// to the lease of the `elect switchover` that wrote it: outside the
/// election's prefix like the markers, so no candidate sees it as one.
pub fn switchover_record(election: &str) -> String {
    format!("{election}\u{0}switchover")
}

/// Where the candidates' priorities live (see [`crate::steer`]): one key
/// per lease, its value the priority, bound to the lease; none for the
/// default priority (Go's candidates have none).
pub fn priority_prefix(election: &str) -> String {
    format!("{election}\u{0}priority/")
}

/// The priority key of the candidacies on `lease_id`.
pub fn priority_key(election: &str, lease_id: i64) -> String {
    format!("{}{lease_id:x}", priority_prefix(election))
}

/// The key a leader that a manual switchover chose writes, bound to its
/// lease, its value the leader's key: priorities do not undo that choice
/// while it leads.
pub fn pin_key(election: &str) -> String {
    format!("{election}\u{0}pinned")
}

/// The key a candidate holding `lease_id` campaigns with.
pub fn candidate_key(election: &str, lease_id: i64) -> String {
    // Go formats the int64 lease id with %x; etcd never hands out negative ids.
    format!("{}{lease_id:x}", prefix(election))
}

/// One candidate's key as read from etcd.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CandidateKey {
    pub key: Vec<u8>,
    /// The value: the id the candidate published.
    pub id: String,
    /// Orders the queue; the leader's is the fencing token.
    pub create_revision: i64,
    /// The lease the key is bound to (0 when it has none).
    pub lease: i64,
}

impl From<&KeyValue> for CandidateKey {
    fn from(kv: &KeyValue) -> Self {
        Self {
            key: kv.key().to_vec(),
            id: String::from_utf8_lossy(kv.value()).into_owned(),
            create_revision: kv.create_revision(),
            lease: kv.lease(),
        }
    }
}

/// Our candidacy's key, as we created it.
#[derive(Debug, Clone, Copy)]
pub struct Ours<'a> {
    pub key: &'a str,
    pub lease: i64,
    pub create_revision: i64,
}

/// A range over the prefix for the oldest key younger than `rev`: the
/// next in line after the key created at `rev`.
pub fn younger_than(rev: i64) -> GetOptions {
    GetOptions::new()
        .with_prefix()
        .with_sort(SortTarget::Create, SortOrder::Ascend)
        .with_min_create_revision(rev + 1)
        .with_limit(1)
}

/// A range over the prefix for the youngest key older than `rev`: the
/// predecessor of the key created at `rev`.
pub fn older_than(rev: i64) -> GetOptions {
    GetOptions::new()
        .with_prefix()
        .with_sort(SortTarget::Create, SortOrder::Descend)
        .with_max_create_revision(rev - 1)
        .with_limit(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_match_go() {
        // concurrency.NewElection(s, "jobs") with lease 0x694d7d4a0c3e7b0d
        assert_eq!(
            candidate_key("jobs", 0x694d7d4a0c3e7b0d),
            "jobs/694d7d4a0c3e7b0d"
        );
        assert_eq!(candidate_key("a/b", 10), "a/b/a");
        assert_eq!(prefix("a/b"), "a/b/");
        assert_eq!(tenure_marker("a/b", 10), "a/b\u{0}leading/a");
        assert!(!tenure_marker("a/b", 10).starts_with(&prefix("a/b")));
    }
}
