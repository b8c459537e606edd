//! The tower layer under a real axum server (runtime's `axum` feature):
//! axum's `ConnectInfo` is the socket peer, and a route limit matches on the
//! path the client sent (`OriginalUri`) inside a router nested with
//! `Router::nest`, which strips the prefix from the URI the layer sees.

use std::net::SocketAddr;
use std::sync::Arc;

use crate::common::Lines;
use axum::Router;
use axum::routing::get;
use runtime::native::{NativeGate, RateLimitLayer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A native API with a route's own 3 per 60 s on `/api/search`.
const APP: &str = r#"
[[deployables]]
name = "api"
target = "native"
serves_api = true

[[routes]]
path = "/api/search"
rate_limit = { requests = 3, window = 60 }
"#;

/// The API nested at `/api`, its routes limited by the layer.
fn router() -> Router {
    let gate = Arc::new(NativeGate::from_toml(APP, "api").expect("valid"));
    let api = Router::new()
        .route("/search", get(|| async { "found" }))
        .route("/items", get(|| async { "items" }))
        .layer(RateLimitLayer::new(gate));
    Router::new().nest("/api", api)
}

/// One real HTTP/1.1 request to `addr`: the response's status line and head.
async fn get_head(addr: SocketAddr, path: &str) -> String {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let request = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut response = String::new();
    stream.read_to_string(&mut response).await.expect("read");
    response
}

#[tokio::test]
async fn a_route_limit_matches_inside_a_nested_router_with_the_peer_from_connect_info() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("listen");
    let addr = listener.local_addr().expect("addr");
    let app = router().into_make_service_with_connect_info::<SocketAddr>();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let mut heads = Vec::new();
    for _ in 0..4 {
        heads.push(get_head(addr, "/api/search").await);
    }
    for head in &heads[..3] {
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    }
    // The route's own limit refused the 4th: without OriginalUri the layer
    // would see `/search`, which no route names, and let 120 through.
    assert!(heads[3].starts_with("HTTP/1.1 429"), "{}", heads[3]);
    assert!(
        heads[3]
            .to_ascii_lowercase()
            .contains("ratelimit-policy: \"/api/search\";q=3;w=60"),
        "{}",
        heads[3]
    );
    // Another path of the nested router has no route limit of its own.
    assert!(
        get_head(addr, "/api/items")
            .await
            .starts_with("HTTP/1.1 200")
    );
}

/// What the 500 of a server wired without its peer address tells whoever
/// tried it, and its one log line, tell the operator to change.
const FIX: &str = "serve the router with into_make_service_with_connect_info::<SocketAddr>()";

#[tokio::test]
async fn served_without_connect_info_every_anonymous_request_is_a_500_saying_what_to_change() {
    let (lines, _guard) = Lines::capture();
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("listen");
    let addr = listener.local_addr().expect("addr");
    // The mistake: `axum::serve(listener, router)`, so no request carries its peer.
    let app = router();
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    for _ in 0..3 {
        let response = get_head(addr, "/api/items").await;
        assert!(response.starts_with("HTTP/1.1 500"), "{response}");
        let (_, body) = response.split_once("\r\n\r\n").expect("a body");
        let body: serde_json::Value = serde_json::from_str(body).expect("JSON");
        assert_eq!(body["error"], "rate_limits.address_unknown", "{body}");
        assert_eq!(body["reason"], "no_peer_address", "{body}");
        let fix = body["fix"].as_str().expect("what to change");
        assert!(fix.contains(FIX), "{fix}");
    }
    server.abort();
    let logged = lines.events("rate_limits.address_unknown");
    assert_eq!(logged.len(), 1, "once per process: {}", lines.text());
    assert_eq!(logged[0]["reason"], "no_peer_address");
    assert_eq!(logged[0]["level"], "ERROR", "a wiring mistake");
    let fix = logged[0]["fix"].as_str().expect("what to change");
    assert!(fix.contains(FIX), "{fix}");
    assert!(
        logged[0]["layer"]
            .as_str()
            .is_some_and(|at| at.starts_with("runtime/tests/all/axum.rs:")),
        "{}",
        lines.text()
    );
}
