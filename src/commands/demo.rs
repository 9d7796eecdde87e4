//! `elect demo`: a local 3-peer Raft-vote cluster of real `elect run`
//! processes, no service needed. It shows the election, a crash failover
//! (SIGKILL of the leader) and a graceful handover (SIGTERM), with their
//! times, then stops everything it started.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, kill, sigaction};
use nix::unistd::Pid;

const PEERS: usize = 3;
const TTL: &str = "500ms";
/// What each peer runs while it leads.
const WORK: &str = "while :; do echo \"$ELECT_LEADER_ID is leading, fencing token $ELECT_FENCING_TOKEN\"; sleep 0.7; done";

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_interrupt(_: i32) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// A line one peer printed.
struct Line {
    peer: usize,
    at: Instant,
    text: String,
}

struct Demo {
    exe: PathBuf,
    dir: PathBuf,
    endpoints: String,
    ids: Vec<String>,
    peers: Vec<Option<Child>>,
    lines: Receiver<Line>,
    tx: Sender<Line>,
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
    demo.stop();
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
        std::fs::create_dir_all(&dir).context("creating the demo's data directory")?;
        let ids: Vec<String> = (1..=PEERS).map(|i| format!("peer-{i}")).collect();
        let mut endpoints = Vec::new();
        for id in &ids {
            // A free port, released just before the peer binds it.
            let port = std::net::TcpListener::bind("127.0.0.1:0")?
                .local_addr()?
                .port();
            endpoints.push(format!("{id}=127.0.0.1:{port}"));
        }
        let (tx, lines) = channel();
        let mut demo = Demo {
            exe,
            dir,
            endpoints: endpoints.join(","),
            ids,
            peers: Vec::new(),
            lines,
            tx,
        };
        println!("elect demo: 3 elect processes elect a leader among themselves (Raft vote,");
        println!("election timeout {TTL}); each runs a small command only while it leads.\n");
        for i in 0..PEERS {
            let child = demo.spawn(i)?;
            demo.peers.push(Some(child));
        }
        Ok(demo)
    }

    fn spawn(&self, i: usize) -> anyhow::Result<Child> {
        let mut child = Command::new(&self.exe)
            .args([
                "--backend",
                "raft",
                "--endpoints",
                &self.endpoints,
                "--election",
                "demo",
            ])
            .args(["--id", &self.ids[i], "--ttl", TTL, "--format", "json"])
            .arg("--data-dir")
            .arg(self.dir.join(&self.ids[i]))
            .args(["run", "--grace", "1s", "--", "sh", "-c", WORK])
            .env(
                "RUST_LOG",
                std::env::var("ELECT_DEMO_LOG").unwrap_or_else(|_| "error".into()),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .context("starting a peer")?;
        let stdout = child.stdout.take().expect("piped");
        let tx = self.tx.clone();
        std::thread::spawn(move || {
            for text in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx
                    .send(Line {
                        peer: i,
                        at: Instant::now(),
                        text,
                    })
                    .is_err()
                {
                    return;
                }
            }
        });
        Ok(child)
    }

    /// Prints what peers say until a peer other than `except` is elected;
    /// returns it and when it said so.
    fn until_elected(&self, except: Option<usize>) -> anyhow::Result<(usize, Instant, u64)> {
        let until = Instant::now() + Duration::from_secs(20);
        loop {
            if INTERRUPTED.load(Ordering::SeqCst) {
                bail!("interrupted");
            }
            let Ok(line) = self.lines.recv_timeout(Duration::from_millis(100)) else {
                if Instant::now() > until {
                    bail!("no leader was elected within 20s");
                }
                continue;
            };
            match serde_json::from_str::<serde_json::Value>(&line.text) {
                Ok(v) if v["event"] == "elected" && Some(line.peer) != except => {
                    let term = v["token"].as_u64().unwrap_or(0);
                    return Ok((line.peer, line.at, term));
                }
                Ok(_) => {}
                Err(_) => println!("    {}", line.text),
            }
        }
    }

    /// Shows the leader's work for a while.
    fn watch(&self, how_long: Duration) -> anyhow::Result<()> {
        let until = Instant::now() + how_long;
        while Instant::now() < until {
            if INTERRUPTED.load(Ordering::SeqCst) {
                bail!("interrupted");
            }
            if let Ok(line) = self.lines.recv_timeout(Duration::from_millis(50))
                && serde_json::from_str::<serde_json::Value>(&line.text).is_err()
            {
                println!("    {}", line.text);
            }
        }
        Ok(())
    }

    fn signal(&self, i: usize, sig: Signal) {
        if let Some(child) = &self.peers[i] {
            let _ = kill(Pid::from_raw(child.id() as i32), sig);
        }
    }

    fn script(&mut self) -> anyhow::Result<()> {
        let started = Instant::now();
        let (leader, at, term) = self.until_elected(None)?;
        println!(
            "==> {} elected (term {term}) {} ms after start",
            self.ids[leader],
            (at - started).as_millis()
        );
        self.watch(Duration::from_secs(2))?;

        println!(
            "\n==> SIGKILL to the leader {}: a crash, no goodbye",
            self.ids[leader]
        );
        let killed = Instant::now();
        self.signal(leader, Signal::SIGKILL);
        let (next, at, term) = self.until_elected(Some(leader))?;
        println!(
            "==> {} elected (term {term}) {} ms after the crash (election timeout {TTL}, randomized up to 2x)",
            self.ids[next],
            (at - killed).as_millis()
        );
        if let Some(mut child) = self.peers[leader].take() {
            let _ = child.wait();
        }
        println!(
            "==> {} restarts with its data dir and rejoins as a follower",
            self.ids[leader]
        );
        self.peers[leader] = Some(self.spawn(leader)?);
        self.watch(Duration::from_secs(2))?;

        println!(
            "\n==> SIGTERM to the leader {}: it stops its command, then hands over",
            self.ids[next]
        );
        let asked = Instant::now();
        self.signal(next, Signal::SIGTERM);
        let (third, at, term) = self.until_elected(Some(next))?;
        println!(
            "==> {} elected (term {term}) {:.1} ms after SIGTERM: a handover, no timeout waited",
            self.ids[third],
            (at - asked).as_secs_f64() * 1e3
        );
        self.watch(Duration::from_secs(1))?;
        println!("\n==> stopping every peer");
        Ok(())
    }

    /// SIGTERM to every peer, SIGKILL after 5 s; removes the data dir.
    fn stop(&mut self) {
        for i in 0..self.peers.len() {
            self.signal(i, Signal::SIGTERM);
        }
        let until = Instant::now() + Duration::from_secs(5);
        for child in self.peers.iter_mut().flatten() {
            while child.try_wait().ok().flatten().is_none() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
