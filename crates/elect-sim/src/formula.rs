//! The textbook's message counts, for each algorithm and case where there
//! is a closed form: what `elect simulate`'s chart draws beside each
//! measured curve, and what the tests hold the simulator to.

use crate::run::{Algorithm, Case};

/// The textbook's message count (Elected rounds included; bounds for
/// Hirschberg-Sinclair and Peterson), where there is one.
pub fn formula(algorithm: Algorithm, case: Case, n: f64) -> Option<f64> {
    let log2 = n.log2();
    let harmonic: f64 = (1..=n as u64).map(|k| 1.0 / k as f64).sum();
    Some(match (algorithm, case) {
        (Algorithm::Ring, Case::Worst) => 3.0 * n - 1.0,
        (Algorithm::Ring, Case::Best) => 2.0 * n,
        (Algorithm::ChangRoberts, Case::Worst) => n * (n + 1.0) / 2.0 + n,
        (Algorithm::ChangRoberts, Case::Best) => 2.0 * n - 1.0 + n,
        (Algorithm::ChangRoberts, Case::Random) => n * harmonic + n,
        (Algorithm::HirschbergSinclair, _) => 8.0 * n * (1.0 + log2.ceil()) + n,
        (Algorithm::Peterson, _) => 2.0 * n * (log2.floor() + 1.0) + 2.0 * n,
        (Algorithm::Bully, Case::Worst) => {
            n * (n - 1.0) / 2.0 + (n - 1.0) * (n - 2.0) / 2.0 + n - 2.0
        }
        (Algorithm::Bully, Case::Best) => n - 2.0,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formulas_match_the_measured_cases() {
        use crate::run::{Options, simulate};
        for algorithm in [Algorithm::Ring, Algorithm::ChangRoberts, Algorithm::Bully] {
            for case in [Case::Worst, Case::Best] {
                for n in [4usize, 16, 64] {
                    let r = simulate(&Options::new(algorithm, n, case));
                    let f = formula(algorithm, case, n as f64).unwrap();
                    assert_eq!(r.messages, f, "{algorithm:?} {case:?} n={n}");
                }
            }
        }
    }
}
