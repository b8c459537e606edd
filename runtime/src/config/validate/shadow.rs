//! Shadow limits: a limit marked to count without refusing. A route's
//! limit is marked in its table (`rate_limit = { ..., shadow = true }`);
//! the built-in ones by name in `rate_limits.shadow = ["caller", "address"]`.
//! The mark changes nothing of what is counted (the binding, the keys), so
//! only its own shape is checked here.

use toml::Spanned;

use super::super::raw::{RawApplication, RawList};
use super::{Code, Report};
use crate::subject::Subject;

/// Which built-in limits are shadow ones, a caller's then an address's
/// ([`Subject::POLICIES`]); each wrong entry reported at its place.
pub(super) fn validate_built_in_shadow(report: &mut Report<'_>, raw: &RawApplication) -> [bool; 2] {
    let mut shadow = [false; 2];
    let Some(list) = raw.rate_limits.as_ref().and_then(|r| r.shadow.as_ref()) else {
        return shadow;
    };
    let names = Subject::POLICIES.map(|p| format!("\"{p}\"")).join(", ");
    let items = match list.get_ref() {
        RawList::Items(items) => items,
        RawList::Other(what) => {
            report.add(
                Code::ShadowInvalid,
                Some(list.span()),
                format!(
                    "`rate_limits.shadow` is {what}; it must be a list of built-in limits \
                     ({names}): a route's own limit is marked `shadow = true` in its rate_limit"
                ),
            );
            return shadow;
        }
    };
    for item in items {
        let problem = match item.get_ref() {
            toml::Value::String(name) => match Subject::POLICIES.iter().position(|p| p == name) {
                Some(index) if shadow[index] => format!("names `{name}` twice"),
                Some(index) => {
                    shadow[index] = true;
                    continue;
                }
                None => format!("names `{name}`, which is no built-in limit ({names})"),
            },
            other => format!(
                "holds {}, not a built-in limit's name ({names})",
                described(other)
            ),
        };
        report.add(
            Code::ShadowInvalid,
            Some(item.span()),
            format!("`rate_limits.shadow` {problem}"),
        );
    }
    shadow
}

/// A route limit's `shadow`: `true` or `false` (absent, `false`); anything
/// else reported at its place, and taken as `false`.
pub(super) fn validate_route_shadow(
    report: &mut Report<'_>,
    path: &str,
    value: Option<&Spanned<toml::Value>>,
) -> bool {
    match value.map(|v| (v.get_ref(), v.span())) {
        None => false,
        Some((toml::Value::Boolean(shadow), _)) => *shadow,
        Some((other, span)) => {
            report.add(
                Code::ShadowInvalid,
                Some(span),
                format!(
                    "route `{path}` has rate_limit shadow = {other}, {}; it must be `true` \
                     (count and record, never refuse) or `false`",
                    described(other)
                ),
            );
            false
        }
    }
}

/// A value's type with its article, as a message says it (`an integer`).
fn described(value: &toml::Value) -> String {
    let kind = value.type_str();
    let article = if kind.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    };
    format!("{article} {kind}")
}
