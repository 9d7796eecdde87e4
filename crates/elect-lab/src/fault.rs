//! Instruments for fault experiments: a fenced store the leaders' commands
//! write to, the history checker that reads the tenures it records, and a
//! TCP fault proxy between candidates and an ensemble.
//!
//! One clock: everything is stamped with this process's `Instant::now()`
//! when the store or the proxy sees it, so tenures and faults compare
//! without clock skew.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// One tenure as the store saw it: from the command's first contact to the
/// moment its connection closed (the command's death), or still open.
#[derive(Debug, Clone)]
pub struct Interval {
    /// The leader's id (`ELECT_LEADER_ID`).
    pub id: String,
    /// Its fencing token.
    pub token: u64,
    /// When its first contact arrived.
    pub start: Instant,
    /// When its connection closed; `None` while open.
    pub end: Option<Instant>,
}

#[derive(Default)]
struct StoreState {
    intervals: Vec<Interval>,
    /// The highest token written so far.
    highest: u64,
    accepted: Vec<(u64, Instant)>,
    rejected: usize,
}

/// A tiny fenced store: commands connect, say `hello ID TOKEN`, then send
/// `w` lines; a write whose token is lower than the highest seen is
/// rejected. Every connection is one leadership interval.
pub struct FencedStore {
    /// Where it listens, `127.0.0.1:port`.
    pub addr: String,
    state: Arc<Mutex<StoreState>>,
}

impl FencedStore {
    /// Listens on a free loopback port.
    pub fn start() -> std::io::Result<FencedStore> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?.to_string();
        let state = Arc::new(Mutex::new(StoreState::default()));
        let shared = state.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming().map_while(Result::ok) {
                let state = shared.clone();
                std::thread::spawn(move || serve(conn, &state));
            }
        });
        Ok(FencedStore { addr, state })
    }

    /// A bash script that holds a connection to the store for as long as it
    /// lives, writing with its fencing token every 10 ms.
    pub fn writer_script(&self) -> String {
        let (host, port) = self.addr.split_once(':').unwrap();
        format!(
            "exec 3<>/dev/tcp/{host}/{port}; echo \"hello $ELECT_LEADER_ID $ELECT_FENCING_TOKEN\" >&3; \
             while :; do echo w >&3 || exit 1; sleep 0.01; done"
        )
    }

    /// Every tenure so far, in order of first contact.
    pub fn intervals(&self) -> Vec<Interval> {
        self.state.lock().unwrap().intervals.clone()
    }

    /// Writes rejected for carrying a token below the highest seen.
    pub fn rejected(&self) -> usize {
        self.state.lock().unwrap().rejected
    }

    /// Accepted writes that were stale: written with a token lower than
    /// that of a tenure which had already begun (the store could not tell,
    /// because the newer leader had not written yet).
    pub fn stale_accepted(&self) -> usize {
        let s = self.state.lock().unwrap();
        s.accepted
            .iter()
            .filter(|(token, at)| {
                s.intervals
                    .iter()
                    .any(|i| i.token > *token && i.start <= *at)
            })
            .count()
    }

    /// Waits until a write with `token` (or a higher one) was accepted;
    /// false if none was within `within`.
    pub fn wait_written(&self, token: u64, within: Duration) -> bool {
        crate::poll::poll(within, || {
            let s = self.state.lock().unwrap();
            s.accepted.iter().any(|(t, _)| *t >= token).then_some(())
        })
        .is_some()
    }

    /// Waits until a tenure with a token above `above` has begun.
    pub fn wait_new_tenure(&self, above: u64, within: Duration) -> Option<Interval> {
        crate::poll::poll(within, || {
            self.intervals().into_iter().find(|i| i.token > above)
        })
    }

    /// Records a write as if a leader with `token` had sent it now: for
    /// checking the checker, and for leaders that write in-process.
    pub fn write(&self, token: u64) -> bool {
        let mut s = self.state.lock().unwrap();
        if token < s.highest {
            s.rejected += 1;
            false
        } else {
            s.highest = token;
            s.accepted.push((token, Instant::now()));
            true
        }
    }

    /// Records the start of a tenure seen in-process; returns its index
    /// for [`FencedStore::end_tenure`].
    pub fn begin_tenure(&self, id: &str, token: u64) -> usize {
        let mut s = self.state.lock().unwrap();
        s.intervals.push(Interval {
            id: id.to_owned(),
            token,
            start: Instant::now(),
            end: None,
        });
        s.intervals.len() - 1
    }

    /// Records the end of tenure `index`.
    pub fn end_tenure(&self, index: usize) {
        if let Some(i) = self.state.lock().unwrap().intervals.get_mut(index) {
            i.end.get_or_insert_with(Instant::now);
        }
    }
}

