//! What a soak is asked: the backends, its length, the seed, the
//! candidates, the peers; checked before anything starts. A recorded
//! schedule, which asks it all again, is `schedule`'s.

use std::path::PathBuf;
use std::time::Duration;

pub use elect::Backend;
use elect_judge::history::FaultRecord;
use elect_lab::Mode;

/// The shortest soak: long enough for candidates to elect and for a few
/// faults to be dealt and healed.
pub const MIN_DURATION: Duration = Duration::from_secs(30);
/// Candidates per elect election, at most.
pub const MAX_CANDIDATES: usize = 7;
/// Candidates per elect election, at least (Raft-vote needs a majority
/// that survives one fault).
pub const MIN_CANDIDATES: usize = 3;
/// How often the sampler reads /proc.
pub const SAMPLER_PERIOD: Duration = Duration::from_millis(2);
/// How far a candidate's line may lag the store before it contradicts it.
pub const LINE_SLACK: Duration = Duration::from_millis(500);

/// Why a soak could not run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad input, named by its flag: nothing was started.
    #[error("{flag}: {why}")]
    Input { flag: &'static str, why: String },
    /// The lab could not start or fault its ensembles.
    #[error(transparent)]
    Lab(#[from] elect_lab::Error),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A recorded history could not be read.
    #[error("reading the history: {0}")]
    History(#[from] elect_judge::history::ReadError),
    /// A peer's tool could not be prepared.
    #[error("{0}")]
    Peer(String),
}

impl Error {
    pub(crate) fn input(flag: &'static str, why: impl Into<String>) -> Error {
        Error::Input {
            flag,
            why: why.into(),
        }
    }
}

/// A soak to run.
#[derive(Clone, Debug)]
pub struct Options {
    pub backends: Vec<Backend>,
    pub duration: Duration,
    pub seed: u64,
    pub candidates: usize,
    /// Run the peers' tools beside elect.
    pub peers: bool,
    /// Whether the peers' violations change the exit code.
    pub peers_decide: bool,
    /// Where the history and the report go.
    pub report: PathBuf,
    /// Faults to replay instead of drawing them.
    pub replay: Option<Vec<FaultRecord>>,
    pub mode: Mode,
    /// The `elect` binary the candidates run.
    pub bin: PathBuf,
}

impl Options {
    /// Checks what was asked before anything starts.
    ///
    /// Errors: [`Error::Input`] naming the flag.
    pub fn check(&self) -> Result<(), Error> {
        if self.backends.is_empty() {
            return Err(Error::input(
                "--backend",
                "name at least one of etcd, zk, raft",
            ));
        }
        if self.duration < MIN_DURATION {
            return Err(Error::input(
                "--duration",
                format!(
                    "{} is too short: a soak lasts at least {}",
                    humantime::format_duration(self.duration),
                    humantime::format_duration(MIN_DURATION)
                ),
            ));
        }
        if !(MIN_CANDIDATES..=MAX_CANDIDATES).contains(&self.candidates) {
            return Err(Error::input(
                "--candidates",
                format!(
                    "{} candidates: from {MIN_CANDIDATES} to {MAX_CANDIDATES}",
                    self.candidates
                ),
            ));
        }
        if self.peers && self.backends == [Backend::Raft] {
            return Err(Error::input(
                "--peers",
                "the peers' tools run on etcd and ZooKeeper; add --backend etcd or zk",
            ));
        }
        Ok(())
    }
}
