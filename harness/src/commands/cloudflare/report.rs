//! How a run on Cloudflare went, for people and CI: the same table, JUnit
//! and report page as `harness run`, with what each scenario checked there
//! (exact or bounded) and how many requests passed before the first 429 of
//! each step, and `results.json` for the nightly drift report.

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::lifecycle::ScenarioRun;
use super::run::{CloudflareRun, ScenarioOnCloudflare};
use crate::commands::html_report::{self, RanOn, RunInfo};
use crate::commands::report::{self, Counts, TrialOutcome};
use crate::commands::trace::Trace;
use crate::judge::cloudflare::Figure;
use crate::judge::scenario::Failure;

/// One scenario's outcome on Cloudflare.
#[derive(Debug, Clone)]
pub struct CloudflareOutcome {
    /// As `harness run` has it.
    pub trial: TrialOutcome,
    /// `exact`, `bounded x3`...
    pub label: String,
    /// What each step let through before its first 429.
    pub figures: Vec<Figure>,
    /// How long its new Worker's URL took to answer, if it did.
    pub answered_after: Option<Duration>,
}

impl CloudflareOutcome {
    /// `131/120` per step that expected or saw a refusal, `-` for none.
    pub fn figures_short(&self) -> String {
        let shown: Vec<String> = self
            .figures
            .iter()
            .filter(|f| f.limit.is_some() || f.passed_before_refusal.is_some())
            .map(|f| format!("step {}: {}", f.step, f.short()))
            .collect();
        if shown.is_empty() {
            "-".to_owned()
        } else {
            shown.join(", ")
        }
    }
}

/// The outcome of a planned scenario from how its run went.
pub fn outcome(planned: &ScenarioOnCloudflare, run: &ScenarioRun) -> CloudflareOutcome {
    let prepared = &planned.prepared;
    let place = prepared.scenario.place(prepared.scenario.scenario.span());
    let mut failures: Vec<String> = Vec::new();
    if let Some(error) = &run.error {
        failures.push(format!(
            "error: the scenario could not run to the end on Cloudflare\n  --> {place}\n   | {error}"
        ));
    }
    let figures = run
        .judgement
        .as_ref()
        .map(|j| {
            failures.extend(j.failures.iter().map(Failure::to_string));
            j.figures.clone()
        })
        .unwrap_or_default();
    let failed_steps: Vec<usize> = run
        .judgement
        .iter()
        .flat_map(|j| j.failures.iter().filter_map(|f| f.step))
        .collect();
    let mut trial = report::outcome(&prepared.trial_name, &run.observation, failures);
    trial.trace = Trace::on_cloudflare(prepared, &run.observation);
    trial.trace.mark_failed_steps(failed_steps);
    CloudflareOutcome {
        trial,
        label: planned.label.clone(),
        figures,
        answered_after: run.answered_after,
    }
}

/// The outcome of a scenario whose run panicked (a bug in the harness).
pub fn panicked(planned: &ScenarioOnCloudflare, message: &str) -> CloudflareOutcome {
    let place = planned
        .prepared
        .scenario
        .place(planned.prepared.scenario.scenario.span());
    failed(
        planned,
        format!(
            "error: the harness panicked while running it on Cloudflare\n  --> {place}\n   | {message}"
        ),
    )
}

/// A scenario the run did not start (it stopped first).
pub fn not_run(planned: &ScenarioOnCloudflare, why: &str) -> CloudflareOutcome {
    failed(planned, format!("error: not run on Cloudflare: {why}"))
}

fn failed(planned: &ScenarioOnCloudflare, message: String) -> CloudflareOutcome {
    CloudflareOutcome {
        trial: report::outcome(
            &planned.prepared.trial_name,
            &crate::engine::Observation::default(),
            vec![message],
        ),
        label: planned.label.clone(),
        figures: Vec::new(),
        answered_after: None,
    }
}

/// A file that could not be read, as a failed trial.
pub fn malformed(name: &str, error: &str) -> CloudflareOutcome {
    CloudflareOutcome {
        trial: report::malformed(name, error),
        label: "-".to_owned(),
        figures: Vec::new(),
        answered_after: None,
    }
}

/// The table `harness run` prints, with how each scenario was checked on
/// Cloudflare and what passed before the first 429.
pub fn table(outcomes: &[CloudflareOutcome]) -> String {
    let trials: Vec<TrialOutcome> = outcomes.iter().map(|o| o.trial.clone()).collect();
    let extra: Vec<Vec<String>> = outcomes
        .iter()
        .map(|o| vec![o.label.clone(), o.figures_short()])
        .collect();
    report::summary_table_with(
        &trials,
        &["on Cloudflare", "passed before 1st 429 / limit"],
        &extra,
    )
}

