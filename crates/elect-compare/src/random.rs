//! The little randomness compare needs: where in a renewal cycle a leader
//! dies, which candidate leaves. A seeded xorshift, so a run's choices
//! can be told apart from the servers' own timing; nothing here needs
//! more.

use std::time::Duration;

/// xorshift64.
pub(crate) struct Xorshift(u64);

impl Xorshift {
    /// From `seed` (any value; 0 is made 1, xorshift's one fixed point).
    pub(crate) fn seeded(seed: u64) -> Xorshift {
        Xorshift(seed | 1)
    }

    /// Seeded from the clock: for floors, whose samples need only be
    /// spread, not repeated.
    pub(crate) fn from_clock() -> Xorshift {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.subsec_nanos() as u64);
        Xorshift::seeded(nanos)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number below `n` (`n` > 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// An instant within `span`, in thousandths of it: where in a renewal
    /// cycle (or a TTL, which holds whole cycles) a leader dies.
    pub(crate) fn within(&mut self, span: Duration) -> Duration {
        span.mul_f64(self.below(1000) as f64 / 1000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_spread_over_the_span() {
        let mut rng = Xorshift::seeded(0);
        let span = Duration::from_secs(2);
        let drawn: Vec<Duration> = (0..200).map(|_| rng.within(span)).collect();
        assert!(drawn.iter().all(|&d| d < span));
        // Both halves of the span are drawn from.
        assert!(drawn.iter().any(|&d| d < span / 2));
        assert!(drawn.iter().any(|&d| d >= span / 2));
    }
}
