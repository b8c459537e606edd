//! Expected failures: one checked-in file (`expected-failures.toml` beside the
//! scenarios) listing scenarios known to fail on given workerd versions, each
//! with a mandatory reason. A listed scenario that passes is an unexpected
//! pass and fails the run, so the list never rots.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use runtime::config::Location;

use crate::language::scenario::EXPECTED_FAILURES_FILE;

/// Every version of workerd.
pub const ANY_VERSION: &str = "*";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    expected_failure: Vec<Spanned<ExpectedFailure>>,
}

/// One scenario known to fail.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectedFailure {
    /// The trial's name, `DIR/FILE::NAME`, where `DIR` is the scenarios
    /// directory's own name (`scenarios/healthy.toml::...`), however the run
    /// was told where the directory is.
    pub scenario: String,
    /// The workerd versions (as `workerd --version` prints them, such as
    /// `2026-11-17`) it fails on, or `["*"]` for every version.
    pub workerd: Vec<String>,
    /// Why it fails: mandatory, and shown with every expected failure.
    pub reason: String,
}

/// The expected failures of one scenarios directory.
#[derive(Debug, Clone, Default)]
pub struct ExpectedFailures {
    entries: Vec<ExpectedFailure>,
}

/// A list file beside the scenarios (`expected-failures.toml`, `differential.toml`)
/// that is malformed or names what does not exist, placed at `file:line:col`.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{file}:{location}: {message}")]
pub struct ListError {
    /// The list file.
    pub file: PathBuf,
    /// Where in it.
    pub location: Location,
    /// What is wrong there.
    pub message: String,
}

/// The text of a list file, kept to place errors at the entries read from it.
pub(crate) struct ListFile {
    path: PathBuf,
    text: String,
}

impl ListFile {
    /// Reads `path` and parses it as `F`; `Ok(None)` when there is no file
    /// (no file is an empty list).
    pub(crate) fn read<F: serde::de::DeserializeOwned>(
        path: PathBuf,
    ) -> Result<Option<(ListFile, F)>, ListError> {
        let Ok(text) = std::fs::read_to_string(&path) else {
            return Ok(None);
        };
        let file = ListFile { path, text };
        let parsed = toml::from_str(&file.text).map_err(|e| ListError {
            file: file.path.clone(),
            location: Location::of_toml_error(&file.text, &e),
            message: e.message().trim().to_owned(),
        })?;
        Ok(Some((file, parsed)))
    }

    /// The error at byte `offset` of the file.
    pub(crate) fn error(&self, offset: usize, message: String) -> ListError {
        ListError {
            file: self.path.clone(),
            location: Location::of_offset(&self.text, offset),
            message,
        }
    }
}

/// How a trial ended once its expectation is taken into account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Every expectation held, and the trial is not listed.
    Passed,
    /// An expectation did not hold, and the trial is not listed.
    Failed,
    /// Failed, as listed.
    ExpectedFailure {
        /// The list's reason, shown with the verdict.
        reason: String,
    },
    /// Listed as failing, but passed: the entry must go.
    UnexpectedPass {
        /// The list's reason, to say which entry.
        reason: String,
    },
}

impl Verdict {
    /// Whether the run is still green with this verdict.
    pub fn is_ok(&self) -> bool {
        matches!(self, Verdict::Passed | Verdict::ExpectedFailure { .. })
    }

    /// Its word in progress lines and the summary table.
    pub fn label(&self) -> &'static str {
        match self {
            Verdict::Passed => "pass",
            Verdict::Failed => "FAIL",
            Verdict::ExpectedFailure { .. } => "xfail",
            Verdict::UnexpectedPass { .. } => "XPASS",
        }
    }
}

impl ExpectedFailures {
    /// Reads `dir/expected-failures.toml` (none is an empty list), checking that
    /// every entry has a reason and names one of `known_trials`, whose files
    /// are shown as under `shown_as` (see [`crate::language::scenario::scenario_files`]).
    pub fn load(
        dir: &Path,
        shown_as: &Path,
        known_trials: &[&str],
    ) -> Result<ExpectedFailures, ListError> {
        let Some((list, file)) = ListFile::read::<File>(dir.join(EXPECTED_FAILURES_FILE))? else {
            return Ok(ExpectedFailures::default());
        };
        let error = |offset: usize, message: String| list.error(offset, message);
        let mut entries = Vec::new();
        for entry in file.expected_failure {
            let at = entry.span().start;
            let mut entry = entry.into_inner();
            if entry.reason.trim().is_empty() {
                return Err(error(
                    at,
                    format!("the expected failure of `{}` has no reason", entry.scenario),
                ));
            }
            if entry.workerd.is_empty() {
                return Err(error(
                    at,
                    format!(
                        "the expected failure of `{}` names no workerd version",
                        entry.scenario
                    ),
                ));
            }
            let trial = trial_name(&entry.scenario, dir, shown_as);
            if !known_trials.contains(&trial.as_str()) {
                return Err(error(
                    at,
                    format!(
                        "`{}` is no scenario; remove or rename the entry",
                        entry.scenario
                    ),
                ));
            }
            entry.scenario = trial;
            entries.push(entry);
        }
        Ok(ExpectedFailures { entries })
    }

