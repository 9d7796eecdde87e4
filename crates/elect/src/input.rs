//! Files elect is given to read, and the one file it is given to write.
//!
//! Input is hostile until checked. A path a user names may be a FIFO with
//! no writer (opening it blocks forever), `/dev/zero` (reading it never
//! ends), a directory or a device. Every file elect reads from outside
//! (TLS material, a password, a soak's schedule, the lab's state) goes
//! through [`read_regular`]: opened without blocking, refused unless it is
//! a regular file, and read only up to a bound, so a wrong path is an
//! error naming it instead of a hang or an exhausted memory.
//!
//! The leader file is the one file elect replaces. [`check_writable_file`]
//! is asked before anything starts, and again before each replacement: the
//! path's directory exists and is writable, and the path is absent or a
//! regular file. Anything else (a device such as `/dev/null`, a FIFO, a
//! directory, a symbolic link, whose replacement would destroy what is
//! not ours) is refused.

use std::fs::{File, Metadata};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The most elect reads of a small input file (a certificate bundle, a
/// password, the lab's state): 1 MiB, far above any real one.
pub const MAX_SMALL_FILE: u64 = 1 << 20;

/// Why a named file cannot be used. Its `Display` starts with the path.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The file could not be opened or its type read.
    #[error("{}: {source}", path.display())]
    Open {
        /// The path as given.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// It is not a regular file (a directory, a FIFO, a device, a socket
    /// or, for a file to replace, a symbolic link).
    #[error("{} is {kind}, not a regular file", path.display())]
    NotRegular {
        /// The path as given.
        path: PathBuf,
        /// What it is, with its article: "a directory", "a FIFO".
        kind: &'static str,
    },
    /// It holds more than elect reads of such a file.
    #[error("{} is larger than {limit} bytes", path.display())]
    TooLarge {
        /// The path as given.
        path: PathBuf,
        /// The bound.
        limit: u64,
    },
    /// It is not text (UTF-8).
    #[error("{} is not UTF-8 text", path.display())]
    NotText {
        /// The path as given.
        path: PathBuf,
    },
    /// A file to replace: its directory is missing, not a directory, or
    /// not writable by us.
    #[error("{}: directory {}", path.display(), why)]
    Directory {
        /// The path as given.
        path: PathBuf,
        /// What is wrong with its directory.
        why: String,
    },
}

/// What a file is, with its article, for messages.
fn kind_of(meta: &Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_symlink() {
        "a symbolic link"
    } else if t.is_file() {
        "a regular file"
    } else {
        "a special file"
    }
}

/// Reads the regular file at `path`, at most `limit` bytes of it.
///
/// The file is opened with `O_NONBLOCK` (a FIFO without a writer opens at
/// once instead of blocking) and `O_NOCTTY`, its type is read from the
/// open descriptor, and anything but a regular file is refused before a
/// byte is read. A file that grows past `limit` while being read is
/// refused too.
///
/// # Errors
/// [`FileError`]: it cannot be opened, is not a regular file, or holds
/// more than `limit` bytes.
pub fn read_regular(path: &Path, limit: u64) -> Result<Vec<u8>, FileError> {
    let open = |source| FileError::Open {
        path: path.to_owned(),
        source,
    };
    let file = File::options()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(open)?;
    let meta = file.metadata().map_err(open)?;
    if !meta.is_file() {
        return Err(FileError::NotRegular {
            path: path.to_owned(),
            kind: kind_of(&meta),
        });
    }
    let too_large = || FileError::TooLarge {
        path: path.to_owned(),
        limit,
    };
    if meta.len() > limit {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(limit + 1).read_to_end(&mut bytes).map_err(open)?;
    if bytes.len() as u64 > limit {
        return Err(too_large());
    }
    Ok(bytes)
}

/// [`read_regular`], as UTF-8 text.
///
/// # Errors
/// As [`read_regular`], and [`FileError::NotText`].
pub fn read_regular_text(path: &Path, limit: u64) -> Result<String, FileError> {
    String::from_utf8(read_regular(path, limit)?).map_err(|_| FileError::NotText {
        path: path.to_owned(),
    })
}

/// Checks that elect may replace the file at `path` by renaming a file of
/// its own over it: the path names a file (not `/`, not ending in `/` or
/// `..`), its directory exists, is a directory and is writable by this
/// process, and the path is absent or a regular file (not a symbolic
/// link: renaming over one replaces the link, not what it points to).
///
/// # Errors
/// [`FileError`]: what is wrong, naming the path.
pub fn check_writable_file(path: &Path) -> Result<(), FileError> {
    let dir_error = |why: String| FileError::Directory {
        path: path.to_owned(),
        why,
    };
    if path.as_os_str().is_empty() {
        return Err(FileError::Open {
            path: path.to_owned(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "the path is empty"),
        });
    }
    let text = path.as_os_str().as_encoded_bytes();
    if path.file_name().is_none() || text.ends_with(b"/") {
        return Err(FileError::NotRegular {
            path: path.to_owned(),
            kind: "a directory",
        });
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    match std::fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => {}
        Ok(meta) => {
            return Err(dir_error(format!(
                "{} is {}",
                dir.display(),
                kind_of(&meta)
            )));
        }
        Err(e) => return Err(dir_error(format!("{}: {e}", dir.display()))),
    }
    if let Err(e) = nix::unistd::access(
        dir,
        nix::unistd::AccessFlags::W_OK | nix::unistd::AccessFlags::X_OK,
    ) {
        return Err(dir_error(format!(
            "{} is not writable: {}",
            dir.display(),
            std::io::Error::from(e)
        )));
    }
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_file() => Ok(()),
        Ok(meta) => Err(FileError::NotRegular {
            path: path.to_owned(),
            kind: kind_of(&meta),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(FileError::Open {
            path: path.to_owned(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("elect-input-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn regular_files_are_read_and_others_refused_without_blocking() {
        let dir = scratch("read");
        let file = dir.join("pw");
        std::fs::write(&file, "secret\n").unwrap();
        assert_eq!(read_regular_text(&file, 64).unwrap(), "secret\n");
        assert!(matches!(
            read_regular(&file, 3),
            Err(FileError::TooLarge { limit: 3, .. })
        ));
        let fifo = dir.join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        // No writer: a blocking open would never return.
        let err = read_regular(&fifo, 64).unwrap_err();
        assert!(
            err.to_string().ends_with("is a FIFO, not a regular file"),
            "{err}"
        );
        for (path, kind) in [
            ("/dev/zero", "a character device"),
            ("/dev/null", "a character device"),
        ] {
            let err = read_regular(Path::new(path), 64).unwrap_err();
            assert!(err.to_string().contains(kind), "{err}");
        }
        assert!(matches!(
            read_regular(&dir, 64),
            Err(FileError::NotRegular {
                kind: "a directory",
                ..
            })
        ));
        assert!(matches!(
            read_regular(&dir.join("absent"), 64),
            Err(FileError::Open { .. })
        ));
        std::fs::write(&file, [0xff, 0xfe]).unwrap();
        assert!(matches!(
            read_regular_text(&file, 64),
            Err(FileError::NotText { .. })
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn only_absent_or_regular_files_in_writable_directories_may_be_replaced() {
        let dir = scratch("write");
        assert!(check_writable_file(&dir.join("leader")).is_ok());
        std::fs::write(dir.join("leader"), "a\n").unwrap();
        assert!(check_writable_file(&dir.join("leader")).is_ok());
        std::os::unix::fs::symlink(dir.join("leader"), dir.join("link")).unwrap();
        let fifo = dir.join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        for (path, kind) in [
            (Path::new("/dev/null"), "a character device"),
            (&fifo, "a FIFO"),
            (&dir, "a directory"),
            (&dir.join("link"), "a symbolic link"),
        ] {
            let err = check_writable_file(path).unwrap_err();
            assert!(err.to_string().contains(kind), "{path:?}: {err}");
        }
        let err = check_writable_file(&dir.join("missing/leader")).unwrap_err();
        assert!(matches!(err, FileError::Directory { .. }), "{err}");
        let err = check_writable_file(&dir.join("leader/x")).unwrap_err();
        assert!(err.to_string().contains("is a regular file"), "{err}");
        assert!(check_writable_file(Path::new("with-slash/")).is_err());
        assert!(check_writable_file(Path::new("")).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
