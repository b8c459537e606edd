//! The native gate counting in a real `redis-server` (and a real Redis
//! Cluster of three masters and their replicas, resharded and failed over):
//! exact counts shared by several instances, refusals answered
//! from the cache with no round trip, and the failure discipline (memory
//! fallback, one `rate_limits.fallback` line naming the connection, the
//! 500 ms deadline and the cool-off) under real faults.
//!
//! Each "instance" is a [`NativeGate`] of its own, as three processes would
//! hold: its own memory, refused-keys cache and connection. The clocks are
//! shifted to 1 s into a minute, so no count straddles a window.

use std::time::{Duration, Instant};

use harness::world::redis::RedisServer;
use harness::world::redis_cluster::RedisCluster;

use crate::common;
#[path = "../../../runtime/tests/all/common/lines.rs"]
mod lines;
use lines::Lines;
use runtime::Subject;
use runtime::native::NativeGate;
use runtime::unstable_for_tools::native::redis_dials;

fn url(server: &RedisServer) -> String {
    format!("url = \"{}\"", server.url())
}

/// `n` instances of the deployable on `store`, their clocks 1 s into a minute.
fn instances(store: &str, n: usize) -> Vec<NativeGate> {
    (0..n)
        .map(|_| {
            let gate = NativeGate::from_toml(&common::native_redis_app(store), "api")
                .expect("the application is valid");
            let now = gate.clock().wall_ms();
            let target = (now / 60_000 + 1) * 60_000 + 1_000;
            gate.clock().set_offset_ms((target - now) as i64);
            gate
        })
        .collect()
}

fn address(ip: &str) -> Subject {
    Subject::of_request(None, Some(ip))
}

/// Sends `n` requests round-robin over `gates`; how many passed.
async fn passed(gates: &[NativeGate], subject: &Subject, path: &str, n: usize) -> usize {
    let mut passed = 0;
    for i in 0..n {
        if gates[i % gates.len()]
            .decide(subject, "GET", path)
            .await
            .is_ok()
        {
            passed += 1;
        }
    }
    passed
}

#[tokio::test]
async fn three_instances_on_one_redis_let_exactly_the_limits_through() {
    let server = RedisServer::start().await.expect("redis-server");
    let gates = instances(&url(&server), 3);
    // 120 a minute for an address, whichever instance answers.
    assert_eq!(
        passed(&gates, &address("203.0.113.7"), "/api/items", 363).await,
        120
    );
    // 600 for a caller.
    let caller = Subject::of_request(Some("caller-7f3a"), None);
    assert_eq!(passed(&gates, &caller, "/api/items", 603).await, 600);
    // A route's own 20 per 10 s, beside the address's 120.
    assert_eq!(
        passed(&gates, &address("198.51.100.9"), "/api/search", 30).await,
        20
    );
    // Each address counts on its own; an IPv6 client by its /64.
    assert_eq!(
        passed(&gates, &address("2001:db8::1"), "/api/items", 60).await,
        60
    );
    assert_eq!(
        passed(&gates, &address("2001:db8::2"), "/api/items", 63).await,
        60
    );
}

#[tokio::test]
async fn a_refused_key_is_answered_from_the_cache_without_a_round_trip() {
    let server = RedisServer::start().await.expect("redis-server");
    let gates = instances(&url(&server), 1);
    let subject = address("203.0.113.8");
    assert_eq!(passed(&gates, &subject, "/api/items", 120).await, 120);
    let before = server.command_calls("evalsha").await.expect("info");
    // The first refusal asks Redis once; the next 50 ask nobody.
    assert_eq!(passed(&gates, &subject, "/api/items", 51).await, 0);
    let after = server.command_calls("evalsha").await.expect("info");
    assert_eq!(after - before, 1, "one round trip for 51 refusals");
    // A counted request is one round trip: one EVALSHA for all its limits.
    let before = server.command_calls("evalsha").await.expect("info");
    assert_eq!(
        passed(&gates, &address("203.0.113.9"), "/api/search", 1).await,
        1
    );
    let after = server.command_calls("evalsha").await.expect("info");
    assert_eq!(
        after - before,
        1,
        "the address's limit and the route's, in one script call"
    );
}

