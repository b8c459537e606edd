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
//!   (and `"wall_step_ms":M` to step the wall clock alone by M)
//!   (only with a control token): the scenario clock, as the Workers
//!   fixture's control channel sets it; the gate's windows (Redis's too: its
//!   script adds the offset to Redis's clock) and cool-off all read it.
//!   Answers `{"offset_ms":N}`.
//! - `GET /metrics` with `x-harness-control: TOKEN` (only with a control
//!   token): the gate's `metrics` series in the Prometheus text format, from
//!   the `metrics-exporter-prometheus` recorder installed as the global
//!   recorder before the gate is built, as a server's would be.
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
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
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

/// `POST /clock`: sets the gate's clock offset, and with `wall_step_ms`
/// steps its wall clock alone by that much (as NTP would), for the harness only.
async fn set_clock(gate: &NativeGate, request: http::Request<Incoming>) -> Response {
    let Ok(body) = request.into_body().collect().await else {
        return json(400, &serde_json::json!({ "error": "unreadable body" }));
    };
    let value = serde_json::from_slice::<serde_json::Value>(&body.to_bytes()).ok();
    let offset = value.as_ref().and_then(|v| v["offset_ms"].as_i64());
    let wall_step = value.as_ref().and_then(|v| v["wall_step_ms"].as_i64());
    match offset {
        Some(offset_ms) => {
            gate.clock().set_offset_ms(offset_ms);
            if let Some(step_ms) = wall_step {
                gate.clock().step_wall_ms(step_ms);
            }
            json(200, &serde_json::json!({ "offset_ms": offset_ms }))
        }
        None => json(
            400,
            &serde_json::json!({ "error": "want {\"offset_ms\": N}" }),
        ),
    }
}

/// How often the recorder is kept up (its histograms drained): what the
/// exporter's own HTTP listener would do, which the fixture does not use.
const METRICS_UPKEEP: std::time::Duration = std::time::Duration::from_secs(5);

/// The line the fixture writes each time its store's state gauge is raised
/// (`rate_limits_store_state{state=...}` set to 1;
/// `harness::world::native::STORE_STATE_EVENT`): the harness's report page
/// draws the cool-offs and probes of a native instance from them. The
/// fixture's own, never the production gate's: the gate sets the gauge each
/// time its store's state changes (a cool-off begins, a probe starts, the
/// probe answers or fails and a new cool-off begins).
const STORE_STATE_EVENT: &str = "harness.store_state";

/// The Prometheus recorder, with the store's state gauges watched: each
/// time one is raised, a [`STORE_STATE_EVENT`] line on stderr (the store's
/// name and the state, no key).
struct WatchedRecorder(metrics_exporter_prometheus::PrometheusRecorder);

/// One store state gauge of [`WatchedRecorder`].
struct WatchedGauge {
    inner: metrics::Gauge,
    line: String,
}

impl metrics::GaugeFn for WatchedGauge {
    fn increment(&self, value: f64) {
        self.inner.increment(value);
    }
    fn decrement(&self, value: f64) {
        self.inner.decrement(value);
    }
    fn set(&self, value: f64) {
        self.inner.set(value);
        if value == 1.0 {
            eprintln!("{}", self.line);
        }
    }
}

impl metrics::Recorder for WatchedRecorder {
    fn describe_counter(
        &self,
        key: metrics::KeyName,
        unit: Option<metrics::Unit>,
        text: metrics::SharedString,
    ) {
        self.0.describe_counter(key, unit, text);
    }
    fn describe_gauge(
        &self,
        key: metrics::KeyName,
        unit: Option<metrics::Unit>,
        text: metrics::SharedString,
    ) {
        self.0.describe_gauge(key, unit, text);
    }
    fn describe_histogram(
        &self,
        key: metrics::KeyName,
        unit: Option<metrics::Unit>,
        text: metrics::SharedString,
    ) {
        self.0.describe_histogram(key, unit, text);
    }
    fn register_counter(
        &self,
        key: &metrics::Key,
        metadata: &metrics::Metadata<'_>,
    ) -> metrics::Counter {
        self.0.register_counter(key, metadata)
    }
    fn register_gauge(
        &self,
        key: &metrics::Key,
        metadata: &metrics::Metadata<'_>,
    ) -> metrics::Gauge {
        let inner = self.0.register_gauge(key, metadata);
        if key.name() != runtime::native::metrics::STORE_STATE {
            return inner;
        }
        let label = |name: &str| {
            key.labels()
                .find(|l| l.key() == name)
                .map(|l| l.value().to_owned())
        };
        let line = serde_json::json!({
            "event": STORE_STATE_EVENT,
            "store": label("store"),
            "state": label("state"),
        })
        .to_string();
        metrics::Gauge::from_arc(Arc::new(WatchedGauge { inner, line }))
    }
    fn register_histogram(
        &self,
        key: &metrics::Key,
        metadata: &metrics::Metadata<'_>,
    ) -> metrics::Histogram {
        self.0.register_histogram(key, metadata)
    }
}

