//! `--report DIR`: charts (SVG, plotters) and one self-contained HTML page
//! that inlines them beside the table, the exact command and the versions
//! of everything measured. `rows.json` holds the rows as printed.

use std::path::{Path, PathBuf};
use std::process::Command;

use plotters::prelude::*;

use crate::palette::COLORS;
use crate::row::{Row, Unavailable};
use crate::table::{cell, markdown_table, scale_table, steady_table, table};
use crate::verdict;

/// Writes the report; the page's path.
pub fn write(
    dir: &Path,
    rows: &[Row],
    unavailable: &[Unavailable],
    command: &str,
) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let mut charts = Vec::new();
    for scenario in [
        "handover",
        "failover",
        "failover-next",
        "election",
        "freeze",
        "cutoff",
    ] {
        let series: Vec<&Row> = rows
            .iter()
            .filter(|r| r.scenario == scenario && !r.samples_ms.is_empty())
            .collect();
        if series.is_empty() {
            continue;
        }
        let file = dir.join(format!("{scenario}.svg"));
        distribution(&file, scenario, &series)?;
        charts.push((
            format!("{scenario}: distribution of times to the successor's `elected`"),
            file,
        ));
    }
    let scale: Vec<&Row> = rows.iter().filter(|r| r.scenario == "scale").collect();
    if !scale.is_empty() {
        let file = dir.join("scale.svg");
        scale_curve(&file, &scale)?;
        charts.push((
            "scale: handover p50, wake-ups per leader change and memory per candidate against candidates".into(),
            file,
        ));
    }
    let json: String = rows
        .iter()
        .map(|r| serde_json::to_string(r).expect("rows serialize") + "\n")
        .collect();
    std::fs::write(dir.join("rows.json"), json)?;
    // Each asks programs for their versions (java among them): once.
    let versions = versions();
    std::fs::write(
        dir.join("report.md"),
        markdown(rows, unavailable, command, &charts, &versions),
    )?;
    for (name, title, scenarios) in BOOK_PAGES {
        let of_page: Vec<Row> = rows
            .iter()
            .filter(|r| scenarios.contains(&r.scenario))
            .cloned()
            .collect();
        if !of_page.is_empty() {
            std::fs::write(
                dir.join(format!("book-{name}.md")),
                book_page(title, &of_page, command, &charts, &versions),
            )?;
        }
    }
    let page = dir.join("report.html");
    std::fs::write(&page, html(rows, unavailable, command, &charts, &versions)?)?;
    Ok(page)
}

fn label(r: &Row) -> String {
    format!("{} {}", r.backend, r.implementation)
}

/// Empirical CDFs of the samples, one line per backend and implementation.
fn distribution(file: &Path, scenario: &str, rows: &[&Row]) -> anyhow::Result<()> {
    let max = rows
        .iter()
        .flat_map(|r| r.samples_ms.iter().copied())
        .fold(0.0f64, f64::max)
        .max(0.001);
    let root = SVGBackend::new(file, (800, 480)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("{scenario}: fraction of trials done by time t"),
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d((0.01f64..max * 1.1).log_scale(), 0f64..1.0)?;
    chart
        .configure_mesh()
        .x_desc("ms (log scale)")
        .y_desc("fraction of trials")
        .draw()?;
    for (i, r) in rows.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let mut s = r.samples_ms.clone();
        s.sort_by(f64::total_cmp);
        let n = s.len() as f64;
        let points: Vec<(f64, f64)> = s
            .iter()
            .enumerate()
            .map(|(k, &x)| (x.max(0.01), (k + 1) as f64 / n))
            .collect();
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(2)))?
            .label(label(r))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerRight)
        .draw()?;
    root.present()?;
    Ok(())
}

/// One measure of a row, for a chart.
type Pick = fn(&Row) -> Option<f64>;

