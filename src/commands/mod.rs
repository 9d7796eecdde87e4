//! The subcommands. Each module owns its arguments (a clap `Args`), their
//! validation into library types, and what it runs; this module only
//! gathers them under one parser and dispatches.

pub mod campaign;
pub mod compare;
pub mod demo;
pub mod lab;
pub mod leader;
pub mod observe;
pub mod run;
pub mod shell;
pub mod simulate;
pub mod switchover;

use std::collections::BTreeSet;
use std::ffi::OsString;

use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser, Subcommand};
use elect::backend_kind::Backend;

use crate::usage::Result;

/// Leader election on etcd, ZooKeeper, or among the elect processes
/// themselves (Raft's vote): as a sidecar, a wrapper, or a one-shot query.
#[derive(Debug, Parser)]
#[command(
    name = "elect",
    version,
    about,
    long_about = None,
    after_help = "The options of a subcommand may also come before it, as manifests often \
                  put them: `elect --backend zk --election /jobs campaign` is \
                  `elect campaign --backend zk --election /jobs`."
)]
pub struct Cli {
    #[command(subcommand)]
    command: CommandArgs,
}

#[derive(Debug, Subcommand)]
enum CommandArgs {
    /// Campaign for leadership and report changes; resign on SIGINT,
    /// SIGTERM, SIGHUP, SIGQUIT or SIGTSTP.
    Campaign(campaign::CampaignArgs),
    /// Report leadership changes without campaigning.
    Observe(observe::ObserveArgs),
    /// Print the current leader once; exit 3 when there is none.
    Leader(leader::LeaderArgs),
    /// Run CMD only while this process leads; kill its whole tree when
    /// leadership may be lost.
    Run(run::RunArgs),
    /// Move leadership to a named candidate (or the next in line): the
    /// leader's work stops, then it hands over; exit 5 if refused, 6 if
    /// not done within --timeout.
    Switchover(switchover::SwitchoverArgs),
    /// List the candidates in line, and who leads.
    Candidates(switchover::CandidatesArgs),
    /// A local 3-peer Raft-vote cluster of real elect processes: election,
    /// crash failover and graceful handover, timed. Needs no service.
    Demo,
    /// Real etcd clusters and ZooKeeper ensembles on this machine, in the
    /// background, and faults on their members.
    Lab(lab::LabArgs),
    /// The three backends (and the peers' own tools) through the same
    /// scenarios, side by side, on ensembles it starts or that you name.
    Compare(compare::CompareArgs),
    /// The classical election algorithms in a deterministic simulator:
    /// messages, time and outcome, one algorithm or all side by side.
    Simulate(simulate::SimulateArgs),
    /// Print a shell completion script (bash, zsh or fish).
    Completions(shell::CompletionsArgs),
    /// Write the man pages, one per command, into a directory.
    Man(shell::ManArgs),
}

/// A validated invocation.
#[derive(Debug)]
pub enum Command {
    Campaign(campaign::Request),
    Observe(observe::Request),
    Leader(leader::Request),
    Run(run::Request),
    Switchover(switchover::Request),
    Candidates(switchover::CandidatesRequest),
    Demo,
    Lab(lab::Request),
    Compare(compare::Plan),
    Simulate(simulate::Request),
    Completions(shell::Shell),
    Man(std::path::PathBuf),
}

/// A validated invocation and what the user should be told about it.
#[derive(Debug)]
pub struct Validated {
    pub command: Command,
    /// Said on stderr before anything starts.
    pub warnings: Vec<String>,
}

impl Command {
    /// Whether the command runs many candidates of its own, so that its
    /// progress, not each candidate's log, is what the user reads.
    pub fn runs_many(&self) -> bool {
        matches!(
            self,
            Command::Lab(_) | Command::Compare(_) | Command::Simulate(_)
        )
    }

