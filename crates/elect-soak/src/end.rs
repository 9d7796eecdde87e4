//! What is left after the soak stopped everything it started: keys, leases
//! and znodes of its elections, and processes (every candidate's command,
//! daemon, watchdog and tool carries `SOAK_ELECTION`; the nemesis's strace
//! and stress-ng are its children). Another soak's are not counted. A periodic job's completion records are
//! kept for a period past their own by design, on a lease of their own:
//! they are not counted.
//!
//! A key, znode or lease still there a second after the stop is looked
//! for again once its election's TTL has passed. What went meanwhile went
//! with its session or lease, as the service promises: a candidate that
//! died, or whose resignation could not reach the service, leaves exactly
//! that, and nobody waits on it longer than a TTL. What is still there then
//! is an orphan (etcd #21128, stolon #659: it would block every later
//! election) and is left behind. Both are recorded; only the orphans are
//! violations. A process is left behind at the first look: a command that
//! outlives its candidate by a second already broke containment.

use std::time::Duration;

use elect_judge::history::{End, Leftover};

use crate::options::Backend;
use crate::sampler::env_var;
use crate::tools::{etcdctl, kazoo};
use crate::world::BackendWorld;

/// The longest a session or lease of an election is waited for to end by
/// itself: longer TTLs (`etcdctl elect`'s 60 s sessions) are not waited
/// out, and what they hold counts as left behind.
const LONGEST_EXPIRY: Duration = Duration::from_secs(10);

/// Beyond the TTL: etcd scans for expired leases every 500 ms, and
/// ZooKeeper expires sessions in tick-sized buckets.
const EXPIRY_SLACK: Duration = Duration::from_millis(1_500);

/// Waits a moment for resignations to land, then lists what soak `id`
/// left; what is still held in a service then is looked for again once
/// its election's TTL has passed (see the module's doc).
pub fn leftovers(worlds: &[BackendWorld], id: &str) -> End {
    const SETTLE: Duration = Duration::from_secs(1);
    std::thread::sleep(SETTLE);
    let first = held(worlds);
    let wait = first
        .iter()
        .filter_map(|l| ttl_of(worlds, &l.e))
        .filter(|ttl| *ttl <= LONGEST_EXPIRY)
        .max()
        .map_or(Duration::ZERO, |ttl| {
            (ttl + EXPIRY_SLACK).saturating_sub(SETTLE)
        });
    let (mut leftovers, mut expired) = (first, Vec::new());
    if !wait.is_zero() {
        std::thread::sleep(wait);
        let still = held(worlds);
        expired = leftovers
            .into_iter()
            .filter(|l| !still.iter().any(|s| same(s, l)))
            .collect();
        leftovers = still;
    }
    leftovers.extend(processes(id));
    End { leftovers, expired }
}

/// Whether two listings name the same thing: a lease's name carries its
/// remaining TTL after its id, which changes between them.
fn same(a: &Leftover, b: &Leftover) -> bool {
    let id = |l: &Leftover| l.name.split(' ').next().unwrap_or_default().to_owned();
    a.e == b.e && a.what == b.what && id(a) == id(b)
}

/// The keys, znodes and leases of the soak's elections in their services.
fn held(worlds: &[BackendWorld]) -> Vec<Leftover> {
    let mut out = Vec::new();
    for w in worlds {
        match w.backend {
            Backend::Etcd => etcd(w, &mut out),
            Backend::Zk => zk(w, &mut out),
            Backend::Raft => {}
        }
    }
    out
}

/// The TTL of the election whose key in the history is `key`.
fn ttl_of(worlds: &[BackendWorld], key: &str) -> Option<Duration> {
    worlds
        .iter()
        .flat_map(|w| &w.elections)
        .find(|e| e.meta.key == key)
        .map(|e| Duration::from_millis(e.meta.ttl_ms))
}

fn is_record(key: &[u8]) -> bool {
    key.windows(6).any(|w| w == b"\0done/")
}

