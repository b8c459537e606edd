//! The harness's deployable as people write an axum service on Workers:
//! workers-rs's `#[event(fetch)]` with its `http` feature hands an
//! `http::Request` to an axum `Router`, and `runtime::workers_rs`'s
//! [`RateLimitLayer`] limits the API routes. It serves the same routes as
//! `harness/deployable`, so the corpus runs against it (`harness run
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

use std::rc::Rc;

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use runtime::workers::{Gate, limiting_off};
use runtime::workers_rs::{CallerId, RateLimitLayer, isolate_gate};
use tower_service::Service;
use wasm_bindgen::prelude::wasm_bindgen;
use worker::send::SendWrapper;
use worker::{Context, Env, HttpRequest, Result, event};

/// The header this fixture takes the signed-in caller's id from.
pub const CALLER_HEADER: &str = "X-Test-Caller";

/// The scenario clock: the harness's entry module calls this on `POST /clock`.
#[wasm_bindgen]
pub fn set_clock_offset_ms(offset_ms: f64) {
    runtime::workers_rs::set_clock_offset_ms(offset_ms as i64);
}

fn json(status: StatusCode, body: serde_json::Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
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

/// The routes, built per request (the layer asks this request's `env`).
fn router(gate: Rc<Gate>, env: Env, limited: bool) -> Router {
    let shared = SendWrapper::new(gate.clone());
    let api = Router::new().route(
        "/api/{*rest}",
        any(move || {
            let gate = shared.clone();
            async move {
                if gate.serves_api() {
                    json(StatusCode::OK, serde_json::json!({ "ok": true }))
                } else {
                    gate.record_refused();
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
                    let tally = gate.record_health_check();
                    json(
                        StatusCode::OK,
                        serde_json::json!({
                            "status": "ok",
                            "deployable": gate.deployable(),
                            "counting": gate.counting().name(),
                            "health_checks": tally.health_checks,
                            "refused": tally.refused,
                        }),
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
}

/// Compiles the request path and builds the isolate's gate while the
/// Worker starts (see [`runtime::workers_rs::start`]).
#[event(start)]
fn start() {
    runtime::workers_rs::start();
}

#[event(fetch)]
async fn fetch(req: HttpRequest, env: Env, _ctx: Context) -> Result<axum::http::Response<Body>> {
    let gate = isolate_gate(&env)?;
    let limited = !limiting_off(env.as_ref());
    Ok(router(gate, env, limited).call(req).await?)
}
