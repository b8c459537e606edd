//! Reading scenario files: every `[[scenario]]` of a file with the file's
//! defaults applied, its application read (from its file or inline) and
//! validated once, and validated ([`super::validate`]), so a file that
//! does not make sense is refused before anything runs, with every error
//! of the file at once, each at `file:line:col` of the line that is wrong
//! (an application's own diagnostics at the application file's line).

use std::collections::BTreeSet;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use runtime::config::{Application, Diagnostics, Location};
use serde::de::DeserializeOwned;
use toml::Spanned;
use toml::de::{DeTable, DeValue, ValueDeserializer};

use super::model::{SLOW_TAG, Scenario, ScenarioFile};
use super::prepared::Prepared;
use super::source::{Place, ScenarioError, ScenarioErrors, ScenarioSource};
use super::validate;

/// The file of a scenarios directory that lists the scenarios expected to
/// fail, each with its reason: not a scenario file.
pub const EXPECTED_FAILURES_FILE: &str = "expected-failures.toml";

/// The file of a scenarios directory that lists where the two counting
/// cores differ by design, each with its reason: not a scenario file.
pub const DIFFERENTIAL_FILE: &str = "differential.toml";

/// How many errors one table may give before its reading stops: each
/// error's entry is left out and the table read again, to find the next.
const MAX_ERRORS_PER_TABLE: usize = 32;

/// Reads every scenario of one file. `display_path` is how the file is named
/// in trial names and errors (relative to the scenarios directory's parent).
/// On error, every error of the file, in the file's order.
pub fn load_file(path: &Path, display_path: &Path) -> Result<Vec<Prepared>, ScenarioErrors> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        ScenarioErrors(vec![ScenarioError {
            place: Place {
                file: display_path.to_owned(),
                location: Location { line: 1, column: 1 },
            },
            message: format!("cannot read: {e}"),
        }])
    })?;
    load_text(&text, path.parent().unwrap_or(Path::new(".")), display_path)
}

/// Reads every scenario of a file's `text`, as [`load_file`] does; the file
/// is in the folder `base` (its application files are read from there). The reader apart from the file system, for the
/// fuzz target (`fuzz/`).
pub fn load_text(
    text: &str,
    base: &Path,
    display_path: &Path,
) -> Result<Vec<Prepared>, ScenarioErrors> {
    let mut reader = FileReader {
        file: display_path,
        base,
        text,
        errors: Vec::new(),
        reported_applications: BTreeSet::new(),
    };
    let (head, scenarios) = reader.parse();
    let mut names = BTreeSet::new();
    let mut prepared = Vec::new();
    for scenario in scenarios {
        let source = Arc::new(ScenarioSource {
            file: display_path.to_owned(),
            text: text.to_owned(),
            scenario,
        });
        let s = source.scenario.get_ref();
        if !names.insert(s.name.clone()) {
            let span = source.scenario.span();
            reader.errors.push(
                source.error(
                    source
                        .key_span(source.table_body(span.clone()), "name")
                        .unwrap_or(span),
                    format!("two scenarios are named `{}`", s.name),
                ),
            );
            continue;
        }
        if let Some(ready) = reader.prepare(&head, source) {
            reader
                .errors
                .extend(validate::validate(&ready, reader.windows(&ready)));
            prepared.push(ready);
        }
    }
    if reader.errors.is_empty() {
        Ok(prepared)
    } else {
        let mut errors = reader.errors;
        // This file's errors first, in its order; then the applications'.
        errors.sort_by_key(|e| {
            let at = e.place.location;
            (
                e.place.file != display_path,
                e.place.file.clone(),
                at.line,
                at.column,
            )
        });
        errors.dedup_by(|a, b| a.place == b.place && a.message == b.message);
        Err(ScenarioErrors(errors))
    }
}

/// One file being read: the errors found so far, and which applications'
/// diagnostics were reported (each once, however many scenarios use it).
struct FileReader<'a> {
    file: &'a Path,
    base: &'a Path,
    text: &'a str,
    errors: Vec<ScenarioError>,
    reported_applications: BTreeSet<PathBuf>,
}

