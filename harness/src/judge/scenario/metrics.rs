//! The limiter's metrics: a `send`'s `metrics` (how they changed during
//! the step) and the final `metrics` and `metrics_series` (the totals at
//! the end); and always, no key in any metrics text or data point, every
//! data point of the interface's shape, and the `rate_limits.data_points`
//! lines each isolate logged (`data_points_warning`, none by default).

use std::collections::BTreeMap;

use toml::Spanned;

use super::failure::Failures;
use super::logs::{event_of, instance_name};
use super::send_step::SendStep;
use crate::engine::Observation;
use crate::language::scenario::{MetricsTable, Scenario};
use crate::world::metrics::SeriesKey;

pub use runtime::bindings::DATA_POINTS_EVENT;

/// How many matched series a failure lists.
const LISTED: usize = 6;

/// A `send`'s `metrics`: each selector's sum of the step's changes.
pub(super) fn metric_changes(
    view: &SendStep<'_>,
    table: &Spanned<MetricsTable>,
    out: &mut Failures<'_>,
) {
    judge_table(
        table.get_ref(),
        view.metrics,
        &view.step_context(),
        "during the step",
        out,
    );
}

/// The final `metrics` and `metrics_series`.
pub(super) fn final_metrics(
    scenario: &Scenario,
    observation: &Observation,
    out: &mut Failures<'_>,
) {
    let Some(expect) = scenario.expect.as_ref().map(Spanned::get_ref) else {
        return;
    };
    let totals = observation.metrics_final.as_ref();
    if let Some(table) = &expect.metrics {
        judge_table(table.get_ref(), totals, "at the end", "at the end", out);
    }
    if let Some(wanted) = &expect.metrics_series {
        let series: Vec<&SeriesKey> = totals
            .into_iter()
            .flat_map(BTreeMap::keys)
            .filter(|(name, _)| name.starts_with("rate_limits_") || name == "data_points")
            .collect();
        if totals.is_none() || !wanted.get_ref().holds(series.len() as f64) {
            out.fail(
                wanted.span(),
                "at the end".to_owned(),
                "distinct series of the limiter's metrics, over every instance",
                wanted.get_ref().to_string(),
                match totals {
                    None => "not read".to_owned(),
                    Some(_) => format!("{}: {}", series.len(), listed(&series)),
                },
            );
        }
    }
}

/// Each selector of one table against the series read (`None`: not read).
fn judge_table(
    table: &MetricsTable,
    series: Option<&BTreeMap<SeriesKey, f64>>,
    context: &str,
    when: &str,
    out: &mut Failures<'_>,
) {
    for (selector, wanted) in table {
        let matched: Vec<(&SeriesKey, f64)> = series
            .into_iter()
            .flatten()
            .filter(|((name, labels), _)| selector.get_ref().matches(name, labels))
            .map(|(key, value)| (key, *value))
            .collect();
        let sum: f64 = matched.iter().map(|(_, v)| v).sum();
        if series.is_some() && wanted.get_ref().holds(sum) {
            continue;
        }
        let actual = match series {
            None => "not read".to_owned(),
            Some(_) => {
                let keys: Vec<&SeriesKey> = matched.iter().map(|(k, _)| *k).collect();
                let values: Vec<String> = matched
                    .iter()
                    .take(LISTED)
                    .map(|(key, value)| format!("{} = {}", series_name(key), number(*value)))
                    .collect();
                match keys.len() {
                    0 => format!("{} (no series has those labels)", number(sum)),
                    n if n > LISTED => {
                        format!(
                            "{} ({}, and {} more)",
                            number(sum),
                            values.join(", "),
                            n - LISTED
                        )
                    }
                    _ => format!("{} ({})", number(sum), values.join(", ")),
                }
            }
        };
        out.fail(
            selector.span(),
            context.to_owned(),
            &format!("metric `{}` {when}", selector.get_ref()),
            wanted.get_ref().to_string(),
            actual,
        );
    }
}

/// A sum as a count reads: whole numbers without `.0`.
fn number(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        format!("{}", value as i64)
    } else {
        value.to_string()
    }
}

/// A series as Prometheus writes it: `name{label="value",...}`.
fn series_name((name, labels): &SeriesKey) -> String {
    let labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
    format!("{name}{{{}}}", labels.join(","))
}

/// Up to [`LISTED`] series, named.
fn listed(series: &[&SeriesKey]) -> String {
    let mut names: Vec<String> = series.iter().take(LISTED).map(|k| series_name(k)).collect();
    if series.len() > LISTED {
        names.push(format!("and {} more", series.len() - LISTED));
    }
    names.join(", ")
}

