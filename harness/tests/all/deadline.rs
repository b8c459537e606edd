//! The `deadline` check judges as strictly as the harness counts, proved on
//! the real deployable: a hanging binding, whose requests wait for the
//! runtime's real 500 ms deadline in a real workerd, while the harness
//! probes the load. The spec's claim, 500 ms, passes; a claim the real
//! waits break fails either way: 167 ms (the waits are three times the
//! claim) and 1000 ms (they are half of it).
//!
//! Why 167 stands for a deadline regressed to 1 s: a waiting request takes
//! its deadline plus the machine's delay `o`, and fails past `claim + b +
//! claim / 2`, where `b` is the load probes' latest delay. A real 1000 ms
//! deadline against the claim 500 fails when `1000 + o > 750 + b`, that is
//! `o - b > -250`; the real 500 against the claim 167 fails when
//! `500 + o > 250 + b`: the same `o - b > -250`. So this test fails to fail
//! exactly when, on this machine at this moment, a 1 s deadline would pass.
//! The same arithmetic on timings recorded under load: `judge::scenario`'s tests.

use crate::common;

use std::path::Path;

use harness::commands::report::TrialOutcome;
use harness::commands::suite::{self, Trial};

/// A scenario on a hanging binding whose first three requests wait for the
/// deadline, which it claims is `ms`.
fn claiming(ms: u64) -> String {
    format!(
        r#"[[scenario]]
name = "claims {ms} ms"
application_inline = '''{app}'''
bindings = {{ LIMITS_120_PER_60S = "hanging" }}

[[scenario.steps]]
send = {{ requests = 1, path = "/health" }}

[[scenario.steps]]
send = {{ requests = 13, address = "192.0.2.80", concurrency = 3 }}
expect = {{ statuses = "13 x 200", deadline = {{ ms = {ms}, waiting = 3 }} }}

[[scenario.expect.fallback]]
binding = "LIMITS_120_PER_60S"
reason = "timed_out"

"#,
        app = common::WORKERS_API
    )
}

#[test]
fn the_real_deadline_passes_its_claim_and_fails_a_third_or_twice_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let text: String = [500, 167, 1000].map(claiming).concat();
    std::fs::write(dir.path().join("deadline.toml"), text).expect("write");
    let suite = suite::discover(dir.path(), Path::new("d")).expect("scenarios");
    let env = suite::prepare_environment().unwrap_or_else(|e| panic!("{e}"));
    let outcomes: Vec<TrialOutcome> = std::thread::scope(|scope| {
        let runs: Vec<_> = suite
            .trials
            .iter()
            .map(|trial| {
                assert!(matches!(trial, Trial::Scenario(_)), "{trial:?}");
                scope.spawn(|| suite.run(trial, &env))
            })
            .collect();
        runs.into_iter()
            .map(|run| run.join().expect("a trial ran"))
            .collect()
    });
    let [claims_500, claims_167, claims_1000] = &outcomes[..] else {
        panic!("three trials: {outcomes:#?}");
    };
    assert!(claims_500.passed, "{}", claims_500.message);
    // Each of the three waits breaks the claim, on the side it should; the
    // requests after them may break the claim 167 too (each must take less
    // than 162 ms, which a loaded machine need not grant), never the claim 1000.
    for (outcome, says, never) in [
        (
            claims_167,
            "waited no longer than the 167 ms deadline",
            "waited for the",
        ),
        (
            claims_1000,
            "waited for the 1000 ms deadline",
            "waited no longer",
        ),
    ] {
        assert!(!outcome.passed, "{} passed", outcome.name);
        assert_eq!(
            outcome.message.matches(says).count(),
            3,
            "{}",
            outcome.message
        );
        assert!(!outcome.message.contains(never), "{}", outcome.message);
    }
    assert!(
        !claims_1000.message.contains("(only the first 3 do)"),
        "only the first three waited: {}",
        claims_1000.message
    );
}
