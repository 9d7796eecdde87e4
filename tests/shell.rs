//! `elect completions` and `elect man`: generated from the parser itself,
//! so every command and flag is in them.

mod support;

use std::process::Command;

use support::elect::elect_once;

#[test]
fn completions_cover_every_command_and_bash_reads_its_script() {
    for shell in ["bash", "zsh", "fish"] {
        let (code, out, err, _) = elect_once(&["completions", shell]);
        assert_eq!(code, 0, "{shell}: {err}");
        // fish names long flags without their dashes (`-l election`).
        for word in ["campaign", "run", "soak", "election", "once"] {
            assert!(out.contains(word), "{shell}: no {word} in the script");
        }
    }
    let (_, script, _, _) = elect_once(&["completions", "bash"]);
    let checked = Command::new("bash")
        .args(["-n", "-c", &script])
        .output()
        .unwrap();
    assert!(
        checked.status.success(),
        "bash -n: {}",
        String::from_utf8_lossy(&checked.stderr)
    );
    // An unknown shell is bad input, named.
    let (code, _, err, _) = elect_once(&["completions", "tcsh"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("tcsh"), "{err}");
}

#[test]
fn man_writes_a_page_per_command_that_man_renders() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("man");
    let _ = std::fs::remove_dir_all(&dir);
    let (code, out, err, _) = elect_once(&["man", "--out", dir.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    for page in [
        "elect",
        "elect-campaign",
        "elect-run",
        "elect-lab-soak",
        "elect-compare",
    ] {
        let path = dir.join(format!("{page}.1"));
        assert!(
            out.contains(path.to_str().unwrap()),
            "{page} not listed: {out}"
        );
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(".SH NAME"), "{page}: {text}");
    }
    let run = std::fs::read_to_string(dir.join("elect-run.1")).unwrap();
    assert!(run.contains("\\-\\-grace"), "the flags are in the page");
    // Rendered as man would, where groff is installed.
    if Command::new("groff").arg("--version").output().is_ok() {
        let rendered = Command::new("groff")
            // No escapes or overstrikes: plain text to search.
            .args(["-man", "-Tutf8", "-ww", "-P-cbu"])
            .arg(dir.join("elect-run.1"))
            .output()
            .unwrap();
        assert!(rendered.status.success());
        assert!(String::from_utf8_lossy(&rendered.stdout).contains("--grace <GRACE>"));
    }
    // A directory that cannot be made names the flag.
    let (code, _, err, _) = elect_once(&["man", "--out", "/proc/nope/man1"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("--out"), "{err}");
}
