//! Containment: how the watchdog holds every process the command starts,
//! whatever the command does with its process group, and what is still
//! killed when `elect`'s own processes die.
//!
//! A process group is not a tree: `setsid`, `setpgid`, a shell's job
//! control or any program that daemonizes itself leaves it, and a kill of
//! the group then misses the worker while a successor leads. Three levels
//! hold the whole tree instead, chosen once at start (`--contain`; `auto`
//! takes the strongest that works here and says why it passed the others
//! over):
//!
//! | level | `elect` dies | every `elect` process dies at once | the command daemonizes | a process moves to another group |
//! |---|---|---|---|---|
//! | `pidns` | killed (watchdog) | killed (the kernel, when the namespace's init dies) | killed | killed |
//! | `cgroup` | killed (watchdog: `cgroup.kill`) | not killed, unless the service manager kills the unit's cgroup | killed (while the watchdog or the guard lives) | killed (while the watchdog or the guard lives) |
//! | `subreaper` | killed (watchdog: walks its descendants) | the command's group only (the guard); leavers survive | killed while the watchdog lives (orphans come back to it); the guard kills the group only | the same |
//!
//! - **`pidns`**: the watchdog moves the command into a new PID namespace
//!   (and, when not root, a user namespace that maps the user's uid and
//!   gid to themselves) whose first process, its init, is ours
//!   (`elect __init`, in a mount namespace of its own): it starts the
//!   command, reaps orphans,
//!   forwards the signals it gets to every process of the namespace, and
//!   dies with the watchdog (`PR_SET_PDEATHSIG`). When the init dies, by
//!   any signal, the kernel kills every process of the namespace, daemons
//!   included. It mounts a `/proc` of its own where it may (the command's
//!   `ps` then shows its own tree); where it may not (a container's masked
//!   `/proc`) the command sees the host's `/proc`, where `/proc/self`
//!   still names itself.
//! - **`cgroup`**: the command runs in a cgroup v2 of its own, created
//!   below ours where that is writable (root, a delegated systemd unit or
//!   `systemd-run --user --scope`, a container's own cgroup namespace); the
//!   kill is `cgroup.kill` (or freeze, kill each, thaw). The guard kills it
//!   too if the watchdog dies; if the guard dies as well, only the service
//!   manager's kill of the unit's cgroup (systemd's default
//!   `KillMode=control-group`) is left.
//! - **`subreaper`**: the watchdog is the subreaper of the command's
//!   tree, so a daemon orphaned by its parent comes back to it; a kill
//!   stops (SIGSTOP) and then kills every descendant, again until none is
//!   left, so a fork racing the kill is caught on the next pass. Works
//!   everywhere.

use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use nix::errno::Errno;
use nix::sched::{CloneFlags, unshare};
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

use crate::error::{Error, Result};

/// The hidden subcommand that tries a level in a throwaway process.
pub(crate) const PROBE_SUBCOMMAND: &str = "__contain-probe";

/// What the caller asks for: a level, or the strongest that works here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Containment {
    /// The strongest level that works here: `pidns`, else `cgroup`, else
    /// `subreaper`.
    #[default]
    Auto,
    /// A PID namespace whose init is ours.
    PidNamespace,
    /// A cgroup v2 of the command's own.
    Cgroup,
    /// The watchdog as subreaper, killing every descendant.
    Subreaper,
}

/// A level of containment the machine gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// See [`Containment::PidNamespace`].
    PidNamespace,
    /// See [`Containment::Cgroup`].
    Cgroup,
    /// See [`Containment::Subreaper`].
    Subreaper,
}

impl Level {
    /// `pidns`, `cgroup` or `subreaper`: the flag's words.
    pub fn name(self) -> &'static str {
        match self {
            Level::PidNamespace => "pidns",
            Level::Cgroup => "cgroup",
            Level::Subreaper => "subreaper",
        }
    }

    pub(crate) fn from_name(name: &str) -> Option<Level> {
        [Level::PidNamespace, Level::Cgroup, Level::Subreaper]
            .into_iter()
            .find(|l| l.name() == name)
    }
}

impl From<Level> for Containment {
    fn from(level: Level) -> Containment {
        match level {
            Level::PidNamespace => Containment::PidNamespace,
            Level::Cgroup => Containment::Cgroup,
            Level::Subreaper => Containment::Subreaper,
        }
    }
}

