//! Scenario files: what QA write. A file holds shared defaults and a list of
//! `[[scenario]]`s; each names an application, the emulated bindings'
//! behaviour, how many isolates, a sequence of steps and what to expect.
//!
//! Parsing keeps spans, so every error (and every failed expectation) points
//! at `file:line:col`. The JSON Schema of this format is generated from these
//! types (see `scenarios/scenario.schema.json`).
//!
//! The format is `model` (a file and its scenarios), `behaviour` (the
//! bindings' and the store's), `step` (the steps and the one action each
//! does) and `expect` (what a scenario expects), held to `bounds`, with
//! `statuses` for a status sequence, and `metrics` for the metrics a
//! scenario expects. `load` reads a file into [`Prepared`]
//! scenarios (`prepared`), each with its application validated once and
//! validated (`validate`), every error located through its `source`;
//! `schema` is the format's JSON Schema. Everything is used from here, by
//! these names.

mod behaviour;
mod bounds;
mod expect;
mod load;
mod metrics;
mod model;
mod prepared;
mod schema;
mod source;
mod statuses;
mod step;
mod validate;

pub use behaviour::{ALL_BINDINGS, Behaviour, RedisBehaviour, behaviour_of};
pub use bounds::{MAX_CONCURRENCY, MAX_DEADLINE_MS, MAX_ISOLATES, MAX_REQUESTS};
pub use expect::{
    Deadline, FallbackExpectation, FallbackReasonName, FinalExpectations, Latency, RedisCalls,
    SendExpectations,
};
pub use load::{DIFFERENTIAL_FILE, EXPECTED_FAILURES_FILE, load_file, load_text, scenario_files};
pub use metrics::{
    DataPointsBinding, DataPointsWarning, DataPointsWarningReason, MetricName, MetricSelector,
    MetricSource, MetricValue, MetricsTable, SelectorError,
};
pub use model::{ClockKind, RedisKind, RedisTls, SLOW_TAG, Scenario, ScenarioFile};
pub use prepared::Prepared;
pub use schema::json_schema;
pub use source::{Place, ScenarioError, ScenarioErrors, ScenarioSource};
pub use statuses::{Run, expand_statuses, parse_statuses};
pub use step::{Action, AdvanceClock, SendRequests, Step, StepWallClock, WaitForRoom};
pub use validate::cloudflare_obstacle;
