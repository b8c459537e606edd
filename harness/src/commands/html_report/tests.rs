use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use super::*;
use crate::commands::report;
use crate::engine::{
    BindingCall, BindingOutcome, InstanceKind, InstanceRecord, Observation, RequestRecord,
    StepRecord,
};
use crate::judge::scenario::{Failure, judge};
use crate::language::scenario::Prepared;
use crate::world::process::{LogLine, Stream};

const ADDRESS: &str = "203.0.113.77";
const CALLER: &str = "caller-9d1e";

/// A scenario of three requests from one address expected to pass, a
/// binding made to throw, and three more from a caller.
fn prepared(dir: &Path) -> Prepared {
    let app = crate::world::paths::scenarios_dir().join("apps/cloudflare.toml");
    let text = format!(
        "application = \"{}\"\ndeployable = \"edge\"\n\n[[scenario]]\nname = \"three pass\"\n\n\
         [[scenario.steps]]\nsend = {{ requests = 3, address = \"{ADDRESS}\" }}\nexpect = {{ statuses = \"3 x 200\" }}\n\n\
         [[scenario.steps]]\nset_bindings = {{ LIMITS_120_PER_60S = \"throwing\" }}\n\n\
         [[scenario.steps]]\nadvance_clock = {{ seconds = 15 }}\n\n\
         [[scenario.steps]]\nsend = {{ requests = 3, caller = \"{CALLER}\", address = \"{ADDRESS}\" }}\n",
        app.display()
    );
    let path = dir.join("d.toml");
    std::fs::write(&path, text).expect("write");
    crate::language::scenario::load_file(&path, Path::new("d.toml"))
        .expect("loads")
        .remove(0)
}

fn request(step: usize, number: usize, status: u16, sent_ms: u64) -> RequestRecord {
    RequestRecord {
        step,
        number,
        isolate: 0,
        outcome: Ok(status),
        headers: BTreeMap::new(),
        body: format!("{{\"subject\":\"{ADDRESS}\"}}"),
        latency: Duration::from_millis(4),
        sent: Duration::from_millis(sent_ms),
    }
}

/// The run observed: the third request refused, a fallback line logged.
fn observed() -> Observation {
    let step = |index, started, ended, clock: (u64, u64)| StepRecord {
        index,
        started: Duration::from_millis(started),
        ended: Duration::from_millis(ended),
        clock_started_ms: clock.0,
        clock_ended_ms: clock.1,
    };
    let fallback =
        r#"{"event":"rate_limits.fallback","binding":"LIMITS_120_PER_60S","reason":"failed"}"#;
    Observation {
        requests: vec![
            request(0, 1, 200, 100),
            request(0, 2, 200, 105),
            request(0, 3, 429, 110),
            request(3, 1, 200, 200),
            request(3, 2, 200, 205),
            request(3, 3, 200, 210),
        ],
        steps: vec![
            step(0, 100, 120, (20, 40)),
            step(1, 120, 130, (40, 50)),
            step(2, 130, 140, (50, 15_060)),
            step(3, 200, 220, (15_120, 15_140)),
        ],
        instances: vec![InstanceRecord {
            kind: InstanceKind::Workerd,
            isolate: 0,
            generation: 0,
            lines: vec![LogLine {
                at: Duration::from_millis(202),
                stream: Stream::Stdout,
                text: fallback.to_owned(),
            }],
            served: true,
        }],
        sent_subjects: [ADDRESS.to_owned(), CALLER.to_owned()].into(),
        // The binding answered the first step; in the last, thrown, it was
        // left alone for one request and probed by the next.
        binding_calls: [
            (100, BindingOutcome::Answered(Duration::from_millis(1))),
            (105, BindingOutcome::Answered(Duration::from_millis(1))),
            (110, BindingOutcome::Answered(Duration::from_millis(1))),
            (200, BindingOutcome::Threw),
            (212, BindingOutcome::Answered(Duration::from_millis(1))),
        ]
        .into_iter()
        .map(|(at, outcome)| BindingCall {
            isolate: 0,
            generation: 0,
            binding: "LIMITS_120_PER_60S".into(),
            at: Duration::from_millis(at),
            outcome,
        })
        .collect(),
        duration: Duration::from_millis(900),
        ..Observation::default()
    }
}

