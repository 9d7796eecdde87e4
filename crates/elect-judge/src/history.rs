//! The recorded history, as files in one directory, and reading it back.
//!
//! Every instant is in microseconds since the soak began, on the recorder's
//! one monotonic clock: the store, the sampler, the line readers and the
//! nemesis all stamp with it, so their records compare without skew.
//!
//! | file | one line per |
//! |---|---|
//! | `meta.json` | (one object) the soak's settings and elections |
//! | `store.jsonl` | connection opened (`hello`), run of accepted writes (`span`), refused write, finished job (`done`), connection closed |
//! | `procs.jsonl` | a command's process appearing, frozen, runnable again or gone; a tick per second with the sampler's largest gap |
//! | `lines.jsonl` | a candidate started, printed a line, exited |
//! | `faults.jsonl` | a fault dealt: kind, target, start, end |
//! | `service.jsonl` | what a service member holds, when it changes (ZooKeeper: its mode, the soak's ephemeral znodes and their sessions, and the leader's live sessions; etcd: whether it serves) |
//! | `end.json` | (one object) what was left behind at the end |

use std::path::Path;

use serde::{Deserialize, Serialize};

/// Microseconds since the soak began.
pub type Micros = u64;

/// The soak's settings and the elections it held.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Meta {
    /// The seed the fault schedule was drawn from.
    pub seed: u64,
    /// When the soak began, in milliseconds since the Unix epoch.
    pub started_unix_ms: u64,
    /// How long it ran.
    pub ended: Micros,
    /// Whether it was stopped early (Ctrl-C).
    #[serde(default)]
    pub interrupted: bool,
    /// Where the ensembles ran: containers or processes.
    pub mode: String,
    /// How often the sampler meant to read /proc.
    pub sampler_period: Micros,
    /// How long a line may lag the store (either way) before a
    /// contradiction counts.
    pub line_slack: Micros,
    /// How often the soak's service probe asked each member: the
    /// resolution of its findings' edges. Histories written before it
    /// was recorded were probed every second.
    #[serde(default = "one_second")]
    pub probe_period: Micros,
    /// The elections: one per contender per backend, and the periodic one.
    pub elections: Vec<ElectionMeta>,
    /// Versions of what ran (free text, for the report).
    #[serde(default)]
    pub versions: Vec<(String, String)>,
}

fn one_second() -> Micros {
    1_000_000
}

/// One election of the soak.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ElectionMeta {
    /// Its key in the history, like `etcd/elect`.
    pub key: String,
    /// The backend it ran on: etcd, zk or raft.
    pub backend: String,
    /// Whose code campaigned: elect, etcdctl, kazoo, curator, ...
    pub contender: String,
    /// The TTL (lease, session, election timeout) in milliseconds.
    pub ttl_ms: u64,
    /// For a periodic election (`run --once`), the period in milliseconds.
    #[serde(default)]
    pub period_ms: Option<u64>,
    /// After the last fault in effect heals, a write must be accepted
    /// within this long.
    pub liveness_bound: Micros,
    /// Whether its violations decide the soak's exit code.
    pub decides_exit: bool,
    /// The candidates' names.
    pub candidates: Vec<String>,
}

/// A record of the fenced store.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "k", rename_all = "lowercase")]
pub enum StoreRecord {
    /// A writer connected and named itself.
    Hello {
        t: Micros,
        e: String,
        c: u64,
        cand: String,
        token: u64,
        /// writer (the command), daemon (its daemonized grandchild) or
        /// once (a periodic job).
        role: String,
        /// For a periodic job, the start of its period (Unix seconds).
        #[serde(default)]
        period: Option<u64>,
    },
    /// Accepted writes of one connection, one after another with no other
    /// connection's write of the same election between them and no pause
    /// over the span limit.
    Span {
        e: String,
        c: u64,
        token: u64,
        from: Micros,
        to: Micros,
        n: u64,
        /// When the writer sent the span's first write, by its own clock
        /// (the machine's wall clock, put on the history's): the store
        /// reads a write later than it was sent when it is slow to run.
        #[serde(default)]
        sent_from: Option<Micros>,
    },
    /// A write refused: its token is below the highest accepted.
    Refused {
        t: Micros,
        e: String,
        c: u64,
        token: u64,
        highest: u64,
        /// When the writer sent it, by its own clock.
        #[serde(default)]
        sent: Option<Micros>,
    },
    /// A periodic job said it finished its work.
    Done { t: Micros, e: String, c: u64 },
    /// A connection closed.
    Close { t: Micros, e: String, c: u64 },
}

