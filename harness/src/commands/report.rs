//! Telling people and CI how trials went: one outcome per scenario, the
//! summary table, the JUnit XML, and failure text that reads like a compiler
//! error with the tail of each workerd's log.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use crate::commands::trace::Trace;
use crate::engine::{InstanceRecord, Observation};
use crate::judge::expected_failures::Verdict;
use crate::judge::scenario;
use crate::judge::stats::percentile;
use crate::world::process::Stream;

/// How many of each workerd's last lines a failure shows.
pub const LOG_TAIL: usize = 15;

/// How one trial went.
#[derive(Debug, Clone)]
pub struct TrialOutcome {
    /// The trial's name, `DIR/FILE::NAME`.
    pub name: String,
    /// Whether every expectation held.
    pub passed: bool,
    /// With the expected failures taken into account.
    pub verdict: Verdict,
    /// For a failure: the whole explanation.
    pub message: String,
    /// How many requests it sent.
    pub requests: usize,
    /// Its requests' median latency ([`percentile`]), none for no request.
    pub p50_ms: Option<u64>,
    /// Its requests' 99th percentile latency: the edge job's drift compares it.
    pub p99_ms: Option<u64>,
    /// How long it took: the next run starts the longest first.
    pub duration: Duration,
    /// What the report page draws of its run (empty when nothing ran).
    pub trace: Trace,
}

/// The outcome of a scenario or expected-failures file that could not be read;
/// `error` starts with `file:line:col`.
pub fn malformed(name: &str, error: &str) -> TrialOutcome {
    TrialOutcome {
        name: name.to_owned(),
        passed: false,
        verdict: Verdict::Failed,
        message: format!("error: malformed file\n  --> {error}"),
        requests: 0,
        p50_ms: None,
        p99_ms: None,
        duration: Duration::ZERO,
        trace: Trace::default(),
    }
}

/// The outcome of a trial that observed `observation` and failed as
/// `failures` say (none: it passed), with the log tails of a failure.
pub fn outcome(name: &str, observation: &Observation, failures: Vec<String>) -> TrialOutcome {
    let ms = scenario::latencies(observation);
    let mut message = failures.join("\n\n");
    if !failures.is_empty() && !observation.instances.is_empty() {
        message.push_str("\n\n");
        message.push_str(&log_tails(&observation.instances));
    }
    TrialOutcome {
        name: name.to_owned(),
        passed: failures.is_empty(),
        verdict: if failures.is_empty() {
            Verdict::Passed
        } else {
            Verdict::Failed
        },
        message,
        requests: observation.requests.len(),
        p50_ms: percentile(&ms, 50),
        p99_ms: percentile(&ms, 99),
        duration: observation.duration,
        trace: Trace::default(),
    }
}

/// The last lines of every instance's log (workerd's or native-fixture's),
/// with times since the scenario started.
pub fn log_tails(instances: &[InstanceRecord]) -> String {
    let mut out = String::new();
    // An instance that wrote nothing has no block: an empty one says nothing.
    for instance in instances.iter().filter(|i| !i.lines.is_empty()) {
        let skip = instance.lines.len().saturating_sub(LOG_TAIL);
        let _ = writeln!(
            out,
            "= {} (generation {}), last {} of {} lines:",
            instance.kind.log_label(instance.isolate),
            instance.generation,
            instance.lines.len() - skip,
            instance.lines.len()
        );
        for line in &instance.lines[skip..] {
            let stream = match line.stream {
                Stream::Stdout => "out",
                Stream::Stderr => "err",
            };
            let _ = writeln!(
                out,
                "  +{:>8.3}s {stream} {}",
                line.at.as_secs_f64(),
                line.text
            );
        }
    }
    out
}

/// The widest the summary table gets, in columns: it fits a terminal of
/// that width, and a narrower terminal gets a narrower table.
pub const TABLE_WIDTH: u16 = 100;

/// The summary table the main job prints: at most [`TABLE_WIDTH`] columns
/// (or the terminal's width, if less), long scenario names wrapped, the
/// same whether it goes to a terminal or a file.
pub fn summary_table(outcomes: &[TrialOutcome]) -> String {
    summary_table_with(outcomes, &[], &[])
}

/// The summary table with more columns after `result`: `extra_header`
/// names them, `extra[i]` fills them for `outcomes[i]` (`harness
/// cloudflare` adds how each was checked there and what it let through).
pub fn summary_table_with(
    outcomes: &[TrialOutcome],
    extra_header: &[&str],
    extra: &[Vec<String>],
) -> String {
    let mut table = comfy_table::Table::new();
    let width = table.width().map_or(TABLE_WIDTH, |w| w.min(TABLE_WIDTH));
    let mut header = vec!["scenario", "result"];
    header.extend_from_slice(extra_header);
    header.extend(["requests", "p50 ms", "p99 ms", "time s"]);
    table
        .load_preset(comfy_table::presets::UTF8_BORDERS_ONLY)
        .set_content_arrangement(comfy_table::ContentArrangement::Dynamic)
        .set_width(width)
        .set_header(header);
    let ms = |v: Option<u64>| v.map_or("-".to_owned(), |v| v.to_string());
    for (index, o) in outcomes.iter().enumerate() {
        let mut row = vec![o.name.clone(), o.verdict.label().to_owned()];
        let cells = extra.get(index).map(Vec::as_slice).unwrap_or_default();
        row.extend((0..extra_header.len()).map(|c| cells.get(c).cloned().unwrap_or_default()));
        row.extend([
            o.requests.to_string(),
            ms(o.p50_ms),
            ms(o.p99_ms),
            format!("{:.1}", o.duration.as_secs_f64()),
        ]);
        table.add_row(row);
    }
    table.to_string()
}

