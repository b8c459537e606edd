//! The harness's integration tests, linked into one binary (wasmtime's
//! `tests/all`): a module per area, each file's tests named `MODULE::TEST`
//! (`cargo test -p harness --test all -- lifetime::`), where a binary per
//! file cost a link each. The libtest-mimic runners that make trials of the
//! scenario files (`tests/scenarios.rs`, `tests/workers_rs.rs`,
//! `tests/differential.rs`) stay binaries of their own.
//!
//! Every test shares this process with the others, in parallel threads, so
//! none may change what the process holds for all of them: its
//! environment, its current directory, its signal dispositions (an
//! in-process `harness cloudflare` run is given an interruption that never
//! comes, not the process's Ctrl-C), its global `tracing` subscriber. Each
//! marks the processes it starts in a way of its own, and takes its ports
//! from the system.

mod common;

mod architecture;
mod ci;
mod cli;
mod cloudflare;
mod count_server;
mod crash;
mod deadline;
mod deployable;
mod edge_compat;
mod fresh_checkout;
mod lifetime;
mod native_processes;
mod product_builds;
mod public_api;
mod readme;
mod redis_store;
mod reference;
mod report_page;
mod scenario_files;
mod test_targets;
mod workflow;
mod wrangler_file;
mod wrangler_schema;
