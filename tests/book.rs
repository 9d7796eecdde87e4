//! The book under `docs/` and the README, held to the binary:
//! - the command-line reference (`docs/src/reference/cli.md`) is the
//!   clap definitions' own help, generated: it cannot drift (run with
//!   `ELECT_BLESS=1` to write it again after changing a flag);
//! - every `elect` command line in the README and the book names a
//!   subcommand that exists and only flags its `--help` lists;
//! - every relative link resolves to a page, and every `#anchor` to a
//!   heading of that page (mdBook's ids), so the book has no dead link;
//! - every page is in `SUMMARY.md`, and the README stays short.
//!
//! CI builds the book itself with mdBook (`deploy/test.sh`).

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use support::elect::BIN;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn book() -> PathBuf {
    root().join("docs/src")
}

/// `elect ARGS --help`, as the terminal shows it (no colours).
fn help(args: &[&str]) -> String {
    let out = Command::new(BIN)
        .args(args)
        .arg("--help")
        .env_remove("ELECT_ENDPOINTS")
        .output()
        .unwrap();
    assert!(out.status.success(), "elect {args:?} --help");
    String::from_utf8(out.stdout).unwrap()
}

/// The subcommands a help text lists (`help` aside).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

/// Every command path (`["run"]`, `["lab", "up"]`) with its help.
fn commands() -> Vec<(Vec<String>, String)> {
    let mut all = vec![(vec![], help(&[]))];
    for top in subcommands(&all[0].1) {
        let text = help(&[&top]);
        let nested = subcommands(&text);
        all.push((vec![top.clone()], text));
        for sub in nested {
            let text = help(&[&top, &sub]);
            all.push((vec![top.clone(), sub], text));
        }
    }
    all
}

/// The reference page, from the helps.
fn reference() -> String {
    let mut page = String::from(
        "# Command line\n\n\
         Every command and flag, as `elect … --help` prints it: this page is\n\
         generated from the command's own definitions (`tests/book.rs`), so it\n\
         says what the binary of this commit takes. Each flag's environment\n\
         variable is in brackets; see also [options and environment\n\
         variables](options.md).\n",
    );
    for (path, text) in commands() {
        let name = std::iter::once("elect".to_owned())
            .chain(path)
            .collect::<Vec<_>>()
            .join(" ");
        page.push_str(&format!(
            "\n## `{name}`\n\n```text\n{}\n```\n",
            text.trim_end()
        ));
    }
    page
}

#[test]
fn the_cli_reference_is_the_binarys_help() {
    let path = book().join("reference/cli.md");
    let generated = reference();
    if std::env::var_os("ELECT_BLESS").is_some() {
        std::fs::write(&path, &generated).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "{} is not the binary's help: run ELECT_BLESS=1 cargo nextest run -p elect-cli --test book",
        path.display()
    );
}

