//! Leader-only periodic jobs: a job that N hosts start on every tick (from
//! cron, a systemd timer, a Kubernetes CronJob) runs once per period, not
//! once per host.
//!
//! Electing a leader is not enough for that: the waiting candidates each
//! get their turn once the leader finishes, so without a memory the job
//! runs up to N times per tick. The memory is a *completion record*, one
//! per period, kept in the election's own store (an etcd key on a lease,
//! a ZooKeeper znode) for a bounded time: the period and one more, so a
//! host whose clock lags a tick still finds the previous record. This
//! module holds what needs no I/O: which period a start belongs to, what
//! its record is called, how long it is kept, and what a candidate that
//! has just been elected does; the backends read and write the records
//! (`backend::CompletionRecords`, with the etcd or zk feature).
//!
//! # What it promises
//! A record is written only after the command exited 0, so a run that
//! fails, or whose leader dies or loses leadership mid-job (the command is
//! then killed before anyone else can lead), leaves no record and the
//! next candidate runs the job within the period. Exactly once holds when
//! the leader that finished also writes its record; a leader that dies
//! between its command's exit and the record's write leaves the job to be
//! run again: the guarantee is *at least once, and once in every ordinary
//! period*. A job that must never run twice checks the fencing token
//! (`ELECT_TOKEN`) against what it writes.
//!
//! Periods are aligned to the Unix epoch: a period of one hour starts on
//! every full hour of UTC. A host belongs to the period in which *its*
//! clock says it started, as cron itself does; schedule the ticks away
//! from a period's boundary by more than the hosts' clocks disagree.
//!
//! The Raft-vote backend has no shared store to keep a record in: its
//! candidates are long-lived peers, so a periodic job runs as a long-lived
//! `elect run` whose command schedules the job itself.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::{Error, Result};

/// The shortest period: records are named by whole seconds.
pub const MIN_PERIOD: Duration = Duration::from_secs(1);

/// The longest period (a leap year), so a record's lifetime fits every
/// store's TTL.
pub const MAX_PERIOD: Duration = Duration::from_secs(366 * 24 * 3600);

/// One period of a periodic job: `[start, start + length)` of Unix time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Period {
    start_secs: u64,
    length_secs: u64,
}

impl Period {
    /// The period of `length` that contains `now`.
    ///
    /// # Errors
    /// [`Error::Config`] naming `once` when `length` is not whole seconds
    /// between [`MIN_PERIOD`] and [`MAX_PERIOD`], or `now` is before 1970.
    pub fn containing(now: SystemTime, length: Duration) -> Result<Period> {
        Self::check_length(length)?;
        let since_epoch = now.duration_since(UNIX_EPOCH).map_err(|_| Error::Config {
            field: "once",
            reason: "the clock is before 1970".to_owned(),
        })?;
        let length_secs = length.as_secs();
        Ok(Period {
            start_secs: since_epoch.as_secs() / length_secs * length_secs,
            length_secs,
        })
    }

    /// Checks a period's length as [`containing`](Self::containing) does,
    /// before any period is taken.
    ///
    /// # Errors
    /// [`Error::Config`] naming `once` when `length` is not whole seconds
    /// between [`MIN_PERIOD`] and [`MAX_PERIOD`].
    pub fn check_length(length: Duration) -> Result<()> {
        if !(MIN_PERIOD..=MAX_PERIOD).contains(&length) || length.subsec_nanos() != 0 {
            return Err(Error::Config {
                field: "once",
                reason: format!("a period must be whole seconds from 1s to 366d, not {length:?}"),
            });
        }
        Ok(())
    }

    /// The period that contains the present instant.
    ///
    /// # Errors
    /// As [`containing`](Self::containing).
    pub fn current(length: Duration) -> Result<Period> {
        Self::containing(SystemTime::now(), length)
    }

    /// The record's name: the period's start in Unix seconds, zero-padded
    /// so names sort as periods do.
    pub fn record_name(&self) -> String {
        format!("{:012}", self.start_secs)
    }

    /// When the period starts.
    pub fn start(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(self.start_secs)
    }