#[tokio::test]
async fn redis_down_counts_in_each_instances_memory_and_logs_once_each() {
    let (lines, _guard) = Lines::capture();
    let mut server = RedisServer::start().await.expect("redis-server");
    let gates = instances(&url(&server), 3);
    let subject = address("203.0.113.10");
    assert_eq!(passed(&gates, &subject, "/api/items", 30).await, 30);
    server.kill().await;
    // No error reaches a request: each instance counts 120 in its own memory,
    // the 30 Redis counted before it went down are not there.
    assert_eq!(passed(&gates, &subject, "/api/items", 363).await, 360);
    let logs = lines.events("rate_limits.fallback");
    assert_eq!(logs.len(), 3, "one line per instance: {logs:?}");
    for log in &logs {
        assert_eq!(log["connection"], "cache");
        assert_eq!(log["reason"], "failed");
    }
    assert!(
        !lines.text().contains("203.0.113.10"),
        "no key in a log line"
    );
}

#[tokio::test]
async fn nothing_listening_from_the_start_is_missing() {
    let (lines, _guard) = Lines::capture();
    let port = harness::world::redis::free_port().expect("port");
    let gates = instances(&format!("url = \"redis://127.0.0.1:{port}\""), 2);
    assert_eq!(
        passed(&gates, &address("192.0.2.1"), "/api/items", 250).await,
        240
    );
    let logs = lines.events("rate_limits.fallback");
    assert_eq!(logs.len(), 2, "{logs:?}");
    assert!(
        logs.iter()
            .all(|l| l["reason"] == "missing" && l["connection"] == "cache")
    );
    // 125 requests each, one dial each: a Redis missing from the start is
    // dialled once per cool-off, not on every request.
    for gate in &gates {
        assert_eq!(redis_dials(gate), 1);
    }
}

#[tokio::test]
async fn connecting_before_serving_leaves_the_first_request_no_dial_and_a_failure_to_it() {
    let (lines, _guard) = Lines::capture();
    let server = RedisServer::start().await.expect("redis-server");
    let gates = instances(&url(&server), 1);
    assert_eq!(gates[0].connect().await, Ok(()));
    assert_eq!(redis_dials(&gates[0]), 1);
    assert_eq!(
        passed(&gates, &address("192.0.2.6"), "/api/items", 3).await,
        3
    );
    assert_eq!(
        redis_dials(&gates[0]),
        1,
        "the first request found it connected"
    );
    assert_eq!(server.command_calls("evalsha").await.expect("info"), 3);
    // Nothing listening: connecting says nothing; the first request dials
    // again, and is the one that falls back and says why.
    let port = harness::world::redis::free_port().expect("port");
    let gates = instances(&format!("url = \"redis://127.0.0.1:{port}\""), 1);
    let unreachable = gates[0].connect().await.expect_err("nothing listens");
    assert_eq!(unreachable.reason, "missing");
    assert!(
        !unreachable.to_string().contains(&port.to_string()),
        "{unreachable}"
    );
    assert!(lines.events("rate_limits.fallback").is_empty());
    assert_eq!(
        passed(&gates, &address("192.0.2.7"), "/api/items", 3).await,
        3
    );
    assert_eq!(redis_dials(&gates[0]), 2);
    let logs = lines.events("rate_limits.fallback");
    assert_eq!(logs.len(), 1, "{logs:?}");
    assert_eq!(logs[0]["reason"], "missing");
}

/// A server that speaks Redis's protocol and is not Redis: `+OK` to every
/// command, and to a script call one answer however many limits it named.
async fn short_answering_server() -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("address").port();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buffer = vec![0; 64 * 1024];
                while let Ok(read) = stream.read(&mut buffer).await {
                    if read == 0 {
                        break;
                    }
                    let text = String::from_utf8_lossy(&buffer[..read]);
                    // Each command is a RESP array: `*N` at a line's start.
                    let mut reply = String::new();
                    for command in text.split("\r\n*").filter(|c| !c.is_empty()) {
                        let is_script = command.to_ascii_uppercase().contains("EVAL");
                        reply.push_str(if is_script { "*1\r\n:1\r\n" } else { "+OK\r\n" });
                    }
                    if stream.write_all(reply.as_bytes()).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    port
}

