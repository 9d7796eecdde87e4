//! What [`run`](super::run) wraps, and how: the command and its settings
//! ([`ChildConfig`], each value checked when set), what it is told about
//! its election ([`ChildEnv`]), and how a supervision ended ([`Finish`]).

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use nix::sys::signal::Signal;

use super::contain::{Containment, Level, Resolved};
use crate::clock::MAX_DURATION;
use crate::error::{Error, Result};

/// The command [`run`](super::run()) wraps, and how. Built with [`ChildConfig::new`] and
/// the `with_*` methods, which check every value.
#[derive(Debug, Clone)]
pub struct ChildConfig {
    pub(super) command: Vec<OsString>,
    pub(super) grace: Duration,
    pub(super) restart: Restart,
    pub(super) exit_on_loss: bool,
    pub(super) containment: Containment,
    /// The level [`resolve`](super::resolve) found for `containment`, if
    /// the caller resolved it: [`run`](super::run()) then probes nothing.
    pub(super) resolved: Option<Level>,
}

/// The grace unless one is set.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(5);

impl ChildConfig {
    /// The program and its arguments, passed to `execve` as they are (not
    /// necessarily UTF-8). Grace 5 s, no restart, campaign again after a
    /// loss.
    ///
    /// Errors: [`Error::Config`] naming `command` when it is empty.
    pub fn new<I, S>(command: I) -> Result<Self>
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        let command: Vec<OsString> = command.into_iter().map(Into::into).collect();
        if command.first().is_none_or(|program| program.is_empty()) {
            return Err(Error::config("command", "the command to run is empty"));
        }
        Ok(ChildConfig {
            command,
            grace: DEFAULT_GRACE,
            restart: Restart::Never,
            exit_on_loss: false,
            containment: Containment::Auto,
            resolved: None,
        })
    }

    /// Time between SIGTERM and SIGKILL when leadership is lost; never
    /// extends past the leadership deadline.
    ///
    /// Errors: [`Error::Config`] naming `grace` above 24 h.
    pub fn with_grace(mut self, grace: Duration) -> Result<Self> {
        if grace > MAX_DURATION {
            return Err(Error::config(
                "grace",
                format!("{}: must be at most 24h", humantime::format_duration(grace)),
            ));
        }
        self.grace = grace;
        Ok(self)
    }

    /// Whether a command that exits while we lead is started again.
    pub fn with_restart(mut self, restart: Restart) -> Self {
        self.restart = restart;
        self
    }

    /// Stop supervising once leadership is lost (and the command is dead)
    /// instead of waiting to lead again.
    pub fn with_exit_on_loss(mut self, exit_on_loss: bool) -> Self {
        self.exit_on_loss = exit_on_loss;
        self
    }

    /// How the command's whole tree is held (see [`contain`](super::contain) for what
    /// each level survives); [`run`](super::run()) resolves it once, at its
    /// start, unless [`ChildConfig::with_resolved`] gave the level.
    pub fn with_containment(mut self, containment: Containment) -> Self {
        self.containment = containment;
        self.resolved = None;
        self
    }

    /// The level [`resolve`](super::resolve) found for this config's
    /// containment: [`run`](super::run()) uses it as it is. A caller that
    /// must know the level before campaigning (a containment that does not
    /// work here is bad usage, before anything is held) resolves once and
    /// hands it on, so the throwaway probe runs once.
    pub fn with_resolved(mut self, resolved: &Resolved) -> Self {
        self.containment = resolved.level.into();
        self.resolved = Some(resolved.level);
        self
    }

    /// The containment asked for.
    pub fn containment(&self) -> Containment {
        self.containment
    }

    /// The program and its arguments.
    pub fn command(&self) -> &[OsString] {
        &self.command
    }

    /// Time between SIGTERM and SIGKILL.
    pub fn grace(&self) -> Duration {
        self.grace
    }
}

/// What happens when the command exits while we lead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restart {
    /// Supervision ends with the command's code (and `elect run` resigns).
    Never,
    /// Start it again, with backoff, if it exited with a non-zero code or
    /// by a signal.
    OnFailure,
    /// Start it again, with backoff, whatever its code.
    Always,
}

impl Restart {
    /// Whether a command that exited with `code` is started again.
    pub fn restarts(self, code: i32) -> bool {
        match self {
            Restart::Never => false,
            Restart::OnFailure => code != 0,
            Restart::Always => true,
        }
    }
}

/// Why supervision ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    /// The command exited by itself (or after a forwarded signal) while we
    /// led; its exit code, 128+N for signal N.
    Exited(i32),
    /// A shutdown signal arrived while no command was running.
    Signalled(Signal),
    /// The backend stopped publishing.
    BackendGone,
    /// Leadership was lost and `--exit-on-loss` asked to stop there; the
    /// command's group is dead.
    Lost,
    /// The watchdog was killed (by signal N); the command's group has been
    /// killed from here and is gone. Nothing supervises a command any more,
    /// so this ends supervision.
    WatchdogKilled(i32),
}

/// What the command is told about its election, and where the watchdog
/// executable is (`elect` itself, or a host binary that calls
/// [`dispatch_hidden`](super::dispatch_hidden) first).
#[derive(Debug, Clone)]
pub struct ChildEnv {
    /// `ELECT_ELECTION` for the command.
    pub election: String,
    /// `ELECT_BACKEND` for the command.
    pub backend: &'static str,
    /// `ELECT_PERIOD_START` for a periodic job (`run --once`): the start
    /// of the period it runs for, in seconds since the Unix epoch.
    pub period_start: Option<u64>,
    /// The executable that runs the watchdog.
    pub watchdog: PathBuf,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn child_configs_are_checked() {
        use std::os::unix::ffi::OsStringExt;
        let raw = OsString::from_vec(vec![b'%', 0xff]);
        let cfg = ChildConfig::new([OsString::from("printf"), raw.clone()]).unwrap();
        assert_eq!(cfg.command()[1], raw);
        assert!(ChildConfig::new(Vec::<String>::new()).is_err());
        assert!(ChildConfig::new([""]).is_err());
        let err = ChildConfig::new(["true"])
            .unwrap()
            .with_grace(Duration::MAX)
            .unwrap_err();
        assert!(err.to_string().starts_with("grace:"), "{err}");
    }
}
