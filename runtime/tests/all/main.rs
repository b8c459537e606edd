//! runtime's integration tests, linked into one binary (wasmtime's
//! `tests/all`): a module per area, each file's tests named `MODULE::TEST`
//! (`cargo test -p runtime --test all -- config::`), where a binary per file
//! cost a link each.
//!
//! Every test shares this process with the others, in parallel threads, so
//! none may change what the process holds for all of them: its
//! environment, its current directory, its signal dispositions, its global
//! `tracing` subscriber (the one [`common::Lines`] installs hands each
//! thread only its own events). The one exception, its `metrics` recorder,
//! is installed once by [`common::metrics`] and read by each test only
//! under its own deployable's name.

mod common;
mod sweep;

mod address;
mod axum;
mod axum_example;
mod bindings;
mod client_address;
mod config;
mod cool_off;
mod counter;
mod floods;
mod gate_plan;
mod hostile;
mod limiter;
mod memory;
mod methods;
mod metrics;
mod native;
mod product;
mod quickstart;
mod router;
mod routes;
mod secrets;
mod shadow;
