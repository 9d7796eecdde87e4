//! `elect demo`: a local 3-peer Raft-vote cluster of real `elect run`
//! processes, no service needed. It shows the election, a crash failover
//! (SIGKILL of the leader) and a graceful handover (SIGTERM), with their
//! times, then stops everything it started.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use elect_lab::process::Line;
use elect_lab::raft::LocalPeers;
use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};

const PEERS: usize = 3;
const TTL: &str = "500ms";
/// What each peer runs while it leads.
const WORK: &str = "while :; do echo \"$ELECT_LEADER_ID is leading, fencing token $ELECT_FENCING_TOKEN\"; sleep 0.7; done";

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_interrupt(_: i32) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

struct Demo {
    peers: LocalPeers,
    /// Lines read but not yet looked at, each with its peer.
    pending: VecDeque<(usize, Line)>,
}

/// Runs the demo; returns once everything it started has stopped.
pub fn run() -> anyhow::Result<()> {
    let handler = SigAction::new(
        SigHandler::Handler(on_interrupt),
        SaFlags::empty(),
        SigSet::empty(),
    );
    // SAFETY: the handler only stores to an atomic.
    unsafe {
        sigaction(Signal::SIGINT, &handler).context("installing a SIGINT handler")?;
        sigaction(Signal::SIGTERM, &handler).context("installing a SIGTERM handler")?;
    }
    let mut demo = Demo::start()?;
    let result = demo.script();
    demo.peers.stop();
    if INTERRUPTED.load(Ordering::SeqCst) {
        println!("\ninterrupted: every peer stopped, nothing left running");
        return Ok(());
    }
    result
}

impl Demo {
    fn start() -> anyhow::Result<Demo> {
        let exe = std::env::current_exe().context("finding elect's own executable")?;
        let dir = std::env::temp_dir().join(format!("elect-demo-{}", std::process::id()));
        let peers =
            LocalPeers::new(&exe, PEERS, TTL, &dir).context("preparing the demo's peers")?;
        let mut demo = Demo {
            peers,
            pending: VecDeque::new(),
        };
        println!("elect demo: 3 elect processes elect a leader among themselves (Raft vote,");
        println!("election timeout {TTL}); each runs a small command only while it leads.\n");
        for i in 0..PEERS {
            demo.start_peer(i)?;
        }
        Ok(demo)
    }

    fn start_peer(&mut self, i: usize) -> anyhow::Result<()> {
        // Checked by `check_log_filter` before the demo started.
        let log = std::env::var("ELECT_DEMO_LOG").unwrap_or_else(|_| "error".into());
        self.peers
            .start(
                i,
                "demo",
                &["run", "--grace", "1s", "--", "sh", "-c", WORK],
                &log,
            )
            .context("starting a peer")
    }

    /// The next line any peer printed, waiting at most `within`.
    fn next_line(&mut self, within: Duration) -> Option<(usize, Line)> {
        let until = Instant::now() + within;
        loop {
            if let Some(line) = self.pending.pop_front() {
                return Some(line);
            }
            self.pending.extend(self.peers.lines());
            if self.pending.is_empty() {
                if Instant::now() >= until {
                    return None;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        }
    }

    /// Prints what peers say until a peer other than `except` is elected;
    /// returns it and when it said so.
    fn until_elected(&mut self, except: Option<usize>) -> anyhow::Result<(usize, Instant, u64)> {
        let until = Instant::now() + Duration::from_secs(20);
        loop {
            if INTERRUPTED.load(Ordering::SeqCst) {
                bail!("interrupted");
            }
            let Some((peer, line)) = self.next_line(Duration::from_millis(100)) else {
                if Instant::now() > until {
                    bail!("no leader was elected within 20s");
                }
                continue;
            };
            match serde_json::from_str::<serde_json::Value>(&line.text) {
                Ok(v) if v["event"] == "elected" && Some(peer) != except => {
                    let term = v["token"].as_u64().unwrap_or(0);
                    return Ok((peer, line.at, term));
                }
                Ok(_) => {}
                Err(_) => println!("    {}", line.text),
            }
        }
    }

    /// Shows the leader's work for a while.
    fn watch(&mut self, how_long: Duration) -> anyhow::Result<()> {
        let until = Instant::now() + how_long;
        while Instant::now() < until {
            if INTERRUPTED.load(Ordering::SeqCst) {
                bail!("interrupted");
            }
            if let Some((_, line)) = self.next_line(Duration::from_millis(50))
                && serde_json::from_str::<serde_json::Value>(&line.text).is_err()
            {
                println!("    {}", line.text);
            }
        }
        Ok(())
    }

    fn script(&mut self) -> anyhow::Result<()> {
        let started = Instant::now();
        let (leader, at, term) = self.until_elected(None)?;
        println!(
            "==> {} elected (term {term}) {} ms after start",
            self.peers.ids[leader],
            (at - started).as_millis()
        );
        self.watch(Duration::from_secs(2))?;

        println!(
            "\n==> SIGKILL to the leader {}: a crash, no goodbye",
            self.peers.ids[leader]
        );
        let killed = Instant::now();
        self.peers.signal(leader, Signal::SIGKILL);
        let (next, at, term) = self.until_elected(Some(leader))?;
        println!(
            "==> {} elected (term {term}) {} ms after the crash (election timeout {TTL}, randomized up to 2x)",
            self.peers.ids[next],
            (at - killed).as_millis()
        );
        self.peers.reap(leader, Duration::from_secs(5));
        println!(
            "==> {} restarts with its data dir and rejoins as a follower",
            self.peers.ids[leader]
        );
        self.start_peer(leader)?;
        self.watch(Duration::from_secs(2))?;

        println!(
            "\n==> SIGTERM to the leader {}: it stops its command, then hands over",
            self.peers.ids[next]
        );
        let asked = Instant::now();
        self.peers.signal(next, Signal::SIGTERM);
        let (third, at, term) = self.until_elected(Some(next))?;
        println!(
            "==> {} elected (term {term}) {:.1} ms after SIGTERM: a handover, no timeout waited",
            self.peers.ids[third],
            (at - asked).as_secs_f64() * 1e3
        );
        self.watch(Duration::from_secs(1))?;
        println!("\n==> stopping every peer");
        Ok(())
    }
}

/// Checks ELECT_DEMO_LOG, the peers' log filter (as RUST_LOG takes it),
/// before any peer starts: a filter the peers would refuse leaves the
/// demo without its peers' logs, silently.
pub fn check_log_filter() -> crate::usage::Result<()> {
    match std::env::var("ELECT_DEMO_LOG") {
        Ok(filter) => tracing_subscriber::EnvFilter::try_new(&filter)
            .map(drop)
            .map_err(|e| {
                crate::usage::UsageError::new(
                    "ELECT_DEMO_LOG",
                    format!("{filter:?} is not a log filter like info or elect=debug ({e})"),
                )
            }),
        Err(std::env::VarError::NotPresent) => Ok(()),
        Err(std::env::VarError::NotUnicode(_)) => Err(crate::usage::UsageError::new(
            "ELECT_DEMO_LOG",
            "is not UTF-8 text",
        )),
    }
}