/// Handover p50 (elect's and the floor's), wake-ups per change and
/// memory per candidate against N.
fn scale_curve(file: &Path, rows: &[&Row]) -> anyhow::Result<()> {
    let root = SVGBackend::new(file, (1200, 420)).into_drawing_area();
    root.fill(&WHITE)?;
    let panels = root.split_evenly((1, 3));
    let max_n = rows.iter().map(|r| r.candidates).max().unwrap_or(3) as f64;
    // One series per backend and implementation: elect's, and the floor
    // beside it in the handover panel (the floor has no wake-ups or
    // memory of its own).
    let series: Vec<(&str, &str)> = {
        let mut s: Vec<(&str, &str)> = rows.iter().map(|r| (r.backend, r.implementation)).collect();
        s.sort_unstable();
        s.dedup();
        s
    };
    let picks: [(&str, Pick); 3] = [
        ("handover p50 (ms)", |r| r.p50_ms),
        ("wake-ups per leader change", |r| r.wakeups_per_change),
        ("memory per candidate (KiB)", |r| r.memory_kib_per_candidate),
    ];
    for (area, (title, pick)) in panels.iter().zip(picks) {
        let ymax = rows.iter().filter_map(|r| pick(r)).fold(1.0f64, f64::max);
        let mut chart = ChartBuilder::on(area)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(46)
            .build_cartesian_2d((2f64..max_n * 1.5).log_scale(), 0f64..ymax * 1.2)?;
        chart.configure_mesh().x_desc("candidates").draw()?;
        for (i, &(backend, imp)) in series.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            let points: Vec<(f64, f64)> = rows
                .iter()
                .filter(|r| (r.backend, r.implementation) == (backend, imp))
                .filter_map(|r| Some((r.candidates as f64, pick(r)?)))
                .collect();
            if points.is_empty() {
                continue;
            }
            chart
                .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))?
                .label(format!("{backend} {imp}"))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                });
            chart.draw_series(
                points
                    .into_iter()
                    .map(|p| Circle::new(p, 4, color.filled())),
            )?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
    }
    root.present()?;
    Ok(())
}

/// What was measured, with which versions.
fn versions() -> Vec<(String, String)> {
    let first_line = |program: &str, args: &[&str]| -> String {
        Command::new(program)
            .args(args)
            .output()
            .ok()
            .map(|o| {
                let text = if o.stdout.is_empty() {
                    o.stderr
                } else {
                    o.stdout
                };
                String::from_utf8_lossy(&text)
                    .lines()
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_owned()
            })
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "not found".into())
    };
    let etcd_program = |name: &str| elect_lab::etcd_release::program(name).display().to_string();
    let package = |name: &str| first_line("dpkg-query", &["-W", "-f", "${Version}", name]);
    vec![
        ("elect".into(), env!("CARGO_PKG_VERSION").into()),
        (
            "commit".into(),
            first_line("git", &["rev-parse", "--short=12", "HEAD"]),
        ),
        ("machine".into(), machine()),
        (
            "etcd".into(),
            first_line(&etcd_program("etcd"), &["--version"]),
        ),
        (
            "etcdctl".into(),
            first_line(&etcd_program("etcdctl"), &["version"]),
        ),
        ("zookeeper (Debian package)".into(), package("zookeeper")),
        ("java".into(), first_line("java", &["-version"])),
        ("python3-kazoo".into(), package("python3-kazoo")),
        (
            "libcurator-recipes-java".into(),
            package("libcurator-recipes-java"),
        ),
        ("kernel".into(), first_line("uname", &["-sr"])),
        (
            "cpus".into(),
            std::thread::available_parallelism().map_or("?".into(), |n| n.to_string()),
        ),
    ]
}

/// The machine measured on: its CPU model and memory, from /proc.
fn machine() -> String {
    let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    let field = |text: &str, key: &str| -> Option<String> {
        text.lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split(':').nth(1))
            .map(|v| v.trim().to_owned())
    };
    let cpu = field(&read("/proc/cpuinfo"), "model name").unwrap_or_else(|| "?".into());
    let memory = field(&read("/proc/meminfo"), "MemTotal").unwrap_or_else(|| "?".into());
    format!("{cpu}, {memory} of memory")
}

/// The book's results pages (`docs/src/results`), each the rows of its
/// scenarios: (file, title, scenarios).
const BOOK_PAGES: [(&str, &str, &[&str]); 3] = [
    (
        "performance",
        "Performance",
        &[
            "election",
            "handover",
            "failover",
            "failover-next",
            "churn",
            "scale",
            "scale-processes",
            "elections",
        ],
    ),
    (
        "faults",
        "Faults",
        &["freeze", "cutoff", "member-kill", "service-leader-kill"],
    ),
    (
        "operations",
        "Operations",
        &["rolling-restart", "compaction"],
    ),
];