fn serve(conn: TcpStream, state: &Arc<Mutex<StoreState>>) {
    let mut lines = BufReader::new(conn).lines();
    let Some(Ok(hello)) = lines.next() else {
        return;
    };
    let mut words = hello.split_whitespace().skip(1);
    let id = words.next().unwrap_or_default().to_owned();
    let token: u64 = words.next().and_then(|t| t.parse().ok()).unwrap_or(0);
    let store = FencedStore {
        addr: String::new(),
        state: state.clone(),
    };
    let index = store.begin_tenure(&id, token);
    for line in lines {
        if line.is_err() {
            break;
        }
        store.write(token);
    }
    store.end_tenure(index);
}

/// What the history says about one scenario.
#[derive(Debug)]
pub struct Verdict {
    /// Tenures after the first that began before the teardown: the
    /// handovers the scenario caused, not those of candidates leaving at
    /// the end.
    pub failovers: usize,
    /// The largest overlap of two tenures (zero if none).
    pub max_overlap: Duration,
    /// The largest time between one tenure's end and the next's start.
    pub max_gap: Duration,
}

/// Checks the tenures for overlap, in start order, the teardown's included;
/// counts failovers up to `teardown`.
pub fn check(intervals: &[Interval], teardown: Instant) -> Verdict {
    let mut sorted = intervals.to_vec();
    sorted.sort_by_key(|i| i.start);
    let mut max_overlap = Duration::ZERO;
    let mut max_gap = Duration::ZERO;
    // The latest end so far: any later start before it is an overlap.
    let mut latest_end: Option<Instant> = None;
    let now = Instant::now();
    for i in &sorted {
        if let Some(end) = latest_end {
            if i.start < end {
                max_overlap = max_overlap.max(end - i.start);
            } else {
                max_gap = max_gap.max(i.start - end);
            }
        }
        let end = i.end.unwrap_or(now);
        latest_end = Some(latest_end.map_or(end, |e| e.max(end)));
    }
    Verdict {
        failovers: sorted
            .iter()
            .filter(|i| i.start < teardown)
            .count()
            .saturating_sub(1),
        max_overlap,
        max_gap,
    }
}

/// How the proxy treats traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Traffic {
    /// Everything flows.
    Pass,
    /// Nothing flows either way; connections stay open (a partition).
    Blackhole,
    /// Each chunk waits this long before it is passed on.
    Delay(Duration),
}

struct ProxyState {
    mode: Traffic,
    /// Cut the connection right after forwarding the next ZooKeeper create
    /// request, so its reply is lost.
    cut_after_zk_create: bool,
    /// Cut the connection right after forwarding the next gRPC request
    /// (HTTP/2 DATA frame) naming a key under this prefix followed by a hex
    /// digit: an etcd candidate's own key, first named by its campaign txn.
    cut_after_etcd_key: Option<Vec<u8>>,
    cuts: usize,
}

/// A TCP proxy in front of one upstream address.
pub struct Proxy {
    /// Where it listens.
    pub addr: String,
    state: Arc<(Mutex<ProxyState>, Condvar)>,
}

impl Proxy {
    /// One proxy per member of `members` (comma-separated `host:port`s),
    /// each listening on a port of its own on `host`: a candidate's own
    /// way to the ensemble, to cut it off with; and the list of their
    /// addresses, in the members' order, as the candidate's endpoints.
    pub fn in_front_of(host: &str, members: &str) -> std::io::Result<(Vec<Proxy>, String)> {
        let proxies = members
            .split(',')
            .map(|m| Proxy::start(&format!("{host}:0"), m))
            .collect::<std::io::Result<Vec<_>>>()?;
        let endpoints = proxies
            .iter()
            .map(|p| p.addr.as_str())
            .collect::<Vec<_>>()
            .join(",");
        Ok((proxies, endpoints))
    }

