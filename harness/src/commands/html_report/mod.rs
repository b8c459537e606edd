//! The report page `harness run --html FILE` and `harness cloudflare`
//! (`report.html`) write: one self-contained HTML file (no network: its
//! style, its script and its charts are inline) with where the run ran
//! (workerd and counting core, or Cloudflare's edge) and its Worker, the
//! counts, a table of the scenarios that can be filtered by name and
//! result, and for each scenario its timeline ([`timeline`]), its latency
//! histogram ([`histogram`]) and, for a failure, the block the terminal
//! shows.
//!
//! [`render`] is a plain function of the run's outcomes; the command writes
//! the file. The page is made from each outcome's [`Trace`], which holds
//! statuses, times and isolate indexes, never a key.

mod drift;
mod histogram;
mod timeline;

use serde::Serialize;

use crate::commands::report::{Counts, TrialOutcome};
use crate::commands::trace::Trace;
use crate::judge::expected_failures::Verdict;

pub use drift::{DriftSide, drift_page};
pub use timeline::status_class;

/// The page's template: its layout; the style and the filter script are
/// shared with the drift page ([`drift_page`]).
const TEMPLATE: &str = include_str!("report.html");

/// The pages' style.
const STYLE: &str = include_str!("page.css");

/// The pages' filter script: the rows and sections carrying `data-name`
/// and `data-result` shown by the `#filter` text and the `result` boxes.
const FILTER: &str = include_str!("filter.js");

/// The pages' filter form, for [`FILTER`]: it reads the page's `results`
/// (the boxes) and `total`.
const CONTROLS: &str = include_str!("controls.html");

/// `template` (named `name`) rendered with `context`, and the shared parts
/// as `style` (the style element), `filter` (the script element) and
/// `controls` (the filter form, rendered with `context`).
fn render_page(
    name: &'static str,
    template: &'static str,
    context: &impl Serialize,
) -> Result<String, HtmlError> {
    #[derive(Serialize)]
    struct Shared<'a, T> {
        style: String,
        filter: String,
        controls: String,
        #[serde(flatten)]
        page: &'a T,
    }
    let mut env = minijinja::Environment::new();
    env.add_template("controls.html", CONTROLS)?;
    env.add_template(name, template)?;
    let controls = env
        .get_template("controls.html")?
        .render(minijinja::Value::from(minijinja::value::Serde(context)))?;
    let context = minijinja::Value::from(minijinja::value::Serde(&Shared {
        style: format!("<style>\n{STYLE}</style>"),
        filter: format!("<script>\n{FILTER}</script>"),
        controls,
        page: context,
    }));
    Ok(env.get_template(name)?.render(context)?)
}

/// What the page says of the run as a whole, beside its outcomes.
#[derive(Debug, Clone, Copy)]
pub struct RunInfo<'a> {
    /// Where it ran.
    pub ran_on: RanOn<'a>,
    /// The Worker's name (`wasm-bindgen`, ...).
    pub worker: &'a str,
    /// How many scenarios were not run: the slow ones, unless included; on
    /// Cloudflare, those not marked `on_cloudflare`, which stay local.
    pub skipped: usize,
}

/// Where a run ran, as its page's header says: nothing of an account's
/// (no account id, token or workers.dev subdomain) is among it.
#[derive(Debug, Clone, Copy)]
pub enum RanOn<'a> {
    /// A local run (`harness run`).
    Workerd {
        /// The workerd version the run used.
        workerd: &'a str,
        /// The counting core's name (`harness`, `reference`).
        core: &'a str,
    },
    /// Cloudflare's edge (`harness cloudflare`).
    Cloudflare {
        /// The scripts' names, `PREFIX-SUFFIX-N`: the run's own, which
        /// `clean --prefix` also reads.
        scripts: &'a str,
        /// The Workers' compatibility date (the pinned workerd's).
        compatibility_date: &'a str,
    },
}