/// A record of the /proc sampler.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "k", rename_all = "lowercase")]
pub enum ProcRecord {
    /// A tagged process changed state: `run` (alive and not stopped),
    /// `stop` (stopped by a signal or a tracer), `gone`.
    Proc {
        t: Micros,
        pid: i32,
        e: String,
        cand: String,
        role: String,
        state: String,
    },
    /// Once a second: the largest time between two reads of /proc in it.
    Tick {
        t: Micros,
        max_gap: Micros,
        scans: u64,
    },
}

/// A record of a candidate's life and output.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "k", rename_all = "lowercase")]
pub enum LineRecord {
    /// The candidate process started.
    Start {
        t: Micros,
        e: String,
        cand: String,
        pid: i32,
    },
    /// It printed a line on stdout.
    Line {
        t: Micros,
        e: String,
        cand: String,
        text: String,
    },
    /// It exited (code, or 128 + signal).
    Exit {
        t: Micros,
        e: String,
        cand: String,
        code: i32,
    },
}

/// A kind of fault the nemesis deals: typed once, here, for the runner
/// that deals it and the judge that reads it. A history names it by
/// [`FaultKind::name`]; a name not listed refuses the history.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FaultKind {
    MemberKill,
    MemberPause,
    MemberStall,
    MemberStallLog,
    MemberCut,
    QuorumLoss,
    RollingRestart,
    Compaction,
    OperatorDelete,
    ParentDelete,
    Load,
    CandidateFreeze,
    CandidateKill,
    CandidateResign,
    WatchdogKill,
    GroupKill,
    CandidateCut,
    CandidateStall,
    /// `elect switchover` to a candidate of an elect election (live,
    /// paused, cut off or just killed, as the other faults leave it); its
    /// report, exit code and timeout in the record's note as JSON.
    Switchover,
    /// An elect candidate restarted (a clean exit) with another priority.
    PriorityChange,
    /// An elect candidate's health check fails while it lasts.
    HealthFlap,
    /// An elect candidate's health check hangs (until its interval ends
    /// it) while it lasts.
    HealthHang,
    /// Every elect candidate's health check of the election fails while
    /// it lasts.
    HealthAll,
}

impl FaultKind {
    /// Every kind.
    pub const ALL: [FaultKind; 23] = [
        FaultKind::MemberKill,
        FaultKind::MemberPause,
        FaultKind::MemberStall,
        FaultKind::MemberStallLog,
        FaultKind::MemberCut,
        FaultKind::QuorumLoss,
        FaultKind::RollingRestart,
        FaultKind::Compaction,
        FaultKind::OperatorDelete,
        FaultKind::ParentDelete,
        FaultKind::Load,
        FaultKind::CandidateFreeze,
        FaultKind::CandidateKill,
        FaultKind::CandidateResign,
        FaultKind::WatchdogKill,
        FaultKind::GroupKill,
        FaultKind::CandidateCut,
        FaultKind::CandidateStall,
        FaultKind::Switchover,
        FaultKind::PriorityChange,
        FaultKind::HealthFlap,
        FaultKind::HealthHang,
        FaultKind::HealthAll,
    ];

