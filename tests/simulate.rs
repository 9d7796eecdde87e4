//! `elect simulate`: the textbook counts through the command line, JSON
//! rows, the trace, and refusals of bad input.

mod support;

use std::process::Command;

use serde_json::Value;
use support::elect::BIN;

fn simulate(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(BIN)
        .arg("simulate")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn rows(args: &[&str]) -> Vec<Value> {
    let (code, out, err) = simulate(&[args, &["--format", "json"]].concat());
    assert_eq!(code, 0, "{err}");
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn compare_gives_every_algorithm_its_textbook_count() {
    for n in [16u64, 256] {
        let n_s = n.to_string();
        let worst = rows(&["--compare", "--nodes", &n_s, "--case", "worst"]);
        let by = |name: &str| {
            worst
                .iter()
                .find(|r| r["algorithm"] == name)
                .unwrap()
                .clone()
        };
        assert_eq!(by("ring")["messages"], (3 * n - 1) as f64);
        assert_eq!(by("ring")["time_units"], (3 * n - 1) as f64);
        assert_eq!(
            by("chang-roberts")["messages_by_kind"]["election"],
            (n * (n + 1) / 2) as f64
        );
        assert_eq!(
            by("bully")["messages_by_kind"]["election"],
            (n * (n - 1) / 2) as f64
        );
        for r in &worst {
            assert_eq!(r["agreed"], true, "{r}");
            assert_eq!(r["split_brain"], false, "{r}");
            for field in [
                "nodes",
                "case",
                "runs",
                "messages",
                "messages_by_kind",
                "time_units",
                "leaders",
            ] {
                assert!(r.get(field).is_some(), "{field} in {r}");
            }
        }
        let best = rows(&["--compare", "--nodes", &n_s, "--case", "best"]);
        let by = |name: &str| {
            best.iter()
                .find(|r| r["algorithm"] == name)
                .unwrap()
                .clone()
        };
        assert_eq!(by("ring")["messages"], (2 * n) as f64);
        assert_eq!(
            by("chang-roberts")["messages_by_kind"]["election"],
            (2 * n - 1) as f64
        );
        assert_eq!(by("bully")["messages"], (n - 2) as f64);
        assert_eq!(by("bully")["time_units"], 1.0);
    }
}

#[test]
fn random_runs_average_and_the_trace_draws_each_message() {
    let r = &rows(&[
        "--algorithm",
        "chang-roberts",
        "--nodes",
        "64",
        "--case",
        "random",
        "--runs",
        "300",
    ])[0];
    let h: f64 = (1..=64).map(|k| 1.0 / k as f64).sum();
    let mean = r["messages_by_kind"]["election"].as_f64().unwrap();
    assert!((mean - 64.0 * h).abs() / (64.0 * h) < 0.03, "{mean}");
    let (code, out, _) = simulate(&["--algorithm", "ring", "--nodes", "5", "--trace"]);
    assert_eq!(code, 0);
    // Lanes 1..5 around the ring; the last Elected wraps from 5 back to 1.
    assert_eq!(out.lines().filter(|l| l.starts_with("t=")).count(), 14);
    assert!(
        out.contains("t=1     ●────▶    │    │    │    Election(1)"),
        "{out}"
    );
    assert!(
        out.contains("t=10    ◀────┼────┼────┼────●    Elected(5)"),
        "{out}"
    );
}

#[test]
fn bad_simulate_input_is_refused_naming_the_flag() {
    for (args, flag) in [
        (&["--algorithm", "paxos"][..], "--algorithm"),
        (&["--nodes", "1", "--compare"][..], "--nodes"),
        (&["--compare", "--runs", "0"][..], "--runs"),
        (&["--compare", "--algorithm", "ring"][..], "--compare"),
        (&[][..], "--algorithm"),
        (&["--compare", "--endpoints", "x:1"][..], "--endpoints"),
    ] {
        let (code, _, err) = simulate(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(flag), "{args:?}: {err}");
    }
}

#[test]
fn a_partition_splits_ring_and_bully_in_two_but_raft_elects_at_most_one() {
    let out = rows(&[
        "--compare",
        "--nodes",
        "16",
        "--partition",
        "--case",
        "random",
        "--runs",
        "5",
    ]);
    let names: Vec<&str> = out
        .iter()
        .map(|r| r["algorithm"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["ring", "bully", "invitation", "raft"]);
    for r in &out {
        let split = r["algorithm"] != "raft";
        assert_eq!(r["split_brain"], split, "{r}");
        assert_eq!(
            r["leaders"].as_array().unwrap().len(),
            if split { 2 } else { 1 },
            "{r}"
        );
    }
    let (code, _, err) = simulate(&["--algorithm", "chang-roberts", "--partition"]);
    assert_eq!(code, 2);
    assert!(err.contains("--partition"), "{err}");
}

#[test]
fn a_sweep_gives_a_row_per_size_and_algorithm_and_draws_the_chart() {
    let plot = std::env::temp_dir().join(format!("elect-sweep-{}.svg", std::process::id()));
    let out = rows(&[
        "--compare",
        "--sweep",
        "4,8,16,32",
        "--plot",
        plot.to_str().unwrap(),
    ]);
    assert_eq!(out.len(), 4 * 10);
    let svg = std::fs::read_to_string(&plot).unwrap();
    assert!(
        svg.contains("<svg") && svg.contains("messages against N"),
        "{}",
        &svg[..200]
    );
    let _ = std::fs::remove_file(&plot);
    let (code, _, err) = simulate(&["--compare", "--plot", "x.svg"]);
    assert_eq!(code, 2);
    assert!(err.contains("--plot"), "{err}");
    let (code, _, err) = simulate(&["--compare", "--sweep", "4,five"]);
    assert_eq!(code, 2);
    assert!(err.contains("--sweep"), "{err}");
}

#[test]
fn after_a_leader_crash_only_the_second_election_is_counted() {
    let out = rows(&["--compare", "--nodes", "16", "--crash-leader"]);
    let names: Vec<&str> = out
        .iter()
        .map(|r| r["algorithm"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["ring", "bully", "invitation", "raft"]);
    // 15 live processes; the successor of the crashed leader initiates,
    // the worst place on the ring.
    assert_eq!(out[0]["messages"], 44.0);
    assert_eq!(out[0]["leaders"], serde_json::json!([15]));
    assert_eq!(out[1]["leaders"], serde_json::json!([14]));
    assert!(out.iter().all(|r| r["agreed"] == true));
}

#[test]
fn false_suspicion_makes_bully_re_elect_while_raft_keeps_quiet() {
    let out = rows(&[
        "--compare",
        "--nodes",
        "16",
        "--false-suspicion",
        "0.05",
        "--case",
        "random",
        "--runs",
        "5",
    ]);
    let by = |name: &str| out.iter().find(|r| r["algorithm"] == name).unwrap().clone();
    assert!(
        by("bully")["messages_by_kind"]["coordinator"]
            .as_f64()
            .unwrap()
            > 14.0 * 5.0
    );
    assert!(
        by("raft")["messages_by_kind"].get("vote").is_none(),
        "{}",
        by("raft")
    );
    assert_eq!(by("raft")["leader_changes"], 0.0);
    let (code, _, err) = simulate(&["--compare", "--false-suspicion", "0"]);
    assert_eq!(code, 2);
    assert!(err.contains("--false-suspicion"), "{err}");
}
