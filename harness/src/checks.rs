//! Judges an [`Observation`] against a scenario's expectations. Plain
//! functions, no I/O: each failure names the place in the scenario file,
//! the step and request, what was expected and what happened.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::ops::Range;

use crate::engine::{InstanceRecord, Observation, RequestRecord};
use crate::scenario::{Place, Prepared, SendExpectations, expand_statuses, parse_statuses};

/// One expectation that did not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub place: Place,
    /// Such as `step 2 (send), request 121`.
    pub context: String,
    pub what: String,
    pub expected: String,
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
    pub binding: String,
    pub reason: String,
}

/// The fallback event in one line of workerd's output, if it is one. With
/// structured logging the event is the JSON inside the line's `message`.
pub fn fallback_line(line: &str) -> Option<Result<FallbackLine, String>> {
    let outer: serde_json::Value = serde_json::from_str(line).ok()?;
    let event = match outer.get("message").and_then(|m| m.as_str()) {
        Some(message) => serde_json::from_str::<serde_json::Value>(message).ok()?,
        None => outer,
    };
    if event.get("event")?.as_str()? != runtime::limiter::FallbackLog::EVENT {
        return None;
    }
    let field = |name: &str| event.get(name).and_then(|v| v.as_str()).map(str::to_owned);
    Some(match (field("binding"), field("reason")) {
        (Some(binding), Some(reason)) => Ok(FallbackLine { binding, reason }),
        _ => Err(format!("a fallback line without binding or reason: {line}")),
    })
}

