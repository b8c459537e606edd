//! `cargo test -p harness --test workers_rs`: every scenario of `scenarios/`
//! that runs a Worker, the fault matrix included, on the two Workers written
//! with workers-rs: `harness/workers/workers-rs` (its `#[event(fetch)]`
//! handler calls `Gate::decide`) and `harness/workers/axum` (an axum
//! `Router` limited by `RateLimitLayer`), each scenario a named trial per
//! Worker (`workers-rs::FILE::NAME`, `axum::FILE::NAME`). A target of its
//! own, so the Workers' corpora are told apart in the report. See
//! [`harness::commands::trials`].

use std::process::ExitCode;

use harness::commands::trials::{self, Corpus};
use harness::world::wasm::WorkerChoice;

fn main() -> ExitCode {
    trials::main(Corpus::WorkersOn(&[
        WorkerChoice::WorkersRs,
        WorkerChoice::Axum,
    ]))
}