#[tokio::test]
async fn a_reply_that_is_not_one_answer_per_limit_is_a_failure_not_a_silent_memory_count() {
    let (lines, _guard) = Lines::capture();
    let port = short_answering_server().await;
    let gates = instances(&format!("url = \"redis://127.0.0.1:{port}\""), 1);
    // The route's request asks two limits; the one answer is no answer.
    assert_eq!(
        passed(&gates, &address("192.0.2.8"), "/api/search", 3).await,
        3
    );
    let logs = lines.events("rate_limits.fallback");
    assert_eq!(logs.len(), 1, "{logs:?}");
    assert_eq!(logs[0]["reason"], "failed");
}

#[tokio::test]
async fn a_hanging_redis_costs_one_wait_per_cool_off() {
    let (lines, _guard) = Lines::capture();
    let server = RedisServer::start().await.expect("redis-server");
    let gates = instances(&url(&server), 1);
    let subject = address("192.0.2.2");
    assert_eq!(passed(&gates, &subject, "/api/items", 5).await, 5);
    server.hang();
    let started = Instant::now();
    assert!(gates[0].decide(&subject, "GET", "/api/items").await.is_ok());
    let first = started.elapsed();
    let mut rest = Vec::new();
    for _ in 0..50 {
        let started = Instant::now();
        assert!(gates[0].decide(&subject, "GET", "/api/items").await.is_ok());
        rest.push(started.elapsed());
    }
    server.resume();
    // The first waits for the deadline (not for ever); the rest are counted in
    // memory at once while the store cools off.
    assert!(
        first >= Duration::from_millis(450),
        "first waited {first:?}"
    );
    assert!(
        first < Duration::from_millis(1_500),
        "first waited {first:?}"
    );
    rest.sort();
    let p50 = rest[rest.len() / 2];
    assert!(
        p50 < Duration::from_millis(5),
        "p50 after the first: {p50:?}"
    );
    let logs = lines.events("rate_limits.fallback");
    assert_eq!(logs.len(), 1, "{logs:?}");
    assert_eq!(logs[0]["reason"], "timed_out");
}

#[tokio::test]
async fn restarted_and_flushed_redis_keeps_counting_with_no_error() {
    let mut server = RedisServer::start().await.expect("redis-server");
    let gates = instances(&url(&server), 2);
    let subject = address("192.0.2.3");
    assert_eq!(passed(&gates, &subject, "/api/items", 50).await, 50);
    // Scripts flushed: the next EVALSHA is NOSCRIPT and is sent again as EVAL.
    server.flush_scripts().await.expect("SCRIPT FLUSH");
    assert_eq!(passed(&gates, &subject, "/api/items", 73).await, 70);
    assert!(server.command_calls("eval").await.expect("info") >= 1);
    // Restarted: the counts are gone; the connection comes back after a cool-off at most.
    server.restart().await.expect("restart");
    let other = address("192.0.2.4");
    assert_eq!(passed(&gates, &other, "/api/items", 10).await, 10);
}

#[tokio::test]
async fn a_cluster_counts_exactly_with_keys_over_its_slots() {
    let cluster = RedisCluster::start(None)
        .await
        .expect("three masters and their replicas");
    let nodes: Vec<String> = cluster.urls().iter().map(|u| format!("\"{u}\"")).collect();
    let gates = instances(&format!("nodes = [{}]", nodes.join(", ")), 3);
    // Forty addresses, each with the route's limit too: keys over many slots,
    // each request's two keys in one slot (no CROSSSLOT).
    for i in 0..40 {
        let subject = address(&format!("198.51.100.{i}"));
        assert_eq!(
            passed(&gates, &subject, "/api/search", 25).await,
            20,
            "address {i}"
        );
    }
    assert_eq!(
        passed(&gates, &address("203.0.113.77"), "/api/items", 130).await,
        120
    );
    // The keys really are spread: every master holds some.
    for node in cluster.masters().await.expect("the masters") {
        let keys = node.command(&["DBSIZE"]).await.expect("DBSIZE");
        assert!(
            keys.trim().parse::<u64>().unwrap_or(0) > 0,
            "node {} holds no key",
            node.port()
        );
    }
}

