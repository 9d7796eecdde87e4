//! The outside tools the nemesis and the leftover check run against the
//! services (`etcdctl`, kazoo in Debian's Python), each bounded so that
//! one stuck call cannot hold a thread, and what `/proc` says of a
//! candidate's processes.

use std::process::Command;

use crate::options::Backend;

/// Why a tool failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// It ran and failed, or could not start: what it said.
    #[error("{0}")]
    Failed(String),
    /// There was nothing for it to act on (no candidate's key or znode
    /// to delete): nothing happened.
    #[error("{0}")]
    NothingThere(&'static str),
}

/// How long a tool the nemesis or the leftover check runs may take
/// (coreutils' `timeout`, then SIGKILL 2 s later): one stuck call must not
/// hold the dealing thread, and every backend's faults with it.
const TOOL_LIMIT: &str = "20s";

/// `program` run under [`TOOL_LIMIT`].
fn bounded(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut cmd = Command::new("timeout");
    cmd.args(["--kill-after=2s", TOOL_LIMIT])
        .arg(program)
        .stdin(std::process::Stdio::null());
    cmd
}

/// Why a [`bounded`] tool failed: it ran out of time, or the last line
/// it wrote to stderr.
fn failure(out: &std::process::Output) -> String {
    use std::os::unix::process::ExitStatusExt;
    // `timeout`'s code when it stopped the tool, or its SIGKILL.
    if matches!(out.status.code(), Some(124 | 137)) || out.status.signal() == Some(9) {
        return format!("no answer within {TOOL_LIMIT}");
    }
    let err = String::from_utf8_lossy(&out.stderr);
    err.trim().lines().last().unwrap_or_default().to_owned()
}

/// `etcdctl` (API 3) against `endpoints`; its stdout.
pub fn etcdctl(endpoints: &str, args: &[&str]) -> Result<Vec<u8>, ToolError> {
    let out = bounded(elect_lab::etcd_release::program("etcdctl"))
        .env("ETCDCTL_API", "3")
        .args(["--endpoints", endpoints, "--command-timeout", "5s"])
        .args(args)
        .output()
        .map_err(|e| ToolError::Failed(format!("etcdctl: {e}")))?;
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(ToolError::Failed(format!(
            "etcdctl {}: {}",
            args.join(" "),
            failure(&out)
        )))
    }
}

/// A snippet of Python with kazoo connected to `hosts` as `zk`; its stdout.
pub fn kazoo(hosts: &str, code: &str) -> Result<String, ToolError> {
    let script = format!(
        "from kazoo.client import KazooClient\nzk = KazooClient(hosts={hosts:?}, timeout=5)\nzk.start(timeout=5)\ntry:\n{}\nfinally:\n    zk.stop()\n",
        code.lines()
            .map(|l| format!("    {l}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let out = bounded(elect_lab::peers::KAZOO_PYTHON)
        .arg("-c")
        .arg(script)
        .output()
        .map_err(|e| ToolError::Failed(format!("python3 (kazoo): {e}")))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(ToolError::Failed(format!("kazoo: {}", failure(&out))))
    }
}

/// Compacts etcd's history to its current revision, then defragments
/// each member.
pub fn compact(endpoints: &str) -> Result<(), ToolError> {
    let status = etcdctl(
        endpoints.split(',').next().unwrap_or_default(),
        &["endpoint", "status", "-w", "json"],
    )?;
    let text = String::from_utf8_lossy(&status);
    let revision = text
        .split("\"revision\":")
        .nth(1)
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|r| r.parse::<u64>().ok())
        .ok_or_else(|| ToolError::Failed("no revision in etcdctl's status".into()))?;
    etcdctl(endpoints, &["compact", &revision.to_string(), "--physical"])?;
    for member in endpoints.split(',') {
        etcdctl(member, &["defrag"])?;
    }
    Ok(())
}

/// Deletes the leader's key (etcd: the lowest create revision under the
/// election's prefix) or znode (the lowest sequence); its name.
pub fn delete_leader(
    backend: Backend,
    endpoints: &str,
    election: &str,
) -> Result<String, ToolError> {
    match backend {
        Backend::Etcd => {
            let prefix = format!("{election}/");
            let out = etcdctl(
                endpoints,
                &[
                    "get",
                    &prefix,
                    "--prefix",
                    "--sort-by=CREATE",
                    "--order=ASCEND",
                    "--limit=1",
                    "--keys-only",
                ],
            )?;
            let key = String::from_utf8_lossy(&out)
                .lines()
                .next()
                .map(str::to_owned)
                .ok_or(ToolError::NothingThere("no candidate's key"))?;
            etcdctl(endpoints, &["del", &key])?;
            Ok(key)
        }
        _ => {
            let code = format!(
                "kids = zk.get_children({election:?})\nkids.sort(key=lambda k: k[-10:])\nif kids:\n    zk.delete({election:?} + '/' + kids[0])\n    print(kids[0])"
            );
            let out = kazoo(endpoints, &code)?;
            let name = out.trim();
            if name.is_empty() {
                return Err(ToolError::NothingThere("no candidate's znode"));
            }
            Ok(format!("{election}/{name}"))
        }
    }
}

/// Deletes the election's parent znode and all below it (an operator's
/// `deleteall`).
pub fn zk_delete_all(endpoints: &str, election: &str) -> Result<String, ToolError> {
    // Candidates create znodes under it meanwhile: an operator's
    // `deleteall` retries until it wins.
    kazoo(
        endpoints,
        &format!(
            "from kazoo.exceptions import NotEmptyError\nfor _ in range(20):\n    try:\n        zk.delete({election:?}, recursive=True)\n        break\n    except NotEmptyError:\n        pass"
        ),
    )?;
    Ok(election.to_owned())
}

/// A process's command line, from `/proc` (empty once it is gone).
pub fn cmdline(pid: i32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .unwrap_or_default()
        .split(|b| *b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// A process's group, from `/proc/<pid>/stat`.
pub fn pgid(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_pgid(&stat)
}

/// The group in a `/proc/<pid>/stat` line: the fifth field, counting from
/// the command's closing parenthesis (a command may hold blanks and
/// parentheses of its own).
fn parse_pgid(stat: &str) -> Option<i32> {
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(2)?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_is_read_past_a_command_with_parentheses_and_blanks() {
        assert_eq!(parse_pgid("42 (bash) S 1 40 40 0 -1"), Some(40));
        assert_eq!(parse_pgid("42 (a (b) c) R 1 77 77 0"), Some(77));
        assert_eq!(parse_pgid("42 (torn"), None);
    }
}
