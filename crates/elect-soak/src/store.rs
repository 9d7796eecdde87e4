//! The fenced store every leader's command writes to, with a log of every
//! write, accepted or refused.
//!
//! A command connects and says `hello ELECTION CANDIDATE TOKEN ROLE
//! [PERIOD]`, then sends a `w [SENT]` line per write (`SENT`: its wall
//! clock in seconds, as bash's `$EPOCHREALTIME`) and, for a periodic job,
//! `done` when its work is finished. Per election, a write whose token is
//! below the highest accepted is refused. Accepted writes are logged as
//! spans (one token's writes, its command's and its daemon's, with
//! nothing of another token between them and no pause of over 50 ms), so an hour's writes fit in a
//! few megabytes and still show every interleaving.

use std::collections::{BTreeSet, HashMap};
use std::io::{BufRead, BufReader};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use elect_judge::history::{Micros, StoreRecord};

use crate::record::{Log, Recorder};

/// A pause between two writes of one connection that ends its span.
const SPAN_PAUSE: Micros = 50_000;
/// A span is logged at least this often, so a killed soak loses little.
const SPAN_MAX: Micros = 1_000_000;

/// The store, listening on loopback.
pub struct Store {
    /// `host/port`, as bash's `/dev/tcp/` takes it.
    pub dev_tcp: String,
    state: Arc<Mutex<State>>,
}

/// What the store has seen so far, per election, for progress lines.
#[derive(Clone, Copy, Debug, Default)]
pub struct Seen {
    /// Distinct tokens that said hello as a command, beyond the first:
    /// leader changes.
    pub leader_changes: usize,
    /// Writes refused, and accepted writes below an accepted token.
    pub refused: usize,
    pub out_of_order: usize,
}

#[derive(Default)]
struct State {
    elections: HashMap<String, Election>,
}

#[derive(Default)]
struct Election {
    seen: Seen,
    highest: u64,
    tokens: BTreeSet<u64>,
    open: Option<OpenSpan>,
}

struct OpenSpan {
    c: u64,
    token: u64,
    sent_from: Option<Micros>,
    from: Micros,
    to: Micros,
    n: u64,
}

impl Store {
    /// Listens on a free loopback port; logs through `recorder`.
    pub fn start(recorder: Recorder) -> std::io::Result<Store> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        let next = Arc::new(AtomicU64::new(1));
        std::thread::spawn(move || {
            for conn in listener.incoming().map_while(Result::ok) {
                let (state, recorder) = (shared.clone(), recorder.clone());
                let c = next.fetch_add(1, Ordering::Relaxed);
                std::thread::spawn(move || serve(conn, c, &state, &recorder));
            }
        });
        Ok(Store {
            dev_tcp: format!("{}/{}", addr.ip(), addr.port()),
            state,
        })
    }

    /// What it has seen so far, per election.
    pub fn seen(&self) -> HashMap<String, Seen> {
        self.state
            .lock()
            .unwrap()
            .elections
            .iter()
            .map(|(e, x)| (e.clone(), x.seen))
            .collect()
    }

    /// Logs every open span (at the end of the soak).
    pub fn flush(&self, recorder: &Recorder) {
        let mut s = self.state.lock().unwrap();
        for (e, election) in s.elections.iter_mut() {
            close_span(e, election, recorder);
        }
    }
}

fn close_span(e: &str, election: &mut Election, recorder: &Recorder) {
    if let Some(o) = election.open.take() {
        recorder.write(
            Log::Store,
            &StoreRecord::Span {
                e: e.to_owned(),
                c: o.c,
                token: o.token,
                from: o.from,
                to: o.to,
                n: o.n,
                sent_from: o.sent_from,
            },
        );
    }
}

/// A writer's send time (`$EPOCHREALTIME`: seconds and microseconds) on
/// the history's clock.
fn sent_at(epoch: &str, recorder: &Recorder) -> Option<Micros> {
    let (secs, micros) = epoch.split_once(['.', ','])?;
    let us = secs.parse::<u64>().ok()? * 1_000_000 + micros.parse::<u64>().ok()?;
    Some(recorder.from_unix_us(us))
}

