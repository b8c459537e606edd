//! `rate_limits.data_points`: the Workers Analytics Engine dataset a Worker
//! writes its data points to. Its name goes into the Wrangler file and is
//! what operators query (`FROM dataset` in the SQL API), so it is held to a
//! plain identifier: an ASCII letter, then letters, digits or `_`, at most
//! [`MAX_DATASET_LEN`] in all.

use super::super::raw::RawApplication;
use super::{Code, Report};

/// The longest dataset name accepted.
pub(super) const MAX_DATASET_LEN: usize = 64;

/// The dataset's name, or `None` when there is none or it is invalid
/// (reported at its place).
pub(super) fn validate_data_points(
    report: &mut Report<'_>,
    raw: &RawApplication,
) -> Option<String> {
    let value = raw.rate_limits.as_ref()?.data_points.as_ref()?;
    let problem = match value.get_ref() {
        toml::Value::String(name) if is_dataset_name(name) => return Some(name.clone()),
        toml::Value::String(name) if name.is_empty() => "is empty".to_owned(),
        toml::Value::String(name) if name.len() > MAX_DATASET_LEN => {
            format!("is {} characters long, over {MAX_DATASET_LEN}", name.len())
        }
        toml::Value::String(_) => {
            "must start with an ASCII letter and hold only letters, digits and `_`".to_owned()
        }
        other => format!("must be a dataset's name, not a {}", other.type_str()),
    };
    report.add(
        Code::DataPointsInvalid,
        Some(value.span()),
        format!(
            "`rate_limits.data_points` {problem} (the Workers Analytics Engine dataset written to)"
        ),
    );
    None
}

/// Whether `name` is a dataset name this framework writes.
fn is_dataset_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name.len() <= MAX_DATASET_LEN
}
