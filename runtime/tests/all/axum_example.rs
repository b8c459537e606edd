//! The axum example (`examples/axum_service.rs`) over real HTTP on
//! loopback, with each address source a deployable's `client_address` can
//! name (`runtime::unstable_for_tools::address::AddressSource`): its nested API is limited under
//! the whole path, by the address that source gives, and `/health` is not
//! limited.

#[allow(dead_code)] // Its `main` is the example's, not this test's.
#[path = "../../examples/axum_service.rs"]
mod example;

use std::sync::Arc;

use runtime::config::Application;
use runtime::native::NativeGate;
use runtime::unstable_for_tools::address::AddressSource;

/// A native deployable counting in memory, with a route of its own under
/// the nest, its address from `client_address` (a TOML value).
fn app(client_address: &str) -> String {
    format!(
        r#"
[[deployables]]
name = "server"
target = "native"
serves_api = true
client_address = {client_address}

[[routes]]
path = "/api/search"
rate_limit = {{ requests = 3, window = 60 }}
"#
    )
}

/// Every address source there is, as a description names it: a source
/// added to `AddressSource` stops this from compiling until the example and
/// these tests show it. The trusted proxies and Cloudflare's relay are the
/// loopback client itself.
fn every_source() -> [&'static str; 4] {
    let sources = [
        r#""peer""#,
        r#""cloudflare""#,
        r#"{ cloudflare_via = ["127.0.0.1/32", "::1"] }"#,
        r#"{ trusted_proxies = ["127.0.0.1/32", "::1"] }"#,
    ];
    for source in sources {
        let app = Application::from_toml(&app(source)).expect("valid");
        match app.deployable("server").expect("server").client_address {
            AddressSource::Peer
            | AddressSource::CloudflareHeader(_)
            | AddressSource::TrustedProxies(_) => {}
        }
    }
    sources
}

/// The example served on a free loopback port with `client_address`; its base URL.
async fn serve(client_address: &str) -> String {
    let gate = NativeGate::from_toml(&app(client_address), "server").expect("gate");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a free port");
    let url = format!("http://{}", listener.local_addr().expect("bound"));
    tokio::spawn(example::serve(listener, Arc::new(gate)));
    url
}

