//! Probing processes from the outside.

use std::time::{Duration, Instant};

#[allow(unused_imports)]
pub use elect_lab::process::{alive, descendants, parent};

/// Records when each of `pids` dies, exactly: one thread per pid blocks on
/// a pidfd, which the kernel makes readable the moment the process exits,
/// and reads the clock at real-time priority where it may.
pub struct DeathWatch {
    handles: Vec<std::thread::JoinHandle<Instant>>,
}

impl DeathWatch {
    pub fn start(pids: Vec<i32>, within: Duration) -> DeathWatch {
        let handles = pids
            .into_iter()
            .map(|pid| {
                // SAFETY: plain syscalls on integers and a local pollfd.
                let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as i32;
                assert!(fd >= 0, "pid {pid} is not alive to be watched");
                std::thread::spawn(move || {
                    // At real-time priority where allowed (root, as in CI):
                    // on a loaded machine a woken watcher could otherwise
                    // wait milliseconds for a core before it reads the
                    // clock, and report a death later than it happened.
                    let param = libc::sched_param { sched_priority: 50 };
                    // SAFETY: sets this thread's own policy; failure is
                    // harmless (the ordinary policy stays).
                    unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
                    let mut pfd = libc::pollfd {
                        fd,
                        events: libc::POLLIN,
                        revents: 0,
                    };
                    let ready = unsafe { libc::poll(&mut pfd, 1, within.as_millis() as i32) };
                    let at = Instant::now();
                    unsafe { libc::close(fd) };
                    assert_eq!(ready, 1, "pid {pid} still alive after {within:?}");
                    at
                })
            })
            .collect();
        DeathWatch { handles }
    }

    /// Asserts that every process of the tree (see [`TREE`]) died before
    /// `at`, when `what` happened; `context` is added to the
    /// failure message. Returns when each died.
    pub fn assert_all_died_before(self, at: Instant, what: &str, context: &str) -> Vec<Instant> {
        let died = self.join();
        for (whose, when) in TREE.iter().zip(&died) {
            assert!(
                *when < at,
                "{whose} died {:?} after {what}{context}",
                *when - at
            );
        }
        died
    }

    /// For a leader whose leadership was taken from outside (its znode
    /// deleted, its lease revoked), where the successor hears of it at the
    /// same moment and nothing orders the two: asserts the tree died within
    /// `bound` of `taken`, and reports how that compares with the
    /// successor's election at `elected`.
    pub fn assert_all_died_soon_after(self, taken: Instant, bound: Duration, elected: Instant) {
        let died = self.join();
        for (whose, when) in TREE.iter().zip(&died) {
            assert!(
                *when - taken < bound,
                "{whose} lived {:?} after its leadership was taken",
                *when - taken
            );
        }
        let last = *died.iter().max().unwrap();
        eprintln!(
            "tree dead {:?} after leadership was taken; successor elected {:?} after",
            last - taken,
            elected - taken
        );
    }

    /// When each pid died, in the order given.
    pub fn join(self) -> Vec<Instant> {
        self.handles
            .into_iter()
            .map(|h| h.join().expect("death watch"))
            .collect()
    }
}

/// Reads whitespace-separated pids a test child wrote to `path`, as the
/// host sees them: under `--contain pidns` the child wrote its namespace's
/// numbers, found again among the descendants of the `elect` that runs it
/// (the topmost process with `path` on its command line) by the last entry
/// of their `NSpid`.
pub fn read_pids(path: &std::path::Path, count: usize) -> Vec<i32> {
    let written = super::eventually("the child's pids", Duration::from_secs(20), || {
        let text = std::fs::read_to_string(path).ok()?;
        let pids: Vec<i32> = text
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
        (pids.len() >= count).then_some(pids)
    });
    let marker = path.to_string_lossy().into_owned();
    super::eventually(
        "the pids as the host sees them",
        Duration::from_secs(10),
        || {
            let tree: Vec<(i32, Vec<i32>)> = roots_naming(&marker)
                .into_iter()
                .flat_map(descendants)
                .map(|pid| (pid, ns_pids(pid)))
                .collect();
            written
                .iter()
                .map(|&w| {
                    tree.iter().find_map(|(pid, ns)| match ns.as_slice() {
                        [_, .., inner] if *inner == w => Some(*pid),
                        [_] if *pid == w => Some(*pid),
                        _ => None,
                    })
                })
                .collect()
        },
    )
}

/// The processes with `marker` on their command line whose parent has
/// not.
fn roots_naming(marker: &str) -> Vec<i32> {
    let names = |pid: i32| {
        std::fs::read(format!("/proc/{pid}/cmdline"))
            .is_ok_and(|c| String::from_utf8_lossy(&c).contains(marker))
    };
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| names(pid) && !parent(pid).is_some_and(names))
        .collect()
}

/// The `NSpid` line of `pid`: its number in each PID namespace, outermost
/// first.
pub fn ns_pids(pid: i32) -> Vec<i32> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))
        .map(|l| {
            l.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// A fresh scratch directory for one test.
pub fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("elect-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// What [`tree_script`] records, in order.
pub const TREE: [&str; 4] = ["command", "child", "other group", "daemon"];

/// A shell script (without single quotes, so a terminal test can quote it)
/// that records in `pids` (read them with [`read_pids`]) its own pid, a
/// child's, a process's that moved to a group of its own (`setpgrp`), and a
/// daemon's (started by `setsid` from a shell that exits at once: it left
/// the session and the group and was orphaned), then waits. With
/// `stubborn`, all of them ignore SIGTERM and only SIGKILL ends them.
pub fn tree_script(pids: &std::path::Path, stubborn: bool) -> String {
    let trap = if stubborn { "trap '' TERM; " } else { "" };
    format!(
        "{trap}echo $$ > {p}.tmp; sleep 1000 & echo $! >> {p}.tmp; \
         perl -e \"setpgrp(0, 0); exec q(sleep), 1000\" & echo $! >> {p}.tmp; \
         setsid sh -c \"sleep 1000 & echo \\$! > {p}.daemon\" & \
         while [ ! -s {p}.daemon ]; do sleep 0.01; done; \
         cat {p}.daemon >> {p}.tmp; mv {p}.tmp {p}; wait",
        p = pids.display()
    )
}

/// A shell that exits 42 on SIGTERM, once it has touched `trapped` (a
/// SIGTERM before its trap would kill it: 143). It sleeps in short steps
/// in the foreground: a SIGTERM that reaches a `sleep 1000 &` between
/// its fork and its exec is lost, and that sleep would hold the group
/// (and the successor) until the grace is over.
pub fn trapping_shell(trapped: &std::path::Path) -> String {
    format!(
        "trap 'exit 42' TERM; touch {}; while :; do sleep 0.05; done",
        trapped.display()
    )
}