    /// Runs the command; the exit code.
    pub fn execute(self) -> anyhow::Result<u8> {
        match self {
            Command::Campaign(r) => campaign::run(r),
            Command::Observe(r) => observe::run(r),
            Command::Leader(r) => leader::run(r),
            Command::Run(r) => run::run(r),
            Command::Switchover(r) => switchover::run(r),
            Command::Candidates(r) => switchover::run_candidates(r),
            Command::Demo => demo::run().map(|()| 0),
            Command::Lab(r) => lab::run(r),
            Command::Compare(plan) => {
                if plan.starts_etcd() {
                    elect_lab::EtcdRelease::chosen().map_err(crate::usage::release_refused)?;
                }
                compare::run(plan)
            }
            Command::Simulate(r) => simulate::run(r),
            Command::Completions(shell) => shell::completions(shell, Cli::command()),
            Command::Man(out) => shell::man(&out, Cli::command()),
        }
    }
}

/// Parses the process's arguments (clap prints help, version and its own
/// errors and exits), then validates them.
pub fn parse() -> Result<Validated> {
    let args = options_after_subcommand(std::env::args_os().collect());
    let matches = match Cli::command().try_get_matches_from(&args) {
        Ok(matches) => matches,
        Err(e) if e.kind() == clap::error::ErrorKind::InvalidUtf8 => {
            return Err(not_utf8(&args));
        }
        Err(e) => e.exit(),
    };
    validate(&matches)
}

/// clap's "invalid UTF-8 was detected in one or more arguments", with
/// the flag named: the one written as `--flag=VALUE`, or before the value.
fn not_utf8(args: &[OsString]) -> crate::usage::UsageError {
    let at = args.iter().position(|a| a.to_str().is_none());
    let flag = at.and_then(|i| {
        let bytes = args[i].as_encoded_bytes();
        let inline = bytes
            .starts_with(b"--")
            .then(|| bytes.iter().position(|&b| b == b'='))
            .flatten()
            .and_then(|eq| std::str::from_utf8(&bytes[..eq]).ok());
        let before = i
            .checked_sub(1)
            .and_then(|j| args[j].to_str())
            .filter(|a| a.starts_with('-'));
        inline.or(before).map(str::to_owned)
    });
    crate::usage::UsageError::new(
        flag.unwrap_or_else(|| "argument".into()),
        "is not UTF-8 text; only file paths and the command of `run` may be any bytes",
    )
}

fn validate(matches: &ArgMatches) -> Result<Validated> {
    let (name, sub) = matches.subcommand().expect("clap requires a subcommand");
    validate_command(matches).map_err(|e| from_variable(e, name, sub))
}

/// A refused value that came from its environment variable is named by
/// both, flag and variable: a user who typed no `--ttl` must learn that
/// ELECT_TTL was the culprit.
fn from_variable(
    mut e: crate::usage::UsageError,
    name: &str,
    sub: &ArgMatches,
) -> crate::usage::UsageError {
    let cli = Cli::command();
    let Some(command) = cli.find_subcommand(name) else {
        return e;
    };
    // Nested subcommands (`lab up`) declare their own flags.
    let (command, sub) = match sub.subcommand() {
        Some((nested, nested_matches)) => match command.find_subcommand(nested) {
            Some(c) => (c, nested_matches),
            None => (command, sub),
        },
        None => (command, sub),
    };
    let Some(long) = e.flag.strip_prefix("--") else {
        return e;
    };
    let from_env = command.get_arguments().find_map(|a| {
        (a.get_long() == Some(long))
            .then(|| {
                a.get_env()
                    .map(|env| (a.get_id().as_str().to_owned(), env.to_owned()))
            })
            .flatten()
    });
    if let Some((id, env)) = from_env
        && crate::usage::source(sub, &id) == Some(clap::parser::ValueSource::EnvVariable)
    {
        e.flag = format!("{} (from {})", e.flag, env.to_string_lossy());
    }
    e
}

