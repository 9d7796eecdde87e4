//! The recorder: one monotonic clock and the history's files.
//!
//! Everything the soak observes is stamped here, in microseconds since the
//! soak began, and appended as one JSON line to its file at once (a soak
//! killed midway leaves a history that can still be judged). The record
//! types are the judge's own ([`elect_judge::history`]): the runner writes
//! what the judge reads, and the judge imports nothing of the runner.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use elect_judge::history::Micros;
use serde::Serialize;

/// The history's files and clock, shared by every recording thread.
#[derive(Clone)]
pub struct Recorder {
    start: Instant,
    /// The wall clock at `start`, in µs since the Unix epoch: what the
    /// writers' own send times are put on the history's clock with.
    start_unix_us: u64,
    dir: PathBuf,
    files: Arc<Files>,
}

struct Files {
    store: Mutex<BufWriter<File>>,
    procs: Mutex<BufWriter<File>>,
    lines: Mutex<BufWriter<File>>,
    faults: Mutex<BufWriter<File>>,
    service: Mutex<BufWriter<File>>,
}

/// Which file a record goes to.
#[derive(Clone, Copy)]
pub enum Log {
    Store,
    Procs,
    Lines,
    Faults,
    Service,
}

impl Recorder {
    /// Creates the history's files in `dir` (emptied first).
    pub fn create(dir: &Path) -> std::io::Result<Recorder> {
        std::fs::create_dir_all(dir)?;
        let open = |name: &str| -> std::io::Result<Mutex<BufWriter<File>>> {
            Ok(Mutex::new(BufWriter::new(File::create(dir.join(name))?)))
        };
        let _ = std::fs::remove_file(dir.join("end.json"));
        let start = Instant::now();
        let start_unix_us = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_micros() as u64;
        Ok(Recorder {
            start,
            start_unix_us,
            dir: dir.to_owned(),
            files: Arc::new(Files {
                store: open("store.jsonl")?,
                procs: open("procs.jsonl")?,
                lines: open("lines.jsonl")?,
                faults: open("faults.jsonl")?,
                service: open("service.jsonl")?,
            }),
        })
    }

    /// Now, on the history's clock.
    pub fn now(&self) -> Micros {
        self.start.elapsed().as_micros() as Micros
    }

    /// `at` on the history's clock.
    pub fn at(&self, at: Instant) -> Micros {
        at.saturating_duration_since(self.start).as_micros() as Micros
    }

    /// A wall-clock instant (µs since the Unix epoch, as a writer's
    /// `$EPOCHREALTIME` says) on the history's clock.
    pub fn from_unix_us(&self, unix_us: u64) -> Micros {
        unix_us.saturating_sub(self.start_unix_us)
    }

    /// The history's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Appends `record` to `log`.
    pub fn write(&self, log: Log, record: &impl Serialize) {
        let file = match log {
            Log::Store => &self.files.store,
            Log::Procs => &self.files.procs,
            Log::Lines => &self.files.lines,
            Log::Faults => &self.files.faults,
            Log::Service => &self.files.service,
        };
        let Ok(mut line) = serde_json::to_vec(record) else {
            return;
        };
        line.push(b'\n');
        let mut f = file.lock().unwrap();
        let _ = f.write_all(&line);
    }

    /// Writes what is buffered to the files.
    pub fn flush(&self) {
        for f in [
            &self.files.store,
            &self.files.procs,
            &self.files.lines,
            &self.files.faults,
            &self.files.service,
        ] {
            let _ = f.lock().unwrap().flush();
        }
    }

    /// Writes a whole JSON file beside the logs.
    pub fn write_json(&self, name: &str, value: &impl Serialize) -> std::io::Result<()> {
        let text = serde_json::to_string_pretty(value).map_err(std::io::Error::other)?;
        std::fs::write(self.dir.join(name), text + "\n")
    }
}
