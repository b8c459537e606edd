//! Judges a run on Cloudflare itself: each expectation as
//! [`crate::language::on_cloudflare`] says (exact ones by the local run's
//! own checks, bounded ones here), the fallback lines the tail delivered,
//! and no key in any of them. Plain functions, no I/O; besides the
//! failures it gives the figures the spec is missing: how many passed
//! before the first refusal, per step.

use std::collections::BTreeSet;
use std::ops::Range;

use crate::engine::{Observation, RequestRecord};
use crate::judge::scenario::{
    self, Failure, Failures, SendStep, fallback_line, no_5xx, no_key_logged, status_text,
};
use crate::language::cloudflare::CloudflareCheck;
use crate::language::on_cloudflare::{self, Bound, SendOnCloudflare};
use crate::language::scenario::Prepared;

/// What one send step showed on Cloudflare.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Figure {
    /// The step's number (1-based).
    pub step: usize,
    /// The passes its expectation states before the first 429, if it states a refusal.
    pub limit: Option<usize>,
    /// The requests that passed before the first 429, if one came.
    pub passed_before_refusal: Option<usize>,
    /// The requests it sent.
    pub sent: usize,
    /// The bound it was held to, if bounded.
    pub bound: Option<Bound>,
}

impl Figure {
    /// `131/120` (passed before the first 429 / the limit), `no 429 in 361`,
    /// or `-` for a step that expected no refusal and saw none.
    pub fn short(&self) -> String {
        match (self.passed_before_refusal, self.limit) {
            (Some(passed), Some(limit)) => format!("{passed}/{limit}"),
            (Some(passed), None) => format!("{passed}"),
            (None, Some(_)) => format!("no 429 in {}", self.sent),
            (None, None) => "-".to_owned(),
        }
    }
}

/// Every failure of a run on Cloudflare, and its figures.
#[derive(Debug, Clone, Default)]
pub struct Judgement {
    /// Every expectation that did not hold.
    pub failures: Vec<Failure>,
    /// One per `send` step.
    pub figures: Vec<Figure>,
}

/// Judges `observation` (the requests sent to the Worker on Cloudflare and
/// the lines its tail delivered) against what `prepared` checks there.
pub fn check(prepared: &Prepared, observation: &Observation) -> Judgement {
    let source = &prepared.scenario;
    let scenario = source.scenario.get_ref();
    let mut out = Failures {
        source,
        list: Vec::new(),
        step: None,
    };
    let mut figures = Vec::new();
    for step in on_cloudflare::sends(scenario) {
        let span = scenario.steps[step.index].span();
        let view = SendStep {
            index: step.index,
            span: span.clone(),
            send: step.send,
            records: observation
                .requests
                .iter()
                .filter(|r| r.step == step.index)
                .collect(),
            redis_calls: None,
            // No `metrics` are read there (cloudflare_obstacle refuses them).
            metrics: None,
            // No `deadline` is checked there (cloudflare_obstacle refuses it).
            load_probes: &[],
        };
        figures.push(figure(&step, &view.records));
        send_step(&step, &view, &mut out);
    }
    fallback_kinds(prepared, observation, &mut out);
    no_key_logged(scenario, observation, &mut out);
    Judgement {
        failures: out.list,
        figures,
    }
}

/// The figure of one step: passes before its first 429, by request number.
fn figure(step: &SendOnCloudflare<'_>, records: &[&RequestRecord]) -> Figure {
    let mut ordered: Vec<&RequestRecord> = records.to_vec();
    ordered.sort_by_key(|r| r.number);
    let first = ordered.iter().position(|r| r.outcome == Ok(429));
    Figure {
        step: step.index + 1,
        limit: step.limit,
        passed_before_refusal: first.map(|at| {
            ordered[..at]
                .iter()
                .filter(|r| r.outcome == Ok(200))
                .count()
        }),
        sent: ordered.len(),
        bound: step.bound,
    }
}

