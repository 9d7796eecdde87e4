//! `elect run` in a real terminal (a tmux pane running an interactive
//! bash, job control on): Ctrl-C, Ctrl-\ and Ctrl-Z typed at the keyboard
//! reach elect's foreground group only; elect stops the command's whole
//! tree, resigns and exits with the command's code, and the shell gets its
//! prompt back (Ctrl-Z leaves no stopped job holding leadership), under
//! every containment level the machine gives, with a command whose tree
//! has a process in a group of its own and a daemon. The successor's side
//! of the same keys is in `tests/signals.rs`.

mod support;

use std::process::Command;
use std::time::Duration;

use support::elect::BIN;
use support::proc::{alive, descendants, parent, read_pids, scratch, tree_script};
use support::{eventually, loopback_net};

const SOON: Duration = Duration::from_secs(20);
/// How long an interactive bash in a fresh tmux pane may take to show its
/// prompt.
const PROMPT_WITHIN: Duration = Duration::from_secs(60);

fn tmux(args: &[&str]) -> String {
    let out = Command::new("tmux")
        .args(args)
        .output()
        .expect("tmux is installed by the README's test command");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A tmux session running bash; killed on drop.
struct Terminal(String);

impl Terminal {
    fn open(name: &str) -> Terminal {
        let _ = tmux(&["kill-session", "-t", name]);
        tmux(&[
            "new-session",
            "-d",
            "-s",
            name,
            "-x",
            "200",
            "-y",
            "50",
            "bash --norc --noprofile -i",
        ]);
        let terminal = Terminal(name.to_owned());
        // Keys typed before the shell reads its terminal may be lost on a
        // busy machine: wait for its prompt. A shell that is slow to start
        // beside the containers' tests (CI once waited 20 s) is given a
        // minute, and what the pane shows is said if it never comes.
        let prompt = elect_lab::poll(PROMPT_WITHIN, || {
            terminal
                .screen()
                .lines()
                .any(|l| l.trim_end().ends_with(['$', '#']))
                .then_some(())
        });
        if prompt.is_none() {
            panic!(
                "no shell prompt within {PROMPT_WITHIN:?}; the pane shows:\n{}\ntmux sessions:\n{}",
                terminal.screen(),
                tmux(&["list-sessions"])
            );
        }
        terminal
    }

    fn keys(&self, keys: &[&str]) {
        tmux(&[&["send-keys", "-t", &self.0][..], keys].concat());
    }

    fn screen(&self) -> String {
        tmux(&["capture-pane", "-p", "-J", "-t", &self.0, "-S", "-200"])
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = tmux(&["kill-session", "-t", &self.0]);
    }
}

#[test]
fn keys_typed_in_a_terminal_stop_the_command_and_elect_resigns() {
    let keys = [("C-c", 130), ("C-\\", 131), ("C-z", 143)];
    let cases = support::containment_levels()
        .into_iter()
        .flat_map(|level| keys.map(|(key, code)| (level, key, code)));
    for (i, (level, key, code)) in cases.enumerate() {
        let dir = scratch(&format!("tty{i}"));
        let pids_file = dir.join("pids");
        let peer = format!("a={}.1:7000", loopback_net());
        let command = format!(
            "{BIN} --backend raft --endpoints {peer} --election tty --id a --ttl 300ms \
             run --contain {level} --grace 1s -- sh -c '{}'; echo \"EXIT=$?\"",
            tree_script(&pids_file, false)
        );
        let terminal = Terminal::open(&format!("elect-tty-{}-{i}", std::process::id()));
        terminal.keys(&[&command, "Enter"]);
        let pids = read_pids(&pids_file, 2);
        // The watchdog is the command's parent (or, under pidns, its
        // init's); the guard (or the init) is its other child.
        let watchdog = eventually("the watchdog", SOON, || {
            std::iter::successors(parent(pids[0]), |&p| parent(p)).find(|&p| {
                std::fs::read(format!("/proc/{p}/cmdline"))
                    .is_ok_and(|c| c.split(|b| *b == 0).any(|a| a == b"__watchdog"))
            })
        });
        let mut helpers = descendants(watchdog);
        helpers.retain(|p| !pids.contains(p));
        helpers.push(watchdog);
        terminal.keys(&[key]);
        let screen = eventually(&format!("{level} {key}: elect's exit"), SOON, || {
            let s = terminal.screen();
            s.lines().any(|l| l.starts_with("EXIT=")).then_some(s)
        });
        assert!(
            screen.lines().any(|l| l == format!("EXIT={code}")),
            "{level} {key}: elect should exit with the command's code {code}:\n{screen}"
        );
        assert!(
            !screen.contains("Stopped"),
            "{level} {key}: a stopped job:\n{screen}"
        );
        for pid in pids {
            assert!(
                !alive(pid),
                "{level} {key}: pid {pid} of the command's tree lives on"
            );
        }
        for pid in helpers {
            eventually(
                &format!("{level} {key}: watchdog and guard gone"),
                SOON,
                || (!alive(pid)).then_some(()),
            );
        }
    }
}
