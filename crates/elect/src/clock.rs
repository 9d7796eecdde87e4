//! The clock every leadership deadline is measured on: CLOCK_BOOTTIME.
//!
//! A deadline stands for a moment on the servers' clocks (the lease's or
//! the session's expiry, a Raft follower's election timeout) and those
//! clocks keep running while this machine is suspended. CLOCK_MONOTONIC,
//! which `std::time::Instant` and tokio's timers use, stops during a
//! suspend: a laptop or a VM resumed after a suspend longer than the TTL
//! would still see time left on its deadline and believe it leads until a
//! renewal failed, while a successor already led. CLOCK_BOOTTIME counts
//! the suspend, so on resume a deadline that passed meanwhile is past at
//! once.
//!
//! The rule, kept by the types: every instant a deadline is derived from
//! (a renewal's or a sync's send time, the Raft core's "now") and every
//! deadline is a [`BootInstant`]; every wait for a deadline is
//! [`sleep_until`] (or a [`BootTimer`]), a timerfd on CLOCK_BOOTTIME with an
//! absolute expiry, which the kernel fires on resume when the expiry passed
//! during the suspend. The watchdog reads the same clock, so the instant
//! crosses the process boundary as plain nanoseconds
//! ([`BootInstant::as_nanos`]).
//!
//! What stays on tokio's monotonic clock: backoffs, request timeouts and
//! the schedule of renewals. After a resume they run late, which costs
//! time but never safety: the deadline is what stops a leader.

use std::fmt;
use std::io;
use std::ops::{Add, Sub};
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::time::Duration;

use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
use nix::time::{ClockId as TimeClockId, clock_gettime};
use tokio::io::unix::AsyncFd;

/// The longest duration accepted for a connect timeout, a Raft TTL and a
/// `run` grace: anything longer is a mistake, and deadlines on this clock
/// computed from it would overflow.
pub const MAX_DURATION: Duration = Duration::from_secs(24 * 3600);

/// An instant on CLOCK_BOOTTIME: monotonic, and counting through a
/// suspend. Like [`std::time::Instant`], subtracting a later instant from
/// an earlier one gives zero.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BootInstant(Duration);

impl BootInstant {
    /// The boot clock now.
    pub fn now() -> Self {
        let t = clock_gettime(TimeClockId::CLOCK_BOOTTIME).expect("CLOCK_BOOTTIME");
        Self(Duration::new(t.tv_sec() as u64, t.tv_nsec() as u32))
    }

    /// The instant this many nanoseconds after boot: how it travels to the
    /// watchdog.
    pub const fn from_nanos(nanos: u64) -> Self {
        Self(Duration::from_nanos(nanos))
    }

    /// Nanoseconds since boot.
    pub fn as_nanos(self) -> u64 {
        u64::try_from(self.0.as_nanos()).unwrap_or(u64::MAX)
    }

    /// Time since `earlier`, zero if `earlier` is later.
    pub fn saturating_duration_since(self, earlier: BootInstant) -> Duration {
        self.0.saturating_sub(earlier.0)
    }

    /// Time from this instant to now on the boot clock.
    pub fn elapsed(self) -> Duration {
        Self::now().saturating_duration_since(self)
    }

    /// This instant moved back by `d`, or the boot itself.
    pub fn saturating_sub(self, d: Duration) -> Self {
        Self(self.0.saturating_sub(d))
    }

    /// The tokio instant for the same moment, as far as the monotonic
    /// clock can tell now (they differ only by suspends still to come):
    /// for APIs that take tokio's instants, never for deadlines.
    pub fn to_tokio(self) -> tokio::time::Instant {
        let (boot_now, tokio_now) = (Self::now(), tokio::time::Instant::now());
        if self >= boot_now {
            tokio_now + (self - boot_now)
        } else {
            tokio_now.checked_sub(boot_now - self).unwrap_or(tokio_now)
        }
    }
}

impl Add<Duration> for BootInstant {
    type Output = BootInstant;
    fn add(self, d: Duration) -> BootInstant {
        BootInstant(self.0 + d)
    }
}

impl Sub<Duration> for BootInstant {
    type Output = BootInstant;
    fn sub(self, d: Duration) -> BootInstant {
        BootInstant(self.0 - d)
    }
}

impl Sub<BootInstant> for BootInstant {
    type Output = Duration;
    fn sub(self, earlier: BootInstant) -> Duration {
        self.saturating_duration_since(earlier)
    }
}

impl fmt::Debug for BootInstant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "boot+{:?}", self.0)
    }
}

/// Waits until the boot clock reads `at`, however long the machine is
/// suspended meanwhile.
///
/// # Cancel safety
/// Cancel safe, like tokio's sleeps.
pub async fn sleep_until(at: BootInstant) {
    if BootInstant::now() >= at {
        return;
    }
    BootTimer::new().sleep_until(at).await;
}

/// A timer on the boot clock to arm again and again, for loops that wait
/// for a new instant on every turn: one file descriptor for the loop's life
/// instead of one per wait.
pub struct BootTimer {
    /// `None` when the kernel refused a timerfd: then tokio's sleeps stand
    /// in, re-checking the boot clock often.
    fd: Option<AsyncFd<TimerHandle>>,
}

