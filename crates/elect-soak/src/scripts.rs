//! What the candidates run: the writer every leader's command is. The
//! peers' tools run it through their wrappers (`elect_lab::peers`), the
//! way users put work beside them.
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
