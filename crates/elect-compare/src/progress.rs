//! Progress on stderr: a bar per scenario on a terminal (indicatif), plain
//! lines otherwise, so logs of a CI job still show where a run is.

use std::cell::Cell;
use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

pub struct Progress {
    bar: Option<ProgressBar>,
    label: String,
    total: usize,
    done: Cell<usize>,
}

impl Progress {
    pub fn start(label: String, total: usize) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(total as u64);
            bar.set_style(
                ProgressStyle::with_template("{prefix:<34} {bar:30} {pos}/{len} {elapsed}")
                    .expect("a valid template"),
            );
            bar.set_prefix(label.clone());
            bar
        });
        if bar.is_none() {
            eprintln!("compare: {label}: {total} trials");
        }
        Progress {
            bar,
            label,
            total,
            done: Cell::new(0),
        }
    }

    pub fn inc(&self) {
        let done = self.done.get() + 1;
        self.done.set(done);
        match &self.bar {
            Some(bar) => bar.inc(1),
            // About every tenth, so long runs show life without flooding.
            None if done == self.total || done.is_multiple_of((self.total / 10).max(1)) => {
                eprintln!("compare: {}: {done}/{}", self.label, self.total);
            }
            None => {}
        }
    }

    /// Ends the bar, leaving `summary` in its place.
    pub fn finish(&self, summary: &str) {
        match &self.bar {
            Some(bar) => bar.finish_with_message(summary.to_owned()),
            None => eprintln!("compare: {}: {summary}", self.label),
        }
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
            eprintln!("{:<34} {summary}", self.label);
        }
    }
}
