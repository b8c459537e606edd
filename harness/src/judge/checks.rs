//! Judges an [`Observation`] against a scenario's expectations. Plain
//! functions, no I/O: each failure names the place in the scenario file,
//! the step and request, what was expected and what happened.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::ops::Range;

use toml::Spanned;

use crate::engine::{InstanceRecord, Observation, RequestRecord};
use crate::judge::stats::percentile;
use crate::language::scenario::{
    Action, Latency, Place, Prepared, RedisCalls, Scenario, ScenarioSource, SendExpectations,
    SendRequests, expand_statuses, parse_statuses,
};
use crate::world::text::shortened;

/// One expectation that did not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The expectation's place in the scenario file, so an editor can jump there.
    pub place: Place,
    /// Such as `step 2 (send), request 121`.
    pub context: String,
    /// Which expectation, such as `status sequence`.
    pub what: String,
    /// What the scenario says.
    pub expected: String,
    /// What the run gave.
    pub actual: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "error: {}", self.what)?;
        writeln!(f, "  --> {}", self.place)?;
        if !self.context.is_empty() {
            writeln!(f, "   | {}", self.context)?;
        }
        writeln!(f, "   | expected: {}", self.expected)?;
        write!(f, "   | actual:   {}", self.actual)
    }
}

/// A `rate_limits.fallback` line, as read from workerd's output.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct FallbackLine {
    /// The binding (Workers) or store connection (native) that failed.
    pub binding: String,
    /// `missing`, `failed` or `timed_out`.
    pub reason: String,
}

/// The fallback event in one line of a process's output, if it is one.
/// workerd's structured logging puts the event's JSON inside the line's
/// `message`, naming the `binding`; a native instance's `tracing` JSON line
/// is the event itself, naming the `connection`.
pub fn fallback_line(line: &str) -> Option<Result<FallbackLine, String>> {
    let outer: serde_json::Value = serde_json::from_str(line).ok()?;
    let inner = outer
        .get("message")
        .and_then(|m| m.as_str())
        .and_then(|message| serde_json::from_str::<serde_json::Value>(message).ok())
        .filter(serde_json::Value::is_object);
    let event = inner.unwrap_or(outer);
    if event.get("event")?.as_str()? != runtime::limiter::FallbackLog::EVENT {
        return None;
    }
    let field = |name: &str| event.get(name).and_then(|v| v.as_str()).map(str::to_owned);
    Some(
        match (
            field("binding").or_else(|| field("connection")),
            field("reason"),
        ) {
            (Some(binding), Some(reason)) => Ok(FallbackLine { binding, reason }),
            _ => Err(format!("a fallback line without binding or reason: {line}")),
        },
    )
}

/// Where failures of one run are collected, pointing into its scenario file.
pub(super) struct Failures<'a> {
    pub(super) source: &'a ScenarioSource,
    pub(super) list: Vec<Failure>,
}

impl Failures<'_> {
    pub(super) fn fail(
        &mut self,
        span: Range<usize>,
        context: String,
        what: &str,
        expected: String,
        actual: String,
    ) {
        self.list.push(Failure {
            place: self.source.place(span),
            context,
            what: what.to_owned(),
            expected,
            actual,
        });
    }
}

