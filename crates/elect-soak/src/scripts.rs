//! What the candidates run: the writer every leader's command is, and the
//! wrappers that put the peers' tools where users put them, around the
//! same writer.
//!
//! Every command is `bash -c SCRIPT soak-ROLE` with `SOAK_ELECTION`,
//! `SOAK_CAND` and `SOAK_STORE` in its environment: that is how the
//! sampler recognises it (see [`crate::sampler`]).

/// The writer: connects to the store, names itself with its token, writes
/// every 10 ms (the wait is `read -t` on the store's socket, so no process
/// is forked per write) until the store or a signal ends it. Each write
/// carries its send time (`$EPOCHREALTIME`, no fork either): a store slow
/// to read, on a loaded machine, must not make a write sent by a leader
/// look as if it came after its successor's.
pub const WRITE: &str = r#"exec </dev/null >/dev/null 2>&1
export LC_ALL=C
exec 3<>"/dev/tcp/$SOAK_STORE" || exit 1
echo "hello $SOAK_ELECTION $SOAK_CAND ${ELECT_FENCING_TOKEN:-0} ${0#soak-} ${ELECT_PERIOD_START:-}" >&3
while :; do echo "w $EPOCHREALTIME" >&3 || exit 1; read -t 0.01 -u 3; done"#;

/// A periodic job: a second of writes, then `done`, then exit 0.
pub const ONCE: &str = r#"exec </dev/null >/dev/null 2>&1
export LC_ALL=C
exec 3<>"/dev/tcp/$SOAK_STORE" || exit 1
echo "hello $SOAK_ELECTION $SOAK_CAND ${ELECT_FENCING_TOKEN:-0} once ${ELECT_PERIOD_START:-}" >&3
for ((i = 0; i < 100; i++)); do echo "w $EPOCHREALTIME" >&3 || exit 1; read -t 0.01 -u 3; done
echo done >&3"#;

/// elect's command: a daemon that leaves the group and the session (as
/// daemons do), and the writer itself.
pub const ELECT_COMMAND: &str = r#"(setsid bash -c "$SOAK_WRITE" soak-daemon </dev/null >/dev/null 2>&1 &); eval "$SOAK_WRITE""#;

/// The periodic job's command line.
pub const ONCE_COMMAND: &str = r#"eval "$SOAK_ONCE""#;

/// `etcdctl elect` wrapping the writer, as its users wrap a command: once
/// it prints the key and the proposal, read the key's create revision (the
/// token), start the writer in a session of its own, and kill it when
/// etcdctl exits (its session expired). SIGTERM resigns (etcdctl's own
/// handler) and kills the writer. Args: endpoints, election.
pub const ETCDCTL: &str = r#"export ETCDCTL_API=3
w=
coproc ETCD { exec etcdctl --endpoints "$1" elect "$2" "$SOAK_CAND" 2>&1; }
epid=$ETCD_PID
trap 'kill -TERM $epid 2>/dev/null; [ -n "$w" ] && kill -KILL -- -$w 2>/dev/null; wait $epid; exit 0' TERM INT
read -r key <&"${ETCD[0]}" || { wait $epid; exit 1; }
read -r _ <&"${ETCD[0]}" || { wait $epid; exit 1; }
rev=$(etcdctl --endpoints "$1" get "$key" -w json | grep -o '"create_revision":[0-9]*' | cut -d: -f2)
[ -n "$rev" ] || { kill -TERM $epid; wait $epid; exit 1; }
echo "ELECTED $rev"
ELECT_FENCING_TOKEN=$rev setsid bash -c "$SOAK_WRITE" soak-writer &
w=$!
wait $epid
echo "DEMOTED"
kill -KILL -- -$w 2>/dev/null
exit 1"#;

/// kazoo's `Election` wrapping the writer, stopping it on SUSPENDED or
/// LOST as kazoo's documentation advises; the token is the lock znode's
/// creation zxid. Args: hosts, path, session timeout in seconds.
pub const KAZOO: &str = r#"import os, signal, subprocess, sys, threading
from kazoo.client import KazooClient
hosts, path, timeout = sys.argv[1], sys.argv[2], float(sys.argv[3])
lost = threading.Event()
writer = None
def on_state(state):
    if state in ("SUSPENDED", "LOST"):
        lost.set()
def stop(*_):
    raise SystemExit(0)
signal.signal(signal.SIGTERM, stop)
zk = KazooClient(hosts=hosts, timeout=timeout)
zk.add_listener(on_state)
def kill_writer():
    global writer
    if writer is not None:
        try:
            os.killpg(writer.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        writer.wait()
        writer = None
try:
    zk.start(timeout=15)
    election = zk.Election(path, os.environ["SOAK_CAND"])
    def lead():
        global writer
        if lost.is_set():
            sys.exit(1)
        czxid = zk.exists(election.lock.path + "/" + election.lock.node).czxid
        print("ELECTED", czxid, flush=True)
        env = dict(os.environ, ELECT_FENCING_TOKEN=str(czxid))
        writer = subprocess.Popen(["bash", "-c", os.environ["SOAK_WRITE"], "soak-writer"],
                                  env=env, start_new_session=True)
        while not lost.wait(0.05):
            pass
        kill_writer()
        print("DEMOTED", flush=True)
        sys.exit(1)
    election.run(lead)
finally:
    kill_writer()
    zk.stop()
    zk.close()
"#;
