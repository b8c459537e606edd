//! Native deployables as real processes on a real `redis-server`: three
//! `native-fixture` instances, traffic round-robin, share one count through
//! Redis; with Redis down each counts in its own memory, answers no 5xx, and
//! writes one `rate_limits.fallback` JSON line naming the connection, never a key.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::common;

use harness::world::native::NativeProcess;
use harness::world::redis::RedisServer;

/// Waits, if need be, until at least `room` is left in the current minute,
/// so no count of the test straddles a window.
async fn wait_for_room(room: Duration) {
    wait_for_room_in(Duration::from_secs(60), room).await;
}

/// Sleeps to the next real boundary of `window` when less than `room` is left of it.
async fn wait_for_room_in(window: Duration, room: Duration) {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock");
    let window_ms = window.as_millis();
    let into = Duration::from_millis(u64::try_from(now.as_millis() % window_ms).expect("ms"));
    if window - into < room {
        tokio::time::sleep(window - into + Duration::from_millis(50)).await;
    }
}

async fn instances(dir: &Path, redis_url: &str, n: usize) -> Vec<NativeProcess> {
    let application = dir.join("app.toml");
    std::fs::write(
        &application,
        common::native_redis_app(&format!("url = \"{redis_url}\"")),
    )
    .expect("write app");
    let fixture = Path::new(env!("CARGO_BIN_EXE_native-fixture"));
    let mut started = Vec::new();
    for _ in 0..n {
        started.push(
            NativeProcess::start(fixture, &application, "api", Instant::now())
                .await
                .expect("a native instance listens"),
        );
    }
    started
}

/// Sends `n` requests round-robin; their statuses in order.
async fn send(instances: &[NativeProcess], path: &str, header: (&str, &str), n: usize) -> Vec<u16> {
    let client = reqwest::Client::new();
    let mut statuses = Vec::new();
    for i in 0..n {
        let response = client
            .get(format!("{}{path}", instances[i % instances.len()].url()))
            .header(header.0, header.1)
            .send()
            .await
            .expect("an answer");
        statuses.push(response.status().as_u16());
    }
    statuses
}

fn count(statuses: &[u16], status: u16) -> usize {
    statuses.iter().filter(|s| **s == status).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_native_instances_share_one_count_in_redis() {
    let server = RedisServer::start().await.expect("redis-server");
    let dir = tempfile::tempdir().expect("dir");
    let instances = instances(dir.path(), &server.url(), 3).await;
    wait_for_room(Duration::from_secs(20)).await;
    // Memory counting would let 360 of these through (120 per instance).
    let statuses = send(
        &instances,
        "/api/items",
        ("CF-Connecting-IP", "203.0.113.7"),
        363,
    )
    .await;
    assert_eq!(count(&statuses, 200), 120);
    assert!(statuses[..120].iter().all(|s| *s == 200));
    assert_eq!(count(&statuses, 429), 243);
    // Each count below needs its whole window on the wall clock: a loaded
    // machine can take seconds over the requests above.
    wait_for_room(Duration::from_secs(20)).await;
    let statuses = send(
        &instances,
        "/api/items",
        ("X-Test-Caller", "caller-7f3a"),
        603,
    )
    .await;
    assert_eq!(count(&statuses, 200), 600);
    wait_for_room_in(Duration::from_secs(10), Duration::from_secs(6)).await;
    let statuses = send(
        &instances,
        "/api/search",
        ("CF-Connecting-IP", "198.51.100.9"),
        30,
    )
    .await;
    assert_eq!(count(&statuses, 200), 20);
    for instance in instances {
        let lines = instance.stop().await.expect("its log read to the end");
        assert!(
            !lines
                .iter()
                .any(|l| l.text.contains("rate_limits.fallback")),
            "a healthy Redis logs no fallback"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_down_counts_in_each_instance_with_no_5xx_and_one_line_each() {
    let mut server = RedisServer::start().await.expect("redis-server");
    let dir = tempfile::tempdir().expect("dir");
    let instances = instances(dir.path(), &server.url(), 3).await;
    wait_for_room(Duration::from_secs(20)).await;
    let address = ("CF-Connecting-IP", "203.0.113.44");
    assert_eq!(
        count(&send(&instances, "/api/items", address, 30).await, 200),
        30
    );
    server.kill().await;
    let statuses = send(&instances, "/api/items", address, 363).await;
    assert_eq!(count(&statuses, 200), 360, "120 in each instance's memory");
    assert!(statuses.iter().all(|s| *s < 500), "no 5xx");
    for instance in instances {
        let lines = instance.stop().await.expect("its log read to the end");
        let fallbacks: Vec<serde_json::Value> = lines
            .iter()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(&l.text).ok())
            .filter(|v| v["event"] == "rate_limits.fallback")
            .collect();
        assert_eq!(fallbacks.len(), 1, "one line per instance: {fallbacks:?}");
        assert_eq!(fallbacks[0]["connection"], "cache");
        assert_eq!(fallbacks[0]["reason"], "failed");
        assert!(
            !lines.iter().any(|l| l.text.contains("203.0.113.44")),
            "no key in a log line"
        );
    }
}