/// A check of the whole run: one kind of expectation.
type RunCheck = fn(&Scenario, &Observation, &mut Failures<'_>);

/// Every kind of expectation of a scenario with steps, in the order its
/// failures are reported. A new kind is one function and one row here.
const RUN_CHECKS: [(&str, RunCheck); 5] = [
    ("send steps", send_steps),
    ("raw limit() calls", limit_calls),
    ("fallback lines", fallback_lines),
    ("binding keys", binding_keys),
    ("no key in any log line", no_key_logged),
];

/// Every failure of one run.
pub fn check(prepared: &Prepared, observation: &Observation) -> Vec<Failure> {
    let source = &prepared.scenario;
    let scenario = source.scenario.get_ref();
    let mut failures = Failures {
        source,
        list: Vec::new(),
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

/// One `send` step as its checks see it: its requests' records, in order of arrival.
pub(super) struct SendStep<'a> {
    /// 0-based.
    pub(super) index: usize,
    pub(super) span: Range<usize>,
    pub(super) send: &'a SendRequests,
    pub(super) records: Vec<&'a RequestRecord>,
    /// The script calls Redis ran during the step, when its expectations count them.
    pub(super) redis_calls: Option<RedisCalls>,
}

impl SendStep<'_> {
    pub(super) fn context(&self, number: usize) -> String {
        format!("step {} (send), request {number}", self.index + 1)
    }

    pub(super) fn step_context(&self) -> String {
        format!("step {} (send)", self.index + 1)
    }
}

/// `limit` steps: each raw call gave the outcome its step names.
fn limit_calls(scenario: &Scenario, observation: &Observation, out: &mut Failures<'_>) {
    for (index, step) in scenario.steps.iter().enumerate() {
        let Ok(Action::Limit(call)) = step.get_ref().action() else {
            continue;
        };
        let actual = observation.calls.iter().find(|c| c.step == index);
        if actual.map(|c| &c.outcome) != Some(&call.outcome) {
            out.fail(
                step.span(),
                format!("step {} (limit), isolate {}", index + 1, call.isolate),
                &format!("{}.limit() outcome", call.binding),
                call.outcome.to_string(),
                actual.map_or_else(|| "not called".to_owned(), |c| c.outcome.to_string()),
            );
        }
    }
}

/// Every `send` step's expectations.
fn send_steps(scenario: &Scenario, observation: &Observation, out: &mut Failures<'_>) {
    for (index, step) in scenario.steps.iter().enumerate() {
        let Ok(Action::Send { send, expect }) = step.get_ref().action() else {
            continue;
        };
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
        };
        answered(&view, out);
        match expect {
            Some(expect) => send_expectations(&view, expect.span(), expect.get_ref(), out),
            None => no_5xx(&view, view.span.clone(), out),
        }
    }
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
        redis_calls,
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
    if let Some(redis_calls) = redis_calls {
        redis_round_trips(view, redis_calls, out);
    }
}

/// `redis_calls`: the EVALSHA and EVAL calls Redis ran during the step.
fn redis_round_trips(view: &SendStep<'_>, calls: &Spanned<RedisCalls>, out: &mut Failures<'_>) {
    let RedisCalls { evalsha, eval } = *calls.get_ref();
    let actual = view.redis_calls.unwrap_or_default();
    for (command, wanted, actual) in [
        ("EVALSHA", evalsha, actual.evalsha),
        ("EVAL", eval, actual.eval),
    ] {
        let Some(wanted) = wanted else { continue };
        if actual != Some(wanted) {
            out.fail(
                calls.span(),
                view.step_context(),
                &format!("{command} calls Redis ran (INFO commandstats)"),
                wanted.to_string(),
                actual.map_or_else(|| "not read".to_owned(), |n| n.to_string()),
            );
        }
    }
}

/// Every request of the step was answered or failed: none went missing.
fn answered(view: &SendStep<'_>, out: &mut Failures<'_>) {
    if view.records.len() != view.send.requests {
        out.fail(
            view.span.clone(),
            view.step_context(),
            "requests answered",
            view.send.requests.to_string(),
            view.records.len().to_string(),
        );
    }
}

/// `no_5xx` (on by default): every request got a response below 500.
pub(super) fn no_5xx(view: &SendStep<'_>, span: Range<usize>, out: &mut Failures<'_>) {
    for r in &view.records {
        match &r.outcome {
            Ok(status) if *status < 500 => {}
            Ok(status) => out.fail(
                span.clone(),
                view.context(r.number),
                "no 5xx",
                "a status below 500".into(),
                format!("{status}: {}", shortened(&r.body, 200)),
            ),
            Err(error) => out.fail(
                span.clone(),
                view.context(r.number),
                "no failed request",
                "a response".into(),
                error.clone(),
            ),
        }
    }
}

