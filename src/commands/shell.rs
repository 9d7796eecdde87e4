//! What a shell and `man` need, generated from the same clap definitions
//! that parse the command line, so they cannot drift from it:
//! `elect completions bash|zsh|fish` prints a completion script, and
//! `elect man --out DIR` writes one man page per command (`elect.1`,
//! `elect-campaign.1`, `elect-lab-soak.1`...).

use std::path::{Path, PathBuf};

use crate::usage::UsageError;
use anyhow::Context as _;
use clap::{Args, ValueEnum};

/// `elect completions SHELL`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// The shells completions are generated for.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

/// `elect man --out DIR`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// The directory to write the pages into (created if missing), e.g.
    /// /usr/local/share/man/man1.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

/// Prints the completion script of `cmd` (elect's parser) for `shell` on
/// stdout.
pub fn completions(shell: Shell, mut cmd: clap::Command) -> anyhow::Result<u8> {
    let out = &mut std::io::stdout();
    match shell {
        Shell::Bash => clap_complete::generate(clap_complete::Shell::Bash, &mut cmd, "elect", out),
        Shell::Zsh => clap_complete::generate(clap_complete::Shell::Zsh, &mut cmd, "elect", out),
        Shell::Fish => clap_complete::generate(clap_complete::Shell::Fish, &mut cmd, "elect", out),
    }
    Ok(0)
}

/// Writes a man page for `elect` and for each of its subcommands, at every
/// depth, into `out`; prints the paths written.
pub fn man(out: &Path, mut cmd: clap::Command) -> anyhow::Result<u8> {
    if out.exists() && !out.is_dir() {
        return Err(
            UsageError::new("--out", format!("{} is not a directory", out.display())).into(),
        );
    }
    std::fs::create_dir_all(out).with_context(|| format!("--out: creating {}", out.display()))?;
    let mut written = Vec::new();
    write_pages(&mut cmd, "elect", out, &mut written)?;
    for path in written {
        println!("{}", path.display());
    }
    Ok(0)
}

fn write_pages(
    cmd: &mut clap::Command,
    name: &str,
    out: &Path,
    written: &mut Vec<PathBuf>,
) -> anyhow::Result<()> {
    // The page's name is the whole command line that reaches it.
    let mut page = cmd.clone().name(name.to_owned());
    page.build();
    let path = out.join(format!("{name}.1"));
    // Never through a FIFO (the write would block) or over a device.
    elect::input::check_writable_file(&path)
        .map_err(|e| UsageError::new("--out", e.to_string()))?;
    let mut text = Vec::new();
    clap_mangen::Man::new(page)
        .render(&mut text)
        .context("rendering a man page")?;
    std::fs::write(&path, text).with_context(|| format!("--out: writing {}", path.display()))?;
    written.push(path);
    for sub in cmd.get_subcommands_mut() {
        if sub.is_hide_set() || sub.get_name() == "help" {
            continue;
        }
        let sub_name = format!("{name}-{}", sub.get_name());
        write_pages(sub, &sub_name, out, written)?;
    }
    Ok(())
}
