//! `harness run`: the scenarios of a directory on one workerd and one
//! counting core, each failure and the summary table on stdout, and JUnit
//! XML when asked. The edge-compatibility job finds its scenarios and
//! prepares its environments the same way ([`discover`], [`environment`]).

use std::path::{Path, PathBuf};

use crate::commands::error::CommandError;
use crate::commands::html_report::{self, RanOn, RunInfo};
use crate::commands::preflight;
use crate::commands::report::{self, Counts};
use crate::commands::suite::{self, Suite};
use crate::engine::Environment;
use crate::judge::expected_failures::Verdict;
use crate::world::paths;
use crate::world::wasm::WorkerChoice;
use crate::world::workerd::WorkerdChoice;
use crate::world::workerd::reference::CoreChoice;

/// What `harness run` is asked to do.
#[derive(Debug, Clone)]
pub struct RunRequest {
    /// Only scenarios whose name contains this.
    pub filter: Option<String>,
    /// The scenarios directory; the repository's when `None`.
    pub scenarios: Option<PathBuf>,
    /// Also run the slow scenarios.
    pub include_slow: bool,
    /// Where to write JUnit XML, if anywhere.
    pub junit: Option<PathBuf>,
    /// Where to write the report page, if anywhere.
    pub html: Option<PathBuf>,
    /// How many scenarios run at once.
    pub jobs: usize,
    /// Which workerd.
    pub workerd: WorkerdChoice,
    /// Which counting core the emulated bindings wrap.
    pub core: CoreChoice,
    /// Which Worker the Workers scenarios run.
    pub worker: WorkerChoice,
}

/// The suite of `scenarios`, its trials named by the path as given, or of
/// the repository's scenarios, named `scenarios/...`.
pub fn discover(scenarios: Option<PathBuf>) -> Result<Suite, CommandError> {
    let (dir, shown_as) = match scenarios {
        Some(dir) => (dir.clone(), dir),
        None => (
            paths::scenarios_dir(),
            PathBuf::from(paths::SCENARIOS_SHOWN_AS),
        ),
    };
    suite::discover(&dir, &shown_as).map_err(|source| CommandError::Scenarios { dir, source })
}

/// The chosen workerd and counting core, and the chosen Worker built.
pub fn environment(
    choice: &WorkerdChoice,
    core: CoreChoice,
    worker: WorkerChoice,
) -> Result<Environment, CommandError> {
    Ok(suite::prepare_environment_with(choice, core, worker)?)
}

/// Runs the suite and prints how it went; whether every scenario passed
/// (expected failures included, no unexpected pass).
pub fn run(request: RunRequest) -> Result<bool, CommandError> {
    let suite = discover(request.scenarios)?;
    preflight::prepare_machine(
        &suite
            .select(request.filter.as_deref(), request.include_slow)
            .0,
    )?;
    let env = environment(&request.workerd, request.core, request.worker)?;
    let result = suite.run_all(
        &env,
        request.filter.as_deref(),
        request.include_slow,
        request.jobs,
    );
    for outcome in result.outcomes.iter().filter(|o| !o.verdict.is_ok()) {
        let note = match &outcome.verdict {
            Verdict::UnexpectedPass { reason } => format!(
                "unexpected pass: listed in expected-failures.toml as failing ({reason}), but it passed; remove the entry"
            ),
            _ => outcome.message.clone(),
        };
        println!("---- {} ----\n{note}\n", outcome.name);
    }
    println!("{}", report::summary_table(&result.outcomes));
    let counts = Counts::of(&result.outcomes);
    println!(
        "{} passed, {} failed, {} skipped",
        counts.passed + counts.expected_failures,
        counts.failed + counts.unexpected_passes,
        result.skipped
    );
    println!(
        "(workerd {}, counting core {}, Worker {}; {} expected failures, {} unexpected passes{})",
        env.workerd.version,
        request.core.name(),
        request.worker.name(),
        counts.expected_failures,
        counts.unexpected_passes,
        if result.skipped > 0 {
            "; skipped: the slow scenarios, run them with --include-slow"
        } else {
            ""
        }
    );
    if let Some(path) = request.junit {
        write_junit(&path, &result.outcomes)?;
        println!("JUnit XML: {}", path.display());
    }
    if let Some(path) = request.html {
        let page = html_report::render(
            &RunInfo {
                ran_on: RanOn::Workerd {
                    workerd: &env.workerd.version,
                    core: request.core.name(),
                },
                worker: request.worker.name(),
                skipped: result.skipped,
            },
            &result.outcomes,
        )?;
        write_html(&path, &page)?;
        println!("report page: {}", path.display());
    }
    Ok(counts.is_ok())
}

/// Writes the report page, making its directory if need be.
fn write_html(path: &Path, page: &str) -> Result<(), CommandError> {
    let failed = |source| CommandError::Html {
        path: path.to_owned(),
        source,
    };
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(failed)?;
    }
    std::fs::write(path, page).map_err(failed)
}

fn write_junit(path: &Path, outcomes: &[report::TrialOutcome]) -> Result<(), CommandError> {
    report::write_junit(path, &[("conformance", outcomes)]).map_err(|source| CommandError::Junit {
        path: path.to_owned(),
        source,
    })
}
