//! The "Steering who leads" guide, run as written: its shell blocks, in
//! order, in one bash against a lab it starts and stops itself.

mod support;

use std::path::Path;
use std::process::Command;

use support::proc::scratch;

/// The guide's `sh` blocks, in order.
fn guide_script() -> String {
    let guide = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/src/guides/steering.md");
    let text = std::fs::read_to_string(guide).expect("the guide");
    let mut script = String::new();
    let mut in_sh = false;
    for line in text.lines() {
        match line.trim() {
            "```sh" => in_sh = true,
            "```" if in_sh => in_sh = false,
            _ if in_sh => {
                script.push_str(line);
                script.push('\n');
            }
            _ => {}
        }
    }
    script
}

#[test]
fn the_steering_guide_works_as_written_against_the_lab() {
    let dir = scratch("steering-guide");
    let bin = Path::new(support::elect::BIN).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let script = format!("set -e\n{}", guide_script());
    // Its own process group (setsid), so what it leaves in the background
    // is killed with it; two minutes at most.
    let out = Command::new("setsid")
        .args(["--wait", "timeout", "120", "bash", "-c", &script])
        .current_dir(&dir)
        .env("PATH", path)
        .env("ELECT_LAB_DIR", dir.join("lab"))
        .env_remove("ELECT_ELECTION")
        .env_remove("ELECT_ENDPOINTS")
        .output()
        .expect("bash");
    // The candidates it left in the background, by the lab's pids file's
    // absence of them: whatever still runs from this directory.
    let _ = Command::new("pkill")
        .args([
            "-KILL",
            "-f",
            "--",
            "--election (nightly|orders|reports) --id",
        ])
        .status();
    let _ = Command::new(support::elect::BIN)
        .args(["lab", "down"])
        .env("ELECT_LAB_DIR", dir.join("lab"))
        .status();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the guide failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains(": host-b leads (token"), "{stdout}");
    let leaders: Vec<&str> = stdout
        .lines()
        .filter(|l| matches!(*l, "near-db" | "far-1"))
        .collect();
    assert_eq!(leaders, ["near-db", "far-1"], "{stdout}");
    let gated: Vec<&str> = stdout
        .lines()
        .filter(|l| matches!(*l, "db-a" | "db-b"))
        .collect();
    assert_eq!(gated, ["db-a", "db-b"], "{stdout}");
    assert!(
        stdout
            .lines()
            .any(|l| l.contains(" db-a ") && l.contains("failing")),
        "{stdout}"
    );
}