/// What [`Containment::resolve`] decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The level in force.
    pub level: Level,
    /// The stronger levels `auto` tried first, with why each is not
    /// available here.
    pub passed_over: Vec<(Level, String)>,
}

impl Resolved {
    /// One line for the log: the level, and why the stronger ones were
    /// passed over.
    pub fn describe(&self) -> String {
        let mut line = format!("containment: {}", self.level.name());
        for (level, why) in &self.passed_over {
            line.push_str(&format!("; {} unavailable: {why}", level.name()));
        }
        line
    }
}

impl Containment {
    /// The levels to try, strongest first.
    fn candidates(self) -> &'static [Level] {
        match self {
            Containment::Auto => &[Level::PidNamespace, Level::Cgroup, Level::Subreaper],
            Containment::PidNamespace => &[Level::PidNamespace],
            Containment::Cgroup => &[Level::Cgroup],
            Containment::Subreaper => &[Level::Subreaper],
        }
    }

    /// Tries the level asked for (for `Auto`, each from the strongest) in
    /// a throwaway process started from `exe` (the binary that runs the
    /// watchdog, see [`super::dispatch_hidden`]).
    ///
    /// Errors: [`Error::Config`] naming `contain` when the level asked for
    /// does not work here, with the reason.
    pub fn resolve(self, exe: &Path) -> Result<Resolved> {
        let mut passed_over = Vec::new();
        for &level in self.candidates() {
            match probe(level, exe) {
                Ok(()) => return Ok(Resolved { level, passed_over }),
                Err(why) if self == Containment::Auto => passed_over.push((level, why)),
                Err(why) => {
                    return Err(Error::config(
                        "contain",
                        format!("{} is not available here: {why}", level.name()),
                    ));
                }
            }
        }
        unreachable!("subreaper always works")
    }
}

/// Whether `level` works here: `Err` says why not.
fn probe(level: Level, exe: &Path) -> Result<(), String> {
    if level == Level::Subreaper {
        return Ok(());
    }
    let out = Command::new(exe)
        .arg(PROBE_SUBCOMMAND)
        .arg(level.name())
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", exe.display()))?;
    if out.status.success() {
        Ok(())
    } else {
        let said = String::from_utf8_lossy(&out.stderr).trim().to_owned();
        Err(if said.is_empty() {
            format!("the probe ended with {}", out.status)
        } else {
            said
        })
    }
}

/// The probe: sets `level` up as the watchdog would, in this throwaway
/// process, and undoes what outlives it. Exit 0 if it works; otherwise 1
/// and the reason on stderr.
pub(crate) fn probe_main(args: &[OsString]) -> i32 {
    let level = args
        .first()
        .and_then(|a| a.to_str())
        .and_then(Level::from_name);
    let result = match level {
        Some(Level::PidNamespace) => probe_pid_namespace(),
        Some(Level::Cgroup) => Cgroup::create("probe").map(|c| c.remove()),
        Some(Level::Subreaper) => Ok(()),
        None => Err("expected pidns, cgroup or subreaper".to_owned()),
    };
    match result {
        Ok(()) => 0,
        Err(why) => {
            eprintln!("{why}");
            1
        }
    }
}

/// A new PID namespace, and a first process in it that can run.
fn probe_pid_namespace() -> Result<(), String> {
    enter_new_pid_namespace()?;
    // SAFETY: the probe is single-threaded (a fresh exec that started no
    // thread); the child only makes system calls and exits.
    match unsafe { nix::unistd::fork() } {
        Ok(nix::unistd::ForkResult::Child) => {
            let _ = mount_own_proc();
            // SAFETY: leaves at once, without running destructors.
            unsafe { libc::_exit(0) }
        }
        Ok(nix::unistd::ForkResult::Parent { child }) => {
            match nix::sys::wait::waitpid(child, None) {
                Ok(nix::sys::wait::WaitStatus::Exited(_, 0)) => Ok(()),
                other => Err(format!("the namespace's first process failed: {other:?}")),
            }
        }
        Err(e) => Err(format!("no process can start in a new PID namespace: {e}")),
    }
}

