//! The harness's deployable written as people write a Rust Worker with
//! workers-rs: an `#[event(fetch)]` handler taking a `worker::Request` and
//! `worker::Env`, the gate asked through `runtime::workers`
//! ([`WorkersGate::decide_async`]). It serves the same routes as `harness/workers/wasm-bindgen`, so
//! the whole scenario corpus runs against it (`harness run --worker
//! workers-rs`):
//!
//! - `GET /health`: 200 with `{"status":"ok","deployable","counting","health_checks","refused"}`.
//! - `/api/...`: 200 `{"ok":true}` when within the limits, else 429 with
//!   `Retry-After`; 404 (counted as refused) when the deployable serves no API.
//! - anything else: 404.
//!
//! It builds its gate from the text binding `PLAN` (the plan the harness
//! wrote for the scenario's deployable), takes the signed-in caller from
//! `X-Test-Caller` as the other deployable does, and the time from
//! `Date.now()` shifted by the scenario clock's offset, which the harness's
//! entry module sets through [`set_clock_offset_ms`]. Benchmarks only: the
//! text binding `LIMITING = "off"` answers `/api/...` without the gate.
#![cfg(target_arch = "wasm32")]

use runtime::Refusal;
use runtime::unstable_for_tools::testing::limiting_off;
use runtime::workers::{HeaderName, Limited, WorkersGate};
use wasm_bindgen::prelude::wasm_bindgen;
use worker::{Context, Env, Request, Response, Result, event};

/// The header this fixture takes the signed-in caller's id from, so a
/// scenario can name one. A test's shortcut only: any client can write a
/// header, and a caller is not counted by its address, so a real
/// application takes the caller from its verified sign-in (a session, a
/// checked token), never from a header the client sets.
pub const CALLER_HEADER: &str = "X-Test-Caller";

thread_local! {
    /// [`CALLER_HEADER`], read on every API request (as `harness/workers/wasm-bindgen`
    /// reads it, so the two Workers' costs compare).
    static CALLER: HeaderName = HeaderName::new(CALLER_HEADER);
}

/// The scenario clock: the harness's entry module calls this on `POST
/// /clock`, with the request's `env` (the isolate's gate is built from its plan).
#[wasm_bindgen]
pub fn set_clock_offset_ms(
    offset_ms: f64,
    env: wasm_bindgen::JsValue,
) -> std::result::Result<(), wasm_bindgen::JsValue> {
    runtime::unstable_for_tools::testing::set_clock_offset_ms(offset_ms, &env)
}

fn json(status: u16, body: &serde_json::Value) -> Result<Response> {
    Ok(Response::from_json(body)?.with_status(status))
}

/// Compiles the request path and builds the isolate's gate while the
/// Worker starts (see [`runtime::workers::start`]).
#[event(start)]
fn start() {
    runtime::workers::start();
}

/// `GET /health`: the gate's state, counting the check. Out of line, as is
/// every answer but an API request's, so the first API request has V8
/// compile the API path and no more (see `harness/workers/wasm-bindgen`).
#[inline(never)]
fn health(gate: &WorkersGate) -> Result<Response> {
    Ok(
        Response::from_json(&runtime::unstable_for_tools::testing::health_report(
            gate.deployable(),
            &gate.counting(),
        ))?
        .with_status(200),
    )
}

/// runtime's `refusal_response`, the refusal counted in the isolate's
/// tally first (the fixture's `/health` reports it): so [`fetch`] reads as a
/// user's Worker, which calls `runtime::workers::refusal_response` itself
/// (README.md and docs/workers.md show its lines).
fn refusal_response(
    refusal: &Refusal,
) -> std::result::Result<worker::web_sys::Response, wasm_bindgen::JsValue> {
    runtime::unstable_for_tools::testing::tally_refused();
    runtime::workers::refusal_response(refusal)
}

/// `404 {"error": error}`.
#[inline(never)]
fn not_found(error: &str) -> Result<Response> {
    json(404, &serde_json::json!({ "error": error }))
}

#[event(fetch)]
async fn fetch(req: Request, env: Env, _ctx: Context) -> Result<Response> {
    let gate = WorkersGate::of_isolate(&env)?;
    let path = req.path();
    if path == "/health" {
        return health(&gate);
    }
    if !path.starts_with("/api/") {
        return not_found("not_found");
    }
    if !gate.serves_api() {
        runtime::unstable_for_tools::testing::tally_refused();
        return not_found("no_api");
    }
    if limiting_off(env.as_ref()) {
        return json(200, &serde_json::json!({ "ok": true }));
    }
    let caller = CALLER.with(|name| name.read(&req.headers().0));
    let subject = req.subject(caller.as_deref());
    let method = req.limited_method();
    if let Err(refusal) = gate.decide_async(&env, &subject, &method, &path).await {
        return Ok(Response::from(refusal_response(&refusal)?));
    }
    json(200, &serde_json::json!({ "ok": true }))
}
