//! Expected failures: one checked-in file (`expectations.toml` beside the
//! scenarios) listing scenarios known to fail on given workerd versions, each
//! with a mandatory reason. A listed scenario that passes is an unexpected
//! pass and fails the run, so the list never rots.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use runtime::config::Location;

/// The file's name inside a scenarios directory.
pub const FILE_NAME: &str = "expectations.toml";

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
    /// The trial's name, `FILE::NAME`.
    pub scenario: String,
    /// The workerd versions (as `workerd --version` prints them, such as
    /// `2026-11-17`) it fails on, or `["*"]` for every version.
    pub workerd: Vec<String>,
    /// Why it fails: mandatory, and shown with every expected failure.
    pub reason: String,
}

/// The expected failures of one scenarios directory.
#[derive(Debug, Clone, Default)]
pub struct Expectations {
    entries: Vec<ExpectedFailure>,
}

/// An expectations file that is malformed or names what does not exist.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{file}:{location}: {message}")]
pub struct ExpectationsError {
    pub file: PathBuf,
    pub location: Location,
    pub message: String,
}

/// How a trial ended once its expectation is taken into account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Passed,
    Failed,
    /// Failed, as listed.
    ExpectedFailure {
        reason: String,
    },
    /// Listed as failing, but passed: the entry must go.
    UnexpectedPass {
        reason: String,
    },
}

impl Verdict {
    /// Whether the run is still green with this verdict.
    pub fn is_ok(&self) -> bool {
        matches!(self, Verdict::Passed | Verdict::ExpectedFailure { .. })
    }

    pub fn label(&self) -> &'static str {
        match self {
            Verdict::Passed => "pass",
            Verdict::Failed => "FAIL",
            Verdict::ExpectedFailure { .. } => "xfail",
            Verdict::UnexpectedPass { .. } => "XPASS",
        }
    }
}

impl Expectations {
    /// Reads `dir/expectations.toml` (none is an empty list), checking that
    /// every entry has a reason and names one of `known_trials`.
    pub fn load(dir: &Path, known_trials: &[&str]) -> Result<Expectations, ExpectationsError> {
        let path = dir.join(FILE_NAME);
        let Ok(text) = std::fs::read_to_string(&path) else {
            return Ok(Expectations::default());
        };
        let error = |offset: usize, message: String| ExpectationsError {
            file: path.clone(),
            location: Location::of_offset(&text, offset),
            message,
        };
        let file: File = toml::from_str(&text).map_err(|e| {
            error(
                e.span().map_or(0, |s| s.start),
                e.message().trim().to_owned(),
            )
        })?;
        let mut entries = Vec::new();
        for entry in file.expected_failure {
            let at = entry.span().start;
            let entry = entry.into_inner();
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
            if !known_trials.contains(&entry.scenario.as_str()) {
                return Err(error(
                    at,
                    format!(
                        "`{}` is no scenario; remove or rename the entry",
                        entry.scenario
                    ),
                ));
            }
            entries.push(entry);
        }
        Ok(Expectations { entries })
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

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str, known: &[&str]) -> Result<Expectations, ExpectationsError> {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join(FILE_NAME), text).expect("write");
        Expectations::load(dir.path(), known)
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
