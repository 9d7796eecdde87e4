//! `elect campaign`: campaign for leadership and report changes; resign
//! on SIGINT, SIGTERM, SIGHUP, SIGQUIT or SIGTSTP.

use anyhow::Context as _;
use clap::{ArgMatches, Args};
use elect::backend;
use elect::config::ElectionConfig;
use elect::export::{Exports, OutputConfig};

use crate::args::{CandidateArgs, ElectionArgs, ExportArgs, FormatArgs};
use crate::runtime::{context, on_workers, resign, shutdown_signals, unless_stopped};
use crate::usage::Result;

#[derive(Debug, Args)]
pub struct CampaignArgs {
    #[command(flatten)]
    election: ElectionArgs,
    #[command(flatten)]
    candidate: CandidateArgs,
    #[command(flatten)]
    export: ExportArgs,
    #[command(flatten)]
    format: FormatArgs,
}

/// A validated `elect campaign`.
#[derive(Debug)]
pub struct Request {
    pub election: ElectionConfig,
    pub output: OutputConfig,
}

impl CampaignArgs {
    pub fn validate(self, matches: &ArgMatches, warnings: &mut Vec<String>) -> Result<Request> {
        Ok(Request {
            election: self
                .election
                .candidate_config(&self.candidate, matches, warnings)?,
            output: self.export.output(self.format.format)?,
        })
    }
}

pub fn run(request: Request) -> anyhow::Result<u8> {
    on_workers(campaign(request))
}

async fn campaign(Request { election, output }: Request) -> anyhow::Result<u8> {
    let mut shutdown = shutdown_signals()?;
    let exports = Exports::prepare(context(&election), output).await?;
    // The work done under our leadership is saying so: a successor waits
    // for the line (and leader file) saying we no longer lead.
    let (work, work_watch) = elect::work::channel();
    let Ok(campaign) =
        unless_stopped(&mut shutdown, backend::campaign(&election, work_watch)).await
    else {
        return Ok(0);
    };
    let campaign = campaign?;
    let running = exports.start_as_work(campaign.leadership(), campaign.health(), work);
    let mut leadership = campaign.leadership();
    tokio::select! {
        sig = shutdown.recv() => match sig {
            Some(sig) => tracing::info!("{sig}: resigning"),
            None => tracing::info!("resigning"),
        },
        // The campaign task publishes until it ends; ending by itself is a failure.
        _ = async { while leadership.changed().await.is_ok() {} } => {}
    }
    resign(campaign, running.metrics()).await?;
    running.finish().await.context("exporter")?;
    Ok(0)
}
