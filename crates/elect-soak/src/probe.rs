//! The service probe: what each ZooKeeper member holds, and whether each
//! etcd member serves, read from the member itself.
//!
//! A candidate sees the ensemble through the member it is connected to. To
//! tell a candidate that failed to lead from a service that kept a dead
//! session's znode, or whose members disagree, the judge needs each
//! member's own view. One thread per member asks it every
//! [`PROBE_PERIOD`], with four-letter words (no session of its own, so the
//! probe changes nothing it reads): `srvr` for its mode, `dump` for the
//! ephemeral znodes in its data tree and, on the leader, the sessions it
//! tracks. An etcd member is asked for its `/health` (a leader known, a
//! read answered): a service that took seconds to elect a leader after a
//! fault healed is then told apart from a candidate slow to lead. A
//! record is written when what a member holds changes ([`ServiceRecord`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use elect_judge::history::{Held, ServiceRecord};

use crate::record::{Log, Recorder};

/// How often each member is asked.
pub const PROBE_PERIOD: Duration = Duration::from_secs(1);

/// The probe's threads.
pub struct Probe {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Probe {
    /// Starts asking each of `zk` (name, plain client address) about the
    /// znodes of `elections` (znode path, election key), and each of `etcd`
    /// (name, plain HTTP address) whether it serves.
    pub fn start(
        recorder: &Recorder,
        zk: Vec<(String, String)>,
        etcd: Vec<(String, String)>,
        elections: BTreeMap<String, String>,
    ) -> Probe {
        let stop = Arc::new(AtomicBool::new(false));
        let elections = Arc::new(elections);
        let mut threads = Vec::new();
        for (name, client) in zk {
            let elections = elections.clone();
            threads.push(every_period(&stop, recorder, move |t| {
                let (mode, held, sessions) = ask(&client, &elections);
                ServiceRecord::Zk {
                    t,
                    member: name.clone(),
                    mode,
                    held,
                    sessions,
                }
            }));
        }
        for (name, health) in etcd {
            threads.push(every_period(&stop, recorder, move |t| {
                ServiceRecord::Etcd {
                    t,
                    member: name.clone(),
                    serving: elect_lab::etcd::healthy(&health),
                }
            }));
        }
        Probe { stop, threads }
    }

    /// Stops every thread.
    pub fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads {
            let _ = t.join();
        }
    }
}

/// A thread that records what `ask` says every [`PROBE_PERIOD`] until
/// `stop`, when it differs from what it said last (the instant aside).
fn every_period(
    stop: &Arc<AtomicBool>,
    recorder: &Recorder,
    mut ask: impl FnMut(u64) -> ServiceRecord + Send + 'static,
) -> std::thread::JoinHandle<()> {
    let (stop, recorder) = (stop.clone(), recorder.clone());
    std::thread::spawn(move || {
        let mut last: Option<ServiceRecord> = None;
        while !stop.load(Ordering::SeqCst) {
            let seen = ask(recorder.now());
            let same = last.as_ref().is_some_and(|l| at_zero(l) == at_zero(&seen));
            if !same {
                recorder.write(Log::Service, &seen);
                last = Some(seen);
            }
            std::thread::sleep(PROBE_PERIOD);
        }
    })
}

/// `record` with its instant set aside, to compare what it says.
fn at_zero(record: &ServiceRecord) -> ServiceRecord {
    let mut r = record.clone();
    match &mut r {
        ServiceRecord::Zk { t, .. } | ServiceRecord::Etcd { t, .. } => *t = 0,
    }
    r
}

