//! A generator fuzzes every parser that takes text from outside:
//! durations, endpoints of each backend, election names, a soak's
//! histories (and the judge that reads them) and its schedules. Inputs
//! are arbitrary text, text over each parser's own alphabet, and valid
//! inputs with random edits (characters inserted, deleted, replaced, the
//! text cut), the way a hostile user or a torn file would have them.
//!
//! Each parser must never panic, and what it accepts must read back the
//! same (an endpoint list shown and parsed again is the same list); a
//! history that parses is judged without panicking. In CI each parser
//! gets a few thousand inputs; `ELECT_FUZZ_SECS=3600 cargo test --release
//! --test parsers_fuzz` runs each for that long instead (cargo's own
//! runner: nextest ends a test after three minutes), and
//! `docs/src/development/testing.md` gives the last long run.

use std::path::Path;
use std::time::{Duration, Instant};

use elect::Backend;
use elect::config::{ElectionConfig, Service, parse_duration};
use elect_judge::history::{History, Texts};
use elect_soak::Schedule;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

/// Inputs per parser in an ordinary run.
const CASES: u32 = 3000;

/// Runs `test` on inputs of `strategy`: [`CASES`] of them, or batches
/// until `ELECT_FUZZ_SECS` have passed.
fn fuzz<S: Strategy>(name: &str, strategy: S, test: impl Fn(S::Value) -> Result<(), TestCaseError>)
where
    S::Value: std::fmt::Debug,
{
    let until = std::env::var("ELECT_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .map(|secs| Instant::now() + Duration::from_secs(secs));
    let started = Instant::now();
    let mut total = 0u64;
    loop {
        let mut runner = TestRunner::new(Config {
            cases: CASES,
            failure_persistence: None,
            ..Config::default()
        });
        if let Err(e) = runner.run(&strategy, &test) {
            panic!("{name}: after {total} inputs: {e}");
        }
        total += u64::from(CASES);
        if until.is_none_or(|u| Instant::now() >= u) {
            break;
        }
    }
    println!(
        "{name}: {total} inputs in {:.0?}, no failure",
        started.elapsed()
    );
}

/// `seeds` with up to `edits` random edits each, or text over `alphabet`,
/// or any text at all.
fn text_like(seeds: &'static [&'static str], alphabet: &'static str) -> BoxedStrategy<String> {
    let edited = (
        proptest::sample::select(seeds),
        proptest::collection::vec((any::<u16>(), any::<char>(), 0..4u8), 0..6),
    )
        .prop_map(|(seed, edits)| edit(seed, &edits));
    prop_oneof![
        4 => edited,
        2 => proptest::string::string_regex(alphabet).unwrap(),
        1 => any::<String>(),
    ]
    .boxed()
}

/// Applies `edits` to `seed`: (position, character, what) where what is
/// insert, delete, replace or cut there.
fn edit(seed: &str, edits: &[(u16, char, u8)]) -> String {
    let mut chars: Vec<char> = seed.chars().collect();
    for &(at, c, what) in edits {
        let at = usize::from(at) % (chars.len() + 1);
        match what {
            0 => chars.insert(at, c),
            1 if at < chars.len() => {
                chars.remove(at);
            }
            2 if at < chars.len() => chars[at] = c,
            3 => chars.truncate(at),
            _ => {}
        }
    }
    chars.into_iter().collect()
}

#[test]
fn durations() {
    const SEEDS: &[&str] = &["10s", "1500ms", "1m30s", "15", "2h 3m", "24h", "0s", "1d"];
    fuzz(
        "durations",
        text_like(SEEDS, "[0-9a-zµ .:+-]{0,16}"),
        |text| {
            if let Ok(d) = parse_duration(&text) {
                let shown = humantime::format_duration(d).to_string();
                prop_assert_eq!(
                    parse_duration(&shown),
                    Ok(d),
                    "{:?} shown as {:?}",
                    text,
                    shown
                );
            }
            Ok(())
        },
    );
}

#[test]
fn endpoints() {
    const SEEDS: &[&str] = &[
        "127.0.0.1:2379",
        "http://a:1,https://b:2/",
        "[::1]:2379",
        "zk-1:2181,zk-2:2181/apps/x",
        "a=127.0.0.1:7001,b=h:2",
        "etcd-1.example.org:2379",
    ];
    let any_backend = proptest::sample::select(Backend::ALL.to_vec());
    fuzz(
        "endpoints",
        (
            any_backend,
            text_like(SEEDS, "[0-9a-z:/\\[\\]=,. @_-]{0,40}"),
        ),
        |(backend, text)| {
            if let Ok(service) = Service::parse(backend, &text) {
                let shown = service.to_string();
                let again = Service::parse(backend, &shown).map_err(|e| {
                    TestCaseError::fail(format!("{text:?} shown as {shown:?}: {e}"))
                })?;
                prop_assert_eq!(again.to_string(), shown.clone());
                // What a client's host parser would trip on later (a
                // ZooKeeper chroot is a znode path: blanks are allowed).
                // Raft-vote ids may hold blanks; their addresses may not.
                let hosts: Vec<&str> = match backend {
                    Backend::Zk => vec![shown.split('/').next().unwrap_or("")],
                    Backend::Etcd => vec![shown.as_str()],
                    Backend::Raft => shown
                        .split(',')
                        .map(|peer| peer.rsplit('=').next().unwrap_or(""))
                        .collect(),
                };
                for host in hosts {
                    prop_assert!(!host.contains(char::is_whitespace), "{:?}", shown);
                }
            }
            Ok(())
        },
    );
}

