//! A scenario file and its scenarios, as QA write them: the top of the
//! format. A scenario's parts are described beside it: the bindings' and
//! the store's behaviours ([`super::behaviour`]), its steps
//! ([`super::step`]) and what it expects ([`super::expect`]), each held to
//! the format's [`super::bounds`].

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Deserialize;
use toml::Spanned;

use super::behaviour::{Behaviour, RedisBehaviour};
use super::bounds::{MAX_ISOLATES, one};
use super::expect::FinalExpectations;
use super::metrics::DataPointsBinding;
use super::step::Step;
use crate::language::cloudflare::CloudflareCheck;

/// The tag that marks a scenario as slow: skipped unless `--include-ignored`.
pub const SLOW_TAG: &str = "slow";

/// A scenario file as written.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(
    title = "Rate-limit conformance scenarios",
    description = "Scenarios the conformance harness runs against a real workerd. See scenarios/README.md."
)]
pub struct ScenarioFile {
    /// Default application description for every scenario here: a TOML file, relative to this file.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub application: Option<Spanned<String>>,
    /// Default deployable (by name) the scenarios run.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub deployable: Option<Spanned<String>>,
    /// The scenarios.
    #[serde(default)]
    #[schemars(with = "Vec<Scenario>")]
    pub scenario: Vec<Spanned<Scenario>>,
}

/// One scenario: a named trial.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Its name; the trial is `FILE::NAME`.
    pub name: String,
    /// Tags; `slow` marks scenarios that wait for real time, skipped by default.
    #[serde(default)]
    pub tags: Vec<String>,
    /// Which clock the scenario's processes read: the scenario clock (the
    /// default, started at a minute's beginning and moved by the steps) or the
    /// wall clock (real windows: tag it slow).
    #[serde(default)]
    pub clock: ClockKind,
    /// The application description, a TOML file relative to this file (overrides the file's default).
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub application: Option<Spanned<String>>,
    /// The application description written inline (instead of `application`).
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub application_inline: Option<Spanned<String>>,
    /// The deployable to run (overrides the file's default).
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub deployable: Option<Spanned<String>>,
    /// How many isolates (separate workerd processes) run the deployable. Traffic goes round-robin unless a step names one.
    #[serde(default = "one")]
    #[schemars(range(min = 1, max = MAX_ISOLATES))]
    pub isolates: usize,
    /// Each binding's behaviour at the start, by binding name or `*` for all; the rest are healthy.
    #[serde(default)]
    #[schemars(with = "Option<BTreeMap<String, Behaviour>>")]
    pub bindings: Option<Spanned<BTreeMap<String, Behaviour>>>,
    /// For a native deployable counting in Redis: one real `redis-server`
    /// (`server`, the default) or a real Redis Cluster of three masters,
    /// each with a replica (`cluster`), started for the scenario and
    /// stopped with it.
    #[serde(default)]
    pub redis: RedisKind,
    /// For a native deployable counting in Redis: the server (or every
    /// node of the cluster) speaks TLS with a certificate made for the scenario, and the
    /// instances connect over `rediss://`, trusting (`trusted`) the
    /// authority that signed it, or (`untrusted`) another one.
    #[serde(default)]
    #[schemars(with = "Option<RedisTls>")]
    pub redis_tls: Option<Spanned<RedisTls>>,
    /// For a native deployable counting in Redis: how that Redis starts
    /// (`healthy` by default, `down`, `hanging`, `slow = { ms = N }` or
    /// `missing`).
    #[serde(default)]
    #[schemars(with = "Option<RedisBehaviour>")]
    pub redis_starts: Option<Spanned<RedisBehaviour>>,
    /// For a Workers deployable whose application writes data points
    /// (`[rate_limits] data_points`): the emulated dataset binding is
    /// `recording` (the default: it keeps every point), `missing` (not in
    /// the Worker's env) or `throwing` (`writeDataPoint` throws).
    #[serde(default)]
    #[schemars(with = "Option<DataPointsBinding>")]
    pub data_points_binding: Option<Spanned<DataPointsBinding>>,
    /// For an invalid application: the diagnostic codes `harness validate` must report (and no steps).
    #[serde(default)]
    #[schemars(with = "Option<Vec<String>>")]
    pub expect_diagnostics: Option<Spanned<Vec<String>>>,
    /// The steps, in order.
    #[serde(default)]
    #[schemars(with = "Vec<Step>")]
    pub steps: Vec<Spanned<Step>>,
    /// What must hold once the steps are done.
    #[serde(default)]
    #[schemars(with = "Option<FinalExpectations>")]
    pub expect: Option<Spanned<FinalExpectations>>,
    /// Run on Cloudflare itself too (`harness cloudflare`), and how its
    /// status expectations are checked there: `"exact"`, or `{ refusal_by
    /// = N }` (bounded: the first refusal no earlier than the limit and by N
    /// times it). Without it the scenario runs only here.
    #[serde(default)]
    #[schemars(with = "Option<CloudflareCheck>")]
    pub on_cloudflare: Option<Spanned<CloudflareCheck>>,
}

/// The clock a scenario's processes (each isolate's deployable and the
/// count server) read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ClockKind {
    /// The wall clock plus an offset the harness sets: the scenario starts at
    /// the beginning of a minute, and `wait_for_window`, `wait_for_room` and
    /// `advance_clock` move it instead of sleeping.
    #[default]
    Scenario,
    /// The wall clock itself: windows end on real boundaries and the harness
    /// waits for them, so a fault in the clock plumbing cannot hide.
    Wall,
}

/// Whom a native scenario's instances trust for their TLS Redis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RedisTls {
    /// The authority that signed the server's certificate (`SSL_CERT_FILE`).
    Trusted,
    /// Another authority: the certificate does not verify.
    Untrusted,
}

/// Which Redis a native scenario counts in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RedisKind {
    /// One `redis-server`.
    #[default]
    Server,
    /// Three `redis-server --cluster-enabled yes` joined into one cluster.
    Cluster,
}