fn serve(conn: TcpStream, c: u64, state: &Mutex<State>, recorder: &Recorder) {
    let mut lines = BufReader::new(conn).lines();
    let Some(Ok(hello)) = lines.next() else {
        return;
    };
    let words: Vec<&str> = hello.split_whitespace().collect();
    let [_, e, cand, token, role, rest @ ..] = words.as_slice() else {
        return;
    };
    let e = (*e).to_owned();
    // A command that started without a token (it should not) writes as 0.
    let token: u64 = token.parse().unwrap_or(0);
    let period = rest.first().and_then(|p| p.parse().ok());
    {
        let mut s = state.lock().unwrap();
        let election = s.elections.entry(e.clone()).or_default();
        let new = *role != "daemon" && election.tokens.insert(token);
        if new && election.tokens.len() > 1 {
            election.seen.leader_changes += 1;
        }
        recorder.write(
            Log::Store,
            &StoreRecord::Hello {
                t: recorder.now(),
                e: e.clone(),
                c,
                cand: (*cand).to_owned(),
                token,
                role: (*role).to_owned(),
                period,
            },
        );
    }
    for line in lines {
        let Ok(line) = line else { break };
        let t = recorder.now();
        let (word, sent) = match line.trim().split_once(' ') {
            Some((word, sent)) => (word, sent_at(sent, recorder)),
            None => (line.trim(), None),
        };
        let mut s = state.lock().unwrap();
        let election = s.elections.get_mut(&e).expect("said hello");
        match word {
            "w" => write(election, &e, c, token, (t, sent), recorder),
            "done" => recorder.write(Log::Store, &StoreRecord::Done { t, e: e.clone(), c }),
            _ => {}
        }
    }
    let mut s = state.lock().unwrap();
    if let Some(election) = s.elections.get_mut(&e)
        && election.open.as_ref().is_some_and(|o| o.token == token)
    {
        close_span(&e, election, recorder);
    }
    recorder.write(
        Log::Store,
        &StoreRecord::Close {
            t: recorder.now(),
            e,
            c,
        },
    );
}

/// A write of connection `c` with `token`, read at `t` (sent at `sent`,
/// where the writer said): refused if a higher token has written, else
/// accepted into the open span of its token, or a new one.
fn write(
    election: &mut Election,
    e: &str,
    c: u64,
    token: u64,
    (t, sent): (Micros, Option<Micros>),
    recorder: &Recorder,
) {
    let seen = &mut election.seen;
    if token < election.highest {
        seen.refused += 1;
        recorder.write(
            Log::Store,
            &StoreRecord::Refused {
                t,
                e: e.to_owned(),
                c,
                token,
                highest: election.highest,
                sent,
            },
        );
    } else {
        election.highest = token;
        // One token's writes (its command's and its daemon's) make
        // one span until another token writes.
        let extends = election
            .open
            .as_ref()
            .is_some_and(|o| o.token == token && t <= o.to + SPAN_PAUSE && t <= o.from + SPAN_MAX);
        if extends {
            let o = election.open.as_mut().unwrap();
            o.to = t;
            o.n += 1;
        } else {
            if election.open.as_ref().is_some_and(|o| o.token > token) {
                seen.out_of_order += 1;
            }
            close_span(e, election, recorder);
            election.open = Some(OpenSpan {
                c,
                token,
                sent_from: sent,
                from: t,
                to: t,
                n: 1,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_writers_send_time_is_put_on_the_historys_clock() {
        let dir = std::env::temp_dir().join(format!("store-sent-{}", std::process::id()));
        let recorder = Recorder::create(&dir).unwrap();
        let now_us = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_micros() as u64;
        let later = now_us + 2_500_000;
        let epoch = format!("{}.{:06}", later / 1_000_000, later % 1_000_000);
        let sent = sent_at(&epoch, &recorder).expect("parsed");
        // 2.5 s after the recorder started, give or take this test's run.
        assert!((2_400_000..2_600_000).contains(&sent), "{sent}");
        // A locale with a decimal comma says the same.
        assert_eq!(sent_at(&epoch.replace('.', ","), &recorder), Some(sent));
        assert_eq!(sent_at("soon", &recorder), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