impl FileReader<'_> {
    fn at(&self, span: Range<usize>) -> Place {
        Place {
            file: self.file.to_owned(),
            location: Location::of_offset(self.text, span.start),
        }
    }

    fn error(&mut self, span: Range<usize>, message: impl Into<String>) {
        let place = self.at(span);
        self.errors.push(ScenarioError {
            place,
            message: message.into(),
        });
    }

    /// The file's defaults and each `[[scenario]]` that reads as one; what
    /// does not read is an error each (a table's every unknown field, and
    /// after a wrong value the rest of its table).
    fn parse(&mut self) -> (ScenarioFile, Vec<Spanned<Scenario>>) {
        let empty = ScenarioFile {
            application: None,
            deployable: None,
            scenario: Vec::new(),
        };
        let root = match DeTable::parse(self.text) {
            Ok(root) => root,
            Err(e) => {
                // The reader's own limits (a key nested past them) have no
                // span: `of_toml_error` finds their place.
                self.errors.push(ScenarioError {
                    place: Place {
                        file: self.file.to_owned(),
                        location: Location::of_toml_error(self.text, &e),
                    },
                    message: e.message().trim().to_owned(),
                });
                return (empty, Vec::new());
            }
        };
        let span = root.span();
        let mut root = root.into_inner();
        let scenarios = root.remove("scenario");
        let head = self
            .read::<ScenarioFile>(Spanned::new(span, DeValue::Table(root)))
            .unwrap_or(empty);
        let mut read = Vec::new();
        match scenarios.map(|s| (s.span(), s.into_inner())) {
            None => self.error(0..0, "the file has no [[scenario]]"),
            Some((_, DeValue::Array(items))) if items.is_empty() => {
                self.error(0..0, "the file has no [[scenario]]");
            }
            Some((_, DeValue::Array(items))) => {
                for item in items.iter() {
                    read.extend(self.read::<Spanned<Scenario>>(item.clone()));
                }
            }
            Some((span, _)) => self.error(
                span,
                "`scenario` is a list of tables: write each as `[[scenario]]`",
            ),
        }
        (head, read)
    }

    /// `value` read as a `T`, or `None` with an error for each of its
    /// problems: after each, the entry at fault is left out and the rest
    /// read again, so one run names every unknown field and wrong value (a
    /// field then missing is not reported again).
    fn read<T: DeserializeOwned>(&mut self, mut value: Spanned<DeValue<'_>>) -> Option<T> {
        let mut failed = false;
        for _ in 0..MAX_ERRORS_PER_TABLE {
            match T::deserialize(ValueDeserializer::from(value.clone())) {
                Ok(read) => return (!failed).then_some(read),
                Err(e) => {
                    let message = e.message().trim().to_owned();
                    let missing = message.starts_with("missing field");
                    if !(failed && missing) {
                        self.error(e.span().unwrap_or_else(|| value.span()), message);
                    }
                    failed = true;
                    let removed = e
                        .span()
                        .is_some_and(|span| remove_entry_at(value.get_mut(), &span));
                    if !removed {
                        return None;
                    }
                }
            }
        }
        None
    }

    /// The scenario with its defaults applied and its application read and
    /// validated, or `None` with the errors that stop it.
    fn prepare(&mut self, head: &ScenarioFile, source: Arc<ScenarioSource>) -> Option<Prepared> {
        let s = source.scenario.get_ref();
        let span = source.scenario.span();
        let (application_toml, from) = match (&s.application_inline, s.application.as_ref()) {
            (Some(inline), _) => (inline.get_ref().clone(), AppFrom::Inline(inline.span())),
            (None, app_path) => {
                let Some(app_path) = app_path.or(head.application.as_ref()) else {
                    self.error(
                        span,
                        "no application: set `application` (a file) or `application_inline`",
                    );
                    return None;
                };
                let shown = self
                    .file
                    .parent()
                    .unwrap_or(Path::new(""))
                    .join(app_path.get_ref());
                match std::fs::read_to_string(self.base.join(app_path.get_ref())) {
                    Ok(text) => (text, AppFrom::File(shown)),
                    Err(e) => {
                        if self.reported_applications.insert(shown) {
                            self.error(
                                app_path.span(),
                                format!("cannot read application `{}`: {e}", app_path.get_ref()),
                            );
                        }
                        return None;
                    }
                }
            }
        };
        let deployable = s
            .deployable
            .as_ref()
            .or(head.deployable.as_ref())
            .map_or_else(|| "edge".to_owned(), |d| d.get_ref().clone());
        let application = Application::from_toml(&application_toml);
        if let Err(diagnostics) = &application
            && s.expect_diagnostics.is_none()
        {
            self.report_diagnostics(diagnostics, &from, &application_toml, &s.name);
            return None;
        }
        Some(Prepared {
            trial_name: format!("{}::{}", self.file.display(), s.name),
            ignored: s.tags.iter().any(|t| t == SLOW_TAG),
            application_toml,
            application,
            deployable,
            scenario: source.clone(),
        })
    }

    /// An application that does not validate, for a scenario that expects
    /// no diagnostics: each diagnostic at its place (the application
    /// file's line, or the inline text's line in this file), once per file.
    fn report_diagnostics(
        &mut self,
        diagnostics: &Diagnostics,
        from: &AppFrom,
        application_toml: &str,
        scenario: &str,
    ) {
        if let AppFrom::File(shown) = from
            && !self.reported_applications.insert(shown.clone())
        {
            return;
        }
        for d in &diagnostics.0 {
            let message = format!(
                "{}: {} (the application of scenario `{scenario}`, which expects no diagnostics)",
                d.code, d.message
            );
            let place = match from {
                AppFrom::File(shown) => Place {
                    file: shown.clone(),
                    location: d.location.unwrap_or(Location { line: 1, column: 1 }),
                },
                AppFrom::Inline(span) => self.at(inline_offset(
                    self.text,
                    span.clone(),
                    application_toml,
                    d.location,
                )),
            };
            self.errors.push(ScenarioError { place, message });
        }
    }

    /// The window lengths the scenario's deployable counts, for the steps
    /// that wait for a window's end: every limit of a valid application.
    fn windows(&self, prepared: &Prepared) -> Option<BTreeSet<u32>> {
        let (app, _) = prepared.described()?;
        Some(app.limits().iter().map(|l| l.window_seconds).collect())
    }
}

