//! The transactions the etcd recipes send, as data: the tenure claim,
//! and the release with its touch of the next in line (see `tenure.rs`
//! and `handover.rs` beside this folder for why each compare is there).
//!
//! Their compares are where the safety of a claim and of a handover
//! lives, so they are built here, with no I/O, and read back here from
//! etcd's answer: the driver (`transaction.rs`) only translates a
//! [`Transaction`] into etcd's request and etcd's response into an
//! [`Answer`], one field for one field. The handover model
//! (`model/handover.rs`) evaluates the very same [`Transaction`] against
//! its key space as etcd does, so a compare dropped or changed here is a
//! counterexample there, not a rule the model re-implements.

use super::handover::Touch;
use crate::backend::etcd::layout::{self, Ours};

/// One compare of a transaction's guard; it holds when the key's field
/// equals the value (a missing key's fields are 0, as in etcd).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Compare {
    CreateRevision { key: Vec<u8>, is: i64 },
    Lease { key: Vec<u8>, is: i64 },
}

/// One operation of a transaction's branch.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Op {
    /// Put `key` with an empty value, bound to `lease`. etcd refuses the
    /// whole transaction if the lease has ended.
    Put {
        key: Vec<u8>,
        lease: i64,
    },
    /// Put `key` again, value and lease unchanged: a new revision for
    /// its watchers. etcd refuses the whole transaction if the key does
    /// not exist.
    Refresh {
        key: Vec<u8>,
    },
    Delete {
        key: Vec<u8>,
    },
    /// The keys (no values) under `prefix`.
    ListKeys {
        prefix: Vec<u8>,
    },
    /// A nested transaction.
    Txn(Transaction),
}

/// A transaction: `then` if every compare of `when` holds, else
/// `otherwise`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Transaction {
    pub when: Vec<Compare>,
    pub then: Vec<Op>,
    pub otherwise: Vec<Op>,
}

/// What etcd answered to a [`Transaction`] it applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The revision of the store after it.
    pub revision: i64,
    /// Whether `when` held, so `then` ran.
    pub succeeded: bool,
    /// One per operation of the branch that ran, in order.
    pub results: Vec<OpResult>,
}

/// What one operation returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpResult {
    /// A put, a refresh or a delete.
    Written,
    /// A [`Op::ListKeys`]: the keys found.
    Keys(Vec<Vec<u8>>),
    /// A nested transaction's answer.
    Txn(Answer),
}

/// What one claim of the tenure found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimAnswer {
    /// Our key is gone or not ours: nothing was written.
    KeyGone,
    /// Our marker is the only one, as of this revision.
    Alone(i64),
    /// Other candidacies' markers, at the read's revision: their tenure
    /// may not be over.
    Others(Vec<Vec<u8>>, i64),
}

impl Transaction {
    /// The tenure claim: if our key is still ours (its create revision
    /// and its lease, safety rule 3), put our marker, bound to our lease
    /// (again, unchanged if it was there), and list every marker.
    pub fn claim(election: &str, ours: Ours<'_>) -> Transaction {
        let key = ours.key.as_bytes().to_vec();
        Transaction {
            when: vec![
                Compare::CreateRevision {
                    key: key.clone(),
                    is: ours.create_revision,
                },
                Compare::Lease {
                    key,
                    is: ours.lease,
                },
            ],
            then: vec![
                Op::Put {
                    key: layout::tenure_marker(election, ours.lease).into_bytes(),
                    lease: ours.lease,
                },
                Op::ListKeys {
                    prefix: layout::tenure_prefix(election).into_bytes(),
                },
            ],
            otherwise: vec![],
        }
    }

    /// A candidacy's end, its work stopped: if our key (`key`, created at
    /// `create_revision`) is still this candidacy's, delete it, and hand
    /// over to `touch`'s next in line; either way, write the release
    /// marker, bound to `lease`, and delete our tenure marker.
    ///
    /// It reads nothing: a range over the election's prefix walks every
    /// key deleted there since etcd's last compaction (each candidacy
    /// leaves one), and inside the commit it would delay the handover for
    /// every waiter.
    pub fn release(
        election: &str,
        key: &str,
        create_revision: i64,
        lease: i64,
        touch: Option<&Touch>,
    ) -> Transaction {
        let marker = || Op::Put {
            key: layout::release_marker(election, create_revision).into_bytes(),
            lease,
        };
        let end_tenure = || Op::Delete {
            key: layout::tenure_marker(election, lease).into_bytes(),
        };
        let mut then = vec![
            marker(),
            Op::Delete {
                key: key.as_bytes().to_vec(),
            },
            end_tenure(),
        ];
        then.extend(touch.map(|touch| Op::Txn(Transaction::touch(election, touch))));
        Transaction {
            when: vec![Compare::CreateRevision {
                key: key.as_bytes().to_vec(),
                is: create_revision,
            }],
            then,
            otherwise: vec![marker(), end_tenure()],
        }
    }

