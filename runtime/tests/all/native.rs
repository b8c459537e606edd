//! The native gate without Redis: which deployables count in Redis, the
//! tower layer's 429, and the two clocks of its cool-off. (Where a native
//! request's address comes from: `client_address.rs`; counting in a real
//! Redis: `harness/tests/all/redis_store.rs`.)

use std::sync::Arc;

use crate::common::{self, Handler};
use runtime::config::{Application, Code, Counting, RedisEndpoint};
use runtime::native::{NativeGate, PeerAddr, RateLimitLayer};
use runtime::unstable_for_tools::breaker::COOL_OFF_MS;
use runtime::unstable_for_tools::native::redis_dials;
use tower_layer::Layer;
use tower_service::Service;

const REDIS_APP: &str = r#"name = "shop"
[connections.cache]
driver = "redis"
url = "redis://127.0.0.1:6379"

[rate_limits]
store = "cache"

[[deployables]]
name = "edge"
target = "workers"
serves_api = true
declines = ["rate_limits.counted_in_memory"]

[[deployables]]
name = "server"
target = "native"
serves_api = true
"#;

#[test]
fn a_native_deployable_counts_in_its_redis_store_and_a_worker_does_not() {
    let app = Application::from_toml(REDIS_APP).expect("valid");
    let server = app.deployable("server").expect("server");
    assert_eq!(
        app.counting(server),
        Counting::Redis {
            connection: "cache".into(),
            endpoint: RedisEndpoint::Single {
                url: Some("redis://127.0.0.1:6379".into())
            },
        }
    );
    let edge = app.deployable("edge").expect("edge");
    assert_eq!(app.counting(edge), Counting::InMemory);
}

#[test]
fn a_cluster_is_named_by_its_nodes() {
    let source = REDIS_APP.replace(
        "url = \"redis://127.0.0.1:6379\"",
        "nodes = [\"redis://10.0.0.1:7000\", \"redis://10.0.0.2:7000\"]",
    );
    let app = Application::from_toml(&source).expect("valid");
    let server = app.deployable("server").expect("server");
    let Counting::Redis { endpoint, .. } = app.counting(server) else {
        panic!("counts in Redis");
    };
    assert_eq!(
        endpoint,
        RedisEndpoint::Cluster {
            nodes: vec![
                "redis://10.0.0.1:7000".into(),
                "redis://10.0.0.2:7000".into()
            ]
        }
    );
}

#[test]
fn url_and_nodes_together_or_no_nodes_are_invalid_with_a_place() {
    for nodes in ["nodes = [\"redis://10.0.0.1:7000\"]", "nodes = []"] {
        let source = REDIS_APP.replace(
            "url = \"redis://127.0.0.1:6379\"",
            &format!("url = \"redis://127.0.0.1:6379\"\n{nodes}"),
        );
        let diagnostics = Application::from_toml(&source).expect_err("invalid");
        assert_eq!(diagnostics.codes(), vec![Code::StoreInvalid], "{nodes}");
        let location = diagnostics.0[0].location.expect("a place");
        assert_eq!((location.line, location.column), (5, 9), "{nodes}");
    }
}

