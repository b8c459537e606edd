//! The native deployable under test: a small hyper server wrapping
//! `runtime::native`, with the Workers fixture's routes, started by the
//! harness as real processes.
//!
//! `native-fixture APPLICATION.toml DEPLOYABLE [--limiting-off]`, with the
//! control token (if any) in the environment variable [`CONTROL_TOKEN_VAR`]:
//! an argv is readable by every local user (`/proc/PID/cmdline`), who could
//! then move the fixture's clock; an environment only by its owner.
//!
//! - It connects its Redis store first ([`NativeGate::connect`], at most
//!   the 500 ms deadline), as a server would before serving.
//! - It listens on `127.0.0.1:0` and reports its port as the first line on
//!   stdout: `{"event":"listen","port":N}`.
//! - `GET /health`: 200 `{"status":"ok","deployable","counting","health_checks","refused"}`.
//! - `/api/...`: through [`RateLimitLayer`]: 200 `{"ok":true}`, or the 429.
//!   404 (counted as refused) when the deployable serves no API.
//! - `POST /clock` with `x-harness-control: TOKEN` and `{"offset_ms":N}`
//!   (only with a control token): the scenario clock, as the Workers
//!   fixture's control channel sets it; the gate's windows, Redis keys and
//!   cool-off all read it. Answers `{"offset_ms":N}`.
//! - anything else: 404.
//!
//! The caller is read from `X-Test-Caller` (a real application takes it from
//! its sign-in). The address comes from where the deployable's
//! `client_address` says: the socket's peer (the harness connects from the
//! loopback address a scenario's `peer` names), `CF-Connecting-IP`, or
//! `X-Forwarded-For` through trusted proxies. Logs are `tracing` JSON lines
//! on stderr, one object per event.
//!
//! Benchmarks only: `--limiting-off` answers `/api/...` 200 without asking
//! the gate, the baseline the limiter's cost is measured against.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use runtime::CallerId;
use runtime::native::{NativeGate, PeerAddr, RateLimitLayer};
use tower_layer::Layer;
use tower_service::Service;

/// The header this fixture takes the signed-in caller's id from, so a
/// scenario can name one. A test's shortcut only: any client can write a
/// header, and a caller is not counted by its address, so a real
/// application takes the caller from its verified sign-in (a session, a
/// checked token), never from a header the client sets.
const CALLER_HEADER: &str = "X-Test-Caller";

type Response = http::Response<Full<Bytes>>;

fn json(status: u16, body: &serde_json::Value) -> Response {
    let mut response = http::Response::new(Full::from(body.to_string()));
    *response.status_mut() = http::StatusCode::from_u16(status).unwrap_or_default();
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

/// The API's own handler, behind the rate limit.
#[derive(Clone)]
struct Api;

impl Service<http::Request<Incoming>> for Api {
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: http::Request<Incoming>) -> Self::Future {
        Box::pin(async { Ok(json(200, &serde_json::json!({ "ok": true }))) })
    }
}

/// The header carrying the harness's control token (the Workers fixture's too).
const CONTROL_HEADER: &str = "x-harness-control";

/// `POST /clock`: sets the gate's clock offset, for the harness only.
async fn set_clock(gate: &NativeGate, request: http::Request<Incoming>) -> Response {
    let Ok(body) = request.into_body().collect().await else {
        return json(400, &serde_json::json!({ "error": "unreadable body" }));
    };
    let offset = serde_json::from_slice::<serde_json::Value>(&body.to_bytes())
        .ok()
        .and_then(|v| v["offset_ms"].as_i64());
    match offset {
        Some(offset_ms) => {
            gate.clock().set_offset_ms(offset_ms);
            json(200, &serde_json::json!({ "offset_ms": offset_ms }))
        }
        None => json(
            400,
            &serde_json::json!({ "error": "want {\"offset_ms\": N}" }),
        ),
    }
}

/// What the health route reports beside the gate's state, counted by this
/// fixture (the production gate counts no health checks): health checks
/// answered, and requests refused (429s, and API requests to a deployable
/// serving none). Shared by the connections' tasks.
#[derive(Default)]
struct Tally {
    health_checks: AtomicU64,
    refused: AtomicU64,
}

