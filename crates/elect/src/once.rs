//! A periodic job (`elect run --once PERIOD`): the command runs once per
//! period across every host started for that period, around
//! [`supervise::run`](crate::supervise::run()). It sits above the backends
//! (the completion records) and the supervision, which know nothing of
//! each other.
//!
//! The protocol, in the order a caller goes through it:
//! 1. [`PeriodicJob::open`], before campaigning: the current period, and
//!    its completion record read; a period done already is left at once,
//!    with nothing campaigned for;
//! 2. campaign, then [`PeriodicJob::turn`]: once elected, the record is
//!    read again in the term that will run the job, and read once more if
//!    leadership changed meanwhile (another leader may have run the job
//!    and written the record in between: found by the soak, seed 4101);
//! 3. [`supervise::run`](crate::supervise::run()) the command only if the turn is
//!    [`Turn::Run`];
//! 4. [`PeriodicJob::complete`], before resigning: a command that exited 0
//!    records the period as done, so the successor our resignation elects
//!    reads it first thing.
//!
//! What each decision is (the period's bounds, the record's name, the
//! turn) is sans-IO, in [`crate::periodic`]; the records' I/O is each
//! backend's (`backend::CompletionRecords`).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use nix::sys::signal::Signal;
use tokio::sync::{mpsc, watch};
use tracing::{info, warn};

use crate::backend::CompletionRecords;
use crate::clock::BootInstant;
use crate::config::ElectionConfig;
use crate::error::Result;
use crate::leadership::Leadership;
use crate::periodic::{self, Period, Turn};
use crate::supervise::Finish;

/// One period's job: its period, and one connection to the completion
/// records for the whole run (the read before campaigning, the read once
/// elected, the write after the job).
pub struct PeriodicJob {
    period: Period,
    records: CompletionRecords,
}

impl PeriodicJob {
    /// The current period of `length` for `election`, and its record:
    /// `None` when the period is done already (nothing to campaign for).
    ///
    /// # Errors
    /// A length out of bounds ([`crate::Error::Config`]); the records
    /// could not be reached or read.
    ///
    /// # Cancel safety
    /// Nothing is held: dropping the future leaves nothing behind.
    pub async fn open(election: &ElectionConfig, length: Duration) -> Result<Option<PeriodicJob>> {
        let period = Period::current(length)?;
        let records = CompletionRecords::open(election).await?;
        if records.completed(&period).await? {
            info!("{period} is done already: not running the command");
            return Ok(None);
        }
        Ok(Some(PeriodicJob { period, records }))
    }

    /// The period this job runs in.
    pub fn period(&self) -> &Period {
        &self.period
    }

    /// The period's start in Unix seconds, for the command's
    /// `ELECT_PERIOD_START` ([`ChildEnv::period_start`](crate::supervise::ChildEnv::period_start)).
    pub fn start_secs(&self) -> Option<u64> {
        let start = self.period.start().duration_since(UNIX_EPOCH).ok()?;
        Some(start.as_secs())
    }

    /// Once elected under `leadership`: whether this term runs the job,
    /// decided in that term. `None` when a shutdown signal on `signals`
    /// or the backend's end came first.
    ///
    /// # Errors
    /// The record could not be read.
    ///
    /// # Cancel safety
    /// Nothing is held: dropping the future leaves nothing behind.
    pub async fn turn(
        &self,
        leadership: &watch::Receiver<Leadership>,
        signals: &mut mpsc::UnboundedReceiver<Signal>,
    ) -> Result<Option<Turn>> {
        loop {
            let Some(term) = elected(leadership.clone(), signals).await else {
                return Ok(None);
            };
            let done = self.records.completed(&self.period).await?;
            let turn = periodic::turn(&self.period, done, SystemTime::now());
            let still = {
                let now = leadership.borrow();
                now.token == term && now.leads_at(BootInstant::now())
            };
            if turn != Turn::Run || still {
                match turn {
                    Turn::Run => {}
                    Turn::AlreadyDone => {
                        info!(
                            "{} was done while we waited: not running the command",
                            self.period
                        )
                    }
                    Turn::PeriodOver => {
                        info!(
                            "{} ended before we led: not running the command",
                            self.period
                        )
                    }
                }
                return Ok(Some(turn));
            }
            info!(
                "leadership changed while we read {}'s record: reading it again",
                self.period
            );
        }
    }

    /// After the command, before resigning: records the period as done if
    /// the command completed (exited 0). A record that cannot be written
    /// is a warning: another host may run the job again.
    ///
    /// # Errors
    /// None: a failed write is logged, not returned.
    ///
    /// # Cancel safety
    /// Dropping the future may leave the record unwritten, as a failed
    /// write does.
    pub async fn complete(&self, finish: &Finish) {
        if *finish != Finish::Exited(0) {
            return;
        }
        let period = &self.period;
        match self.records.record(period).await {
            Ok(()) => info!("{period} is recorded as done"),
            Err(e) => warn!(
                "the command completed but {period} could not be recorded as done ({e}): another host may run it again"
            ),
        }
    }
}

/// Waits until this candidate leads; the token of the term, `None` when
/// a shutdown signal or the backend's end came first.
async fn elected(
    mut leadership: watch::Receiver<Leadership>,
    signals: &mut mpsc::UnboundedReceiver<Signal>,
) -> Option<Option<u64>> {
    tokio::select! {
        led = leadership.wait_for(|l| l.leads_at(BootInstant::now())) => led.ok().map(|l| l.token),
        sig = signals.recv() => {
            info!("{sig:?} before we led: leaving");
            None
        }
    }
}