/// `statuses`: the statuses in request order; the first difference is shown.
pub(super) fn status_sequence(
    view: &SendStep<'_>,
    statuses: &Spanned<String>,
    out: &mut Failures<'_>,
) {
    let Ok(wanted) = parse_statuses(statuses.get_ref())
        .and_then(|runs| expand_statuses(&runs, view.send.requests))
    else {
        return;
    };
    let mismatches: Vec<(usize, u16, String)> = view
        .records
        .iter()
        .filter_map(|r| {
            let expected = *wanted.get(r.number - 1)?;
            let actual = status_text(r);
            (actual != expected.to_string()).then_some((r.number, expected, actual))
        })
        .collect();
    if let Some((number, expected, actual)) = mismatches.first() {
        out.fail(
            statuses.span(),
            view.context(*number),
            &format!(
                "status sequence `{}` ({} of {} requests differ)",
                statuses.get_ref(),
                mismatches.len(),
                view.records.len()
            ),
            expected.to_string(),
            format!("{actual} (whole step: {})", summarise(&view.records)),
        );
    }
}

/// `counts`: how many responses had each status, in any order.
pub(super) fn status_counts(
    view: &SendStep<'_>,
    counts: &Spanned<BTreeMap<String, usize>>,
    out: &mut Failures<'_>,
) {
    let mut actual: BTreeMap<String, usize> = BTreeMap::new();
    for r in &view.records {
        *actual.entry(status_text(r)).or_default() += 1;
    }
    let expected: BTreeMap<String, usize> = counts
        .get_ref()
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    if expected != actual {
        out.fail(
            counts.span(),
            view.step_context(),
            "status counts",
            format!("{expected:?}"),
            format!("{actual:?}"),
        );
    }
}

/// `retry_after`: the `Retry-After` of every 429.
pub(super) fn retry_after_of_429s(
    view: &SendStep<'_>,
    retry_after: &Spanned<u32>,
    out: &mut Failures<'_>,
) {
    let wanted = retry_after.get_ref().to_string();
    for r in view.records.iter().filter(|r| r.outcome == Ok(429)) {
        let got = r
            .headers
            .get("retry-after")
            .cloned()
            .unwrap_or_else(|| "(none)".into());
        if got != wanted {
            out.fail(
                retry_after.span(),
                view.context(r.number),
                "Retry-After of a 429",
                wanted.clone(),
                got,
            );
        }
    }
}

/// `headers`: these headers, with these values, on every response.
pub(super) fn response_headers(
    view: &SendStep<'_>,
    headers: &Spanned<BTreeMap<String, String>>,
    out: &mut Failures<'_>,
) {
    for r in &view.records {
        for (name, value) in headers.get_ref() {
            let got = r
                .headers
                .get(&name.to_ascii_lowercase())
                .cloned()
                .unwrap_or_else(|| "(none)".into());
            if &got != value {
                out.fail(
                    headers.span(),
                    view.context(r.number),
                    &format!("header {name}"),
                    value.clone(),
                    got,
                );
            }
        }
    }
}

/// `body`: these JSON fields, with these values, in every response body.
pub(super) fn body_fields(
    view: &SendStep<'_>,
    body: &Spanned<BTreeMap<String, toml::Value>>,
    out: &mut Failures<'_>,
) {
    for r in &view.records {
        let json: serde_json::Value =
            serde_json::from_str(&r.body).unwrap_or(serde_json::Value::Null);
        for (field, value) in body.get_ref() {
            let wanted = serde_json::to_value(value).unwrap_or_default();
            let got = json.get(field).cloned().unwrap_or(serde_json::Value::Null);
            if got != wanted {
                out.fail(
                    body.span(),
                    view.context(r.number),
                    &format!("body field `{field}`"),
                    wanted.to_string(),
                    format!("{got} in {}", shortened(&r.body, 200)),
                );
            }
        }
    }
}

