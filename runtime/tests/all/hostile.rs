//! What a client controls costs a decision a bounded amount, and none of it
//! is done under the native gate's lock: the path (made canonical, matched,
//! keyed outside the lock; longer than `MAX_PATH_BYTES`, refused unread),
//! the address headers (`MAX_ADDRESS_BYTES`, `MAX_FORWARDED_HOPS`) and the
//! caller id (`MAX_CALLER_ID_BYTES`). The figures are in BENCHMARKS.md,
//! "Hostile inputs"; these tests prove the structure, never a time.

use std::net::IpAddr;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::Handler;
use runtime::Subject;
use runtime::limiter::{Limiter, MAX_PATH_BYTES, PathTooLong, Refusal, Refused};
use runtime::native::{NativeGate, PeerAddr, RateLimitLayer};
use runtime::unstable_for_tools::address::{
    AddressHeaders, AddressSource, AddressUnknown, MAX_ADDRESS_BYTES, MAX_FORWARDED_HOPS, Resolved,
    TrustedProxies,
};
use runtime::unstable_for_tools::keys::{self, MAX_CALLER_ID_BYTES};
use runtime::unstable_for_tools::native::{lock_counts, on_checks_made};
use tower_layer::Layer;
use tower_service::Service;

/// A native API whose catch-all route takes 2 per minute: what a long path
/// under `/api/` would get around if it were not counted there.
const CATCH_ALL: &str = "[[deployables]]\nname = \"server\"\ntarget = \"native\"\n\
serves_api = true\n\
[[routes]]\npath = \"/api/{*rest}\"\nrate_limit = { requests = 2, window = 60 }\n";

/// Not a time limit on the code: how long a test waits for a thread that
/// would otherwise never answer (a lock held against it) before it fails.
const STUCK: Duration = Duration::from_secs(60);

/// A path of `bytes` under `/api/` made of the canonicaliser's costliest
/// shape: one-byte segments with dot segments between them, each a step of
/// its walk.
fn hostile_path(bytes: usize) -> String {
    let mut path = String::from("/api");
    while path.len() + 4 <= bytes {
        path.push_str("/a/.");
    }
    while path.len() < bytes {
        path.push('/');
    }
    path
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime")
}

#[test]
fn a_requests_checks_are_made_while_another_holds_the_counts_lock() {
    let gate = Arc::new(NativeGate::from_toml(CATCH_ALL, "server").expect("gate"));
    let path = hostile_path(MAX_PATH_BYTES);
    assert_eq!(path.len(), MAX_PATH_BYTES, "the longest path read");
    let subject = Subject::of_request(None, Some("192.0.2.1"));
    let held = lock_counts(&gate);
    let (made, checks) = mpsc::channel();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let _ = made.send(gate.checks(&subject, "GET", &path));
        });
        let checks = checks.recv_timeout(STUCK);
        drop(held);
        let checks = checks
            .expect("the checks are made with the counts locked")
            .expect("a path of MAX_PATH_BYTES is read");
        let policies: Vec<usize> = checks.iter().map(|c| c.policy().index()).collect();
        assert_eq!(policies, [1, 2], "the address's limit and the catch-all's");
        assert!(checks[1].key().starts_with("/api/{*rest}|address:"));
    });
}

#[test]
fn a_request_held_in_its_path_work_holds_no_other_request() {
    let gate = Arc::new(NativeGate::from_toml(CATCH_ALL, "server").expect("gate"));
    let (arrived, in_checks) = mpsc::channel::<()>();
    let (release, go) = mpsc::channel::<()>();
    let arrived = Mutex::new(arrived);
    let go = Mutex::new(go);
    // The long request stops where its checks are made and waits there.
    on_checks_made(&gate, move |bytes| {
        if bytes > 1_000 {
            let _ = arrived.lock().expect("one hook at a time").send(());
            let _ = go.lock().expect("one hook at a time").recv_timeout(STUCK);
        }
    });
    let long = hostile_path(MAX_PATH_BYTES);
    std::thread::scope(|scope| {
        let held = scope.spawn(|| {
            runtime().block_on(gate.decide(
                &Subject::of_request(None, Some("192.0.2.1")),
                "GET",
                &long,
            ))
        });
        in_checks
            .recv_timeout(STUCK)
            .expect("the long request reaches its hook");
        // Other requests, while it is held there: each locks the counts.
        let (done, decided) = mpsc::channel();
        let gate = &gate;
        scope.spawn(move || {
            let rt = runtime();
            let subject = Subject::of_request(None, Some("192.0.2.2"));
            let verdicts: Vec<bool> = (0..3)
                .map(|_| {
                    rt.block_on(gate.decide(&subject, "GET", "/api/items"))
                        .is_ok()
                })
                .collect();
            let _ = done.send(verdicts);
        });
        let verdicts = decided.recv_timeout(STUCK);
        let _ = release.send(());
        assert_eq!(
            verdicts.expect("the others are decided while the long one is held"),
            [true, true, false],
            "counted under the catch-all, 2 per minute"
        );
        assert_eq!(held.join().expect("no panic"), Ok(()), "then it is decided");
    });
}