    /// Listens on `listen` (`host:port`) and forwards to `upstream`.
    pub fn start(listen: &str, upstream: &str) -> std::io::Result<Proxy> {
        let listener = TcpListener::bind(listen)?;
        let addr = listener.local_addr()?.to_string();
        let state = Arc::new((
            Mutex::new(ProxyState {
                mode: Traffic::Pass,
                cut_after_zk_create: false,
                cut_after_etcd_key: None,
                cuts: 0,
            }),
            Condvar::new(),
        ));
        let shared = state.clone();
        let upstream = upstream.to_owned();
        std::thread::spawn(move || {
            for client in listener.incoming().map_while(Result::ok) {
                let Ok(server) = TcpStream::connect(&upstream) else {
                    continue;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                let (Ok(c2), Ok(s2)) = (client.try_clone(), server.try_clone()) else {
                    continue;
                };
                let up = shared.clone();
                std::thread::spawn(move || pump_zk_aware(client, server, &up));
                let down = shared.clone();
                std::thread::spawn(move || pump(s2, c2, &down));
            }
        });
        Ok(Proxy { addr, state })
    }

    /// Changes how traffic is treated from now on (open connections too).
    pub fn set(&self, mode: Traffic) {
        let (lock, cvar) = &*self.state;
        lock.lock().unwrap().mode = mode;
        cvar.notify_all();
    }

    /// Cuts the connection right after the next ZooKeeper create is
    /// forwarded: the server creates the znode, the reply is lost.
    pub fn cut_after_next_zk_create(&self) {
        self.state.0.lock().unwrap().cut_after_zk_create = true;
    }

    /// Cuts the connection right after the next etcd request naming a key
    /// under `prefix` is forwarded: the txn commits, the reply is lost.
    pub fn cut_after_next_etcd_key_under(&self, prefix: &str) {
        self.state.0.lock().unwrap().cut_after_etcd_key = Some(prefix.as_bytes().to_vec());
    }

    /// How many connections were cut after a create.
    pub fn cuts(&self) -> usize {
        self.state.0.lock().unwrap().cuts
    }
}

/// Forwards one frame (`head` then `body`) once the proxy lets it through;
/// false when either side is gone.
fn forward(
    to: &mut TcpStream,
    head: &[u8],
    body: &[u8],
    state: &(Mutex<ProxyState>, Condvar),
) -> bool {
    let delay = gate(state);
    if !delay.is_zero() {
        std::thread::sleep(delay);
    }
    to.write_all(head).and_then(|()| to.write_all(body)).is_ok()
}

/// Ends a connection right after a request went through, on the client's
/// side only: the server keeps the request and answers it, and the reply
/// dies in the other pump, whose write to the client fails and which then
/// closes the server's side too.
fn cut(from: &TcpStream, state: &(Mutex<ProxyState>, Condvar)) {
    state.0.lock().unwrap().cuts += 1;
    let _ = from.shutdown(Shutdown::Both);
}

/// Blocks while the proxy is a blackhole; returns the delay to apply.
fn gate(state: &(Mutex<ProxyState>, Condvar)) -> Duration {
    let (lock, cvar) = state;
    let mut s = lock.lock().unwrap();
    while s.mode == Traffic::Blackhole {
        s = cvar.wait(s).unwrap();
    }
    match s.mode {
        Traffic::Delay(d) => d,
        _ => Duration::ZERO,
    }
}

fn pump(mut from: TcpStream, mut to: TcpStream, state: &(Mutex<ProxyState>, Condvar)) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if !forward(&mut to, &buf[..n], &[], state) {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Both);
    let _ = from.shutdown(Shutdown::Both);
}

/// Client to server. ZooKeeper frames are length-prefixed; after the
/// connect request each starts with xid and op code, so a create (1),
/// create2 (15), createContainer (19) or createTTL (21) can be recognised
/// and the connection cut right after it is forwarded. Other protocols pass
/// through in chunks (the first 4 bytes of an HTTP/2 preface read as a
/// length that makes the pump fall back to plain copying).
fn pump_zk_aware(
    mut from: TcpStream,
    mut to: TcpStream,
    state: &Arc<(Mutex<ProxyState>, Condvar)>,
) {
    let mut first = true;
    loop {
        let mut len = [0u8; 4];
        if from.read_exact(&mut len).is_err() {
            break;
        }
        let n = u32::from_be_bytes(len) as usize;
        if n > 4 * 1024 * 1024 {
            // Not ZooKeeper framing: HTTP/2 starts with "PRI ".
            if !forward(&mut to, &len, &[], state) {
                break;
            }
            return pump_h2(from, to, state);
        }
        let mut body = vec![0u8; n];
        if from.read_exact(&mut body).is_err() || !forward(&mut to, &len, &body, state) {
            break;
        }
        let op = (!first && n >= 8).then(|| i32::from_be_bytes(body[4..8].try_into().unwrap()));
        first = false;
        if matches!(op, Some(1 | 15 | 19 | 21))
            && std::mem::take(&mut state.0.lock().unwrap().cut_after_zk_create)
        {
            cut(&from, state);
            return;
        }
    }
    let _ = to.shutdown(Shutdown::Both);
    let _ = from.shutdown(Shutdown::Both);
}

