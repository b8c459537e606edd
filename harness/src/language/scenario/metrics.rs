//! What a scenario expects of the limiter's metrics: a selector in
//! Prometheus's style (`decisions{limit="address",outcome="refused"}`)
//! naming the series it sums ([`MetricSelector`]), the value that sum must
//! have ([`MetricValue`]), and whether the Workers' data points binding is
//! there to write to ([`DataPointsBinding`]).
//!
//! A selector is written without the `rate_limits_` prefix and the
//! `_total` suffix every series of `runtime::native::metrics` has, so QA
//! write what an operator's query says; its name and labels are held to
//! the interface here, as the file is loaded, so a typo is an error at its
//! place instead of a sum over nothing that passes by accident.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};

/// Where a metric comes from, and so which deployables can produce it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricSource {
    /// A native gate's `metrics` series, scraped from `GET /metrics`.
    Native,
    /// A Worker's Workers Analytics Engine data points, as the emulated
    /// dataset received them.
    Workers,
}

/// A metric a selector may name: the series of `runtime::native::metrics`
/// (native gates) and the Worker's data points (Workers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum MetricName {
    /// `rate_limits_decisions_total{limit, outcome}`: one per limit a request is checked against.
    Decisions,
    /// `rate_limits_shadow_refusals_total{limit}`: requests a shadow limit would have refused and let through.
    ShadowRefusals,
    /// `rate_limits_counted_in_memory_total{store, reason}`: checks counted in memory because the store could not be asked.
    CountedInMemory,
    /// `rate_limits_store_state{store, state}`: 1 for the store's state now, 0 for the others.
    StoreState,
    /// `rate_limits_store_round_trip_seconds{store}`: the store's answered round trips.
    StoreRoundTripSeconds,
    /// `rate_limits_refused_cache_answers_total{store}`: refusals answered from the refused-keys cache.
    RefusedCacheAnswers,
    /// `rate_limits_address_unknown_total{reason}`: requests whose address could not be known.
    AddressUnknown,
    /// `rate_limits_paths_too_long_total`: requests refused 414, their path too long to read.
    PathsTooLong,
    /// `rate_limits_memory_bytes`: what the in-memory counter holds.
    MemoryBytes,
    /// `rate_limits_memory_bound_bytes`: the most it can hold.
    MemoryBoundBytes,
    /// The Worker's data points, `{ blobs: [limit, outcome, reason], indexes: [deployable] }`.
    DataPoints,
}

/// The values of a data point's `outcome`: a shadow limit's would-be
/// refusal is `shadow_refused`.
const POINT_OUTCOMES: &[&str] = &["passed", "refused", "shadow_refused"];
/// The values of a data point's `reason`: the binding counted it (`none`),
/// or why it was counted in memory (`runtime::limiter::InMemory`'s:
/// `no_backend` is a deployable counting in memory by design).
const POINT_REASONS: &[&str] = &[
    "none",
    "no_backend",
    "cooling_off",
    "missing",
    "failed",
    "timed_out",
    "not_asked",
];