/// Writes JUnit XML for CI: one test suite per named list of outcomes.
pub fn write_junit(path: &Path, suites: &[(&str, &[TrialOutcome])]) -> std::io::Result<()> {
    write_junit_with(path, suites, |_| Vec::new())
}

/// [`write_junit`], with properties for each test case (name, value).
pub fn write_junit_with(
    path: &Path,
    suites: &[(&str, &[TrialOutcome])],
    properties: impl Fn(&TrialOutcome) -> Vec<(String, String)>,
) -> std::io::Result<()> {
    use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
    let mut report = Report::new("harness");
    for (suite_name, outcomes) in suites {
        let mut suite = TestSuite::new(*suite_name);
        for o in *outcomes {
            let status = match &o.verdict {
                Verdict::Passed => TestCaseStatus::success(),
                Verdict::ExpectedFailure { reason } => {
                    let mut status = TestCaseStatus::skipped();
                    status.set_message(format!("expected failure: {reason}"));
                    status
                }
                Verdict::Failed => {
                    let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
                    status.set_description(o.message.clone());
                    status
                }
                Verdict::UnexpectedPass { reason } => {
                    let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
                    status.set_message("unexpected pass");
                    status.set_description(format!(
                        "listed in expected-failures.toml as failing ({reason}), but it passed: remove the entry"
                    ));
                    status
                }
            };
            let mut case = TestCase::new(o.name.clone(), status);
            case.set_time(o.duration);
            for (name, value) in properties(o) {
                case.add_property(quick_junit::Property::new(name, value));
            }
            suite.add_test_case(case);
        }
        report.add_test_suite(suite);
    }
    let xml = report.to_string().map_err(std::io::Error::other)?;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(path, xml)
}

/// How many trials ended each way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Passed, and not listed.
    pub passed: usize,
    /// Failed, and not listed.
    pub failed: usize,
    /// Failed, as listed.
    pub expected_failures: usize,
    /// Listed as failing, but passed.
    pub unexpected_passes: usize,
}

impl Counts {
    /// The counts of `outcomes`.
    pub fn of(outcomes: &[TrialOutcome]) -> Counts {
        let mut counts = Counts::default();
        for o in outcomes {
            match o.verdict {
                Verdict::Passed => counts.passed += 1,
                Verdict::Failed => counts.failed += 1,
                Verdict::ExpectedFailure { .. } => counts.expected_failures += 1,
                Verdict::UnexpectedPass { .. } => counts.unexpected_passes += 1,
            }
        }
        counts
    }

    /// Whether the run is green: no failure and no unexpected pass.
    pub fn is_ok(&self) -> bool {
        self.failed == 0 && self.unexpected_passes == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_native_instances_log_is_labelled_as_the_instances() {
        let record = |kind| InstanceRecord {
            kind,
            isolate: 1,
            generation: 0,
            lines: vec![crate::world::process::LogLine {
                at: Duration::from_millis(1500),
                stream: Stream::Stderr,
                text: "a line".into(),
            }],
            served: true,
        };
        let tails = log_tails(&[
            record(crate::engine::InstanceKind::Workerd),
            record(crate::engine::InstanceKind::Native),
        ]);
        let headings: Vec<&str> = tails.lines().filter(|l| l.starts_with("= ")).collect();
        assert_eq!(
            headings,
            [
                "= workerd log of isolate 1 (generation 0), last 1 of 1 lines:",
                "= native-fixture log of native instance 1 (generation 0), last 1 of 1 lines:",
            ]
        );
        let silent = InstanceRecord {
            lines: Vec::new(),
            ..record(crate::engine::InstanceKind::Workerd)
        };
        assert_eq!(
            log_tails(&[silent]),
            "",
            "an instance that wrote nothing has no block"
        );
    }

    fn passed(name: &str) -> TrialOutcome {
        TrialOutcome {
            name: name.to_owned(),
            passed: true,
            verdict: Verdict::Passed,
            message: String::new(),
            requests: 601,
            p50_ms: Some(12),
            p99_ms: Some(1234),
            duration: Duration::from_millis(4_800),
            trace: Trace::default(),
        }
    }

    #[test]
    fn the_summary_table_fits_100_columns_and_wraps_long_names() {
        let long = "scenarios/memory-stores.toml::a deployable serving no API refuses API requests and counts them beside its health checks";
        let table = summary_table(&[passed(long), passed("scenarios/a.toml::short")]);
        for line in table.lines() {
            assert!(
                line.chars().count() <= 100,
                "{} columns: {line}",
                line.chars().count()
            );
        }
        // Every word of the long name is still there, wrapped over lines.
        let words: Vec<&str> = long.split_whitespace().collect();
        assert!(words.iter().all(|w| table.contains(w)), "{table}");
        assert!(
            table.lines().filter(|l| l.contains("pass")).count() == 2,
            "{table}"
        );
        for value in ["601", "1234", "4.8"] {
            assert!(table.contains(value), "{table}");
        }
    }
}