/// One results page of the book: stamped with the commit and the machine,
/// the verdict of its rows, the command, the rows, its charts.
fn book_page(
    title: &str,
    rows: &[Row],
    command: &str,
    charts: &[(String, PathBuf)],
    versions: &[(String, String)],
) -> String {
    let version_of = |what: &str| {
        versions
            .iter()
            .find(|(w, _)| w == what)
            .map_or("?", |(_, v)| v.as_str())
            .to_owned()
    };
    let verdict = verdict::verdict(rows);
    let mut out = format!(
        "## {title}: the latest run\n\nGenerated by `elect compare --report` at commit `{}` on {} \
         ({} CPUs, {}).\n\n{}\n\n",
        version_of("commit"),
        version_of("machine"),
        version_of("cpus"),
        version_of("kernel"),
        verdict.safety
    );
    for line in &verdict.fastest {
        out.push_str(&format!("- {line}\n"));
    }
    out.push_str(&format!("\n```sh\n{command}\n```\n\n"));
    out.push_str(&markdown_table(rows));
    push_scale_table(&mut out, rows);
    push_steady_table(&mut out, rows);
    for (title, file) in charts {
        let name = file.file_name().unwrap_or_default().to_string_lossy();
        let scenario = name.trim_end_matches(".svg");
        if rows.iter().any(|r| r.scenario == scenario) {
            out.push_str(&format!("\n![{title}](run/{name})\n"));
        }
    }
    out.push_str("\nVersions: ");
    let listed: Vec<String> = versions
        .iter()
        .filter(|(w, _)| !matches!(w.as_str(), "commit" | "machine"))
        .map(|(w, v)| format!("{w} {v}"))
        .collect();
    out.push_str(&listed.join("; "));
    out.push('\n');
    out
}

fn markdown(
    rows: &[Row],
    unavailable: &[Unavailable],
    command: &str,
    charts: &[(String, PathBuf)],
    versions: &[(String, String)],
) -> String {
    let verdict = verdict::verdict(rows);
    let mut out = format!("# elect compare\n\n{}\n\n", verdict.safety);
    for line in &verdict.fastest {
        out.push_str(&format!("- {line}\n"));
    }
    out.push_str(&format!("\n```\n{command}\n```\n\n"));
    out.push_str(&markdown_table(rows));
    push_scale_table(&mut out, rows);
    push_steady_table(&mut out, rows);
    for u in unavailable {
        out.push_str(&format!(
            "\nnot run: {} {}{}: {}\n",
            u.backend,
            u.implementation,
            u.scenario.map(|s| format!(" {s}")).unwrap_or_default(),
            u.reason
        ));
    }
    for (title, file) in charts {
        let name = file.file_name().unwrap_or_default().to_string_lossy();
        out.push_str(&format!("\n## {title}\n\n![{title}]({name})\n"));
    }
    out.push_str("\n## Versions\n\n");
    for (what, v) in versions {
        out.push_str(&format!("- {what}: {v}\n"));
    }
    out
}

/// The steady rows' own table, under a heading, where there are any.
fn push_steady_table(out: &mut String, rows: &[Row]) {
    let table = steady_table(rows);
    if !table.is_empty() {
        out.push_str(
            "\nSteady: what candidates cost the servers while nothing happens, in requests \
             the servers received per second (etcd's gRPC messages, ZooKeeper's packets), net \
             of the empty ensemble's; `all`: per candidate with N candidates, `leader`: a \
             lone candidate, `follower`: one more behind the next in line:\n\n",
        );
        out.push_str(&table);
    }
}