fn validate_command(matches: &ArgMatches) -> Result<Validated> {
    let cli = Cli::from_arg_matches(matches).unwrap_or_else(|e| e.exit());
    let (name, sub) = matches.subcommand().expect("clap requires a subcommand");
    let mut warnings = ignored_environment(name);
    let command = match cli.command {
        CommandArgs::Campaign(args) => Command::Campaign(args.validate(sub, &mut warnings)?),
        CommandArgs::Observe(args) => Command::Observe(args.validate()?),
        CommandArgs::Leader(args) => Command::Leader(args.validate()?),
        CommandArgs::Run(args) => Command::Run(args.validate(sub, &mut warnings)?),
        CommandArgs::Switchover(args) => Command::Switchover(args.validate()?),
        CommandArgs::Candidates(args) => Command::Candidates(args.validate()?),
        CommandArgs::Demo => {
            demo::check_log_filter()?;
            Command::Demo
        }
        CommandArgs::Lab(args) => Command::Lab(args.validate()?),
        CommandArgs::Compare(args) => Command::Compare(args.validate(&mut warnings)?),
        CommandArgs::Simulate(args) => Command::Simulate(args.validate()?),
        CommandArgs::Completions(args) => Command::Completions(args.shell),
        CommandArgs::Man(args) => Command::Man(args.out),
    };
    Ok(Validated { command, warnings })
}

/// Options typed before the subcommand (`elect --backend zk observe`, as
/// earlier versions took them) are moved after it, where each subcommand
/// declares the options it takes. Every such option takes a value.
fn options_after_subcommand(mut args: Vec<OsString>) -> Vec<OsString> {
    let mut end = 1;
    while let Some(arg) = args.get(end).and_then(|a| a.to_str()) {
        if !arg.starts_with("--") || matches!(arg, "--" | "--help" | "--version") {
            break;
        }
        end += if arg.contains('=') { 1 } else { 2 };
    }
    if end == 1 || end >= args.len() {
        return args;
    }
    let options: Vec<OsString> = args.drain(1..end).collect();
    let at = 2;
    args.splice(at..at, options);
    args
}

