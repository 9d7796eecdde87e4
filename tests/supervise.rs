//! The supervisor driven by a `watch::Sender` by hand, with real processes
//! and the real watchdog (the `elect` binary).

use std::time::Duration;

use elect::Leadership;
use elect::config::ChildConfig;
use elect::supervise::{ChildEnv, Finish, run};
use nix::sys::signal::Signal;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

fn sh(script: &str) -> ChildConfig {
    ChildConfig {
        command: vec!["sh".into(), "-c".into(), script.into()],
        grace: Duration::from_secs(5),
    }
}

fn env() -> ChildEnv {
    ChildEnv {
        election: "e".into(),
        backend: "test",
        watchdog: env!("CARGO_BIN_EXE_elect").into(),
    }
}

fn lead(token: u64, for_: Duration) -> Leadership {
    Leadership::elected("me".into(), token, Instant::now() + for_)
}

#[tokio::test]
async fn runs_only_while_leading_and_reports_exit() {
    let (tx, rx) = watch::channel(Leadership::unknown());
    let (busy, busy_rx) = watch::channel(false);
    let (_sig_tx, mut sigs) = mpsc::unbounded_channel();
    let cfg = sh("test \"$ELECT_FENCING_TOKEN\" = 7 && test \"$ELECT_LEADER_ID\" = me && exit 3");
    let env = env();
    let sup = run(&cfg, &env, rx, &busy, &mut sigs);
    tokio::pin!(sup);
    // Not leading: nothing runs.
    tokio::select! {
        _ = &mut sup => panic!("finished without leading"),
        _ = tokio::time::sleep(Duration::from_millis(100)) => {}
    }
    tx.send_replace(lead(7, Duration::from_secs(30)));
    assert_eq!(sup.await.unwrap(), Finish::Exited(3));
    assert!(!*busy_rx.borrow());
}

#[tokio::test]
async fn demotion_kills_the_group_including_ignorers_by_the_deadline() {
    let (tx, rx) = watch::channel(lead(1, Duration::from_secs(30)));
    let (busy, mut busy_rx) = watch::channel(false);
    let (_sig_tx, mut sigs) = mpsc::unbounded_channel();
    // The grandchild ignores SIGTERM; only SIGKILL at the deadline ends
    // it, long before the 30 s grace would.
    let mut cfg = sh("trap '' TERM; sleep 1000 & wait");
    cfg.grace = Duration::from_secs(30);
    let env = env();
    let task = async {
        busy_rx.wait_for(|b| *b).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut demoted = Leadership::unknown();
        let kill_by = Instant::now() + Duration::from_millis(300);
        demoted.deadline = Some(kill_by);
        tx.send_replace(demoted);
        busy_rx.wait_for(|b| !*b).await.unwrap();
        let gone_at = Instant::now();
        assert!(gone_at >= kill_by, "killed before the deadline");
        assert!(
            gone_at < kill_by + Duration::from_secs(5),
            "killed by the grace, not the deadline"
        );
        drop(tx);
    };
    let (finish, ()) = tokio::join!(run(&cfg, &env, rx, &busy, &mut sigs), task);
    assert_eq!(finish.unwrap(), Finish::BackendGone);
}

#[tokio::test]
async fn an_unrenewed_deadline_stops_the_command_without_word_from_the_backend() {
    let (tx, rx) = watch::channel(lead(1, Duration::from_millis(300)));
    let (busy, mut busy_rx) = watch::channel(false);
    let (_sig_tx, mut sigs) = mpsc::unbounded_channel();
    let cfg = sh("sleep 1000");
    let env = env();
    let started = Instant::now();
    let task = async {
        busy_rx.wait_for(|b| *b).await.unwrap();
        busy_rx.wait_for(|b| !*b).await.unwrap();
        assert!(started.elapsed() < Duration::from_secs(3));
        drop(tx);
    };
    let (finish, ()) = tokio::join!(run(&cfg, &env, rx, &busy, &mut sigs), task);
    assert_eq!(finish.unwrap(), Finish::BackendGone);
}

#[tokio::test]
async fn a_new_token_restarts_the_command() {
    let (tx, rx) = watch::channel(lead(1, Duration::from_secs(30)));
    let (busy, mut busy_rx) = watch::channel(false);
    let (_sig_tx, mut sigs) = mpsc::unbounded_channel();
    let cfg = sh("test \"$ELECT_FENCING_TOKEN\" = 2 && exit 0; sleep 1000");
    let env = env();
    let task = async {
        busy_rx.wait_for(|b| *b).await.unwrap();
        tx.send_replace(lead(2, Duration::from_secs(30)));
    };
    let (finish, ()) = tokio::join!(run(&cfg, &env, rx, &busy, &mut sigs), task);
    assert_eq!(finish.unwrap(), Finish::Exited(0));
}

#[tokio::test]
async fn signals_are_forwarded_and_the_code_is_128_plus_n() {
    let (_tx, rx) = watch::channel(lead(1, Duration::from_secs(30)));
    let (busy, mut busy_rx) = watch::channel(false);
    let (sig_tx, mut sigs) = mpsc::unbounded_channel();
    let cfg = sh("exec sleep 1000");
    let env = env();
    let task = async {
        busy_rx.wait_for(|b| *b).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        sig_tx.send(Signal::SIGTERM).unwrap();
    };
    let (finish, ()) = tokio::join!(run(&cfg, &env, rx, &busy, &mut sigs), task);
    assert_eq!(finish.unwrap(), Finish::Exited(128 + 15));
}

#[tokio::test]
async fn a_command_that_cannot_start_exits_127() {
    let (_tx, rx) = watch::channel(lead(1, Duration::from_secs(30)));
    let (busy, _busy_rx) = watch::channel(false);
    let (_sig_tx, mut sigs) = mpsc::unbounded_channel();
    let cfg = ChildConfig {
        command: vec!["/nonexistent/command".into()],
        grace: Duration::from_secs(1),
    };
    assert_eq!(
        run(&cfg, &env(), rx, &busy, &mut sigs).await.unwrap(),
        Finish::Exited(127)
    );
}