/// One step's expectations, each as Cloudflare checks it.
fn send_step(step: &SendOnCloudflare<'_>, view: &SendStep<'_>, out: &mut Failures<'_>) {
    let Some(expect) = step.expect else {
        no_5xx(view, view.span.clone(), out);
        return;
    };
    let written = expect.get_ref();
    if written.no_5xx {
        no_5xx(view, expect.span(), out);
    }
    let checks = step.checks;
    if let Some(statuses) = &written.statuses
        && checks.statuses == CloudflareCheck::Exact
    {
        scenario::status_sequence(view, statuses, out);
    }
    if let Some(counts) = &written.counts
        && checks.counts == CloudflareCheck::Exact
    {
        scenario::status_counts(view, counts, out);
    }
    if let Some(bound) = step.bound {
        // At the expectation the bound was read from: the statuses, else the counts.
        let span = match (&written.statuses, &written.counts) {
            (Some(statuses), _) if checks.statuses != CloudflareCheck::Exact => statuses.span(),
            (_, Some(counts)) => counts.span(),
            _ => expect.span(),
        };
        bounded(view, span, bound, out);
    }
    if let Some(retry_after) = &written.retry_after
        && checks.retry_after == CloudflareCheck::Exact
    {
        scenario::retry_after_of_429s(view, retry_after, out);
    }
    if let Some(headers) = &written.headers
        && checks.headers == CloudflareCheck::Exact
    {
        scenario::response_headers(view, headers, out);
    }
    if let Some(body) = &written.body
        && checks.body == CloudflareCheck::Exact
    {
        scenario::body_fields(view, body, out);
    }
    if let Some(latency) = &written.latency
        && checks.latency == CloudflareCheck::Exact
    {
        scenario::latency_bounds(view, latency, out);
    }
}

/// A bounded status expectation: no refusal among the first `limit`
/// requests, every request before the first refusal let through, and a
/// refusal after at most `limit * refusal_by` passes.
fn bounded(view: &SendStep<'_>, span: Range<usize>, bound: Bound, out: &mut Failures<'_>) {
    let mut ordered: Vec<&RequestRecord> = view.records.clone();
    ordered.sort_by_key(|r| r.number);
    let first = ordered.iter().position(|r| r.outcome == Ok(429));
    let before = &ordered[..first.unwrap_or(ordered.len())];
    let passed = before.iter().filter(|r| r.outcome == Ok(200)).count();
    if let Some(odd) = before
        .iter()
        .find(|r| matches!(r.outcome, Ok(status) if status != 200 && status < 500))
    {
        out.fail(
            span.clone(),
            view.context(odd.number),
            "a status before the first refusal (bounded on Cloudflare)",
            "200".into(),
            status_text(odd),
        );
    }
    match first.map(|at| ordered[at]) {
        Some(refused) if refused.number <= bound.limit => out.fail(
            span,
            view.context(refused.number),
            &format!(
                "refused before the limit (bounded on Cloudflare: no 429 among the first {})",
                bound.limit
            ),
            format!("200 for the first {} requests", bound.limit),
            format!("429 at request {} ({passed} passed before it)", refused.number),
        ),
        Some(_) => {}
        None => out.fail(
            span,
            view.step_context(),
            &format!(
                "no refusal by {} x the limit (bounded on Cloudflare: the first 429 after at most {} passes)",
                bound.refusal_by,
                bound.most_passes()
            ),
            format!("a 429 after {} to {} passes", bound.limit, bound.most_passes()),
            format!("{passed} passed, no 429 in {} requests", ordered.len()),
        ),
    }
}