fn etcd(w: &BackendWorld, out: &mut Vec<Leftover>) {
    let endpoints = &w.endpoints;
    for e in &w.elections {
        let Ok(keys) = etcdctl(endpoints, &["get", &e.name, "--prefix", "--keys-only"]) else {
            continue;
        };
        for key in keys.split(|b| *b == b'\n').filter(|k| !k.is_empty()) {
            if !is_record(key) {
                out.push(Leftover {
                    e: e.meta.key.clone(),
                    what: "key".into(),
                    name: String::from_utf8_lossy(key).replace('\0', "\\0"),
                });
            }
        }
    }
    let Ok(list) = etcdctl(endpoints, &["lease", "list"]) else {
        return;
    };
    let text = String::from_utf8_lossy(&list).into_owned();
    for id in text
        .lines()
        .skip(1)
        .map(str::trim)
        .filter(|l| !l.is_empty())
    {
        let Ok(ttl) = etcdctl(endpoints, &["lease", "timetolive", id, "--keys"]) else {
            continue;
        };
        let ttl = String::from_utf8_lossy(&ttl).into_owned();
        if ttl.contains("already expired") {
            continue;
        }
        let keys = ttl
            .split("attached keys([")
            .nth(1)
            .and_then(|k| k.split("])").next())
            .unwrap_or_default()
            .to_owned();
        if !keys.is_empty() && keys.split(' ').all(|k| is_record(k.as_bytes())) {
            continue;
        }
        // By a key it holds, else by its TTL (each election's is known).
        let granted: Option<u64> = ttl
            .split("granted with TTL(")
            .nth(1)
            .and_then(|t| t.split('s').next())
            .and_then(|t| t.parse().ok());
        let owner = w
            .elections
            .iter()
            .find(|e| keys.split(' ').any(|k| k.starts_with(&e.name)))
            .or_else(|| {
                w.elections
                    .iter()
                    .find(|e| e.meta.period_ms.is_none() && Some(e.meta.ttl_ms / 1000) == granted)
            });
        {
            out.push(Leftover {
                // Not judged when no election's key or TTL names it.
                e: owner.map_or_else(|| "etcd (unattributed)".to_owned(), |o| o.meta.key.clone()),
                what: "lease".into(),
                name: format!(
                    "{id} ({}; {})",
                    if keys.is_empty() {
                        "no keys attached".to_owned()
                    } else {
                        keys.replace('\0', "\\0")
                    },
                    ttl.split(" granted with ")
                        .nth(1)
                        .unwrap_or_default()
                        .trim()
                ),
            });
        }
    }
}

fn zk(w: &BackendWorld, out: &mut Vec<Leftover>) {
    let paths: Vec<&str> = w.elections.iter().map(|e| e.name.as_str()).collect();
    let code = format!(
        "for p in {paths:?}:\n    if zk.exists(p):\n        for k in zk.get_children(p):\n            print(p + '/' + k)"
    );
    let Ok(listing) = kazoo(&w.endpoints, &code) else {
        return;
    };
    for znode in listing.lines().filter(|l| !l.is_empty()) {
        if let Some(e) = w
            .elections
            .iter()
            .find(|e| znode.starts_with(&format!("{}/", e.name)))
        {
            out.push(Leftover {
                e: e.meta.key.clone(),
                what: "znode".into(),
                name: znode.to_owned(),
            });
        }
    }
}

/// Processes of soak `id`'s candidates, and the nemesis's strace and
/// stress-ng, still alive.
fn processes(id: &str) -> Vec<Leftover> {
    let me = std::process::id().to_string();
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid.to_string() == me {
            continue;
        }
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if stat
            .rsplit_once(')')
            .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
        {
            continue;
        }
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let command = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        let var = |name: &str| env_var(&environ, name);
        let election = var("SOAK_ELECTION").filter(|_| var("SOAK_ID").as_deref() == Some(id));
        let parent = stat
            .rsplit_once(')')
            .and_then(|(_, r)| r.split_whitespace().nth(1))
            .unwrap_or_default();
        let ours =
            parent == me && (command.starts_with("strace ") || command.starts_with("stress-ng"));
        if let Some(e) = election {
            out.push(Leftover {
                e,
                what: "process".into(),
                name: format!("{pid} {}", command.chars().take(80).collect::<String>()),
            });
        } else if ours {
            out.push(Leftover {
                e: "machine".into(),
                what: "process".into(),
                name: format!("{pid} {}", command.chars().take(80).collect::<String>()),
            });
        }
    }
    out
}

/// What ran, for the report.
pub fn versions() -> Vec<(String, String)> {
    let first_line = |cmd: &std::path::Path, args: &[&str]| -> Option<String> {
        let out = std::process::Command::new(cmd).args(args).output().ok()?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        text.lines().next().map(str::to_owned)
    };
    [
        (
            "etcd",
            first_line(&elect_lab::etcd_release::program("etcd"), &["--version"]),
        ),
        ("kernel", first_line("uname".as_ref(), &["-r"])),
        ("java", first_line("java".as_ref(), &["-version"])),
    ]
    .into_iter()
    .filter_map(|(k, v)| v.map(|v| (k.to_owned(), v)))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn left(what: &str, name: &str) -> Leftover {
        Leftover {
            e: "etcd/elect".into(),
            what: what.into(),
            name: name.into(),
        }
    }

    #[test]
    fn a_lease_listed_twice_is_the_same_though_its_remaining_ttl_moved() {
        let lease = |remaining: u32| {
            left(
                "lease",
                &format!("694d (no keys attached; TTL(2s), remaining({remaining}s))"),
            )
        };
        assert!(same(&lease(2), &lease(1)));
        assert!(!same(
            &lease(2),
            &left("lease", "694e (TTL(2s), remaining(2s))")
        ));
        assert!(!same(&left("key", "694d"), &left("lease", "694d")));
        assert!(same(
            &left("znode", "/e/_c_x-latch-0000000001"),
            &left("znode", "/e/_c_x-latch-0000000001")
        ));
    }
}