/// Moves the next child of this process into a new PID namespace (its
/// init), with a user namespace mapping our uid and gid to themselves when
/// we are not root. The caller must be single-threaded (a new user
/// namespace requires it).
pub(crate) fn enter_new_pid_namespace() -> Result<(), String> {
    let (uid, gid) = (nix::unistd::getuid(), nix::unistd::getgid());
    let as_root = nix::unistd::geteuid().is_root();
    let mut flags = CloneFlags::CLONE_NEWPID;
    if !as_root {
        flags |= CloneFlags::CLONE_NEWUSER;
    }
    unshare(flags).map_err(|e| {
        let what = if as_root {
            "a new PID namespace (as root)"
        } else {
            "a new user and PID namespace"
        };
        format!("{what} is refused: {e}")
    })?;
    if !as_root {
        let write = |file: &str, text: String| {
            std::fs::write(format!("/proc/self/{file}"), text)
                .map_err(|e| format!("writing /proc/self/{file}: {e}"))
        };
        write("setgroups", "deny".into())?;
        write("uid_map", format!("{uid} {uid} 1\n"))?;
        write("gid_map", format!("{gid} {gid} 1\n"))?;
    }
    Ok(())
}

/// In the namespace's init: a mount namespace of its own (the watchdog's,
/// and the host's, keep their `/proc`), its mounts private, and a `/proc`
/// there that shows the namespace's processes.
pub(crate) fn mount_own_proc() -> nix::Result<()> {
    use nix::mount::{MsFlags, mount};
    unshare(CloneFlags::CLONE_NEWNS)?;
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )?;
    mount(
        Some("proc"),
        "/proc",
        Some("proc"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        None::<&str>,
    )
}

/// A cgroup v2 of the command's own, below the watchdog's.
#[derive(Debug)]
pub(crate) struct Cgroup {
    dir: PathBuf,
}

impl Cgroup {
    /// Creates `elect-<name>-<pid>` below this process's cgroup v2.
    pub(crate) fn create(name: &str) -> Result<Cgroup, String> {
        let parent = own_cgroup_dir()?;
        let dir = parent.join(format!("elect-{name}-{}", std::process::id()));
        std::fs::create_dir(&dir)
            .map_err(|e| format!("cannot create a cgroup in {}: {e}", parent.display()))?;
        let cgroup = Cgroup { dir };
        let usable = cgroup.file("cgroup.procs").exists()
            && (cgroup.file("cgroup.kill").exists() || cgroup.file("cgroup.freeze").exists());
        if !usable {
            cgroup.remove();
            return Err("the cgroup has neither cgroup.kill nor cgroup.freeze".into());
        }
        Ok(cgroup)
    }