    /// Its name in a history and a schedule.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::MemberKill => "member-kill",
            FaultKind::MemberPause => "member-pause",
            FaultKind::MemberStall => "member-stall",
            FaultKind::MemberStallLog => "member-stall-log",
            FaultKind::MemberCut => "member-cut",
            FaultKind::QuorumLoss => "quorum-loss",
            FaultKind::RollingRestart => "rolling-restart",
            FaultKind::Compaction => "compaction",
            FaultKind::OperatorDelete => "operator-delete",
            FaultKind::ParentDelete => "parent-delete",
            FaultKind::Load => "load",
            FaultKind::CandidateFreeze => "candidate-freeze",
            FaultKind::CandidateKill => "candidate-kill",
            FaultKind::CandidateResign => "candidate-resign",
            FaultKind::Switchover => "switchover",
            FaultKind::PriorityChange => "priority-change",
            FaultKind::HealthFlap => "health-flap",
            FaultKind::HealthHang => "health-hang",
            FaultKind::HealthAll => "health-all",
            FaultKind::WatchdogKill => "watchdog-kill",
            FaultKind::GroupKill => "group-kill",
            FaultKind::CandidateCut => "candidate-cut",
            FaultKind::CandidateStall => "candidate-stall",
        }
    }

    /// The kind called `name`.
    pub fn parse(name: &str) -> Option<FaultKind> {
        FaultKind::ALL.into_iter().find(|k| k.name() == name)
    }
}

impl std::fmt::Display for FaultKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for FaultKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for FaultKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<FaultKind, D::Error> {
        let name = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        FaultKind::parse(&name).ok_or_else(|| {
            let kinds = FaultKind::ALL.map(FaultKind::name).join(", ");
            serde::de::Error::custom(format!("{name:?} is not a fault kind: one of {kinds}"))
        })
    }
}

/// A fault the nemesis dealt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FaultRecord {
    /// Its kind.
    pub kind: FaultKind,
    /// The backend it hit, or `machine` for load.
    pub backend: String,
    /// What it hit: a member, a candidate, a key, the machine.
    pub target: String,
    /// The election it hit, when it hit one alone.
    #[serde(default)]
    pub election: Option<String>,
    /// When it began.
    pub start: Micros,
    /// When it was healed (the same instant for an instant fault).
    pub end: Micros,
    /// Whether it deliberately took the service's quorum away.
    #[serde(default)]
    pub breaks_quorum: bool,
    /// Free text: why this target (for example, it led the service).
    #[serde(default)]
    pub note: String,
}

/// What one member of a service was seen to hold, recorded when it
/// changes: read from the member itself (ZooKeeper's `srvr` and `dump`),
/// not through any candidate, so the judge can tell a service that kept a
/// dead session's znode, or whose members disagree, from a candidate that
/// failed to lead.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "k", rename_all = "lowercase")]
pub enum ServiceRecord {
    /// A ZooKeeper member.
    Zk {
        t: Micros,
        member: String,
        /// leader, follower, or down (it did not answer, or does not
        /// serve: no quorum, looking).
        mode: String,
        /// The soak's ephemeral znodes in its data tree.
        held: Vec<Held>,
        /// On the leader: the sessions it tracks as alive. Empty elsewhere.
        #[serde(default)]
        sessions: Vec<String>,
    },
    /// An etcd member: whether it serves (its `/health`: it knows a
    /// leader and answers a read).
    Etcd {
        t: Micros,
        member: String,
        serving: bool,
    },
}

impl ServiceRecord {
    /// When it was recorded.
    pub fn t(&self) -> Micros {
        match self {
            ServiceRecord::Zk { t, .. } | ServiceRecord::Etcd { t, .. } => *t,
        }
    }
}

/// An ephemeral znode a member holds, and its owner session.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Held {
    /// The election it is in.
    pub e: String,
    pub path: String,
    /// `0x...`, as ZooKeeper prints it.
    pub owner: String,
}