    /// When the period ends (and the next starts).
    pub fn end(&self) -> SystemTime {
        self.start() + self.length()
    }

    /// The period's length.
    pub fn length(&self) -> Duration {
        Duration::from_secs(self.length_secs)
    }

    /// Until when the period's record is kept: the period and one more,
    /// so a host whose clock lags the tick still finds the last record.
    pub fn keep_until(&self) -> SystemTime {
        self.end() + self.length()
    }

    /// How long a record written at `now` must live to be kept until
    /// [`keep_until`](Self::keep_until) (at least one second).
    pub fn keep_for(&self, now: SystemTime) -> Duration {
        self.keep_until()
            .duration_since(now)
            .unwrap_or_default()
            .max(Duration::from_secs(1))
    }

    /// Whether a record named `name` (another period's, of the same
    /// length) is past its keeping at `now`; names that are not records
    /// are left alone.
    pub fn record_expired(name: &str, length: Duration, now: SystemTime) -> bool {
        let Ok(start_secs) = name.parse::<u64>() else {
            return false;
        };
        let record = Period {
            start_secs,
            length_secs: length.as_secs().max(1),
        };
        record.keep_until() <= now
    }
}

impl std::fmt::Display for Period {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the period of {}s starting at {} (Unix time)",
            self.length_secs, self.start_secs
        )
    }
}

/// What a candidate does once elected, by what it has just read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turn {
    /// No record and the period still runs: start the job.
    Run,
    /// The job has completed in this period: resign and leave.
    AlreadyDone,
    /// The period ended while we waited, its job not done: leave it to
    /// the next period's candidates rather than run late.
    PeriodOver,
}

/// The decision of a candidate elected at `now` in `period`, having read
/// whether the period's record exists. A record wins over a period that
/// is over: the job did run.
pub fn turn(period: &Period, record_exists: bool, now: SystemTime) -> Turn {
    if record_exists {
        Turn::AlreadyDone
    } else if now >= period.end() {
        Turn::PeriodOver
    } else {
        Turn::Run
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn a_period_is_aligned_to_the_epoch() {
        let hour = Duration::from_secs(3600);
        let p = Period::containing(at(7200 + 1799), hour).unwrap();
        assert_eq!(p.start(), at(7200));
        assert_eq!(p.end(), at(10800));
        assert_eq!(p.record_name(), "000000007200");
        // Every start within it names the same record; the next tick does not.
        assert_eq!(Period::containing(at(10799), hour).unwrap(), p);
        assert_ne!(Period::containing(at(10800), hour).unwrap(), p);
    }

    #[test]
    fn records_are_kept_one_period_past_theirs() {
        let minute = Duration::from_secs(60);
        let p = Period::containing(at(125), minute).unwrap();
        assert_eq!(p.keep_until(), at(240));
        assert_eq!(p.keep_for(at(125)), Duration::from_secs(115));
        assert_eq!(p.keep_for(at(500)), Duration::from_secs(1));
        assert!(!Period::record_expired("000000000120", minute, at(239)));
        assert!(Period::record_expired("000000000120", minute, at(240)));
        assert!(!Period::record_expired("not-a-record", minute, at(9999)));
    }

    #[test]
    fn lengths_outside_the_bounds_are_refused() {
        for bad in [
            Duration::ZERO,
            Duration::from_millis(1500),
            MAX_PERIOD + Duration::from_secs(1),
        ] {
            let err = Period::containing(at(0), bad).unwrap_err();
            assert!(matches!(err, Error::Config { field: "once", .. }), "{err}");
        }
    }

    #[test]
    fn an_elected_candidate_runs_only_an_undone_current_period() {
        let p = Period::containing(at(60), Duration::from_secs(60)).unwrap();
        assert_eq!(turn(&p, false, at(90)), Turn::Run);
        assert_eq!(turn(&p, true, at(90)), Turn::AlreadyDone);
        assert_eq!(turn(&p, false, at(120)), Turn::PeriodOver);
        assert_eq!(turn(&p, true, at(130)), Turn::AlreadyDone);
    }
}