/// A Redis URL the runtime cannot dial is a diagnostic before the first
/// request, not a process counting in its own memory after it: another
/// scheme, no scheme, no host.
#[test]
fn a_redis_url_the_runtime_cannot_dial_is_invalid_at_its_place() {
    for (setting, says) in [
        (
            "url = \"http://cache.example:6379\"",
            "`http://`, which is no Redis scheme",
        ),
        (
            "url = \"redis-tls://cache.example:6380\"",
            "`redis-tls://`, which is no Redis scheme",
        ),
        (
            "url = \"cache.example:6379\"",
            "no URL (it has no `scheme://`)",
        ),
        ("url = \"redis://\"", "names no host"),
        ("url = \"rediss://:secret@/0\"", "names no host"),
        ("url = \"redis+unix://\"", "names no socket path"),
        (
            "nodes = [\"redis://10.0.0.1:7000\", \"tcp://10.0.0.2:7000\"]",
            "`tcp://`, which is no Redis scheme",
        ),
    ] {
        let source = REDIS_APP.replace("url = \"redis://127.0.0.1:6379\"", setting);
        let diagnostics = Application::from_toml(&source).expect_err(setting);
        assert_eq!(diagnostics.codes(), vec![Code::StoreInvalid], "{setting}");
        let d = &diagnostics.0[0];
        assert!(d.message.contains(says), "{setting}: {}", d.message);
        assert!(!d.message.contains("secret"), "{}", d.message);
        assert!(
            !d.message.contains("  "),
            "one line, one space: {}",
            d.message
        );
        let location = d.location.expect("a place");
        assert_eq!(location.line, 4, "{setting}");
    }
    for spoken in [
        "url = \"redis://:secret@10.0.0.1:6379/2\"",
        "url = \"rediss://:secret@cache.example:6380\"",
        "url = \"valkeys://cache.example\"",
        "nodes = [\"rediss://10.0.0.1:7000\", \"rediss://10.0.0.2:7000\"]",
        "url = \"REDIS://[::1]:6379\"",
        "url = \"valkey://10.0.0.1\"",
        "url = \"redis+unix:///run/redis.sock\"",
        "url = \"unix:///run/redis.sock\"",
    ] {
        let source = REDIS_APP.replace("url = \"redis://127.0.0.1:6379\"", spoken);
        assert!(Application::from_toml(&source).is_ok(), "{spoken}");
    }
}

#[tokio::test]
async fn the_tower_layer_limits_in_one_line_and_refused_requests_never_reach_the_service() {
    // A native deployable with no store counts in the process's memory.
    let source = r#"
[[deployables]]
name = "server"
target = "native"
serves_api = true
"#;
    let gate = Arc::new(NativeGate::from_toml(source, "server").expect("gate"));
    let handler = Handler::default();
    let mut service = RateLimitLayer::new(gate).layer(handler.clone());
    let mut statuses = Vec::new();
    let mut last = None;
    for _ in 0..121 {
        let mut request = http::Request::new(String::new());
        *request.uri_mut() = "/api/items".parse().expect("uri");
        request
            .extensions_mut()
            .insert(PeerAddr("198.51.100.1:5000".parse().expect("addr")));
        let response = service.call(request).await.expect("infallible");
        statuses.push(response.status().as_u16());
        last = Some(response);
    }
    assert!(statuses[..120].iter().all(|s| *s == 200));
    assert_eq!(statuses[120], 429);
    assert_eq!(handler.reached(), 120);
    let refused = last.expect("a response");
    assert_eq!(refused.headers()["Retry-After"], "60");
    assert_eq!(
        refused.headers()["RateLimit-Policy"],
        "\"address\";q=120;w=60"
    );
    assert!(refused.body().contains("rate_limited"));
}

/// A native API on a Redis at `127.0.0.1:port`, which nothing listens on.
fn missing_redis_gate() -> NativeGate {
    // Bound, then closed: nothing listens on the port any more.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let source = format!(
        "name = \"shop\"\n[connections.cache]\ndriver = \"redis\"\nurl = \"redis://127.0.0.1:{port}\"\n\
         [rate_limits]\nstore = \"cache\"\n\
         [[deployables]]\nname = \"server\"\ntarget = \"native\"\nserves_api = true\n"
    );
    NativeGate::from_toml(&source, "server").expect("gate")
}

#[tokio::test]
async fn a_redis_missing_from_the_start_is_dialled_once_per_cool_off_and_logged_once() {
    let (lines, _guard) = common::Lines::capture();
    let gate = missing_redis_gate();
    let subject = runtime::Subject::of_request(None, Some("192.0.2.1"));
    for _ in 0..100 {
        assert!(gate.decide(&subject, "GET", "/api/items").await.is_ok());
    }
    assert_eq!(redis_dials(&gate), 1, "one dial, then a cool-off");
    // The cool-off ends: one request dials again, the rest do not.
    gate.clock()
        .set_offset_ms(i64::try_from(COOL_OFF_MS).expect("small") + 1);
    for _ in 0..10 {
        assert!(gate.decide(&subject, "GET", "/api/items").await.is_ok());
    }
    assert_eq!(redis_dials(&gate), 2);
    let logged = lines.events("rate_limits.fallback");
    assert_eq!(logged.len(), 1, "{logged:?}");
    assert_eq!(logged[0]["reason"], "missing");
    assert_eq!(logged[0]["connection"], "cache");
}