/// Where a scenario's application description came from.
enum AppFrom {
    /// A file, named as errors show it.
    File(PathBuf),
    /// `application_inline`, whose string value is at this span of the scenario file.
    Inline(Range<usize>),
}

/// The offset in the scenario file of `location` in an inline application
/// (`text` is the string's value, at `span`): exact for a literal string
/// (`'...'`, `'''...'''`, whose text is the value as written), and the
/// value's own start where escapes could have moved it.
fn inline_offset(
    file: &str,
    span: Range<usize>,
    text: &str,
    location: Option<Location>,
) -> Range<usize> {
    let written = file.get(span.clone()).unwrap_or("");
    let (open, literal) = if written.starts_with("'''") {
        (3, true)
    } else if written.starts_with("\"\"\"") {
        (3, false)
    } else {
        (1, written.starts_with('\''))
    };
    let mut start = span.start + open;
    // A newline right after a multi-line string's opening is not its text.
    if open == 3 && file.get(start..).is_some_and(|r| r.starts_with('\n')) {
        start += 1;
    } else if open == 3 && file.get(start..).is_some_and(|r| r.starts_with("\r\n")) {
        start += 2;
    }
    let Some(location) = location.filter(|_| literal) else {
        return span;
    };
    let mut offset = 0;
    for (index, line) in text.split_inclusive('\n').enumerate() {
        if index + 1 == location.line {
            offset += line
                .char_indices()
                .nth(location.column.saturating_sub(1))
                .map_or(line.len(), |(i, _)| i);
            return start + offset..start + offset;
        }
        offset += line.len();
    }
    span
}

/// Leaves out of `value` the table entry whose key is at `span`, or the
/// innermost whose value holds it; whether one was found.
fn remove_entry_at(value: &mut DeValue<'_>, span: &Range<usize>) -> bool {
    match value {
        DeValue::Table(table) => {
            let holds = |s: Range<usize>| s.start <= span.start && span.end <= s.end;
            let mut found = None;
            for (key, entry) in table.iter_mut() {
                if key.span() == *span {
                    found = Some(key.get_ref().to_string());
                    break;
                }
                if holds(entry.span()) {
                    if remove_entry_at(entry.get_mut(), span) {
                        return true;
                    }
                    found = Some(key.get_ref().to_string());
                    break;
                }
            }
            match found {
                Some(key) => table.remove(key.as_str()).is_some(),
                None => false,
            }
        }
        DeValue::Array(items) => items
            .iter_mut()
            .any(|item| remove_entry_at(item.get_mut(), span)),
        _ => false,
    }
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

    #[test]
    fn an_inline_application_s_line_is_found_in_the_scenario_file() {
        let file = "x = '''\n[a]\nb = 1\n'''\n";
        let start = file.find("'''").expect("open");
        let end = file.rfind("'''").expect("close") + 3;
        let at = inline_offset(
            file,
            start..end,
            "[a]\nb = 1\n",
            Some(Location { line: 2, column: 5 }),
        );
        assert_eq!(
            Location::of_offset(file, at.start),
            Location { line: 3, column: 5 }
        );
    }
}
