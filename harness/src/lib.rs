//! The conformance harness: proves the rate limiter inside a real, pinned workerd.
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