/// What was left after the soak stopped everything it started.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct End {
    /// One entry per thing left behind.
    pub leftovers: Vec<Leftover>,
    /// Keys, znodes and leases still held a second after the stop that
    /// went within their election's TTL, with their session or lease: not
    /// left behind. Empty in histories recorded before they were told
    /// apart.
    #[serde(default)]
    pub expired: Vec<Leftover>,
}

/// A key, znode, lease or process left behind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Leftover {
    /// The election it belongs to (or the backend, for a lease).
    pub e: String,
    /// key, znode, lease, process.
    pub what: String,
    /// Its name.
    pub name: String,
}

/// A whole history, read back.
#[derive(Debug, Clone)]
pub struct History {
    pub meta: Meta,
    pub store: Vec<StoreRecord>,
    pub procs: Vec<ProcRecord>,
    pub lines: Vec<LineRecord>,
    pub faults: Vec<FaultRecord>,
    /// Empty in histories recorded before members were probed.
    pub service: Vec<ServiceRecord>,
    pub end: Option<End>,
}

/// A history's files as text, for [`History::parse`]; `service.jsonl`
/// and `end.json` may be missing.
#[derive(Debug, Clone, Default)]
pub struct Texts {
    /// `meta.json`.
    pub meta: String,
    /// `store.jsonl`.
    pub store: String,
    /// `procs.jsonl`.
    pub procs: String,
    /// `lines.jsonl`.
    pub lines: String,
    /// `faults.jsonl`.
    pub faults: String,
    /// `service.jsonl`, when recorded.
    pub service: Option<String>,
    /// `end.json`, when the soak ended cleanly.
    pub end: Option<String>,
}

/// Why a history could not be read.
#[derive(Debug)]
pub struct ReadError(pub String);

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ReadError {}

impl History {
    /// Reads the history in `dir`. `end.json` may be missing (a soak that
    /// was killed); every other file must be there and parse.
    ///
    /// A history is judged whole or not at all: a file cut mid-line, a
    /// line that does not parse, a file that is not a regular file of at
    /// most [`MAX_FILE_BYTES`], is refused, naming the file and line. A
    /// judge that convicted on a torn record would report violations that
    /// never happened.
    pub fn read(dir: &Path) -> Result<History, ReadError> {
        let text = |name: &str| read_text(&dir.join(name));
        // Files that histories of earlier versions, or of a killed soak,
        // lack: absent is allowed, unreadable is not.
        let optional = |name: &str| match read_text(&dir.join(name)) {
            Ok(t) => Ok(Some(t)),
            Err(_) if std::fs::symlink_metadata(dir.join(name)).is_err() => Ok(None),
            Err(e) => Err(e),
        };
        History::parse(
            dir,
            &Texts {
                meta: text("meta.json")?,
                store: text("store.jsonl")?,
                procs: text("procs.jsonl")?,
                lines: text("lines.jsonl")?,
                faults: text("faults.jsonl")?,
                service: optional("service.jsonl")?,
                end: optional("end.json")?,
            },
        )
    }

    /// The history whose files hold `texts`, as [`History::read`] judges
    /// them whole; `dir` only names them in errors.
    ///
    /// Errors: a file that does not parse whole, naming it and its line.
    pub fn parse(dir: &Path, texts: &Texts) -> Result<History, ReadError> {
        let whole = |name: &str, e: serde_json::Error| {
            ReadError(format!("{}: {e}", dir.join(name).display()))
        };
        let meta: Meta = serde_json::from_str(&texts.meta).map_err(|e| whole("meta.json", e))?;
        let end = match &texts.end {
            Some(t) => Some(serde_json::from_str(t).map_err(|e| whole("end.json", e))?),
            None => None,
        };
        Ok(History {
            meta,
            store: jsonl(dir, "store.jsonl", &texts.store)?,
            procs: jsonl(dir, "procs.jsonl", &texts.procs)?,
            lines: jsonl(dir, "lines.jsonl", &texts.lines)?,
            faults: jsonl(dir, "faults.jsonl", &texts.faults)?,
            service: match &texts.service {
                Some(t) => jsonl(dir, "service.jsonl", t)?,
                None => Vec::new(),
            },
            end,
        })
    }

