//! The leader file: the current leader's id, replaced atomically (write a
//! temporary file beside it, then rename) so readers never see half a name.
//! Empty while no leader is known.
//!
//! Only a regular file is ever replaced: the path is checked before
//! anything starts ([`crate::input::check_writable_file`], through
//! [`super::Exports::prepare`]) and again before each rename, so a path
//! that became a device, a FIFO, a directory or a link meanwhile is left
//! as it is. The temporary is created exclusively (never through a link
//! someone planted) and removed when a write fails.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use tracing::warn;

use crate::input::{FileError, check_writable_file};

/// Checks, before anything starts, that `path` is a leader file elect
/// may keep: see [`check_writable_file`].
///
/// # Errors
/// [`crate::Error::Config`] naming `leader_file`, with what is wrong.
pub fn check(path: &Path) -> crate::Result<()> {
    check_writable_file(path).map_err(|e| crate::Error::Config {
        field: "leader_file",
        reason: e.to_string(),
    })
}

pub struct LeaderFile {
    path: PathBuf,
    shown: Option<Option<String>>,
}

/// The temporary beside `path`: hidden, and named by our pid so two
/// processes given one path do not write into each other's.
fn temporary_of(path: &Path) -> PathBuf {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    path.with_file_name(format!(".{name}.{}.tmp", std::process::id()))
}

impl LeaderFile {
    pub fn new(path: PathBuf) -> Self {
        LeaderFile { path, shown: None }
    }

    /// Writes `leader` (or an empty file for none) unless already shown.
    pub fn show(&mut self, leader: Option<&str>) {
        let wanted = leader.map(str::to_owned);
        if self.shown.as_ref() == Some(&wanted) {
            return;
        }
        match self.replace(leader.map_or(String::new(), |id| format!("{id}\n"))) {
            Ok(()) => self.shown = Some(wanted),
            Err(e) => warn!("leader file not written: {e}"),
        }
    }

    fn replace(&self, contents: String) -> Result<(), FileError> {
        let tmp = temporary_of(&self.path);
        let written = (|| {
            let mut file = std::fs::File::options()
                .write(true)
                .create_new(true)
                .mode(0o644)
                .open(&tmp)?;
            file.write_all(contents.as_bytes())?;
            file.sync_all()
        })();
        if let Err(source) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(FileError::Open { path: tmp, source });
        }
        // The target may have changed since it was checked at start.
        let renamed = check_writable_file(&self.path).and_then(|()| {
            std::fs::rename(&tmp, &self.path).map_err(|source| FileError::Open {
                path: self.path.clone(),
                source,
            })
        });
        if renamed.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        renamed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_and_empties() {
        let dir = std::env::temp_dir().join(format!("elect-lf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("leader");
        let mut file = LeaderFile::new(path.clone());
        file.show(Some("node-a"));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "node-a\n");
        file.show(None);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "");
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            1,
            "no temporary left"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn what_is_not_a_regular_file_is_never_replaced() {
        let dir = std::env::temp_dir().join(format!("elect-lf-special-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let sub = dir.join("sub");
        std::fs::create_dir(&sub).unwrap();
        for path in [&fifo, &sub] {
            let mut file = LeaderFile::new(path.clone());
            file.show(Some("node-a"));
            assert!(
                !std::fs::symlink_metadata(path).unwrap().is_file(),
                "{path:?} replaced"
            );
        }
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 2, "no temporary left: {names:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