/// `n` instances on `cluster`'s masters.
fn cluster_instances(cluster: &RedisCluster, n: usize) -> Vec<NativeGate> {
    let nodes: Vec<String> = cluster.urls().iter().map(|u| format!("\"{u}\"")).collect();
    instances(&format!("nodes = [{}]", nodes.join(", ")), n)
}

#[tokio::test]
async fn a_resharding_under_traffic_keeps_the_count_exact_with_no_fallback() {
    let (lines, _guard) = Lines::capture();
    let mut cluster = RedisCluster::start(None)
        .await
        .expect("three masters and their replicas");
    let gates = cluster_instances(&cluster, 2);
    let subject = address("198.51.100.201");
    assert_eq!(passed(&gates, &subject, "/api/search", 8).await, 8);
    cluster.start_resharding().await.expect("slots half moved");
    // ASK: the keys are on the new master, the slot still the old one's.
    assert_eq!(passed(&gates, &subject, "/api/search", 8).await, 8);
    cluster.finish_resharding().await.expect("slots moved");
    // MOVED: the old master sends the client on.
    assert_eq!(passed(&gates, &subject, "/api/search", 7).await, 4);
    let logs = lines.events("rate_limits.fallback");
    assert!(logs.is_empty(), "{logs:?}");
}

#[tokio::test]
async fn a_failed_over_master_s_counts_are_kept_and_every_gate_is_back_after_a_cool_off() {
    let (lines, _guard) = Lines::capture();
    let mut cluster = RedisCluster::start(None)
        .await
        .expect("three masters and their replicas");
    let gates = cluster_instances(&cluster, 2);
    let subject = address("198.51.100.202");
    assert_eq!(passed(&gates, &subject, "/api/items", 60).await, 60);
    cluster
        .fail_over()
        .await
        .expect("the busiest master killed");
    let killed = Instant::now();
    // Until the promotion: memory, one line per gate, no request failing
    // and none waiting past the deadline.
    let started = Instant::now();
    assert_eq!(passed(&gates, &subject, "/api/items", 10).await, 10);
    assert!(
        started.elapsed() < Duration::from_millis(2 * 1_500),
        "{:?}",
        started.elapsed()
    );
    cluster.promoted().await.expect("the replica promoted");
    let promoted = killed.elapsed();
    assert!(
        promoted < Duration::from_secs(15),
        "promoted after {promoted:?}"
    );
    cluster
        .heal()
        .await
        .expect("the dead master back as a replica");
    // The cool-off over: each gate's next request probes, finds the
    // promoted master, and the count goes on from the 60 the replica kept.
    for gate in &gates {
        let real = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_millis();
        let offset = i64::try_from(i128::from(gate.clock().wall_ms()) - real as i128)
            .expect("an offset of less than a minute");
        gate.clock().set_offset_ms(offset + 11_000);
    }
    assert_eq!(
        passed(&gates, &address("198.51.100.203"), "/api/items", 2).await,
        2
    );
    assert_eq!(passed(&gates, &subject, "/api/items", 61).await, 60);
    let logs = lines.events("rate_limits.fallback");
    assert_eq!(logs.len(), 2, "{logs:?}");
    assert!(logs.iter().all(|log| log["reason"] == "failed"), "{logs:?}");
    eprintln!("failover: the replica promoted {promoted:?} after the master was killed");
}

#[tokio::test]
async fn a_slow_redis_is_not_waited_for_beyond_the_deadline() {
    let (lines, _guard) = Lines::capture();
    let server = RedisServer::start().await.expect("redis-server");
    let gates = instances(&url(&server), 1);
    let subject = address("192.0.2.5");
    assert_eq!(passed(&gates, &subject, "/api/items", 3).await, 3);
    server.pause(1_500).await.expect("CLIENT PAUSE");
    let started = Instant::now();
    assert!(gates[0].decide(&subject, "GET", "/api/items").await.is_ok());
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(450), "waited {waited:?}");
    assert!(waited < Duration::from_millis(1_400), "waited {waited:?}");
    let logs = lines.events("rate_limits.fallback");
    assert_eq!(logs.len(), 1, "{logs:?}");
    assert_eq!(logs[0]["reason"], "timed_out");
}

