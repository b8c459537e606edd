//! Running trials and telling people and CI how they went: one outcome per
//! scenario, the summary table, the JUnit XML, and failure text that reads
//! like a compiler error with the tail of each workerd's log.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use crate::checks::{self, Failure};
use crate::engine::{self, Environment, InstanceRecord, Observation};
use crate::scenario::{Prepared, ScenarioError};
use crate::workerd::Stream;

/// How many of each workerd's last lines a failure shows.
pub const LOG_TAIL: usize = 15;

/// How one trial went.
#[derive(Debug, Clone)]
pub struct TrialOutcome {
    pub name: String,
    pub passed: bool,
    /// For a failure: the whole explanation.
    pub message: String,
    pub requests: usize,
    pub p50_ms: Option<u64>,
    pub p99_ms: Option<u64>,
    pub duration: Duration,
}

/// Runs one prepared scenario and judges it.
pub fn run_trial(env: &Environment, prepared: &Prepared) -> TrialOutcome {
    let (observation, aborted) = match engine::run(env, prepared) {
        Ok(observation) => (observation, None),
        Err(aborted) => {
            let aborted = *aborted;
            (aborted.observation, Some(aborted.error))
        }
    };
    let mut failures: Vec<String> = Vec::new();
    if let Some(error) = &aborted {
        let place = prepared.scenario.place(prepared.scenario.scenario.span());
        failures.push(format!(
            "error: the scenario could not run to the end\n  --> {place}\n   | {error}"
        ));
    } else {
        failures.extend(
            checks::check(prepared, &observation)
                .iter()
                .map(Failure::to_string),
        );
    }
    outcome(&prepared.trial_name, &observation, failures)
}

/// The outcome of a scenario file that could not be read.
pub fn malformed(name: &str, error: &ScenarioError) -> TrialOutcome {
    TrialOutcome {
        name: name.to_owned(),
        passed: false,
        message: format!(
            "error: malformed scenario file\n  --> {}\n   | {}",
            error.place, error.message
        ),
        requests: 0,
        p50_ms: None,
        p99_ms: None,
        duration: Duration::ZERO,
    }
}

fn outcome(name: &str, observation: &Observation, failures: Vec<String>) -> TrialOutcome {
    let ms = checks::latencies(observation);
    let mut message = failures.join("\n\n");
    if !failures.is_empty() && !observation.instances.is_empty() {
        message.push_str("\n\n");
        message.push_str(&log_tails(&observation.instances));
    }
    TrialOutcome {
        name: name.to_owned(),
        passed: failures.is_empty(),
        message,
        requests: observation.requests.len(),
        p50_ms: checks::percentile(&ms, 50),
        p99_ms: checks::percentile(&ms, 99),
        duration: observation.duration,
    }
}

/// The last lines of every workerd, with times since the scenario started.
pub fn log_tails(instances: &[InstanceRecord]) -> String {
    let mut out = String::new();
    for instance in instances {
        let skip = instance.lines.len().saturating_sub(LOG_TAIL);
        let _ = writeln!(
            out,
            "= workerd log of isolate {} (generation {}), last {} of {} lines:",
            instance.isolate,
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

/// The summary table the main job prints.
pub fn summary_table(outcomes: &[TrialOutcome]) -> String {
    let mut table = comfy_table::Table::new();
    table.load_preset(comfy_table::presets::UTF8_BORDERS_ONLY);
    table.set_header([
        "scenario",
        "result",
        "requests",
        "p50 ms",
        "p99 ms",
        "duration s",
    ]);
    let ms = |v: Option<u64>| v.map_or("-".to_owned(), |v| v.to_string());
    for o in outcomes {
        table.add_row([
            o.name.clone(),
            if o.passed {
                "pass".into()
            } else {
                "FAIL".into()
            },
            o.requests.to_string(),
            ms(o.p50_ms),
            ms(o.p99_ms),
            format!("{:.1}", o.duration.as_secs_f64()),
        ]);
    }
    table.to_string()
}

/// Writes the outcomes as JUnit XML for CI.
pub fn write_junit(
    path: &Path,
    suite_name: &str,
    outcomes: &[TrialOutcome],
) -> std::io::Result<()> {
    use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
    let mut suite = TestSuite::new(suite_name);
    for o in outcomes {
        let status = if o.passed {
            TestCaseStatus::success()
        } else {
            let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
            status.set_description(o.message.clone());
            status
        };
        let mut case = TestCase::new(o.name.clone(), status);
        case.set_time(o.duration);
        suite.add_test_case(case);
    }
    let mut report = Report::new("harness");
    report.add_test_suite(suite);
    let xml = report.to_string().map_err(std::io::Error::other)?;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(path, xml)
}
