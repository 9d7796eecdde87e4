//! The library guide's example, whole: lead an etcd election, do
//! leader-only work under the fencing token until leadership is lost (or
//! its local deadline passes), then resign.
//!
//! ```text
//! cargo run -p elect --example leader_only
//! ```

use std::time::Duration;

use elect::{backend, config::ElectionConfig, work::WorkWatch};

#[tokio::main]
async fn main() -> Result<(), elect::Error> {
    // or ElectionConfig::zk(connect, path), ElectionConfig::raft(peers, cluster)
    let cfg = ElectionConfig::etcd(["127.0.0.1:2379"], "jobs")?
        .with_id("node-a")?
        .with_ttl(Duration::from_secs(5))?;
    let campaign = backend::campaign(&cfg, WorkWatch::none()).await?;
    let term = campaign.elected().await?; // we lead: term.token(), term.deadline()
    tokio::select! {
        () = leader_only_work(term.token()) => {} // write under the fencing token...
        () = term.lost() => {}                     // ...until any loss, or the local deadline
    }
    term.resign().await // the successor takes over in round trips
}

/// Your work, which passes `token` with every write so that storage can
/// refuse a deposed leader's.
async fn leader_only_work(token: u64) {
    println!("leading with fencing token {token}");
    tokio::time::sleep(Duration::from_secs(30)).await;
}