/// The member's mode, the soak's znodes it holds and, on the leader, the
/// sessions it tracks.
fn ask(client: &str, elections: &BTreeMap<String, String>) -> (String, Vec<Held>, Vec<String>) {
    let srvr = elect_lab::zk::four_letter(client, "srvr");
    let mode = srvr
        .lines()
        .find_map(|l| l.strip_prefix("Mode: "))
        .map(str::trim)
        .unwrap_or("down");
    if !matches!(mode, "leader" | "follower") {
        return ("down".into(), Vec::new(), Vec::new());
    }
    let dump = parse_dump(&elect_lab::zk::four_letter(client, "dump"), elections);
    match dump {
        Some((held, sessions)) => (
            mode.to_owned(),
            held,
            if mode == "leader" {
                sessions
            } else {
                Vec::new()
            },
        ),
        // It stopped answering between the two words.
        None => ("down".into(), Vec::new(), Vec::new()),
    }
}

/// Parses `dump`: the sessions of the session tracker's section, and the
/// ephemeral znodes of `elections` with their owners, both sorted. `None`
/// when the answer is not a whole dump.
fn parse_dump(
    dump: &str,
    elections: &BTreeMap<String, String>,
) -> Option<(Vec<Held>, Vec<String>)> {
    enum Section {
        Sessions,
        Ephemerals,
        Other,
    }
    if !dump.contains("ephemeral nodes dump:") {
        return None;
    }
    let mut section = Section::Other;
    let mut owner: Option<&str> = None;
    let mut held = Vec::new();
    let mut sessions = Vec::new();
    for line in dump.lines() {
        match line.trim_end() {
            "SessionTracker dump:" => section = Section::Sessions,
            "ephemeral nodes dump:" => section = Section::Ephemerals,
            "Connections dump:" => section = Section::Other,
            l => match section {
                Section::Sessions => {
                    if let Some(id) = l.strip_prefix('\t').filter(|s| s.starts_with("0x")) {
                        sessions.push(id.trim().to_owned());
                    }
                }
                Section::Ephemerals => {
                    if let Some(path) = l.strip_prefix('\t') {
                        let path = path.trim();
                        let parent = path.rsplit_once('/').map_or("", |(p, _)| p);
                        if let (Some(owner), Some(e)) = (owner, elections.get(parent)) {
                            held.push(Held {
                                e: e.clone(),
                                path: path.to_owned(),
                                owner: owner.to_owned(),
                            });
                        }
                    } else if let Some(id) = l.strip_suffix(':').filter(|s| s.starts_with("0x")) {
                        owner = Some(id);
                    }
                }
                Section::Other => {}
            },
        }
    }
    held.sort();
    sessions.sort();
    Some((held, sessions))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What ZooKeeper 3.8.0 answers (a leader with two sessions).
    const DUMP: &str = "SessionTracker dump:\nSession Sets (1)/(2):\n2 expire at Sat Nov 28 01:14:09 UTC 2026:\n\t0x1000002af1d0000\n\t0x1000002af1d0001\nephemeral nodes dump:\nSessions with Ephemerals (2):\n0x1000002af1d0001:\n\t/soak-elect/_c_def-lock-0000000001\n\t/other/x\n0x1000002af1d0000:\n\t/soak-elect/_c_abc-lock-0000000000\nConnections dump:\nConnections Sets (1)/(3):\n3 expire at Sat Nov 28 01:14:16 UTC 2026:\n\tip: /127.0.0.1:49566 sessionId: 0x1000002af1d0000\n";

    #[test]
    fn a_dump_gives_the_soak_s_znodes_and_the_tracked_sessions() {
        let elections = BTreeMap::from([("/soak-elect".to_owned(), "zk/elect".to_owned())]);
        let (held, sessions) = parse_dump(DUMP, &elections).expect("a whole dump");
        assert_eq!(sessions, ["0x1000002af1d0000", "0x1000002af1d0001"]);
        let got: Vec<(&str, &str)> = held
            .iter()
            .map(|h| (h.path.as_str(), h.owner.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("/soak-elect/_c_abc-lock-0000000000", "0x1000002af1d0000"),
                ("/soak-elect/_c_def-lock-0000000001", "0x1000002af1d0001"),
            ]
        );
        assert!(held.iter().all(|h| h.e == "zk/elect"));
        assert_eq!(parse_dump("", &elections), None);
    }
}
