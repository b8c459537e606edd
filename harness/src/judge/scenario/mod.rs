//! Judges an [`Observation`] against a scenario's expectations. Plain
//! functions, no I/O: each failure names the place in the scenario file,
//! the step and request, what was expected and what happened.
//!
//! One file per kind of expectation: `answers` (each request answered,
//! its status, headers, body and latency), `deadline` (the waits for a
//! deadline, judged against load probes), `logs` (the fallback lines, and
//! no key in any line), `binding_keys`, `redis_calls` (the calls Redis
//! ran), `limit_calls` (raw `limit()` calls) and `metrics` (the limiter's
//! metrics and data points, no key in them). `failure` is what a failed
//! expectation says, `send_step` a `send` step as its judging sees it, and
//! `summary` the short forms a report shows. Everything is used from here,
//! by these names.

mod answers;
mod binding_keys;
mod deadline;
mod failure;
mod limit_calls;
mod logs;
mod metrics;
mod redis_calls;
mod send_step;
mod summary;
#[cfg(test)]
pub(in crate::judge) mod test_support;

use std::collections::BTreeSet;
use std::ops::Range;

use toml::Spanned;

use answers::answered;
pub(super) use answers::{
    body_fields, latency_bounds, no_5xx, response_headers, retry_after_of_429s, status_counts,
    status_sequence,
};
use binding_keys::binding_keys;
use deadline::deadline_waits;
pub use deadline::{DEADLINE_GRAIN_MS, longest_wait_ms, probe_baseline_ms};
pub use failure::Failure;
pub(super) use failure::Failures;
use limit_calls::limit_calls;
pub use logs::{FallbackLine, fallback_line, shadow_refusal_line};
use logs::{fallback_lines, shadow_refusal_lines};
pub(super) use logs::{instance_name, no_key_logged};
pub use metrics::DATA_POINTS_EVENT;
use metrics::{data_points_lines, final_metrics, metric_changes, no_key_in_metrics};
use redis_calls::redis_round_trips;
pub(super) use send_step::SendStep;
pub(super) use summary::status_text;
pub use summary::{latencies, latency_summary, summarise};

use crate::engine::Observation;
use crate::language::scenario::{Action, Prepared, Scenario, SendExpectations};

/// A check of the whole run: one kind of expectation.
type RunCheck = fn(&Scenario, &Observation, &mut Failures<'_>);

/// Every kind of expectation of a scenario with steps, in the order its
/// failures are reported. A new kind is one function (in a file of its own) and one row here.
const RUN_CHECKS: [(&str, RunCheck); 9] = [
    ("send steps", send_steps),
    ("raw limit() calls", limit_calls),
    ("fallback lines", fallback_lines),
    ("shadow refusal lines", shadow_refusal_lines),
    ("data points lines", data_points_lines),
    ("binding keys", binding_keys),
    ("metrics at the end", final_metrics),
    ("no key in any log line", no_key_logged),
    ("no key in any metric", no_key_in_metrics),
];

/// Every failure of one run.
pub fn judge(prepared: &Prepared, observation: &Observation) -> Vec<Failure> {
    let source = &prepared.scenario;
    let scenario = source.scenario.get_ref();
    let mut failures = Failures {
        source,
        list: Vec::new(),
        step: None,
    };
    if let Some(codes) = &scenario.expect_diagnostics {
        diagnostics(codes, observation, &mut failures);
    } else {
        for (_, run_check) in RUN_CHECKS {
            run_check(scenario, observation, &mut failures);
        }
    }
    failures.list
}

/// `expect_diagnostics`: exactly these codes (a scenario with them has no steps).
fn diagnostics(codes: &Spanned<Vec<String>>, observation: &Observation, out: &mut Failures<'_>) {
    let expected: BTreeSet<&str> = codes.get_ref().iter().map(String::as_str).collect();
    let actual: BTreeSet<&str> = observation
        .diagnostics
        .iter()
        .flatten()
        .map(String::as_str)
        .collect();
    if expected != actual {
        out.fail(
            codes.span(),
            String::new(),
            "diagnostics differ",
            format!("{expected:?}"),
            format!("{actual:?}"),
        );
    }
}

/// Every `send` step's expectations.
fn send_steps(scenario: &Scenario, observation: &Observation, out: &mut Failures<'_>) {
    for (index, step) in scenario.steps.iter().enumerate() {
        let Ok(Action::Send { send, expect }) = step.get_ref().action() else {
            continue;
        };
        out.step = Some(index);
        let view = SendStep {
            index,
            span: step.span(),
            send,
            records: observation
                .requests
                .iter()
                .filter(|r| r.step == index)
                .collect(),
            redis_calls: observation.redis_calls.get(&index).copied(),
            metrics: observation.metrics_steps.get(&index),
            load_probes: observation
                .load_probes
                .get(&index)
                .map_or(&[], Vec::as_slice),
        };
        answered(&view, out);
        match expect {
            Some(expect) => send_expectations(&view, expect.span(), expect.get_ref(), out),
            None => no_5xx(&view, view.span.clone(), out),
        }
    }
    out.step = None;
}

/// Each expectation a `send` wrote, judged by its own function. The
/// destructuring has no `..`: a new field does not compile until it is judged.
fn send_expectations(
    view: &SendStep<'_>,
    span: Range<usize>,
    expectations: &SendExpectations,
    out: &mut Failures<'_>,
) {
    let SendExpectations {
        statuses,
        counts,
        no_5xx: no_5xx_wanted,
        retry_after,
        headers,
        body,
        latency,
        deadline,
        redis_calls,
        metrics,
        // How Cloudflare checks them: crate::judge::cloudflare.
        on_cloudflare: _,
    } = expectations;
    if *no_5xx_wanted {
        no_5xx(view, span, out);
    }
    if let Some(statuses) = statuses {
        status_sequence(view, statuses, out);
    }
    if let Some(counts) = counts {
        status_counts(view, counts, out);
    }
    if let Some(retry_after) = retry_after {
        retry_after_of_429s(view, retry_after, out);
    }
    if let Some(headers) = headers {
        response_headers(view, headers, out);
    }
    if let Some(body) = body {
        body_fields(view, body, out);
    }
    if let Some(latency) = latency {
        latency_bounds(view, latency, out);
    }
    if let Some(deadline) = deadline {
        deadline_waits(view, deadline, out);
    }
    if let Some(redis_calls) = redis_calls {
        redis_round_trips(view, redis_calls, out);
    }
    if let Some(metrics) = metrics {
        metric_changes(view, metrics, out);
    }
}