/// A label a metric carries, and the values it can take (`None`: the
/// application's names, held to it where the deployable is known).
type LabelSpec = (&'static str, Option<&'static [&'static str]>);

impl MetricName {
    /// Every name, in the order an error lists them.
    pub const ALL: [MetricName; 11] = [
        MetricName::Decisions,
        MetricName::CountedInMemory,
        MetricName::StoreState,
        MetricName::StoreRoundTripSeconds,
        MetricName::RefusedCacheAnswers,
        MetricName::AddressUnknown,
        MetricName::PathsTooLong,
        MetricName::MemoryBytes,
        MetricName::MemoryBoundBytes,
        MetricName::ShadowRefusals,
        MetricName::DataPoints,
    ];

    /// As a selector writes it.
    pub fn written(self) -> &'static str {
        match self {
            MetricName::Decisions => "decisions",
            MetricName::ShadowRefusals => "shadow_refusals",
            MetricName::CountedInMemory => "counted_in_memory",
            MetricName::StoreState => "store_state",
            MetricName::StoreRoundTripSeconds => "store_round_trip_seconds",
            MetricName::RefusedCacheAnswers => "refused_cache_answers",
            MetricName::AddressUnknown => "address_unknown",
            MetricName::PathsTooLong => "paths_too_long",
            MetricName::MemoryBytes => "memory_bytes",
            MetricName::MemoryBoundBytes => "memory_bound_bytes",
            MetricName::DataPoints => "data_points",
        }
    }

    /// The series' name as recorded: a native series' Prometheus name
    /// (`runtime::native::metrics`'s; a histogram's without its `_count`),
    /// or `data_points`.
    pub fn series_name(self) -> &'static str {
        use runtime::native::metrics as native;
        match self {
            MetricName::Decisions => native::DECISIONS,
            MetricName::ShadowRefusals => native::SHADOW_REFUSALS,
            MetricName::CountedInMemory => native::COUNTED_IN_MEMORY,
            MetricName::StoreState => native::STORE_STATE,
            MetricName::StoreRoundTripSeconds => native::STORE_ROUND_TRIP,
            MetricName::RefusedCacheAnswers => native::REFUSED_CACHE_ANSWERS,
            MetricName::AddressUnknown => native::ADDRESS_UNKNOWN,
            MetricName::PathsTooLong => native::PATHS_TOO_LONG,
            MetricName::MemoryBytes => native::MEMORY_BYTES,
            MetricName::MemoryBoundBytes => native::MEMORY_BOUND_BYTES,
            MetricName::DataPoints => "data_points",
        }
    }

    /// Which deployables produce it.
    pub fn source(self) -> MetricSource {
        match self {
            MetricName::DataPoints => MetricSource::Workers,
            _ => MetricSource::Native,
        }
    }

    /// The values `label` takes, when they are the interface's own
    /// (`outcome`, `reason`, `state`); `None` for a label whose values are
    /// the application's (`limit`, `store`, `deployable`) or that it lacks.
    pub fn label_values(self, label: &str) -> Option<&'static [&'static str]> {
        self.labels()
            .into_iter()
            .find(|(l, _)| *l == label)
            .and_then(|(_, values)| values)
    }

    /// Its labels, `deployable` (every series carries it) last: a native
    /// series' as `runtime::native::metrics::METRICS` lists them.
    fn labels(self) -> Vec<LabelSpec> {
        const DEPLOYABLE: LabelSpec = ("deployable", None);
        let own: Vec<LabelSpec> = match self.source() {
            MetricSource::Native => runtime::native::metrics::METRICS
                .iter()
                .find(|(name, _)| *name == self.series_name())
                .map(|(_, labels)| labels.iter().map(|l| (l.name, l.values)).collect())
                .unwrap_or_default(),
            MetricSource::Workers => vec![
                ("limit", None),
                ("outcome", Some(POINT_OUTCOMES)),
                ("reason", Some(POINT_REASONS)),
            ],
        };
        own.into_iter().chain([DEPLOYABLE]).collect()
    }
}

impl fmt::Display for MetricName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.written())
    }
}

/// A selector as written: a metric and the labels it fixes; its value is
/// the sum over every series of that metric matching them (labels it does
/// not name summed over).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct MetricSelector {
    /// The metric.
    pub name: MetricName,
    /// The labels it fixes, each to one value.
    pub labels: BTreeMap<String, String>,
}

impl MetricSelector {
    /// Whether a series of `name` with `labels` is one this selector sums.
    pub fn matches(&self, name: &str, labels: &BTreeMap<String, String>) -> bool {
        name == self.name.series_name()
            && self
                .labels
                .iter()
                .all(|(label, value)| labels.get(label) == Some(value))
    }
}

impl fmt::Display for MetricSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name.written())?;
        if self.labels.is_empty() {
            return Ok(());
        }
        f.write_str("{")?;
        for (i, (label, value)) in self.labels.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{label}={value:?}")?;
        }
        f.write_str("}")
    }
}

