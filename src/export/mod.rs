//! Making the current leader visible: lines on stdout and a leader file.
//!
//! Export only reads [`Leadership`] snapshots. A snapshot that tells the
//! same story as the previous one (a renewal moving the deadline) is not
//! reported again.

pub mod leader_file;
pub mod lines;

use std::io::Write;

use tokio::sync::watch;

use crate::config::OutputConfig;
use crate::leadership::Leadership;

/// What every output line names besides the snapshot.
#[derive(Debug, Clone)]
pub struct Context {
    pub backend: &'static str,
    pub election: String,
}

/// Reports every change of view until the sender is dropped.
pub async fn run(mut rx: watch::Receiver<Leadership>, ctx: Context, output: OutputConfig) {
    let mut shown = Leadership::unknown();
    let mut file = output.leader_file.map(leader_file::LeaderFile::new);
    loop {
        let next = rx.borrow_and_update().clone();
        if !next.same_view(&shown) {
            let event = next.event_since(&shown);
            let line = lines::render(
                output.format,
                &ctx,
                &next,
                event,
                std::time::SystemTime::now(),
            );
            let mut stdout = std::io::stdout().lock();
            // A closed stdout must not stop the election; the line is lost.
            let _ = writeln!(stdout, "{line}").and_then(|()| stdout.flush());
            drop(stdout);
            if let Some(file) = file.as_mut() {
                file.show(next.leader.as_deref().filter(|_| next.current));
            }
            shown = next;
        }
        if rx.changed().await.is_err() {
            return;
        }
    }
}
