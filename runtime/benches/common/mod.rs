//! What the runtime's hand-timed benchmarks (`hostile`, `threads`) share:
//! their command line and the statistics of their rounds. Each bench uses
//! what it needs of it.
#![allow(dead_code)]

/// A run's tables (`cargo bench --bench NAME -- FILTER`: a table runs when
/// its name contains a filter, or with none) and its rounds' number and
/// length (`BENCH_<NAME>_ROUNDS`, `BENCH_<NAME>_SECONDS`).
pub struct Run {
    filter: Vec<String>,
    pub rounds: usize,
    pub seconds: f64,
}

impl Run {
    pub fn from_env(name: &str, seconds: f64) -> Run {
        // `cargo bench` passes `--bench`.
        let filter = std::env::args()
            .skip(1)
            .filter(|a| !a.starts_with("--"))
            .collect();
        let var = |what: &str| std::env::var(format!("BENCH_{name}_{what}")).ok();
        Run {
            filter,
            rounds: var("ROUNDS").and_then(|v| v.parse().ok()).unwrap_or(7),
            seconds: var("SECONDS")
                .and_then(|v| v.parse().ok())
                .unwrap_or(seconds),
        }
    }

    pub fn wants(&self, table: &str) -> bool {
        self.filter.is_empty() || self.filter.iter().any(|f| table.contains(f.as_str()))
    }
}

pub fn median(values: &[f64]) -> f64 {
    let mut values = values.to_vec();
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// The least and the greatest of the rounds.
pub fn range(values: &[f64]) -> (f64, f64) {
    (
        values.iter().copied().fold(f64::MAX, f64::min),
        values.iter().copied().fold(0.0, f64::max),
    )
}
