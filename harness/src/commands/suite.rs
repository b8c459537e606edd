//! The scenarios of a directory as trials, the expected failures that apply
//! to them, and the environment they run in.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::commands::report::{self, TrialOutcome};
use crate::commands::trace::Trace;
use crate::engine::{self, Environment};
use crate::judge::expected_failures::ExpectedFailures;
use crate::judge::scenario::{Failure, judge};
use crate::language::scenario::{self, EXPECTED_FAILURES_FILE, Prepared};
use crate::world::wasm::{self, UnknownWorker, WorkerChoice};
use crate::world::workerd::reference::{
    CoreChoice, CountingCore, MINIFLARE_VERSION, ReferenceError,
};
use crate::world::workerd::{WorkerdChoice, find_workerd};

/// Scenarios run at once by default (`harness run --jobs`, and the
/// scenarios test target's `--test-threads`): more than the 2 cores of the
/// machines this runs on, because a scenario spends much of its time
/// waiting (500 ms deadlines, probes, process starts) rather than
/// computing; on 2 cores the default suite took a median of ~10 s with 4
/// at once against ~14 s with 2, and 6 gained nothing clear over 4
/// (BENCHMARKS-log.md, "the suite's wall time").
pub const DEFAULT_JOBS: usize = 4;

/// One trial: a scenario ready to run, or a file that could not be read
/// (a failed trial named after the file, never a silent skip).
#[derive(Debug, Clone)]
pub enum Trial {
    /// A scenario, ready to run.
    Scenario(Prepared),
    /// A file that could not be read: a failed trial.
    Malformed {
        /// `FILE::(file)`.
        name: String,
        /// Why, starting with `file:line:col`.
        error: String,
    },
}

impl Trial {
    /// Its name, `DIR/FILE::NAME`: what filters match and reports show.
    pub fn name(&self) -> &str {
        match self {
            Trial::Scenario(p) => &p.trial_name,
            Trial::Malformed { name, .. } => name,
        }
    }

    /// Slow scenarios are ignored unless asked for.
    pub fn ignored(&self) -> bool {
        matches!(self, Trial::Scenario(p) if p.ignored)
    }
}

/// The trials of one scenarios directory and its expected failures.
#[derive(Debug, Clone)]
pub struct Suite {
    /// Every scenario of the directory's files, and each file that could not be read.
    pub trials: Vec<Trial>,
    /// The expected failures that apply to them.
    pub expectations: ExpectedFailures,
}

impl Suite {
    /// Runs one trial and judges it, expected failures included.
    pub fn run(&self, trial: &Trial, env: &Environment) -> TrialOutcome {
        let mut outcome = match trial {
            Trial::Scenario(prepared) => run_trial(env, prepared),
            Trial::Malformed { name, error } => report::malformed(name, error),
        };
        outcome.verdict =
            self.expectations
                .verdict(&outcome.name, &env.workerd.version, outcome.passed);
        outcome
    }
}

/// Runs one prepared scenario and judges it.
fn run_trial(env: &Environment, prepared: &Prepared) -> TrialOutcome {
    let (observation, aborted) = match engine::run(env, prepared) {
        Ok(observation) => (observation, None),
        Err(aborted) => {
            let aborted = *aborted;
            (aborted.observation, Some(aborted.error))
        }
    };
    let mut failures: Vec<String> = Vec::new();
    let mut failed_steps = Vec::new();
    if let Some(error) = &aborted {
        let place = prepared.scenario.place(prepared.scenario.scenario.span());
        failures.push(format!(
            "error: the scenario could not run to the end\n  --> {place}\n   | {error}"
        ));
    } else {
        let judged = judge(prepared, &observation);
        failed_steps.extend(judged.iter().filter_map(|f| f.step));
        failures.extend(judged.iter().map(Failure::to_string));
    }
    let mut outcome = report::outcome(&prepared.trial_name, &observation, failures);
    outcome.trace = Trace::of(prepared, &observation);
    outcome.trace.mark_failed_steps(failed_steps);
    outcome
}

/// What a run of a suite gave.
#[derive(Debug, Clone)]
pub struct RunResult {
    /// Sorted by name.
    pub outcomes: Vec<TrialOutcome>,
    /// The trials not run: slow ones, unless included.
    pub skipped: usize,
}

