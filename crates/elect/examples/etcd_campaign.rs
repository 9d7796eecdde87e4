//! Campaign in an etcd election and react to every change of leadership,
//! doing leader-only work while (and only while) we lead.
//!
//! ```text
//! cargo run --example etcd_campaign -- 127.0.0.1:2379 jobs node-a
//! ```
//!
//! Start it twice with different ids, then stop the leader with Ctrl-C: it
//! resigns and the other takes over within milliseconds.

use std::time::Duration;

use elect::backend;
use elect::config::ElectionConfig;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let endpoints = args.next().unwrap_or_else(|| "127.0.0.1:2379".into());
    let election = args.next().unwrap_or_else(|| "jobs".into());
    let id = args
        .next()
        .unwrap_or_else(|| format!("example-{}", std::process::id()));
    let cfg = ElectionConfig::etcd(endpoints.split(','), &election)?
        .with_id(&id)?
        .with_ttl(Duration::from_secs(5))?;
    // No work of ours outlives a loss of leadership here, so nothing ever
    // asks the backend to hold on to it.
    let campaign = backend::campaign(&cfg, elect::work::WorkWatch::none()).await?;
    let mut leadership = campaign.leadership();
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break,
            changed = leadership.changed() => if changed.is_err() { break },
            // Leader-only work, checked against the local deadline: past it
            // we must behave as a follower even if we heard nothing. The
            // deadline is on the boot clock, which counts a suspend.
            () = tokio::time::sleep(Duration::from_secs(1)) => {
                let now = elect::BootInstant::now();
                if leadership.borrow().leads_at(now) {
                    println!("{id}: working under fencing token {:?}", leadership.borrow().token);
                }
                continue;
            }
        }
        let s = leadership.borrow().clone();
        println!(
            "leader: {:?} (token {:?}, us: {}, current: {})",
            s.leader, s.token, s.is_self, s.current
        );
    }
    campaign.resign().await?;
    Ok(())
}
