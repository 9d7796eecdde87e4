//! Durable term and vote, written and fsynced before any vote reply
//! leaves the process.
//!
//! A vote is on the critical path of every election (the voter's, and the
//! candidate's own), so a write is one `pwrite` and one `fdatasync` into a
//! file made once: two slots of [`SLOT`] bytes, written alternately, each
//! with a sequence number and a checksum. A write torn by a crash spoils
//! only its own slot; loading takes the valid slot with the highest
//! sequence, which is the newest completed write. (Writing a fresh file
//! and renaming it over the old one costs a second fsync and a journal
//! commit: it took a millisecond or two here.) A `raft-vote.json` of an
//! earlier version is read when there is no slot file yet, and so is the
//! `claimed` term of the version before pledges (see `Stored`).

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::Deserialize;
use tracing::{info, warn};

use crate::counters::PROCESS;
use crate::error::{Error, Result};
use elect_raft::{HardState, Pledge};

const FILE: &str = "raft-vote.state";
const LEGACY: &str = "raft-vote.json";
/// Bytes per slot: a header and the state as JSON (an id is at most
/// 1024 bytes).
const SLOT: usize = 2048;
const MAGIC: &[u8; 4] = b"EVS1";
/// magic, sequence (u64), length (u16), checksum (first 8 bytes of the
/// SHA-256 of sequence, length and JSON).
const HEADER: usize = 4 + 8 + 2 + 8;

/// Where the hard state lives; `None` without `--data-dir`.
pub struct Store {
    dir: Option<PathBuf>,
    /// The open slot file and the sequence of its newest slot.
    file: Mutex<Option<(File, u64)>>,
}

fn checksum(seq: u64, json: &[u8]) -> [u8; 8] {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    ctx.update(&seq.to_le_bytes());
    ctx.update(&(json.len() as u16).to_le_bytes());
    ctx.update(json);
    let digest = ctx.finish();
    let mut out = [0; 8];
    out.copy_from_slice(&digest.as_ref()[..8]);
    out
}

/// A state as any version wrote it. The version before pledges wrote the
/// first in line's vote for itself as `claimed: <term>`; that is our own
/// pledge, and it must not be dropped: it may have been used (we may have
/// led in that term without writing the term).
#[derive(Deserialize)]
struct Stored {
    #[serde(flatten)]
    hard: HardState,
    #[serde(default)]
    claimed: Option<u64>,
}

impl Stored {
    fn into_hard(self, own_id: &str) -> HardState {
        let mut hard = self.hard;
        if let Some(term) = self.claimed {
            hard.pledge.get_or_insert(Pledge {
                term,
                candidate: own_id.to_owned(),
            });
        }
        hard
    }
}

/// The state and sequence a slot holds, if it is whole.
fn decode(slot: &[u8]) -> Option<(u64, Stored)> {
    if slot.len() < HEADER || &slot[..4] != MAGIC {
        return None;
    }
    let seq = u64::from_le_bytes(slot[4..12].try_into().ok()?);
    let len = u16::from_le_bytes(slot[12..14].try_into().ok()?) as usize;
    let json = slot.get(HEADER..HEADER + len)?;
    if slot[14..22] != checksum(seq, json) {
        return None;
    }
    Some((seq, serde_json::from_slice(json).ok()?))
}

fn encode(seq: u64, state: &HardState) -> std::io::Result<Vec<u8>> {
    let json = serde_json::to_vec(state).map_err(std::io::Error::other)?;
    slot_of(seq, &json)
}

fn slot_of(seq: u64, json: &[u8]) -> std::io::Result<Vec<u8>> {
    if HEADER + json.len() > SLOT {
        return Err(std::io::Error::other("the state does not fit a slot"));
    }
    let mut slot = Vec::with_capacity(HEADER + json.len());
    slot.extend_from_slice(MAGIC);
    slot.extend_from_slice(&seq.to_le_bytes());
    slot.extend_from_slice(&(json.len() as u16).to_le_bytes());
    slot.extend_from_slice(&checksum(seq, json));
    slot.extend_from_slice(json);
    Ok(slot)
}