    /// The cgroup a path names (the guard's view of the watchdog's).
    pub(crate) fn at(dir: PathBuf) -> Cgroup {
        Cgroup { dir }
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// `cgroup.procs`, for a child to write `0` into before its exec (the
    /// write moves the writer).
    pub(crate) fn procs_path(&self) -> CString {
        CString::new(self.file("cgroup.procs").as_os_str().as_bytes()).expect("no NUL in a path")
    }

    /// The processes in it now.
    pub(crate) fn pids(&self) -> Vec<Pid> {
        std::fs::read_to_string(self.file("cgroup.procs"))
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .map(Pid::from_raw)
            .collect()
    }

    /// Whether any process lives in it.
    pub(crate) fn populated(&self) -> bool {
        self.event("populated")
            .unwrap_or_else(|| !self.pids().is_empty())
    }

    /// A flag of `cgroup.events` (`populated`, `frozen`); `None` where the
    /// file or the line is missing.
    fn event(&self, name: &str) -> Option<bool> {
        let events = std::fs::read_to_string(self.file("cgroup.events")).ok()?;
        events
            .lines()
            .find_map(|l| match l.strip_prefix(name)?.trim() {
                "1" => Some(true),
                "0" => Some(false),
                _ => None,
            })
    }

    /// `sig` to every process in it; SIGKILL through `cgroup.kill`, or
    /// frozen, killed one by one and thawed where the kernel has no
    /// `cgroup.kill` (before 5.14).
    pub(crate) fn signal(&self, sig: Signal) {
        if sig == Signal::SIGKILL && std::fs::write(self.file("cgroup.kill"), "1").is_ok() {
            return;
        }
        let freeze = sig == Signal::SIGKILL;
        if freeze {
            // Listing before the freeze took hold would miss what forks
            // meanwhile: wait for `frozen 1` (a few milliseconds at most;
            // the watchdog kills again on its next pass regardless).
            let _ = std::fs::write(self.file("cgroup.freeze"), "1");
            for _ in 0..50 {
                if self.event("frozen") != Some(false) {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
        for pid in self.pids() {
            let _ = kill(pid, sig);
        }
        if freeze {
            let _ = std::fs::write(self.file("cgroup.freeze"), "0");
        }
    }

    /// Removes it once empty (a populated cgroup cannot be removed).
    pub(crate) fn remove(&self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// This process's cgroup v2 directory: the `0::` line of
/// `/proc/self/cgroup` below where cgroup2 is mounted.
fn own_cgroup_dir() -> Result<PathBuf, String> {
    let own = std::fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| format!("reading /proc/self/cgroup: {e}"))?;
    let path = own
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .ok_or("no cgroup v2 hierarchy here")?;
    let mounts = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("reading /proc/self/mountinfo: {e}"))?;
    // Fields: id parent major:minor root mountpoint options ... - fstype
    // source superoptions. Only a mount of the hierarchy's root will do.
    let mount = mounts
        .lines()
        .filter_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let fields: Vec<&str> = left.split_whitespace().collect();
            (right.split_whitespace().next() == Some("cgroup2") && fields.get(3) == Some(&"/"))
                .then(|| fields.get(4).map(|m| PathBuf::from(*m)))
                .flatten()
        })
        .next()
        .ok_or("cgroup2 is not mounted here")?;
    Ok(mount.join(path.trim_start_matches('/')))
}

/// The command's tree as the watchdog holds it.
#[derive(Debug)]
pub(crate) enum Tree {
    /// The namespace whose init is this pid (our child).
    Namespace { init: Pid },
    /// The command's cgroup; `pgid` is the command's own group.
    Cgroup { cgroup: Cgroup, pgid: Pid },
    /// Every descendant of the watchdog (its subreaper) but `spare` (the
    /// guard), and the command's group.
    Descendants { pgid: Pid, spare: Vec<Pid> },
}

impl Tree {
    /// Signals every process of the tree. Each victim of a SIGKILL is
    /// raised to a real-time priority right after it (see [`hasten`]);
    /// calling it again catches what forked in between.
    pub(crate) fn signal(&self, sig: Signal) {
        match self {
            Tree::Namespace { init } => {
                if sig == Signal::SIGKILL {
                    // The init's own death kills the namespace only at the
                    // end of its exit, after its mount namespace is torn
                    // down, which waits for an RCU grace period: on a busy
                    // machine that took over 200 ms while the command ran
                    // on. Everything below the init goes first, directly,
                    // and the init only once nothing below it lives (a
                    // later pass): whichever process of the namespace
                    // exits last pays for that teardown before it counts
                    // as dead, and that must be the init, not the
                    // command (CI saw a shell 35 ms in its exit).
                    let below = descendants(*init, &[]);
                    for &pid in &below {
                        let _ = kill(pid, sig);
                        hasten(pid);
                    }
                    if below.is_empty() {
                        quiet(kill(*init, sig), "the namespace's init");
                        hasten(*init);
                    }
                } else {
                    // The init forwards what it can catch to the whole
                    // namespace.
                    quiet(kill(*init, sig), "the namespace's init");
                }
            }
            Tree::Cgroup { cgroup, pgid } => {
                cgroup.signal(sig);
                let _ = killpg(*pgid, sig);
                if sig == Signal::SIGKILL {
                    cgroup.pids().into_iter().for_each(hasten);
                }
            }
            Tree::Descendants { pgid, spare } => {
                let _ = killpg(*pgid, sig);
                if sig == Signal::SIGKILL {
                    kill_descendants(spare);
                } else {
                    for pid in descendants(Pid::this(), spare) {
                        let _ = kill(pid, sig);
                    }
                }
            }
        }
    }

    /// Whether any process of the tree is still alive: one that is gone
    /// or a zombie is not. One that is exiting still is (the kernel may
    /// yet be closing its files and sockets), and so is one with a
    /// SIGKILL pending in an uninterruptible sleep (a hung disk): the tree
    /// is dead only once the kernel has finished with every process in it.
    pub(crate) fn alive(&self) -> bool {
        match self {
            Tree::Namespace { init } => lives(*init) || !descendants(*init, &[]).is_empty(),
            Tree::Cgroup { cgroup, pgid } => cgroup.populated() || group_lives(*pgid),
            Tree::Descendants { pgid, spare } => {
                group_lives(*pgid) || !descendants(Pid::this(), spare).is_empty()
            }
        }
    }
}

impl Tree {
    /// The processes of the tree that still live, each with its name and
    /// state letter from `/proc/PID/stat`: what to tell the user about a
    /// tree that outlives its SIGKILL.
    pub(crate) fn survivors(&self) -> Vec<(Pid, String, char)> {
        let pids = match self {
            Tree::Namespace { init } => {
                let mut pids = descendants(*init, &[]);
                pids.push(*init);
                pids
            }
            Tree::Cgroup { cgroup, .. } => cgroup.pids(),
            Tree::Descendants { spare, .. } => descendants(Pid::this(), spare),
        };
        pids.into_iter()
            .filter_map(|pid| {
                let stat = Stat::read(pid.as_raw()).filter(Stat::lives)?;
                let name = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
                Some((pid, name.trim_end().to_owned(), stat.state))
            })
            .collect()
    }
}

/// What a state letter of `/proc/PID/stat` means for a process that was
/// sent SIGKILL and lives on.
pub(crate) fn why_alive(state: char) -> &'static str {
    match state {
        'D' => {
            "uninterruptible sleep: waiting on a disk or network file system, it dies when that answers"
        }
        'R' => "running its exit",
        _ => "not yet dead",
    }
}

/// What `/proc/PID/stat` says of a process: its state letter, parent and
/// process group.
struct Stat {
    state: char,
    ppid: i32,
    pgrp: i32,
}

impl Stat {
    fn read(pid: i32) -> Option<Stat> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // Fields after the parenthesised name: state, ppid, pgrp, ...
        let (_, rest) = stat.rsplit_once(')')?;
        let mut fields = rest.split_whitespace();
        Some(Stat {
            state: fields.next()?.chars().next()?,
            ppid: fields.next()?.parse().ok()?,
            pgrp: fields.next()?.parse().ok()?,
        })
    }

