//! The judgement as people and programs read it: `verdict.json`,
//! `report.md`, `book-soak.md` (the same, as the book's results page
//! includes it) and `report.html` with a timeline of tenures and faults.
//! Each opens with the verdict.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use crate::checks::{Judgement, Kind, describe_fault, ms};
use crate::history::{History, Micros, StoreRecord};

/// Writes `verdict.json`, `report.md` and `report.html` into `dir`.
pub fn write(dir: &Path, j: &Judgement, h: &History) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let json = serde_json::to_string_pretty(j).map_err(std::io::Error::other)?;
    std::fs::write(dir.join("verdict.json"), json + "\n")?;
    std::fs::write(dir.join("report.md"), markdown(j, h))?;
    std::fs::write(dir.join("book-soak.md"), book(j, h))?;
    std::fs::write(dir.join("report.html"), html(j, h))?;
    Ok(())
}

/// The one-line verdict.
pub fn headline(j: &Judgement) -> String {
    let count = |decides: bool| -> usize {
        j.elections
            .iter()
            .filter(|e| e.decides_exit == decides)
            .map(|e| e.violations.len())
            .sum()
    };
    let ours = count(true);
    let theirs = count(false);
    let peers = if j.elections.iter().any(|e| !e.decides_exit) {
        format!("; the peers beside it: {theirs} violations")
    } else {
        String::new()
    };
    if j.held {
        format!("every check held for elect{peers}")
    } else {
        format!("{ours} violations by elect{peers}")
    }
}