impl Store {
    pub fn new(dir: Option<&Path>) -> Store {
        Store {
            dir: dir.map(Path::to_path_buf),
            file: Mutex::new(None),
        }
    }

    /// The persisted state of peer `own_id`: `None` without a data dir
    /// (the core then stays quiet for one election timeout), the default
    /// on a fresh data dir.
    ///
    /// Errors: [`Error::Config`] naming `data_dir` when the directory is
    /// not one, or its files exist but hold no readable state (a torn or
    /// foreign file: elect does not guess a term and vote).
    pub fn load(&self, own_id: &str) -> Result<Option<HardState>> {
        let Some(dir) = &self.dir else {
            return Ok(None);
        };
        let failed = |path: &Path, e: &dyn std::fmt::Display| {
            Error::config(
                "data_dir",
                format!(
                    "{} holds no readable Raft state ({e}); move it away to start this \
                     peer afresh, which it must not do while a vote it gave may still count",
                    path.display()
                ),
            )
        };
        if let Ok(meta) = std::fs::metadata(dir)
            && !meta.is_dir()
        {
            return Err(Error::config(
                "data_dir",
                format!("{} is not a directory", dir.display()),
            ));
        }
        // Two slots, or an earlier version's small JSON.
        let read = |path: &Path| match crate::input::read_regular(path, 64 * SLOT as u64) {
            Ok(bytes) => Ok(bytes),
            Err(crate::input::FileError::Open { source, .. }) => Err(source),
            Err(e) => Err(std::io::Error::other(e.to_string())),
        };
        let path = dir.join(FILE);
        match read(&path) {
            Ok(bytes) => {
                let newest = bytes
                    .chunks(SLOT)
                    .filter_map(decode)
                    .max_by_key(|(seq, _)| *seq);
                match newest {
                    Some((_, stored)) => Ok(Some(stored.into_hard(own_id))),
                    None => Err(failed(&path, &"no whole slot")),
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let legacy = dir.join(LEGACY);
                match read(&legacy) {
                    Ok(bytes) => serde_json::from_slice::<Stored>(&bytes)
                        .map(|stored| Some(stored.into_hard(own_id)))
                        .map_err(|e| failed(&legacy, &e)),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                        Ok(Some(HardState::default()))
                    }
                    Err(e) => Err(failed(&legacy, &e)),
                }
            }
            Err(e) => Err(failed(&path, &e)),
        }
    }

    /// Writes `state` durably (see the module docs). Blocking; the driver
    /// runs it off the async threads.
    ///
    /// Errors: any step failed; the caller must not send what depends on it.
    pub fn save(&self, state: &HardState) -> Result<()> {
        let Some(dir) = &self.dir else {
            return Ok(());
        };
        let mut guard = self.file.lock().unwrap_or_else(|e| e.into_inner());
        let write = |open: &mut Option<(File, u64)>| -> std::io::Result<()> {
            if open.is_none() {
                *open = Some(open_slots(dir)?);
            }
            let (file, seq) = open.as_mut().expect("opened");
            let next = *seq + 1;
            let slot = encode(next, state)?;
            file.write_all_at(&slot, (next % 2) * SLOT as u64)?;
            file.sync_data()?;
            *seq = next;
            Ok(())
        };
        write(&mut guard).map_err(|e| {
            // Start from the file again next time.
            *guard = None;
            Error::io(format!("saving the vote in {}", dir.display()), e)
        })
    }
}

/// A durable write longer than this costs elections: a quarter of the
/// election timeout T. The driver's loop waits on the write (no vote may
/// leave before it), so a candidate's campaign waits for its own vote, a
/// voter's reply for the vote it gives, and a leader moving its pledge
/// sends no heartbeat meanwhile; at T/4 a write takes a quarter of the
/// time followers wait before they campaign.
pub fn slow_write(election_timeout: Duration) -> Duration {
    election_timeout / 4
}

