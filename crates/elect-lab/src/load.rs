//! Load on the whole machine, as production hosts have it: `stress-ng`
//! with a CPU worker on every core and a writer that fsyncs sequential
//! writes, beside the ensembles (the members, the candidates and their
//! watchdogs all share the machine's cores and disk).
//!
//! `elect lab load on` holds it until `off` or `down`; `elect compare
//! --under-load` holds it for the run. The load is the machine's, not a
//! member's: in containers the members share the host's cores and disk.

use std::path::Path;
use std::process::{Command, Stdio};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// What `stress-ng` is asked for: a CPU worker per core (`--cpu 0`), one
/// writer of sequential writes each followed by fsync.
pub const STRESS_ARGS: [&str; 6] = ["--cpu", "0", "--hdd", "1", "--hdd-opts", "wr-seq,fsync"];

/// Starts `stress-ng` (writing its files in `dir`), in a process group of
/// its own so that it outlives the command that started it; returns its
/// pid. It runs until [`stop`].
///
/// Errors: `stress-ng` is not installed (Debian package `stress-ng`).
pub fn start(dir: &Path) -> std::io::Result<u32> {
    use std::os::unix::process::CommandExt;
    std::fs::create_dir_all(dir)?;
    let child = Command::new("stress-ng")
        .args(STRESS_ARGS)
        .arg("--temp-path")
        .arg(dir)
        .args(["--timeout", "0", "--quiet"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("cannot run stress-ng (Debian package stress-ng): {e}"),
            )
        })?;
    Ok(child.id())
}

/// Stops the `stress-ng` of [`start`] and its workers, and waits until
/// they are gone (its writer removes its files on the way out).
pub fn stop(pid: u32) {
    let group = Pid::from_raw(-(pid as i32));
    let _ = kill(group, Signal::SIGINT);
    for _ in 0..400 {
        // Reaped here if it is our child; else its parent's business.
        let _ = nix::sys::wait::waitpid(
            Pid::from_raw(pid as i32),
            Some(nix::sys::wait::WaitPidFlag::WNOHANG),
        );
        if kill(group, None).is_err() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let _ = kill(group, Signal::SIGKILL);
}

/// The load, held for as long as this value lives.
pub struct Held(u32);

impl Held {
    /// Starts the load (see [`start`]).
    ///
    /// Errors: `stress-ng` cannot be run.
    pub fn start(dir: &Path) -> std::io::Result<Held> {
        start(dir).map(Held)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        stop(self.0);
    }
}
