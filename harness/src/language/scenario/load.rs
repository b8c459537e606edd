//! Reading scenario files: every `[[scenario]]` of a file with the file's
//! defaults applied, its application read (from its file or inline) and
//! validated once, and validated ([`super::validate`]), so a file that
//! does not make sense is refused at `file:line:col` before anything runs.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use runtime::config::{Application, Location};

use super::model::{SLOW_TAG, ScenarioFile};
use super::prepared::Prepared;
use super::source::{Place, ScenarioError, ScenarioSource};
use super::validate;

/// The file of a scenarios directory that lists the scenarios expected to
/// fail, each with its reason: not a scenario file.
pub const EXPECTED_FAILURES_FILE: &str = "expected-failures.toml";

/// The file of a scenarios directory that lists where the two counting
/// cores differ by design, each with its reason: not a scenario file.
pub const DIFFERENTIAL_FILE: &str = "differential.toml";

/// Reads every scenario of one file. `display_path` is how the file is named
/// in trial names and errors (relative to the scenarios directory's parent).
pub fn load_file(path: &Path, display_path: &Path) -> Result<Vec<Prepared>, ScenarioError> {
    let text = std::fs::read_to_string(path).map_err(|e| ScenarioError {
        place: Place {
            file: display_path.to_owned(),
            location: Location { line: 1, column: 1 },
        },
        message: format!("cannot read: {e}"),
    })?;
    load_text(&text, path.parent().unwrap_or(Path::new(".")), display_path)
}

/// Reads every scenario of a file's `text`, as [`load_file`] does; an
/// application named by its file is read relative to `base`. The reader
/// apart from the file system, for the fuzz target (`fuzz/`).
pub fn load_text(
    text: &str,
    base: &Path,
    display_path: &Path,
) -> Result<Vec<Prepared>, ScenarioError> {
    let at_start = |message: String| ScenarioError {
        place: Place {
            file: display_path.to_owned(),
            location: Location { line: 1, column: 1 },
        },
        message,
    };
    let file: ScenarioFile = toml::from_str(text).map_err(|e| ScenarioError {
        place: Place {
            file: display_path.to_owned(),
            location: Location::of_toml_error(text, &e),
        },
        message: e.message().trim().to_owned(),
    })?;
    if file.scenario.is_empty() {
        return Err(at_start("the file has no [[scenario]]".to_owned()));
    }
    let mut names = BTreeSet::new();
    let mut prepared = Vec::new();
    let (default_app, default_deployable) = (file.application.clone(), file.deployable.clone());
    for scenario in file.scenario {
        let source = Arc::new(ScenarioSource {
            file: display_path.to_owned(),
            text: text.to_owned(),
            scenario,
        });
        let span = source.scenario.span();
        let s = source.scenario.get_ref();
        if !names.insert(s.name.clone()) {
            return Err(source.error(span, format!("two scenarios are named `{}`", s.name)));
        }
        let application_toml = match (
            &s.application_inline,
            s.application.as_ref().or(default_app.as_ref()),
        ) {
            (Some(inline), _) => inline.clone(),
            (None, Some(app_path)) => {
                std::fs::read_to_string(base.join(app_path)).map_err(|e| {
                    source.error(
                        span.clone(),
                        format!("cannot read application `{app_path}`: {e}"),
                    )
                })?
            }
            (None, None) => {
                return Err(source.error(
                    span,
                    "no application: set `application` (a file) or `application_inline`",
                ));
            }
        };
        let deployable = s
            .deployable
            .clone()
            .or_else(|| default_deployable.clone())
            .unwrap_or_else(|| "edge".to_owned());
        let application = Application::from_toml(&application_toml);
        let ready = Prepared {
            trial_name: format!("{}::{}", display_path.display(), s.name),
            ignored: s.tags.iter().any(|t| t == SLOW_TAG),
            application_toml,
            application,
            deployable,
            scenario: source.clone(),
        };
        validate::validate(&ready)?;
        prepared.push(ready);
    }
    Ok(prepared)
}

/// Every scenario file under `dir` (sorted), as `(path, shown as)`: the
/// name in trial names and errors is `shown_as` joined with the file's name
/// (the directory as the user gave it, or `scenarios` for the repository's).
pub fn scenario_files(dir: &Path, shown_as: &Path) -> std::io::Result<Vec<(PathBuf, PathBuf)>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let Some(name) = path.file_name() else {
            continue;
        };
        let is_expectations = name == EXPECTED_FAILURES_FILE || name == DIFFERENTIAL_FILE;
        if path.extension().is_some_and(|e| e == "toml") && !is_expectations {
            let shown = shown_as.join(name);
            files.push((path, shown));
        }
    }
    files.sort();
    Ok(files)
}

#[cfg(test)]
mod tests {
    use runtime::config::{Code, Target};

    use super::*;

    /// Every scenario of `text`, loaded from a file of its own.
    fn load(text: &str) -> Vec<Prepared> {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("s.toml");
        std::fs::write(&path, text).expect("write");
        load_file(&path, Path::new("s.toml")).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn the_application_is_validated_once_and_an_invalid_one_keeps_its_diagnostics() {
        let loaded = load(
            "[[scenario]]\nname = \"invalid\"\nexpect_diagnostics = [\"rate_limits.store_invalid\"]\n\
             application_inline = '''\n[rate_limits]\nstore = \"nowhere\"\n'''\n\
             [[scenario]]\nname = \"native\"\ndeployable = \"api\"\n\
             application_inline = '''\n[[deployables]]\nname = \"api\"\ntarget = \"native\"\nserves_api = true\n'''\n\
             [[scenario.steps]]\nsend = { requests = 1 }\n",
        );
        let [invalid, native] = loaded.as_slice() else {
            panic!("two scenarios, not {}", loaded.len());
        };
        let diagnostics = invalid.application.as_ref().expect_err("invalid");
        assert_eq!(diagnostics.codes(), [Code::StoreInvalid]);
        assert!(invalid.described().is_none());
        assert!(!invalid.runs_natively());
        let (app, deployable) = native.described().expect("valid, with its deployable");
        assert_eq!(
            (deployable.name.as_str(), deployable.target),
            ("api", Target::Native)
        );
        assert_eq!(app.deployables.len(), 1);
        assert!(native.runs_natively());
        assert!(!native.counts_in_redis());
    }
}
