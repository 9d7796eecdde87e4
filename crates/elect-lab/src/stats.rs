//! Summaries of measured times.

use std::time::Duration;

use serde::Serialize;

/// p50, p99, max and mean of a set of samples (nearest rank).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Summary {
    /// Median.
    pub p50: Duration,
    /// 99th percentile: the largest sample with fewer than 100 samples.
    pub p99: Duration,
    /// Largest.
    pub max: Duration,
    /// Arithmetic mean.
    pub mean: Duration,
}

impl Summary {
    /// The summary of `samples`; `None` when there are none.
    pub fn of(samples: &[Duration]) -> Option<Summary> {
        if samples.is_empty() {
            return None;
        }
        let mut s = samples.to_vec();
        s.sort();
        let rank = |p: f64| s[((p * s.len() as f64).ceil() as usize).clamp(1, s.len()) - 1];
        Some(Summary {
            p50: rank(0.50),
            p99: rank(0.99),
            max: s[s.len() - 1],
            mean: s.iter().sum::<Duration>() / s.len() as u32,
        })
    }
}

/// Milliseconds as a float, for tables and JSON.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let samples: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        let s = Summary::of(&samples).unwrap();
        assert_eq!(s.p50, Duration::from_millis(50));
        assert_eq!(s.p99, Duration::from_millis(99));
        assert_eq!(s.max, Duration::from_millis(100));
        assert_eq!(s.mean, Duration::from_micros(50_500));
        let one = Summary::of(&[Duration::from_millis(7)]).unwrap();
        assert_eq!((one.p50, one.p99, one.max), (one.mean, one.mean, one.mean));
        assert_eq!(Summary::of(&[]), None);
    }
}
