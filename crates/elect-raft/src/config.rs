//! A node's fixed settings, and (feature `model-check`, the model check's
//! build only) the rules a model check may switch off.

use std::time::Duration;

/// A node's fixed settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// This node's id.
    pub id: String,
    /// Every peer's id, this one included.
    pub peers: Vec<String>,
    /// T: timeouts are drawn from [T, 2T).
    pub election_timeout: Duration,
    /// T/10 by default.
    pub heartbeat_interval: Duration,
    /// Fraction of T the lease gives up for clock-rate error.
    pub lease_drift: f64,
    /// Seeds the randomized timeouts (a simulator makes runs repeatable).
    pub seed: u64,
    /// A safety rule switched off, for the model checker's teeth tests
    /// only: they show the checker finds what each rule prevents.
    #[cfg(feature = "model-check")]
    pub mutation: Option<Mutation>,
}

/// A safety rule of the core switched off (see [`Config::mutation`]).
#[cfg(feature = "model-check")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mutation {
    /// A voter grants a second candidate in the same term.
    NoDoubleVoteCheck,
    /// A voter grants votes while it has heard a leader within T (the
    /// voter side of the lease).
    NoVoterLease,
    /// PreVotes are granted while a leader is heard (PreVote's lease
    /// check), so a peer that missed heartbeats raises the term.
    NoPreVoteLease,
    /// A leader that has heard no majority for T keeps leading
    /// (CheckQuorum's step-down).
    NoCheckQuorum,
    /// Entering a pledged term leaves the vote free (the pledge does
    /// not bind as a vote).
    PledgeNotBinding,
    /// A pledge found on disk at start is taken for this run's, so it
    /// may be moved or taken back, and a campaign relies on it.
    DiskPledgeAsOwn,
    /// A PreVote round of ours goes on after we granted a vote (the rule
    /// before the model checker found the overlap it allows).
    PreVoteRoundOutlivesVote,
    /// A leader within its lease steps down on a reply of a higher term
    /// (the rule before the model checker found the spurious loss).
    DeposedInLease,
}

impl Config {
    /// The rule switched off, as a value every build has (`None` but in a
    /// model check): what equality and hashing compare.
    fn mutation(&self) -> Option<u8> {
        #[cfg(feature = "model-check")]
        return self.mutation.map(|m| m as u8);
        #[cfg(not(feature = "model-check"))]
        None
    }

    /// Settings with heartbeats every T/10 and a 5% lease drift margin.
    pub fn new(id: &str, peers: &[String], election_timeout: Duration, seed: u64) -> Config {
        Config {
            id: id.to_owned(),
            peers: peers.to_vec(),
            election_timeout,
            heartbeat_interval: election_timeout / 10,
            lease_drift: 0.05,
            seed,
            #[cfg(feature = "model-check")]
            mutation: None,
        }
    }
}

// By value, the drift by its bits: a node is equal to another only with
// the same settings.
impl PartialEq for Config {
    fn eq(&self, other: &Config) -> bool {
        (
            &self.id,
            &self.peers,
            self.election_timeout,
            self.heartbeat_interval,
        ) == (
            &other.id,
            &other.peers,
            other.election_timeout,
            other.heartbeat_interval,
        ) && self.lease_drift.to_bits() == other.lease_drift.to_bits()
            && self.seed == other.seed
            && self.mutation() == other.mutation()
    }
}

impl Eq for Config {}

impl std::hash::Hash for Config {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (
            &self.id,
            &self.peers,
            self.election_timeout,
            self.heartbeat_interval,
        )
            .hash(state);
        (self.lease_drift.to_bits(), self.seed, self.mutation()).hash(state);
    }
}

/// Whether a model check switched `rule` off in `cfg`: never, but in the
/// model check's build (feature `model-check`).
#[cfg(feature = "model-check")]
macro_rules! switched_off {
    ($cfg:expr, $rule:ident) => {
        $cfg.mutation == Some(crate::config::Mutation::$rule)
    };
}
#[cfg(not(feature = "model-check"))]
macro_rules! switched_off {
    ($cfg:expr, $rule:ident) => {
        false
    };
}
pub(crate) use switched_off;