/// The scenario of [`prepared`] judged on [`observed`]: a failure, with
/// its trace.
fn failing(prepared: &Prepared, observation: &Observation) -> report::TrialOutcome {
    let failures: Vec<String> = judge(prepared, observation)
        .iter()
        .map(Failure::to_string)
        .collect();
    assert!(!failures.is_empty(), "the third request was refused");
    let mut outcome = report::outcome(&prepared.trial_name, observation, failures);
    outcome.trace = Trace::of(prepared, observation);
    outcome
}

fn run() -> RunInfo<'static> {
    RunInfo {
        ran_on: RanOn::Workerd {
            workerd: "2026-11-17",
            core: "harness",
        },
        worker: "wasm-bindgen",
        skipped: 1,
    }
}

#[test]
fn a_failing_scenario_shows_its_place_its_block_and_a_mark_per_request() {
    let dir = tempfile::tempdir().expect("temp dir");
    let prepared = prepared(dir.path());
    let observation = observed();
    let outcome = failing(&prepared, &observation);
    let html = render(&run(), std::slice::from_ref(&outcome)).expect("renders");

    // The block the terminal shows, with its `file:line:col`, escaped once.
    let place = failed_at(&outcome.message).expect("a place");
    assert!(place.starts_with("d.toml:9:"), "{place}");
    assert!(html.contains(&format!("failed at <span class=\"place\">{place}</span>")));
    let first_line = outcome.message.lines().next().expect("a line");
    assert!(html.contains(&escape(first_line)), "{first_line}");
    let own = outcome.trace.place.clone().unwrap_or_default();
    assert!(
        html.contains(&own) && own.starts_with("d.toml:"),
        "the scenario's own place {own}"
    );
    // One mark per request, by status; the fallback line at its time.
    assert_eq!(html.matches("class=\"req ").count(), 6);
    assert_eq!(html.matches("class=\"req s429\"").count(), 1);
    assert_eq!(html.matches("class=\"fallback\"").count(), 1);
    assert!(html.contains("isolate 0: LIMITS_120_PER_60S failed at 15.122 s"));
    // The thrown binding's cool-off, shaded, and the call that probed it.
    assert_eq!(html.matches("<rect class=\"cooloff\"").count(), 1);
    assert_eq!(html.matches("<g class=\"probe\">").count(), 1);
    assert!(html.contains(
        "isolate 0: LIMITS_120_PER_60S not asked from 15.120 s (threw) to the probe at 15.132 s, answered in time"
    ));
    assert!(html.contains("isolate 0: LIMITS_120_PER_60S probed at 15.132 s: it answered in time"));
    // The steps as markers; the 10 s boundary inside the clock's break.
    assert!(html.contains("2. set_bindings LIMITS_120_PER_60S = throwing"));
    assert!(html.contains("class=\"break\""));
    assert!(html.contains("10 s window boundary at 10.000 s"));
    assert!(html.contains(">10 s</text>"));
    assert!(html.contains("1 passed") || html.contains("0 passed, 1 failed, 1 skipped"));
    assert!(html.contains("workerd 2026-11-17, counting core harness, Worker wasm-bindgen"));
    // No key: nothing a request carried is written into the page.
    for key in &observation.sent_subjects {
        assert!(!html.contains(key.as_str()), "{key} is in the page");
    }
    // Self-contained: nothing is fetched.
    for fetch in ["src=", "href=\"http", "@import", "url("] {
        assert!(!html.contains(fetch), "{fetch} in the page");
    }
}

#[test]
fn a_malformed_file_is_a_failed_row_at_its_place_with_no_timeline() {
    let outcome = report::malformed("x.toml::(file)", "x.toml:3:7: unknown field `sendd`");
    let html = render(&run(), &[outcome]).expect("renders");
    assert!(html.contains("<td class=\"place\">x.toml:3:7</td>"));
    assert!(html.contains("No step ran."));
    assert_eq!(html.matches("class=\"req ").count(), 0);
    assert!(html.contains("data-result=\"failed\""));
}

#[test]
fn times_read_as_seconds_and_minutes() {
    assert_eq!(seconds(12_345.0), "12.345 s");
    assert_eq!(seconds(62_345.0), "1:02.345");
    assert_eq!(escape("<a & \"b\">"), "&lt;a &amp; &quot;b&quot;&gt;");
}

