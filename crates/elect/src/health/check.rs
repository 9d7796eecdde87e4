//! Running the health check: a command under the watchdog, or an HTTP
//! GET, each bounded by the interval (see [`crate::health`]).

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use super::gate::Gate;
use crate::clock::BootInstant;
use crate::error::{Error, Result};
use crate::supervise::child::{Child, Ended};
use crate::supervise::run::resolve_containment;
use crate::supervise::{Containment, Level};

/// What to run to learn whether this host may lead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// A shell command (`/bin/sh -c`): exit status 0 passes. It runs under
    /// the watchdog, contained like `elect run`'s command, killed whole at
    /// the end of the interval.
    Command {
        /// The shell command.
        command: String,
        /// The `elect` executable the watchdog is started from (see
        /// [`crate::supervise`]'s embedding note).
        watchdog: PathBuf,
        /// How its tree is held (resolved once, when the monitor starts).
        containment: Containment,
    },
    /// An `http://` URL: an answer with a 2xx status passes.
    Url(HttpUrl),
}

/// An `http://host:port/path` a health check GETs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpUrl {
    authority: String,
    path: String,
}

impl HttpUrl {
    /// Parses `url`: `http://` only (a local health endpoint; no TLS),
    /// with a host and an optional port and path.
    ///
    /// Errors: [`Error::Config`] naming `health_url`.
    pub fn parse(url: &str) -> Result<HttpUrl> {
        let bad = |why: &str| Error::config("health_url", format!("{url:?}: {why}"));
        let rest = url.strip_prefix("http://").ok_or_else(|| {
            bad("give an http:// URL (a local health endpoint; https is not offered)")
        })?;
        let (authority, path) = match rest.find('/') {
            Some(at) => (&rest[..at], &rest[at..]),
            None => (rest, "/"),
        };
        if authority.is_empty()
            || authority.contains('@')
            || authority.chars().any(char::is_whitespace)
        {
            return Err(bad("give a host, and a port if not 80"));
        }
        let port = match authority.strip_prefix('[') {
            // An IPv6 literal: `[::1]` or `[::1]:8080`.
            Some(v6) => v6.split_once(']').map(|(_, rest)| rest.strip_prefix(':')),
            None => Some(authority.rsplit_once(':').map(|(_, port)| port)),
        };
        match port {
            None => return Err(bad("an IPv6 address without its closing `]`")),
            Some(Some(port)) if port.parse::<u16>().is_err() => {
                return Err(bad("the port is not a number from 0 to 65535"));
            }
            Some(_) => {}
        }
        if path.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(bad("the path has a space or a control character"));
        }
        Ok(HttpUrl {
            authority: authority.to_owned(),
            path: path.to_owned(),
        })
    }

    /// Where to connect: `host:port`, port 80 unless given.
    fn address(&self) -> String {
        let has_port = match self.authority.strip_prefix('[') {
            Some(v6) => v6.contains("]:"),
            None => self.authority.contains(':'),
        };
        match has_port {
            true => self.authority.clone(),
            false => format!("{}:80", self.authority),
        }
    }
}

/// A health check and how it gates: every `interval` (which also bounds
/// each check), unhealthy after `failures` failed checks in a row,
/// healthy again after passing for `backoff`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthConfig {
    pub(crate) check: Check,
    pub(crate) interval: Duration,
    pub(crate) failures: u32,
    pub(crate) backoff: Duration,
}

impl HealthConfig {
    /// `check` every 5 s, unhealthy after 3 failures, healthy again
    /// after passing for 10 s (the default failback delay).
    pub fn new(check: Check) -> HealthConfig {
        HealthConfig {
            check,
            interval: Duration::from_secs(5),
            failures: 3,
            backoff: Duration::from_secs(10),
        }
    }

    /// How often the check runs, and how long one may take.
    ///
    /// Errors: [`Error::Config`] naming `health_interval` below 100 ms or
    /// above an hour.
    pub fn with_interval(mut self, interval: Duration) -> Result<Self> {
        if interval < Duration::from_millis(100) || interval > Duration::from_secs(3600) {
            return Err(Error::config(
                "health_interval",
                format!(
                    "{}: give between 100ms and 1h",
                    humantime::format_duration(interval)
                ),
            ));
        }
        self.interval = interval;
        Ok(self)
    }