    /// Whether the process lives: neither a zombie nor dead.
    fn lives(&self) -> bool {
        !matches!(self.state, 'Z' | 'X')
    }
}

/// Whether `pid` lives: it exists and is no zombie.
fn lives(pid: Pid) -> bool {
    Stat::read(pid.as_raw()).is_some_and(|s| s.lives())
}

/// Whether any process of group `pgid` lives (zombies do not count).
pub(crate) fn group_lives(pgid: Pid) -> bool {
    if matches!(killpg(pgid, None), Err(Errno::ESRCH)) {
        return false;
    }
    all_pids()
        .into_iter()
        .filter_map(Stat::read)
        .any(|s| s.pgrp == pgid.as_raw() && s.lives())
}

fn all_pids() -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .collect()
}

/// Lets a process that has just been sent SIGKILL run at once, so it
/// dies: its exit needs the CPU, and on a busy machine a runnable process
/// waited 30-60 ms for it even at nice -20 (one just forked, never run
/// yet, is placed behind the others). A real-time priority runs it before
/// every ordinary process; with SIGKILL pending it never returns to user
/// space, so it cannot use that priority for anything but dying. Needs
/// `CAP_SYS_NICE`; without it, nice -20 where allowed, else nothing.
fn hasten(pid: Pid) {
    let param = libc::sched_param { sched_priority: 1 };
    // SAFETY: sched_setscheduler and setpriority take a pid and plain
    // values; a gone pid only fails.
    unsafe {
        if libc::sched_setscheduler(pid.as_raw(), libc::SCHED_FIFO, &param) != 0 {
            libc::setpriority(libc::PRIO_PROCESS, pid.as_raw() as libc::id_t, -20);
        }
    }
}

fn quiet(result: nix::Result<()>, what: &str) {
    match result {
        Ok(()) | Err(Errno::ESRCH) => {}
        Err(e) => eprintln!("elect: signalling {what}: {e}"),
    }
}