/// `[[expect.fallback]]` on Cloudflare: the tail does not say which isolate
/// wrote a line, so each (binding, reason) listed must appear at least once
/// and no other; `per_isolate` is not checked there. A line that is a
/// fallback event but lacks its fields fails too.
fn fallback_kinds(prepared: &Prepared, observation: &Observation, out: &mut Failures<'_>) {
    let scenario = prepared.scenario.scenario.get_ref();
    let final_expect = scenario.expect.as_ref();
    let span = final_expect.map_or(prepared.scenario.scenario.span(), |e| e.span());
    let expected: BTreeSet<(String, String)> = final_expect
        .map(|e| {
            e.get_ref()
                .fallback
                .iter()
                .filter(|f| f.per_isolate > 0)
                .map(|f| (f.binding.clone(), f.reason.as_str().to_owned()))
                .collect()
        })
        .unwrap_or_default();
    let mut actual = BTreeSet::new();
    for instance in &observation.instances {
        for line in &instance.lines {
            match fallback_line(&line.text) {
                Some(Ok(f)) => {
                    actual.insert((f.binding, f.reason));
                }
                Some(Err(message)) => out.fail(
                    span.clone(),
                    scenario::instance_name(instance),
                    "fallback line shape",
                    "{\"event\":\"rate_limits.fallback\",\"binding\":…,\"reason\":…}".into(),
                    message,
                ),
                None => {}
            }
        }
    }
    if expected != actual {
        out.fail(
            span,
            "the Worker's tail on Cloudflare".to_owned(),
            "rate_limits.fallback lines (binding, reason), each at least once",
            format!("{expected:?}"),
            format!("{actual:?}"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    use crate::engine::{InstanceKind, InstanceRecord};
    use crate::judge::scenario::test_support::{prepared, request};
    use crate::world::process::{LogLine, Stream};

    fn statuses(step: usize, passes: usize, then_429: bool) -> Vec<RequestRecord> {
        let mut records: Vec<RequestRecord> = (1..=passes).map(|n| request(step, n, 200)).collect();
        if then_429 {
            records.push(request(step, passes + 1, 429));
        }
        records
    }

    const BOUNDED: &str = "[[scenario]]\nname = \"s\"\napplication_inline = ''\non_cloudflare = { refusal_by = 3 }\n\
                           [[scenario.steps]]\nsend = { requests = 121 }\nexpect = { statuses = \"120 x 200 then 429\", retry_after = 60 }\n";

    #[test]
    fn a_bounded_step_holds_from_the_limit_to_its_multiple() {
        let p = prepared(BOUNDED);
        let judged = |records: Vec<RequestRecord>| {
            check(
                &p,
                &Observation {
                    requests: records,
                    ..Observation::default()
                },
            )
        };
        let at_limit = judged(statuses(0, 120, true));
        assert_eq!(at_limit.failures, []);
        assert_eq!(at_limit.figures[0].short(), "120/120");
        let late = judged(statuses(0, 333, true));
        assert_eq!(late.failures, []);
        assert_eq!(late.figures[0].passed_before_refusal, Some(333));
        let early = judged(statuses(0, 100, true));
        assert_eq!(early.failures.len(), 1, "{:?}", early.failures);
        assert!(
            early.failures[0]
                .what
                .starts_with("refused before the limit")
        );
        assert_eq!(early.failures[0].place.to_string(), "s.toml:7:23");
        let never = judged(statuses(0, 360, false));
        assert!(
            never.failures[0]
                .what
                .starts_with("no refusal by 3 x the limit")
        );
        assert_eq!(never.figures[0].short(), "no 429 in 360");
    }

    #[test]
    fn exact_expectations_are_the_local_run_s_own() {
        let p = prepared(BOUNDED);
        let mut records = statuses(0, 130, true);
        records[130]
            .headers
            .insert("retry-after".into(), "59".into());
        let judged = check(
            &p,
            &Observation {
                requests: records,
                ..Observation::default()
            },
        );
        let whats: Vec<&str> = judged.failures.iter().map(|f| f.what.as_str()).collect();
        assert_eq!(whats, ["Retry-After of a 429"]);
    }

    #[test]
    fn fallback_kinds_are_checked_and_no_key_may_appear() {
        let p = prepared(
            "[[scenario]]\nname = \"s\"\napplication_inline = ''\non_cloudflare = \"exact\"\n\
             [[scenario.steps]]\nsend = { requests = 1 }\n\
             [[scenario.expect.fallback]]\nbinding = \"B\"\nreason = \"missing\"\nper_isolate = 1\n",
        );
        let line = |text: &str| LogLine {
            at: Duration::ZERO,
            stream: Stream::Stderr,
            text: text.to_owned(),
        };
        let fallback = r#"{"level":"warn","message":"{\"event\":\"rate_limits.fallback\",\"binding\":\"B\",\"reason\":\"missing\"}"}"#;
        let tail = |lines: Vec<LogLine>| InstanceRecord {
            kind: InstanceKind::CloudflareTail,
            isolate: 0,
            generation: 0,
            lines,
            served: true,
        };
        let mut subjects = BTreeSet::new();
        subjects.insert("198.51.100.4".to_owned());
        // Twice (two isolates on the edge) is fine: the kind is what counts.
        let twice = Observation {
            instances: vec![tail(vec![line(fallback), line(fallback)])],
            sent_subjects: subjects.clone(),
            ..Observation::default()
        };
        assert_eq!(check(&p, &twice).failures, []);
        let none_and_a_key = Observation {
            instances: vec![tail(vec![line(r#"{"message":"from 198.51.100.4"}"#)])],
            sent_subjects: subjects,
            ..Observation::default()
        };
        let whats: Vec<String> = check(&p, &none_and_a_key)
            .failures
            .into_iter()
            .map(|f| f.what)
            .collect();
        assert_eq!(
            whats,
            [
                "rate_limits.fallback lines (binding, reason), each at least once",
                "no key in any log line"
            ]
        );
    }
}
