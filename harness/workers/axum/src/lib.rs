//! The harness's deployable as people write an axum service on Workers:
//! workers-rs's `#[event(fetch)]` with its `http` feature hands an
//! `http::Request` to an axum `Router`, and `runtime::workers`'s
//! [`RateLimitLayer`] limits the API routes. It serves the same routes as
//! `harness/workers/wasm-bindgen`, so the corpus runs against it (`harness run
//! --worker axum`):
//!
//! - `GET /health`: 200 with `{"status":"ok","deployable","counting","health_checks","refused"}`.
//! - `/api/...`: 200 `{"ok":true}` when within the limits, else 429 with
//!   `Retry-After`; 404 (counted as refused) when the deployable serves no API.
//! - anything else: 404.
//!
//! As the other deployables: the gate from the text binding `PLAN`, the
//! signed-in caller from `X-Test-Caller` (handed to the layer as a
//! [`CallerId`]), the scenario clock through [`set_clock_offset_ms`], and
//! `LIMITING = "off"` (benchmarks only) leaving the layer out.
#![cfg(target_arch = "wasm32")]

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use runtime::CallerId;
use runtime::unstable_for_tools::testing::limiting_off;
use runtime::workers::{RateLimitLayer, WorkersGate};
use std::rc::Rc;
use tower_service::Service;
use wasm_bindgen::prelude::wasm_bindgen;
use worker::send::SendWrapper;
use worker::{Context, Env, HttpRequest, Result, event};

/// The header this fixture takes the signed-in caller's id from, so a
/// scenario can name one. A test's shortcut only: any client can write a
/// header, and a caller is not counted by its address, so a real
/// application takes the caller from its verified sign-in (a session, a
/// checked token), never from a header the client sets.
pub const CALLER_HEADER: &str = "X-Test-Caller";

/// The scenario clock: the harness's entry module calls this on `POST
/// /clock`, with the request's `env` (the isolate's gate is built from its plan).
#[wasm_bindgen]
pub fn set_clock_offset_ms(
    offset_ms: f64,
    env: wasm_bindgen::JsValue,
) -> std::result::Result<(), wasm_bindgen::JsValue> {
    runtime::unstable_for_tools::testing::set_clock_offset_ms(offset_ms, &env)
}

fn json(status: StatusCode, body: serde_json::Value) -> Response {
    json_text(status, body.to_string())
}

fn json_text(status: StatusCode, body: String) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// Hands the signed-in caller to the layer.
async fn caller(mut request: Request, next: Next) -> Response {
    let caller = request
        .headers()
        .get(CALLER_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    if let Some(caller) = caller {
        request.extensions_mut().insert(CallerId(caller));
    }
    next.run(request).await
}

/// Counts the requests the layer refused (its 429s) in the isolate's tally (`runtime::unstable_for_tools::testing`).
async fn count_refusals(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    if response.status() == StatusCode::TOO_MANY_REQUESTS {
        runtime::unstable_for_tools::testing::tally_refused();
    }
    response
}

/// The routes, built per request (the layer asks this request's `env`).
fn router(gate: Rc<WorkersGate>, env: Env) -> Router {
    let limited = !limiting_off(env.as_ref());
    let shared = SendWrapper::new(gate.clone());
    let api = Router::new().route(
        "/api/{*rest}",
        any(move || {
            let gate = shared.clone();
            async move {
                if gate.serves_api() {
                    json(StatusCode::OK, serde_json::json!({ "ok": true }))
                } else {
                    runtime::unstable_for_tools::testing::tally_refused();
                    json(
                        StatusCode::NOT_FOUND,
                        serde_json::json!({ "error": "no_api" }),
                    )
                }
            }
        }),
    );
    let api = if limited {
        api.layer(RateLimitLayer::new(gate.clone(), env))
            .layer(middleware::from_fn(caller))
    } else {
        api
    };
    let shared = SendWrapper::new(gate);
    Router::new()
        .route(
            "/health",
            get(move || {
                let gate = shared.clone();
                async move {
                    json_text(
                        StatusCode::OK,
                        runtime::unstable_for_tools::testing::health_report(
                            gate.deployable(),
                            &gate.counting(),
                        )
                        .to_json(),
                    )
                }
            }),
        )
        .merge(api)
        .fallback(|| async {
            json(
                StatusCode::NOT_FOUND,
                serde_json::json!({ "error": "not_found" }),
            )
        })
        // The fixture's own tally, outside the application's stack.
        .layer(middleware::from_fn(count_refusals))
}

/// Compiles the request path and builds the isolate's gate while the
/// Worker starts (see [`runtime::workers::start`]).
#[event(start)]
fn start() {
    runtime::workers::start();
}

#[event(fetch)]
async fn fetch(req: HttpRequest, env: Env, _ctx: Context) -> Result<axum::http::Response<Body>> {
    let gate = WorkersGate::of_isolate(&env)?;
    Ok(router(gate, env).call(req).await?)
}