    /// The election called `key`.
    pub fn election(&self, key: &str) -> Option<&ElectionMeta> {
        self.meta.elections.iter().find(|e| e.key == key)
    }
}

/// The most of one history file the judge reads (an hour's soak
/// records well under a gigabyte).
pub const MAX_FILE_BYTES: u64 = 4 << 30;

/// A history file's text. The judge imports nothing of the code it
/// judges, so this is its own checked open, the twin of the library's
/// `elect::input::read_regular`: opened without blocking (a FIFO), a
/// regular file only (not `/dev/zero`), bounded.
fn read_text(path: &Path) -> Result<String, ReadError> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let failed = |why: String| ReadError(format!("{}: {why}", path.display()));
    // O_NONBLOCK | O_NOCTTY on Linux.
    let file = std::fs::File::options()
        .read(true)
        .custom_flags(0o4000 | 0o400)
        .open(path)
        .map_err(|e| failed(e.to_string()))?;
    let meta = file.metadata().map_err(|e| failed(e.to_string()))?;
    if !meta.is_file() {
        return Err(failed("not a regular file".into()));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(failed(format!("larger than {MAX_FILE_BYTES} bytes")));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| failed(e.to_string()))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(failed(format!("larger than {MAX_FILE_BYTES} bytes")));
    }
    String::from_utf8(bytes).map_err(|e| failed(format!("not UTF-8 text ({e})")))
}

/// Lines of JSON, every one whole: a file that does not end with a line
/// end was cut mid-write (a recorder killed, a copy truncated), and a
/// line that does not parse is not a record; both are refused, naming
/// the file and line, rather than judged without them.
fn jsonl<T: serde::de::DeserializeOwned>(
    dir: &Path,
    name: &str,
    text: &str,
) -> Result<Vec<T>, ReadError> {
    let path = dir.join(name);
    let lines: Vec<&str> = text.lines().collect();
    if !text.is_empty() && !text.ends_with('\n') {
        return Err(ReadError(format!(
            "{} line {}: cut mid-line (no line end): the history is not whole, and is not judged",
            path.display(),
            lines.len()
        )));
    }
    let mut out = Vec::with_capacity(lines.len());
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str(line) {
            Ok(v) => out.push(v),
            Err(e) => {
                return Err(ReadError(format!(
                    "{} line {}: {e}: the history is not whole, and is not judged",
                    path.display(),
                    i + 1
                )));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod reading {
    use super::*;

    #[test]
    fn torn_or_garbled_lines_are_refused_naming_file_and_line() {
        let dir = Path::new("/h");
        let ok: Vec<serde_json::Value> = jsonl(dir, "f.jsonl", "{}\n{}\n").unwrap();
        assert_eq!(ok.len(), 2);
        assert!(
            jsonl::<serde_json::Value>(dir, "f.jsonl", "")
                .unwrap()
                .is_empty()
        );
        let torn = jsonl::<serde_json::Value>(dir, "f.jsonl", "{}\n{\"k\":").unwrap_err();
        assert!(
            torn.0.starts_with("/h/f.jsonl line 2: cut mid-line"),
            "{torn}"
        );
        let whole_but_cut = jsonl::<serde_json::Value>(dir, "f.jsonl", "{}\n{}").unwrap_err();
        assert!(whole_but_cut.0.contains("line 2"), "{whole_but_cut}");
        let garbled = jsonl::<serde_json::Value>(dir, "f.jsonl", "{}\nnope\n{}\n").unwrap_err();
        assert!(garbled.0.starts_with("/h/f.jsonl line 2: "), "{garbled}");
        let special = read_text(Path::new("/dev/zero")).unwrap_err();
        assert!(special.0.contains("not a regular file"), "{special}");
    }
}