fn duration(us: Micros) -> String {
    let s = us / 1_000_000;
    if s >= 3600 {
        format!("{}h{:02}m{:02}s", s / 3600, s % 3600 / 60, s % 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{:.1}s", us as f64 / 1e6)
    }
}

/// The markdown page.
pub fn markdown(j: &Judgement, h: &History) -> String {
    let mut s = String::new();
    for section in [
        intro,
        verdict_table,
        faults_dealt,
        failover_by_fault,
        service_faults,
        violations,
    ] {
        section(&mut s, j, h);
    }
    s
}

/// The headline, how the run went, and what ran.
fn intro(s: &mut String, j: &Judgement, h: &History) {
    let _ = writeln!(s, "# Soak: {}\n", headline(j));
    let _ = writeln!(
        s,
        "Seed {}, {} of faults{} ({} mode). The sampler read /proc every {} at best; its largest gap was {} (p99 of each second's largest: {}): overlaps shorter than the gap around them are below its resolution. A line may lag the store by {} either way.\n",
        j.seed,
        duration(j.ended),
        if j.interrupted { ", stopped early" } else { "" },
        h.meta.mode,
        ms(h.meta.sampler_period),
        ms(j.sampler_max_gap),
        ms(j.sampler_p99_gap),
        ms(j.line_slack),
    );
    if !h.meta.versions.is_empty() {
        let ran: Vec<String> = h
            .meta
            .versions
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect();
        let _ = writeln!(s, "Ran: {}.\n", ran.join("; "));
    }
    if !j.end_recorded {
        let _ = writeln!(s, "The end was not recorded: leftovers were not judged.\n");
    }
    let kept: Vec<String> = j
        .elections
        .iter()
        .flat_map(|e| {
            e.figures
                .left_by_the_service
                .iter()
                .map(move |name| format!("znode {name} of {}", e.key))
        })
        .collect();
    if !kept.is_empty() {
        let _ = writeln!(
            s,
            "Still there at the end, kept only by a member diverging from the ensemble (see what the service got wrong; not left behind by a candidate): {}.\n",
            kept.join("; ")
        );
    }
    let expired = h.end.as_ref().map_or(&[][..], |e| &e.expired[..]);
    if !expired.is_empty() {
        let _ = writeln!(
            s,
            "Still held a second after the stop, gone within their election's TTL (with their session or lease, not left behind): {}.\n",
            expired
                .iter()
                .map(|l| format!("{} {} of {}", l.what, l.name, l.e))
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
}

/// Per election: its violations and its figures; the periodic jobs' runs.
fn verdict_table(s: &mut String, j: &Judgement, _: &History) {
    s.push_str("## Verdict\n\n");
    s.push_str("| backend | contender | violations | leader changes | writes accepted | refused | fenced overlaps (operator) | time without a write | longest | liveness judged |\n");
    s.push_str("|---|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for e in &j.elections {
        let f = &e.figures;
        let mut by_kind: BTreeMap<Kind, usize> = BTreeMap::new();
        for v in &e.violations {
            *by_kind.entry(v.kind).or_default() += 1;
        }
        let violations = if by_kind.is_empty() {
            "0".to_owned()
        } else {
            by_kind
                .iter()
                .map(|(k, n)| format!("{n} {}", k.name()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let contender = if e.decides_exit {
            e.contender.clone()
        } else {
            format!("{} (peer)", e.contender)
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} of {} |",
            e.backend,
            contender,
            violations,
            f.leader_changes,
            f.accepted,
            if f.refused_in_flight > 0 {
                format!("{} ({} in flight)", f.refused, f.refused_in_flight)
            } else {
                f.refused.to_string()
            },
            f.fenced_overlaps,
            duration(f.without_write),
            ms(f.longest_without_write),
            f.liveness_judged,
            f.liveness_judged + f.liveness_unjudged,
        );
    }
    let periodic: Vec<_> = j
        .elections
        .iter()
        .filter(|e| e.figures.periodic_runs > 0)
        .collect();
    if !periodic.is_empty() {
        s.push_str("\nPeriodic jobs (`run --once`): ");
        let parts: Vec<String> = periodic
            .iter()
            .map(|e| {
                format!(
                    "{}: {} runs, {} periods completed, {} runs again after a completion whose record could not land (at least once: within 10 s, the completing leader lost leadership first; or the quorum was broken on purpose; or the probe found no member serving when the job completed)",
                    e.key, e.figures.periodic_runs, e.figures.periods_done, e.figures.periodic_reruns
                )
            })
            .collect();
        s.push_str(&parts.join("; "));
        s.push_str(".\n");
    }
}

/// The faults dealt, by backend and kind, and those that took a quorum away.
fn faults_dealt(s: &mut String, j: &Judgement, h: &History) {
    s.push_str("\n## Faults dealt\n\n| backend | kind | dealt |\n|---|---|---:|\n");
    for (backend, kinds) in &j.faults {
        for (kind, n) in kinds {
            let _ = writeln!(s, "| {backend} | {kind} | {n} |");
        }
    }
    let breaks: Vec<String> = h
        .faults
        .iter()
        .filter(|f| f.breaks_quorum)
        .map(|f| {
            format!(
                "{} {} at {} for {}",
                f.backend,
                f.target,
                ms(f.start),
                ms(f.end - f.start)
            )
        })
        .collect();
    let _ = writeln!(
        s,
        "\n{} of them deliberately took a quorum away{}\n",
        j.quorum_breaks,
        if breaks.is_empty() {
            ".".to_owned()
        } else {
            format!(" (two members paused at once): {}.", breaks.join("; "))
        }
    );
}

/// The gaps between accepted writes, by the fault that caused them.
fn failover_by_fault(s: &mut String, j: &Judgement, _: &History) {
    s.push_str("## Failover: time without an accepted write, by the fault that caused it\n\n");
    s.push_str("Each gap of over 100 ms between accepted writes, put down to the latest fault in effect when it began (`none`: a handover or a candidate's own exit, with no fault near).\n\n");
    s.push_str("| backend | contender | fault | gaps | p50 | p99 | max |\n|---|---|---|---:|---:|---:|---:|\n");
    for e in &j.elections {
        for (kind, spread) in &e.figures.gaps_by_fault {
            let _ = writeln!(
                s,
                "| {} | {} | {kind} | {} | {} | {} | {} |",
                e.backend,
                e.contender,
                spread.n,
                ms(spread.p50),
                ms(spread.p99),
                ms(spread.max)
            );
        }
    }
}

/// What the service itself got wrong, as its members said.
fn service_faults(s: &mut String, j: &Judgement, h: &History) {
    if h.service.is_empty() {
        s.push_str("\n## The service's own faults\n\nNot probed: this history has no record of what the members held.\n");
    } else {
        s.push_str("\n## The service's own faults\n\n");
        s.push_str("Read from the members themselves (ZooKeeper's `srvr` and `dump`, etcd's `/health`): no member serving for a second or more; a znode kept after the leader stopped tracking its session, or members disagreeing on a znode, for 10 s or more with no fault on the members involved. Their time counts as a fault's when liveness is judged.\n\n");
        if j.service.is_empty() {
            s.push_str("None.\n");
        }
        for f in j.service.iter().take(30) {
            if f.e.is_empty() {
                let _ = writeln!(s, "- {}", f.describe());
            } else {
                let _ = writeln!(s, "- {} (election {})", f.describe(), f.e);
            }
        }
        if j.service.len() > 30 {
            let _ = writeln!(s, "- and {} more (verdict.json)", j.service.len() - 30);
        }
    }
}

/// Every violation (the first 30), with the faults in effect.
fn violations(s: &mut String, j: &Judgement, _: &History) {
    let all: Vec<_> = j.elections.iter().flat_map(|e| &e.violations).collect();
    if !all.is_empty() {
        s.push_str("\n## Violations\n\n");
        for v in all.iter().take(30) {
            let _ = writeln!(
                s,
                "- **{} {}** at {}: {}",
                v.election,
                v.kind.name(),
                ms(v.at),
                v.detail
            );
            for f in &v.faults {
                let _ = writeln!(s, "  - in effect: {f}");
            }
        }
        if all.len() > 30 {
            let _ = writeln!(s, "- and {} more (verdict.json)", all.len() - 30);
        }
    }
}

/// The report as the book's results page includes it: a level lower, with
/// how to run it again.
pub fn book(j: &Judgement, h: &History) -> String {
    let backends = backends(h).join(",");
    let candidates = h
        .meta
        .elections
        .iter()
        .find(|e| e.contender == "elect")
        .map_or(0, |e| e.candidates.len());
    let peers = h.meta.elections.iter().any(|e| !e.decides_exit);
    let mut out = String::new();
    for (i, line) in markdown(j, h).lines().enumerate() {
        if i == 0 {
            let _ = writeln!(out, "#{line}");
            let _ = writeln!(
                out,
                "\nGenerated by `elect lab soak{} --backend {backends} --candidates {candidates}{} --duration {} --seed {}`; replay it with `--schedule history/schedule.json`.",
                if h.meta.mode == "containers" {
                    " --containers"
                } else {
                    ""
                },
                if peers { " --peers" } else { "" },
                duration(j.ended),
                j.seed
            );
        } else if line.starts_with("## ") {
            let _ = writeln!(out, "#{line}");
        } else {
            let _ = writeln!(out, "{line}");
        }
    }
    out
}

/// The HTML page: the verdict, the tables, a timeline per backend.
pub fn html(j: &Judgement, h: &History) -> String {
    let (colour, text) = if j.held {
        ("#1a7f37", "white")
    } else {
        ("#cf222e", "white")
    };
    let mut s = String::new();
    let _ = write!(
        s,
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>elect soak, seed {}</title>\
         <style>body{{font-family:sans-serif;margin:0 auto;max-width:1200px;padding:0 12px}}\
         .verdict{{background:{colour};color:{text};padding:14px;font-size:20px}}\
         table{{border-collapse:collapse;font-size:13px}}td,th{{border:1px solid #ccc;padding:3px 6px}}\
         svg{{max-width:100%;height:auto}}pre{{white-space:pre-wrap;font-size:12px}}</style></head><body>\
         <div class=\"verdict\">{}</div>",
        j.seed,
        escape(&headline(j))
    );
    s.push_str("<h2>Timeline</h2>");
    for backend in backends(h) {
        s.push_str(&timeline(h, &backend));
    }
    // The tables, as the markdown has them.
    for block in markdown(j, h).split("\n\n").skip(1) {
        if block.starts_with('|') {
            s.push_str("<table>");
            for (i, row) in block.lines().enumerate() {
                if i == 1 {
                    continue;
                }
                let cell = if i == 0 { "th" } else { "td" };
                s.push_str("<tr>");
                for c in row.trim_matches('|').split('|') {
                    let _ = write!(s, "<{cell}>{}</{cell}>", escape(c.trim()));
                }
                s.push_str("</tr>");
            }
            s.push_str("</table>");
        } else if let Some(title) = block.strip_prefix("## ") {
            let _ = write!(s, "<h2>{}</h2>", escape(title));
        } else {
            let _ = write!(s, "<pre>{}</pre>", escape(block));
        }
    }
    s.push_str("</body></html>\n");
    s
}

fn backends(h: &History) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for e in &h.meta.elections {
        if !out.contains(&e.backend) {
            out.push(e.backend.clone());
        }
    }
    out
}

/// One backend's timeline: a row per candidate (its tenures as the store
/// saw them), then a row per fault target.
/// A bar of the timeline: from, to, and its tooltip.
type Bar = (Micros, Micros, String);

fn timeline(h: &History, backend: &str) -> String {
    let width = 1160.0;
    let left = 170.0;
    let end = h.meta.ended.max(1) as f64;
    let x = |t: Micros| left + (t as f64 / end) * (width - left);
    let mut rows: Vec<(String, Vec<Bar>)> = Vec::new();
    for e in h.meta.elections.iter().filter(|e| e.backend == backend) {
        let mut open: BTreeMap<u64, (String, Micros, u64)> = BTreeMap::new();
        let mut per: BTreeMap<String, Vec<Bar>> = BTreeMap::new();
        for r in &h.store {
            match r {
                StoreRecord::Hello {
                    t,
                    e: k,
                    c,
                    cand,
                    token,
                    role,
                    ..
                } if *k == e.key && role != "daemon" => {
                    open.insert(*c, (cand.clone(), *t, *token));
                }
                StoreRecord::Close { t, e: k, c } if *k == e.key => {
                    if let Some((cand, from, token)) = open.remove(c) {
                        per.entry(cand)
                            .or_default()
                            .push((from, *t, token.to_string()));
                    }
                }
                _ => {}
            }
        }
        for (_, (cand, from, token)) in open {
            per.entry(cand)
                .or_default()
                .push((from, h.meta.ended, token.to_string()));
        }
        for cand in &e.candidates {
            rows.push((
                format!("{} {cand}", e.contender),
                per.remove(cand).unwrap_or_default(),
            ));
        }
    }
    let mut targets: BTreeMap<String, Vec<Bar>> = BTreeMap::new();
    for f in h
        .faults
        .iter()
        .filter(|f| f.backend == backend || f.backend == "machine")
    {
        targets
            .entry(format!("fault: {}", f.target))
            .or_default()
            .push((
                f.start,
                f.end.max(f.start + (end as u64) / 1000),
                describe_fault(f),
            ));
    }
    rows.extend(targets);
    let height = 22.0 * rows.len() as f64 + 30.0;
    let mut s = format!(
        "<h3>{}</h3><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\">",
        escape(backend)
    );
    for (i, (label, bars)) in rows.iter().enumerate() {
        let y = 22.0 * i as f64 + 4.0;
        let fault = label.starts_with("fault: ");
        let _ = write!(
            s,
            "<text x=\"0\" y=\"{}\" font-size=\"12\">{}</text>",
            y + 13.0,
            escape(label)
        );
        for (from, to, title) in bars {
            let _ = write!(
                s,
                "<rect x=\"{:.1}\" y=\"{y}\" width=\"{:.1}\" height=\"16\" fill=\"{}\"><title>{}</title></rect>",
                x(*from),
                (x(*to) - x(*from)).max(1.0),
                if fault { "#d1242f" } else { "#0969da" },
                escape(title)
            );
        }
    }
    let _ = write!(
        s,
        "<text x=\"{left}\" y=\"{}\" font-size=\"11\">0</text><text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"end\">{}</text></svg>",
        height - 4.0,
        width,
        height - 4.0,
        duration(h.meta.ended)
    );
    s
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
