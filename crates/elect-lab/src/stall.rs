//! A hung disk, for one process: `strace` attached to it holds every
//! `fsync` and `fdatasync` (or those on given paths) until released. Its
//! threads that do not sync run on. Members' stalls ([`crate::Fault::Stall`])
//! and the soak's stalls of Raft-vote peers use it.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// Attaches `strace` to `pid`, holding its syncs (with `only`, just those
/// on these paths, as the process sees them); returns the tracer's pid
/// once the kernel names it as the tracer.
///
/// Errors: strace cannot run, or did not attach within 2 s.
pub fn hold_syncs(pid: u32, only: Option<&[PathBuf]>) -> Result<u32, String> {
    use std::os::unix::process::CommandExt;
    let mut strace = Command::new("strace");
    strace.args(["-f", "-qq", "-o", "/dev/null", "-p", &pid.to_string()]);
    for path in only.unwrap_or_default() {
        strace.arg("-P").arg(path);
    }
    // An hour per sync: until `release_syncs` detaches strace, which lets
    // every held sync go on.
    let strace = strace
        .args(["-e", "trace=fsync,fdatasync"])
        .args(["-e", "inject=fsync,fdatasync:delay_enter=3600000000"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        // Its own group: it outlives `elect lab fault`, and a terminal's
        // Ctrl-C does not detach it.
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot run strace (Debian package strace): {e}"))?;
    let tracer = strace.id();
    for _ in 0..400 {
        if traced_by(pid) == Some(tracer) {
            return Ok(tracer);
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    release_syncs(tracer);
    Err("strace did not attach within 2 s (is ptrace allowed here?)".into())
}

/// Detaches the tracer of [`hold_syncs`] and waits until it is gone; the
/// held syncs complete.
pub fn release_syncs(tracer: u32) {
    let _ = kill(Pid::from_raw(tracer as i32), Signal::SIGTERM);
    for _ in 0..400 {
        // Gone, or a zombie of ours (reaped here, or by `elect lab`'s exit).
        let _ = nix::sys::wait::waitpid(
            Pid::from_raw(tracer as i32),
            Some(nix::sys::wait::WaitPidFlag::WNOHANG),
        );
        // Gone (no file) or a zombie (an empty command line).
        if std::fs::read(format!("/proc/{tracer}/cmdline")).map_or(true, |c| c.is_empty()) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// The pid of the process tracing `pid`, if any.
fn traced_by(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("TracerPid:"))
        .and_then(|v| v.trim().parse().ok())
        .filter(|&p| p != 0)
}
