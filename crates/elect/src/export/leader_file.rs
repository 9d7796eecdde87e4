//! The leader file: the current leader's id, replaced atomically (write a
//! temporary file beside it, then rename) so readers never see half a name.
//! Empty while no leader is known.

use std::io::Write;
use std::path::PathBuf;

use tracing::warn;

pub struct LeaderFile {
    path: PathBuf,
    shown: Option<Option<String>>,
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
            Err(e) => warn!("cannot write leader file {}: {e}", self.path.display()),
        }
    }

    fn replace(&self, contents: String) -> std::io::Result<()> {
        let mut tmp = self.path.clone().into_os_string();
        tmp.push(format!(".{}.tmp", std::process::id()));
        let tmp = PathBuf::from(tmp);
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(contents.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&tmp, &self.path)
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
}
