//! An axum service limited by runtime's tower layer: its API nested under
//! `/api` (`Router::nest`), the client's address from axum's `ConnectInfo`
//! (or `CF-Connecting-IP` behind Cloudflare), `/health` left unlimited.
//! `runtime/tests/axum_example.rs` runs it over real HTTP with each address
//! source.
//!
//! ```sh
//! cargo run -p runtime --example axum_service -- APP.toml DEPLOYABLE [peer|cloudflare-header]
//! ```

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{ConnectInfo, Request};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::get;
use runtime::native::{AddressSource, NativeGate, PeerAddr, RateLimitLayer};

/// The service: the API nested under `/api` and limited, `/health` not.
pub fn app(gate: Arc<NativeGate>) -> Router {
    let api = Router::new()
        .route("/search", get(|| async { "results" }))
        .route("/items", get(|| async { "items" }));
    Router::new()
        .nest("/api", api)
        // Outside the nest, the layer sees the whole path (`/api/search`),
        // which the application's routes name; `peer` runs first.
        .layer(RateLimitLayer::new(gate))
        .layer(middleware::from_fn(peer))
        // Added after the layers, so not limited.
        .route("/health", get(|| async { "ok" }))
}

/// Hands the socket's peer (axum's `ConnectInfo`) to the layer.
async fn peer(
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    mut request: Request,
    next: Next,
) -> Response {
    request.extensions_mut().insert(PeerAddr(peer));
    next.run(request).await
}

/// Serves `app` on `listener` until the task is dropped, with each
/// connection's peer as `ConnectInfo`.
pub async fn serve(
    listener: tokio::net::TcpListener,
    gate: Arc<NativeGate>,
) -> std::io::Result<()> {
    let service = app(gate).into_make_service_with_connect_info::<SocketAddr>();
    axum::serve(listener, service).await
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(file), Some(deployable)) = (args.next(), args.next()) else {
        return Err("usage: axum_service APP.toml DEPLOYABLE [peer|cloudflare-header]".into());
    };
    let addresses = match args.next().as_deref() {
        None | Some("peer") => AddressSource::Peer,
        Some("cloudflare-header") => AddressSource::CloudflareHeader,
        Some(other) => return Err(format!("no address source `{other}`").into()),
    };
    let gate = NativeGate::from_toml(&std::fs::read_to_string(file)?, &deployable, addresses)?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
    println!("listening on {}", listener.local_addr()?);
    serve(listener, Arc::new(gate)).await?;
    Ok(())
}
