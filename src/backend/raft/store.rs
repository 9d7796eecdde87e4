//! Durable term and vote: written with fsync and an atomic rename before
//! any vote reply leaves the process.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::core::HardState;
use crate::error::{Error, Result};

const FILE: &str = "raft-vote.json";

/// Where the hard state lives; `None` without `--data-dir`.
pub struct Store {
    dir: Option<PathBuf>,
}

impl Store {
    pub fn new(dir: Option<&Path>) -> Store {
        Store {
            dir: dir.map(Path::to_path_buf),
        }
    }

    /// The persisted state: `None` without a data dir (the core then stays
    /// quiet for one election timeout), the default on a fresh data dir.
    ///
    /// Errors: the file exists but cannot be read or parsed.
    pub fn load(&self) -> Result<Option<HardState>> {
        let Some(dir) = &self.dir else {
            return Ok(None);
        };
        let path = dir.join(FILE);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| {
                Error::io(
                    format!("reading {}", path.display()),
                    std::io::Error::other(e),
                )
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Some(HardState::default())),
            Err(e) => Err(Error::io(format!("reading {}", path.display()), e)),
        }
    }

    /// Writes `state` durably: temporary file, fsync, rename, fsync of the
    /// directory. Blocking; the driver runs it off the async threads.
    ///
    /// Errors: any step failed; the caller must not send what depends on it.
    pub fn save(&self, state: &HardState) -> Result<()> {
        let Some(dir) = &self.dir else {
            return Ok(());
        };
        let write = || -> std::io::Result<()> {
            std::fs::create_dir_all(dir)?;
            let tmp = dir.join(format!("{FILE}.tmp"));
            let mut file = std::fs::File::create(&tmp)?;
            file.write_all(&serde_json::to_vec(state).map_err(std::io::Error::other)?)?;
            file.sync_all()?;
            std::fs::rename(&tmp, dir.join(FILE))?;
            std::fs::File::open(dir)?.sync_all()
        };
        write().map_err(|e| Error::io(format!("saving the vote in {}", dir.display()), e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_starts_fresh() {
        let dir = std::env::temp_dir().join(format!("elect-store-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = Store::new(Some(&dir));
        assert_eq!(store.load().unwrap(), Some(HardState::default()));
        let state = HardState {
            term: 7,
            voted_for: Some("b".into()),
        };
        store.save(&state).unwrap();
        assert_eq!(store.load().unwrap(), Some(state));
        assert_eq!(Store::new(None).load().unwrap(), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