/// Why a selector does not parse, or names what no metric has.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// Not `name` or `name{label="value",...}`.
    #[error(
        "`{written}` is not a selector: {problem} (write `name` or `name{{label=\"value\",...}}`, such as `decisions{{limit=\"address\",outcome=\"refused\"}}`)"
    )]
    Syntax {
        /// The selector as written.
        written: String,
        /// What is wrong, and where in it.
        problem: String,
    },
    /// No metric of that name.
    #[error("`{name}` is no metric: {hint}one of {}", names())]
    UnknownName {
        /// The name as written.
        name: String,
        /// What it may have meant.
        hint: String,
    },
    /// The metric has no such label.
    #[error("`{name}` has no label `{label}`: its labels are {}", labels_of(*name))]
    UnknownLabel {
        /// The metric.
        name: MetricName,
        /// The label as written.
        label: String,
    },
    /// The label cannot take that value.
    #[error("`{label}` of `{name}` is never `{value}`: it is one of {}", values.join(", "))]
    UnknownValue {
        /// The metric.
        name: MetricName,
        /// The label.
        label: String,
        /// The value as written.
        value: String,
        /// The values it takes.
        values: &'static [&'static str],
    },
    /// A label written twice.
    #[error("`{label}` is written twice in one selector")]
    Twice {
        /// The label.
        label: String,
    },
}

fn names() -> String {
    MetricName::ALL.map(MetricName::written).join(", ")
}

fn labels_of(name: MetricName) -> String {
    name.labels()
        .iter()
        .map(|(label, _)| *label)
        .collect::<Vec<_>>()
        .join(", ")
}

impl FromStr for MetricSelector {
    type Err = SelectorError;

    fn from_str(written: &str) -> Result<MetricSelector, SelectorError> {
        let syntax = |problem: String| SelectorError::Syntax {
            written: written.to_owned(),
            problem,
        };
        let text = written.trim();
        let (name, rest) = match text.find('{') {
            Some(at) => (text[..at].trim_end(), Some(&text[at + 1..])),
            None => (text, None),
        };
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') {
            return Err(syntax(format!(
                "a metric's name is lower-case letters and `_`, not `{name}`"
            )));
        }
        let name = metric_name(name)?;
        let mut labels = BTreeMap::new();
        if let Some(rest) = rest {
            let body = rest
                .trim_end()
                .strip_suffix('}')
                .ok_or_else(|| syntax("it does not end with `}`".to_owned()))?;
            for (label, value) in label_pairs(body).map_err(syntax)? {
                let Some((_, values)) = name.labels().into_iter().find(|(l, _)| *l == label) else {
                    return Err(SelectorError::UnknownLabel { name, label });
                };
                if let Some(values) = values
                    && !values.contains(&value.as_str())
                {
                    return Err(SelectorError::UnknownValue {
                        name,
                        label,
                        value,
                        values,
                    });
                }
                if labels.contains_key(&label) {
                    return Err(SelectorError::Twice { label });
                }
                labels.insert(label, value);
            }
        }
        Ok(MetricSelector { name, labels })
    }
}

/// The metric a name as written is, with a hint for the Prometheus names
/// an operator's dashboard shows (`rate_limits_decisions_total`).
fn metric_name(written: &str) -> Result<MetricName, SelectorError> {
    if let Some(name) = MetricName::ALL.into_iter().find(|n| n.written() == written) {
        return Ok(name);
    }
    let bare = written.strip_prefix("rate_limits_").unwrap_or(written);
    let bare = bare.strip_suffix("_total").unwrap_or(bare);
    let hint = match MetricName::ALL.into_iter().find(|n| n.written() == bare) {
        Some(name) => {
            format!("write `{name}`, without the `rate_limits_` prefix and the `_total` suffix; ")
        }
        None => String::new(),
    };
    Err(SelectorError::UnknownName {
        name: written.to_owned(),
        hint,
    })
}