/// Always: no caller id or address the scenario sent appears in any
/// metrics text a process served or any data point it wrote, and every
/// data point is the interface's `{ blobs: [limit, outcome, reason],
/// doubles: [1], indexes: [deployable] }`.
pub(in crate::judge) fn no_key_in_metrics(
    _: &Scenario,
    observation: &Observation,
    out: &mut Failures<'_>,
) {
    let whole = out.source.scenario.span();
    for text in &observation.metrics_texts {
        for line in text.text.lines() {
            if let Some(key) = observation
                .sent_subjects
                .iter()
                .find(|k| line.contains(k.as_str()))
            {
                out.fail(
                    whole.clone(),
                    text.process.clone(),
                    "no key in any metric or data point",
                    format!("nothing containing `{key}`"),
                    line.to_owned(),
                );
            }
        }
    }
    for point in &observation.malformed_points {
        out.fail(
            whole.clone(),
            point.process.clone(),
            "data point shape",
            "{ blobs: [limit, outcome, reason], doubles: [1], indexes: [deployable] }".to_owned(),
            point.text.clone(),
        );
    }
}

/// Always, for a Worker writing data points: each isolate that served
/// traffic logged exactly the `rate_limits.data_points` lines
/// `data_points_warning` says (none without it), naming the plan's binding.
pub(in crate::judge) fn data_points_lines(
    scenario: &Scenario,
    observation: &Observation,
    out: &mut Failures<'_>,
) {
    let final_expect = scenario.expect.as_ref();
    let span = final_expect
        .and_then(|e| e.get_ref().data_points_warning.as_ref())
        .map_or_else(
            || final_expect.map_or(out.source.scenario.span(), Spanned::span),
            Spanned::span,
        );
    let binding = observation.data_points_binding.as_deref().unwrap_or("");
    let wanted_once: BTreeMap<(String, String), usize> = final_expect
        .and_then(|e| e.get_ref().data_points_warning.as_ref())
        .filter(|w| w.get_ref().per_isolate > 0)
        .map(|w| {
            let w = w.get_ref();
            (
                (binding.to_owned(), w.reason.as_str().to_owned()),
                w.per_isolate,
            )
        })
        .into_iter()
        .collect();
    for instance in &observation.instances {
        let mut actual: BTreeMap<(String, String), usize> = BTreeMap::new();
        for line in &instance.lines {
            if let Some(event) = event_of(&line.text, DATA_POINTS_EVENT) {
                let field = |name: &str| event[name].as_str().unwrap_or("?").to_owned();
                *actual
                    .entry((field("binding"), field("reason")))
                    .or_default() += 1;
            }
        }
        let wanted = if instance.served {
            wanted_once.clone()
        } else {
            BTreeMap::new()
        };
        if actual != wanted {
            out.fail(
                span.clone(),
                instance_name(instance),
                "rate_limits.data_points lines (binding, reason) -> count",
                format!("{wanted:?}"),
                format!("{actual:?}"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use crate::engine::{MetricsText, Observation};
    use crate::judge::scenario::judge;
    use crate::judge::scenario::test_support::{instance, prepared, request};

    /// A native deployable's scenario, counting in memory.
    const NATIVE: &str = "[[scenario]]\nname = \"s\"\ndeployable = \"api\"\n\
        application_inline = '''\n[[deployables]]\nname = \"api\"\ntarget = \"native\"\nserves_api = true\n'''\n";

    fn key(name: &str, pairs: &[(&str, &str)]) -> (String, BTreeMap<String, String>) {
        (
            name.to_owned(),
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        )
    }

    fn decisions(passed: f64, refused: f64) -> BTreeMap<(String, BTreeMap<String, String>), f64> {
        let name = "rate_limits_decisions_total";
        BTreeMap::from([
            (
                key(
                    name,
                    &[
                        ("deployable", "api"),
                        ("limit", "address"),
                        ("outcome", "passed"),
                    ],
                ),
                passed,
            ),
            (
                key(
                    name,
                    &[
                        ("deployable", "api"),
                        ("limit", "address"),
                        ("outcome", "refused"),
                    ],
                ),
                refused,
            ),
        ])
    }

    #[test]
    fn a_step_s_metrics_are_its_changes_summed_over_unlisted_labels() {
        let p = prepared(&format!(
            "{NATIVE}[[scenario.steps]]\nsend = {{ requests = 1 }}\n\
             expect = {{ metrics = {{ 'decisions{{outcome=\"refused\"}}' = 1, 'decisions' = {{ at_least = 3 }} }} }}\n"
        ));
        let observed = |passed, refused| Observation {
            requests: vec![request(0, 1, 200)],
            instances: vec![instance(&[])],
            metrics_steps: BTreeMap::from([(0, decisions(passed, refused))]),
            ..Observation::default()
        };
        assert_eq!(judge(&p, &observed(2.0, 1.0)), []);
        let failures = judge(&p, &observed(1.0, 0.0));
        let whats: Vec<&str> = failures.iter().map(|f| f.what.as_str()).collect();
        assert_eq!(
            whats,
            [
                "metric `decisions` during the step",
                "metric `decisions{outcome=\"refused\"}` during the step"
            ]
        );
        assert_eq!(failures[0].expected, "at least 3");
        assert!(
            failures[1]
                .actual
                .starts_with("0 (rate_limits_decisions_total{"),
            "{}",
            failures[1].actual
        );
        assert_eq!(failures[1].place.to_string(), "s.toml:12:24");
        let unread = Observation {
            metrics_steps: BTreeMap::new(),
            ..observed(2.0, 1.0)
        };
        assert_eq!(judge(&p, &unread)[0].actual, "not read");
    }

    #[test]
    fn the_totals_and_the_series_bound_are_judged_at_the_end() {
        let p = prepared(&format!(
            "{NATIVE}[[scenario.steps]]\nsend = {{ requests = 1 }}\n\
             [scenario.expect]\nmetrics = {{ 'decisions{{limit=\"address\"}}' = 5 }}\n\
             metrics_series = {{ at_most = 2 }}\n"
        ));
        let observed = |totals| Observation {
            requests: vec![request(0, 1, 200)],
            instances: vec![instance(&[])],
            metrics_final: Some(totals),
            ..Observation::default()
        };
        assert_eq!(judge(&p, &observed(decisions(4.0, 1.0))), []);
        let mut grown = decisions(4.0, 1.0);
        grown.insert(
            key("rate_limits_decisions_total", &[("limit", "203.0.113.7")]),
            0.0,
        );
        let failures = judge(&p, &observed(grown));
        let whats: Vec<&str> = failures.iter().map(|f| f.what.as_str()).collect();
        assert_eq!(
            whats,
            ["distinct series of the limiter's metrics, over every instance"]
        );
        assert!(
            failures[0].actual.starts_with("3: "),
            "{}",
            failures[0].actual
        );
        let wrong = judge(&p, &observed(decisions(4.0, 2.0)));
        assert_eq!(
            wrong[0].what,
            "metric `decisions{limit=\"address\"}` at the end"
        );
        assert_eq!(wrong[0].place.to_string(), "s.toml:13:13");
    }

    #[test]
    fn a_key_in_a_metric_or_a_misshapen_point_fails_whatever_the_scenario_expects() {
        let p = prepared(&format!(
            "{NATIVE}[[scenario.steps]]\nsend = {{ requests = 1 }}\n"
        ));
        let observed = Observation {
            requests: vec![request(0, 1, 200)],
            instances: vec![instance(&[])],
            sent_subjects: BTreeSet::from(["192.0.2.9".to_owned()]),
            metrics_texts: vec![MetricsText {
                process: "native instance 0".into(),
                text: "ok 1\nrate_limits_decisions_total{limit=\"192.0.2.9\"} 1\n".into(),
            }],
            malformed_points: vec![MetricsText {
                process: "isolate 0".into(),
                text: "1 x {}: doubles are not [1]".into(),
            }],
            ..Observation::default()
        };
        let failures = judge(&p, &observed);
        let whats: Vec<&str> = failures.iter().map(|f| f.what.as_str()).collect();
        assert_eq!(
            whats,
            ["no key in any metric or data point", "data point shape"]
        );
        assert_eq!(
            failures[0].actual,
            "rate_limits_decisions_total{limit=\"192.0.2.9\"} 1"
        );
    }

    #[test]
    fn data_points_lines_are_one_per_isolate_as_the_scenario_says_and_else_none() {
        let line = r#"{"level":"warn","message":"{\"event\":\"rate_limits.data_points\",\"binding\":\"RATE_LIMIT_DATA_POINTS\",\"reason\":\"failed\"}"}"#;
        let plain = prepared(&format!(
            "{NATIVE}[[scenario.steps]]\nsend = {{ requests = 1 }}\n"
        ));
        let observed = |lines: &[&str]| Observation {
            requests: vec![request(0, 1, 200)],
            instances: vec![instance(lines)],
            data_points_binding: Some("RATE_LIMIT_DATA_POINTS".into()),
            ..Observation::default()
        };
        assert_eq!(judge(&plain, &observed(&[])), []);
        let failures = judge(&plain, &observed(&[line]));
        assert_eq!(failures.len(), 1);
        assert_eq!(
            failures[0].what,
            "rate_limits.data_points lines (binding, reason) -> count"
        );
        assert_eq!(failures[0].expected, "{}");
    }
}