fn side<'a>(label: &'a str, outcomes: &'a [TrialOutcome]) -> DriftSide<'a> {
    DriftSide {
        label,
        workerd_version: "2026-11-17",
        npm_version: "1.20261117.1",
        outcomes,
    }
}

#[test]
fn the_drift_page_lists_a_changed_scenario_first_marked_with_its_block_and_no_key() {
    let dir = tempfile::tempdir().expect("temp dir");
    let prepared = prepared(dir.path());
    let observation = observed();
    let failing = failing(&prepared, &observation);
    let mut passing = report::outcome(&prepared.trial_name, &observation, Vec::new());
    passing.trace = failing.trace.clone();
    let mut steady = passing.clone();
    steady.name = "steady".into();
    let pinned = [steady.clone(), passing.clone()];
    let newest = [steady.clone(), failing.clone()];
    let reference = [steady, passing];
    let html = drift_page([
        side("pinned", &pinned),
        side("newest", &newest),
        side("reference", &reference),
    ])
    .expect("renders");

    let changed = html
        .find(&format!(
            "<tr class=\"scenario-row changed\" data-name=\"{}\"",
            escape(&prepared.trial_name)
        ))
        .expect("the changed row, marked");
    let steady = html
        .find("<tr class=\"scenario-row unchanged\" data-name=\"steady\"")
        .expect("the steady row");
    assert!(changed < steady, "what changed is listed first");
    assert_eq!(html.matches("class=\"scenario-row ").count(), 2);
    assert!(html.contains("1 changed</span> of 2 scenarios"));
    assert!(html.contains(
        "<th scope=\"col\">pinned</th><th scope=\"col\">newest</th><th scope=\"col\">reference</th>"
    ));
    assert!(html.contains(&format!("p99 {} ms, 0.9 s", failing.p99_ms.expect("a p99"))));
    // The failure's block, on the newest only.
    let first_line = failing.message.lines().next().expect("a line");
    assert!(html.contains(&escape(first_line)), "{first_line}");
    assert_eq!(html.matches("<pre class=\"failure\">").count(), 1);
    assert!(html.contains(" on newest</h2>"));
    // The report page's filter script and style.
    assert!(html.contains(FILTER) && html.contains(STYLE) && html.contains("id=\"filter\""));
    for key in &observation.sent_subjects {
        assert!(!html.contains(key.as_str()), "{key} is in the page");
    }
    for fetch in ["src=", "href=\"http", "@import", "url("] {
        assert!(!html.contains(fetch), "{fetch} in the page");
    }
}

#[test]
fn a_shadow_limits_first_would_be_refusal_is_on_the_timeline_at_its_time_with_its_limit() {
    let dir = tempfile::tempdir().expect("temp dir");
    let prepared = prepared(dir.path());
    let mut observation = observed();
    // As workerd's structured logging writes a Worker's console line.
    let shadow = serde_json::json!({
        "message": r#"{"event":"rate_limits.shadow_refusal","limit":"/api/search"}"#,
    })
    .to_string();
    observation.instances[0].lines.push(LogLine {
        at: Duration::from_millis(205),
        stream: Stream::Stderr,
        text: shadow,
    });
    let outcome = failing(&prepared, &observation);
    assert_eq!(
        outcome.trace.shadow_refusals.len(),
        1,
        "{:?}",
        outcome.trace
    );
    let html = render(&run(), std::slice::from_ref(&outcome)).expect("renders");
    assert_eq!(html.matches("<path class=\"shadow\"").count(), 1);
    assert!(
        html.contains("isolate 0: shadow limit /api/search would first have refused at 15.125 s")
    );
    assert!(html.contains("Shadow limits' first would-be refusals (1)"));
    // The list as the template escapes it (`/` too).
    assert!(html.contains("<li>isolate 0: &#x2f;api&#x2f;search at 15.125 s</li>"));
    // Without the line, no mark.
    let plain = failing(&prepared, &observed());
    let html = render(&run(), std::slice::from_ref(&plain)).expect("renders");
    assert_eq!(html.matches("<path class=\"shadow\"").count(), 0);
}