/// A native API on `store` whose routes' limits span the windows and sizes
/// a description accepts natively: the route's own 5 per 2 s, 20 per 10 s,
/// 3 per 60 s, and the address's built-in 120 per 60 s (`/api/items`).
fn windows_app(name: &str, store: &str) -> String {
    // The common native API on Redis (its `/api/search` 20 per 10 s), named
    // `name`, with a route of each other window.
    let named = common::native_redis_app(store).replacen(
        "name = \"shop\"",
        &format!("name = \"{name}\""),
        1,
    );
    format!(
        r#"{named}
[[routes]]
path = "/api/burst"
rate_limit = {{ requests = 5, window = 2 }}

[[routes]]
path = "/api/export"
rate_limit = {{ requests = 3, window = 60 }}
"#
    )
}

/// Each (path, limit, window in s) [`windows_app`] counts: the limit that
/// binds first for a new address on that path.
const WINDOWS: [(&str, usize, u64); 4] = [
    ("/api/burst", 5, 2),
    ("/api/search", 20, 10),
    ("/api/export", 3, 60),
    ("/api/items", 120, 60),
];

/// The real wall clock, in ms since the epoch.
fn real_ms() -> u64 {
    u64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_millis(),
    )
    .expect("in range")
}

/// Instances of one application sharing one scenario clock (which Redis's
/// windows follow, as time passing would move them), each of whose wall
/// clocks can be set apart from it as a skewed or stepped clock is.
struct Fleet {
    gates: Vec<NativeGate>,
    /// The scenario clock's offset from the real clock.
    offset_ms: i64,
}

impl Fleet {
    fn new(app: &str, n: usize) -> Fleet {
        let gates = (0..n)
            .map(|_| NativeGate::from_toml(app, "api").expect("the application is valid"))
            .collect();
        Fleet {
            gates,
            offset_ms: 0,
        }
    }

    /// The scenario clock (every instance's, and Redis's) to `at_ms` now.
    fn at(&mut self, at_ms: u64) {
        self.offset_ms = i64::try_from(at_ms).expect("ms") - i64::try_from(real_ms()).expect("ms");
        for gate in &self.gates {
            gate.clock().set_offset_ms(self.offset_ms);
        }
    }

    /// The scenario clock `by_ms` later, at once.
    fn advance(&mut self, by_ms: u64) {
        self.offset_ms += i64::try_from(by_ms).expect("ms");
        for gate in &self.gates {
            gate.clock().set_offset_ms(self.offset_ms);
        }
    }
}

/// The beginning of a minute a little ahead: a boundary of every window of
/// [`WINDOWS`] (2, 10 and 60 s all divide 60 s).
fn a_minute_ahead() -> u64 {
    (real_ms() / 60_000 + 2) * 60_000
}

/// Two instances whose wall clocks differ by `skew_ms` (the second's ahead
/// when positive), up to more than a minute's window, each placed so that
/// the two instances' clocks are on either side of a boundary of every
/// window of [`WINDOWS`]: per window, exactly the limit passes over both,
/// for three windows running.
async fn skewed_instances_let_each_window_s_limit_through_once(store: &str, first_octet: u8) {
    let skews: [i64; 4] = [-1_000, 1_900, -2_000, -61_500];
    for (s, skew_ms) in skews.into_iter().enumerate() {
        let mut fleet = Fleet::new(&windows_app("shop", store), 2);
        fleet.gates[1].clock().step_wall_ms(skew_ms);
        // Just after a boundary when the second is behind, just before one
        // (with the second past it) when it is ahead.
        let start = if skew_ms < 0 {
            a_minute_ahead() + 100
        } else {
            a_minute_ahead() + 50 - skew_ms.unsigned_abs()
        };
        for (w, (path, limit, window_s)) in WINDOWS.into_iter().enumerate() {
            let subject = address(&format!("{first_octet}.18.{s}.{w}"));
            fleet.at(start);
            for round in 0..3 {
                // Sent in turn: each instance alone would let the limit through.
                assert_eq!(
                    passed(&fleet.gates, &subject, path, limit + 4).await,
                    limit,
                    "{path}: {limit} per {window_s} s, skew {skew_ms} ms, window {round}"
                );
                fleet.advance(window_s * 1000);
            }
        }
    }
}