/// What a write of `took` says of the disk, once it is slow for T (see
/// [`slow_write`]): the words of the warning.
pub fn slow_disk_warning(took: Duration, election_timeout: Duration) -> Option<String> {
    (took > slow_write(election_timeout)).then(|| {
        format!(
            "writing term and vote to --data-dir took {}, more than a quarter of the election \
             timeout T = {}: elections will be lost and repeated on this disk; raise --ttl, \
             or give --data-dir a faster disk",
            humantime::format_duration(Duration::from_micros(took.as_micros() as u64)),
            humantime::format_duration(election_timeout),
        )
    })
}

/// A thread of its own that saves states for the driver: a vote waits on
/// it, and a thread already parked there wakes in microseconds, where a
/// blocking-pool task on an idle runtime first starts a thread. It times
/// every write, counts it (`elect_raft_durable_write*` metrics) and warns,
/// at most once a minute, of writes slow for T.
pub struct Persister {
    requests: std::sync::mpsc::Sender<DurableWrite>,
}

impl Persister {
    /// Starts the thread, for a peer whose election timeout is
    /// `election_timeout`; it ends when the persister is dropped.
    pub fn start(store: std::sync::Arc<Store>, election_timeout: Duration) -> Result<Persister> {
        let (requests, queue) = std::sync::mpsc::channel::<DurableWrite>();
        std::thread::Builder::new()
            .name("elect-raft-store".into())
            .spawn(move || {
                let mut warned: Option<Instant> = None;
                for (state, done) in queue {
                    let started = Instant::now();
                    let saved = store.save(&state);
                    let took = started.elapsed();
                    let _ = done.send(saved);
                    let warning = slow_disk_warning(took, election_timeout);
                    PROCESS.wrote_durably(took, warning.is_some());
                    if let Some(warning) = warning
                        && warned.is_none_or(|at| at.elapsed() >= Duration::from_secs(60))
                    {
                        warned = Some(Instant::now());
                        warn!("{warning}");
                    }
                }
            })
            .map_err(|e| Error::io("starting the Raft store's thread", e))?;
        Ok(Persister { requests })
    }

    /// Saves `state` durably: the thread has it when this returns, and the
    /// future resolves once it is on disk. The write starts at the call,
    /// not at the first poll, so whatever the caller sends before awaiting
    /// (vote requests) overlaps it.
    ///
    /// Errors: as [`Store::save`]; or the thread is gone.
    pub fn save(&self, state: HardState) -> impl Future<Output = Result<()>> + use<> {
        let (done, saved) = tokio::sync::oneshot::channel();
        let gone = || {
            Error::io(
                "persisting the vote",
                std::io::Error::other("the store's thread ended"),
            )
        };
        let queued = self.requests.send((state, done));
        async move {
            queued.map_err(|_| gone())?;
            saved.await.map_err(|_| gone())?
        }
    }
}

/// What a [`Persister`] hands its thread: a state, and where to say it is
/// durable.
type DurableWrite = (HardState, tokio::sync::oneshot::Sender<Result<()>>);

#[cfg(test)]
impl Persister {
    /// A persister whose writes the test answers by hand.
    pub fn by_hand() -> (Persister, std::sync::mpsc::Receiver<DurableWrite>) {
        let (requests, writes) = std::sync::mpsc::channel();
        (Persister { requests }, writes)
    }
}

/// Opens the slot file, making it (durably: file and directory) if it is
/// not there; returns it and the sequence of its newest slot.
fn open_slots(dir: &Path) -> std::io::Result<(File, u64)> {
    let path = dir.join(FILE);
    if let Ok(bytes) = std::fs::read(&path) {
        let seq = bytes
            .chunks(SLOT)
            .filter_map(decode)
            .map(|(seq, _)| seq)
            .max()
            .unwrap_or(0);
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)?;
        return Ok((file, seq));
    }
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!("{FILE}.tmp"));
    let mut file = File::create(&tmp)?;
    file.write_all(&vec![0; 2 * SLOT])?;
    file.sync_all()?;
    std::fs::rename(&tmp, &path)?;
    File::open(dir)?.sync_all()?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)?;
    Ok((file, 0))
}