/// `latency`: the step's fastest, slowest, median and 99th percentile.
pub(super) fn latency_bounds(
    view: &SendStep<'_>,
    latency: &Spanned<Latency>,
    out: &mut Failures<'_>,
) {
    let mut ms: Vec<u64> = view
        .records
        .iter()
        .map(|r| r.latency.as_millis() as u64)
        .collect();
    ms.sort_unstable();
    let Latency {
        min_ms,
        max_ms,
        p50_ms,
        p99_ms,
    } = latency.get_ref();
    let context = format!(
        "step {} (send), {} requests, latencies {}",
        view.index + 1,
        ms.len(),
        latency_summary(&ms)
    );
    let bounds = [
        ("fastest request", *min_ms, ms.first().copied(), false),
        ("slowest request", *max_ms, ms.last().copied(), true),
        ("median latency", *p50_ms, percentile(&ms, 50), true),
        (
            "99th percentile latency",
            *p99_ms,
            percentile(&ms, 99),
            true,
        ),
    ];
    for (what, limit, actual, at_most) in bounds {
        let (Some(limit), Some(actual)) = (limit, actual) else {
            continue;
        };
        let ok = if at_most {
            actual <= limit
        } else {
            actual >= limit
        };
        if !ok {
            let relation = if at_most { "at most" } else { "at least" };
            out.fail(
                latency.span(),
                context.clone(),
                what,
                format!("{relation} {limit} ms"),
                format!("{actual} ms"),
            );
        }
    }
}