/// Every failure of one run.
pub fn check(prepared: &Prepared, observation: &Observation) -> Vec<Failure> {
    let source = &prepared.scenario;
    let scenario = source.scenario.get_ref();
    let whole = source.scenario.span();
    let mut failures = Vec::new();
    let mut fail =
        |span: Range<usize>, context: String, what: &str, expected: String, actual: String| {
            failures.push(Failure {
                place: source.place(span),
                context,
                what: what.to_owned(),
                expected,
                actual,
            });
        };

    if let Some(codes) = &scenario.expect_diagnostics {
        let expected: BTreeSet<&str> = codes.get_ref().iter().map(String::as_str).collect();
        let actual: BTreeSet<&str> = observation
            .diagnostics
            .iter()
            .flatten()
            .map(String::as_str)
            .collect();
        if expected != actual {
            fail(
                codes.span(),
                String::new(),
                "diagnostics differ",
                format!("{expected:?}"),
                format!("{actual:?}"),
            );
        }
        return failures;
    }

    for (index, step) in scenario.steps.iter().enumerate() {
        let Some(send) = &step.get_ref().send else {
            continue;
        };
        let records: Vec<&RequestRecord> = observation
            .requests
            .iter()
            .filter(|r| r.step == index)
            .collect();
        let expect = step.get_ref().expect.as_ref();
        let defaults = SendExpectations {
            no_5xx: true,
            ..SendExpectations::default()
        };
        let (expect_span, expectations) = match expect {
            Some(e) => (e.span(), e.get_ref()),
            None => (step.span(), &defaults),
        };
        let context = |number: usize| format!("step {} (send), request {number}", index + 1);
        if records.len() != send.requests {
            fail(
                step.span(),
                format!("step {} (send)", index + 1),
                "requests answered",
                send.requests.to_string(),
                records.len().to_string(),
            );
        }
        if expectations.no_5xx {
            for r in &records {
                match &r.outcome {
                    Ok(status) if *status < 500 => {}
                    Ok(status) => fail(
                        expect_span.clone(),
                        context(r.number),
                        "no 5xx",
                        "a status below 500".into(),
                        format!("{status}: {}", short(&r.body)),
                    ),
                    Err(error) => fail(
                        expect_span.clone(),
                        context(r.number),
                        "no failed request",
                        "a response".into(),
                        error.clone(),
                    ),
                }
            }
        }
        if let Some(statuses) = &expectations.statuses {
            let wanted = parse_statuses(statuses.get_ref())
                .and_then(|runs| expand_statuses(&runs, send.requests));
            if let Ok(wanted) = wanted {
                let mismatches: Vec<(usize, u16, String)> = records
                    .iter()
                    .filter_map(|r| {
                        let expected = *wanted.get(r.number - 1)?;
                        let actual = status_text(r);
                        (actual != expected.to_string()).then_some((r.number, expected, actual))
                    })
                    .collect();
                if let Some((number, expected, actual)) = mismatches.first() {
                    fail(
                        statuses.span(),
                        context(*number),
                        &format!(
                            "status sequence `{}` ({} of {} requests differ)",
                            statuses.get_ref(),
                            mismatches.len(),
                            records.len()
                        ),
                        expected.to_string(),
                        format!("{actual} (whole step: {})", summarise(&records)),
                    );
                }
            }
        }
        if let Some(counts) = &expectations.counts {
            let mut actual: BTreeMap<String, usize> = BTreeMap::new();
            for r in &records {
                *actual.entry(status_text(r)).or_default() += 1;
            }
            let expected: BTreeMap<String, usize> = counts
                .get_ref()
                .iter()
                .filter(|(_, n)| **n > 0)
                .map(|(k, v)| (k.clone(), *v))
                .collect();
            if expected != actual {
                fail(
                    counts.span(),
                    format!("step {} (send)", index + 1),
                    "status counts",
                    format!("{expected:?}"),
                    format!("{actual:?}"),
                );
            }
        }
        if let Some(retry_after) = &expectations.retry_after {
            let wanted = retry_after.get_ref().to_string();
            for r in records.iter().filter(|r| r.outcome == Ok(429)) {
                let got = r
                    .headers
                    .get("retry-after")
                    .cloned()
                    .unwrap_or_else(|| "(none)".into());
                if got != wanted {
                    fail(
                        retry_after.span(),
                        context(r.number),
                        "Retry-After of a 429",
                        wanted.clone(),
                        got,
                    );
                }
            }
        }
        if let Some(headers) = &expectations.headers {
            for r in &records {
                for (name, value) in headers.get_ref() {
                    let got = r
                        .headers
                        .get(&name.to_ascii_lowercase())
                        .cloned()
                        .unwrap_or_else(|| "(none)".into());
                    if &got != value {
                        fail(
                            headers.span(),
                            context(r.number),
                            &format!("header {name}"),
                            value.clone(),
                            got,
                        );
                    }
                }
            }
        }
        if let Some(body) = &expectations.body {
            for r in &records {
                let json: serde_json::Value =
                    serde_json::from_str(&r.body).unwrap_or(serde_json::Value::Null);
                for (field, value) in body.get_ref() {
                    let wanted = serde_json::to_value(value).unwrap_or_default();
                    let got = json.get(field).cloned().unwrap_or(serde_json::Value::Null);
                    if got != wanted {
                        fail(
                            body.span(),
                            context(r.number),
                            &format!("body field `{field}`"),
                            wanted.to_string(),
                            format!("{got} in {}", short(&r.body)),
                        );
                    }
                }
            }
        }
        if let Some(latency) = &expectations.latency {
            let mut ms: Vec<u64> = records
                .iter()
                .map(|r| r.latency.as_millis() as u64)
                .collect();
            ms.sort_unstable();
            let bounds = latency.get_ref();
            let step_context = format!(
                "step {} (send), {} requests, latencies {}",
                index + 1,
                ms.len(),
                latency_summary(&ms)
            );
            let mut bound = |what: &str, limit: Option<u64>, actual: Option<u64>, at_most: bool| {
                if let (Some(limit), Some(actual)) = (limit, actual) {
                    let ok = if at_most {
                        actual <= limit
                    } else {
                        actual >= limit
                    };
                    if !ok {
                        let relation = if at_most { "at most" } else { "at least" };
                        fail(
                            latency.span(),
                            step_context.clone(),
                            what,
                            format!("{relation} {limit} ms"),
                            format!("{actual} ms"),
                        );
                    }
                }
            };
            bound("fastest request", bounds.min_ms, ms.first().copied(), false);
            bound("slowest request", bounds.max_ms, ms.last().copied(), true);
            bound("median latency", bounds.p50_ms, percentile(&ms, 50), true);
            bound(
                "99th percentile latency",
                bounds.p99_ms,
                percentile(&ms, 99),
                true,
            );
        }
    }

    let final_expect = scenario.expect.as_ref();
    let final_span = final_expect.map_or(whole.clone(), |e| e.span());
    let expected_fallback: BTreeMap<(String, &'static str), usize> = final_expect
        .map(|e| {
            e.get_ref()
                .fallback
                .iter()
                .map(|f| ((f.binding.clone(), f.reason.as_str()), f.per_isolate))
                .collect()
        })
        .unwrap_or_default();
    for instance in &observation.instances {
        let mut actual: BTreeMap<(String, String), usize> = BTreeMap::new();
        for line in &instance.lines {
            match fallback_line(&line.text) {
                Some(Ok(f)) => *actual.entry((f.binding, f.reason)).or_default() += 1,
                Some(Err(message)) => fail(
                    final_span.clone(),
                    instance_name(instance),
                    "fallback line shape",
                    "{\"event\":\"rate_limits.fallback\",\"binding\":…,\"reason\":…}".into(),
                    message,
                ),
                None => {}
            }
        }
        let wanted: BTreeMap<(String, String), usize> = if instance.served {
            expected_fallback
                .iter()
                .map(|((b, r), n)| ((b.clone(), (*r).to_owned()), *n))
                .filter(|(_, n)| *n > 0)
                .collect()
        } else {
            BTreeMap::new()
        };
        if actual != wanted {
            fail(
                final_span.clone(),
                instance_name(instance),
                "rate_limits.fallback lines (binding, reason) -> count",
                format!("{wanted:?}"),
                format!("{actual:?}"),
            );
        }
    }

    if let Some(keys) = final_expect.and_then(|e| e.get_ref().binding_keys.as_ref()) {
        for (binding, wanted) in keys.get_ref() {
            let wanted: BTreeSet<String> = wanted.iter().cloned().collect();
            let actual = observation
                .binding_keys
                .get(binding)
                .cloned()
                .unwrap_or_default();
            if wanted != actual {
                fail(
                    keys.span(),
                    String::new(),
                    &format!("keys that reached {binding}"),
                    format!("{wanted:?}"),
                    format!("{actual:?}"),
                );
            }
        }
    }

    for instance in &observation.instances {
        for line in &instance.lines {
            if let Some(key) = observation
                .sent_subjects
                .iter()
                .find(|k| line.text.contains(k.as_str()))
            {
                fail(
                    whole.clone(),
                    instance_name(instance),
                    "no key in any log line",
                    format!("no line containing `{key}`"),
                    line.text.clone(),
                );
            }
        }
    }
    failures.extend(crate::probe::check(prepared, observation));
    failures
}

fn instance_name(instance: &InstanceRecord) -> String {
    if instance.generation == 0 {
        format!("isolate {}", instance.isolate)
    } else {
        format!(
            "isolate {} after restart {}",
            instance.isolate, instance.generation
        )
    }
}

fn status_text(record: &RequestRecord) -> String {
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

/// Nearest-rank percentile of sorted values.
pub fn percentile(sorted: &[u64], p: usize) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (p * sorted.len()).div_ceil(100).max(1);
    sorted.get(rank - 1).copied()
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

fn short(text: &str) -> String {
    let mut s: String = text.chars().take(200).collect();
    if s.len() < text.len() {
        s.push('…');
    }
    s
}

#[cfg(test)]
mod tests {
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

    #[test]
    fn percentiles_use_nearest_rank() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 50), Some(50));
        assert_eq!(percentile(&v, 99), Some(99));
        assert_eq!(percentile(&[7], 99), Some(7));
        assert_eq!(percentile(&[], 50), None);
    }
}
