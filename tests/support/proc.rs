//! Probing processes from the outside.

use std::time::{Duration, Instant};

/// Whether `pid` is alive (a zombie counts as dead: it runs nothing).
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            // The state follows the parenthesised command name.
            let state = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.trim_start().chars().next());
            !matches!(state, Some('Z') | Some('X') | None)
        }
        Err(_) => false,
    }
}

/// Watches `pids` from a thread, 1 ms apart, and records when each died.
pub struct DeathWatch {
    handle: std::thread::JoinHandle<Vec<Instant>>,
}

impl DeathWatch {
    pub fn start(pids: Vec<i32>, within: Duration) -> DeathWatch {
        let handle = std::thread::spawn(move || {
            let until = Instant::now() + within;
            let mut died: Vec<Option<Instant>> = vec![None; pids.len()];
            while died.iter().any(Option::is_none) && Instant::now() < until {
                for (pid, slot) in pids.iter().zip(died.iter_mut()) {
                    if slot.is_none() && !alive(*pid) {
                        *slot = Some(Instant::now());
                    }
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            died.into_iter()
                .zip(&pids)
                .map(|(d, pid)| {
                    d.unwrap_or_else(|| panic!("pid {pid} still alive after {within:?}"))
                })
                .collect()
        });
        DeathWatch { handle }
    }

    /// When each pid died, in the order given.
    pub fn join(self) -> Vec<Instant> {
        self.handle.join().expect("death watch")
    }
}

/// Reads whitespace-separated pids a test child wrote to `path`.
pub fn read_pids(path: &std::path::Path, count: usize) -> Vec<i32> {
    super::eventually("the child's pids", Duration::from_secs(10), || {
        let text = std::fs::read_to_string(path).ok()?;
        let pids: Vec<i32> = text
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
        (pids.len() >= count).then_some(pids)
    })
}
