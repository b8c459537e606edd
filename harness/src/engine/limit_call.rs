//! The `limit` step's control request: what the engine sends to an
//! isolate's `POST /limit` (`assets/entry.js`) for a [`LimitCall`], and how
//! it reads the answer as a [`CallOutcome`].

use crate::language::probe::{CallOutcome, LimitCall, PENDING_AFTER_MS};

/// Why the control endpoint's answer is not an outcome.
#[derive(Debug, thiserror::Error)]
#[error("the raw limit() call's answer is not an outcome: {0}")]
pub struct OutcomeError(String);

/// Reads `assets/entry.js`'s answer to `POST /limit`:
/// `{"settled": "resolved"|"rejected"|"threw"|"pending"|"missing", "value"?, "error"?: {name, message}}`.
pub fn read_outcome(answer: &serde_json::Value) -> Result<CallOutcome, OutcomeError> {
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

    #[test]
    fn the_control_answer_reads_as_an_outcome() {
        let read = |v: serde_json::Value| read_outcome(&v).ok();
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
