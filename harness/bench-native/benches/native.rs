//! Native deployables: throughput and added latency with limiting off, in
//! memory and in Redis (one instance on loopback, 8 connections, a hot key
//! and distinct keys), the Redis store in process (throughput, p50/p99,
//! round trips per request from `INFO commandstats`) and exactness over
//! three instances.
//!
//! Not here: Kuadrant's `limitador` 0.14 side by side. With
//! `default-features = false, features = ["redis_storage"]` it does not
//! compile (`storage/keys.rs` calls its `bin` module, which only
//! `disk_storage`, i.e. RocksDB, builds); see BENCHMARKS.md.
//!
//! `cargo bench -p harness --bench native` (see BENCHMARKS.md for the
//! figures, the machine and the exact command used).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use harness::native::{NativeProcess, fixture_path};
use harness::redis::RedisServer;
use runtime::Subject;
use runtime::native::{AddressSource, NativeGate};

const CONNECTIONS: usize = 8;

fn app(store: Option<&str>) -> String {
    let store = match store {
        Some(url) => format!(
            "[connections.cache]\ndriver = \"redis\"\nurl = \"{url}\"\n\n[rate_limits]\nstore = \"cache\"\n"
        ),
        None => String::new(),
    };
    format!("{store}\n[[deployables]]\nname = \"api\"\ntarget = \"native\"\nserves_api = true\n")
}

struct Figures {
    requests: usize,
    elapsed: Duration,
    latencies: Vec<Duration>,
}

impl Figures {
    fn percentile(&self, p: f64) -> Duration {
        let mut sorted = self.latencies.clone();
        sorted.sort();
        let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
        sorted.get(index).copied().unwrap_or_default()
    }

    fn line(&self, name: &str) -> String {
        format!(
            "{name:<44} {:>9.0} req/s   p50 {:>7.3} ms   p99 {:>7.3} ms",
            self.requests as f64 / self.elapsed.as_secs_f64(),
            self.percentile(0.50).as_secs_f64() * 1e3,
            self.percentile(0.99).as_secs_f64() * 1e3,
        )
    }
}

/// Runs `total` calls of `call(i)` over `CONNECTIONS` concurrent tasks.
async fn drive<F, Fut>(total: usize, call: F) -> Figures
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let call = Arc::new(call);
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..CONNECTIONS {
        let call = call.clone();
        let next = next.clone();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= total {
                    break;
                }
                let t = Instant::now();
                call(i).await;
                latencies.push(t.elapsed());
            }
            latencies
        }));
    }
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await.expect("task"));
    }
    Figures {
        requests: total,
        elapsed: started.elapsed(),
        latencies,
    }
}

fn address_of(i: usize) -> String {
    format!("10.{}.{}.{}", (i >> 16) & 255, (i >> 8) & 255, i & 255)
}

/// One instance over HTTP: limiting off / memory / Redis, hot key and distinct keys.
async fn http(total: usize) {
    println!(
        "\n## One native instance on loopback, {CONNECTIONS} connections, {total} requests each"
    );
    let fixture = fixture_path().expect("native-fixture (cargo build -p harness --bins --release)");
    let server = RedisServer::start().await.expect("redis-server");
    let dir = tempfile::tempdir().expect("dir");
    let cases: [(&str, Option<String>, &[&str]); 3] = [
        ("off", None, &["--limiting-off"]),
        ("memory", None, &[]),
        ("redis", Some(server.url()), &[]),
    ];
    for (mode, store, extra) in cases {
        let path = dir.path().join(format!("{mode}.toml"));
        std::fs::write(&path, app(store.as_deref())).expect("app");
        let instance = NativeProcess::start_with(&fixture, &path, "api", extra, Instant::now())
            .await
            .expect("instance");
        let url = format!("{}/api/items", instance.url());
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(CONNECTIONS)
            .build()
            .expect("client");
        for (keys, hot) in [("hot key", true), ("distinct keys", false)] {
            let before = server.command_calls("evalsha").await.unwrap_or(0);
            let (client, url) = (client.clone(), url.clone());
            let base = if hot { 0 } else { total * 4 };
            let figures = drive(total, move |i| {
                let request = client.get(&url).header(
                    "CF-Connecting-IP",
                    if hot {
                        "192.0.2.1".to_owned()
                    } else {
                        address_of(base + i)
                    },
                );
                async move {
                    let response = request.send().await.expect("answer");
                    let _ = response.bytes().await;
                }
            })
            .await;
            let after = server.command_calls("evalsha").await.unwrap_or(0);
            println!(
                "{}   EVALSHA/request {:.3}",
                figures.line(&format!("http {mode}, {keys}")),
                (after - before) as f64 / total as f64
            );
        }
        instance.stop().await;
    }
}

fn subject_of(i: usize, hot: bool) -> Subject {
    Subject::of_request(
        None,
        Some(&if hot {
            "192.0.2.2".to_owned()
        } else {
            address_of(i)
        }),
    )
}

/// The Redis store in process, on one redis-server, through the whole native gate.
async fn stores(total: usize, server: &RedisServer) {
    println!(
        "\n## The Redis store in process, {CONNECTIONS} tasks, {total} checks each, limit 120 per 60 s per address"
    );
    for (keys, hot) in [("hot key", true), ("distinct keys", false)] {
        server.cli(&["FLUSHALL"]).await.expect("flush");
        let gate = Arc::new(
            NativeGate::from_toml(&app(Some(&server.url())), "api", AddressSource::Peer)
                .expect("gate"),
        );
        let before = server.command_calls("evalsha").await.unwrap_or(0);
        let g = gate.clone();
        let figures = drive(total, move |i| {
            let gate = g.clone();
            async move {
                let _ = gate.decide(&subject_of(i, hot), "/api/items").await;
            }
        })
        .await;
        let after = server.command_calls("evalsha").await.unwrap_or(0);
        println!(
            "{}   round trips/check {:.3}",
            figures.line(&format!("runtime::native Redis, {keys}")),
            (after - before) as f64 / total as f64
        );
    }
}

/// Exactness: three instances (each with its own connection and caches) hit
/// one hot key, a caller's 600 per minute, with 3000 checks: how many got through.
async fn exactness(server: &RedisServer) {
    println!(
        "\n## Exactness: 3 instances x {CONNECTIONS} tasks, one key, limit 600 per 60 s, 3000 checks"
    );
    server.cli(&["FLUSHALL"]).await.expect("flush");
    let gates: Vec<Arc<NativeGate>> = (0..3)
        .map(|_| {
            Arc::new(
                NativeGate::from_toml(&app(Some(&server.url())), "api", AddressSource::Peer)
                    .expect("gate"),
            )
        })
        .collect();
    let passed = Arc::new(AtomicUsize::new(0));
    let (g, p) = (gates.clone(), passed.clone());
    drive(3000, move |i| {
        let gate = g[i % 3].clone();
        let passed = p.clone();
        async move {
            let subject = Subject::of_request(Some("hot-caller"), None);
            if gate.decide(&subject, "/api/items").await.is_ok() {
                passed.fetch_add(1, Ordering::Relaxed);
            }
        }
    })
    .await;
    println!(
        "{:<44} {} of 3000 through (limit 600)",
        "runtime::native Redis",
        passed.load(Ordering::Relaxed)
    );
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let total = if quick { 2_000 } else { 20_000 };
    runtime.block_on(async {
        http(total).await;
        let server = RedisServer::start().await.expect("redis-server");
        stores(total, &server).await;
        exactness(&server).await;
    });
}
