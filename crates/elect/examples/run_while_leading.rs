//! Run a command only while this process leads a Raft-vote cluster of its
//! own peers (no service needed), with elect's watchdog: the command's
//! whole tree is dead before anyone else can lead.
//!
//! Three terminals:
//!
//! ```text
//! cargo run --example run_while_leading -- a -- sh -c 'while :; do date; sleep 1; done'
//! cargo run --example run_while_leading -- b -- sh -c 'while :; do date; sleep 1; done'
//! cargo run --example run_while_leading -- c -- sh -c 'while :; do date; sleep 1; done'
//! ```
//!
//! The same works on etcd or ZooKeeper with [`ElectionConfig::etcd`] or
//! [`ElectionConfig::zk`].

use std::time::Duration;

use elect::backend;
use elect::config::ElectionConfig;
use elect::supervise::{self, ChildConfig, ChildEnv, Finish};
use nix::sys::signal::Signal;
use tokio::sync::mpsc;

const PEERS: [(&str, &str); 3] = [
    ("a", "127.0.0.1:7401"),
    ("b", "127.0.0.1:7402"),
    ("c", "127.0.0.1:7403"),
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The watchdog is this executable run again with a hidden argument:
    // hand those runs over first.
    if let Some(code) = supervise::dispatch_hidden() {
        std::process::exit(code);
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (id, command) = match args.split_first() {
        Some((id, rest)) if rest.first().map(String::as_str) == Some("--") => (id, &rest[1..]),
        _ => return Err("usage: run_while_leading <a|b|c> -- CMD ARGS...".into()),
    };
    let cfg = ElectionConfig::raft(PEERS, "example")?
        .with_id(id)?
        .with_ttl(Duration::from_millis(500))?;
    let child = ChildConfig::new(command)?.with_grace(Duration::from_secs(2))?;
    tokio::runtime::Runtime::new()?.block_on(async {
        let (work, work_watch) = elect::work::channel();
        let campaign = backend::campaign(&cfg, work_watch).await?;
        // Ctrl-C stops the command, then we resign.
        let (signals_tx, mut signals) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while tokio::signal::ctrl_c().await.is_ok() {
                let _ = signals_tx.send(Signal::SIGINT);
            }
        });
        let env = ChildEnv {
            election: cfg.election().to_owned(),
            backend: cfg.backend().name(),
            period_start: None,
            watchdog: std::env::current_exe()?,
        };
        let finish =
            supervise::run(&child, &env, campaign.leadership(), &work, &mut signals).await?;
        // The command's group is gone on every path: resigning is safe.
        campaign.resign().await?;
        println!("{id}: {finish:?}");
        if let Finish::Exited(code) = finish {
            std::process::exit(code);
        }
        Ok(())
    })
}
