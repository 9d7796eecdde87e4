//! Lines on stdout at once when they can go without blocking.
//!
//! The exporter hands its lines to a thread of their own because a write
//! to stdout may block (a slow terminal, a full pipe), and must never hold
//! up the election's runtime. Waking that thread costs a few hundred
//! microseconds on a busy machine, which the successor of a handover spent
//! between its election and its `elected` line. When stdout is a pipe (a
//! supervisor, a log shipper, `elect compare`), a line of at most
//! `PIPE_BUF` bytes written without blocking either goes whole or not at
//! all, so the exporter tries that first, through a description of the
//! pipe of its own: `O_NONBLOCK` is a property of an open file description,
//! and setting it on fd 1 would change stdout for every process sharing it.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};

/// A non-blocking way to stdout's pipe, where stdout is one.
pub(crate) struct NonBlocking {
    pipe: Option<File>,
}

impl NonBlocking {
    /// Opens `/proc/self/fd/1` without blocking when stdout is a pipe;
    /// otherwise (a terminal, a file, a socket, no /proc) every line goes
    /// through the writer thread.
    pub(crate) fn open() -> NonBlocking {
        let path = "/proc/self/fd/1";
        let is_pipe = std::fs::metadata(path).is_ok_and(|m| m.file_type().is_fifo());
        let pipe = is_pipe
            .then(|| {
                std::fs::OpenOptions::new()
                    .write(true)
                    .custom_flags(libc::O_NONBLOCK)
                    .open(path)
                    .ok()
            })
            .flatten();
        NonBlocking { pipe }
    }

    /// Writes `line` and a newline at once, if the pipe has room for them;
    /// false when they must go through the writer thread instead (nothing
    /// was written then).
    pub(crate) fn try_write(&self, line: &str) -> bool {
        let Some(mut pipe) = self.pipe.as_ref() else {
            return false;
        };
        let mut bytes = Vec::with_capacity(line.len() + 1);
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
        // Atomic up to PIPE_BUF: all or nothing (EAGAIN when full).
        if bytes.len() > libc::PIPE_BUF {
            return false;
        }
        matches!(pipe.write(&bytes), Ok(n) if n == bytes.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// A pipe's write end without blocking, and its read end.
    fn pipe() -> (NonBlocking, File) {
        let (read, write) = nix::unistd::pipe().unwrap();
        let write = File::from(write);
        nix::fcntl::fcntl(
            &write,
            nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
        )
        .unwrap();
        (NonBlocking { pipe: Some(write) }, File::from(read))
    }

    #[test]
    fn a_line_goes_whole_or_not_at_all() {
        let (out, mut read) = pipe();
        assert!(out.try_write("first"));
        // Longer than an atomic pipe write: the thread's.
        assert!(!out.try_write(&"x".repeat(libc::PIPE_BUF)));
        // Fill the pipe to its last bytes: then a line does not fit, and
        // nothing of it goes.
        let filler = "y".repeat(1000);
        while out.try_write(&filler) {}
        while out.try_write("z") {}
        assert!(!out.try_write("last"));
        drop(out);
        let mut text = String::new();
        read.read_to_string(&mut text).unwrap();
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some("first"));
        assert!(lines.all(|l| l == filler || l == "z"), "only whole lines");
    }

    #[test]
    fn without_a_pipe_every_line_takes_the_thread() {
        let out = NonBlocking { pipe: None };
        assert!(!out.try_write("x"));
    }
}