/// A page as mdBook renders it: its `{{#include FILE[:from:]}}` lines
/// replaced by the file's text (relative to the page, as mdBook reads
/// links in it too).
fn expanded(doc: &Path) -> String {
    let text = std::fs::read_to_string(doc).unwrap();
    text.lines()
        .map(|line| match included(line) {
            Some((file, from)) => {
                let path = doc.parent().unwrap().join(file);
                let inner = std::fs::read_to_string(&path)
                    .unwrap_or_else(|e| panic!("{}: {line}: {e}", doc.display()));
                inner
                    .lines()
                    .skip(from.saturating_sub(1))
                    .collect::<Vec<_>>()
                    .join("\n")
            }
            None => line.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The file and first line of an `{{#include FILE[:FROM:]}}` line.
fn included(line: &str) -> Option<(&str, usize)> {
    let inner = line
        .trim()
        .strip_prefix("{{#include ")?
        .strip_suffix("}}")?;
    let mut parts = inner.splitn(2, ':');
    let file = parts.next()?;
    let from = parts
        .next()
        .and_then(|r| r.split(':').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(1);
    Some((file, from))
}

/// The files the book's pages include (they are read as part of them).
fn includes() -> BTreeSet<PathBuf> {
    documents_and_includes()
        .iter()
        .flat_map(|doc| {
            let text = std::fs::read_to_string(doc).unwrap();
            text.lines()
                .filter_map(|l| included(l).map(|(f, _)| doc.parent().unwrap().join(f)))
                .filter_map(|p| p.canonicalize().ok())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The markdown pages: the README and every page of the book, not the
/// files pages include.
fn documents() -> Vec<PathBuf> {
    let included = includes();
    documents_and_includes()
        .into_iter()
        .filter(|d| !included.contains(&d.canonicalize().unwrap()))
        .collect()
}

/// Every markdown file: the README and every file under the book.
fn documents_and_includes() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    let mut out = vec![root().join("README.md")];
    walk(&book(), &mut out);
    out.sort();
    out
}

/// The text of the code blocks and inline code spans of a document.
fn code_of(text: &str) -> Vec<String> {
    let mut code: Vec<String> = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if fenced {
            // A shell line continued with a backslash is one line.
            match code.last_mut() {
                Some(last) if last.ends_with('\\') => {
                    last.pop();
                    last.push_str(line);
                }
                _ => code.push(line.to_owned()),
            }
        } else {
            code.extend(line.split('`').skip(1).step_by(2).map(str::to_owned));
        }
    }
    code
}

/// The flags (`--name`) after `elect SUBCOMMAND` in one line of code,
/// up to a bare `--` (what follows is the wrapped command's).
fn invocations(line: &str, known: &BTreeSet<String>) -> Vec<(Vec<String>, Vec<String>)> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let mut found = Vec::new();
    for (i, w) in words.iter().enumerate() {
        // Not a package name (`cargo test -p elect`).
        let package = i >= 1 && matches!(words[i - 1], "-p" | "--package");
        let invoked = (w.ends_with("/elect") || *w == "elect") && !package
            || (*w == "--" && i >= 2 && words[i - 2] == "cargo" && words[i - 1] == "run");
        if !invoked {
            continue;
        }
        let rest = &words[i + 1..];
        let mut path = Vec::new();
        let mut flags = Vec::new();
        for word in rest {
            if *word == "--" || word.starts_with(['|', ';', '&', '#', '>', '$']) {
                break;
            }
            if let Some(flag) = word.strip_prefix("--") {
                let name: String = flag
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                    .collect();
                if !name.is_empty() {
                    flags.push(format!("--{name}"));
                }
            } else if path.len() < 2 {
                // Flags may come before the subcommand (`elect --backend
                // zk observe`): the first words that name one are it.
                let candidate: Vec<String> =
                    path.iter().cloned().chain([word.to_string()]).collect();
                if known.contains(&candidate.join(" ")) {
                    path = candidate;
                }
            }
        }
        if !path.is_empty() || !flags.is_empty() {
            found.push((path, flags));
        }
    }
    found
}

#[test]
fn every_command_line_in_the_docs_is_one_elect_takes() {
    let commands = commands();
    let known: BTreeSet<String> = commands.iter().map(|(p, _)| p.join(" ")).collect();
    let helps: BTreeMap<String, &str> = commands
        .iter()
        .map(|(p, h)| (p.join(" "), h.as_str()))
        .collect();
    let mut wrong = Vec::new();
    let mut checked = 0;
    for doc in documents() {
        let text = expanded(&doc);
        for line in code_of(&text) {
            for (path, flags) in invocations(&line, &known) {
                // The flags of the command, of its parent (lab's --dir),
                // and the global ones.
                let mut takes = String::new();
                for depth in 0..=path.len() {
                    takes.push_str(helps[&path[..depth].join(" ")]);
                }
                for flag in flags {
                    checked += 1;
                    let listed = takes.contains(&format!("{flag} "))
                        || takes.contains(&format!("{flag}\n"))
                        || takes.contains(&format!("{flag},"));
                    if !listed {
                        wrong.push(format!(
                            "{}: elect {} {flag}",
                            doc.display(),
                            path.join(" ")
                        ));
                    }
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "flags no --help lists:\n{}",
        wrong.join("\n")
    );
    assert!(
        checked > 50,
        "only {checked} flags found: is the scan broken?"
    );
}

#[test]
fn the_scan_sees_commands_and_their_flags() {
    let known: BTreeSet<String> = ["run", "lab", "lab up"].map(String::from).into();
    let code = code_of(
        "```sh\nelect --backend zk run --once 1d \\\n  --bogus -- sh --not-ours\n```\nor `elect lab up --etcd 1`, not `cargo test -p elect --lib`\n",
    );
    let found: Vec<_> = code
        .iter()
        .flat_map(|line| invocations(line, &known))
        .collect();
    let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        found,
        [
            (
                strings(&["run"]),
                strings(&["--backend", "--once", "--bogus"])
            ),
            (strings(&["lab", "up"]), strings(&["--etcd"])),
        ]
    );
}

/// mdBook's id of a heading: lower case, spaces as '-', only letters,
/// digits, '-' and '_' kept.
fn heading_id(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The ids of a page's headings.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut fenced = false;
    let mut ids = BTreeSet::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced && let Some(heading) = line.strip_prefix('#') {
            let heading = heading.trim_start_matches('#');
            if heading.starts_with(' ') {
                ids.insert(heading_id(heading));
            }
        }
    }
    ids
}

/// The targets of a page's markdown links `](target)`, outside code.
fn links(text: &str) -> Vec<String> {
    let mut fenced = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            if let Some(end) = rest.find(')') {
                out.push(rest[..end].to_owned());
            }
        }
    }
    out
}

#[test]
fn every_link_in_the_book_and_readme_resolves() {
    let mut dead = Vec::new();
    let mut checked = 0;
    for doc in documents() {
        let text = expanded(&doc);
        for link in links(&text) {
            if link.contains("://") || link.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (file, anchor) = link.split_once('#').unwrap_or((&link, ""));
            let target = if file.is_empty() {
                doc.clone()
            } else {
                doc.parent().unwrap().join(file)
            };
            if !target.exists() {
                dead.push(format!("{}: {link} (no such file)", doc.display()));
                continue;
            }
            if !anchor.is_empty() {
                let page = if target.is_file() {
                    expanded(&target)
                } else {
                    String::new()
                };
                if !anchors(&page).contains(anchor) {
                    dead.push(format!("{}: {link} (no such heading)", doc.display()));
                }
            }
        }
    }
    assert!(dead.is_empty(), "dead links:\n{}", dead.join("\n"));
    assert!(
        checked > 20,
        "only {checked} links found: is the scan broken?"
    );
}

#[test]
fn every_page_is_in_the_summary_and_the_readme_is_short() {
    let summary = std::fs::read_to_string(book().join("SUMMARY.md")).unwrap();
    let listed: BTreeSet<String> = links(&summary).into_iter().collect();
    for doc in documents() {
        let Ok(page) = doc.strip_prefix(book()) else {
            continue;
        };
        let page = page.to_str().unwrap();
        if page != "SUMMARY.md" {
            assert!(listed.contains(page), "{page} is not in SUMMARY.md");
        }
    }
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines <= 200,
        "README.md has {lines} lines: the book holds the rest"
    );
}

/// A line of Rust without its `//` comment, trimmed.
fn without_comment(line: &str) -> &str {
    line.split("//").next().unwrap_or_default().trim()
}

/// The fenced blocks of `text` whose info string starts with `rust`: the
/// info string and the code.
fn rust_blocks(text: &str) -> Vec<(String, String)> {
    let mut blocks = Vec::new();
    let mut open: Option<(String, String)> = None;
    for line in text.lines() {
        let fence = line.trim_start().strip_prefix("```");
        match (&mut open, fence) {
            (None, Some(info)) if info.starts_with("rust") => {
                open = Some((info.to_owned(), String::new()));
            }
            (Some(_), Some(_)) => blocks.push(open.take().unwrap()),
            (Some((_, code)), None) => {
                code.push_str(line);
                code.push('\n');
            }
            _ => {}
        }
    }
    blocks
}

/// Every Rust example in the book builds as it is written: a block shown
/// whole is the tail of a program in `crates/elect/examples/` (which the
/// workspace builds and lints), from its first `use` on; a fragment
/// (`rust,ignore`) is the crate's front-page example, which its doctests
/// compile, line for line. A guide whose example names a backend's
/// constructor enables that backend's feature in its `Cargo.toml`
/// snippet (it once enabled `zk` for an etcd example: it built, then
/// failed with `NotBuiltIn`).
#[test]
fn the_book_s_rust_examples_are_programs_the_workspace_builds() {
    let examples: Vec<String> = std::fs::read_dir(root().join("crates/elect/examples"))
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect();
    let front_page: Vec<String> = std::fs::read_to_string(root().join("crates/elect/src/lib.rs"))
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .map(|l| without_comment(l).to_owned())
        .collect();
    let mut seen = 0;
    for doc in documents_and_includes() {
        let text = std::fs::read_to_string(&doc).unwrap();
        for (info, code) in rust_blocks(&text) {
            seen += 1;
            if info.contains("ignore") {
                // Compared without comments: the guide explains more.
                for line in code.lines().map(without_comment).filter(|l| !l.is_empty()) {
                    assert!(
                        front_page.iter().any(|f| f == line),
                        "{}: a fragment's line is not in the crate's front-page example \
                         (crates/elect/src/lib.rs), which its doctests compile: {line}",
                        doc.display()
                    );
                }
            } else {
                assert!(
                    examples
                        .iter()
                        .any(|e| e.ends_with(code.as_str())
                            && e[..e.len() - code.len()].ends_with('\n')),
                    "{}: a Rust example that is not a program of crates/elect/examples \
                     (from its first `use` on):\n{code}",
                    doc.display()
                );
            }
            // The code, not its comments (which may name other backends).
            let calls: String = code.lines().map(without_comment).collect();
            let features_line = text.lines().find(|l| l.starts_with("elect = {"));
            for (constructor, feature) in [
                ("ElectionConfig::etcd(", "\"etcd\""),
                ("ElectionConfig::zk(", "\"zk\""),
                ("ElectionConfig::raft(", "\"raft\""),
            ] {
                if let Some(line) = features_line
                    && calls.contains(constructor)
                    && line.contains("default-features = false")
                {
                    assert!(
                        line.contains(feature),
                        "{}: the example uses {constructor}..) but the Cargo.toml snippet \
                         does not enable {feature}: {line}",
                        doc.display()
                    );
                }
            }
        }
    }
    assert!(seen >= 2, "the guides' Rust examples were found");
}