    /// How many failed checks in a row make the candidate unhealthy.
    ///
    /// Errors: [`Error::Config`] naming `health_failures` outside 1 to 100.
    pub fn with_failures(mut self, failures: u32) -> Result<Self> {
        if !(1..=100).contains(&failures) {
            return Err(Error::config(
                "health_failures",
                format!("{failures}: give a whole number from 1 to 100"),
            ));
        }
        self.failures = failures;
        Ok(self)
    }

    /// How long an unhealthy candidate's checks must pass before it
    /// counts as healthy again (the CLI gives the failback delay).
    pub fn with_backoff(mut self, backoff: Duration) -> Self {
        self.backoff = backoff;
        self
    }

    /// The interval.
    pub fn interval(&self) -> Duration {
        self.interval
    }
}

impl Check {
    /// The shell command `command`, run by this executable's watchdog
    /// (the host binary must hand the watchdog's invocations over: see
    /// [`crate::supervise`]), its tree held as `--contain auto` holds a
    /// command's.
    ///
    /// Errors: [`Error::Io`] when this executable cannot be found.
    pub fn command(command: &str) -> Result<Check> {
        let watchdog = std::env::current_exe()
            .map_err(|e| Error::io("finding this executable, the health check's watchdog", e))?;
        Ok(Check::Command {
            command: command.to_owned(),
            watchdog,
            containment: Containment::Auto,
        })
    }

    /// Resolves a command's containment once (a throwaway process tries
    /// it): the check as [`Resolved::passes`] runs it.
    async fn resolved(self) -> Result<Resolved> {
        match self {
            Check::Command {
                command,
                watchdog,
                containment,
            } => {
                let level = resolve_containment(containment, watchdog.clone())
                    .await?
                    .level;
                Ok(Resolved::Command {
                    command,
                    watchdog,
                    level,
                })
            }
            Check::Url(url) => Ok(Resolved::Url(url)),
        }
    }
}

/// A check ready to run: a command's containment resolved.
enum Resolved {
    Command {
        command: String,
        watchdog: PathBuf,
        level: Level,
    },
    Url(HttpUrl),
}

impl Resolved {
    /// Runs the check once, for at most `within`: whether it passed.
    async fn passes(&self, within: Duration) -> bool {
        match self {
            Resolved::Command {
                command,
                watchdog,
                level,
            } => run_command(command, watchdog, *level, within).await,
            Resolved::Url(url) => match tokio::time::timeout(within, get(url)).await {
                Ok(Ok(status)) => (200..300).contains(&status),
                Ok(Err(e)) => {
                    debug!("health check GET {}{}: {e}", url.authority, url.path);
                    false
                }
                Err(_) => {
                    debug!(
                        "health check GET {}{}: no answer in time",
                        url.authority, url.path
                    );
                    false
                }
            },
        }
    }
}

/// The command under the watchdog, its deadline the end of `within`:
/// the watchdog kills its whole tree then, whatever happens to us.
async fn run_command(
    command: &str,
    watchdog: &std::path::Path,
    level: Level,
    within: Duration,
) -> bool {
    let argv: Vec<OsString> = ["/bin/sh", "-c", command].map(OsString::from).into();
    let deadline = BootInstant::now() + within;
    let spawned = Child::spawn(watchdog, &argv, &[], Duration::ZERO, level, deadline, true).await;
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => {
            warn!("starting the health check: {e}");
            return false;
        }
    };
    match child.ended().await {
        Ended::Command(0) => true,
        Ended::Command(code) => {
            debug!(code, "health check failed");
            false
        }
        Ended::WatchdogKilled(sig) => {
            warn!(signal = sig, "the health check's watchdog was killed");
            false
        }
    }
}