/// Warnings for the `ELECT_*` variables set in the environment that the
/// chosen subcommand does not read: other commands may share the
/// environment, so they are not errors, but a user who meant them here
/// should hear that they do nothing.
fn ignored_environment(subcommand: &str) -> Vec<String> {
    let cli = Cli::command();
    let flags = |cmd: &clap::Command| -> Vec<(String, String)> {
        cmd.get_arguments()
            .filter_map(|a| {
                let env = a.get_env()?.to_str()?.to_owned();
                Some((env, format!("--{}", a.get_long()?)))
            })
            .collect()
    };
    let mut read = BTreeSet::new();
    let mut everywhere = Vec::new();
    for sub in cli.get_subcommands() {
        let mut all = flags(sub);
        for nested in sub.get_subcommands() {
            all.extend(flags(nested));
        }
        if sub.get_name() == subcommand {
            read.extend(all.iter().map(|(env, _)| env.clone()));
        }
        everywhere.extend(all);
    }
    // Without --endpoints, the election subcommands read the backend's
    // own variable, as `elect lab up --format env` exports it.
    if read.contains("ELECT_ENDPOINTS") {
        for backend in [Backend::Etcd, Backend::Zk, Backend::Raft] {
            read.insert(crate::args::backend_endpoints_var(backend).to_owned());
        }
    }
    everywhere.sort();
    everywhere.dedup();
    everywhere
        .into_iter()
        .filter(|(env, _)| !read.contains(env) && std::env::var_os(env).is_some())
        .map(|(env, flag)| {
            format!("{flag} (from {env}) is ignored: `{subcommand}` takes no {flag}")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn parse(args: &[&str]) -> Result<Validated> {
        let args = std::iter::once("elect")
            .chain(args.iter().copied())
            .map(OsString::from)
            .collect();
        let matches = Cli::command()
            .try_get_matches_from(options_after_subcommand(args))
            .expect("clap accepts");
        validate(&matches)
    }

    #[test]
    fn flags_may_follow_the_subcommand() {
        let cmd = parse(&["campaign", "--election", "e", "--ttl", "3", "--id", "a"]).unwrap();
        let Command::Campaign(r) = cmd.command else {
            panic!("not campaign")
        };
        assert_eq!(r.election.ttl(), Duration::from_secs(3));
        assert_eq!(r.election.id(), "a");
        assert_eq!(r.election.service().to_string(), "http://127.0.0.1:2379");
    }

    #[test]
    fn options_before_the_subcommand_still_count() {
        let cmd = parse(&["--backend", "zk", "--election=/e", "observe"]).unwrap();
        let Command::Observe(r) = cmd.command else {
            panic!("not observe")
        };
        assert_eq!(r.election.backend(), elect::Backend::Zk);
        assert_eq!(r.election.election(), "/e");
    }

    #[test]
    fn run_takes_the_command_after_dashes() {
        let cmd = parse(&[
            "--election",
            "e",
            "run",
            "--grace",
            "1s",
            "--",
            "sh",
            "-c",
            "x",
        ])
        .unwrap();
        let Command::Run(r) = cmd.command else {
            panic!("not run")
        };
        assert_eq!(r.child.command(), ["sh", "-c", "x"]);
        assert_eq!(r.child.grace(), Duration::from_secs(1));
    }

    #[test]
    fn missing_election_names_the_flag() {
        let err = parse(&["leader"]).unwrap_err();
        assert_eq!(err.flag, "--election");
    }

    #[test]
    fn library_fields_are_reported_as_flags() {
        let err = parse(&["leader", "--election", "e", "--connect-timeout", "1ms"]).unwrap_err();
        assert_eq!(err.flag, "--connect-timeout");
        let err = parse(&["leader", "--election", "e", "--ttl", "99999999999999"]).unwrap_err();
        assert_eq!(err.flag, "--ttl");
        let err = parse(&["--election", "e", "run", "--grace", "9999999h", "--", "x"]).unwrap_err();
        assert_eq!(err.flag, "--grace");
    }

    #[test]
    fn typed_flags_that_do_nothing_are_refused() {
        let err = parse(&["campaign", "--election", "e", "--data-dir", "/tmp"]).unwrap_err();
        assert_eq!(err.flag, "--data-dir");
        for args in [
            ["leader", "--election", "e", "--http", "127.0.0.1:1"],
            ["observe", "--election", "e", "--id", "a"],
        ] {
            let err = Cli::command()
                .try_get_matches_from(std::iter::once("elect").chain(args))
                .unwrap_err();
            assert_eq!(err.kind(), clap::error::ErrorKind::UnknownArgument);
        }
    }

    #[test]
    fn each_subcommand_lists_only_its_own_options() {
        let cli = Cli::command();
        let longs = |name: &str| -> BTreeSet<String> {
            let sub = cli.find_subcommand(name).unwrap();
            sub.get_arguments()
                .filter_map(|a| a.get_long().map(str::to_owned))
                .collect()
        };
        assert!(!longs("compare").contains("data-dir"));
        assert!(!longs("compare").contains("leader-file"));
        assert!(!longs("leader").contains("http"));
        assert!(!longs("observe").contains("id"));
        assert!(longs("run").contains("grace"));
        assert!(!longs("campaign").contains("grace"));
        assert!(longs("demo").is_empty());
    }

    #[test]
    fn even_raft_clusters_are_accepted_with_a_warning() {
        let args = [
            "campaign",
            "--backend",
            "raft",
            "--endpoints",
            "a=127.0.0.1:1,b=127.0.0.1:2",
            "--election",
            "c",
            "--id",
            "a",
        ];
        let v = parse(&args).unwrap();
        assert_eq!(v.warnings.len(), 1, "{:?}", v.warnings);
        assert!(
            v.warnings[0].contains("tolerates 0 down"),
            "{:?}",
            v.warnings
        );
    }
}