impl Default for BootTimer {
    fn default() -> Self {
        Self::new()
    }
}

/// The timerfd, in the shape tokio's `AsyncFd` takes.
struct TimerHandle(TimerFd);

impl AsRawFd for TimerHandle {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

impl BootTimer {
    /// A timerfd on CLOCK_BOOTTIME, registered with tokio's reactor (the
    /// caller runs in a tokio runtime with I/O enabled).
    pub fn new() -> Self {
        let timer = TimerFd::new(
            ClockId::CLOCK_BOOTTIME,
            TimerFlags::TFD_NONBLOCK | TimerFlags::TFD_CLOEXEC,
        );
        // SAFETY: the handle owns its timerfd, which is closed only when
        // the handle is dropped, after `AsyncFd` deregistered it.
        let fd = timer
            .ok()
            .and_then(|t| unsafe { AsyncFd::register(TimerHandle(t)) }.ok());
        if fd.is_none() {
            tracing::warn!("no timerfd on CLOCK_BOOTTIME; deadlines are polled every 20 ms");
        }
        Self { fd }
    }

    /// Waits until the boot clock reads `at`.
    ///
    /// # Cancel safety
    /// Cancel safe: a wait dropped before it fired leaves the timer to be
    /// armed anew.
    pub async fn sleep_until(&mut self, at: BootInstant) {
        if BootInstant::now() >= at {
            return;
        }
        // An absolute expiry: the kernel compares it with the boot clock
        // itself, so a suspend that passes it fires the timer on resume.
        // (A zero expiry would disarm the timer; boot + 0 is always past.)
        let expiry = Expiration::OneShot(TimeSpec::from_duration(at.0));
        let Some(fd) = self.fd.as_ref().filter(|fd| {
            fd.get_ref()
                .0
                .set(expiry, TimerSetTimeFlags::TFD_TIMER_ABSTIME)
                .is_ok()
        }) else {
            return poll_until(at).await;
        };
        while BootInstant::now() < at {
            let Ok(mut ready) = fd.readable().await else {
                return poll_until(at).await;
            };
            // Reading clears the expiry count; an early wake-up (the
            // readiness of an earlier arming) reads EAGAIN and waits again.
            match ready.try_io(|fd| {
                fd.get_ref().0.wait().map_err(|errno| match errno {
                    nix::errno::Errno::EAGAIN => io::ErrorKind::WouldBlock.into(),
                    e => io::Error::from(e),
                })
            }) {
                Ok(Ok(())) | Err(_) => {}
                Ok(Err(_)) => return poll_until(at).await,
            }
        }
    }
}

/// The fallback when no timerfd can be had: tokio's sleeps, short enough
/// that a resume is noticed within one of them.
async fn poll_until(at: BootInstant) {
    const RECHECK: Duration = Duration::from_millis(20);
    loop {
        let now = BootInstant::now();
        if now >= at {
            return;
        }
        tokio::time::sleep((at - now).min(RECHECK)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates_like_std_instants() {
        let t = BootInstant::from_nanos(5_000_000_000);
        assert_eq!((t + Duration::from_secs(1)) - t, Duration::from_secs(1));
        assert_eq!(t - (t + Duration::from_secs(1)), Duration::ZERO);
        assert_eq!(t.saturating_sub(Duration::from_secs(10)).as_nanos(), 0);
        assert_eq!(BootInstant::from_nanos(t.as_nanos()), t);
    }

    #[tokio::test]
    async fn sleeps_end_at_the_instant_on_the_boot_clock() {
        let start = BootInstant::now();
        let at = start + Duration::from_millis(60);
        sleep_until(at).await;
        assert!(BootInstant::now() >= at);

        let mut timer = BootTimer::new();
        assert!(timer.fd.is_some(), "a timerfd on CLOCK_BOOTTIME");
        for step in [30, 10, 40] {
            let at = BootInstant::now() + Duration::from_millis(step);
            timer.sleep_until(at).await;
            assert!(BootInstant::now() >= at);
        }
        // A wait dropped unfired, then one already past: both behave.
        let far = BootInstant::now() + Duration::from_secs(60);
        let dropped = tokio::time::timeout(Duration::from_millis(20), timer.sleep_until(far)).await;
        assert!(dropped.is_err());
        let before = BootInstant::now();
        timer.sleep_until(before).await;
        timer.sleep_until(before + Duration::from_millis(15)).await;
        assert!(BootInstant::now() >= before + Duration::from_millis(15));
        assert!(start.elapsed() < Duration::from_secs(30));
    }

    #[test]
    fn the_boot_clock_agrees_with_the_monotonic_one_while_awake() {
        let (boot, mono) = (BootInstant::now(), std::time::Instant::now());
        std::thread::sleep(Duration::from_millis(30));
        let (db, dm) = (boot.elapsed(), mono.elapsed());
        assert!(
            db.abs_diff(dm) < Duration::from_millis(5),
            "{db:?} vs {dm:?}"
        );
    }
}
