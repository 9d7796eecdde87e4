//! `elect-raft`: the Raft-vote state machine of `elect`, sans I/O.
//!
//! No clock, socket, disk, runtime or global RNG: a [`Node`] is fed time
//! and messages and says what to persist and send. The library `elect`
//! drives it with tokio, TCP and an fsynced file; `elect-sim` drives it in
//! a deterministic simulator; the model check (`tests/model_raft.rs`)
//! explores it with stateright. All three run this code unchanged, like
//! quinn-proto beside quinn.
//!
//! Only Raft's leader election, no log: terms, votes, PreVote, CheckQuorum,
//! a leader lease and leadership transfer. The node is fed [`Node::tick`]
//! and [`Node::step`] with the current time (any monotonic origin) and
//! returns a [`Ready`]: the hard state to persist (before any message is
//! sent) and the messages to send. It owns no clock, socket or global RNG,
//! so the same code runs in the tokio driver and in the deterministic
//! simulator of the tests.
//!
//! Safety of the lease: a leader acts as leader only until `t + T x (1 -
//! drift)`, where `t` is the send time of the last heartbeat round a
//! majority acknowledged (before the first, of the vote requests that
//! elected it) and `T` the election timeout. Every peer that acknowledged
//! that round (or granted that vote) heard the leader at or after `t` and
//! refuses (pre)votes for `T` after hearing it, and any majority that could
//! elect someone else includes one of them; so nobody else can lead before
//! `t + T`, give or take clock-rate error, which the drift margin covers.
//! A peer that restarts forgets whom it heard, so it refuses (pre)votes for
//! `T` after starting. The one exception, a TimeoutNow transfer, is sent
//! only by a leader that has already given its lease up.
//!
//! Next-in-line succession: the leader ranks its followers, the one that
//! acknowledged the newest heartbeat round first (then the quickest to do
//! so), and sends the order with every heartbeat. When the leader falls
//! silent, the first in line campaigns as soon as the voters' lease can
//! have run out (T after the last heartbeat it heard, plus a margin of
//! `drift x T` for clock rate and delivery), the second one stagger (a
//! heartbeat interval) later, everyone else after both, with a randomised
//! timeout as before. Only *when* a peer campaigns changes: votes,
//! PreVote, CheckQuorum, the lease and the transfer are untouched, so the
//! argument above holds whatever order a peer believes; a stale order (a
//! partition, a leader that died mid-change) costs at worst a split vote,
//! which the randomised timeouts resolve. Without a published order (the
//! first election), everyone draws from [T, 2T) as Raft does.
//!
//! Votes cast ahead ([`Pledge`]): the first in line writes, with its reply
//! to that heartbeat, a vote for itself in the next term, and the leader
//! writes, once that follower has answered, its own vote there for the
//! same follower. Both writes happen while nothing waits on the disk, so
//! a transfer's campaign finds two votes durable already (with three
//! peers, a majority) and waits for no disk at all. A pledge is a vote
//! like any other (nobody else gets ours in that term). One made by this
//! run and not used yet may be taken back or moved; one found on disk at
//! start may have been used, so it stands, and our next campaign skips
//! its term (see `Node::pledge_next_term`).

mod config;
mod message;
mod node;

pub use config::Config;
#[cfg(feature = "model-check")]
pub use config::Mutation;
pub use message::{HardState, Message, Pledge};
pub use node::{Node, Ready, Role, Status, Time};
