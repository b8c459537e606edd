//! `cargo test -p harness --test workers_rs`: every scenario of `scenarios/`
//! that runs a Worker, the fault matrix included, on the Worker written with
//! workers-rs (`harness/deployable-workers-rs`, its gate through
//! `runtime::workers_rs`), each its own named trial as in the scenarios
//! target. A target of its own, so the two Workers' corpora are told apart
//! in the report and run at once under cargo-nextest. See
//! [`harness::commands::trials`].

use std::process::ExitCode;

use harness::commands::trials::{self, Corpus};
use harness::world::wasm::WorkerChoice;

fn main() -> ExitCode {
    trials::main(Corpus::WorkersOn(WorkerChoice::WorkersRs))
}
