//! Follow a ZooKeeper election without taking part: every change of
//! leader, as Curator's LeaderLatch, LeaderSelector, kazoo or elect
//! candidates produce them.
//!
//! ```text
//! cargo run --example zk_observe -- 127.0.0.1:2181 /elections/jobs
//! ```

use elect::backend;
use elect::config::ElectionConfig;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let connect = args.next().unwrap_or_else(|| "127.0.0.1:2181".into());
    let path = args.next().unwrap_or_else(|| "/elections/jobs".into());
    let cfg = ElectionConfig::zk(&connect, &path)?;
    // The leader once, then every change.
    let now = backend::leader(&cfg).await?;
    println!(
        "leader now: {:?} (znode sequence {:?})",
        now.leader, now.token
    );
    let observation = backend::observe(&cfg).await?;
    let mut leadership = observation.leadership();
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => return Ok(()),
            changed = leadership.changed() => changed?,
        }
        let s = leadership.borrow().clone();
        if s.current {
            println!("leader: {:?} (sequence {:?})", s.leader, s.token);
        } else {
            println!("leader unknown: contact with ZooKeeper lost");
        }
    }
}