/// Stops every descendant, then kills them, until none is left: a process
/// forked between a pass's listing and its stop is the next pass's (its
/// parent, stopped, forks no more, and killed leaves it to us).
fn kill_descendants(spare: &[Pid]) {
    for _ in 0..1000 {
        let tree = descendants(Pid::this(), spare);
        if tree.is_empty() {
            return;
        }
        for &pid in &tree {
            let _ = kill(pid, Signal::SIGSTOP);
        }
        for &pid in &tree {
            let _ = kill(pid, Signal::SIGKILL);
            hasten(pid);
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    eprintln!("elect: descendants still appear after 1000 kills");
}

/// Every live (not zombie) descendant of `root` but `spare` and theirs.
///
/// Walks `/proc/PID/task/TID/children` down from `root`, a few reads per
/// process of the tree; where the kernel has no such file, it reads every
/// process's `stat` instead, which costs a read per process on the host
/// and, on a busy one, milliseconds the watchdog does not have.
pub fn descendants(root: Pid, spare: &[Pid]) -> Vec<Pid> {
    match children_of(root.as_raw()) {
        Some(children) => walk_children(root, children, spare),
        None => scan_descendants(root, spare),
    }
}

/// The children of every thread of `pid`, from `/proc`; `None` where the
/// kernel does not list them (no `CONFIG_PROC_CHILDREN`) or `pid` is gone.
fn children_of(pid: i32) -> Option<Vec<i32>> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut children = Vec::new();
    let mut listed = false;
    for task in tasks.flatten() {
        let path = task.path().join("children");
        if let Ok(text) = std::fs::read_to_string(path) {
            listed = true;
            children.extend(
                text.split_whitespace()
                    .filter_map(|c| c.parse::<i32>().ok()),
            );
        }
    }
    listed.then_some(children)
}

/// [`descendants`] through the children files, `roots_children` being
/// those of `root`, already read.
fn walk_children(root: Pid, roots_children: Vec<i32>, spare: &[Pid]) -> Vec<Pid> {
    let mut found = Vec::new();
    let mut seen = vec![root.as_raw()];
    let mut generation = vec![roots_children];
    while let Some(children) = generation.pop() {
        for child in children {
            if seen.contains(&child) || spare.contains(&Pid::from_raw(child)) {
                continue;
            }
            seen.push(child);
            generation.push(children_of(child).unwrap_or_default());
            if Stat::read(child).is_some_and(|s| s.lives()) {
                found.push(Pid::from_raw(child));
            }
        }
    }
    found
}

fn scan_descendants(root: Pid, spare: &[Pid]) -> Vec<Pid> {
    let parents: Vec<(i32, Stat)> = all_pids()
        .into_iter()
        .filter_map(|pid| Some((pid, Stat::read(pid)?)))
        .collect();
    let mut found = Vec::new();
    let mut seen = vec![root.as_raw()];
    let mut frontier = vec![root.as_raw()];
    while let Some(parent) = frontier.pop() {
        for (pid, stat) in &parents {
            if stat.ppid == parent && !spare.contains(&Pid::from_raw(*pid)) && !seen.contains(pid) {
                seen.push(*pid);
                frontier.push(*pid);
                if stat.lives() {
                    found.push(Pid::from_raw(*pid));
                }
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_round_trip_by_name_and_auto_tries_the_strongest_first() {
        for level in [Level::PidNamespace, Level::Cgroup, Level::Subreaper] {
            assert_eq!(Level::from_name(level.name()), Some(level));
            assert_eq!(Containment::from(level).candidates(), &[level]);
        }
        assert_eq!(
            Containment::Auto.candidates(),
            &[Level::PidNamespace, Level::Cgroup, Level::Subreaper]
        );
    }

    #[test]
    fn the_description_says_why_stronger_levels_were_passed_over() {
        let resolved = Resolved {
            level: Level::Subreaper,
            passed_over: vec![
                (Level::PidNamespace, "refused: EPERM".into()),
                (Level::Cgroup, "read-only".into()),
            ],
        };
        assert_eq!(
            resolved.describe(),
            "containment: subreaper; pidns unavailable: refused: EPERM; cgroup unavailable: read-only"
        );
    }

    #[test]
    fn descendants_are_found_through_every_generation() {
        let mut child = Command::new("sh")
            .args(["-c", "sleep 30 & sleep 30 & wait"])
            .spawn()
            .unwrap();
        let me = Pid::this();
        let shell = Pid::from_raw(child.id() as i32);
        let mut sleeps = Vec::new();
        for _ in 0..200 {
            sleeps = descendants(shell, &[]);
            if sleeps.len() >= 2 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(sleeps.len(), 2, "the shell's two sleeps: {sleeps:?}");
        let mine = descendants(me, &[]);
        assert!(mine.contains(&shell), "{mine:?}");
        assert!(sleeps.iter().all(|s| mine.contains(s)), "grandchildren too");
        let spared = descendants(me, &[shell]);
        assert!(
            !spared.contains(&shell) && sleeps.iter().all(|s| !spared.contains(s)),
            "sparing the shell spares its tree"
        );
        let found = [vec![shell], sleeps].concat();
        let _ = killpg(shell, Signal::SIGKILL);
        let _ = kill(shell, Signal::SIGKILL);
        for pid in &found {
            let _ = kill(*pid, Signal::SIGKILL);
        }
        child.wait().unwrap();
    }
}
