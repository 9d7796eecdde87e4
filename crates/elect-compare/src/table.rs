//! The rows as tables: the side-by-side table (text for the terminal,
//! Markdown for the book), and the scale table.

use crate::row::Row;

/// A measure with its unit, to three significant figures or so; `-`
/// when there is none.
pub(crate) fn cell(v: Option<f64>, unit: &str) -> String {
    match v {
        Some(v) if v >= 100.0 => format!("{v:.0}{unit}"),
        Some(v) if v >= 10.0 => format!("{v:.1}{unit}"),
        Some(v) => format!("{v:.2}{unit}"),
        None => "-".into(),
    }
}

/// Whether `row` counts the steady state (no samples: the steady table).
pub fn is_steady(row: &Row) -> bool {
    row.scenario.starts_with("steady")
}

/// The header and cells of the side-by-side table (the steady rows have
/// their own table).
pub fn table(rows: &[Row]) -> (Vec<&'static str>, Vec<Vec<String>>) {
    let header = vec![
        "backend",
        "implementation",
        "scenario",
        "n",
        "trials",
        "p50",
        "p99",
        "max",
        "mean",
        "mean/TTL",
        "changes",
        "overlap",
        "stale",
        "wake/chg",
        "notif/chg",
        "req/chg",
    ];
    let cells = rows
        .iter()
        .filter(|r| !is_steady(r))
        .map(|r| {
            vec![
                r.backend.to_owned(),
                r.implementation.to_owned(),
                r.scenario.to_owned(),
                r.candidates.to_string(),
                r.trials.to_string(),
                cell(r.p50_ms, "ms"),
                cell(r.p99_ms, "ms"),
                cell(r.max_ms, "ms"),
                cell(r.mean_ms, "ms"),
                cell(r.mean_ttl, ""),
                r.failovers.to_string(),
                if r.fenced {
                    cell(r.max_overlap_ms.or(Some(0.0)), "ms")
                } else {
                    "-".into()
                },
                r.stale_writes_accepted
                    .map_or("-".into(), |n| n.to_string()),
                cell(r.wakeups_per_change, ""),
                cell(r.notifications_per_change, ""),
                cell(r.requests_per_change, ""),
            ]
        })
        .collect();
    (header, cells)
}

/// The table as aligned text.
pub fn text_table(rows: &[Row]) -> String {
    let (header, cells) = table(rows);
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in &cells {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.len());
        }
    }
    let line = |row: Vec<String>| {
        row.iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (c, w))| {
                if i < 3 {
                    format!("{c:<w$}")
                } else {
                    format!("{c:>w$}")
                }
            })
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_owned()
    };
    let mut out = line(header.iter().map(|h| h.to_string()).collect());
    out.push('\n');
    for row in cells {
        out.push_str(&line(row));
        out.push('\n');
    }
    out
}

/// The table in Markdown.
pub fn markdown_table(rows: &[Row]) -> String {
    let (header, cells) = table(rows);
    let mut out = format!("| {} |\n", header.join(" | "));
    out.push_str(&format!(
        "|{}\n",
        header
            .iter()
            .enumerate()
            .map(|(i, _)| if i < 3 { "---|" } else { "---:|" })
            .collect::<String>()
    ));
    for row in cells {
        out.push_str(&format!("| {} |\n", row.join(" | ")));
    }
    out
}

/// The scale rows in Markdown, with what the side-by-side table leaves
/// out: the steady state's requests, memory and connections per
/// candidate, and the floor beside each point. Empty when no scale row
/// was measured.
pub fn scale_table(rows: &[Row]) -> String {
    let scale: Vec<&Row> = rows.iter().filter(|r| r.scenario == "scale").collect();
    if scale.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "| backend | implementation | n | p50 | p99 | wake/chg | notif/chg | req/chg | idle req/s | memory/candidate | connections/candidate |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in scale {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.backend,
            r.implementation,
            r.candidates,
            cell(r.p50_ms, "ms"),
            cell(r.p99_ms, "ms"),
            cell(r.wakeups_per_change, ""),
            cell(r.notifications_per_change, ""),
            cell(r.requests_per_change, ""),
            cell(r.idle_requests_per_s, ""),
            cell(r.memory_kib_per_candidate, " KiB"),
            cell(r.connections_per_candidate, ""),
        ));
    }
    out
}

/// The steady rows in Markdown: requests the servers received per
/// second, per candidate at each N, the leader's and a follower's, by
/// backend, TTL and implementation. Empty when none was counted.
pub fn steady_table(rows: &[Row]) -> String {
    let steady: Vec<&Row> = rows.iter().filter(|r| is_steady(r)).collect();
    if steady.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "| backend | implementation | TTL | role | n | requests/s per candidate |\n\
         |---|---|---:|---|---:|---:|\n",
    );
    for r in steady {
        let role = match r.scenario {
            "steady-leader" => "leader",
            "steady-follower" => "follower",
            _ => "all",
        };
        out.push_str(&format!(
            "| {} | {} | {} s | {role} | {} | {} |\n",
            r.backend,
            r.implementation,
            r.ttl_ms / 1000.0,
            r.candidates,
            cell(r.idle_requests_per_s, ""),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::probe::Counters;

    #[test]
    fn the_scale_table_gives_memory_connections_and_the_steady_state() {
        let handover = Row::new(
            "etcd",
            "elect",
            "handover",
            Duration::from_secs(2),
            3,
            &[Duration::from_millis(3)],
            1,
            None,
        );
        assert_eq!(scale_table(std::slice::from_ref(&handover)), "");
        let mut scale = Row::new(
            "zk",
            "elect",
            "scale",
            Duration::from_secs(2),
            30,
            &[Duration::from_millis(10)],
            1,
            Some(Counters {
                notifications: 30.0,
                requests: 51.0,
            }),
        );
        scale.idle_requests_per_s = Some(302.0);
        scale.memory_kib_per_candidate = Some(63.0);
        scale.connections_per_candidate = Some(1.0);
        let table = scale_table(&[handover, scale]);
        let last = table.lines().last().unwrap();
        assert_eq!(
            last,
            "| zk | elect | 30 | 10.0ms | 10.0ms | 30.0 | 30.0 | 51.0 | 302 | 63.0 KiB | 1.00 |"
        );
    }

    #[test]
    fn the_steady_rows_have_a_table_of_their_own() {
        let mut follower = Row::new(
            "etcd",
            "elect",
            "steady-follower",
            Duration::from_secs(10),
            30,
            &[],
            0,
            None,
        );
        follower.idle_requests_per_s = Some(0.3);
        let (_, cells) = table(std::slice::from_ref(&follower));
        assert!(cells.is_empty(), "not in the latency table");
        let steady = steady_table(&[follower]);
        assert_eq!(
            steady.lines().last().unwrap(),
            "| etcd | elect | 10 s | follower | 30 | 0.30 |"
        );
    }
}