    /// The part of a release that hands over (see `handover.rs`): if the
    /// next's key still has the create revision and lease it was read
    /// with, put it again, value and lease unchanged, and write its tenure
    /// marker, bound to its lease, which it would otherwise claim itself.
    pub fn touch(election: &str, touch: &Touch) -> Transaction {
        let next = &touch.next;
        let mut when = match touch.guarded {
            true => vec![
                Compare::CreateRevision {
                    key: next.key.clone(),
                    is: next.create_revision,
                },
                Compare::Lease {
                    key: next.key.clone(),
                    is: next.lease,
                },
            ],
            false => vec![],
        };
        when.extend(
            touch
                .switchover
                .iter()
                .map(|record| Compare::CreateRevision {
                    key: record.key.clone(),
                    is: record.create_revision,
                }),
        );
        Transaction {
            when,
            then: vec![
                Op::Refresh {
                    key: next.key.clone(),
                },
                Op::Put {
                    key: layout::tenure_marker(election, next.lease).into_bytes(),
                    lease: next.lease,
                },
            ],
            otherwise: vec![],
        }
    }
}

impl Answer {
    /// What a [`Transaction::claim`] of `election` on `lease` found.
    pub fn claimed(&self, election: &str, lease: i64) -> ClaimAnswer {
        if !self.succeeded {
            return ClaimAnswer::KeyGone;
        }
        let ours = layout::tenure_marker(election, lease).into_bytes();
        let others: Vec<Vec<u8>> = self
            .results
            .iter()
            .filter_map(|r| match r {
                OpResult::Keys(keys) => Some(keys),
                _ => None,
            })
            .flatten()
            .filter(|key| **key != ours)
            .cloned()
            .collect();
        match others.is_empty() {
            true => ClaimAnswer::Alone(self.revision),
            false => ClaimAnswer::Others(others, self.revision),
        }
    }

    /// Whether a [`Transaction::release`]'s touch found the next's key
    /// and put it.
    pub fn touched(&self) -> bool {
        self.results
            .iter()
            .any(|r| matches!(r, OpResult::Txn(nested) if nested.succeeded))
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::key;
    use super::*;

    fn ours() -> Ours<'static> {
        Ours {
            key: "e/7e1ec",
            lease: 0x7e1ec,
            create_revision: 7,
        }
    }

    #[test]
    fn a_claim_is_guarded_by_our_key_s_create_revision_and_lease() {
        let claim = Transaction::claim("e", ours());
        assert_eq!(
            claim.when,
            vec![
                Compare::CreateRevision {
                    key: b"e/7e1ec".to_vec(),
                    is: 7
                },
                Compare::Lease {
                    key: b"e/7e1ec".to_vec(),
                    is: 0x7e1ec
                },
            ]
        );
        assert!(claim.otherwise.is_empty());
    }

    #[test]
    fn a_claim_answer_leaves_out_our_own_marker() {
        let marker = |lease: i64| layout::tenure_marker("e", lease).into_bytes();
        let answer = |keys: Vec<Vec<u8>>| Answer {
            revision: 9,
            succeeded: true,
            results: vec![OpResult::Written, OpResult::Keys(keys)],
        };
        assert_eq!(
            answer(vec![marker(0x7e1ec)]).claimed("e", 0x7e1ec),
            ClaimAnswer::Alone(9)
        );
        assert_eq!(
            answer(vec![marker(0x7e1ec), marker(0x8e1ec)]).claimed("e", 0x7e1ec),
            ClaimAnswer::Others(vec![marker(0x8e1ec)], 9)
        );
        let failed = Answer {
            revision: 9,
            succeeded: false,
            results: vec![],
        };
        assert_eq!(failed.claimed("e", 0x7e1ec), ClaimAnswer::KeyGone);
    }

    #[test]
    fn a_release_touches_only_inside_its_own_guard() {
        let next = key(9, true);
        let touch = Touch {
            next: next.clone(),
            guarded: true,
            switchover: None,
        };
        let release = Transaction::release("e", "e/7e1ec", 7, 0x7e1ec, Some(&touch));
        let Some(Op::Txn(nested)) = release.then.last() else {
            panic!("the touch is the release's last operation: {release:?}");
        };
        assert_eq!(nested.when.len(), 2);
        assert!(nested.then.contains(&Op::Refresh { key: next.key }));
        // Our key was not ours: no touch, the markers still written.
        assert!(!release.otherwise.iter().any(|op| matches!(op, Op::Txn(_))));
        let answer = Answer {
            revision: 10,
            succeeded: true,
            results: vec![
                OpResult::Written,
                OpResult::Written,
                OpResult::Written,
                OpResult::Txn(Answer {
                    revision: 10,
                    succeeded: false,
                    results: vec![],
                }),
            ],
        };
        assert!(!answer.touched());
    }
}
