//! `cargo test -p harness`: every scenario in `scenarios/` as its own named
//! trial (`FILE::NAME`), each against its own workerd. Slow scenarios are
//! ignored unless `--include-ignored`. Runs under cargo-nextest too.

use std::process::ExitCode;
use std::sync::OnceLock;

use harness::engine::Environment;
use harness::expectations::Verdict;
use harness::paths::{SCENARIOS_SHOWN_AS, scenarios_dir};
use harness::suite::{self, Suite, Trial};
use libtest_mimic::{Arguments, Failed};

fn main() -> ExitCode {
    let args = Arguments::from_args();
    let suite = match suite::discover(&scenarios_dir(), std::path::Path::new(SCENARIOS_SHOWN_AS)) {
        Ok(suite) => std::sync::Arc::new(suite),
        Err(e) => {
            eprintln!("cannot read {}: {e}", scenarios_dir().display());
            return ExitCode::FAILURE;
        }
    };
    // Built on the first trial that runs, so `--list` stays instant.
    static ENVIRONMENT: OnceLock<Result<Environment, String>> = OnceLock::new();
    let tests = suite
        .trials
        .iter()
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
                run(&suite, &trial, env)
            })
            .with_ignored_flag(ignored)
        })
        .collect();
    // Not `Conclusion::exit()`: it calls process::exit, and destructors
    // (which kill the workerd processes) would never run.
    libtest_mimic::run(&args, tests).exit_code()
}

/// A listed failure that fails is fine; a listed one that passes is a failure.
fn run(suite: &Suite, trial: &Trial, env: &Environment) -> Result<(), Failed> {
    let outcome = suite.run(trial, env);
    match outcome.verdict {
        Verdict::Passed => Ok(()),
        Verdict::ExpectedFailure { reason } => {
            eprintln!("expected failure: {} ({reason})", outcome.name);
            Ok(())
        }
        Verdict::Failed => Err(outcome.message.into()),
        Verdict::UnexpectedPass { reason } => Err(format!(
            "unexpected pass: listed in scenarios/expectations.toml as failing ({reason}), but it passed; \
             remove the entry"
        )
        .into()),
    }
}
