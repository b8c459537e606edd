//! An axum service whose API is limited by the application description in
//! `app.toml`, each client counted by its address, the gate's log lines on
//! stderr. Run it from the folder holding `app.toml` (`cargo run`, then
//! `curl -i localhost:3000/api/search` three times: 200, 200, 429).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::routing::get;
use runtime::native::{NativeGate, RateLimitLayer};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The gate's log lines (Redis in trouble, an address it cannot know)
    // go through `tracing`: without a subscriber nothing prints them.
    tracing_subscriber::fmt::init();
    // Every problem of the description at once, each a line
    // `CODE: app.toml:line:col: message`.
    let gate = Arc::new(NativeGate::from_file("app.toml", "server")?);
    let app = Router::new()
        .route("/api/search", get(|| async { "results" }))
        .layer(RateLimitLayer::new(gate))
        .route("/health", get(|| async { "ok" }));
    // `cargo run -- 0.0.0.0:8080` listens elsewhere.
    let address = std::env::args().nth(1).unwrap_or("127.0.0.1:3000".into());
    let listener = tokio::net::TcpListener::bind(address).await?;
    println!("listening on http://{}", listener.local_addr()?);
    // Each connection's peer address, which the layer counts a client by:
    // served without it, every request is answered 500.
    let service = app.into_make_service_with_connect_info::<SocketAddr>();
    axum::serve(listener, service).await?;
    Ok(())
}
