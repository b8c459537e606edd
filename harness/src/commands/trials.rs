//! The scenario corpus as libtest-mimic trials, for the test targets:
//! `tests/scenarios.rs` (every scenario, on the Worker `HARNESS_WORKER`
//! names) and `tests/workers_rs.rs` (every scenario that runs a Worker, on
//! each workers-rs Worker). Each scenario is its own named trial (`FILE::NAME`,
//! or `WORKER::FILE::NAME` on several Workers),
//! [`suite::DEFAULT_JOBS`] at once unless `--test-threads` says otherwise,
//! the longest first (by how long each took when it last ran, kept in
//! [`TrialDurations`]); slow scenarios are ignored unless
//! `--include-ignored`. They run under cargo-nextest too.

use std::process::ExitCode;
use std::sync::{Arc, Mutex, OnceLock};

use libtest_mimic::{Arguments, Failed};

use crate::commands::report::TrialOutcome;
use crate::commands::suite::{self, Trial, TrialDurations};
use crate::engine::Environment;
use crate::judge::expected_failures::Verdict;
use crate::world::paths::{SCENARIOS_SHOWN_AS, scenarios_dir};
use crate::world::wasm::WorkerChoice;
use crate::world::workerd::WorkerdChoice;
use crate::world::workerd::reference::CoreChoice;

/// Which scenarios a test target runs, on which Worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Corpus {
    /// Every scenario, on the Worker the environment chooses (`HARNESS_WORKER`).
    All,
    /// The scenarios that run a Worker (not the native ones, nor those that
    /// only expect diagnostics), on each of these.
    WorkersOn(&'static [WorkerChoice]),
}

/// Runs the corpus as the test target's trials; the target's exit code.
pub fn main(corpus: Corpus) -> ExitCode {
    let mut args = Arguments::from_args();
    args.test_threads = args.test_threads.or(Some(suite::DEFAULT_JOBS));
    let suite = match suite::discover(&scenarios_dir(), std::path::Path::new(SCENARIOS_SHOWN_AS)) {
        Ok(suite) => Arc::new(suite),
        Err(e) => {
            eprintln!("cannot read {}: {e}", scenarios_dir().display());
            return ExitCode::FAILURE;
        }
    };
    // Built on the first trial that runs, so `--list` stays instant: one
    // environment per Worker (by its place in `WorkerChoice::ALL`).
    static ENVIRONMENTS: [OnceLock<Result<Environment, String>>; WorkerChoice::ALL.len()] =
        [const { OnceLock::new() }; WorkerChoice::ALL.len()];
    static OUTCOMES: Mutex<Vec<TrialOutcome>> = Mutex::new(Vec::new());
    let runs: Vec<(Option<WorkerChoice>, String)> = match corpus {
        Corpus::All => vec![(None, String::new())],
        Corpus::WorkersOn(workers) => workers
            .iter()
            .map(|w| (Some(*w), format!("{}::", w.name())))
            .collect(),
    };
    let mut durations = TrialDurations::load();
    let mut tests = Vec::new();
    for (worker, prefix) in runs {
        let trials = suite.trials.iter().filter(|t| in_corpus(corpus, t));
        for trial in durations.longest_first(trials.collect()) {
            let suite = suite.clone();
            let trial = trial.clone();
            let ignored = trial.ignored();
            let name = format!("{prefix}{}", trial.name());
            tests.push(
                libtest_mimic::Trial::test(name, move || {
                    let env = environment(&ENVIRONMENTS, worker)
                        .map_err(|e| Failed::from(format!("the harness could not start: {e}")))?;
                    let outcome = suite.run(&trial, env);
                    let verdict = judge(&outcome);
                    if let Ok(mut outcomes) = OUTCOMES.lock() {
                        outcomes.push(outcome);
                    }
                    verdict
                })
                .with_ignored_flag(ignored),
            );
        }
    }
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

/// The environment of `worker` (the one the environment chooses for
/// `None`), prepared the first time a trial asks.
fn environment(
    environments: &'static [OnceLock<Result<Environment, String>>],
    worker: Option<WorkerChoice>,
) -> Result<&'static Environment, &'static String> {
    let slot = worker.map_or(0, |w| {
        WorkerChoice::ALL
            .iter()
            .position(|x| *x == w)
            .unwrap_or_default()
    });
    let prepare = || match worker {
        None => suite::prepare_environment(),
        Some(worker) => CoreChoice::from_env()
            .map_err(suite::EnvironmentError::from)
            .and_then(|core| {
                suite::prepare_environment_with(&WorkerdChoice::from_env(), core, worker)
            }),
    };
    environments[slot]
        .get_or_init(|| prepare().map_err(|e| e.to_string()))
        .as_ref()
}

/// Whether `trial` is one of `corpus`'s.
fn in_corpus(corpus: Corpus, trial: &Trial) -> bool {
    match (corpus, trial) {
        (Corpus::All, _) => true,
        (Corpus::WorkersOn(_), Trial::Scenario(prepared)) => {
            !prepared.runs_natively()
                && prepared
                    .scenario
                    .scenario
                    .get_ref()
                    .expect_diagnostics
                    .is_none()
        }
        // The scenarios target reports a file that cannot be read.
        (Corpus::WorkersOn(_), Trial::Malformed { .. }) => false,
    }
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
            "unexpected pass: listed in scenarios/expected-failures.toml as failing ({reason}), but it passed; \
             remove the entry"
        )
        .into()),
    }
}