#[tokio::test]
async fn a_path_longer_than_the_bound_is_refused_unread_and_no_route_limit_is_bypassed() {
    let gate = Arc::new(NativeGate::from_toml(CATCH_ALL, "server").expect("gate"));
    let handler = Handler::default();
    let mut service = RateLimitLayer::new(gate.clone()).layer(handler.clone());
    let request = |path: &str| {
        let mut request = http::Request::new(String::new());
        *request.uri_mut() = path.parse().expect("a URI hyper takes");
        request
            .extensions_mut()
            .insert(PeerAddr("198.51.100.1:5000".parse().expect("addr")));
        request
    };
    // The longest URI hyper takes (http's 65,534 bytes) and one byte past
    // the bound, each of a shape that is `/api/...` after its dot segments.
    for path in [
        hostile_path(65_534),
        hostile_path(MAX_PATH_BYTES + 1),
        format!("/api/x{}", "/..".repeat(MAX_PATH_BYTES / 3)),
    ] {
        for _ in 0..3 {
            let response = service.call(request(&path)).await.expect("infallible");
            assert_eq!(response.status().as_u16(), 414, "{} bytes", path.len());
            assert_eq!(response.status().as_u16(), Refusal::PATH_TOO_LONG_STATUS);
            assert!(response.body().contains("path_too_long"));
            assert!(response.headers().get("Retry-After").is_none());
        }
    }
    assert_eq!(handler.reached(), 0, "no long path reaches the application");
    // Refused, never counted: the catch-all's 2 are still there for a path
    // at the bound, and the third is refused by the route's limit.
    let at_bound = hostile_path(MAX_PATH_BYTES);
    let mut statuses = Vec::new();
    for _ in 0..3 {
        let response = service.call(request(&at_bound)).await.expect("infallible");
        statuses.push(response.status().as_u16());
    }
    assert_eq!(statuses, [200, 200, 429]);
    assert_eq!(handler.reached(), 2);
}

#[test]
fn the_limiter_refuses_a_long_path_from_its_length_on_every_gate() {
    let app = runtime::config::Application::from_toml(CATCH_ALL).expect("valid");
    let limiter = Limiter::new(&app, "server", 7).expect("limiter");
    let subject = Subject::of_request(None, Some("192.0.2.1"));
    for bytes in [MAX_PATH_BYTES + 1, 2 * MAX_PATH_BYTES, 65_534, 1 << 20] {
        assert_eq!(
            limiter.checks(&subject, "GET", &hostile_path(bytes)),
            Err(PathTooLong { bytes }),
        );
    }
    assert_eq!(
        limiter
            .checks(&subject, "GET", &hostile_path(MAX_PATH_BYTES))
            .map(|c| c.len()),
        Ok(2)
    );
    let refusal = Refusal::path_too_long();
    assert_eq!(
        (refusal.status(), refusal.reason),
        (414, Refused::PathTooLong)
    );
    let names: Vec<&str> = refusal.headers().iter().map(|(n, _)| *n).collect();
    assert_eq!(
        names,
        ["Content-Type"],
        "no Retry-After: waiting does not help"
    );
    // A deployable that limits nothing reads no path, and refuses none.
    let no_api = "[[deployables]]\nname = \"site\"\ntarget = \"native\"\nserves_api = false\n";
    let app = runtime::config::Application::from_toml(no_api).expect("valid");
    let limiter = Limiter::new(&app, "site", 7).expect("limiter");
    assert_eq!(
        limiter.checks(&subject, "GET", &hostile_path(65_534)),
        Ok(Vec::new())
    );
}

