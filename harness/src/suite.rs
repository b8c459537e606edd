//! The scenarios of a directory as trials, and the environment they run in.

use std::path::Path;

use crate::engine::Environment;
use crate::report::{self, TrialOutcome};
use crate::scenario::{self, Prepared, ScenarioError};
use crate::wasm;
use crate::workerd::find_workerd;

/// One trial: a scenario ready to run, or a file that could not be read
/// (a failed trial named after the file, never a silent skip).
#[derive(Debug, Clone)]
pub enum Trial {
    Scenario(Prepared),
    Malformed { name: String, error: ScenarioError },
}

impl Trial {
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

    pub fn run(&self, env: &Environment) -> TrialOutcome {
        match self {
            Trial::Scenario(prepared) => report::run_trial(env, prepared),
            Trial::Malformed { name, error } => report::malformed(name, error),
        }
    }
}

/// Every trial of the scenario files in `dir`.
pub fn discover(dir: &Path) -> Result<Vec<Trial>, std::io::Error> {
    let mut trials = Vec::new();
    for (path, display) in scenario::scenario_files(dir)? {
        match scenario::load_file(&path, &display) {
            Ok(prepared) => trials.extend(prepared.into_iter().map(Trial::Scenario)),
            Err(error) => trials.push(Trial::Malformed {
                name: format!("{}::(file)", display.display()),
                error,
            }),
        }
    }
    Ok(trials)
}

/// Why the environment could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum EnvironmentError {
    #[error(transparent)]
    Workerd(#[from] crate::workerd::find::FindError),
    #[error(transparent)]
    Build(#[from] wasm::BuildError),
}

/// Finds workerd and builds the deployable, saying which workerd on stderr.
pub fn prepare_environment() -> Result<Environment, EnvironmentError> {
    let workerd = find_workerd()?;
    eprintln!(
        "harness: workerd {} ({}, from {})",
        workerd.version,
        workerd.path.display(),
        workerd.source
    );
    let deployable = wasm::build_deployable()?;
    Ok(Environment {
        workerd,
        deployable,
    })
}
