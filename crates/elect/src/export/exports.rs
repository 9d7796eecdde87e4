//! [`Exports`]: the exporters of one election, prepared (the HTTP port
//! bound) before the backend is contacted, then started on its snapshots.

use std::sync::Arc;

use tokio::sync::watch;

use super::exporter::{OutputConfig, run};
#[cfg(feature = "http")]
use super::http;
#[cfg(feature = "metrics")]
use super::metrics::Metrics;
#[cfg(not(feature = "metrics"))]
use super::no_metrics::Metrics;
use super::view::{Context, Exported};
use crate::leadership::Leadership;
use crate::steer::Standing;
use crate::work::Work;

/// The exporters of one election: lines, leader file, metrics and, when
/// asked, the HTTP server. [`Exports::prepare`] binds the HTTP port before
/// the backend is contacted, so a taken port fails before anything is
/// created; [`Exports::start`] follows a backend's snapshots.
pub struct Exports {
    metrics: Arc<Metrics>,
    #[cfg(feature = "http")]
    listener: Option<tokio::net::TcpListener>,
    ctx: Context,
    output: OutputConfig,
}

/// The running exporters of [`Exports::start`].
pub struct Running {
    exporter: tokio::task::JoinHandle<()>,
    #[cfg(feature = "http")]
    server: Option<tokio::task::JoinHandle<()>>,
    metrics: Arc<Metrics>,
}

impl Exports {
    /// Prepares the exporters of `output` for the election `ctx` names.
    ///
    /// # Errors
    /// [`Error::Config`](crate::Error::Config) naming `leader_file` when
    /// the leader file's path is not one elect may replace (see
    /// [`crate::input::check_writable_file`]); the HTTP address cannot be
    /// bound.
    ///
    /// # Cancel safety
    /// Cancel safe: nothing is left behind.
    pub async fn prepare(ctx: Context, output: OutputConfig) -> crate::Result<Exports> {
        if let Some(path) = &output.leader_file {
            super::leader_file::check(path)?;
        }
        #[cfg(feature = "http")]
        let listener = match output.http {
            Some(addr) => Some(http::bind(addr).await?),
            None => None,
        };
        Ok(Exports {
            metrics: Arc::new(Metrics::with_containment(ctx.containment)),
            #[cfg(feature = "http")]
            listener,
            ctx,
            output,
        })
    }

    /// Starts exporting what `leadership` says.
    pub fn start(self, leadership: watch::Receiver<Leadership>) -> Running {
        self.start_with_health(leadership, None)
    }

    /// Starts exporting what `leadership` says, and with a health check
    /// (see [`crate::backend::Campaign::health`]) whether it passes.
    pub fn start_with_health(
        self,
        leadership: watch::Receiver<Leadership>,
        health: Option<watch::Receiver<Standing>>,
    ) -> Running {
        self.spawn(leadership, health, None)
    }

    /// Like [`Exports::start_with_health`], the lines being the leader-only
    /// work `work` reports (see [`run`]): a campaign given its
    /// [`WorkWatch`](crate::work::WorkWatch) gives way only once the line
    /// saying it no longer leads is written. What `elect campaign` does.
    pub fn start_as_work(
        self,
        leadership: watch::Receiver<Leadership>,
        health: Option<watch::Receiver<Standing>>,
        work: Work,
    ) -> Running {
        self.spawn(leadership, health, Some(work))
    }

    fn spawn(
        self,
        leadership: watch::Receiver<Leadership>,
        health: Option<watch::Receiver<Standing>>,
        work: Option<Work>,
    ) -> Running {
        #[cfg_attr(not(feature = "http"), allow(unused_variables))]
        let (state, exported) = Exported::channel();
        #[cfg(feature = "http")]
        let server = self.listener.map(|listener| {
            tokio::spawn(http::serve(
                listener,
                exported,
                self.metrics.clone(),
                self.ctx.clone(),
            ))
        });
        let exporter = tokio::spawn(run(
            leadership,
            health,
            self.ctx,
            self.output,
            self.metrics.clone(),
            state,
            work,
        ));
        Running {
            exporter,
            #[cfg(feature = "http")]
            server,
            metrics: self.metrics,
        }
    }
}

impl Running {
    /// The metrics being exported (e.g. to record a handover's time).
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Waits for the exporter to write what the backend last said (it ends
    /// when the backend's sender is gone), then stops serving HTTP.
    ///
    /// # Errors
    /// The exporter panicked.
    ///
    /// # Cancel safety
    /// Cancel safe: the exporter goes on (dropping [`Running`] does not
    /// stop it; [`Running::abort`] does).
    pub async fn finish(self) -> Result<(), tokio::task::JoinError> {
        let result = self.exporter.await;
        #[cfg(feature = "http")]
        if let Some(server) = self.server {
            server.abort();
        }
        result
    }

    /// Stops at once.
    pub fn abort(self) {
        self.exporter.abort();
        #[cfg(feature = "http")]
        if let Some(server) = self.server {
            server.abort();
        }
    }
}