/// Loads this peer's term and vote (off the runtime's threads: reading
/// the disk blocks), and writes them back once, to say now rather than
/// after lost elections what a write costs on this disk.
pub(crate) async fn load_timed(
    store: std::sync::Arc<Store>,
    id: &str,
    election_timeout: Duration,
) -> Result<Option<HardState>> {
    // Reading the disk blocks: off the runtime's threads.
    let (loading, own_id) = (store, id.to_owned());
    let (hard, took) = tokio::task::spawn_blocking(move || -> Result<_> {
        let hard = loading.load(&own_id)?;
        // The state written back once: what a write of term and vote
        // costs on this disk, said now rather than after lost elections.
        let took = match &hard {
            Some(state) => {
                let started = std::time::Instant::now();
                loading.save(state)?;
                Some(started.elapsed())
            }
            None => None,
        };
        Ok((hard, took))
    })
    .await
    .map_err(|e| Error::io("loading the Raft state", std::io::Error::other(e)))??;
    if let Some(took) = took {
        match slow_disk_warning(took, election_timeout) {
            Some(warning) => warn!("{warning}"),
            None => info!(?took, "a write of term and vote to --data-dir"),
        }
    }
    if hard.is_none() {
        info!(
            "no --data-dir: not voting for one election timeout ({}) after start",
            humantime::format_duration(election_timeout)
        );
    }
    Ok(hard)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_starts_fresh() {
        let dir = std::env::temp_dir().join(format!("elect-store-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = Store::new(Some(&dir));
        assert_eq!(store.load("a").unwrap(), Some(HardState::default()));
        let state = HardState {
            term: 7,
            voted_for: Some("b".into()),
            pledge: Some(Pledge {
                term: 8,
                candidate: "c".into(),
            }),
        };
        store.save(&state).unwrap();
        assert_eq!(store.load("a").unwrap(), Some(state.clone()));
        // A fresh store on the same directory continues the sequence.
        let again = Store::new(Some(&dir));
        let next = HardState {
            term: 8,
            voted_for: None,
            pledge: None,
        };
        again.save(&next).unwrap();
        assert_eq!(
            Store::new(Some(&dir)).load("a").unwrap(),
            Some(next.clone())
        );
        assert_eq!(Store::new(None).load("a").unwrap(), None);
        // A torn write spoils its own slot only: the other still loads.
        let path = dir.join(FILE);
        let mut bytes = std::fs::read(&path).unwrap();
        let newest = (0..2)
            .max_by_key(|i| decode(&bytes[i * SLOT..]).map(|(s, _)| s))
            .unwrap();
        bytes[newest * SLOT + HEADER] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(store.load("a").unwrap(), Some(state));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_write_over_a_quarter_of_t_is_slow_and_says_what_to_do() {
        let t = Duration::from_millis(150);
        assert_eq!(slow_disk_warning(Duration::from_millis(37), t), None);
        let warning = slow_disk_warning(Duration::from_millis(40), t).unwrap();
        assert!(warning.contains("took 40ms"), "{warning}");
        assert!(warning.contains("T = 150ms"), "{warning}");
        assert!(warning.contains("--ttl"), "{warning}");
    }

    #[test]
    fn an_earlier_versions_json_is_read() {
        let dir = std::env::temp_dir().join(format!("elect-store-legacy-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(LEGACY), r#"{"term":5,"voted_for":"a"}"#).unwrap();
        let store = Store::new(Some(&dir));
        assert_eq!(store.load("a").unwrap().unwrap().term, 5);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_claim_of_the_version_before_pledges_is_our_own_pledge() {
        let slot = slot_of(1, br#"{"term":5,"voted_for":"a","claimed":6}"#).unwrap();
        let (_, stored) = decode(&slot).unwrap();
        let hard = stored.into_hard("b");
        assert_eq!(
            (hard.term, hard.voted_for.as_deref(), hard.pledge),
            (
                5,
                Some("a"),
                Some(Pledge {
                    term: 6,
                    candidate: "b".into()
                })
            )
        );
    }
}