/// Why the metrics recorder could not be installed.
#[derive(Debug, thiserror::Error)]
enum MetricsError {
    #[error(transparent)]
    Build(#[from] metrics_exporter_prometheus::BuildError),
    #[error(transparent)]
    Install(#[from] metrics::SetRecorderError<WatchedRecorder>),
}

/// Installs the Prometheus recorder (its store state gauges watched) as the
/// global recorder, before the gate is built (a recorder installed later
/// would miss the gate's first series), and keeps it up; its handle renders
/// `GET /metrics`.
fn install_metrics() -> Result<PrometheusHandle, MetricsError> {
    let recorder = PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Full(runtime::native::metrics::STORE_ROUND_TRIP.to_owned()),
            &runtime::native::metrics::STORE_ROUND_TRIP_BUCKETS,
        )?
        .build_recorder();
    let handle = recorder.handle();
    metrics::set_global_recorder(WatchedRecorder(recorder))?;
    let upkeep = handle.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(METRICS_UPKEEP).await;
            upkeep.run_upkeep();
        }
    });
    Ok(handle)
}

/// `GET /metrics`: the recorder's series, as Prometheus text.
fn metrics_text(metrics: &PrometheusHandle) -> Response {
    let mut response = http::Response::new(Full::from(metrics.render()));
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; version=0.0.4"),
    );
    response
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

/// What every connection's requests share.
struct Fixture {
    /// Benchmarks only: `/api/...` answered without the gate.
    limiting_off: bool,
    /// The harness's control token, if it gave one.
    control_token: Option<Arc<str>>,
    gate: Arc<NativeGate>,
    tally: Tally,
    deployable: Arc<str>,
    /// The recorder's handle, rendering `GET /metrics`.
    metrics: PrometheusHandle,
}

impl Fixture {
    /// Whether a request carries the harness's control token (never, without one).
    fn is_control(&self, request: &http::Request<Incoming>) -> bool {
        let token = request
            .headers()
            .get(CONTROL_HEADER)
            .and_then(|v| v.to_str().ok());
        self.control_token.is_some() && token == self.control_token.as_deref()
    }
}

async fn route(
    fixture: Arc<Fixture>,
    peer: SocketAddr,
    mut request: http::Request<Incoming>,
) -> Result<Response, Infallible> {
    let Fixture {
        limiting_off,
        gate,
        tally,
        deployable,
        ..
    } = &*fixture;
    let path = request.uri().path().to_owned();
    if path == "/health" {
        let (health_checks, refused) = tally.health_check();
        return Ok(json(
            200,
            &serde_json::json!({
                "status": "ok",
                "deployable": &**deployable,
                "counting": gate.counting().name(),
                "health_checks": health_checks,
                "refused": refused,
            }),
        ));
    }
    if path == "/clock" && request.method() == http::Method::POST {
        if fixture.is_control(&request) {
            return Ok(set_clock(gate, request).await);
        }
        return Ok(json(404, &serde_json::json!({ "error": "not_found" })));
    }
    if path == "/metrics" && request.method() == http::Method::GET {
        if fixture.is_control(&request) {
            return Ok(metrics_text(&fixture.metrics));
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
    if *limiting_off {
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
    let response = RateLimitLayer::new(gate.clone())
        .layer(Api)
        .call(request)
        .await;
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
    let metrics = match install_metrics() {
        Ok(metrics) => metrics,
        Err(error) => {
            eprintln!("could not install the metrics recorder: {error}");
            return ExitCode::FAILURE;
        }
    };
    let source = match std::fs::read_to_string(application) {
        Ok(source) => source,
        Err(error) => {
            eprintln!("could not read {application}: {error}");
            return ExitCode::from(2);
        }
    };
    let gate = match NativeGate::from_toml(&source, deployable) {
        Ok(gate) => Arc::new(gate),
        Err(runtime::native::NativeGateError::Invalid(diagnostics)) => {
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
    let fixture = Arc::new(Fixture {
        limiting_off,
        control_token,
        gate,
        tally: Tally::default(),
        deployable: Arc::from(deployable.as_str()),
        metrics,
    });
    loop {
        let Ok((stream, peer)) = listener.accept().await else {
            continue;
        };
        let fixture = fixture.clone();
        tokio::spawn(async move {
            let service =
                hyper::service::service_fn(move |request| route(fixture.clone(), peer, request));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}