/// One HTTP/1.1 GET of `url`: the answer's status.
async fn get(url: &HttpUrl) -> std::result::Result<u16, Box<dyn std::error::Error + Send + Sync>> {
    let stream = tokio::net::TcpStream::connect(url.address()).await?;
    let io = hyper_util::rt::TokioIo::new(stream);
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io).await?;
    let driven = tokio::spawn(connection);
    let request = hyper::Request::get(url.path.as_str())
        .header(hyper::header::HOST, url.authority.as_str())
        .header(hyper::header::USER_AGENT, "elect-health-check")
        .body(http_body_util::Empty::<hyper::body::Bytes>::new())?;
    let answer = sender.send_request(request).await;
    driven.abort();
    Ok(answer?.status().as_u16())
}

/// Runs `cfg`'s check at once, then every interval, through its
/// [`Gate`]: `changed` is called with the first verdict before this
/// returns it, then by the returned task with each change (until
/// aborted).
///
/// # Errors
/// A command's containment cannot be resolved; a check that cannot
/// start later is a failed check.
///
/// # Cancel safety
/// Cancel safe: a check cut off by the drop is killed by its watchdog at
/// its deadline.
pub async fn monitor(
    cfg: HealthConfig,
    mut changed: impl FnMut(bool) + Send + 'static,
) -> Result<(bool, JoinHandle<()>)> {
    let mut gate = Gate::new(cfg.failures, cfg.backoff);
    let check = cfg.check.clone().resolved().await?;
    let first = gate.observe(BootInstant::now(), check.passes(cfg.interval).await);
    info!(healthy = first, "health check: first verdict");
    changed(first);
    let task = tokio::spawn(async move {
        let mut healthy = first;
        let mut ticks = tokio::time::interval(cfg.interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticks.tick().await;
        loop {
            ticks.tick().await;
            let passed = check.passes(cfg.interval).await;
            let now = gate.observe(BootInstant::now(), passed);
            if now != healthy {
                match now {
                    true => info!("health check: healthy again"),
                    false => warn!(failures = cfg.failures, "health check: unhealthy"),
                }
                healthy = now;
                changed(now);
            } else if !passed {
                debug!("health check failed");
            }
        }
    });
    Ok((first, task))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_urls_are_http_with_a_host_and_a_numeric_port() {
        let url = HttpUrl::parse("http://127.0.0.1:8080/healthz?deep=1").unwrap();
        assert_eq!(url.address(), "127.0.0.1:8080");
        assert_eq!(url.path, "/healthz?deep=1");
        assert_eq!(HttpUrl::parse("http://db").unwrap().address(), "db:80");
        assert_eq!(
            HttpUrl::parse("http://[::1]/").unwrap().address(),
            "[::1]:80"
        );
        assert_eq!(
            HttpUrl::parse("http://[::1]:9/").unwrap().address(),
            "[::1]:9"
        );
        for bad in [
            "https://db/",
            "db:80",
            "http://",
            "http:///x",
            "http://db:http/",
            "http://db:70000/",
            "http://u:p@db/",
            "http://[::1/",
            "http://db/a b",
        ] {
            assert!(HttpUrl::parse(bad).is_err(), "{bad}");
        }
    }

    #[tokio::test]
    async fn a_url_check_passes_on_2xx_only_and_a_silent_server_fails_in_time() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            for status in ["200 OK", "503 Service Unavailable"] {
                let (mut conn, _) = listener.accept().await.unwrap();
                let mut buf = [0u8; 1024];
                let _ = conn.read(&mut buf).await;
                let answer = format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\n\r\n");
                conn.write_all(answer.as_bytes()).await.unwrap();
            }
            // Then accepts and never answers.
            let (_conn, _) = listener.accept().await.unwrap();
            std::future::pending::<()>().await;
        });
        let check = Resolved::Url(HttpUrl::parse(&format!("http://127.0.0.1:{port}/h")).unwrap());
        let within = Duration::from_millis(500);
        assert!(check.passes(within).await);
        assert!(!check.passes(within).await);
        let started = std::time::Instant::now();
        assert!(!check.passes(within).await);
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
