//! `elect run` in a real terminal (a tmux pane running an interactive
//! bash, job control on): Ctrl-C, Ctrl-\ and Ctrl-Z typed at the keyboard
//! reach elect's foreground group only; elect stops the command's whole
//! tree, resigns and exits with the command's code, and the shell gets its
//! prompt back (Ctrl-Z leaves no stopped job holding leadership). The
//! successor's side of the same keys is in `tests/signals.rs`.

mod support;

use std::process::Command;
use std::time::Duration;

use support::elect::BIN;
use support::proc::{alive, descendants, parent, read_pids, scratch, tree_script};
use support::{eventually, loopback_net};

const SOON: Duration = Duration::from_secs(20);

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
        Terminal(name.to_owned())
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
    for (i, (key, code)) in [("C-c", 130), ("C-\\", 131), ("C-z", 143)]
        .into_iter()
        .enumerate()
    {
        let dir = scratch(&format!("tty{i}"));
        let pids_file = dir.join("pids");
        let peer = format!("a={}.1:7000", loopback_net());
        let command = format!(
            "{BIN} --backend raft --endpoints {peer} --election tty --id a --ttl 300ms \
             run --grace 1s -- sh -c '{}'; echo \"EXIT=$?\"",
            tree_script(&pids_file, false)
        );
        let terminal = Terminal::open(&format!("elect-tty-{}-{i}", std::process::id()));
        terminal.keys(&[&command, "Enter"]);
        let pids = read_pids(&pids_file, 2);
        // The command's parent is the watchdog; the guard is its other child.
        let watchdog = parent(pids[0]).expect("the command runs");
        let mut helpers = descendants(watchdog);
        helpers.retain(|p| !pids.contains(p));
        helpers.push(watchdog);
        terminal.keys(&[key]);
        let screen = eventually(&format!("{key}: elect's exit"), SOON, || {
            let s = terminal.screen();
            s.lines().any(|l| l.starts_with("EXIT=")).then_some(s)
        });
        assert!(
            screen.lines().any(|l| l == format!("EXIT={code}")),
            "{key}: elect should exit with the command's code {code}:\n{screen}"
        );
        assert!(
            !screen.contains("Stopped"),
            "{key}: a stopped job:\n{screen}"
        );
        for pid in pids {
            assert!(
                !alive(pid),
                "{key}: pid {pid} of the command's tree lives on"
            );
        }
        for pid in helpers {
            eventually(&format!("{key}: watchdog and guard gone"), SOON, || {
                (!alive(pid)).then_some(())
            });
        }
    }
}
