//! `elect compare`: all three backends through the quick scenarios on
//! ensembles it starts itself, its JSON rows and its report (whose first
//! screen a headless browser draws); and the refusals of bad input.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use support::elect::BIN;

const SCENARIOS: [&str; 10] = [
    "election",
    "handover",
    "failover",
    "freeze",
    "cutoff",
    "member-kill",
    "rolling-restart",
    "churn",
    "switchover",
    "switchover-last",
];

#[test]
fn quick_compare_of_all_three_backends_reports_every_row_and_the_report() {
    let report = std::env::temp_dir().join(format!("elect-compare-report-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&report);
    let child = Command::new(BIN)
        .args(["compare", "--quick", "--format", "json", "--report"])
        .arg(&report)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let rows: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    let row = |backend: &str, scenario: &str| -> &Value {
        rows.iter()
            .find(|r| r["backend"] == backend && r["scenario"] == scenario)
            .unwrap_or_else(|| panic!("no {backend} {scenario} row in {rows:?}"))
    };
    for backend in ["etcd", "zk", "raft"] {
        for scenario in SCENARIOS {
            let r = row(backend, scenario);
            assert_eq!(r["implementation"], "elect");
            for field in [
                "trials",
                "ttl_ms",
                "candidates",
                "samples_ms",
                "p50_ms",
                "p99_ms",
                "max_ms",
                "mean_ms",
                "failovers",
                "max_overlap_ms",
                "stale_writes_accepted",
                "wakeups_per_change",
            ] {
                assert!(r.get(field).is_some(), "{field} missing in {r}");
            }
            let samples = r["samples_ms"].as_array().unwrap();
            assert_eq!(samples.len() as u64, r["trials"].as_u64().unwrap(), "{r}");
            assert!(!samples.is_empty(), "{r}");
            assert!(r["safety_violation"].is_null(), "{r}");
            // Counters that started again with a restarted member are
            // not measured, never negative.
            for field in ["notifications_per_change", "requests_per_change"] {
                assert!(r[field].as_f64().is_none_or(|v| v >= 0.0), "{field} in {r}");
            }
        }
        if backend != "raft" {
            let r = row(backend, "rolling-restart");
            assert!(r["requests_per_change"].is_null(), "{r}");
            assert!(r["notes"].to_string().contains("not measured"), "{r}");
        }
        for scenario in ["freeze", "cutoff", "churn"] {
            assert_eq!(row(backend, scenario)["stale_writes_accepted"], 0);
        }
        if backend != "raft" {
            // A hundred elections on one session: all elected, one wake-up
            // for one leader change, the session's renewals only.
            let r = row(backend, "elections");
            assert_eq!(r["trials"], 100, "{r}");
            assert_eq!(r["wakeups_per_change"], 1.0, "{r}");
            let renewals = r["renewals_per_ttl"].as_f64().unwrap();
            assert!(renewals > 0.0 && renewals < 60.0, "{r}");
            // Beside it, the server's floor for as many elections.
            let floor = rows
                .iter()
                .find(|r| {
                    r["backend"] == backend
                        && r["scenario"] == "elections"
                        && r["implementation"] == "floor"
                })
                .unwrap_or_else(|| panic!("no {backend} elections floor row in {rows:?}"));
            assert_eq!(
                floor["samples_ms"].as_array().unwrap().len(),
                100,
                "{floor}"
            );
        }
        if backend != "raft" {
            // Idle, a follower behind the next in line costs the servers
            // less than the leader: it renews at the peers' cadence
            // (etcd), or in place of the library's pings (ZooKeeper).
            let steady = |scenario: &str| row(backend, scenario)["idle_requests_per_s"].as_f64();
            let (leader, follower) = (steady("steady-leader"), steady("steady-follower"));
            let (Some(leader), Some(follower)) = (leader, follower) else {
                panic!("{backend}: no steady rows in {rows:?}");
            };
            let bound = if backend == "etcd" {
                leader / 2.0
            } else {
                leader
            };
            assert!(
                follower > 0.0 && follower < bound,
                "{backend}: follower {follower}/s, leader {leader}/s"
            );
        }
        // Restarting the peers one at a time costs a Raft-vote leader
        // nothing. (etcd and ZooKeeper ride it out with the TTLs the README
        // measures, 3 s and 4 s; the quick run's 2 s leaves a loaded
        // machine too little time to reconnect, so it is not held here:
        // the ZooKeeper and fault suites hold it at 4 s.)
        let r = row(backend, "rolling-restart");
        for field in ["spurious_losses", "command_restarts", "leaderless_ms"] {
            assert!(r[field].is_number(), "{field} in {r}");
        }
        if backend == "raft" {
            assert_eq!(r["spurious_losses"], 0, "{r}");
            assert_eq!(r["command_restarts"], 0, "{r}");
        }
    }
    // A leader change wakes one waiting candidate, however many wait,
    // and costs the servers about a request per candidate (net of the
    // renewals, counted apart); generous bounds, not a benchmark.
    for backend in ["etcd", "zk"] {
        let scale = |imp: &str| -> Vec<&Value> {
            rows.iter()
                .filter(|r| {
                    r["backend"] == backend
                        && r["scenario"] == "scale"
                        && r["implementation"] == imp
                })
                .collect()
        };
        // Beside each point, the floor: as many bare watchers, one of
        // them timed per deletion.
        let sizes = |rows: &[&Value]| -> Vec<u64> {
            rows.iter()
                .map(|r| r["candidates"].as_u64().unwrap())
                .collect()
        };
        assert_eq!(sizes(&scale("floor")), sizes(&scale("elect")), "{backend}");
        for r in scale("floor") {
            assert!(r["p50_ms"].as_f64().unwrap() > 0.0, "{r}");
        }
        for r in scale("elect") {
            assert_eq!(r["wakeups_per_change"], 1.0, "{r}");
            let n = r["candidates"].as_f64().unwrap();
            let requests = r["requests_per_change"].as_f64().unwrap();
            assert!(requests <= 2.0 * n + 50.0, "{backend} at N = {n}: {r}");
            assert!(r["idle_requests_per_s"].as_f64().unwrap() > 0.0, "{r}");
        }
    }
    // Candidates as separate processes (10 in the quick run): each
    // handover timed, one waiting candidate woken per change.
    for backend in ["etcd", "zk"] {
        let r = row(backend, "scale-processes");
        assert_eq!(r["candidates"], 10, "{r}");
        assert_eq!(r["samples_ms"].as_array().unwrap().len(), 3, "{r}");
        assert_eq!(r["wakeups_per_change"], 1.0, "{r}");
        let requests = r["requests_per_change"].as_f64().unwrap();
        assert!(requests <= 2.0 * 10.0 + 50.0, "{backend}: {r}");
    }
    assert!(
        !rows
            .iter()
            .any(|r| r["backend"] == "raft" && r["scenario"] == "scale-processes"),
        "the Raft-vote peers are the service"
    );
    // Generous bounds only: handovers take round trips, failovers a TTL.
    for backend in ["etcd", "zk", "raft"] {
        let handover = row(backend, "handover")["p50_ms"].as_f64().unwrap();
        let failover = row(backend, "failover")["p50_ms"].as_f64().unwrap();
        let ttl = row(backend, "failover")["ttl_ms"].as_f64().unwrap();
        assert!(handover < 1000.0, "{backend} handover p50 {handover} ms");
        assert!(
            failover > 0.5 * ttl && failover < 10.0 * ttl,
            "{backend} failover {failover} ms"
        );
    }
    // Beside each service's failovers, its floor: a bare holder's key
    // expired by the service once its host went silent.
    for backend in ["etcd", "zk"] {
        let floor = rows
            .iter()
            .find(|r| {
                r["backend"] == backend
                    && r["scenario"] == "failover"
                    && r["implementation"] == "floor"
            })
            .unwrap_or_else(|| panic!("no {backend} failover floor row in {rows:?}"));
        let (p50, ttl) = (
            floor["p50_ms"].as_f64().unwrap(),
            floor["ttl_ms"].as_f64().unwrap(),
        );
        assert!(p50 > 0.3 * ttl && p50 < 2.0 * ttl, "{floor}");
    }
    // Beside each service's handovers, its floor: a delete and its watch
    // event, which no handover beats by much; and most successors lead on
    // the event alone, without a read (etcd: the leader's touch of their
    // key; ZooKeeper: the next in line).
    for backend in ["etcd", "zk"] {
        let floor = rows
            .iter()
            .find(|r| {
                r["backend"] == backend
                    && r["scenario"] == "handover"
                    && r["implementation"] == "floor"
            })
            .unwrap_or_else(|| panic!("no {backend} floor row in {rows:?}"));
        let p50 = floor["p50_ms"].as_f64().unwrap();
        assert!(p50 > 0.0 && p50 < 1000.0, "{floor}");
        let share = row(backend, "handover")["led_without_read_per_change"]
            .as_f64()
            .unwrap();
        assert!(
            share >= 0.5,
            "{backend}: {share} of successors led without a read"
        );
    }
    // Two leaders' worth of silence: the third candidate takes over after
    // about one TTL, both having gone at once.
    for backend in ["etcd", "zk"] {
        let r = row(backend, "failover-next");
        let (p50, ttl) = (r["p50_ms"].as_f64().unwrap(), r["ttl_ms"].as_f64().unwrap());
        assert!(p50 > 0.5 * ttl && p50 < 10.0 * ttl, "{r}");
    }
    assert!(
        stderr.contains("not run"),
        "Raft's scale is said not to run: {stderr}"
    );
    assert!(
        stderr.contains("needs --raft-peers 5"),
        "Raft's failover-next with three peers is said not to run: {stderr}"
    );
    for file in [
        "report.html",
        "report.md",
        "book-performance.md",
        "book-faults.md",
        "book-operations.md",
        "rows.json",
        "handover.svg",
        "failover.svg",
        "scale.svg",
    ] {
        let path = report.join(file);
        let len = std::fs::metadata(&path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .len();
        assert!(len > 100, "{} is nearly empty", path.display());
    }
    let page = std::fs::read_to_string(report.join("report.html")).unwrap();
    assert!(
        page.contains("<svg") && page.contains("compare --quick"),
        "the page inlines the charts and the command"
    );
    the_first_screen_gives_the_verdict_and_the_backends_side_by_side(&report.join("report.html"));
    the_page_does_not_scroll_sideways_at_1280_px(&report.join("report.html"));
    let _ = std::fs::remove_dir_all(&report);
    // Nothing left behind: the lab's and the scratch directories are gone.
    for dir in [
        format!("elect-compare-{pid}"),
        format!("elect-compare-work-{pid}"),
    ] {
        let path = std::env::temp_dir().join(dir);
        assert!(!path.exists(), "{} is left", path.display());
    }
}

/// Five Raft peers, the leader and the first in line its heartbeats named
/// killed together: the second in line takes over, in one term.
/// The fault scenarios on all three backends with the machine under load
/// (stress-ng: every core and an fsync writer): every leader change
/// completes, no stale write is accepted, no tenures overlap but where a
/// frozen leader's work is fenced (freeze). Raft-vote at its default T
/// of 150 ms: before the watchdog ran real time, its kill came up to
/// 145 ms late here and cutoff overlapped tenures.
#[test]
fn the_fault_scenarios_hold_on_a_busy_machine() {
    let out = Command::new(BIN)
        .args(["compare", "--under-load", "--format", "json"])
        .args(["--backends", "etcd,zk,raft"])
        .args(["--scenarios", "cutoff,freeze,failover", "--trials", "3"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("under load: stress-ng"), "{stderr}");
    let rows: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    // Three scenarios on three backends, and the failover floors of etcd
    // and ZooKeeper.
    assert_eq!(rows.len(), 11, "{rows:?}");
    for r in &rows {
        assert!(r["safety_violation"].is_null(), "{r}");
        assert_eq!(r["samples_ms"].as_array().unwrap().len(), 3, "{r}");
        // Null where the scenario does not measure it.
        assert_eq!(r["stale_writes_accepted"].as_u64().unwrap_or(0), 0, "{r}");
        if r["scenario"] != "freeze" {
            assert_eq!(r["max_overlap_ms"].as_f64().unwrap_or(0.0), 0.0, "{r}");
        }
        eprintln!(
            "{} {} under load: p50 {} p99 {} max {} ms",
            r["backend"], r["scenario"], r["p50_ms"], r["p99_ms"], r["max_ms"]
        );
    }
}

#[test]
fn raft_failover_next_kills_the_leader_and_the_first_in_line() {
    let out = Command::new(BIN)
        .args(["compare", "--backends", "raft", "--raft-peers", "5"])
        .args([
            "--scenarios",
            "failover-next",
            "--trials",
            "3",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let row: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    assert_eq!(row["scenario"], "failover-next", "{row}");
    assert_eq!(row["samples_ms"].as_array().unwrap().len(), 3, "{row}");
    let (p50, ttl) = (
        row["p50_ms"].as_f64().unwrap(),
        row["ttl_ms"].as_f64().unwrap(),
    );
    assert!(p50 > 0.5 * ttl && p50 < 10.0 * ttl, "{row}");
    assert!(row["terms_per_change"].as_f64().unwrap() < 3.0, "{row}");
}

#[test]
fn bad_compare_and_lab_input_is_refused_naming_the_flag() {
    let cases: [(&[&str], &str); 9] = [
        (&["compare", "--backends", "etcd,consul"], "--backends"),
        (&["compare", "--scenarios", "crash"], "--scenarios"),
        (&["compare", "--ttl", "etcd=1500ms"], "--ttl"),
        (&["compare", "--ttl", "2s"], "--ttl"),
        (&["compare", "--raft-peers", "4"], "--raft-peers"),
        (&["compare", "--candidates", "1000"], "--candidates"),
        (&["compare", "--trials", "0"], "--trials"),
        (&["lab", "up", "--etcd", "2"], "--etcd"),
        (&["lab", "down", "--format", "env"], "--format"),
    ];
    for (args, flag) in cases {
        let out = Command::new(BIN).args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(flag),
            "{args:?} should name {flag}: {stderr}"
        );
    }
    let out = Command::new(BIN)
        .args(["compare", "--endpoints", "x:1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    // compare takes no --endpoints of its own: clap refuses it by name.
    assert!(String::from_utf8_lossy(&out.stderr).contains("unexpected argument '--endpoints'"));
}

/// Ctrl-C in the middle of a run: compare stops, and every ensemble member
/// and candidate it started is gone with its directories.
#[test]
fn an_interrupted_compare_leaves_nothing_behind() {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(BIN)
        .args([
            "compare",
            "--backends",
            "etcd,zk",
            "--scenarios",
            "handover",
        ])
        .args(["--trials", "100000"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    // Both ensembles are up and candidates campaign once trials run.
    while !seen.contains("etcd elect handover: 100000 trials") {
        let mut line = String::new();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "compare ended: {seen}"
        );
        seen.push_str(&line);
    }
    // Six ensemble members and three candidates, at least.
    let started = support::eventually(
        "members and candidates running",
        std::time::Duration::from_secs(30),
        || Some(support::proc::descendants(pid)).filter(|d| d.len() >= 9),
    );
    assert!(
        started.len() >= 6,
        "members and candidates run: {started:?}"
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let status = child.wait().unwrap();
    let mut rest = String::new();
    let _ = std::io::Read::read_to_string(&mut stderr, &mut rest);
    assert_eq!(status.code(), Some(1), "{rest}");
    assert!(rest.contains("interrupted"), "{rest}");
    let alive: Vec<i32> = started
        .into_iter()
        .filter(|p| support::proc::alive(*p))
        .collect();
    assert!(alive.is_empty(), "left running: {alive:?}");
    for dir in [
        format!("elect-compare-{pid}"),
        format!("elect-compare-work-{pid}"),
    ] {
        let path = std::env::temp_dir().join(dir);
        assert!(!path.exists(), "{} is left", path.display());
    }
}

/// The first screen of a page (1280×800) as headless Chromium draws it,
/// kept as `target/report-first-screen.png`; `None` where no Chromium is
/// (it must be, in CI: deploy/test.sh installs it).
fn first_screen(page: &Path) -> Option<PathBuf> {
    let chromium = chromium()?;
    let shot = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/report-first-screen.png");
    let _ = std::fs::remove_file(&shot);
    let profile = support::proc::scratch("chromium-profile");
    let out = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(["--window-size=1280,800", "--force-device-scale-factor=1"])
        .arg(format!("--screenshot={}", shot.display()))
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    assert!(
        shot.exists(),
        "no screenshot: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(shot)
}

/// Headless Chromium, where there is one (it must be, in CI:
/// deploy/test.sh installs it).
fn chromium() -> Option<&'static str> {
    let chromium = ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|b| {
            Command::new(b)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        });
    if chromium.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "Chromium is needed in CI (deploy/test.sh installs it)"
        );
        eprintln!("no Chromium here: the report's page is not drawn");
    }
    chromium
}

/// The page fits a 1280 px wide window: its widest part (the table of
/// every row, the charts, the command) scrolls in its own box or
/// shrinks, and the page itself never scrolls sideways. Chromium lays
/// the page out with a script appended that notes the document's width
/// against the window's.
fn the_page_does_not_scroll_sideways_at_1280_px(page: &Path) {
    let Some(chromium) = chromium() else {
        return;
    };
    let measured = support::proc::scratch("report-width").join("report.html");
    let html = std::fs::read_to_string(page).unwrap().replace(
        "</body>",
        "<script>document.body.setAttribute('data-widths', \
         document.documentElement.scrollWidth + ' ' + document.documentElement.clientWidth)\
         </script></body>",
    );
    std::fs::write(&measured, html).unwrap();
    let profile = support::proc::scratch("chromium-width-profile");
    let out = Command::new(chromium)
        .args(["--headless", "--no-sandbox", "--disable-gpu"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args([
            "--window-size=1280,800",
            "--force-device-scale-factor=1",
            "--dump-dom",
        ])
        .arg(format!("file://{}", measured.display()))
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&out.stdout);
    let widths = dom
        .split("data-widths=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| {
            panic!(
                "no widths measured: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    let (document, window): (u32, u32) = widths
        .split_once(' ')
        .map(|(d, w)| (d.parse().unwrap(), w.parse().unwrap()))
        .unwrap();
    assert!(
        document <= window,
        "the report is {document} px wide in a {window} px window: it scrolls sideways"
    );
}

/// A decoded RGB(A) screenshot.
struct Screen {
    width: usize,
    height: usize,
    channels: usize,
    pixels: Vec<u8>,
}

impl Screen {
    fn load(path: &Path) -> Screen {
        let decoder = png::Decoder::new(std::fs::File::open(path).unwrap());
        let mut reader = decoder.read_info().unwrap();
        let mut pixels = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut pixels).unwrap();
        Screen {
            width: info.width as usize,
            height: info.height as usize,
            channels: info.color_type.samples(),
            pixels,
        }
    }

    /// Whether the pixel at (x, y) is `rgb`, give or take a little.
    fn is(&self, x: usize, y: usize, rgb: [u8; 3]) -> bool {
        let at = (y * self.width + x) * self.channels;
        (0..3).all(|c| self.pixels[at + c].abs_diff(rgb[c]) <= 4)
    }

    /// The rows in which at least half the pixels are `rgb`.
    fn bands(&self, rgb: [u8; 3]) -> Vec<usize> {
        (0..self.height)
            .filter(|&y| (0..self.width).filter(|&x| self.is(x, y, rgb)).count() * 2 >= self.width)
            .collect()
    }

    /// The topmost row with at least `count` pixels of `rgb` in it
    /// within the screen, if the screen has that many in all.
    fn first_row_with(&self, rgb: [u8; 3], count: usize) -> Option<usize> {
        let per_row: Vec<usize> = (0..self.height)
            .map(|y| (0..self.width).filter(|&x| self.is(x, y, rgb)).count())
            .collect();
        (per_row.iter().sum::<usize>() >= count).then(|| per_row.iter().position(|&n| n > 0))?
    }
}

/// What a reader sees first, drawn by a real browser: the verdict's
/// banner, green because safety held, at the top and wide; below it, on
/// the same screen, the scenarios side by side with all three backends'
/// swatches (the colours of their charts).
fn the_first_screen_gives_the_verdict_and_the_backends_side_by_side(page: &Path) {
    let Some(shot) = first_screen(page) else {
        return;
    };
    let screen = Screen::load(&shot);
    assert_eq!(
        (screen.width, screen.height),
        (1280, 800),
        "{}",
        shot.display()
    );
    const SAFE_BANNER: [u8; 3] = [0xe3, 0xf4, 0xe6];
    let banner = screen.bands(SAFE_BANNER);
    assert!(
        banner.len() >= 60 && banner[0] < 60,
        "no safe verdict banner at the top of {} (rows {banner:?})",
        shot.display()
    );
    let banner_end = *banner.last().unwrap();
    // etcd, ZooKeeper, Raft-vote: the palette's first three colours.
    for (backend, rgb) in [
        ("etcd", [31, 119, 180]),
        ("ZooKeeper", [255, 127, 14]),
        ("Raft-vote", [44, 160, 44]),
    ] {
        let row = screen.first_row_with(rgb, 150).unwrap_or_else(|| {
            panic!(
                "{backend}'s swatch is not on the first screen of {}",
                shot.display()
            )
        });
        assert!(
            row > banner_end,
            "{backend}'s card is below the verdict ({row} > {banner_end}) in {}",
            shot.display()
        );
    }
}