#[tokio::test]
async fn a_wall_clock_stepped_back_does_not_stretch_the_cool_off() {
    let gate = missing_redis_gate();
    let subject = runtime::Subject::of_request(None, Some("192.0.2.2"));
    assert!(gate.decide(&subject, "GET", "/api/items").await.is_ok());
    assert_eq!(redis_dials(&gate), 1);
    // The wall clock steps back an hour, then the cool-off's 10 s pass: the
    // cool-off ends on the monotonic clock (on the wall clock it would
    // last another hour).
    gate.clock().step_wall_ms(-3_600_000);
    assert!(gate.decide(&subject, "GET", "/api/items").await.is_ok());
    assert_eq!(redis_dials(&gate), 1, "still cooling off");
    gate.clock()
        .set_offset_ms(i64::try_from(COOL_OFF_MS).expect("small") + 1);
    assert!(gate.decide(&subject, "GET", "/api/items").await.is_ok());
    assert_eq!(redis_dials(&gate), 2, "the cool-off ended after 10 s");
}

/// A native API counting in memory whose catch-all route takes 50 an hour
/// per address: within the 120 a minute of the address limit, so the
/// route's limit alone decides how many of a key's requests pass.
const FIFTY_AN_HOUR: &str = "[[deployables]]\nname = \"server\"\ntarget = \"native\"\n\
serves_api = true\n\
[[routes]]\npath = \"/api/{*rest}\"\nrate_limit = { requests = 50, window = 3600 }\n";

/// Many threads deciding at once count every (limit, key) exactly: each
/// key's passes are its route's limit, however many threads send, and
/// whether they share their keys or each has its own.
#[test]
fn threads_deciding_at_once_count_every_key_exactly() {
    const KEYS: u32 = 16;
    const PER_KEY_AND_THREAD: u32 = 100;
    const LIMIT: u64 = 50;
    for threads in [2u32, 4, 8] {
        for shared in [true, false] {
            let gate = NativeGate::from_toml(FIFTY_AN_HOUR, "server").expect("gate");
            // Half an hour into an hour on the gate's clock: the route's
            // window cannot end while the test runs.
            let into_hour = i64::try_from(gate.clock().wall_ms() % 3_600_000).expect("small");
            gate.clock()
                .set_offset_ms((1_800_000 - into_hour).rem_euclid(3_600_000));
            let key = |thread: u32, k: u32| -> u32 { if shared { k } else { thread * KEYS + k } };
            let passes: Vec<std::sync::atomic::AtomicU64> = (0..threads * KEYS)
                .map(|_| std::sync::atomic::AtomicU64::new(0))
                .collect();
            std::thread::scope(|scope| {
                for thread in 0..threads {
                    let (gate, passes) = (&gate, &passes);
                    scope.spawn(move || {
                        let rt = tokio::runtime::Builder::new_current_thread()
                            .build()
                            .expect("a runtime");
                        rt.block_on(async {
                            for _ in 0..PER_KEY_AND_THREAD {
                                for k in 0..KEYS {
                                    let address = format!(
                                        "198.51.{}.{}",
                                        key(thread, k) / 256,
                                        key(thread, k) % 256
                                    );
                                    let subject =
                                        runtime::Subject::of_request(None, Some(&address));
                                    if gate.decide(&subject, "GET", "/api/items").await.is_ok() {
                                        passes[key(thread, k) as usize]
                                            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                                    }
                                }
                            }
                        });
                    });
                }
            });
            let keys_used = if shared { KEYS } else { threads * KEYS };
            for k in 0..keys_used {
                let passed = passes[k as usize].load(std::sync::atomic::Ordering::Relaxed);
                assert_eq!(
                    passed, LIMIT,
                    "{threads} threads, keys shared: {shared}: key {k} passed {passed} times, not its limit"
                );
            }
            let total: u64 = passes
                .iter()
                .map(|p| p.load(std::sync::atomic::Ordering::Relaxed))
                .sum();
            assert_eq!(total, u64::from(keys_used) * LIMIT);
        }
    }
}
