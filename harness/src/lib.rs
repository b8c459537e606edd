//! The conformance harness: proves the rate limiter inside a real, pinned workerd.
//!
//! Its words, one thing each:
//!
//! - *scenario*: one TOML table of a `scenarios/*.toml` file, run as one trial.
//! - *step*: one thing a scenario does, in order (`send`, `advance_clock`, `set_bindings`, ...).
//! - *send*: the step that sends requests and says what their answers must be.
//! - *isolate*: one workerd process running the Workers deployable; a scenario may run several.
//! - *instance*: one native process (`native-fixture`) running a native deployable.
//! - *deployable*: a unit of the application description (`[deployables.NAME]`), Workers or native.
//! - *Worker build*: the wasm, its glue and snippets built for one Worker ([`world::wasm::WorkerBuild`]).
//! - *count server*: the one workerd process that keeps every emulated binding's count for a run ([`world::workerd::CountServer`]).
//! - *binding emulation*: `assets/ratelimit-binding.js`, the `ratelimit` binding as the Worker sees it, with its faults.
//! - *dataset emulation*: `assets/data-points-binding.js`, the Workers Analytics Engine dataset a Worker writes its data points to.
//! - *metrics*: what operators see: a native instance's `metrics` series (`GET /metrics`) and a Worker's data points, expected by selectors such as `decisions{outcome="refused"}`.
//! - *fault*: a way an emulated binding misbehaves (throwing, rejecting, malformed, slow, hanging, missing).
//! - *Redis behaviour*: how a native scenario's real Redis behaves (`redis_starts = ...` at the start, `set_redis = ...` mid-run).
//! - *expectation*: what a scenario says must hold of what was observed.
//! - *verdict*: a trial's outcome once the expected failures (`scenarios/expected-failures.toml`) are applied.
//! - *report*: what a run prints: one line per trial, the failures, and `N passed, N failed, N skipped`.
//!
//! It is built in layers, each a folder, each importing only the layers
//! below it (`tests/all/architecture.rs` holds it to that):
//!
//! - [`commands`]: what the command line and the test targets call: a
//!   scenarios directory run as trials, the report, the edge-compatibility
//!   job, `wrangler --write`.
//! - [`judge`]: what was observed, judged against what a scenario expects,
//!   the expected failures, and the two counting cores compared. No I/O.
//! - [`engine`]: runs one scenario's steps in the world and records what it
//!   observed.
//! - [`world`]: the processes and files a scenario runs in: workerd and its
//!   configs, the count servers and the reference core, native instances,
//!   Redis, the wasm build.
//! - [`language`]: the scenario files QA write: the model, parsing with
//!   located errors, the JSON Schema.

pub mod commands;
pub mod engine;
pub mod judge;
pub mod language;
pub mod world;