/// `label="value", ...` (values in double quotes, with `\"`, `\\` and `\n`
/// escaped as Prometheus writes them; a trailing comma allowed, as in PromQL).
fn label_pairs(body: &str) -> Result<Vec<(String, String)>, String> {
    let mut pairs = Vec::new();
    let mut chars = body.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if chars.peek().is_none() {
            return Ok(pairs);
        }
        let mut label = String::new();
        while let Some(&c) = chars.peek() {
            if c.is_ascii_alphanumeric() || c == '_' {
                label.push(c);
                chars.next();
            } else {
                break;
            }
        }
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if label.is_empty() || chars.next() != Some('=') {
            return Err(format!(
                "a label is `name=\"value\"`; after `{label}` came no `=`"
            ));
        }
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if chars.next() != Some('"') {
            return Err(format!("the value of `{label}` is not in double quotes"));
        }
        let mut value = String::new();
        loop {
            match chars.next() {
                None => return Err(format!("the value of `{label}` has no closing quote")),
                Some('"') => break,
                Some('\\') => match chars.next() {
                    Some('n') => value.push('\n'),
                    Some(c @ ('"' | '\\')) => value.push(c),
                    _ => {
                        return Err(format!(
                            "the value of `{label}` escapes only `\\\"`, `\\\\` and `\\n`"
                        ));
                    }
                },
                Some(c) => value.push(c),
            }
        }
        pairs.push((label, value));
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        match chars.next() {
            None => return Ok(pairs),
            Some(',') => {}
            Some(c) => {
                return Err(format!(
                    "`{c}` after a label's value, where `,` or `}}` goes"
                ));
            }
        }
    }
}

impl<'de> Deserialize<'de> for MetricSelector {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let written = String::deserialize(deserializer)?;
        written.parse().map_err(de::Error::custom)
    }
}

/// What a selector's sum (or the count of series) must be: a whole number,
/// or a table bounding it, `{ at_least = N }`, `{ at_most = N }` or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricValue {
    /// Exactly this.
    Exactly(i64),
    /// Within these bounds (at least one of them).
    Within {
        /// No less than this.
        at_least: Option<i64>,
        /// No more than this.
        at_most: Option<i64>,
    },
}

impl MetricValue {
    /// Whether `actual` is what this says.
    pub fn holds(self, actual: f64) -> bool {
        match self {
            MetricValue::Exactly(n) => actual == n as f64,
            MetricValue::Within { at_least, at_most } => {
                at_least.is_none_or(|n| actual >= n as f64)
                    && at_most.is_none_or(|n| actual <= n as f64)
            }
        }
    }
}

impl fmt::Display for MetricValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            MetricValue::Exactly(n) => write!(f, "{n}"),
            MetricValue::Within {
                at_least: Some(low),
                at_most: Some(high),
            } => write!(f, "at least {low} and at most {high}"),
            MetricValue::Within {
                at_least: Some(low),
                at_most: None,
            } => write!(f, "at least {low}"),
            MetricValue::Within {
                at_least: None,
                at_most: Some(high),
            } => write!(f, "at most {high}"),
            MetricValue::Within {
                at_least: None,
                at_most: None,
            } => f.write_str("anything"),
        }
    }
}

impl<'de> Deserialize<'de> for MetricValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ValueVisitor;
        impl<'de> Visitor<'de> for ValueVisitor {
            type Value = MetricValue;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a whole number, or { at_least = N }, { at_most = N } or both")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<MetricValue, E> {
                Ok(MetricValue::Exactly(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<MetricValue, E> {
                i64::try_from(v)
                    .map(MetricValue::Exactly)
                    .map_err(|_| E::custom(format!("{v} is too large a count")))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<MetricValue, A::Error> {
                let (mut at_least, mut at_most) = (None, None);
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "at_least" => at_least = Some(map.next_value::<i64>()?),
                        "at_most" => at_most = Some(map.next_value::<i64>()?),
                        _ => return Err(de::Error::unknown_field(&key, &["at_least", "at_most"])),
                    }
                }
                match (at_least, at_most) {
                    (None, None) => Err(de::Error::custom(
                        "a bound is `{ at_least = N }`, `{ at_most = N }` or both",
                    )),
                    (Some(low), Some(high)) if low > high => Err(de::Error::custom(format!(
                        "`at_least = {low}` is above `at_most = {high}`: nothing is both"
                    ))),
                    _ => Ok(MetricValue::Within { at_least, at_most }),
                }
            }
        }
        deserializer.deserialize_any(ValueVisitor)
    }
}

