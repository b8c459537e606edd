//! A raw `limit()` call as a scenario step (`limit = {...}`): QA probe the
//! binding's API directly (options such as `delta`, invalid options, a faulty
//! binding) and say what the call must give. The engine makes the call
//! through the control endpoint of `assets/entry.js`, so it meets the same
//! fault layer and counting core as the deployable's own calls.

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