impl Suite {
    /// Runs the trials whose names contain `filter` (all, when `None`),
    /// `jobs` at a time, printing each verdict to stderr as it comes.
    ///
    /// The longest trials start first (as long as they took in the last run
    /// that ran them, [`TrialDurations`]), so the run does not end waiting
    /// for one long scenario started last: the Redis Cluster's, for one,
    /// takes over 2 s however idle the machine is.
    pub fn run_all(
        &self,
        env: &Environment,
        filter: Option<&str>,
        include_slow: bool,
        jobs: usize,
    ) -> RunResult {
        let (selected, skipped) = self.select(filter, include_slow);
        let mut durations = TrialDurations::load();
        let selected = durations.longest_first(selected);
        let queue = std::sync::Mutex::new(selected.into_iter());
        let outcomes = std::sync::Mutex::new(Vec::new());
        std::thread::scope(|scope| {
            for _ in 0..jobs.max(1) {
                scope.spawn(|| {
                    while let Some(trial) = queue.lock().ok().and_then(|mut q| q.next()) {
                        let outcome = self.run(trial, env);
                        eprintln!("{} {}", outcome.verdict.label(), outcome.name);
                        if let Ok(mut all) = outcomes.lock() {
                            all.push(outcome);
                        }
                    }
                });
            }
        });
        let mut outcomes = outcomes.into_inner().unwrap_or_default();
        outcomes.sort_by(|a, b| a.name.cmp(&b.name));
        durations.record(&outcomes);
        if let Err(error) = durations.save() {
            eprintln!("harness: could not keep the trials' durations for the next run: {error}");
        }
        RunResult {
            outcomes,
            skipped: skipped.len(),
        }
    }
}

impl Suite {
    /// The trials whose names contain `filter` (all, when `None`), and those
    /// of them left out for being slow, unless `include_slow`.
    pub fn select(&self, filter: Option<&str>, include_slow: bool) -> (Vec<&Trial>, Vec<&Trial>) {
        self.trials
            .iter()
            .filter(|t| filter.is_none_or(|f| t.name().contains(f)))
            .partition(|t| include_slow || !t.ignored())
    }
}

/// How long each trial took when it last ran, kept between runs in
/// `target/harness/trial-durations.json` (a cache: deleting it only costs
/// the next run its order).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct TrialDurations {
    /// Trial name -> milliseconds.
    millis: BTreeMap<String, u64>,
}

impl TrialDurations {
    fn path() -> PathBuf {
        crate::world::paths::repo_root().join("target/harness/trial-durations.json")
    }

    /// The durations of earlier runs; none when there are none or the file
    /// cannot be read.
    pub fn load() -> TrialDurations {
        let millis = std::fs::read(Self::path())
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default();
        TrialDurations { millis }
    }

    /// Keeps these durations for the next run (written whole, then renamed
    /// into place, so runs at the same time never read half a file).
    pub fn save(&self) -> std::io::Result<()> {
        let path = Self::path();
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        let mut file = tempfile::NamedTempFile::new_in(dir)?;
        serde_json::to_writer_pretty(&mut file, &self.millis)?;
        file.persist(&path).map_err(|e| e.error)?;
        Ok(())
    }

    /// How long `name` took last time, if it ever ran.
    pub fn of(&self, name: &str) -> Option<Duration> {
        self.millis.get(name).copied().map(Duration::from_millis)
    }

    /// Notes how long each of `outcomes` took (the others keep theirs).
    pub fn record(&mut self, outcomes: &[TrialOutcome]) {
        for outcome in outcomes {
            let millis = u64::try_from(outcome.duration.as_millis()).unwrap_or(u64::MAX);
            self.millis.insert(outcome.name.clone(), millis);
        }
    }

    /// `trials` in the order to start them: the longest first, and before
    /// them those never timed (a new scenario may be long); otherwise in
    /// their own order.
    pub fn longest_first<'t>(&self, mut trials: Vec<&'t Trial>) -> Vec<&'t Trial> {
        trials
            .sort_by_key(|trial| std::cmp::Reverse(self.of(trial.name()).unwrap_or(Duration::MAX)));
        trials
    }
}