/// One instance's wall clock stepped back 1.5 s across a boundary of every
/// window of [`WINDOWS`], after the window before it had let its limit
/// through and the boundary had really passed (so a key that expired at
/// that window's end is gone): nothing more passes.
async fn a_clock_stepped_back_opens_no_window_again(store: &str, first_octet: u8) {
    let mut fleet = Fleet::new(&windows_app("shop", store), 2);
    let boundary = a_minute_ahead();
    fleet.at(boundary - 1_500);
    let started = Instant::now();
    let subjects: Vec<Subject> = (0..WINDOWS.len())
        .map(|w| address(&format!("{first_octet}.19.0.{w}")))
        .collect();
    // The window before the boundary lets each limit through.
    for (subject, (path, limit, _)) in subjects.iter().zip(WINDOWS) {
        assert_eq!(passed(&fleet.gates, subject, path, limit).await, limit);
    }
    assert!(
        started.elapsed() < Duration::from_millis(1_400),
        "the window before took {:?}: too long to judge",
        started.elapsed()
    );
    // The boundary really passes.
    tokio::time::sleep(Duration::from_millis(1_650).saturating_sub(started.elapsed())).await;
    for (subject, (path, limit, window_s)) in subjects.iter().zip(WINDOWS) {
        assert_eq!(
            passed(&fleet.gates, subject, path, limit).await,
            limit,
            "{path}: {limit} per {window_s} s, the next window"
        );
    }
    // One wall clock steps back 1.5 s, into the window before: nothing more.
    fleet.gates[0].clock().step_wall_ms(-1_500);
    for (subject, (path, limit, window_s)) in subjects.iter().zip(WINDOWS) {
        assert_eq!(
            passed(&fleet.gates[..1], subject, path, limit).await,
            0,
            "{path}: {limit} per {window_s} s, stepped back"
        );
        assert_eq!(passed(&fleet.gates, subject, path, 2).await, 0);
    }
}

/// One instance's wall clock stepped forward into the next minute, after
/// the other let each limit through: nothing more passes in the running
/// window, and the next one lets each limit through once over both.
async fn a_clock_stepped_forward_opens_no_window_early(store: &str, first_octet: u8) {
    let mut fleet = Fleet::new(&windows_app("shop", store), 2);
    let boundary = a_minute_ahead();
    fleet.at(boundary + 100);
    let subjects: Vec<Subject> = (0..WINDOWS.len())
        .map(|w| address(&format!("{first_octet}.20.0.{w}")))
        .collect();
    for (subject, (path, limit, _)) in subjects.iter().zip(WINDOWS) {
        assert_eq!(passed(&fleet.gates[1..], subject, path, limit).await, limit);
    }
    fleet.gates[0].clock().step_wall_ms(60_000);
    for (subject, (path, limit, window_s)) in subjects.iter().zip(WINDOWS) {
        assert_eq!(
            passed(&fleet.gates[..1], subject, path, limit).await,
            0,
            "{path}: {limit} per {window_s} s, stepped forward"
        );
    }
    // The next minute (a boundary of every window): each limit once, over both.
    fleet.at(boundary + 60_100);
    for (subject, (path, limit, window_s)) in subjects.iter().zip(WINDOWS) {
        assert_eq!(
            passed(&fleet.gates, subject, path, limit + 4).await,
            limit,
            "{path}: {limit} per {window_s} s, the next window"
        );
    }
}

#[tokio::test]
async fn instances_whose_clocks_differ_let_each_window_s_limit_through_once() {
    let server = RedisServer::start().await.expect("redis-server");
    skewed_instances_let_each_window_s_limit_through_once(&url(&server), 10).await;
}

