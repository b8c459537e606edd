//! A raw `limit()` call as a scenario step: QA probe the binding's API
//! directly (options such as `delta`, invalid options, a faulty binding) and
//! say what the call must give. The call goes through the control endpoint of
//! `assets/entry.js`, so it meets the same fault layer and counting core as
//! the deployable's own calls.

use std::fmt;

use schemars::JsonSchema;
use serde::Deserialize;

/// How long a raw call may stay unsettled before it is `pending` (as a
/// hanging binding's is). `assets/entry.js` waits this long.
pub const PENDING_AFTER_MS: u64 = 1000;

/// One `limit()` call on one binding, and what it must give.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LimitCall {
    /// The binding's name, as the plan names it (such as `LIMITS_120_PER_60S`).
    pub binding: String,
    /// The argument of `limit()`, any TOML value (`{ key = "k", delta = 2 }`,
    /// `5`, ...); without it `limit()` is called with no argument.
    #[serde(default)]
    #[schemars(with = "Option<serde_json::Value>")]
    pub options: Option<toml::Value>,
    /// The isolate (0-based) whose binding is called.
    #[serde(default)]
    pub isolate: usize,
    /// What the call must give.
    pub outcome: CallOutcome,
}

/// What a `limit()` call gave (or must give).
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum CallOutcome {
    /// Resolved to this value, such as `{ success = true }`.
    Resolves(#[schemars(with = "serde_json::Value")] serde_json::Value),
    /// Rejected with this error, written `Name: message`, such as
    /// `RangeError: delta must be non-zero`.
    Rejects(String),
    /// Threw synchronously, written `Name: message`.
    Throws(String),
    /// Had not settled after [`PENDING_AFTER_MS`].
    Pending,
    /// The binding is not in the Worker's env.
    Missing,
}

impl fmt::Display for CallOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallOutcome::Resolves(value) => write!(f, "resolves to {value}"),
            CallOutcome::Rejects(error) => write!(f, "rejects with {error}"),
            CallOutcome::Throws(error) => write!(f, "throws {error}"),
            CallOutcome::Pending => write!(f, "pending after {PENDING_AFTER_MS} ms"),
            CallOutcome::Missing => f.write_str("the binding is missing"),
        }
    }
}

/// Why the control endpoint's answer is not an outcome.
#[derive(Debug, thiserror::Error)]
#[error("the raw limit() call's answer is not an outcome: {0}")]
pub struct OutcomeError(String);

impl CallOutcome {
    /// Reads `assets/entry.js`'s answer to `POST /limit`:
    /// `{"settled": "resolved"|"rejected"|"threw"|"pending"|"missing", "value"?, "error"?: {name, message}}`.
    pub fn from_control(answer: &serde_json::Value) -> Result<CallOutcome, OutcomeError> {
        let error = || {
            let e = &answer["error"];
            match (e["name"].as_str(), e["message"].as_str()) {
                (Some(name), Some(message)) => Ok(format!("{name}: {message}")),
                _ => Err(OutcomeError(answer.to_string())),
            }
        };
        match answer["settled"].as_str() {
            Some("resolved") => Ok(CallOutcome::Resolves(answer["value"].clone())),
            Some("rejected") => Ok(CallOutcome::Rejects(error()?)),
            Some("threw") => Ok(CallOutcome::Throws(error()?)),
            Some("pending") => Ok(CallOutcome::Pending),
            Some("missing") => Ok(CallOutcome::Missing),
            _ => Err(OutcomeError(answer.to_string())),
        }
    }
}

/// One raw call a scenario made.
#[derive(Debug, Clone, PartialEq)]
pub struct CallRecord {
    /// The step's index (0-based).
    pub step: usize,
    pub isolate: usize,
    pub outcome: CallOutcome,
}

/// The control request's body for a call (see `assets/entry.js`).
pub fn control_body(call: &LimitCall) -> serde_json::Value {
    let mut body =
        serde_json::json!({ "binding": call.binding, "pending_after_ms": PENDING_AFTER_MS });
    if let Some(options) = &call.options {
        body["options"] = serde_json::to_value(options).unwrap_or(serde_json::Value::Null);
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Observation;

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
        let failures = crate::judge::checks::check(&prepared, &observation);
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
        assert_eq!(crate::judge::checks::check(&prepared, &observation), vec![]);
    }

    #[test]
    fn the_control_answer_reads_as_an_outcome() {
        let read = |v: serde_json::Value| CallOutcome::from_control(&v).ok();
        assert_eq!(
            read(serde_json::json!({"settled": "resolved", "value": {"success": false}})),
            Some(CallOutcome::Resolves(serde_json::json!({"success": false})))
        );
        assert_eq!(
            read(
                serde_json::json!({"settled": "rejected", "error": {"name": "RangeError", "message": "delta must be non-zero"}})
            ),
            Some(CallOutcome::Rejects(
                "RangeError: delta must be non-zero".into()
            ))
        );
        assert_eq!(
            read(
                serde_json::json!({"settled": "threw", "error": {"name": "Error", "message": "x"}})
            ),
            Some(CallOutcome::Throws("Error: x".into()))
        );
        assert_eq!(
            read(serde_json::json!({"settled": "pending"})),
            Some(CallOutcome::Pending)
        );
        assert_eq!(read(serde_json::json!({"settled": "rejected"})), None);
        assert_eq!(
            read(serde_json::json!({"error": "binding X is not in this config"})),
            None
        );
    }

    #[test]
    fn an_outcome_is_written_as_one_key() {
        #[derive(Deserialize)]
        struct Wrapper {
            outcome: CallOutcome,
        }
        let parse = |text: &str| toml::from_str::<Wrapper>(text).map(|w| w.outcome).ok();
        assert_eq!(
            parse("outcome = { resolves = { success = true } }"),
            Some(CallOutcome::Resolves(serde_json::json!({"success": true})))
        );
        assert_eq!(
            parse(r#"outcome = { rejects = "TypeError: x" }"#),
            Some(CallOutcome::Rejects("TypeError: x".into()))
        );
        assert_eq!(parse(r#"outcome = "pending""#), Some(CallOutcome::Pending));
        assert_eq!(parse(r#"outcome = "settled""#), None);
    }

    #[test]
    fn options_go_to_the_control_request_as_json_and_absent_stays_absent() {
        let call = LimitCall {
            binding: "B".into(),
            options: Some(toml::Value::Table(
                [
                    ("key".to_owned(), toml::Value::String("k".into())),
                    ("delta".to_owned(), toml::Value::Integer(0)),
                ]
                .into_iter()
                .collect(),
            )),
            isolate: 0,
            outcome: CallOutcome::Pending,
        };
        assert_eq!(
            control_body(&call)["options"],
            serde_json::json!({"key": "k", "delta": 0})
        );
        let bare = LimitCall {
            options: None,
            ..call
        };
        assert!(control_body(&bare).get("options").is_none());
    }
}