impl JsonSchema for MetricValue {
    fn schema_name() -> Cow<'static, str> {
        "MetricValue".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "A selector's sum (or the number of series): a whole number, or bounds { at_least = N }, { at_most = N } or both.",
            "oneOf": [
                { "type": "integer" },
                {
                    "type": "object",
                    "properties": {
                        "at_least": { "type": "integer" },
                        "at_most": { "type": "integer" }
                    },
                    "minProperties": 1,
                    "additionalProperties": false
                }
            ]
        })
    }
}

/// The Workers Analytics Engine dataset binding a Worker writes its data
/// points to, as the harness emulates it for the scenario.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DataPointsBinding {
    /// In the Worker's env; keeps every point written to it.
    #[default]
    Recording,
    /// Not in the Worker's env, as a lost Wrangler entry leaves it.
    Missing,
    /// In the env, but `writeDataPoint` throws.
    Throwing,
}

/// The `rate_limits.data_points` line each process writes when its dataset
/// binding cannot be written to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DataPointsWarning {
    /// `missing` (no binding) or `failed` (`writeDataPoint` threw).
    pub reason: DataPointsWarningReason,
    /// Lines per isolate that served traffic (per workerd process). 1 by default.
    #[serde(default = "super::bounds::one")]
    pub per_isolate: usize,
}

/// Why a Worker could not write its data points.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DataPointsWarningReason {
    /// The binding is not in the Worker's env.
    Missing,
    /// Its `writeDataPoint` threw.
    Failed,
}

impl DataPointsWarningReason {
    /// As the line spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            DataPointsWarningReason::Missing => "missing",
            DataPointsWarningReason::Failed => "failed",
        }
    }
}

