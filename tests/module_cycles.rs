//! Imports point down, in every crate of the workspace.
//!
//! Each file is a module; an arrow runs from a module to every module it
//! names (`crate::a::b`, `super::x`, `use child::y`). Two rules:
//! - no cycle: every arrow points one way only, both between files and
//!   between the top-level modules they sit under (`backend/` as a whole,
//!   say);
//! - no arrow up to a parent: a folder's `mod.rs` gathers its children
//!   (declares them, re-exports, dispatches to them), so a child never
//!   names an item its parent's file defines; what children share lives
//!   in a child of its own (`backend/handle.rs`, `etcd/errors.rs`). The
//!   crate root is a parent too: what its file defines is named by none
//!   of its modules; its re-exports (`crate::Error`) are the crate's face
//!   and may be named from anywhere.
//!
//! A small check of our own: it reads the source as text, which the
//! layout's conventions (no glob re-exports across siblings, paths spelt
//! out, unit tests in an inline `#[cfg(test)] mod` at the end of a file)
//! make enough. `cargo test --test module_cycles -- --nocapture figures`
//! prints each crate's import graph in figures.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Module = Vec<String>;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `backend/etcd/mod.rs` -> [backend, etcd]; `lib.rs` -> [].
fn module_of(src: &Path, file: &Path) -> Module {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Module = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The source without comments (doc links are no imports) and without
/// its inline test modules (a file's unit tests see the file's items
/// through `super`, which is no import).
fn code(text: &str) -> String {
    let code = text
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let lines: Vec<&str> = code.lines().collect();
    let test_module = lines.windows(2).position(|pair| {
        // `mod tests {`, `pub(super) mod tests {`...
        let next = pair[1].trim();
        let module = next.starts_with("mod ") || next.contains(" mod ");
        pair[0].trim() == "#[cfg(test)]" && module && next.ends_with('{')
    });
    match test_module {
        Some(at) => lines[..at].join("\n"),
        None => code,
    }
}

fn ident_path(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for part in text.split("::") {
        let ident: String = part
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if ident.is_empty() || ident != part {
            if !ident.is_empty() {
                out.push(ident);
            }
            break;
        }
        out.push(ident);
    }
    out
}

/// Paths named in `code` (relative to `from`), as absolute module paths.
fn named_paths(code: &str, from: &Module, children: &BTreeSet<String>) -> Vec<Module> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    let boundary = |i: usize| {
        i == 0
            || !(bytes[i - 1].is_ascii_alphanumeric()
                || bytes[i - 1] == b'_'
                || bytes[i - 1] == b':')
    };
    for (i, _) in code.match_indices("crate::") {
        if !boundary(i) {
            continue;
        }
        let rest = &code[i + "crate::".len()..];
        for tail in expand(rest) {
            out.push(tail);
        }
    }
    for (i, _) in code.match_indices("super::") {
        if !boundary(i) {
            continue;
        }
        let mut base = from.clone();
        let mut rest = &code[i..];
        while let Some(r) = rest.strip_prefix("super::") {
            base.pop();
            rest = r;
        }
        for tail in expand(rest) {
            out.push(base.iter().cloned().chain(tail).collect());
        }
    }
    for (i, _) in code.match_indices("use ") {
        if !boundary(i) {
            continue;
        }
        let rest = &code[i + 4..];
        let first = ident_path(rest);
        if let Some(head) = first.first()
            && children.contains(head)
        {
            for tail in expand(rest) {
                out.push(from.iter().cloned().chain(tail).collect());
            }
        }
    }
    out
}

/// `a::b::c` -> [[a, b, c]]; `a::{b, c::d}` -> [[a, b], [a, c, d]].
fn expand(rest: &str) -> Vec<Module> {
    let head = ident_path(rest);
    let joined = head.join("::");
    let after = &rest[joined.len()..];
    let group = after
        .strip_prefix("::{")
        .or_else(|| after.strip_prefix('{').filter(|_| head.is_empty()));
    if let Some(group) = group {
        let end = group.find('}').unwrap_or(group.len());
        return group[..end]
            .split(',')
            .map(|item| {
                head.iter()
                    .cloned()
                    .chain(ident_path(item.trim()))
                    .collect()
            })
            .collect();
    }
    vec![head]
}

/// The longest prefix of `path` that is a module of the crate.
fn resolve(path: &Module, modules: &BTreeSet<Module>) -> Option<Module> {
    (0..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|m| modules.contains(m))
}

