//! What a reader of the report should get at a glance, from the rows:
//! whether safety held everywhere, and which backend is fastest at each
//! scenario, by how much. Failovers are compared in multiples of each
//! backend's TTL (the backends run with different TTLs, and a failover
//! costs about one whatever the TTL is); handovers and elections, which do
//! not wait for a TTL, in milliseconds.

use crate::row::Row;

/// The scenarios the verdict ranks, in the order it says them.
const RANKED: [&str; 7] = [
    "handover",
    "election",
    "failover",
    "failover-next",
    "freeze",
    "cutoff",
    "member-kill",
];

/// The verdict of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// Whether every safety check held.
    pub safe: bool,
    /// One sentence on safety.
    pub safety: String,
    /// One sentence per ranked scenario: who is fastest, by how much.
    pub fastest: Vec<String>,
}

/// A backend's name as the report says it.
pub fn backend_name(backend: &str) -> &str {
    match backend {
        "zk" => "ZooKeeper",
        "raft" => "Raft-vote",
        other => other,
    }
}

/// Whether a scenario waits out a TTL, so it is compared in multiples of it.
pub fn waits_for_ttl(scenario: &str) -> bool {
    matches!(scenario, "failover" | "failover-next" | "freeze" | "cutoff")
}

/// The verdict of `rows`.
pub fn verdict(rows: &[Row]) -> Verdict {
    let violations: Vec<&Row> = rows
        .iter()
        .filter(|r| r.safety_violation.is_some())
        .collect();
    let fenced = rows.iter().filter(|r| r.fenced).count();
    let safety = if violations.is_empty() {
        format!(
            "Safety held everywhere: no stale write was accepted and no two leaders overlapped \
             outside freeze, in the {fenced} row{} with a fenced command and every other row.",
            if fenced == 1 { "" } else { "s" }
        )
    } else {
        let which: Vec<String> = violations
            .iter()
            .map(|r| {
                format!(
                    "{} {} {} ({})",
                    backend_name(r.backend),
                    r.implementation,
                    r.scenario,
                    r.safety_violation.as_deref().unwrap_or_default()
                )
            })
            .collect();
        format!(
            "SAFETY FAILED in {}: {}.",
            violations.len(),
            which.join("; ")
        )
    };
    let fastest = RANKED
        .iter()
        .filter_map(|scenario| fastest_at(rows, scenario))
        .collect();
    Verdict {
        safe: violations.is_empty(),
        safety,
        fastest,
    }
}

/// The measure a scenario is ranked by, and how it is written.
fn measure(scenario: &str, row: &Row) -> Option<f64> {
    if waits_for_ttl(scenario) {
        row.mean_ttl
    } else {
        row.p50_ms
    }
}

fn written(scenario: &str, value: f64) -> String {
    if waits_for_ttl(scenario) {
        format!("{value:.2} × TTL (mean)")
    } else if value >= 10.0 {
        format!("{value:.1} ms (p50)")
    } else {
        format!("{value:.2} ms (p50)")
    }
}

/// "handover: Raft-vote 0.53 ms (p50), 4.2× faster than ZooKeeper …",
/// among elect's own rows of `scenario` at the smallest size measured;
/// `None` when fewer than two backends ran it.
fn fastest_at(rows: &[Row], scenario: &str) -> Option<String> {
    let of_scenario = rows
        .iter()
        .filter(|r| r.scenario == scenario && r.implementation == "elect");
    let smallest = of_scenario.clone().map(|r| r.candidates).min()?;
    let mut ranked: Vec<(&Row, f64)> = of_scenario
        .filter(|r| r.candidates == smallest)
        .filter_map(|r| measure(scenario, r).map(|m| (r, m)))
        .collect();
    if ranked.len() < 2 {
        return None;
    }
    ranked.sort_by(|a, b| a.1.total_cmp(&b.1));
    let (best, best_value) = ranked[0];
    let (next, next_value) = ranked[1];
    let by = if best_value > 0.0 && next_value / best_value >= 1.05 {
        format!("{:.1}× faster than", next_value / best_value)
    } else {
        // Within 5%: one run's spread, not a difference.
        "level with".to_owned()
    };
    let rest: Vec<String> = ranked[1..]
        .iter()
        .map(|(r, v)| format!("{} {}", backend_name(r.backend), written(scenario, *v)))
        .collect();
    Some(format!(
        "{scenario}: {} is fastest, {}, {by} {} ({})",
        backend_name(best.backend),
        written(scenario, best_value),
        backend_name(next.backend),
        rest.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(backend: &'static str, scenario: &'static str, p50: f64, mean_ttl: f64) -> Row {
        let ttl = std::time::Duration::from_secs(2);
        let mut r = Row::new(backend, "elect", scenario, ttl, 3, &[], 0, None);
        r.p50_ms = Some(p50);
        r.mean_ttl = Some(mean_ttl);
        r
    }

    #[test]
    fn the_fastest_backend_is_named_with_its_margin() {
        let rows = [
            row("etcd", "handover", 2.2, 0.0),
            row("zk", "handover", 2.1, 0.0),
            row("raft", "handover", 0.5, 0.0),
            row("etcd", "failover", 1988.0, 1.08),
            row("zk", "failover", 2100.0, 1.02),
            row("etcd", "cutoff", 2000.0, 1.0),
            row("zk", "cutoff", 2060.0, 1.03),
        ];
        let v = verdict(&rows);
        assert!(v.safe, "{v:?}");
        assert_eq!(
            v.fastest,
            [
                "handover: Raft-vote is fastest, 0.50 ms (p50), 4.2× faster than ZooKeeper \
                 (ZooKeeper 2.10 ms (p50), etcd 2.20 ms (p50))",
                "failover: ZooKeeper is fastest, 1.02 × TTL (mean), 1.1× faster than etcd \
                 (etcd 1.08 × TTL (mean))",
                "cutoff: etcd is fastest, 1.00 × TTL (mean), level with ZooKeeper \
                 (ZooKeeper 1.03 × TTL (mean))",
            ]
        );
    }

    #[test]
    fn a_violation_is_the_verdict() {
        let mut bad = row("etcd", "cutoff", 1.0, 1.0);
        bad.safety_violation = Some("2 stale writes accepted".into());
        let v = verdict(&[bad, row("zk", "cutoff", 1.0, 1.0)]);
        assert!(!v.safe);
        assert_eq!(
            v.safety,
            "SAFETY FAILED in 1: etcd elect cutoff (2 stale writes accepted)."
        );
    }

    #[test]
    fn one_backend_alone_is_not_ranked() {
        assert!(
            verdict(&[row("etcd", "handover", 2.0, 0.0)])
                .fastest
                .is_empty()
        );
    }
}
