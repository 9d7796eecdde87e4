//! Every public async fn of the library says what errors it returns and
//! what dropping its future does (`# Errors`, `# Cancel safety`): a caller
//! that `select!`s on it must know. Read from the source of the modules
//! the crate exports (`pub mod`), as a reader of the docs would meet them.

use std::path::{Path, PathBuf};

/// The files of the modules reachable through `pub mod` from `file`.
fn public_files(file: &Path, out: &mut Vec<PathBuf>) {
    out.push(file.to_owned());
    let text = std::fs::read_to_string(file).unwrap();
    let stem = file.file_stem().unwrap().to_str().unwrap();
    let dir = match stem {
        "lib" | "mod" => file.parent().unwrap().to_owned(),
        _ => file.with_extension(""),
    };
    for line in text.lines() {
        let Some(name) = line
            .trim()
            .strip_prefix("pub mod ")
            .and_then(|rest| rest.strip_suffix(';'))
        else {
            continue;
        };
        let flat = dir.join(format!("{name}.rs"));
        let nested = dir.join(name).join("mod.rs");
        public_files(if flat.exists() { &flat } else { &nested }, out);
    }
}

/// `(file:line, signature, doc)` of every `pub async fn` in `file`.
fn async_fns(file: &Path) -> Vec<(String, String, String)> {
    let text = std::fs::read_to_string(file).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if !line.trim_start().starts_with("pub async fn ") {
            continue;
        }
        let mut doc = Vec::new();
        let mut in_attribute = false;
        for above in lines[..i].iter().rev() {
            let above = above.trim_start();
            if in_attribute {
                // An attribute over several lines, read from its end.
                in_attribute = !above.starts_with("#[");
            } else if let Some(d) = above.strip_prefix("///") {
                doc.push(d.trim());
            } else if above == ")]" {
                in_attribute = true;
            } else if !above.starts_with("#[") {
                break;
            }
        }
        doc.reverse();
        let signature: String = lines[i..]
            .iter()
            .take_while(|l| !l.contains('{'))
            .chain(lines[i..].iter().find(|l| l.contains('{')))
            .copied()
            .collect::<Vec<_>>()
            .join(" ");
        found.push((
            format!("{}:{}", file.display(), i + 1),
            signature,
            doc.join("\n"),
        ));
    }
    found
}

#[test]
fn every_public_async_fn_documents_its_errors_and_cancel_safety() {
    let mut files = Vec::new();
    public_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs"),
        &mut files,
    );
    let mut missing = Vec::new();
    for file in &files {
        for (at, signature, doc) in async_fns(file) {
            let returns = signature.split("->").nth(1).unwrap_or("");
            if returns.contains("Result") && !doc.contains("# Errors") {
                missing.push(format!("{at}: no `# Errors`"));
            }
            if !doc.contains("# Cancel safety") {
                missing.push(format!("{at}: no `# Cancel safety`"));
            }
        }
    }
    assert!(files.len() > 10, "read only {files:?}");
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}