fn find_cycle(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Option<Vec<Module>> {
    fn visit(
        at: &Module,
        edges: &BTreeMap<Module, BTreeSet<Module>>,
        stack: &mut Vec<Module>,
        done: &mut BTreeSet<Module>,
    ) -> Option<Vec<Module>> {
        if let Some(pos) = stack.iter().position(|m| m == at) {
            let mut cycle = stack[pos..].to_vec();
            cycle.push(at.clone());
            return Some(cycle);
        }
        if done.contains(at) {
            return None;
        }
        stack.push(at.clone());
        for next in edges.get(at).into_iter().flatten() {
            if let Some(c) = visit(next, edges, stack, done) {
                return Some(c);
            }
        }
        stack.pop();
        done.insert(at.clone());
        None
    }
    let mut done = BTreeSet::new();
    edges
        .keys()
        .find_map(|m| visit(m, edges, &mut Vec::new(), &mut done))
}

fn show(cycle: &[Module]) -> String {
    cycle
        .iter()
        .map(|m| {
            if m.is_empty() {
                "crate".into()
            } else {
                m.join("::")
            }
        })
        .collect::<Vec<_>>()
        .join(" -> ")
}

/// Whether `code` defines `item` itself (rather than re-exporting it).
fn defines(code: &str, item: &str) -> bool {
    const KINDS: [&str; 9] = [
        "struct",
        "enum",
        "fn",
        "const",
        "static",
        "type",
        "trait",
        "union",
        "macro_rules!",
    ];
    KINDS.iter().any(|kind| {
        code.match_indices(&format!("{kind} {item}"))
            .any(|(at, m)| {
                let before = code[..at].chars().next_back();
                let after = code[at + m.len()..].chars().next();
                !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
                    && !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
            })
    })
}

/// A crate's files and the arrows between them; `upward` holds the
/// arrows from a module to an ancestor's items (the root's excepted).
struct Graph {
    modules: BTreeSet<Module>,
    edges: BTreeMap<Module, BTreeSet<Module>>,
    upward: BTreeSet<(Module, Module)>,
}

fn graph(src: &Path) -> Graph {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let modules: BTreeSet<Module> = files.iter().map(|f| module_of(src, f)).collect();
    let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    let mut upward = BTreeSet::new();
    let root = files
        .iter()
        .find(|f| module_of(src, f).is_empty())
        .map(|f| code(&std::fs::read_to_string(f).unwrap()))
        .unwrap_or_default();
    for file in &files {
        let from = module_of(src, file);
        let children: BTreeSet<String> = modules
            .iter()
            .filter(|m| m.len() == from.len() + 1 && m.starts_with(&from))
            .map(|m| m.last().unwrap().clone())
            .collect();
        let text = code(&std::fs::read_to_string(file).unwrap());
        for path in named_paths(&text, &from, &children) {
            let Some(to) = resolve(&path, &modules) else {
                continue;
            };
            if to == from {
                continue;
            }
            // The root's re-exports are the crate's face; what the root
            // file itself defines stands above every module like any
            // parent's items.
            if to.is_empty() && !path.first().is_some_and(|item| defines(&root, item)) {
                continue;
            }
            if from.starts_with(&to) {
                upward.insert((from.clone(), to));
            } else {
                edges.entry(from.clone()).or_default().insert(to);
            }
        }
    }
    Graph {
        modules,
        edges,
        upward,
    }
}

/// Every arrow, those up to a parent included.
fn all_arrows(g: &Graph) -> BTreeMap<Module, BTreeSet<Module>> {
    let mut all = g.edges.clone();
    for (from, to) in &g.upward {
        all.entry(from.clone()).or_default().insert(to.clone());
    }
    all
}

/// The groups of files that import each other in a loop, arrows up to a
/// parent included (strongly connected components of two files or more).
fn loops(g: &Graph) -> usize {
    let all = all_arrows(g);
    let reach = |from: &Module| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(m) = todo.pop() {
            for next in all.get(&m).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    todo.push(next.clone());
                }
            }
        }
        seen
    };
    let reachable: BTreeMap<&Module, BTreeSet<Module>> =
        g.modules.iter().map(|m| (m, reach(m))).collect();
    let mut groups = BTreeSet::new();
    for (m, from_m) in &reachable {
        let group: BTreeSet<&Module> = from_m
            .iter()
            .filter(|n| reachable.get(n).is_some_and(|r| r.contains(*m)))
            .collect();
        if group.len() > 1 {
            groups.insert(group);
        }
    }
    groups.len()
}