impl Tally {
    /// Counts a refused request.
    fn refused(&self) {
        self.refused.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a health check, and returns the counts to report.
    fn health_check(&self) -> (u64, u64) {
        let health_checks = self.health_checks.fetch_add(1, Ordering::Relaxed) + 1;
        (health_checks, self.refused.load(Ordering::Relaxed))
    }
}

async fn route(
    limiting_off: bool,
    control_token: Option<Arc<str>>,
    gate: Arc<NativeGate>,
    tally: Arc<Tally>,
    deployable: Arc<str>,
    peer: SocketAddr,
    mut request: http::Request<Incoming>,
) -> Result<Response, Infallible> {
    let path = request.uri().path().to_owned();
    if path == "/health" {
        let (health_checks, refused) = tally.health_check();
        return Ok(json(
            200,
            &serde_json::json!({
                "status": "ok",
                "deployable": &*deployable,
                "counting": gate.counting().name(),
                "health_checks": health_checks,
                "refused": refused,
            }),
        ));
    }
    if path == "/clock" && request.method() == http::Method::POST {
        let token = request
            .headers()
            .get(CONTROL_HEADER)
            .and_then(|v| v.to_str().ok());
        if control_token.is_some() && token == control_token.as_deref() {
            return Ok(set_clock(&gate, request).await);
        }
        return Ok(json(404, &serde_json::json!({ "error": "not_found" })));
    }
    if !path.starts_with("/api/") {
        return Ok(json(404, &serde_json::json!({ "error": "not_found" })));
    }
    if !gate.serves_api() {
        tally.refused();
        return Ok(json(404, &serde_json::json!({ "error": "no_api" })));
    }
    if limiting_off {
        return Ok(json(200, &serde_json::json!({ "ok": true })));
    }
    let caller = request
        .headers()
        .get(CALLER_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    if let Some(caller) = caller {
        request.extensions_mut().insert(CallerId(caller));
    }
    request.extensions_mut().insert(PeerAddr(peer));
    let response = RateLimitLayer::new(gate).layer(Api).call(request).await;
    if matches!(&response, Ok(r) if r.status() == http::StatusCode::TOO_MANY_REQUESTS) {
        tally.refused();
    }
    response
}

/// The environment variable the harness hands the control token in
/// (`harness::world::native::CONTROL_TOKEN_VAR`). The fixture starts no
/// process, so nothing inherits it.
const CONTROL_TOKEN_VAR: &str = "NATIVE_FIXTURE_CONTROL_TOKEN";

#[tokio::main]
async fn main() -> ExitCode {
    let control_token: Option<Arc<str>> = std::env::var(CONTROL_TOKEN_VAR)
        .ok()
        .filter(|token| !token.is_empty())
        .map(|token| Arc::from(token.as_str()));
    tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_current_span(false)
        .with_writer(std::io::stderr)
        .init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(application), Some(deployable)) = (args.first(), args.get(1)) else {
        eprintln!(
            "usage: native-fixture APPLICATION.toml DEPLOYABLE [--limiting-off] \
             (the control token, if any, in {CONTROL_TOKEN_VAR})"
        );
        return ExitCode::from(2);
    };
    let limiting_off = args.iter().any(|a| a == "--limiting-off");
    let source = match std::fs::read_to_string(application) {
        Ok(source) => source,
        Err(error) => {
            eprintln!("could not read {application}: {error}");
            return ExitCode::from(2);
        }
    };
    let gate = match NativeGate::from_toml(&source, deployable) {
        Ok(gate) => Arc::new(gate),
        Err(runtime::native::GateError::Invalid(diagnostics)) => {
            eprint!("{}", diagnostics.render(application));
            return ExitCode::from(2);
        }
        Err(error) => {
            eprintln!("{application}: {error}");
            return ExitCode::from(2);
        }
    };
    // As a server would before it serves: its first request then pays for
    // no connection (a TLS handshake, a cluster's slot map).
    if let Err(unreachable) = gate.connect().await {
        eprintln!("{unreachable}");
    }
    let listener = match tokio::net::TcpListener::bind("127.0.0.1:0").await {
        Ok(listener) => listener,
        Err(error) => {
            eprintln!("could not listen: {error}");
            return ExitCode::FAILURE;
        }
    };
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    println!("{}", serde_json::json!({ "event": "listen", "port": port }));
    let deployable: Arc<str> = Arc::from(deployable.as_str());
    let tally = Arc::new(Tally::default());
    loop {
        let Ok((stream, peer)) = listener.accept().await else {
            continue;
        };
        let gate = gate.clone();
        let tally = tally.clone();
        let deployable = deployable.clone();
        let control_token = control_token.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                route(
                    limiting_off,
                    control_token.clone(),
                    gate.clone(),
                    tally.clone(),
                    deployable.clone(),
                    peer,
                    request,
                )
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}