/// What `results.json` holds: enough for the drift report, and nothing of
/// the account's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CloudflareResults {
    /// The scripts' names, `PREFIX-SUFFIX-N`.
    pub scripts: String,
    /// The first and last namespace id used.
    pub namespace_ids: Option<(u64, u64)>,
    /// How long the run took.
    pub seconds: u64,
    /// Sorted by name.
    pub scenarios: Vec<ScenarioResult>,
}

/// One scenario in [`CloudflareResults`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScenarioResult {
    /// The trial's name.
    pub name: String,
    /// `pass` or `FAIL`.
    pub verdict: String,
    /// `exact` or `bounded xN`.
    pub on_cloudflare: String,
    /// `step N: passed/limit` for each step that expected or saw a 429.
    pub passed_before_first_429: String,
    /// The requests it sent.
    pub requests: usize,
    /// How long it took, deploy included.
    pub seconds: f64,
    /// How long its new Worker's URL took to answer (none: it never did).
    pub answered_after_seconds: Option<f64>,
    /// Why it failed, if it did.
    pub message: String,
}

impl CloudflareResults {
    /// The results of `plan`'s run.
    pub fn of(
        plan: &CloudflareRun,
        outcomes: &[CloudflareOutcome],
        took: Duration,
    ) -> CloudflareResults {
        CloudflareResults {
            scripts: format!("{}N", plan.script_stem),
            namespace_ids: plan.namespace_ids(),
            seconds: took.as_secs(),
            scenarios: outcomes
                .iter()
                .map(|o| ScenarioResult {
                    name: o.trial.name.clone(),
                    verdict: o.trial.verdict.label().to_owned(),
                    on_cloudflare: o.label.clone(),
                    passed_before_first_429: o.figures_short(),
                    requests: o.trial.requests,
                    seconds: o.trial.duration.as_secs_f64(),
                    answered_after_seconds: o.answered_after.map(|d| d.as_secs_f64()),
                    message: o.trial.message.clone(),
                })
                .collect(),
        }
    }

    /// Reads `results.json`.
    pub fn read(path: &Path) -> Result<CloudflareResults, String> {
        let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
        serde_json::from_str(&text).map_err(|e| e.to_string())
    }
}

/// Writes `results.json`, `report.md` (the table and every failure),
/// `junit.xml` (one suite, `cloudflare`; each case's check and figures as
/// properties) and, last, `report.html` (the report page of `harness run`,
/// [`html_report::render`]: each scenario's timeline, on Cloudflare's clock,
/// in one lane) into `dir`, for `plan`'s run.
pub fn write(
    dir: &Path,
    plan: &CloudflareRun,
    results: &CloudflareResults,
    outcomes: &[CloudflareOutcome],
    summary: &str,
) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let trials: Vec<TrialOutcome> = outcomes.iter().map(|o| o.trial.clone()).collect();
    std::fs::write(
        dir.join("results.json"),
        serde_json::to_string_pretty(results).unwrap_or_default() + "\n",
    )?;
    let mut markdown = format!(
        "# On Cloudflare itself\n\n{summary}\n\n```\n{}\n```\n",
        table(outcomes)
    );
    for o in outcomes.iter().filter(|o| !o.trial.verdict.is_ok()) {
        markdown.push_str(&format!(
            "\n<details><summary>{}</summary>\n\n```\n{}\n```\n</details>\n",
            o.trial.name, o.trial.message
        ));
    }
    std::fs::write(dir.join("report.md"), markdown)?;
    report::write_junit_with(&dir.join("junit.xml"), &[("cloudflare", &trials)], |t| {
        outcomes
            .iter()
            .find(|o| o.trial.name == t.name)
            .map(|o| {
                let mut properties = vec![("on_cloudflare".to_owned(), o.label.clone())];
                properties.extend(o.figures.iter().filter_map(|f| {
                    Some((
                        format!("step {}: passed before the first 429", f.step),
                        f.passed_before_refusal?.to_string(),
                    ))
                }));
                properties
            })
            .unwrap_or_default()
    })?;
    // The page last: the nightly job's drift report reads the files above,
    // which a page that cannot be rendered must not cost.
    let page = html_report::render(
        &RunInfo {
            ran_on: RanOn::Cloudflare {
                scripts: &results.scripts,
                compatibility_date: &plan.compatibility_date,
            },
            worker: super::WORKER.name(),
            skipped: plan.left_out.len(),
        },
        &trials,
    )
    .map_err(std::io::Error::other)?;
    std::fs::write(dir.join("report.html"), page)
}

/// `N passed, N failed`.
pub fn counts_line(outcomes: &[CloudflareOutcome]) -> (String, bool) {
    let trials: Vec<TrialOutcome> = outcomes.iter().map(|o| o.trial.clone()).collect();
    let counts = Counts::of(&trials);
    (
        format!(
            "{} passed, {} failed",
            counts.passed + counts.expected_failures,
            counts.failed + counts.unexpected_passes
        ),
        counts.is_ok(),
    )
}
