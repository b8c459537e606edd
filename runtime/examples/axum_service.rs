//! An axum service limited by runtime's tower layer (runtime's `axum`
//! feature): its API nested under `/api` (`Router::nest`), the client's
//! address from where the deployable's `client_address` says (axum's
//! `ConnectInfo` for the peer), `/health` left unlimited, and the limiter's
//! metrics (runtime's `metrics` feature) in Prometheus's text format at
//! `/metrics` on a listener of their own, which only the operator's
//! network reaches. `runtime/tests/all/axum_example.rs` runs it over real
//! HTTP with each address source (peer, cloudflare, trusted proxies) and
//! scrapes its metrics.
//!
//! ```sh
//! cargo run -p runtime --example axum_service --features axum,metrics -- APP.toml DEPLOYABLE
//! ```

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use runtime::native::{NativeGate, RateLimitLayer, metrics};

/// The service: the API nested under `/api` and limited, `/health` not.
pub fn app(gate: Arc<NativeGate>) -> Router {
    // Inside the nest the layer still matches the whole path
    // (`/api/search`, which the application's routes name): it reads
    // axum's `OriginalUri`.
    let api = Router::new()
        .route("/search", get(|| async { "results" }))
        .route("/items", get(|| async { "items" }))
        .layer(RateLimitLayer::new(gate));
    Router::new()
        .nest("/api", api)
        .route("/health", get(|| async { "ok" }))
}

/// Serves `app` on `listener` until the task is dropped, with each
/// connection's peer as `ConnectInfo` (the layer's peer address).
pub async fn serve(
    listener: tokio::net::TcpListener,
    gate: Arc<NativeGate>,
) -> std::io::Result<()> {
    let service = app(gate).into_make_service_with_connect_info::<SocketAddr>();
    axum::serve(listener, service).await
}

/// Serves the metrics `recorder` holds at `/metrics` on `listener`, in
/// Prometheus's text format, until the task is dropped.
pub async fn serve_metrics(
    listener: tokio::net::TcpListener,
    recorder: PrometheusHandle,
) -> std::io::Result<()> {
    // The exporter's histograms are trimmed to their window by its upkeep.
    let upkeep = recorder.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(5)).await;
            upkeep.run_upkeep();
        }
    });
    let metrics = Router::new().route("/metrics", get(move || async move { recorder.render() }));
    axum::serve(listener, metrics).await
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(file), Some(deployable)) = (args.next(), args.next()) else {
        return Err("usage: axum_service APP.toml DEPLOYABLE".into());
    };
    // The recorder first: the gate registers its series with it. The round
    // trip to Redis as a histogram, whose buckets add up over instances.
    let recorder = PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Full(metrics::STORE_ROUND_TRIP.to_owned()),
            &metrics::STORE_ROUND_TRIP_BUCKETS,
        )?
        .install_recorder()?;
    // Every diagnostic of the description, at startup.
    let gate = NativeGate::from_toml(&std::fs::read_to_string(file)?, &deployable)?;
    if let Err(unreachable) = gate.connect().await {
        eprintln!("{unreachable}");
    }
    let metrics = tokio::net::TcpListener::bind("127.0.0.1:9000").await?;
    println!("metrics on http://{}/metrics", metrics.local_addr()?);
    tokio::spawn(serve_metrics(metrics, recorder));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
    println!("listening on {}", listener.local_addr()?);
    serve(listener, Arc::new(gate)).await?;
    Ok(())
}
