//! `elect observe`: report leadership changes without campaigning.

use clap::Args;
use elect::backend;
use elect::config::ElectionConfig;
use elect::export::{Exports, OutputConfig};

use crate::args::{ElectionArgs, ExportArgs, FormatArgs};
use crate::runtime::{context, on_workers, shutdown_signals, unless_stopped};
use crate::usage::Result;

#[derive(Debug, Args)]
pub struct ObserveArgs {
    #[command(flatten)]
    election: ElectionArgs,
    #[command(flatten)]
    export: ExportArgs,
    #[command(flatten)]
    format: FormatArgs,
}

/// A validated `elect observe`.
#[derive(Debug)]
pub struct Request {
    pub election: ElectionConfig,
    pub output: OutputConfig,
}

impl ObserveArgs {
    pub fn validate(self) -> Result<Request> {
        Ok(Request {
            election: self.election.follower_config()?,
            output: self.export.output(self.format.format)?,
        })
    }
}

pub fn run(request: Request) -> anyhow::Result<u8> {
    on_workers(observe(request))
}

async fn observe(Request { election, output }: Request) -> anyhow::Result<u8> {
    let mut shutdown = shutdown_signals()?;
    let exports = Exports::prepare(context(&election), output).await?;
    let Ok(observation) = unless_stopped(&mut shutdown, backend::observe(&election)).await else {
        return Ok(0);
    };
    let observation = observation?;
    let running = exports.start(observation.leadership());
    shutdown.recv().await;
    drop(observation);
    running.abort();
    Ok(0)
}