/// The number of layers: the longest chain of arrows, counted in files;
/// `None` where arrows loop.
fn layers(g: &Graph) -> Option<usize> {
    let all = all_arrows(g);
    if find_cycle(&all).is_some() {
        return None;
    }
    fn depth(
        m: &Module,
        all: &BTreeMap<Module, BTreeSet<Module>>,
        memo: &mut BTreeMap<Module, usize>,
    ) -> usize {
        if let Some(d) = memo.get(m) {
            return *d;
        }
        let d = 1 + all
            .get(m)
            .into_iter()
            .flatten()
            .map(|n| depth(n, all, memo))
            .max()
            .unwrap_or(0);
        memo.insert(m.clone(), d);
        d
    }
    let mut memo = BTreeMap::new();
    g.modules.iter().map(|m| depth(m, &all, &mut memo)).max()
}

fn check_crate(src: &Path) -> Vec<String> {
    let Graph { edges, upward, .. } = graph(src);
    let mut problems = Vec::new();
    if let Some(cycle) = find_cycle(&edges) {
        problems.push(format!(
            "{}: modules in a cycle: {}",
            src.display(),
            show(&cycle)
        ));
    }
    // The same between top-level modules (a folder counts as one).
    let mut top: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (from, tos) in &edges {
        for to in tos {
            let (Some(a), Some(b)) = (from.first(), to.first()) else {
                continue;
            };
            if a != b {
                top.entry(vec![a.clone()])
                    .or_default()
                    .insert(vec![b.clone()]);
            }
        }
    }
    if let Some(cycle) = find_cycle(&top) {
        problems.push(format!(
            "{}: top-level modules in a cycle: {}",
            src.display(),
            show(&cycle)
        ));
    }
    for (from, to) in &upward {
        problems.push(format!(
            "{}: {} names an item of {}, which stands above it (its parent's file): \
             move what children share into a module of its own",
            src.display(),
            show(std::slice::from_ref(from)),
            show(std::slice::from_ref(to)),
        ));
    }
    problems
}

fn workspace_sources() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut sources = vec![root.join("src")];
    for entry in std::fs::read_dir(root.join("crates")).unwrap() {
        sources.push(entry.unwrap().path().join("src"));
    }
    sources.sort();
    sources
}