/// Every trial of the scenario files in `dir`, and `dir/expected-failures.toml`;
/// trials are named after `shown_as` (see [`scenario::scenario_files`]).
pub fn discover(dir: &Path, shown_as: &Path) -> Result<Suite, std::io::Error> {
    let mut trials = Vec::new();
    for (path, display) in scenario::scenario_files(dir, shown_as)? {
        match scenario::load_file(&path, &display) {
            Ok(prepared) => trials.extend(prepared.into_iter().map(Trial::Scenario)),
            Err(error) => trials.push(Trial::Malformed {
                name: format!("{}::(file)", display.display()),
                error: error.to_string(),
            }),
        }
    }
    let names: Vec<&str> = trials.iter().map(Trial::name).collect();
    let expectations = match ExpectedFailures::load(dir, shown_as, &names) {
        Ok(expectations) => expectations,
        Err(error) => {
            let name = format!("{EXPECTED_FAILURES_FILE}::(file)");
            trials.push(Trial::Malformed {
                name,
                error: error.to_string(),
            });
            ExpectedFailures::default()
        }
    };
    Ok(Suite {
        trials,
        expectations,
    })
}

/// Why the environment could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum EnvironmentError {
    /// No usable workerd.
    #[error(transparent)]
    Workerd(#[from] crate::world::workerd::find::FindError),
    /// The deployable did not build.
    #[error(transparent)]
    Build(#[from] wasm::BuildError),
    /// The counting core could not be chosen or prepared.
    #[error(transparent)]
    Reference(#[from] ReferenceError),
    /// `HARNESS_WORKER` names no Worker.
    #[error(transparent)]
    Worker(#[from] UnknownWorker),
}

/// Finds workerd and the counting core, and builds the Worker, as the
/// environment chooses ([`WorkerdChoice::from_env`], [`CoreChoice::from_env`],
/// [`WorkerChoice::from_env`]).
pub fn prepare_environment() -> Result<Environment, EnvironmentError> {
    prepare_environment_with(
        &WorkerdChoice::from_env(),
        CoreChoice::from_env()?,
        WorkerChoice::from_env()?,
    )
}

/// Finds the chosen workerd, prepares the chosen counting core and builds
/// the chosen Worker, saying which workerd, core and Worker on stderr.
pub fn prepare_environment_with(
    choice: &WorkerdChoice,
    core: CoreChoice,
    worker: WorkerChoice,
) -> Result<Environment, EnvironmentError> {
    let workerd = find_workerd(choice)?;
    eprintln!(
        "harness: workerd {} ({}, from {})",
        workerd.version,
        workerd.path.display(),
        workerd.source
    );
    let core = CountingCore::prepare(core, &crate::world::paths::pinned_workerd_dir())?;
    if let CountingCore::Reference(_) = core {
        eprintln!("harness: counting core: Cloudflare's simulator (miniflare {MINIFLARE_VERSION})");
    }
    if worker != WorkerChoice::default() {
        eprintln!("harness: Worker: the {} deployable", worker.name());
    }
    let deployable = wasm::build_worker(worker)?;
    Ok(Environment {
        workerd,
        deployable,
        core,
        count_server: crate::world::workerd::CountServer::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::expected_failures::Verdict;

    fn trial(name: &str) -> Trial {
        Trial::Malformed {
            name: name.into(),
            error: String::new(),
        }
    }

    fn outcome(name: &str, millis: u64) -> TrialOutcome {
        TrialOutcome {
            name: name.into(),
            passed: true,
            verdict: Verdict::Passed,
            message: String::new(),
            requests: 0,
            p50_ms: None,
            p99_ms: None,
            duration: Duration::from_millis(millis),
            trace: Trace::default(),
        }
    }

    #[test]
    fn the_longest_trials_start_first_and_untimed_ones_before_them() {
        let mut durations = TrialDurations::default();
        durations.record(&[
            outcome("short", 100),
            outcome("long", 2_400),
            outcome("mid", 700),
        ]);
        let trials = [
            trial("short"),
            trial("new"),
            trial("mid"),
            trial("long"),
            trial("newer"),
        ];
        let order: Vec<&str> = durations
            .longest_first(trials.iter().collect())
            .into_iter()
            .map(Trial::name)
            .collect();
        assert_eq!(order, ["new", "newer", "long", "mid", "short"]);
    }

    #[test]
    fn a_later_run_replaces_a_trials_duration_and_keeps_the_others() {
        let mut durations = TrialDurations::default();
        durations.record(&[outcome("a", 100), outcome("b", 200)]);
        durations.record(&[outcome("a", 900)]);
        assert_eq!(durations.of("a"), Some(Duration::from_millis(900)));
        assert_eq!(durations.of("b"), Some(Duration::from_millis(200)));
        assert_eq!(durations.of("c"), None);
    }
}
