//! The small deployable the harness runs inside workerd: limited API routes
//! under `/api/`, and a health route, wrapping `runtime`'s [`WorkersGate`].
//!
//! It builds its gate from the text binding `PLAN`: the plan the harness
//! wrote for the scenario's deployable (`GatePlan::to_text`), as a
//! production Worker builds it from the plan its build step wrote, so no
//! application-description parser is linked. A real application takes the
//! caller from its sign-in; this test fixture reads it from the
//! `X-Test-Caller` header, and the address from `CF-Connecting-IP` as the
//! runtime does.
//!
//! Routes:
//! - `GET /health`: 200 with `{"status":"ok","deployable","counting","health_checks","refused"}`.
//! - `/api/...`: 200 `{"ok":true}` when within the limits, else 429 with
//!   `Retry-After`; 404 (counted as refused) when the deployable serves no API.
//! - anything else: 404.
//!
//! The clock is the gate's own (`Date.now()`); the harness's entry module
//! shifts it by the scenario clock's offset through
//! [`set_clock_offset_ms`], which it gets on its control channel.
//!
//! Benchmarks only: the optional text binding `LIMITING = "off"` switches
//! limiting off, so `/api/...` answers 200 `{"ok":true}` without asking the
//! gate (no binding call, no count); everything else is unchanged. Without
//! the binding, or with any other value, limiting is on. The harness's
//! scenarios never set it (`IsolateConfig::limiting_off`).
#![cfg(target_arch = "wasm32")]

use js_sys::Reflect;
use runtime::Refusal;
use runtime::unstable_for_tools::testing::limiting_off;
use runtime::workers::{HeaderName, WorkersGate, path_of, subject_of};
use wasm_bindgen::prelude::*;

/// The header this fixture takes the signed-in caller's id from, so a
/// scenario can name one. A test's shortcut only: any client can write a
/// header, and a caller is not counted by its address, so a real
/// application takes the caller from its verified sign-in (a session, a
/// checked token), never from a header the client sets.
pub const CALLER_HEADER: &str = "X-Test-Caller";

thread_local! {
    /// [`CALLER_HEADER`], read on every API request.
    static CALLER: HeaderName = HeaderName::new(CALLER_HEADER);
}

#[inline(never)]
fn json_response(status: u16, body: &str) -> Result<JsValue, JsValue> {
    let init = web_sys::ResponseInit::new();
    init.set_status(status);
    let response = web_sys::Response::new_with_opt_str_and_init(Some(body), &init)?;
    response.headers().set("Content-Type", "application/json")?;
    Ok(response.into())
}

#[wasm_bindgen]
extern "C" {
    /// `Response.json(data)`: workerd serialises `data` and builds the 200
    /// with its JSON content type itself, where `new Response(body, init)`
    /// has the body's type and the init's fields and headers read back from
    /// JavaScript objects on every response (BENCHMARKS-log.md, "The cost of
    /// asking, third round").
    #[wasm_bindgen(catch, js_namespace = Response, js_name = json)]
    fn response_json(data: &JsValue) -> Result<web_sys::Response, JsValue>;
}

thread_local! {
    /// `{"ok":true}`, the body of the answer to every request let through, made once.
    static PASSED: JsValue = {
        let body = js_sys::Object::new();
        let _ = Reflect::set(&body, &"ok".into(), &JsValue::TRUE);
        body.into()
    };
}

/// `200 {"ok":true}`, for a request let through.
fn passed() -> Result<web_sys::Response, JsValue> {
    PASSED.with(response_json)
}

/// `GET /health`: the gate's state, counting the check.
#[inline(never)]
fn health(gate: &WorkersGate) -> Result<JsValue, JsValue> {
    json_response(
        200,
        &runtime::unstable_for_tools::testing::health_report(gate.deployable(), &gate.counting())
            .to_json(),
    )
}

/// runtime's `refusal_response`, the refusal counted in the isolate's
/// tally first (the fixture's `/health` reports it): so [`fetch`] reads as a
/// user's Worker, which calls `runtime::workers::refusal_response` itself
/// (README.md and docs/workers.md show its lines).
fn refusal_response(refusal: &Refusal) -> Result<web_sys::Response, JsValue> {
    runtime::unstable_for_tools::testing::tally_refused();
    runtime::workers::refusal_response(refusal)
}

/// `404 {"error": error}`. A map, not a `serde_json::Value`, whose
/// serialiser would link float formatting into the Worker.
#[inline(never)]
fn not_found(error: &str) -> Result<JsValue, JsValue> {
    let body = std::collections::BTreeMap::from([("error", error)]);
    json_response(404, &serde_json::to_string(&body).unwrap_or_default())
}

/// Compiles the request path and builds the isolate's gate while the
/// Worker starts (see [`runtime::workers::start`]).
#[wasm_bindgen(start)]
pub fn start() {
    runtime::workers::start();
}

/// The scenario clock: the harness's entry module calls this on `POST
/// /clock`, with the request's `env` (the isolate's gate is built from its plan).
#[wasm_bindgen]
pub fn set_clock_offset_ms(offset_ms: f64, env: JsValue) -> Result<(), JsValue> {
    runtime::unstable_for_tools::testing::set_clock_offset_ms(offset_ms, &env)
}

/// The Worker's fetch handler, called by the JavaScript entry module. It
/// returns the response, or a promise of it when the gate waits for a binding.
#[wasm_bindgen]
pub fn fetch(request: web_sys::Request, env: JsValue) -> Result<JsValue, JsValue> {
    let gate = WorkersGate::of_isolate(&env)?;
    let path = path_of(&request);
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
    if limiting_off(&env) {
        return passed().map(JsValue::from);
    }
    let headers = request.headers();
    let caller = CALLER.with(|name| name.read(&headers));
    let subject = subject_of(&headers, caller.as_deref());
    let method = request.method();
    gate.decide(&env, &subject, &method, &path, |verdict| match verdict {
        Ok(()) => passed().map(JsValue::from),
        Err(refusal) => refusal_response(&refusal).map(JsValue::from),
    })
}