/// `[[expect.fallback]]`: each process that served traffic logged exactly
/// these fallback lines (none when the list is empty), each well formed.
fn fallback_lines(scenario: &Scenario, observation: &Observation, out: &mut Failures<'_>) {
    let final_expect = scenario.expect.as_ref();
    let final_span = final_expect.map_or(out.source.scenario.span(), |e| e.span());
    let expected: BTreeMap<(String, String), usize> = final_expect
        .map(|e| {
            e.get_ref()
                .fallback
                .iter()
                .filter(|f| f.per_isolate > 0)
                .map(|f| {
                    (
                        (f.binding.clone(), f.reason.as_str().to_owned()),
                        f.per_isolate,
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    for instance in &observation.instances {
        let mut actual: BTreeMap<(String, String), usize> = BTreeMap::new();
        for line in &instance.lines {
            match fallback_line(&line.text) {
                Some(Ok(f)) => *actual.entry((f.binding, f.reason)).or_default() += 1,
                Some(Err(message)) => out.fail(
                    final_span.clone(),
                    instance_name(instance),
                    "fallback line shape",
                    "{\"event\":\"rate_limits.fallback\",\"binding\":…,\"reason\":…}".into(),
                    message,
                ),
                None => {}
            }
        }
        let wanted = if instance.served {
            expected.clone()
        } else {
            BTreeMap::new()
        };
        if actual != wanted {
            out.fail(
                final_span.clone(),
                instance_name(instance),
                "rate_limits.fallback lines (binding, reason) -> count",
                format!("{wanted:?}"),
                format!("{actual:?}"),
            );
        }
    }
}

/// `binding_keys`: exactly these keys reached each named binding.
fn binding_keys(scenario: &Scenario, observation: &Observation, out: &mut Failures<'_>) {
    let Some(keys) = scenario
        .expect
        .as_ref()
        .and_then(|e| e.get_ref().binding_keys.as_ref())
    else {
        return;
    };
    for (binding, wanted) in keys.get_ref() {
        let wanted: BTreeSet<String> = wanted.iter().cloned().collect();
        let actual = observation
            .binding_keys
            .get(binding)
            .cloned()
            .unwrap_or_default();
        if wanted != actual {
            out.fail(
                keys.span(),
                String::new(),
                &format!("keys that reached {binding}"),
                format!("{wanted:?}"),
                format!("{actual:?}"),
            );
        }
    }
}

/// Always: no caller id or address the scenario sent appears in any log line.
pub(super) fn no_key_logged(_: &Scenario, observation: &Observation, out: &mut Failures<'_>) {
    let whole = out.source.scenario.span();
    for instance in &observation.instances {
        for line in &instance.lines {
            if let Some(key) = observation
                .sent_subjects
                .iter()
                .find(|k| line.text.contains(k.as_str()))
            {
                out.fail(
                    whole.clone(),
                    instance_name(instance),
                    "no key in any log line",
                    format!("no line containing `{key}`"),
                    line.text.clone(),
                );
            }
        }
    }
}

pub(super) fn instance_name(instance: &InstanceRecord) -> String {
    let name = instance.kind.name(instance.isolate);
    if instance.generation == 0 {
        name
    } else {
        format!("{name} after restart {}", instance.generation)
    }
}

pub(super) fn status_text(record: &RequestRecord) -> String {
    match &record.outcome {
        Ok(status) => status.to_string(),
        Err(_) => "no response".to_owned(),
    }
}

/// `120 x 200 then 1 x 429`: the statuses of a step in order, run-length encoded.
pub fn summarise(records: &[&RequestRecord]) -> String {
    let mut sorted: Vec<&&RequestRecord> = records.iter().collect();
    sorted.sort_by_key(|r| r.number);
    let mut runs: Vec<(usize, String)> = Vec::new();
    for r in sorted {
        let status = status_text(r);
        match runs.last_mut() {
            Some((n, s)) if *s == status => *n += 1,
            _ => runs.push((1, status)),
        }
    }
    runs.iter()
        .map(|(n, s)| format!("{n} x {s}"))
        .collect::<Vec<_>>()
        .join(" then ")
}

/// `min/p50/p99/max` of sorted ms values.
pub fn latency_summary(sorted: &[u64]) -> String {
    let get = |v: Option<u64>| v.map_or("-".to_owned(), |v| v.to_string());
    format!(
        "min {} / p50 {} / p99 {} / max {} ms",
        get(sorted.first().copied()),
        get(percentile(sorted, 50)),
        get(percentile(sorted, 99)),
        get(sorted.last().copied())
    )
}

/// Latencies of every request of a run, sorted, in ms.
pub fn latencies(observation: &Observation) -> Vec<u64> {
    let mut ms: Vec<u64> = observation
        .requests
        .iter()
        .map(|r| r.latency.as_millis() as u64)
        .collect();
    ms.sort_unstable();
    ms
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    #[test]
    fn fallback_lines_are_read_from_structured_logs() {
        let line = r#"{"timestamp":"1","level":"warn","message":"{\"event\":\"rate_limits.fallback\",\"binding\":\"B\",\"reason\":\"missing\"}"}"#;
        assert_eq!(
            fallback_line(line),
            Some(Ok(FallbackLine {
                binding: "B".into(),
                reason: "missing".into()
            }))
        );
        assert_eq!(fallback_line(r#"{"message":"hello"}"#), None);
        assert_eq!(fallback_line("plain text"), None);
        assert!(matches!(
            fallback_line(r#"{"event":"rate_limits.fallback"}"#),
            Some(Err(_))
        ));
    }

    use std::time::Duration;

    use crate::engine::{CallRecord, InstanceKind, InstanceRecord, RequestRecord};
    use crate::language::probe::CallOutcome;
    use crate::world::process::{LogLine, Stream};

    /// The one scenario of `text`, loaded as the harness loads files.
    pub(in crate::judge) fn prepared(text: &str) -> Prepared {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("s.toml");
        std::fs::write(&path, text).expect("write");
        let mut all = crate::language::scenario::load_file(&path, std::path::Path::new("s.toml"))
            .unwrap_or_else(|e| panic!("{e}"));
        all.remove(0)
    }

    /// A request answered `status` (a 429 with `Retry-After: 60`).
    pub(in crate::judge) fn request(step: usize, number: usize, status: u16) -> RequestRecord {
        let mut headers = BTreeMap::new();
        if status == 429 {
            headers.insert("retry-after".to_owned(), "60".to_owned());
        }
        RequestRecord {
            step,
            number,
            isolate: 0,
            outcome: Ok(status),
            headers,
            body: r#"{"ok":true}"#.to_owned(),
            latency: Duration::from_millis(10),
        }
    }

    fn instance(lines: &[&str]) -> InstanceRecord {
        InstanceRecord {
            kind: InstanceKind::Workerd,
            isolate: 0,
            generation: 0,
            lines: lines
                .iter()
                .map(|text| LogLine {
                    at: Duration::ZERO,
                    stream: Stream::Stdout,
                    text: (*text).to_owned(),
                })
                .collect(),
            served: true,
        }
    }

    const HEAD: &str = "[[scenario]]\nname = \"s\"\napplication_inline = ''\n";

    #[test]
    fn a_status_sequence_points_at_the_first_differing_request() {
        let p = prepared(&format!(
            "{HEAD}[[scenario.steps]]\nsend = {{ requests = 3 }}\nexpect = {{ statuses = \"2 x 200 then 429\" }}\n"
        ));
        let observation = Observation {
            requests: vec![request(0, 1, 200), request(0, 2, 200), request(0, 3, 200)],
            instances: vec![instance(&[])],
            ..Observation::default()
        };
        let failures = check(&p, &observation);
        assert_eq!(failures.len(), 1, "{failures:#?}");
        assert_eq!(failures[0].place.to_string(), "s.toml:6:23");
        assert_eq!(failures[0].context, "step 1 (send), request 3");
        assert_eq!(failures[0].expected, "429");
        assert!(failures[0].actual.starts_with("200 (whole step: 3 x 200)"));
        let passing = Observation {
            requests: vec![request(0, 1, 200), request(0, 2, 200), request(0, 3, 429)],
            instances: vec![instance(&[])],
            ..Observation::default()
        };
        assert_eq!(check(&p, &passing), []);
    }

    #[test]
    fn each_expectation_kind_reports_its_own_failure() {
        let p = prepared(&format!(
            "{HEAD}[[scenario.steps]]\nsend = {{ requests = 2 }}\nexpect = {{ counts = {{ 200 = 2 }}, retry_after = 10, headers = {{ \"x-a\" = \"1\" }}, body = {{ ok = false }}, latency = {{ max_ms = 5 }} }}\n"
        ));
        let observation = Observation {
            requests: vec![request(0, 1, 200), request(0, 2, 429)],
            instances: vec![instance(&[])],
            ..Observation::default()
        };
        let whats: BTreeSet<String> = check(&p, &observation)
            .into_iter()
            .map(|f| f.what)
            .collect();
        for what in [
            "status counts",
            "Retry-After of a 429",
            "header x-a",
            "body field `ok`",
            "slowest request",
        ] {
            assert!(whats.contains(what), "no `{what}` in {whats:?}");
        }
    }

    #[test]
    fn a_step_without_expect_still_refuses_a_5xx_and_a_lost_request() {
        let p = prepared(&format!(
            "{HEAD}[[scenario.steps]]\nsend = {{ requests = 3 }}\n"
        ));
        let mut lost = request(0, 2, 200);
        lost.outcome = Err("connection refused".into());
        let observation = Observation {
            requests: vec![request(0, 1, 503), lost],
            instances: vec![instance(&[])],
            ..Observation::default()
        };
        let whats: Vec<String> = check(&p, &observation)
            .into_iter()
            .map(|f| f.what)
            .collect();
        assert_eq!(
            whats,
            ["requests answered", "no 5xx", "no failed request"],
            "{whats:?}"
        );
    }

    #[test]
    fn fallback_lines_and_keys_in_logs_are_judged_per_process() {
        let line = r#"{"message":"{\"event\":\"rate_limits.fallback\",\"binding\":\"B\",\"reason\":\"failed\"}"}"#;
        let p = prepared(&format!(
            "{HEAD}[[scenario.expect.fallback]]\nbinding = \"B\"\nreason = \"failed\"\n"
        ));
        let mut sent = BTreeSet::new();
        sent.insert("192.0.2.9".to_owned());
        let once = Observation {
            instances: vec![instance(&[line])],
            sent_subjects: sent.clone(),
            ..Observation::default()
        };
        assert_eq!(check(&p, &once), []);
        let twice_and_a_key = Observation {
            instances: vec![instance(&[line, line, "saw 192.0.2.9"])],
            sent_subjects: sent,
            ..Observation::default()
        };
        let whats: Vec<String> = check(&p, &twice_and_a_key)
            .into_iter()
            .map(|f| f.what)
            .collect();
        assert_eq!(
            whats,
            [
                "rate_limits.fallback lines (binding, reason) -> count",
                "no key in any log line"
            ]
        );
    }

    #[test]
    fn a_native_instances_tracing_line_is_a_fallback_line_naming_the_connection() {
        let line = r#"{"timestamp":"t","level":"WARN","message":"rate_limits.fallback","event":"rate_limits.fallback","connection":"cache","reason":"failed","target":"runtime::native"}"#;
        assert_eq!(
            fallback_line(line),
            Some(Ok(FallbackLine {
                binding: "cache".into(),
                reason: "failed".into()
            }))
        );
    }

    #[test]
    fn redis_calls_are_judged_against_the_step_s_observed_calls() {
        let p = prepared(&format!(
            "{HEAD}[[scenario.steps]]\nsend = {{ requests = 1 }}\nexpect = {{ redis_calls = {{ evalsha = 3, eval = 0 }} }}\n"
        ));
        let observed = |evalsha, eval| Observation {
            requests: vec![request(0, 1, 200)],
            instances: vec![instance(&[])],
            redis_calls: BTreeMap::from([(
                0,
                RedisCalls {
                    evalsha: Some(evalsha),
                    eval: Some(eval),
                },
            )]),
            ..Observation::default()
        };
        assert_eq!(check(&p, &observed(3, 0)), []);
        let failures = check(&p, &observed(4, 1));
        let whats: Vec<&str> = failures.iter().map(|f| f.what.as_str()).collect();
        assert_eq!(
            whats,
            [
                "EVALSHA calls Redis ran (INFO commandstats)",
                "EVAL calls Redis ran (INFO commandstats)"
            ]
        );
        assert_eq!(failures[0].place.to_string(), "s.toml:6:26");
        assert_eq!(
            (failures[0].expected.as_str(), failures[0].actual.as_str()),
            ("3", "4")
        );
        let unread = Observation {
            redis_calls: BTreeMap::new(),
            ..observed(0, 0)
        };
        assert_eq!(check(&p, &unread)[0].actual, "not read");
    }

    #[test]
    fn a_call_whose_outcome_differs_or_that_was_never_made_fails() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("p.toml");
        let text = "[[scenario]]\nname = \"s\"\napplication_inline = '''\n'''\n\
                    [[scenario.steps]]\nlimit = { binding = \"B\", outcome = { resolves = { success = true } } }\n\
                    [[scenario.steps]]\nlimit = { binding = \"B\", outcome = \"pending\" }\n";
        std::fs::write(&path, text).expect("write");
        let prepared = crate::language::scenario::load_file(&path, std::path::Path::new("p.toml"))
            .expect("loads")
            .remove(0);
        let mut observation = Observation::default();
        observation.calls.push(CallRecord {
            step: 0,
            isolate: 0,
            outcome: CallOutcome::Resolves(serde_json::json!({"success": false})),
        });
        let failures = check(&prepared, &observation);
        assert_eq!(failures.len(), 2, "{failures:?}");
        assert_eq!(failures[0].expected, r#"resolves to {"success":true}"#);
        assert_eq!(failures[0].actual, r#"resolves to {"success":false}"#);
        assert_eq!(failures[0].place.location.line, 5);
        assert_eq!(failures[1].actual, "not called");
        observation.calls[0].outcome = CallOutcome::Resolves(serde_json::json!({"success": true}));
        observation.calls.push(CallRecord {
            step: 1,
            isolate: 0,
            outcome: CallOutcome::Pending,
        });
        assert_eq!(check(&prepared, &observation), vec![]);
    }
}