/// `GET url` with each of `headers`: its status and `RateLimit-Policy`.
async fn get(client: &reqwest::Client, url: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let mut request = client.get(url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.expect("an answer");
    let policy = response
        .headers()
        .get("RateLimit-Policy")
        .map(|v| v.to_str().expect("ascii").to_owned())
        .unwrap_or_default();
    (response.status().as_u16(), policy)
}

/// By the peer, and behind Cloudflare from a peer that is not Cloudflare
/// (loopback is in none of its ranges): a forged `CF-Connecting-IP` is
/// ignored.
#[tokio::test]
async fn by_the_peer_every_header_is_ignored_and_the_loopback_client_is_one_caller() {
    for source in [r#""peer""#, r#""cloudflare""#] {
        let url = serve(source).await;
        let client = reqwest::Client::new();
        let mut statuses = Vec::new();
        for n in 0..121 {
            // A client on a native server can write any header: each a new "address".
            let forged = format!("203.0.113.{}", n % 250);
            let headers = [
                ("CF-Connecting-IP", forged.as_str()),
                ("X-Forwarded-For", forged.as_str()),
            ];
            statuses.push(get(&client, &format!("{url}/api/items"), &headers).await);
        }
        assert!(
            statuses[..120].iter().all(|(s, _)| *s == 200),
            "{source}: {statuses:?}"
        );
        assert_eq!(
            statuses[120],
            (429, "\"address\";q=120;w=60".to_owned()),
            "{source}"
        );
        assert_eq!(get(&client, &format!("{url}/health"), &[]).await.0, 200);
    }
}

/// Behind Cloudflare (`CF-Connecting-IP` from its relay) and behind a trusted proxy
/// (`X-Forwarded-For` from a peer in `trusted_proxies`), each client the
/// header names counts apart, and one client is refused after 120.
#[tokio::test]
async fn behind_cloudflare_or_a_trusted_proxy_each_named_client_counts_apart() {
    for (source, header) in [
        (
            r#"{ cloudflare_via = ["127.0.0.1/32", "::1"] }"#,
            "CF-Connecting-IP",
        ),
        (
            r#"{ trusted_proxies = ["127.0.0.1/32", "::1"] }"#,
            "X-Forwarded-For",
        ),
    ] {
        let url = serve(source).await;
        let client = reqwest::Client::new();
        let items = format!("{url}/api/items");
        for n in 0..130 {
            let address = format!("198.51.100.{n}");
            assert_eq!(
                get(&client, &items, &[(header, &address)]).await.0,
                200,
                "{source}: {address}"
            );
        }
        let one = [(header, "192.0.2.7")];
        for _ in 0..120 {
            assert_eq!(get(&client, &items, &one).await.0, 200, "{source}");
        }
        assert_eq!(get(&client, &items, &one).await.0, 429, "{source}");
        assert_eq!(
            get(&client, &items, &[(header, "192.0.2.8")]).await.0,
            200,
            "{source}"
        );
        assert_eq!(get(&client, &format!("{url}/health"), &one).await.0, 200);
    }
}

/// Trusted proxies that do not include the peer: the header is the client's
/// own writing, ignored, and the peer is the address.
#[tokio::test]
async fn a_peer_that_is_no_trusted_proxy_is_the_client_whatever_it_forwards() {
    let url = serve(r#"{ trusted_proxies = ["10.0.0.0/8"] }"#).await;
    let client = reqwest::Client::new();
    let items = format!("{url}/api/items");
    let mut statuses = Vec::new();
    for n in 0..121 {
        let forged = format!("203.0.113.{}", n % 250);
        statuses.push(
            get(&client, &items, &[("X-Forwarded-For", &forged)])
                .await
                .0,
        );
    }
    assert!(statuses[..120].iter().all(|s| *s == 200), "{statuses:?}");
    assert_eq!(statuses[120], 429);
}

#[tokio::test]
async fn a_route_under_the_nest_is_limited_by_its_whole_path() {
    for source in every_source() {
        let url = serve(source).await;
        let client = reqwest::Client::new();
        let search = format!("{url}/api/search");
        let headers = [
            ("CF-Connecting-IP", "192.0.2.1"),
            ("X-Forwarded-For", "192.0.2.1"),
        ];
        let mut got = Vec::new();
        for _ in 0..4 {
            got.push(get(&client, &search, &headers).await);
        }
        assert_eq!(
            got,
            [
                (200, String::new()),
                (200, String::new()),
                (200, String::new()),
                (429, "\"/api/search\";q=3;w=60".to_owned()),
            ],
            "{source}"
        );
        // The nest's other route has no limit of its own.
        assert_eq!(
            get(&client, &format!("{url}/api/items"), &headers).await.0,
            200
        );
    }
}

/// Known traffic through the example behind a trusted proxy, then its
/// `/metrics` scraped over HTTP: every decision by limit and outcome, the
/// requests whose address could not be known, the counter's bytes within
/// its bound, and no address anywhere in the text.
#[tokio::test]
async fn its_metrics_count_every_decision_by_limit_and_outcome_and_name_no_address() {
    use crate::common::metrics::{recorder, samples, total};
    use runtime::native::metrics::{ADDRESS_UNKNOWN, DECISIONS, MEMORY_BOUND_BYTES, MEMORY_BYTES};
    let recorder = recorder();
    let description = r#"
[[deployables]]
name = "scraped"
target = "native"
serves_api = true
client_address = { trusted_proxies = ["127.0.0.1/32", "::1"] }

[[routes]]
path = "/api/search"
rate_limit = { requests = 3, window = 60 }
"#;
    let gate = NativeGate::from_toml(description, "scraped").expect("gate");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let url = format!("http://{}", listener.local_addr().expect("bound"));
    tokio::spawn(example::serve(listener, Arc::new(gate)));
    let metrics = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let metrics_url = format!("http://{}/metrics", metrics.local_addr().expect("bound"));
    tokio::spawn(example::serve_metrics(metrics, recorder));

    let client = reqwest::Client::new();
    let items = format!("{url}/api/items");
    let search = format!("{url}/api/search");
    let mut sent = Vec::new();
    // 40 clients once each, and one client 125 times: 120 pass, 5 refused.
    for n in 0..40 {
        let address = format!("198.51.100.{n}");
        assert_eq!(
            get(&client, &items, &[("X-Forwarded-For", &address)])
                .await
                .0,
            200
        );
        sent.push(address);
    }
    let one = "192.0.2.77";
    sent.push(one.to_owned());
    for n in 0..125 {
        let status = get(&client, &items, &[("X-Forwarded-For", one)]).await.0;
        assert_eq!(status, if n < 120 { 200 } else { 429 });
    }
    // A route's own limit: 3 pass and 2 are refused by it (the address's
    // limit passes the first of them, then refuses too: the client is over).
    let other = "192.0.2.78";
    sent.push(other.to_owned());
    for _ in 0..5 {
        get(&client, &search, &[("X-Forwarded-For", other)]).await;
    }
    // From the trusted proxy without X-Forwarded-For: the address is unknown.
    for _ in 0..7 {
        get(&client, &items, &[]).await;
    }

    let text = client
        .get(&metrics_url)
        .send()
        .await
        .expect("a scrape")
        .text()
        .await
        .expect("text");
    let samples = samples(&text);
    let ours = ("deployable", "scraped");
    let decisions = |limit, outcome| {
        total(
            &samples,
            DECISIONS,
            &[ours, ("limit", limit), ("outcome", outcome)],
        )
    };
    // 40 + 125 + 5 + 7 requests checked against the address's limit; the
    // one client's 121st to 125th refused, and nothing else.
    assert_eq!(
        decisions("address", "passed"),
        f64::from(40 + 120 + 5 + 7),
        "{text}"
    );
    assert_eq!(decisions("address", "refused"), 5.0, "{text}");
    assert_eq!(decisions("/api/search", "passed"), 3.0, "{text}");
    assert_eq!(decisions("/api/search", "refused"), 2.0, "{text}");
    assert_eq!(decisions("caller", "passed"), 0.0, "{text}");
    assert_eq!(
        total(
            &samples,
            ADDRESS_UNKNOWN,
            &[ours, ("reason", "no_forwarded_for")]
        ),
        7.0,
        "{text}"
    );
    let bytes = total(&samples, MEMORY_BYTES, &[ours]);
    let bound = total(&samples, MEMORY_BOUND_BYTES, &[ours]);
    assert!(bytes > 0.0 && bytes <= bound, "{bytes} of {bound}: {text}");
    // Counting in memory by design is no trouble: no store, no such series.
    assert!(
        !text.contains("rate_limits_counted_in_memory_total{deployable=\"scraped\""),
        "{text}"
    );
    for address in &sent {
        assert!(!text.contains(address.as_str()), "{address} in the scrape");
    }
}