#[tokio::test]
async fn a_wall_clock_stepped_back_or_forward_counts_no_window_twice() {
    let server = RedisServer::start().await.expect("redis-server");
    a_clock_stepped_back_opens_no_window_again(&url(&server), 10).await;
    a_clock_stepped_forward_opens_no_window_early(&url(&server), 10).await;
}

#[tokio::test]
async fn on_a_cluster_skewed_and_stepped_clocks_count_each_window_once() {
    let cluster = RedisCluster::start(None)
        .await
        .expect("three masters and their replicas");
    let nodes: Vec<String> = cluster.urls().iter().map(|u| format!("\"{u}\"")).collect();
    let store = format!("nodes = [{}]", nodes.join(", "));
    skewed_instances_let_each_window_s_limit_through_once(&store, 11).await;
    a_clock_stepped_back_opens_no_window_again(&store, 11).await;
    a_clock_stepped_forward_opens_no_window_early(&store, 11).await;
}

#[tokio::test]
async fn a_refusal_is_remembered_for_what_redis_says_is_left_of_its_window() {
    let server = RedisServer::start().await.expect("redis-server");
    // The instance's wall clock is 1.5 s behind Redis's, 2 s before the
    // minute ends on Redis's: it remembers a refusal for what Redis has left
    // of the minute, not until its own minute ends (1.5 s later).
    let mut fleet = Fleet::new(&windows_app("shop", &url(&server)), 1);
    fleet.gates[0].clock().step_wall_ms(-1_500);
    let minute = a_minute_ahead();
    fleet.at(minute - 2_000);
    let subject = address("192.0.2.40");
    assert_eq!(passed(&fleet.gates, &subject, "/api/items", 120).await, 120);
    let before = server.command_calls("evalsha").await.expect("info");
    assert_eq!(passed(&fleet.gates, &subject, "/api/items", 10).await, 0);
    let after = server.command_calls("evalsha").await.expect("info");
    assert_eq!(after - before, 1, "one round trip, then the cache");
    // Still Redis's minute: the cache answers.
    fleet.at(minute - 400);
    assert_eq!(passed(&fleet.gates, &subject, "/api/items", 3).await, 0);
    assert_eq!(
        server.command_calls("evalsha").await.expect("info"),
        after,
        "answered from the cache"
    );
    // Redis's next minute, the instance's still the one before: the
    // refusal is not remembered past Redis's window.
    fleet.at(minute + 300);
    assert_eq!(passed(&fleet.gates, &subject, "/api/items", 121).await, 120);
}

#[tokio::test]
async fn two_applications_on_one_redis_count_apart_and_one_application_s_instances_together() {
    let server = RedisServer::start().await.expect("redis-server");
    let store = url(&server);
    let minute = a_minute_ahead() + 1_000;
    let mut shop = Fleet::new(&windows_app("shop", &store), 2);
    shop.at(minute);
    // Another application, with the same deployable's name and routes.
    let mut blog = Fleet::new(&windows_app("blog", &store), 1);
    blog.at(minute);
    for (w, (path, limit, window_s)) in WINDOWS.into_iter().enumerate() {
        let subject = address(&format!("192.0.2.{}", 50 + w));
        assert_eq!(passed(&shop.gates[..1], &subject, path, limit).await, limit);
        // The same application's other instance: the same count.
        assert_eq!(
            passed(&shop.gates[1..], &subject, path, 2).await,
            0,
            "{path}: {limit} per {window_s} s, shop's other instance"
        );
        // The other application: a count of its own.
        assert_eq!(
            passed(&blog.gates, &subject, path, limit + 1).await,
            limit,
            "{path}: {limit} per {window_s} s, blog"
        );
    }
    // Each application's keys are named by it.
    let keys = server.list(&["KEYS", "rl:*"]).await.expect("KEYS");
    assert!(
        keys.iter().any(|k| k.starts_with("rl:shop:{"))
            && keys.iter().any(|k| k.starts_with("rl:blog:{"))
            && keys
                .iter()
                .all(|k| k.starts_with("rl:shop:{") || k.starts_with("rl:blog:{")),
        "{} keys, not all named by an application",
        keys.len()
    );
}
