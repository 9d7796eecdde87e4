//! What peers send each other, and what each keeps on disk.

use serde::{Deserialize, Serialize};

/// What peers tell each other. Every message carries the sender's term
/// (for votes: the term being asked for).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Message {
    /// "Would you vote for me in `term`?", without anyone changing term.
    PreVote {
        /// The term the sender would campaign in.
        term: u64,
    },
    /// The answer to a [`Message::PreVote`].
    PreVoteReply {
        /// The term asked about.
        term: u64,
        /// Whether the sender would vote.
        granted: bool,
    },
    /// A real vote request; `transfer` campaigns (after TimeoutNow) pass
    /// the lease check, because the old leader gave its lease up.
    Vote {
        /// The term the sender campaigns in.
        term: u64,
        /// Whether this campaign follows a TimeoutNow.
        transfer: bool,
    },
    /// The answer to a [`Message::Vote`].
    VoteReply {
        /// The voter's term.
        term: u64,
        /// Whether the vote was given (and persisted).
        granted: bool,
    },
    /// The leader's heartbeat round `round`.
    Heartbeat {
        /// The leader's term.
        term: u64,
        /// The round, counted by the leader.
        round: u64,
        /// Who takes over if the leader falls silent, first in line first.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        successors: Vec<String>,
    },
    /// A follower's acknowledgement of a heartbeat round.
    HeartbeatReply {
        /// The follower's term.
        term: u64,
        /// The round acknowledged.
        round: u64,
    },
    /// "Campaign now": leadership transfer from a leader stepping down.
    TimeoutNow {
        /// The stepping-down leader's term.
        term: u64,
    },
}

impl Message {
    /// The term the message carries.
    pub fn term(&self) -> u64 {
        match *self {
            Message::PreVote { term }
            | Message::PreVoteReply { term, .. }
            | Message::Vote { term, .. }
            | Message::VoteReply { term, .. }
            | Message::Heartbeat { term, .. }
            | Message::HeartbeatReply { term, .. }
            | Message::TimeoutNow { term } => term,
        }
    }
}

/// What must be on disk before a vote reply leaves the node.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct HardState {
    /// The latest term this node has seen.
    pub term: u64,
    /// Whom it voted for in that term.
    pub voted_for: Option<String>,
    /// Our vote in a later term, cast ahead (see [`Pledge`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pledge: Option<Pledge>,
}

/// A vote cast ahead for the next term, before anyone asks for it: by the
/// first in line for itself (its *claim* on that term), and by the leader
/// for the first in line that has answered it, so that a transfer's
/// campaign needs no write on either side. It binds as a vote does:
/// nobody else gets ours in that term. It becomes the vote of
/// [`HardState::voted_for`] when the node enters that term.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Pledge {
    /// The term the vote is for.
    pub term: u64,
    /// Whom it is for.
    pub candidate: String,
}
