//! `elect leader`: print the current leader once; exit 3 when there is none.

use clap::Args;
use elect::backend;
use elect::config::ElectionConfig;
use elect::export::{Format, lines};

use crate::args::{ElectionArgs, FormatArgs};
use crate::runtime::{SHUTDOWN_SIGNALS, context, on_workers, signals, unless_stopped};
use crate::usage::Result;

/// The exit code when no one leads.
pub const NO_LEADER: u8 = 3;

#[derive(Debug, Args)]
pub struct LeaderArgs {
    #[command(flatten)]
    election: ElectionArgs,
    #[command(flatten)]
    format: FormatArgs,
}

/// A validated `elect leader`.
#[derive(Debug)]
pub struct Request {
    pub election: ElectionConfig,
    pub format: Format,
}

impl LeaderArgs {
    pub fn validate(self) -> Result<Request> {
        Ok(Request {
            election: self.election.follower_config()?,
            format: self.format.format.into(),
        })
    }
}

pub fn run(request: Request) -> anyhow::Result<u8> {
    on_workers(leader(request))
}

async fn leader(Request { election, format }: Request) -> anyhow::Result<u8> {
    // A one-shot read: Ctrl-Z may suspend it as any command (the
    // election commands resign instead), so SIGTSTP is not among these.
    let stops: Vec<_> = SHUTDOWN_SIGNALS
        .into_iter()
        .filter(|&(_, sig)| sig != nix::sys::signal::Signal::SIGTSTP)
        .collect();
    let mut shutdown = signals(&stops)?;
    let snapshot = match unless_stopped(&mut shutdown, backend::leader(&election)).await {
        Ok(snapshot) => snapshot?,
        // No answer to give: the shell's convention for a command a
        // signal ended.
        Err(sig) => return Ok(128 + sig as u8),
    };
    let event = snapshot.event_since(&elect::Leadership::unknown());
    match format {
        Format::Text => {
            if let Some(id) = &snapshot.leader {
                println!("{id}");
            }
        }
        Format::Json => println!(
            "{}",
            lines::render(
                format,
                &context(&election),
                &snapshot,
                event,
                None,
                std::time::SystemTime::now()
            )
        ),
    }
    Ok(if snapshot.leader.is_some() {
        0
    } else {
        NO_LEADER
    })
}
