//! What the processes logged: the fallback lines each must have written
//! (`[[expect.fallback]]`, none by default), and no key the scenario sent
//! in any line.

use std::collections::BTreeMap;

use super::failure::Failures;
use crate::engine::{InstanceRecord, Observation};
use crate::language::scenario::Scenario;

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
    let event = event_of(line, runtime::limiter::FallbackLog::EVENT)?;
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

/// The limit a `rate_limits.shadow_refusal` line names (a shadow limit's
/// first would-be refusal in its process), if the line is one.
pub fn shadow_refusal_line(line: &str) -> Option<String> {
    let event = event_of(line, runtime::limiter::ShadowLog::EVENT)?;
    Some(event.get("limit")?.as_str()?.to_owned())
}

/// The event `name` in one line of a process's output, if it is one:
/// workerd's structured logging puts the event's JSON inside the line's
/// `message`; a native instance's `tracing` JSON line is the event itself.
pub(in crate::judge) fn event_of(line: &str, name: &str) -> Option<serde_json::Value> {
    let outer: serde_json::Value = serde_json::from_str(line).ok()?;
    let inner = outer
        .get("message")
        .and_then(|m| m.as_str())
        .and_then(|message| serde_json::from_str::<serde_json::Value>(message).ok())
        .filter(serde_json::Value::is_object);
    let event = inner.unwrap_or(outer);
    (event.get("event")?.as_str()? == name).then_some(event)
}

/// `[[expect.fallback]]`: each process that served traffic logged exactly
/// these fallback lines (none when the list is empty), each well formed.
pub(super) fn fallback_lines(
    scenario: &Scenario,
    observation: &Observation,
    out: &mut Failures<'_>,
) {
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

/// `shadow_refusal_lines`: each listed shadow limit's first would-be
/// refusal logged by some process, no process logging one limit twice, and
/// no other limit's line.
pub(super) fn shadow_refusal_lines(
    scenario: &Scenario,
    observation: &Observation,
    out: &mut Failures<'_>,
) {
    let final_expect = scenario.expect.as_ref();
    let final_span = final_expect.map_or(out.source.scenario.span(), |e| e.span());
    let expected: Vec<String> = final_expect
        .map(|e| e.get_ref().shadow_refusal_lines.clone())
        .unwrap_or_default();
    let mut logged_by_any: BTreeMap<String, usize> = BTreeMap::new();
    for instance in &observation.instances {
        let mut mine: BTreeMap<String, usize> = BTreeMap::new();
        for line in &instance.lines {
            if let Some(limit) = shadow_refusal_line(&line.text) {
                *mine.entry(limit).or_default() += 1;
            }
        }
        for (limit, lines) in &mine {
            if *lines > 1 || !expected.contains(limit) {
                out.fail(
                    final_span.clone(),
                    instance_name(instance),
                    "rate_limits.shadow_refusal lines by limit",
                    format!("at most one line for each of {expected:?}"),
                    format!("{lines} for `{limit}`"),
                );
            }
            *logged_by_any.entry(limit.clone()).or_default() += 1;
        }
    }
    for limit in expected.iter().filter(|l| !logged_by_any.contains_key(*l)) {
        out.fail(
            final_span.clone(),
            "every process".to_owned(),
            "rate_limits.shadow_refusal lines by limit",
            format!("a line for `{limit}` from at least one process"),
            "none".to_owned(),
        );
    }
}

/// Always: no caller id or address the scenario sent appears in any log line.
pub(in crate::judge) fn no_key_logged(
    _: &Scenario,
    observation: &Observation,
    out: &mut Failures<'_>,
) {
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

pub(in crate::judge) fn instance_name(instance: &InstanceRecord) -> String {
    let name = instance.kind.name(instance.isolate);
    if instance.generation == 0 {
        name
    } else {
        format!("{name} after restart {}", instance.generation)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::judge::scenario::judge;
    use crate::judge::scenario::test_support::{HEAD, instance, prepared, request};

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
    fn fallback_lines_and_keys_in_logs_are_judged_per_process() {
        let line = r#"{"message":"{\"event\":\"rate_limits.fallback\",\"binding\":\"B\",\"reason\":\"failed\"}"}"#;
        let p = prepared(&format!(
            "{HEAD}[[scenario.steps]]\nsend = {{ requests = 1 }}\n[[scenario.expect.fallback]]\nbinding = \"B\"\nreason = \"failed\"\n"
        ));
        let mut sent = BTreeSet::new();
        sent.insert("192.0.2.9".to_owned());
        let once = Observation {
            requests: vec![request(0, 1, 200)],
            instances: vec![instance(&[line])],
            sent_subjects: sent.clone(),
            ..Observation::default()
        };
        assert_eq!(judge(&p, &once), []);
        let twice_and_a_key = Observation {
            requests: vec![request(0, 1, 200)],
            instances: vec![instance(&[line, line, "saw 192.0.2.9"])],
            sent_subjects: sent,
            ..Observation::default()
        };
        let whats: Vec<String> = judge(&p, &twice_and_a_key)
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
}
