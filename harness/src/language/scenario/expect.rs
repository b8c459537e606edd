//! What a scenario expects: of the responses of one `send`
//! ([`SendExpectations`]), and once the steps are done ([`FinalExpectations`]).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Deserialize;
use toml::Spanned;

use super::bounds::{MAX_DEADLINE_MS, one};
use super::metrics::{DataPointsWarning, MetricValue, MetricsTable};
use crate::language::cloudflare::SendChecksOnCloudflare;

/// What the responses of one `send` must show. Every field is optional.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SendExpectations {
    /// The statuses in request order, such as `"120 x 200 then 429"` or
    /// `"200 then * x 429"` (`*` is the rest).
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub statuses: Option<Spanned<String>>,
    /// How many responses had each status, such as `{ 200 = 120, 429 = 1 }`.
    #[serde(default)]
    #[schemars(with = "Option<BTreeMap<String, usize>>")]
    pub counts: Option<Spanned<BTreeMap<String, usize>>>,
    /// No response may be a 5xx (or fail to arrive). True unless set to false.
    #[serde(default = "yes")]
    pub no_5xx: bool,
    /// `Retry-After` of every 429, in seconds.
    #[serde(default)]
    #[schemars(with = "Option<u32>")]
    pub retry_after: Option<Spanned<u32>>,
    /// Headers every response must have, with these values (names are case-insensitive).
    #[serde(default)]
    #[schemars(with = "Option<BTreeMap<String, String>>")]
    pub headers: Option<Spanned<BTreeMap<String, String>>>,
    /// JSON fields every response body must have, with these values.
    #[serde(default)]
    #[schemars(with = "Option<BTreeMap<String, serde_json::Value>>")]
    pub body: Option<Spanned<BTreeMap<String, toml::Value>>>,
    /// Latency bounds over this step's requests.
    #[serde(default)]
    #[schemars(with = "Option<Latency>")]
    pub latency: Option<Spanned<Latency>>,
    /// The step's first `waiting` requests wait for a deadline of `ms`, the
    /// rest do not; each wait is judged against requests that cannot wait,
    /// sent to the same process meanwhile, so load cannot hide a longer deadline.
    #[serde(default)]
    #[schemars(with = "Option<Deadline>")]
    pub deadline: Option<Spanned<Deadline>>,
    /// Round trips the native scenario's Redis served during this step,
    /// from its `INFO commandstats` read before and after (summed over a
    /// cluster's nodes).
    #[serde(default)]
    #[schemars(with = "Option<RedisCalls>")]
    pub redis_calls: Option<Spanned<RedisCalls>>,
    /// How the limiter's metrics changed during this step, summed over
    /// every instance: selectors such as
    /// `'decisions{limit="address",outcome="refused"}'` (without the
    /// `rate_limits_` prefix and `_total` suffix), each the sum of every
    /// series with those labels (a histogram counts its observations), a
    /// whole number or `{ at_least = N }`, `{ at_most = N }`. A native
    /// deployable's `metrics` series; a Workers one's `data_points`.
    #[serde(default)]
    #[schemars(with = "Option<BTreeMap<String, MetricValue>>")]
    pub metrics: Option<Spanned<MetricsTable>>,
    /// How these expectations are checked on Cloudflare, where it differs
    /// from the scenario's `on_cloudflare` (by expectation name).
    #[serde(default)]
    #[schemars(with = "Option<SendChecksOnCloudflare>")]
    pub on_cloudflare: Option<Spanned<SendChecksOnCloudflare>>,
}

/// How many script commands Redis ran during one step. Every field is optional.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RedisCalls {
    /// `EVALSHA` calls: one per counted request (all its limits in one script call).
    #[serde(default)]
    pub evalsha: Option<u64>,
    /// `EVAL` calls: sent after Redis answered NOSCRIPT (restarted or flushed).
    #[serde(default)]
    pub eval: Option<u64>,
}

fn yes() -> bool {
    true
}

/// Latency bounds in ms. Set them with room for a loaded 2-core machine.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Latency {
    /// No request faster than this.
    #[serde(default)]
    pub min_ms: Option<u64>,
    /// No request slower than this.
    #[serde(default)]
    pub max_ms: Option<u64>,
    /// The median at most this.
    #[serde(default)]
    pub p50_ms: Option<u64>,
    /// The 99th percentile at most this.
    #[serde(default)]
    pub p99_ms: Option<u64>,
}

/// A deadline the first requests of a step wait for (in one isolate).
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Deadline {
    /// The deadline in ms, as the spec states it (500 for a binding).
    #[schemars(range(min = 1, max = MAX_DEADLINE_MS))]
    pub ms: u64,
    /// How many of the step's first requests wait for it: sent together
    /// (at most `concurrency`), before the deadline ends the first wait.
    #[schemars(range(min = 1))]
    pub waiting: usize,
}

/// What must hold once the steps are done.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FinalExpectations {
    /// The `rate_limits.fallback` lines each isolate must have logged. Any
    /// fallback line not listed here is a failure; with no list, none may appear.
    #[serde(default)]
    pub fallback: Vec<FallbackExpectation>,
    /// The keys that reached each binding, by binding name (exactly these,
    /// in any order); `"*" = []` says that no other binding saw a key.
    #[serde(default)]
    #[schemars(with = "Option<BTreeMap<String, Vec<String>>>")]
    pub binding_keys: Option<Spanned<BTreeMap<String, Vec<String>>>>,
    /// The limiter's metrics at the end, summed over every instance (a
    /// restarted one's counts included): selectors as in a `send`'s
    /// `metrics`, each a whole number or bounds.
    #[serde(default)]
    #[schemars(with = "Option<BTreeMap<String, MetricValue>>")]
    pub metrics: Option<Spanned<MetricsTable>>,
    /// How many distinct series the limiter's metrics have at the end, over
    /// every instance (a histogram's buckets, sum and count are one), or
    /// for a Worker how many distinct label sets its data points have: a
    /// flood from many clients must not make more.
    #[serde(default)]
    #[schemars(with = "Option<MetricValue>")]
    pub metrics_series: Option<Spanned<MetricValue>>,
    /// The `rate_limits.data_points` lines each isolate must have logged
    /// (its dataset binding missing or throwing). Without it none may appear.
    #[serde(default)]
    #[schemars(with = "Option<DataPointsWarning>")]
    pub data_points_warning: Option<Spanned<DataPointsWarning>>,
    /// The shadow limits (by name: `caller`, `address`, a route's path as
    /// validated) whose first would-be refusal was logged as
    /// `rate_limits.shadow_refusal`: each by at least one process, none
    /// twice by one process. Any other limit's line is a failure; with no
    /// list, none may appear.
    #[serde(default)]
    pub shadow_refusal_lines: Vec<String>,
}

/// One kind of fallback line, and how often each isolate logs it.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FallbackExpectation {
    /// The binding named in the line.
    pub binding: String,
    /// `missing`, `failed` or `timed_out`.
    pub reason: FallbackReasonName,
    /// Lines per isolate (per workerd process, so a restarted isolate counts anew). 1 by default.
    #[serde(default = "one")]
    pub per_isolate: usize,
}

/// The reasons a fallback line gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[allow(
    missing_docs,
    reason = "each variant is the reason of the same name in runtime::limiter, and a doc comment here would change the committed JSON Schema"
)]
pub enum FallbackReasonName {
    Missing,
    Failed,
    TimedOut,
}

impl FallbackReasonName {
    /// As a fallback line spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            FallbackReasonName::Missing => "missing",
            FallbackReasonName::Failed => "failed",
            FallbackReasonName::TimedOut => "timed_out",
        }
    }
}
