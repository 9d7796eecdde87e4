//! `elect demo`, as a new user runs it from the README.

mod support;

use std::process::Command;

use support::elect::BIN;

#[test]
fn the_demo_elects_fails_over_hands_over_and_leaves_nothing_running() {
    let out = Command::new(BIN)
        .arg("demo")
        .output()
        .expect("running elect demo");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let elected: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains(" elected (term "))
        .collect();
    assert_eq!(elected.len(), 3, "election, failover, handover:\n{stdout}");
    assert!(elected[1].contains("after the crash"), "{stdout}");
    assert!(elected[2].contains("after SIGTERM"), "{stdout}");
    assert!(
        stdout.contains("is leading, fencing token"),
        "the wrapped command ran:\n{stdout}"
    );
    // Peers, and the watchdogs and loops they ran.
    for pattern in ["election demo --id peer-", "is leading, fencing token"] {
        let leftovers = Command::new("pgrep")
            .args(["-f", pattern])
            .output()
            .unwrap();
        assert!(
            leftovers.stdout.is_empty(),
            "left running: {}",
            String::from_utf8_lossy(&leftovers.stdout)
        );
    }
}