/// The metrics table of an expectation: each selector, with its place, and
/// what its sum must be.
pub type MetricsTable = BTreeMap<toml::Spanned<MetricSelector>, toml::Spanned<MetricValue>>;

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<MetricSelector, String> {
        text.parse::<MetricSelector>().map_err(|e| e.to_string())
    }

    #[test]
    fn a_selector_names_a_metric_and_the_labels_it_fixes() {
        let s = parse(r#"decisions{limit="address", outcome="refused",}"#).expect("parses");
        assert_eq!(s.name, MetricName::Decisions);
        assert_eq!(
            s.labels,
            BTreeMap::from([
                ("limit".to_owned(), "address".to_owned()),
                ("outcome".to_owned(), "refused".to_owned())
            ])
        );
        assert_eq!(
            s.to_string(),
            r#"decisions{limit="address",outcome="refused"}"#
        );
        let bare = parse("memory_bytes").expect("parses");
        assert!(bare.labels.is_empty());
        let path = parse(r#"decisions{limit="/api/a\"b\\c"}"#).expect("escapes");
        assert_eq!(path.labels["limit"], "/api/a\"b\\c");
    }

    #[test]
    fn a_selector_matches_every_series_with_its_labels_whatever_the_others() {
        let s = parse(r#"counted_in_memory{reason="failed"}"#).expect("parses");
        let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        let name = "rate_limits_counted_in_memory_total";
        assert!(s.matches(name, &labels(&[("reason", "failed"), ("store", "cache")])));
        assert!(!s.matches(name, &labels(&[("reason", "missing"), ("store", "cache")])));
        assert!(!s.matches(name, &labels(&[("store", "cache")])));
        assert!(!s.matches(
            "rate_limits_decisions_total",
            &labels(&[("reason", "failed")])
        ));
    }

    #[test]
    fn a_selector_that_is_not_the_interface_s_says_what_is() {
        for (written, wanted) in [
            ("decisions{limit=address}", "not in double quotes"),
            (r#"decisions{limit="address""#, "does not end with `}`"),
            ("Decisions", "lower-case letters"),
            ("", "lower-case letters"),
            (r#"decisions{="x"}"#, "no `=`"),
            (
                r#"decisions{limit="a" outcome="refused"}"#,
                "where `,` or `}` goes",
            ),
            (r#"decisions{limit="a}"#, "no closing quote"),
            (
                "decision",
                "`decision` is no metric: one of decisions, counted_in_memory",
            ),
            (
                "rate_limits_decisions_total",
                "write `decisions`, without the `rate_limits_` prefix",
            ),
            (
                r#"decisions{reason="failed"}"#,
                "`decisions` has no label `reason`: its labels are limit, outcome, deployable",
            ),
            (
                r#"decisions{outcome="refuse"}"#,
                "`outcome` of `decisions` is never `refuse`: it is one of passed, refused",
            ),
            (
                r#"data_points{reason="cooling"}"#,
                "one of none, no_backend, cooling_off, missing, failed, timed_out, not_asked",
            ),
            (
                r#"decisions{limit="a",limit="b"}"#,
                "`limit` is written twice",
            ),
        ] {
            let error = parse(written).expect_err(written);
            assert!(error.contains(wanted), "{written}: {error}");
        }
    }

    /// Every series a native gate records is a name a selector may write,
    /// with the runtime's labels and values (taken from
    /// `runtime::native::metrics::METRICS`, not copied), `deployable` last.
    #[test]
    fn every_native_series_of_the_runtime_is_a_metric_name_with_its_labels() {
        use runtime::native::metrics::METRICS;
        let native: Vec<MetricName> = MetricName::ALL
            .into_iter()
            .filter(|n| n.source() == MetricSource::Native)
            .collect();
        assert_eq!(native.len(), METRICS.len());
        for (series, labels) in METRICS {
            let name = native
                .iter()
                .find(|n| n.series_name() == series)
                .unwrap_or_else(|| panic!("{series} has no MetricName"));
            let mut wanted: Vec<(&str, Option<&[&str]>)> =
                labels.iter().map(|l| (l.name, l.values)).collect();
            wanted.push(("deployable", None));
            assert_eq!(name.labels(), wanted, "{name}");
        }
        assert_eq!(
            MetricName::StoreState.label_values("state"),
            Some(&["asked", "cooling_off", "probing"][..])
        );
        assert_eq!(MetricName::Decisions.label_values("limit"), None);
        assert_eq!(
            MetricName::DataPoints.label_values("outcome"),
            Some(&["passed", "refused", "shadow_refused"][..])
        );
    }

    /// A data point's reasons are `none` and `runtime::limiter::InMemory`'s.
    #[test]
    fn a_data_point_s_reasons_are_the_limiter_s() {
        use runtime::limiter::InMemory;
        use runtime::unstable_for_tools::backend::FallbackReason;
        let in_memory = [
            InMemory::NoBackend,
            InMemory::CoolingOff,
            InMemory::Unavailable(FallbackReason::Missing),
            InMemory::Unavailable(FallbackReason::Failed),
            InMemory::Unavailable(FallbackReason::TimedOut),
            InMemory::NotAsked,
        ]
        .map(InMemory::as_str);
        assert_eq!(POINT_REASONS[0], "none");
        assert_eq!(&POINT_REASONS[1..], &in_memory[..]);
    }

    #[test]
    fn a_value_is_a_whole_number_or_bounds() {
        #[derive(Deserialize)]
        struct T {
            v: MetricValue,
        }
        let read = |text: &str| {
            toml::from_str::<T>(text)
                .map(|t| t.v)
                .map_err(|e| e.to_string())
        };
        assert_eq!(read("v = 3"), Ok(MetricValue::Exactly(3)));
        assert_eq!(read("v = -3"), Ok(MetricValue::Exactly(-3)));
        let within = read("v = { at_least = 2, at_most = 4 }").expect("bounds");
        assert!(within.holds(2.0) && within.holds(4.0));
        assert!(!within.holds(1.0) && !within.holds(5.0));
        assert_eq!(within.to_string(), "at least 2 and at most 4");
        let at_most = read("v = { at_most = 4 }").expect("bounds");
        assert!(at_most.holds(0.0) && !at_most.holds(4.5));
        assert!(!MetricValue::Exactly(3).holds(3.5));
        for (bad, wanted) in [
            ("v = {}", "at_least = N"),
            ("v = { at_least = 5, at_most = 4 }", "nothing is both"),
            ("v = { exactly = 4 }", "unknown field `exactly`"),
            ("v = 1.5", "a whole number"),
            ("v = \"3\"", "a whole number"),
        ] {
            let error = read(bad).expect_err(bad);
            assert!(error.contains(wanted), "{bad}: {error}");
        }
    }
}
