//! Handover and failover on etcd and ZooKeeper, `elect` beside the peers'
//! own tools on the same ensembles: a thin wrapper over `elect compare`,
//! which starts the ensembles (lab), runs the trials and prints the table.
//!
//! `cargo bench --bench handover -- [--trials 100] [--format json] [--report DIR]`
//! (any `elect compare` flag passes through).

use std::process::Command;

fn main() {
    let passed: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let mut args = vec![
        "compare",
        "--backends",
        "etcd,zk",
        "--scenarios",
        "handover,failover",
        "--baselines",
    ];
    if !passed.iter().any(|a| a == "--trials") {
        args.extend(["--trials", "100"]);
    }
    let status = Command::new(env!("CARGO_BIN_EXE_elect"))
        .args(args)
        .args(&passed)
        .status()
        .expect("running elect compare");
    std::process::exit(status.code().unwrap_or(1));
}
