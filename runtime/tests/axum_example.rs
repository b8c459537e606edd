//! The axum example (`examples/axum_service.rs`) over real HTTP on
//! loopback, with each address source of `runtime::native::AddressSource`:
//! its nested API is limited under the whole path, by the address that
//! source gives, and `/health` is not limited.

#[allow(dead_code)] // Its `main` is the example's, not this test's.
#[path = "../examples/axum_service.rs"]
mod example;

use std::sync::Arc;

use runtime::native::{AddressSource, NativeGate};

/// A native deployable counting in memory, with a route of its own under the nest.
const APP: &str = r#"
[[deployables]]
name = "server"
target = "native"
serves_api = true

[[routes]]
path = "/api/search"
rate_limit = { requests = 3, window = 60 }
"#;

/// The example served on a free loopback port with `addresses`; its base URL.
async fn serve(addresses: AddressSource) -> String {
    let gate = Arc::new(NativeGate::from_toml(APP, "server", addresses).expect("gate"));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a free port");
    let url = format!("http://{}", listener.local_addr().expect("bound"));
    tokio::spawn(example::serve(listener, gate));
    url
}

/// `GET url` with `CF-Connecting-IP: address`, when given: its status and
/// `RateLimit-Policy`.
async fn get(client: &reqwest::Client, url: &str, address: Option<&str>) -> (u16, String) {
    let mut request = client.get(url);
    if let Some(address) = address {
        request = request.header("CF-Connecting-IP", address);
    }
    let response = request.send().await.expect("an answer");
    let policy = response
        .headers()
        .get("RateLimit-Policy")
        .map(|v| v.to_str().expect("ascii").to_owned())
        .unwrap_or_default();
    (response.status().as_u16(), policy)
}

#[tokio::test]
async fn by_the_peer_every_header_is_ignored_and_the_loopback_client_is_one_caller() {
    let url = serve(AddressSource::Peer).await;
    let client = reqwest::Client::new();
    let mut statuses = Vec::new();
    for n in 0..121 {
        // A client on a native server can write any header: each a new "address".
        let forged = format!("203.0.113.{}", n % 250);
        statuses.push(get(&client, &format!("{url}/api/items"), Some(&forged)).await);
    }
    assert!(
        statuses[..120].iter().all(|(s, _)| *s == 200),
        "{statuses:?}"
    );
    assert_eq!(statuses[120], (429, "\"address\";q=120;w=60".to_owned()));
    assert_eq!(get(&client, &format!("{url}/health"), None).await.0, 200);
}

#[tokio::test]
async fn behind_cloudflare_each_connecting_ip_counts_apart() {
    let url = serve(AddressSource::CloudflareHeader).await;
    let client = reqwest::Client::new();
    let items = format!("{url}/api/items");
    for n in 0..130 {
        let address = format!("198.51.100.{n}");
        assert_eq!(
            get(&client, &items, Some(&address)).await.0,
            200,
            "{address}"
        );
    }
    let one = Some("192.0.2.7");
    for _ in 0..120 {
        assert_eq!(get(&client, &items, one).await.0, 200);
    }
    assert_eq!(get(&client, &items, one).await.0, 429);
    assert_eq!(get(&client, &items, Some("192.0.2.8")).await.0, 200);
    assert_eq!(get(&client, &format!("{url}/health"), one).await.0, 200);
}

/// Every address source there is: a source added to `AddressSource` stops
/// this from compiling until the example and these tests show it.
fn every_source() -> [AddressSource; 2] {
    let sources = [AddressSource::Peer, AddressSource::CloudflareHeader];
    for source in sources {
        match source {
            AddressSource::Peer | AddressSource::CloudflareHeader => {}
        }
    }
    sources
}

#[tokio::test]
async fn a_route_under_the_nest_is_limited_by_its_whole_path() {
    for addresses in every_source() {
        let url = serve(addresses).await;
        let client = reqwest::Client::new();
        let search = format!("{url}/api/search");
        let mut got = Vec::new();
        for _ in 0..4 {
            got.push(get(&client, &search, Some("192.0.2.1")).await);
        }
        assert_eq!(
            got,
            [
                (200, String::new()),
                (200, String::new()),
                (200, String::new()),
                (429, "\"/api/search\";q=3;w=60".to_owned()),
            ],
            "{addresses:?}"
        );
        // The nest's other route has no limit of its own.
        assert_eq!(
            get(&client, &format!("{url}/api/items"), Some("192.0.2.1"))
                .await
                .0,
            200
        );
    }
}
