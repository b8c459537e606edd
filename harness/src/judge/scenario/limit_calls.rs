//! `limit` steps: each raw `limit()` call gave the outcome its step names.

use super::failure::Failures;
use crate::engine::Observation;
use crate::language::scenario::{Action, Scenario};

/// `limit` steps: each raw call gave the outcome its step names.
pub(super) fn limit_calls(scenario: &Scenario, observation: &Observation, out: &mut Failures<'_>) {
    for (index, step) in scenario.steps.iter().enumerate() {
        let Ok(Action::Limit(call)) = step.get_ref().action() else {
            continue;
        };
        let actual = observation.calls.iter().find(|c| c.step == index);
        if actual.map(|c| &c.outcome) != Some(&call.outcome) {
            out.step = Some(index);
            out.fail(
                step.span(),
                format!("step {} (limit), isolate {}", index + 1, call.isolate),
                &format!("{}.limit() outcome", call.binding),
                call.outcome.to_string(),
                actual.map_or_else(|| "not called".to_owned(), |c| c.outcome.to_string()),
            );
            out.step = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::engine::{CallRecord, Observation};
    use crate::judge::scenario::judge;
    use crate::language::probe::CallOutcome;

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
        let failures = judge(&prepared, &observation);
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
        assert_eq!(judge(&prepared, &observation), vec![]);
    }
}
