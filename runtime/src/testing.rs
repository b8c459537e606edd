//! What the harness's Worker fixtures count beside the gate (the
//! production gate counts no health checks): one tally per isolate, which
//! their health route reports. Only with the `testing` feature.

use std::cell::Cell;

thread_local! {
    /// This isolate's health checks answered and requests refused.
    static TALLY: (Cell<u64>, Cell<u64>) = const { (Cell::new(0), Cell::new(0)) };
}

/// Counts a refused request (a 429, or an API request to a deployable serving none).
pub fn tally_refused() {
    TALLY.with(|(_, refused)| refused.set(refused.get() + 1));
}

/// Counts a health check, and returns the health checks and refusals to report.
pub fn tally_health_check() -> (u64, u64) {
    TALLY.with(|(health_checks, refused)| {
        health_checks.set(health_checks.get() + 1);
        (health_checks.get(), refused.get())
    })
}