    /// The entry that expects `trial` to fail on `workerd_version`.
    pub fn expected_failure(&self, trial: &str, workerd_version: &str) -> Option<&ExpectedFailure> {
        self.entries.iter().find(|e| {
            e.scenario == trial
                && e.workerd
                    .iter()
                    .any(|v| v == ANY_VERSION || v == workerd_version)
        })
    }

    /// The verdict for a trial that passed or not on `workerd_version`.
    pub fn verdict(&self, trial: &str, workerd_version: &str, passed: bool) -> Verdict {
        match (self.expected_failure(trial, workerd_version), passed) {
            (None, true) => Verdict::Passed,
            (None, false) => Verdict::Failed,
            (Some(e), false) => Verdict::ExpectedFailure {
                reason: e.reason.clone(),
            },
            (Some(e), true) => Verdict::UnexpectedPass {
                reason: e.reason.clone(),
            },
        }
    }
}

/// The trial an entry names (`DIR/FILE::NAME`, `DIR` being `dir`'s own
/// name) in a run that shows `dir` as `shown_as`; any other entry as written.
fn trial_name(entry: &str, dir: &Path, shown_as: &Path) -> String {
    let Some(dir_name) = dir.file_name().and_then(|n| n.to_str()) else {
        return entry.to_owned();
    };
    match entry
        .strip_prefix(dir_name)
        .and_then(|rest| rest.strip_prefix('/'))
        .and_then(|rest| rest.split_once("::"))
    {
        Some((file, name)) => format!("{}::{name}", shown_as.join(file).display()),
        None => entry.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str, known: &[&str]) -> Result<ExpectedFailures, ListError> {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join(EXPECTED_FAILURES_FILE), text).expect("write");
        ExpectedFailures::load(dir.path(), Path::new(""), known)
    }

    #[test]
    fn entries_name_trials_by_the_directorys_own_name_however_it_is_shown() {
        let dir = Path::new("/work/qa/scenarios");
        for shown_as in ["scenarios", "../qa/scenarios", "/work/qa/scenarios"] {
            assert_eq!(
                trial_name("scenarios/a.toml::x y", dir, Path::new(shown_as)),
                format!("{shown_as}/a.toml::x y")
            );
        }
        assert_eq!(
            trial_name("elsewhere/a.toml::x", dir, Path::new("s")),
            "elsewhere/a.toml::x"
        );
    }

    #[test]
    fn verdicts_follow_the_list() {
        let e = load(
            "[[expected_failure]]\nscenario = \"a.toml::x\"\nworkerd = [\"2026-11-17\"]\nreason = \"r\"\n",
            &["a.toml::x"],
        )
        .expect("loads");
        assert_eq!(
            e.verdict("a.toml::x", "2026-11-17", false),
            Verdict::ExpectedFailure { reason: "r".into() }
        );
        assert_eq!(
            e.verdict("a.toml::x", "2026-11-17", true),
            Verdict::UnexpectedPass { reason: "r".into() }
        );
        assert_eq!(e.verdict("a.toml::x", "2026-12-01", false), Verdict::Failed);
        assert!(
            !Verdict::UnexpectedPass {
                reason: String::new()
            }
            .is_ok()
        );
    }

    #[test]
    fn a_reason_is_mandatory_and_entries_must_name_scenarios() {
        let no_reason =
            "[[expected_failure]]\nscenario = \"a.toml::x\"\nworkerd = [\"*\"]\nreason = \" \"\n";
        assert!(load(no_reason, &["a.toml::x"]).is_err());
        let missing_field = "[[expected_failure]]\nscenario = \"a.toml::x\"\nworkerd = [\"*\"]\n";
        let error = load(missing_field, &["a.toml::x"]).expect_err("reason is required");
        assert!(error.message.contains("reason"), "{error}");
        let stale = "[[expected_failure]]\nscenario = \"gone.toml::x\"\nworkerd = [\"*\"]\nreason = \"r\"\n";
        let error = load(stale, &["a.toml::x"]).expect_err("stale entry");
        assert_eq!(error.location.line, 1);
    }
}