/// The scale rows' own table, under a heading, where there are any.
fn push_scale_table(out: &mut String, rows: &[Row]) {
    let table = scale_table(rows);
    if !table.is_empty() {
        out.push_str(
            "\nScale: N candidates in one process through the library; requests and \
             notifications per change net of the steady state's renewals (`idle req/s`):\n\n",
        );
        out.push_str(&table);
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The colour of a backend's swatch in the page, as its charts' first
/// three series are coloured.
fn backend_color(backend: &str) -> RGBColor {
    match backend {
        "etcd" => COLORS[0],
        "zk" => COLORS[1],
        _ => COLORS[2],
    }
}

/// The page's head: its title and style.
const HEAD: &str = "<!doctype html><html><head><meta charset=\"utf-8\"><title>elect compare</title>\
         <style>body{font-family:sans-serif;margin:1.5em;color:#222}\
         table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}\
         td:nth-child(-n+3),th:nth-child(-n+3){text-align:left}\
         pre{background:#f4f4f4;padding:8px;white-space:pre-wrap;overflow-wrap:anywhere}\
         .wide{overflow-x:auto}svg{max-width:100%;height:auto}\
         .verdict{padding:12px 20px;border-radius:6px;border:2px solid}\
         .verdict h1{margin:0 0 6px 0;font-size:1.5em}.verdict p{font-size:1.15em;margin:4px 0}\
         .safe{background:#e3f4e6;border-color:#2e7d32}.unsafe{background:#fde2e2;border-color:#c62828}\
         .cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(390px,1fr));gap:12px}\
         .card{border:1px solid #bbb;border-radius:6px;padding:6px 10px}.card h3{margin:2px 0 6px 0}\
         .card{font-size:0.86em;overflow:hidden}.card table{width:100%}\
         .card td,.card th{border:none;border-bottom:1px solid #eee;white-space:nowrap;padding:2px 4px}\
         .card td:nth-child(-n+3),.card th:nth-child(-n+3){text-align:right}\
         .card td:first-child,.card th:first-child{text-align:left}\
         .swatch{display:inline-block;width:14px;height:14px;margin-right:6px;vertical-align:middle}\
         </style></head><body>";

/// The page: the verdict first, then the scenarios side by side (one card
/// each), then every row, the charts and the versions.
fn html(
    rows: &[Row],
    unavailable: &[Unavailable],
    command: &str,
    charts: &[(String, PathBuf)],
    versions: &[(String, String)],
) -> anyhow::Result<String> {
    let verdict = verdict::verdict(rows);
    let mut out = String::from(HEAD);
    out.push_str(&format!(
        "<header class=\"verdict {}\"><h1>elect compare: {}</h1><p>{}</p><ul>",
        if verdict.safe { "safe" } else { "unsafe" },
        if verdict.safe {
            "safety held"
        } else {
            "SAFETY FAILED"
        },
        escape(&verdict.safety)
    ));
    for line in &verdict.fastest {
        out.push_str(&format!("<li>{}</li>", escape(line)));
    }
    out.push_str("</ul></header>");
    scenario_cards(&mut out, rows);
    every_row(&mut out, rows, command);
    for u in unavailable {
        out.push_str(&format!(
            "<p>not run: {} {}{}: {}</p>",
            u.backend,
            escape(u.implementation),
            u.scenario.map(|s| format!(" {s}")).unwrap_or_default(),
            escape(&u.reason)
        ));
    }
    for (title, file) in charts {
        let svg = std::fs::read_to_string(file)?;
        out.push_str(&format!("<h2>{}</h2>{svg}", escape(title)));
    }
    out.push_str("<h2>Versions</h2><ul>");
    for (what, v) in versions {
        out.push_str(&format!("<li>{}: {}</li>", escape(what), escape(v)));
    }
    out.push_str("</ul></body></html>\n");
    Ok(out)
}

/// The scenarios side by side: a card each, a line per contender.
fn scenario_cards(out: &mut String, rows: &[Row]) {
    out.push_str("<h2>Scenarios side by side</h2><div class=\"cards\">");
    let mut scenarios: Vec<&str> = Vec::new();
    for r in rows {
        if !scenarios.contains(&r.scenario) {
            scenarios.push(r.scenario);
        }
    }
    for scenario in scenarios {
        let in_ttl = verdict::waits_for_ttl(scenario);
        out.push_str(&format!(
            "<section class=\"card\"><h3>{}</h3><table><tr><th>contender</th>\
             <th>p50</th><th>p99</th><th>{}</th><th>safe</th></tr>",
            escape(scenario),
            if in_ttl { "mean/TTL" } else { "max" }
        ));
        for r in rows.iter().filter(|r| r.scenario == scenario) {
            let RGBColor(red, green, blue) = backend_color(r.backend);
            let last = if in_ttl {
                r.mean_ttl.map_or("-".into(), |m| format!("{m:.2}"))
            } else {
                cell(r.max_ms, " ms")
            };
            out.push_str(&format!(
                "<tr><td><span class=\"swatch\" style=\"background:rgb({red},{green},{blue})\"></span>\
                 {}</td><td>{}</td><td>{}</td><td>{last}</td><td>{}</td></tr>",
                // elect's rows go by the backend's name, the others (a
                // peer's tool, the floor) by theirs, beside the backend's
                // colour.
                if r.implementation == "elect" {
                    format!("<b>{}</b>", verdict::backend_name(r.backend))
                } else {
                    escape(r.implementation)
                },
                cell(r.p50_ms, " ms"),
                cell(r.p99_ms, " ms"),
                if r.safety_violation.is_some() { "✗" } else { "✓" }
            ));
        }
        out.push_str("</table></section>");
    }
    out.push_str("</div>");
}

/// Every row, in a table that scrolls in its own box, under the command
/// line that measured them.
fn every_row(out: &mut String, rows: &[Row], command: &str) {
    out.push_str("<h2>Every row</h2>");
    let (header, cells) = table(rows);
    // The table of every row is wider than a laptop's screen: it scrolls
    // in its own box, and the page does not scroll sideways.
    out.push_str(&format!(
        "<pre>{}</pre><div class=\"wide\"><table><tr>",
        escape(command)
    ));
    for h in header {
        out.push_str(&format!("<th>{h}</th>"));
    }
    out.push_str("</tr>");
    for row in cells {
        out.push_str("<tr>");
        for c in row {
            out.push_str(&format!("<td>{}</td>", escape(&c)));
        }
        out.push_str("</tr>");
    }
    out.push_str("</table></div>");
}