#[test]
fn every_key_is_bounded_whatever_the_caller_id_and_the_path() {
    let app = runtime::config::Application::from_toml(CATCH_ALL).expect("valid");
    let limiter = Limiter::new(&app, "server", 7).expect("limiter");
    let long = "u".repeat(64 * 1024);
    let other = format!("{}v", &long[1..]);
    let path = hostile_path(MAX_PATH_BYTES);
    for id in [
        long.as_str(),
        other.as_str(),
        &long[..MAX_CALLER_ID_BYTES + 1],
    ] {
        let checks = limiter
            .checks(&Subject::of_request(Some(id), None), "GET", &path)
            .expect("read");
        let subject_key = checks[0].key();
        assert!(subject_key.starts_with("caller#:"), "keyed by its digest");
        assert_eq!(subject_key.len(), "caller#:".len() + 32);
        assert!(checks[1].key().len() <= "/api/{*rest}|".len() + subject_key.len());
    }
    let key = |id: &str| keys::subject(&Subject::of_request(Some(id), None));
    assert_ne!(key(&long), key(&other), "two long ids, two keys");
    let at_bound = "u".repeat(MAX_CALLER_ID_BYTES);
    assert_eq!(
        key(&at_bound),
        format!("caller:{at_bound}"),
        "kept as written"
    );
}

#[test]
fn an_address_header_is_read_no_further_than_an_address_reaches() {
    let peer: Option<IpAddr> = Some("10.0.0.2".parse().expect("ip"));
    let proxies = AddressSource::TrustedProxies(TrustedProxies::new(vec![
        "10.0.0.0/8".parse().expect("net"),
    ]));
    let resolve = |line: &[u8]| {
        let lines = [line];
        let headers = AddressHeaders {
            forwarded_for: &lines,
            ..AddressHeaders::default()
        };
        proxies.resolve(peer, &headers)
    };
    let client: IpAddr = "203.0.113.9".parse().expect("ip");
    let found = Ok(Resolved::Address(
        runtime::unstable_for_tools::address::ClientAddress::of_ip(client),
    ));
    assert_eq!(resolve(b"203.0.113.9"), found);
    // Whitespace up to the bound is an address still; past it, none.
    let padded = format!("{:<width$}", "203.0.113.9", width = MAX_ADDRESS_BYTES);
    assert_eq!(resolve(padded.as_bytes()), found);
    let long = format!("203.0.113.9{}", " ".repeat(64 * 1024));
    assert_eq!(
        resolve(long.as_bytes()),
        Err(AddressUnknown::ForwardedForInvalid)
    );
    // Entries the client wrote left of the ones its proxies wrote are
    // never reached, however many.
    let junk = format!("{}, 203.0.113.9, 10.0.0.1", "x".repeat(64 * 1024));
    assert_eq!(resolve(junk.as_bytes()), found);
    // From a client inside the proxies' networks, at most
    // MAX_FORWARDED_HOPS entries are read: the leftmost read is the client.
    let hops = format!(
        "203.0.113.9{}",
        ", 10.0.0.1".repeat(10 * MAX_FORWARDED_HOPS)
    );
    let proxy: IpAddr = "10.0.0.1".parse().expect("ip");
    assert_eq!(
        resolve(hops.as_bytes()).map(Resolved::address),
        Ok(runtime::unstable_for_tools::address::ClientAddress::of_ip(
            proxy
        ))
    );
    let within = format!("203.0.113.9{}", ", 10.0.0.1".repeat(MAX_FORWARDED_HOPS - 1));
    assert_eq!(resolve(within.as_bytes()), found);
    // Cloudflare's header likewise.
    let cloudflare = runtime::unstable_for_tools::address::ClientAddress::from_header(Some(&long));
    assert_eq!(
        cloudflare,
        runtime::unstable_for_tools::address::ClientAddress::Unknown
    );
    let short = runtime::unstable_for_tools::address::ClientAddress::from_header(Some(&padded));
    assert_eq!(
        short,
        runtime::unstable_for_tools::address::ClientAddress::of_ip(client)
    );
    // One byte of whitespace more and it is no address (the address fuzz
    // target's padding, on a value already at the bound).
    let past = runtime::unstable_for_tools::address::ClientAddress::from_header(Some(&format!(
        " {padded}"
    )));
    assert_eq!(
        past,
        runtime::unstable_for_tools::address::ClientAddress::Unknown
    );
    assert_eq!(
        resolve(format!("{padded} ").as_bytes()),
        Err(AddressUnknown::ForwardedForInvalid)
    );
}
