//! Ctrl-C for long lab operations: a handler that only raises a flag, so
//! whatever is waiting (a health poll, an experiment) returns and the
//! `Drop`s tear down what was started. Without it the default action of
//! SIGINT would end the process with members and containers still running.

use std::sync::atomic::{AtomicBool, Ordering};

use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};

static REQUESTED: AtomicBool = AtomicBool::new(false);

extern "C" fn raise_flag(_: libc::c_int) {
    REQUESTED.store(true, Ordering::SeqCst);
}

/// Makes SIGINT, SIGTERM and SIGHUP raise the flag instead of ending the
/// process. For programs whose every wait goes through [`super::poll()`] or
/// checks [`requested`].
pub fn install() {
    let action = SigAction::new(
        SigHandler::Handler(raise_flag),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for sig in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        // SAFETY: the handler only stores to an atomic, which is
        // async-signal-safe.
        unsafe {
            let _ = sigaction(sig, &action);
        }
    }
}

/// Whether a stop was asked for since [`install`].
pub fn requested() -> bool {
    REQUESTED.load(Ordering::SeqCst)
}
