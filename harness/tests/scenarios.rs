//! `cargo test -p harness`: every scenario in `scenarios/` as its own named
//! trial (`FILE::NAME`), each against its own workerd, on the Worker
//! `HARNESS_WORKER` names (`harness/workers/wasm-bindgen` by default). Slow scenarios
//! are ignored unless `--include-ignored`. Runs under cargo-nextest too.
//! See [`harness::commands::trials`].

use std::process::ExitCode;

use harness::commands::trials::{self, Corpus};

fn main() -> ExitCode {
    trials::main(Corpus::All)
}
