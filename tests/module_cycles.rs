//! No import cycle between modules, in any crate of the workspace.
//!
//! Each file is a module; an arrow runs from a module to every module it
//! names (`crate::a::b`, `super::x`, `use child::y`). A module may use what
//! its ancestors define (a child sees its parent's items); every other
//! arrow must point one way only, both between files and between the
//! top-level modules they sit under (`backend/` as a whole, say). A small
//! check of our own: it reads the source as text, which the layout's
//! conventions (no glob re-exports across siblings, paths spelt out) make
//! enough.

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

/// `commands/compare/mod.rs` -> [commands, compare]; `lib.rs` -> [].
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

/// The source without comments (doc links are no imports).
fn code(text: &str) -> String {
    text.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
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

fn check_crate(src: &Path) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let modules: BTreeSet<Module> = files.iter().map(|f| module_of(src, f)).collect();
    let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
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
            // A module may use its ancestors' items.
            if to != from && !from.starts_with(&to) {
                edges.entry(from.clone()).or_default().insert(to);
            }
        }
    }
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
    problems
}

#[test]
fn no_module_imports_itself_through_others() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut sources = vec![root.join("src")];
    for entry in std::fs::read_dir(root.join("crates")).unwrap() {
        sources.push(entry.unwrap().path().join("src"));
    }
    let problems: Vec<String> = sources.iter().flat_map(|s| check_crate(s)).collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
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