impl RanOn<'_> {
    /// The page's heading, its line on where the run ran (with `worker`),
    /// and what it calls the scenarios not run.
    fn header(&self, worker: &str) -> (&'static str, String, &'static str) {
        match self {
            RanOn::Workerd { workerd, core } => (
                "Conformance run",
                format!("workerd {workerd}, counting core {core}, Worker {worker}"),
                "skipped",
            ),
            RanOn::Cloudflare {
                scripts,
                compatibility_date,
            } => (
                "On Cloudflare itself",
                format!(
                    "Cloudflare's edge, the real binding: scripts {scripts}, Worker {worker}, compatibility date {compatibility_date}"
                ),
                "left local",
            ),
        }
    }
}

/// Why the page could not be made.
#[derive(Debug, thiserror::Error)]
pub enum HtmlError {
    /// The template did not render (a fault of the harness, not of the run).
    #[error("the report page's template: {0}")]
    Template(#[from] minijinja::Error),
}

/// The page's context: what the template reads.
#[derive(Debug, Serialize)]
struct Page {
    heading: &'static str,
    ran: String,
    skipped_label: &'static str,
    passed: usize,
    failed: usize,
    skipped: usize,
    expected_failures: usize,
    unexpected_passes: usize,
    total: usize,
    results: Vec<(&'static str, &'static str)>,
    scenarios: Vec<Scenario>,
}

/// One scenario as the page shows it.
#[derive(Debug, Serialize)]
struct Scenario {
    id: String,
    name: String,
    result: &'static str,
    result_label: &'static str,
    place: String,
    failed_at: Option<String>,
    requests: usize,
    p50: String,
    p99: String,
    time: String,
    message: String,
    timeline: Option<String>,
    histogram: Option<String>,
    statuses: Vec<(String, usize)>,
    steps: Vec<String>,
    fallbacks: Vec<String>,
    shadow_refusals: Vec<String>,
    cool_offs: Vec<String>,
}

/// The results a scenario can have: (value of the filter, what it says).
const RESULTS: [(&str, &str); 4] = [
    ("passed", "passed"),
    ("failed", "failed"),
    ("expected", "expected failure"),
    ("unexpected", "unexpected pass"),
];

fn result_of(verdict: &Verdict) -> (&'static str, &'static str) {
    match verdict {
        Verdict::Passed => RESULTS[0],
        Verdict::Failed => RESULTS[1],
        Verdict::ExpectedFailure { .. } => RESULTS[2],
        Verdict::UnexpectedPass { .. } => RESULTS[3],
    }
}

/// The report page of a run that ended with `outcomes`.
pub fn render(run: &RunInfo<'_>, outcomes: &[TrialOutcome]) -> Result<String, HtmlError> {
    let counts = Counts::of(outcomes);
    let (heading, ran, skipped_label) = run.ran_on.header(run.worker);
    let page = Page {
        heading,
        ran,
        skipped_label,
        passed: counts.passed + counts.expected_failures,
        failed: counts.failed + counts.unexpected_passes,
        skipped: run.skipped,
        expected_failures: counts.expected_failures,
        unexpected_passes: counts.unexpected_passes,
        total: outcomes.len(),
        results: RESULTS.to_vec(),
        scenarios: outcomes
            .iter()
            .enumerate()
            .map(|(index, outcome)| scenario(index, outcome))
            .collect(),
    };
    render_page("report.html", TEMPLATE, &page)
}

/// The `file:line:col` of a failure's first `-->` line (a malformed
/// file's says what is wrong after the place).
fn failed_at(message: &str) -> Option<String> {
    message
        .lines()
        .find_map(|line| line.trim_start().strip_prefix("--> "))
        .and_then(|place| place.split(": ").next())
        .map(|place| place.trim().to_owned())
}

/// The block the terminal shows for `outcome`; empty for a pass.
fn message_of(outcome: &TrialOutcome) -> String {
    match &outcome.verdict {
        Verdict::UnexpectedPass { reason } => format!(
            "unexpected pass: listed in expected-failures.toml as failing ({reason}), but it passed; remove the entry"
        ),
        Verdict::Passed => String::new(),
        Verdict::Failed | Verdict::ExpectedFailure { .. } => outcome.message.clone(),
    }
}

fn scenario(index: usize, outcome: &TrialOutcome) -> Scenario {
    let (result, result_label) = result_of(&outcome.verdict);
    let message = message_of(outcome);
    let failed_at = failed_at(&message);
    let trace = &outcome.trace;
    let ms = |v: Option<u64>| v.map_or("-".to_owned(), |v| v.to_string());
    let latencies: Vec<f64> = trace.requests.iter().map(|r| r.latency_ms).collect();
    Scenario {
        id: format!("s{index}"),
        name: outcome.name.clone(),
        result,
        result_label,
        // The line that failed, where one did; else where the scenario is.
        place: failed_at
            .clone()
            .or_else(|| trace.place.clone())
            .unwrap_or_default(),
        failed_at,
        requests: outcome.requests,
        p50: ms(outcome.p50_ms),
        p99: ms(outcome.p99_ms),
        time: format!("{:.1}", outcome.duration.as_secs_f64()),
        message,
        timeline: timeline::timeline(trace, &outcome.name),
        histogram: histogram::histogram(&latencies),
        statuses: statuses(trace),
        steps: trace
            .steps
            .iter()
            .map(|s| {
                format!(
                    "{}. {} at {} ({} ms)",
                    s.number,
                    s.label,
                    seconds(s.clock_started_ms),
                    s.real_ms.round()
                )
            })
            .collect(),
        fallbacks: trace
            .fallbacks
            .iter()
            .map(|f| {
                format!(
                    "{}: {} {} at {}",
                    trace.lanes.name(f.isolate),
                    f.binding,
                    f.reason,
                    seconds(f.clock_ms)
                )
            })
            .collect(),
        shadow_refusals: trace
            .shadow_refusals
            .iter()
            .map(|s| {
                format!(
                    "{}: {} at {}",
                    trace.lanes.name(s.isolate),
                    s.limit,
                    seconds(s.clock_ms)
                )
            })
            .collect(),
        cool_offs: trace
            .cool_offs
            .iter()
            .map(|c| {
                format!(
                    "{}: {} not asked from {} ({}) {}",
                    trace.lanes.name(c.isolate),
                    c.binding,
                    seconds(c.started_ms),
                    c.trouble,
                    match c.probe {
                        Some(p) if p.answered =>
                            format!("to the probe at {}, answered in time", seconds(p.clock_ms)),
                        Some(p) =>
                            format!("to the probe at {}, troubled again", seconds(p.clock_ms)),
                        None => format!("to {}, with no probe", seconds(c.ended_ms)),
                    }
                )
            })
            .collect(),
    }
}

/// How many requests were answered each way: `200`, `429`, others by
/// status, `no response` last.
fn statuses(trace: &Trace) -> Vec<(String, usize)> {
    let mut counts: std::collections::BTreeMap<Option<u16>, usize> = Default::default();
    for request in &trace.requests {
        *counts.entry(request.status).or_default() += 1;
    }
    let mut out: Vec<(String, usize)> = counts
        .iter()
        .filter_map(|(status, n)| status.map(|s| (s.to_string(), *n)))
        .collect();
    if let Some(lost) = counts.get(&None) {
        out.push(("no response".to_owned(), *lost));
    }
    out
}

/// A time on the scenario clock (ms since its minute began) as people read
/// it: `12.345 s`, or `1:02.345` from the minute on.
fn seconds(ms: f64) -> String {
    let total = ms.max(0.0) / 1000.0;
    if total < 60.0 {
        format!("{total:.3} s")
    } else {
        let minutes = (total / 60.0).floor();
        format!("{minutes:.0}:{:06.3}", total - minutes * 60.0)
    }
}

/// `text` escaped for SVG (XML) text and attributes.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests;
