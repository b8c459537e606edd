//! `cargo test -p harness`: every scenario in `scenarios/` as its own named
//! trial (`FILE::NAME`), each against its own workerd. Slow scenarios are
//! ignored unless `--include-ignored`. Runs under cargo-nextest too.
//!
//! As `harness run` does: [`suite::DEFAULT_JOBS`] trials at once unless
//! `--test-threads` says otherwise, the longest first (by how long each took
//! when it last ran, kept in [`TrialDurations`]).

use std::process::ExitCode;
use std::sync::{Mutex, OnceLock};

use harness::commands::report::TrialOutcome;
use harness::commands::suite::{self, TrialDurations};
use harness::engine::Environment;
use harness::judge::expectations::Verdict;
use harness::world::paths::{SCENARIOS_SHOWN_AS, scenarios_dir};
use libtest_mimic::{Arguments, Failed};

fn main() -> ExitCode {
    let mut args = Arguments::from_args();
    args.test_threads = args.test_threads.or(Some(suite::DEFAULT_JOBS));
    let suite = match suite::discover(&scenarios_dir(), std::path::Path::new(SCENARIOS_SHOWN_AS)) {
        Ok(suite) => std::sync::Arc::new(suite),
        Err(e) => {
            eprintln!("cannot read {}: {e}", scenarios_dir().display());
            return ExitCode::FAILURE;
        }
    };
    // Built on the first trial that runs, so `--list` stays instant.
    static ENVIRONMENT: OnceLock<Result<Environment, String>> = OnceLock::new();
    static OUTCOMES: Mutex<Vec<TrialOutcome>> = Mutex::new(Vec::new());
    let mut durations = TrialDurations::load();
    let tests = durations
        .longest_first(suite.trials.iter().collect())
        .into_iter()
        .cloned()
        .map(|trial| {
            let suite = suite.clone();
            let name = trial.name().to_owned();
            let ignored = trial.ignored();
            libtest_mimic::Trial::test(name, move || {
                let env = ENVIRONMENT
                    .get_or_init(|| suite::prepare_environment().map_err(|e| e.to_string()))
                    .as_ref()
                    .map_err(|e| Failed::from(format!("the harness could not start: {e}")))?;
                let outcome = suite.run(&trial, env);
                let verdict = judge(&outcome);
                if let Ok(mut outcomes) = OUTCOMES.lock() {
                    outcomes.push(outcome);
                }
                verdict
            })
            .with_ignored_flag(ignored)
        })
        .collect();
    // Not `Conclusion::exit()`: it calls process::exit, and destructors
    // (which kill the workerd processes) would never run.
    let conclusion = libtest_mimic::run(&args, tests);
    if let Ok(outcomes) = OUTCOMES.lock()
        && !outcomes.is_empty()
    {
        durations.record(&outcomes);
        // Only an order for the next run: losing it costs nothing else.
        let _ = durations.save();
    }
    conclusion.exit_code()
}

/// A listed failure that fails is fine; a listed one that passes is a failure.
fn judge(outcome: &TrialOutcome) -> Result<(), Failed> {
    match &outcome.verdict {
        Verdict::Passed => Ok(()),
        Verdict::ExpectedFailure { reason } => {
            eprintln!("expected failure: {} ({reason})", outcome.name);
            Ok(())
        }
        Verdict::Failed => Err(outcome.message.clone().into()),
        Verdict::UnexpectedPass { reason } => Err(format!(
            "unexpected pass: listed in scenarios/expectations.toml as failing ({reason}), but it passed; \
             remove the entry"
        )
        .into()),
    }
}