#[test]
fn imports_point_down() {
    let problems: Vec<String> = workspace_sources()
        .iter()
        .flat_map(|s| check_crate(s))
        .collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Per crate: files, arrows, layers, arrows up to a parent, and the
/// loops those close; and that no crate loops.
#[test]
fn figures() {
    let mut looping = Vec::new();
    for src in workspace_sources() {
        let g = graph(&src);
        let arrows: usize = g.edges.values().map(BTreeSet::len).sum();
        let layers = layers(&g);
        let loops = loops(&g);
        println!(
            "{}: {} files, {} arrows, {} layers, {} arrows up to a parent, {loops} loops",
            src.display(),
            g.modules.len(),
            arrows + g.upward.len(),
            layers.map_or("no".to_owned(), |n| n.to_string()),
            g.upward.len(),
        );
        if layers.is_none() || loops > 0 {
            looping.push(src.display().to_string());
        }
    }
    // Arrows up to a parent counted too, every crate stands in layers.
    assert!(
        looping.is_empty(),
        "files import each other in a loop in {looping:?}"
    );
}

#[test]
fn the_check_sees_a_cycle() {
    let dir = std::env::temp_dir().join(format!("elect-cycles-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("b")).unwrap();
    std::fs::write(dir.join("lib.rs"), "mod a;\nmod b;\n").unwrap();
    std::fs::write(dir.join("a.rs"), "use crate::b::x::Y;\n").unwrap();
    std::fs::write(dir.join("b/mod.rs"), "mod x;\n").unwrap();
    std::fs::write(dir.join("b/x.rs"), "use crate::{a, c};\n").unwrap();
    let problems = check_crate(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(problems[0].contains("a -> b::x -> a"), "{problems:?}");
}

#[test]
fn the_check_sees_an_arrow_up_to_a_parent() {
    let dir = std::env::temp_dir().join(format!("elect-upward-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("b")).unwrap();
    std::fs::write(
        dir.join("lib.rs"),
        "mod b;\nmod c;\npub use b::Thing;\npub struct Root;\n",
    )
    .unwrap();
    std::fs::write(dir.join("c.rs"), "use crate::Root;\n").unwrap();
    std::fs::write(dir.join("b/mod.rs"), "mod x;\npub struct Shared;\n").unwrap();
    std::fs::write(
        dir.join("b/x.rs"),
        "use super::Shared;\nuse crate::Thing;\n\n#[cfg(test)]\nmod tests {\n    use super::super::Shared;\n}\n",
    )
    .unwrap();
    let problems = check_crate(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
    // The parent's item is named once outside the tests, and so is what
    // the root defines; the root's re-export is no arrow up.
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(
        problems[0].contains("b::x names an item of b,"),
        "{problems:?}"
    );
    assert!(
        problems[1].contains("c names an item of crate"),
        "{problems:?}"
    );
}

/// The soak's judge shares no code with what it judges: its manifest
/// names no crate of the workspace, and its sources name none.
#[test]
fn the_judge_imports_nothing_it_judges() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/elect-judge");
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let deps = manifest
        .split("[dependencies]")
        .nth(1)
        .expect("a [dependencies] table");
    for line in deps.lines().filter(|l| !l.trim_start().starts_with('#')) {
        assert!(
            !line.trim_start().starts_with("elect"),
            "elect-judge depends on {line:?}"
        );
    }
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    for file in files {
        let text = code(&std::fs::read_to_string(&file).unwrap());
        for name in [
            "elect::",
            "elect_lab",
            "elect_compare",
            "elect_raft",
            "elect_soak",
            "elect_sim",
        ] {
            assert!(!text.contains(name), "{} names {name}", file.display());
        }
    }
}

/// Where a rule switch of the model checks (`Mutation`) comes into being
/// ungated: its declaration (`enum Mutation`, `mod mutation`) or a
/// re-export, not right under `#[cfg(test)]` or the model check's
/// feature (a `mutation.rs` is gated where its `mod mutation;` is).
/// Gated there, the compiler refuses any code of a build that leads that
/// names it, so nothing else needs reading.
fn ungated_test_hooks(file: &Path, text: &str) -> Vec<String> {
    if file.ends_with("mutation.rs") {
        return Vec::new();
    }
    let lines: Vec<&str> = text.lines().collect();
    let mut problems = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let code = line.split("//").next().unwrap_or("").trim();
        let declares = code.contains("enum Mutation")
            || code.ends_with("mod mutation;")
            || (code.starts_with("pub use") && code.contains("Mutation"));
        if !declares {
            continue;
        }
        let gate = lines[..i]
            .iter()
            .rev()
            .map(|l| l.trim())
            .find(|l| !l.starts_with("///") && !l.starts_with("#[derive"));
        let gated =
            gate.is_some_and(|g| g == "#[cfg(test)]" || g == "#[cfg(feature = \"model-check\")]");
        if !gated {
            problems.push(format!(
                "{}:{}: `{code}` is not under #[cfg(test)] or the model-check feature: \
                 a model check's switch would ship in a build that leads",
                file.display(),
                i + 1
            ));
        }
    }
    problems
}

/// The model-check feature is switched on only by dev-dependencies: no
/// `[dependencies]` or `[features]` table turns it on for a build that
/// leads (its own declaration, `model-check = []`, aside).
fn feature_leaks(manifest: &Path, text: &str) -> Vec<String> {
    let mut table = "";
    let mut problems = Vec::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.starts_with('[') {
            table = line;
        } else if line.contains("model-check")
            && !table.contains("dev-dependencies")
            && line != "model-check = []"
        {
            problems.push(format!(
                "{}: {table} turns on model-check: `{line}`",
                manifest.display()
            ));
        }
    }
    problems
}

#[test]
fn model_checks_switches_are_in_test_builds_only() {
    let mut problems = Vec::new();
    for src in workspace_sources() {
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        for file in files {
            problems.extend(ungated_test_hooks(
                &file,
                &std::fs::read_to_string(&file).unwrap(),
            ));
        }
        let manifest = src.parent().unwrap().join("Cargo.toml");
        problems.extend(feature_leaks(
            &manifest,
            &std::fs::read_to_string(&manifest).unwrap(),
        ));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_check_sees_a_switch_that_would_ship() {
    let file = Path::new("recipe/mod.rs");
    let shipped = "mod mutation;\n#[cfg(test)]\npub use mutation::Mutation;\n";
    assert_eq!(ungated_test_hooks(file, shipped).len(), 1);
    let declared = "/// A rule off.\n#[derive(Debug)]\npub enum Mutation {}\n";
    assert_eq!(ungated_test_hooks(file, declared).len(), 1);
    let gated = "#[cfg(test)]\nmod mutation;\n#[cfg(test)]\npub use mutation::Mutation;\n\
                 #[cfg(feature = \"model-check\")]\n/// A rule off.\n#[derive(Debug)]\npub enum Mutation {}\n";
    assert!(ungated_test_hooks(file, gated).is_empty());
    let manifest = Path::new("Cargo.toml");
    let leaking = "[dependencies]\nelect-raft = { path = \".\", features = [\"model-check\"] }\n";
    assert_eq!(feature_leaks(manifest, leaking).len(), 1);
    let dev = "[features]\nmodel-check = []\n\n[dev-dependencies]\nelect-raft = { path = \".\", features = [\"model-check\"] }\n";
    assert!(feature_leaks(manifest, dev).is_empty());
}
