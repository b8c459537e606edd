//! What each request of a `send` was answered: every request answered
//! (`no_5xx`, on by default), its status (`statuses`, `counts`),
//! `retry_after`, `headers`, `body`, and the step's `latency`.

use std::collections::BTreeMap;
use std::ops::Range;

use toml::Spanned;

use super::failure::Failures;
use super::send_step::SendStep;
use super::summary::{latency_summary, status_text, summarise};
use crate::judge::stats::percentile;
use crate::language::scenario::{Latency, expand_statuses, parse_statuses};
use crate::world::text::shortened;

/// Every request of the step was answered or failed: none went missing.
pub(super) fn answered(view: &SendStep<'_>, out: &mut Failures<'_>) {
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
pub(in crate::judge) fn no_5xx(view: &SendStep<'_>, span: Range<usize>, out: &mut Failures<'_>) {
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
pub(in crate::judge) fn status_sequence(
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
pub(in crate::judge) fn status_counts(
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
pub(in crate::judge) fn retry_after_of_429s(
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
pub(in crate::judge) fn response_headers(
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
pub(in crate::judge) fn body_fields(
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
pub(in crate::judge) fn latency_bounds(
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use crate::engine::Observation;
    use crate::judge::scenario::judge;
    use crate::judge::scenario::test_support::{HEAD, instance, prepared, request};

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
        let failures = judge(&p, &observation);
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
        assert_eq!(judge(&p, &passing), []);
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
        let whats: BTreeSet<String> = judge(&p, &observation)
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
        let whats: Vec<String> = judge(&p, &observation)
            .into_iter()
            .map(|f| f.what)
            .collect();
        assert_eq!(
            whats,
            ["requests answered", "no 5xx", "no failed request"],
            "{whats:?}"
        );
    }
}
