//! What a lab starts: how many members of each service, where, how they
//! are timed, and whether they are secured.

use std::path::PathBuf;
use std::time::Duration;

use crate::kinds::Mode;
use crate::{etcd, host, zk};

/// What to start.
#[derive(Clone, Debug)]
pub struct Spec {
    /// Where members run.
    pub mode: Mode,
    /// etcd members (0 for none; 1, 3 or 5 make sense).
    pub etcd: usize,
    /// ZooKeeper servers (0 for none).
    pub zk: usize,
    /// Raft-vote peers (0 for none).
    pub raft: usize,
    /// The `elect` binary Raft-vote peers run (default: this program).
    pub elect_bin: Option<PathBuf>,
    /// etcd's Raft timing.
    pub etcd_timing: etcd::Timing,
    /// The lab's directory: member data and logs; removed by `down`.
    pub dir: PathBuf,
    /// How long members may take to become healthy.
    pub ready_within: Duration,
    /// Secure what starts (see [`Security`](crate::Security)).
    pub secure: bool,
    /// A secured etcd's `--auth-token-ttl`, in seconds.
    pub etcd_auth_token_ttl: u64,
    /// ZooKeeper's `syncLimit`, in ticks (by default [`zk::SYNC_LIMIT`]).
    pub zk_sync_limit: u32,
}

impl Spec {
    /// `etcd` etcd members and `zk` ZooKeeper servers in `mode`, in a fresh
    /// directory under the system's temporary directory.
    pub fn new(mode: Mode, etcd: usize, zk: usize) -> Spec {
        let id = host::unique_id();
        Spec {
            mode,
            etcd,
            zk,
            raft: 0,
            elect_bin: None,
            etcd_timing: etcd::Timing::default(),
            dir: std::env::temp_dir().join(format!("elect-lab-{id}")),
            ready_within: Duration::from_secs(90),
            secure: false,
            etcd_auth_token_ttl: ETCD_AUTH_TOKEN_TTL,
            zk_sync_limit: zk::SYNC_LIMIT,
        }
    }
}

/// A secured lab's etcd `--auth-token-ttl` unless the spec says otherwise,
/// in seconds: short, so that tests cross token expiry.
pub const ETCD_AUTH_TOKEN_TTL: u64 = 3;