#[test]
fn election_names() {
    const SEEDS: &[&str] = &[
        "jobs",
        "/elections/jobs",
        "a/b/c",
        "/a",
        "cluster-1",
        "/zookeeper/x",
    ];
    let any_backend = proptest::sample::select(Backend::ALL.to_vec());
    fuzz(
        "election names",
        (any_backend, text_like(SEEDS, "[a-z/._ -]{0,24}")),
        |(backend, name)| {
            let service = match backend {
                Backend::Etcd => Service::parse(backend, "127.0.0.1:2379"),
                Backend::Zk => Service::parse(backend, "127.0.0.1:2181"),
                Backend::Raft => Service::parse(backend, "a=127.0.0.1:7001"),
            }
            .unwrap();
            if let Ok(cfg) = ElectionConfig::new(service.clone(), &name) {
                let kept = cfg.election().to_owned();
                prop_assert!(!kept.chars().any(char::is_control), "{:?}", kept);
                let again = ElectionConfig::new(service, &kept)
                    .map_err(|e| TestCaseError::fail(format!("{kept:?}: {e}")))?;
                prop_assert_eq!(again.election(), kept.as_str());
            }
            Ok(())
        },
    );
}

/// A small history's files, whole.
const META: &str = r#"{"seed": 5, "started_unix_ms": 0, "ended": 20000000, "mode": "processes", "sampler_period": 2000, "line_slack": 500000, "elections": [{"key": "etcd/elect", "backend": "etcd", "contender": "elect", "ttl_ms": 2000, "liveness_bound": 6000000, "decides_exit": true, "candidates": ["c1", "c2"]}]}"#;
const STORE: &[&str] = &[
    "{\"k\":\"hello\",\"t\":100000,\"e\":\"etcd/elect\",\"c\":1,\"cand\":\"c1\",\"token\":7,\"role\":\"writer\"}\n",
    "{\"k\":\"span\",\"e\":\"etcd/elect\",\"c\":1,\"token\":7,\"from\":200000,\"to\":9000000,\"n\":880}\n",
    "{\"k\":\"span\",\"e\":\"etcd/elect\",\"c\":2,\"token\":9,\"from\":9010000,\"to\":19990000,\"n\":999}\n",
];
const PROCS: &[&str] = &[
    "{\"k\":\"proc\",\"t\":100000,\"pid\":10,\"e\":\"etcd/elect\",\"cand\":\"c1\",\"role\":\"writer\",\"state\":\"run\"}\n",
    "{\"k\":\"proc\",\"t\":9300000,\"pid\":10,\"e\":\"etcd/elect\",\"cand\":\"c1\",\"role\":\"writer\",\"state\":\"gone\"}\n",
];
const FAULTS: &[&str] = &[
    "{\"kind\":\"member-kill\",\"backend\":\"etcd\",\"target\":\"etcd-1\",\"start\":1000000,\"end\":2000000}\n",
    "{\"kind\":\"candidate-freeze\",\"backend\":\"etcd\",\"target\":\"c1\",\"election\":\"etcd/elect\",\"start\":3000000,\"end\":4000000}\n",
];

/// The lines of `seeds` in some order and number, then edited.
fn lines_like(seeds: &'static [&'static str]) -> BoxedStrategy<String> {
    (
        proptest::collection::vec(proptest::sample::select(seeds), 0..6),
        proptest::collection::vec((any::<u16>(), any::<char>(), 0..4u8), 0..3),
    )
        .prop_map(|(lines, edits)| edit(&lines.concat(), &edits))
        .boxed()
}

#[test]
fn histories() {
    let meta = (
        proptest::collection::vec((any::<u16>(), any::<char>(), 0..4u8), 0..3),
        any::<bool>(),
    )
        .prop_map(|(edits, edited)| {
            if edited {
                edit(META, &edits)
            } else {
                META.to_owned()
            }
        });
    let strategy = (
        meta,
        lines_like(STORE),
        lines_like(PROCS),
        lines_like(FAULTS),
        proptest::option::of(Just(r#"{"leftovers": []}"#.to_owned())),
    );
    fuzz(
        "histories",
        strategy,
        |(meta, store, procs, faults, end)| {
            let texts = Texts {
                meta,
                store,
                procs,
                lines: String::new(),
                faults,
                service: None,
                end,
            };
            if let Ok(history) = History::parse(Path::new("history"), &texts) {
                for text in [&texts.store, &texts.procs, &texts.faults] {
                    prop_assert!(
                        text.is_empty() || text.ends_with('\n'),
                        "a torn file was read: {:?}",
                        text
                    );
                }
                // What parses is judged, whatever it says.
                let _ = elect_judge::judge(&history);
            }
            Ok(())
        },
    );
}

#[test]
fn schedules() {
    let recorded = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/soak-schedules/seed-41-watchdog-spin.json"),
    )
    .unwrap();
    let recorded: &'static str = Box::leak(recorded.into_boxed_str());
    let seeds: &'static [&'static str] = Box::leak(Box::new([
        recorded,
        r#"{"seed":1,"backends":["etcd"],"candidates":3,"peers":false,"duration":60000000,"faults":[{"kind":"member-kill","backend":"etcd","target":"etcd-2","start":1,"end":2}]}"#,
    ]));
    let strategy = (
        proptest::sample::select(seeds),
        proptest::collection::vec((any::<u16>(), any::<char>(), 0..4u8), 0..8),
    )
        .prop_map(|(seed, edits)| edit(seed, &edits));
    fuzz("schedules", strategy, |text| {
        if let Ok(schedule) = Schedule::parse(&text) {
            for f in &schedule.faults {
                prop_assert!(f.start <= f.end, "{:?}", f);
                prop_assert!(f.start <= schedule.duration, "{:?}", f);
            }
        }
        Ok(())
    });
}