/// Client to server over HTTP/2 (etcd's gRPC): the rest of the 24-byte
/// preface, then frames of a 9-byte header (24-bit length, type, flags,
/// stream) and a payload. Each frame is forwarded whole, so a DATA frame
/// (type 0) carrying a request that names a watched key can be the last
/// thing forwarded before the cut.
fn pump_h2(mut from: TcpStream, mut to: TcpStream, state: &Arc<(Mutex<ProxyState>, Condvar)>) {
    let mut preface = [0u8; 20];
    if from.read_exact(&mut preface).is_err() || to.write_all(&preface).is_err() {
        return;
    }
    loop {
        let mut header = [0u8; 9];
        if from.read_exact(&mut header).is_err() {
            break;
        }
        let n = u32::from_be_bytes([0, header[0], header[1], header[2]]) as usize;
        let mut payload = vec![0u8; n];
        if from.read_exact(&mut payload).is_err() || !forward(&mut to, &header, &payload, state) {
            break;
        }
        if header[3] != 0 {
            continue;
        }
        let names_key = {
            let mut s = state.0.lock().unwrap();
            let names = s.cut_after_etcd_key.as_deref().is_some_and(|prefix| {
                payload
                    .windows(prefix.len() + 1)
                    .any(|w| w.starts_with(prefix) && w[prefix.len()].is_ascii_hexdigit())
            });
            if names {
                s.cut_after_etcd_key = None;
            }
            names
        };
        if names_key {
            cut(&from, state);
            return;
        }
    }
    let _ = to.shutdown(Shutdown::Both);
    let _ = from.shutdown(Shutdown::Both);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(base: Instant, ms: u64) -> Instant {
        base + Duration::from_millis(ms)
    }

    #[test]
    fn the_history_checker_catches_a_planted_overlap() {
        let t = Instant::now();
        let tenure = |id: &str, token, start, end| Interval {
            id: id.into(),
            token,
            start: at(t, start),
            end: Some(at(t, end)),
        };
        let clean = [tenure("a", 1, 0, 10), tenure("b", 2, 12, 20)];
        let v = check(&clean, at(t, 100));
        assert_eq!(v.max_overlap, Duration::ZERO);
        assert_eq!(v.max_gap, Duration::from_millis(2));
        assert_eq!(v.failovers, 1);

        // b begins 5 ms before a's command died.
        let planted = [tenure("a", 1, 0, 10), tenure("b", 2, 5, 20)];
        let v = check(&planted, at(t, 100));
        assert_eq!(v.max_overlap, Duration::from_millis(5));
    }

    #[test]
    fn the_fenced_store_catches_a_planted_stale_write() {
        let store = FencedStore::start().unwrap();
        let a = store.begin_tenure("a", 1);
        assert!(store.write(1));
        assert_eq!(store.stale_accepted(), 0);
        // b's tenure has begun but b has not written yet: a's next write
        // gets through, and is stale.
        let _b = store.begin_tenure("b", 2);
        assert!(store.write(1), "the store cannot know yet");
        assert_eq!(store.stale_accepted(), 1);
        // Once b wrote, a is rejected.
        assert!(store.write(2));
        assert!(!store.write(1));
        assert_eq!(store.rejected(), 1);
        store.end_tenure(a);
        assert!(store.intervals()[0].end.is_some());
    }

    #[test]
    fn the_writer_script_says_who_it_is_and_writes_through_the_store() {
        let store = FencedStore::start().unwrap();
        let mut child = std::process::Command::new("bash")
            .arg("-c")
            .arg(store.writer_script())
            .env("ELECT_LEADER_ID", "w")
            .env("ELECT_FENCING_TOKEN", "7")
            .spawn()
            .unwrap();
        assert!(store.wait_written(7, Duration::from_secs(10)));
        let _ = child.kill();
        let _ = child.wait();
        let tenure = store
            .wait_new_tenure(0, Duration::from_secs(1))
            .expect("one tenure");
        assert_eq!((tenure.id.as_str(), tenure.token), ("w", 7));
    }
}
