//! The statistics every figure of the harness is taken with: the scenario
//! checks' `latency` bounds, the report's p50 and p99 columns, and the
//! benchmarks' tables, so a p99 means the same wherever it is printed.

/// The nearest-rank `percent`-th percentile of `sorted` (ascending): the
/// smallest value that at least `percent` % of the values are at or below,
/// always one of the values; `None` for no values.
///
/// Nearest rank, not interpolation, because a scenario's `p99_ms` bound
/// promises that 99 % of its requests took at most that long: the value
/// returned is a latency a request really had, and at least 99 % of the
/// requests had one no longer (an interpolated figure can fall between two
/// requests and claim less than was seen).
pub fn percentile<T: Copy>(sorted: &[T], percent: u32) -> Option<T> {
    let n = sorted.len();
    let rank = (percent as usize * n).div_ceil(100).clamp(1, n.max(1));
    sorted.get(rank - 1).copied()
}

/// The median of a few figures (one per round of a benchmark): the middle
/// one, or the mean of the two middle ones; NaN for none.
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_nearest_rank() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 50), Some(50));
        assert_eq!(percentile(&v, 99), Some(99));
        assert_eq!(percentile(&v, 100), Some(100));
        assert_eq!(percentile(&v, 0), Some(1));
        assert_eq!(percentile(&[7], 99), Some(7));
        assert_eq!(percentile::<u64>(&[], 50), None);
        // Of 1000 values, the 990th is the p99: 990 of them are at or below it.
        let v: Vec<u32> = (1..=1000).collect();
        assert_eq!(percentile(&v, 99), Some(990));
        // Of an even count, p50 is the lower middle value, one really seen.
        assert_eq!(percentile(&[1, 2, 3, 4], 50), Some(2));
    }

    #[test]
    fn a_median_is_the_middle_or_the_mean_of_the_two_middles() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&[]).is_nan());
    }
}
