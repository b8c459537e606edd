//! Native deployables counting in Redis, measured on one real redis-server:
//!
//! 1. **Over HTTP**: one native instance on loopback (the `native-fixture`
//!    process), 8 connections, limiting off / in memory / in Redis, a hot key
//!    and distinct keys: throughput, p50 and p99, the instance's CPU per
//!    request, and EVALSHA per counted request and per refusal from Redis's
//!    `INFO commandstats`.
//! 2. **Beside Kuadrant's limitador** (with the `limitador` feature): the
//!    Redis store in process through the whole native gate, against
//!    limitador 0.14's exact async Redis storage and its cached Redis
//!    storage, same server, same limit (120 per 60 s per address), same keys,
//!    8 tasks.
//! 3. **Exactness**: three instances on one key (600 per 60 s, 3000 checks):
//!    how many got through, ours and limitador's.
//! 4. **A hanging Redis** (SIGSTOP) over HTTP: the requests that waited for
//!    the deadline, and the p50 of the others.
//!
//! Every comparison is a ratio of two figures from the same round; rounds
//! alternate the targets, and the median over rounds is reported.
//! `tools/bench-native [--quick]` builds and runs it (BENCHMARKS.md has the
//! command, the figures and the machine). Environment: `BENCH_ROUNDS`
//! (default 3, `--quick` 1), `BENCH_REQUESTS` (per target and round, default
//! 20000, `--quick` 2000).

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use harness::judge::stats::{self, median};
use harness::world::native::{NativeProcess, fixture_path};
use harness::world::proc;
use harness::world::redis::RedisServer;
use runtime::Subject;
use runtime::native::NativeGate;

/// Concurrent connections (HTTP) or tasks (in process).
const CONNECTIONS: usize = 8;
/// The built-in limit of an address, the one the hot key runs into.
const ADDRESS_LIMIT: u64 = 120;
/// The built-in limit of a signed-in caller, the exactness run's.
const CALLER_LIMIT: u64 = 600;
/// Checks in an exactness run, over three instances.
const EXACTNESS_CHECKS: usize = 3000;
/// How long one in-process run may take before it is reported as hung.
const RUN_TIMEOUT: Duration = Duration::from_secs(60);
/// A request that took this long waited for the store's 500 ms deadline.
const WAITED: Duration = Duration::from_millis(400);

/// The application: one native API deployable, counting in Redis at `store`
/// or (without one) in its own memory.
fn app(store: Option<&str>) -> String {
    let store = match store {
        Some(url) => format!(
            "[connections.cache]\ndriver = \"redis\"\nurl = \"{url}\"\n\n[rate_limits]\nstore = \"cache\"\n"
        ),
        None => String::new(),
    };
    format!(
        "{store}\n[[deployables]]\nname = \"api\"\ntarget = \"native\"\nserves_api = true\n\
         client_address = \"cloudflare\"\n"
    )
}

/// The `i`-th distinct address, in the benchmarking range 198.18.0.0/15
/// (only ever written into a header or a key; nothing is sent there).
fn address_of(i: usize) -> String {
    let i = i % (1 << 17);
    format!("198.{}.{}.{}", 18 + (i >> 16), (i >> 8) & 255, i & 255)
}

/// The hot key of round `round`: one address every check of the run shares.
fn hot_address(round: usize) -> String {
    format!("192.0.2.{}", 1 + round % 250)
}

/// Which keys a run's checks use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keys {
    /// One address for every check: counted up to the limit, then refused.
    Hot,
    /// A new address for every check: every check is counted.
    Distinct,
}

impl Keys {
    const ALL: [Keys; 2] = [Keys::Hot, Keys::Distinct];

    fn name(self) -> &'static str {
        match self {
            Keys::Hot => "hot key",
            Keys::Distinct => "distinct keys",
        }
    }

    /// The address of check `i` in round `round` of `total` checks.
    fn address(self, round: usize, total: usize, i: usize) -> String {
        match self {
            Keys::Hot => hot_address(round),
            Keys::Distinct => address_of(round * total + i),
        }
    }
}

/// What one run of `total` checks over [`CONNECTIONS`] tasks gave.
#[derive(Debug, Clone)]
struct Run {
    elapsed: Duration,
    /// Each check's latency, in the order the checks started.
    latencies: Vec<(usize, Duration)>,
    passed: usize,
    /// CPU time of the measured process (the instance, or this one) during the run.
    cpu: Duration,
    /// CPU time of redis-server during the run.
    redis_cpu: Duration,
    /// EVALSHA calls redis-server counted during the run.
    evalsha: u64,
}

impl Run {
    fn checks(&self) -> usize {
        self.latencies.len()
    }

    fn per_second(&self) -> f64 {
        self.checks() as f64 / self.elapsed.as_secs_f64()
    }

    fn percentile_ms(&self, percent: u32) -> f64 {
        percentile_ms(self.latencies.iter().map(|(_, d)| *d).collect(), percent)
    }

    fn cpu_us(&self) -> f64 {
        self.cpu.as_secs_f64() * 1e6 / self.checks() as f64
    }

    fn redis_cpu_us(&self) -> f64 {
        self.redis_cpu.as_secs_f64() * 1e6 / self.checks() as f64
    }
}

/// The `percent`-th percentile ([`stats::percentile`]) of `latencies`, in ms.
fn percentile_ms(mut latencies: Vec<Duration>, percent: u32) -> f64 {
    latencies.sort();
    stats::percentile(&latencies, percent)
        .unwrap_or_default()
        .as_secs_f64()
        * 1e3
}

fn spread(values: &[f64]) -> String {
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!("**{:.3}** ({min:.3}-{max:.3})", median(values))
}

/// User + system CPU time of process `pid` so far (none when it is gone).
fn cpu_of(pid: u32) -> Duration {
    proc::stat(pid).map(|s| s.cpu()).unwrap_or_default()
}

type Check = Pin<Box<dyn Future<Output = bool> + Send>>;

/// EVALSHA calls `server` counted so far (none when it can't answer).
async fn evalsha_calls(server: Option<&RedisServer>) -> u64 {
    match server {
        Some(server) => server.command_calls("evalsha").await.unwrap_or(0),
        None => 0,
    }
}

/// Runs `total` checks `check(i)` (true when it passed) over [`CONNECTIONS`]
/// concurrent tasks, measuring process `pid` and redis-server (`server`:
/// `None` while it hangs, since it answers no `INFO` then).
async fn drive(
    total: usize,
    pid: u32,
    server: Option<&RedisServer>,
    check: Arc<dyn Fn(usize) -> Check + Send + Sync>,
) -> Run {
    let redis_pid = server.and_then(RedisServer::pid).unwrap_or(0);
    let evalsha = evalsha_calls(server).await;
    let (cpu, redis_cpu) = (cpu_of(pid), cpu_of(redis_pid));
    let next = Arc::new(AtomicUsize::new(0));
    let passed = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..CONNECTIONS {
        let (check, next, passed) = (check.clone(), next.clone(), passed.clone());
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= total {
                    break;
                }
                let t = Instant::now();
                if check(i).await {
                    passed.fetch_add(1, Ordering::Relaxed);
                }
                latencies.push((i, t.elapsed()));
            }
            latencies
        }));
    }
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await.expect("a check panicked"));
    }
    let elapsed = started.elapsed();
    latencies.sort_by_key(|(i, _)| *i);
    Run {
        elapsed,
        latencies,
        passed: passed.load(Ordering::Relaxed),
        cpu: cpu_of(pid).saturating_sub(cpu),
        redis_cpu: cpu_of(redis_pid).saturating_sub(redis_cpu),
        evalsha: evalsha_calls(server).await.saturating_sub(evalsha),
    }
}

/// An HTTP check: true when the answer is 200.
fn http_check(
    client: reqwest::Client,
    url: String,
    keys: Keys,
    round: usize,
    total: usize,
) -> Arc<dyn Fn(usize) -> Check + Send + Sync> {
    Arc::new(move |i| {
        let request = client
            .get(&url)
            .header("CF-Connecting-IP", keys.address(round, total, i));
        Box::pin(async move {
            let response = request.send().await.expect("the instance answers");
            let ok = response.status() == reqwest::StatusCode::OK;
            let _ = response.bytes().await;
            ok
        })
    })
}

/// Starts one native instance of `app` (`extra`: fixture arguments).
async fn instance(dir: &Path, name: &str, app: &str, extra: &[&str]) -> NativeProcess {
    let fixture =
        fixture_path().expect("native-fixture beside the bench (tools/bench-native builds it)");
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, app).expect("write the application");
    NativeProcess::start_with(&fixture, &path, "api", extra, Instant::now())
        .await
        .expect("the native instance starts")
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(CONNECTIONS)
        .build()
        .expect("client")
}

/// One native instance on loopback over HTTP: off / memory / Redis, rounds alternating.
async fn http(server: &RedisServer, total: usize, rounds: usize) {
    println!(
        "\n### One native instance on loopback, {CONNECTIONS} connections, {total} requests per target and round, {rounds} round(s)\n"
    );
    let dir = tempfile::tempdir().expect("dir");
    let targets = [
        (
            "off",
            instance(dir.path(), "off", &app(None), &["--limiting-off"]).await,
        ),
        (
            "memory",
            instance(dir.path(), "memory", &app(None), &[]).await,
        ),
        (
            "redis",
            instance(dir.path(), "redis", &app(Some(&server.url())), &[]).await,
        ),
    ];
    let client = client();
    // runs[keys][target][round]
    let mut runs: Vec<Vec<Vec<Run>>> = vec![vec![Vec::new(); targets.len()]; Keys::ALL.len()];
    for round in 0..rounds {
        for (k, keys) in Keys::ALL.into_iter().enumerate() {
            for (t, (_, process)) in targets.iter().enumerate() {
                let url = format!("{}/api/items", process.url());
                let check = http_check(client.clone(), url, keys, round, total);
                let pid = process.pid().unwrap_or(0);
                runs[k][t].push(drive(total, pid, Some(server), check).await);
            }
        }
    }
    println!(
        "| keys | limiting | req/s, median | / off, median (min-max) | p50, ms | p99, ms | added p50 / p99, ms | instance CPU per request, us | passed | EVALSHA per counted request | EVALSHA per refusal |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (k, keys) in Keys::ALL.into_iter().enumerate() {
        let off = &runs[k][0];
        for (t, (name, _)) in targets.iter().enumerate() {
            let these = &runs[k][t];
            let ratios: Vec<f64> = these
                .iter()
                .zip(off)
                .map(|(r, o)| r.per_second() / o.per_second())
                .collect();
            let p = |runs: &[Run], percent: u32| {
                median(
                    &runs
                        .iter()
                        .map(|r| r.percentile_ms(percent))
                        .collect::<Vec<_>>(),
                )
            };
            let (p50, p99) = (p(these, 50), p(these, 99));
            let passed: usize = these.iter().map(|r| r.passed).sum();
            let checks: usize = these.iter().map(Run::checks).sum();
            let evalsha: u64 = these.iter().map(|r| r.evalsha).sum();
            let (per_counted, per_refusal) = if *name == "redis" {
                round_trips(passed, checks, evalsha)
            } else {
                ("-".to_owned(), "-".to_owned())
            };
            println!(
                "| {} | {name} | {:.0} | {} | {p50:.3} | {p99:.3} | {:+.3} / {:+.3} | {:.1} | {passed} of {checks} | {per_counted} | {per_refusal} |",
                keys.name(),
                median(&these.iter().map(Run::per_second).collect::<Vec<_>>()),
                spread(&ratios),
                p50 - p(off, 50),
                p99 - p(off, 99),
                median(&these.iter().map(Run::cpu_us).collect::<Vec<_>>()),
            );
        }
    }
    for (_, process) in targets {
        process.stop().await;
    }
}

/// EVALSHA per counted (passed) request, taking one EVALSHA per passed
/// request, and the remaining EVALSHA per refusal: the refusals that went to
/// Redis (in flight together before the first refusal was cached).
fn round_trips(passed: usize, checks: usize, evalsha: u64) -> (String, String) {
    let per_counted = evalsha.min(passed as u64) as f64 / passed.max(1) as f64;
    let refusals = checks - passed;
    let refusal_trips = evalsha.saturating_sub(passed as u64);
    let per_refusal = if refusals == 0 {
        "-".to_owned()
    } else {
        format!(
            "{:.4} ({refusal_trips} of {refusals})",
            refusal_trips as f64 / refusals as f64
        )
    };
    (format!("{per_counted:.3} ({evalsha} EVALSHA)"), per_refusal)
}

/// A rate limiter under comparison, in process: one instance's view.
#[derive(Clone)]
enum Limiter {
    /// Ours: the whole native gate, counting in Redis.
    Ours(Arc<NativeGate>),
    /// limitador's `AsyncRateLimiter` on one of its Redis storages.
    #[cfg(feature = "limitador")]
    Limitador(Arc<limitador::AsyncRateLimiter>),
}

impl Limiter {
    /// Whether a check of `address` (or of `caller`, when given) passes.
    async fn check(&self, address: &str, caller: Option<&str>) -> bool {
        match self {
            Limiter::Ours(gate) => gate
                .decide(&Subject::of_request(caller, Some(address)), "/api/items")
                .await
                .is_ok(),
            #[cfg(feature = "limitador")]
            Limiter::Limitador(limiter) => peer::check(limiter, address, caller).await,
        }
    }
}

/// The limiters compared in process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Ours,
    #[cfg(feature = "limitador")]
    LimitadorExact,
    #[cfg(feature = "limitador")]
    LimitadorCached,
}

impl Kind {
    const ALL: &[Kind] = &[
        Kind::Ours,
        #[cfg(feature = "limitador")]
        Kind::LimitadorExact,
        #[cfg(feature = "limitador")]
        Kind::LimitadorCached,
    ];

    fn name(self) -> &'static str {
        match self {
            Kind::Ours => "ours: runtime::native, Redis",
            #[cfg(feature = "limitador")]
            Kind::LimitadorExact => "limitador 0.14 AsyncRedisStorage (exact)",
            #[cfg(feature = "limitador")]
            Kind::LimitadorCached => "limitador 0.14 CachedRedisStorage",
        }
    }

    /// Whether this store is known to hang on these keys, so it is not run:
    /// limitador's cached storage stopped answering during its run of
    /// distinct keys in each of two runs (2026-11-30: no CPU used, and the
    /// run's 60 s timeout never fired, so the runtime's threads were blocked).
    fn hangs_on(self, keys: Keys) -> bool {
        match (self, keys) {
            (Kind::Ours, _) => false,
            #[cfg(feature = "limitador")]
            (Kind::LimitadorExact, _) => false,
            #[cfg(feature = "limitador")]
            (Kind::LimitadorCached, keys) => keys == Keys::Distinct,
        }
    }

    /// A fresh instance (its own connection and caches) on `server`.
    async fn limiter(self, server: &RedisServer) -> Limiter {
        match self {
            Kind::Ours => Limiter::Ours(Arc::new(
                NativeGate::from_toml(&app(Some(&server.url())), "api").expect("gate"),
            )),
            #[cfg(feature = "limitador")]
            Kind::LimitadorExact => Limiter::Limitador(peer::exact(&server.url()).await),
            #[cfg(feature = "limitador")]
            Kind::LimitadorCached => Limiter::Limitador(peer::cached(&server.url()).await),
        }
    }
}

/// The same limits and keys in limitador: a namespace with the address
/// limit (120 per 60 s per `addr`) and the caller limit (600 per 60 s per
/// `caller`), each applying when its variable is given.
#[cfg(feature = "limitador")]
mod peer {
    use super::{ADDRESS_LIMIT, CALLER_LIMIT};
    use limitador::limit::{Context, Limit};
    use limitador::storage::AsyncStorage;
    use limitador::storage::redis::{AsyncRedisStorage, CachedRedisStorageBuilder};
    use limitador::{AsyncRateLimiter, AsyncRateLimiterBuilder};
    use std::collections::HashMap;
    use std::sync::Arc;

    const NAMESPACE: &str = "api";

    fn limiter(storage: AsyncStorage) -> Arc<AsyncRateLimiter> {
        let limiter = AsyncRateLimiterBuilder::new(storage).build();
        for (requests, variable) in [(ADDRESS_LIMIT, "addr"), (CALLER_LIMIT, "caller")] {
            let variable = variable.try_into().expect("a variable");
            limiter.add_limit(Limit::new(NAMESPACE, requests, 60, vec![], vec![variable]));
        }
        Arc::new(limiter)
    }

    /// Its exact storage: every check asks Redis.
    pub(super) async fn exact(url: &str) -> Arc<AsyncRateLimiter> {
        let storage = AsyncRedisStorage::new(url)
            .await
            .expect("limitador connects");
        limiter(AsyncStorage::with_counter_storage(Box::new(storage)))
    }

    /// Its cached storage with its defaults (flushed every second, in batches of 100).
    pub(super) async fn cached(url: &str) -> Arc<AsyncRateLimiter> {
        let storage = CachedRedisStorageBuilder::new(url)
            .build()
            .await
            .expect("limitador connects");
        limiter(AsyncStorage::with_counter_storage(Box::new(storage)))
    }

    pub(super) async fn check(
        limiter: &AsyncRateLimiter,
        address: &str,
        caller: Option<&str>,
    ) -> bool {
        let values = HashMap::from([match caller {
            Some(caller) => ("caller".to_owned(), caller.to_owned()),
            None => ("addr".to_owned(), address.to_owned()),
        }]);
        let context: Context = values.into();
        let result = limiter
            .check_rate_limited_and_update(&NAMESPACE.into(), &context, 1)
            .await
            .expect("limitador answers");
        !result.limited
    }
}

/// The Redis stores in process, side by side: ours and limitador's.
async fn stores(server: &RedisServer, total: usize, rounds: usize) {
    println!(
        "\n### In process, {CONNECTIONS} tasks, {total} checks per store and round, {rounds} round(s), limit {ADDRESS_LIMIT} per 60 s per address\n"
    );
    let pid = std::process::id();
    // runs[keys][kind][round]
    let mut runs: Vec<Vec<Vec<Run>>> = vec![vec![Vec::new(); Kind::ALL.len()]; Keys::ALL.len()];
    let mut hung = vec![vec![0_usize; Kind::ALL.len()]; Keys::ALL.len()];
    for round in 0..rounds {
        for (k, keys) in Keys::ALL.into_iter().enumerate() {
            for (s, kind) in Kind::ALL.iter().enumerate() {
                if kind.hangs_on(keys) {
                    hung[k][s] += 1;
                    continue;
                }
                server.command(&["FLUSHALL"]).await.expect("flush");
                let limiter = kind.limiter(server).await;
                let check: Arc<dyn Fn(usize) -> Check + Send + Sync> = Arc::new(move |i| {
                    let limiter = limiter.clone();
                    let address = keys.address(round, total, i);
                    Box::pin(async move { limiter.check(&address, None).await })
                });
                // limitador's cached storage hung here once (distinct keys): a run
                // that does not finish is reported as such, not waited for.
                match tokio::time::timeout(RUN_TIMEOUT, drive(total, pid, Some(server), check))
                    .await
                {
                    Ok(run) => runs[k][s].push(run),
                    Err(_) => hung[k][s] += 1,
                }
            }
        }
    }
    println!(
        "| keys | store | checks/s, median | / limitador exact, median (min-max) | p50, ms | p99, ms | CPU per check: bench process / redis-server, us | passed | EVALSHA per check |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|");
    for (k, keys) in Keys::ALL.into_iter().enumerate() {
        let exact = runs[k].get(1).unwrap_or(&runs[k][0]).clone();
        for (s, kind) in Kind::ALL.iter().enumerate() {
            let these = &runs[k][s];
            if hung[k][s] > 0 {
                println!(
                    "| {} | {} | not run, or did not finish within {RUN_TIMEOUT:?}, in {} of {rounds} round(s): it hangs (see `Kind::hangs_on`) | | | | | | |",
                    keys.name(),
                    kind.name(),
                    hung[k][s]
                );
            }
            if these.is_empty() {
                continue;
            }
            let ratios: Vec<f64> = these
                .iter()
                .zip(&exact)
                .map(|(r, e)| r.per_second() / e.per_second())
                .collect();
            let passed: usize = these.iter().map(|r| r.passed).sum();
            let checks: usize = these.iter().map(Run::checks).sum();
            let evalsha: u64 = these.iter().map(|r| r.evalsha).sum();
            println!(
                "| {} | {} | {:.0} | {} | {:.3} | {:.3} | {:.1} / {:.1} | {passed} of {checks} | {:.3} |",
                keys.name(),
                kind.name(),
                median(&these.iter().map(Run::per_second).collect::<Vec<_>>()),
                spread(&ratios),
                median(
                    &these
                        .iter()
                        .map(|r| r.percentile_ms(50))
                        .collect::<Vec<_>>()
                ),
                median(
                    &these
                        .iter()
                        .map(|r| r.percentile_ms(99))
                        .collect::<Vec<_>>()
                ),
                median(&these.iter().map(Run::cpu_us).collect::<Vec<_>>()),
                median(&these.iter().map(Run::redis_cpu_us).collect::<Vec<_>>()),
                evalsha as f64 / checks as f64,
            );
        }
    }
}

/// Waits until the running minute has at least `room` left, so a run on
/// minute-aligned windows stays in one window.
async fn wait_for_room(room: Duration) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let into_minute = Duration::from_millis((now.as_millis() % 60_000) as u64);
    if into_minute + room > Duration::from_secs(60) {
        tokio::time::sleep(Duration::from_secs(60) - into_minute).await;
    }
}

/// Three instances (each its own connection and caches) on one caller's key:
/// how many of 3000 checks got through a limit of 600.
async fn exactness(server: &RedisServer, rounds: usize) {
    println!(
        "\n### Exactness: 3 instances x {CONNECTIONS} tasks on one caller, limit {CALLER_LIMIT} per 60 s, {EXACTNESS_CHECKS} checks, {rounds} round(s)\n"
    );
    println!("| store | passed, each round | over the limit, worst round |");
    println!("|---|---|---:|");
    for kind in Kind::ALL {
        let mut passed = Vec::new();
        for _ in 0..rounds {
            server.command(&["FLUSHALL"]).await.expect("flush");
            let mut instances = Vec::new();
            for _ in 0..3 {
                instances.push(kind.limiter(server).await);
            }
            wait_for_room(Duration::from_secs(10)).await;
            let instances = Arc::new(instances);
            let check: Arc<dyn Fn(usize) -> Check + Send + Sync> = Arc::new(move |i| {
                let limiter = instances[i % 3].clone();
                Box::pin(async move { limiter.check("192.0.2.250", Some("hot-caller")).await })
            });
            let run = drive(EXACTNESS_CHECKS, std::process::id(), Some(server), check);
            match tokio::time::timeout(RUN_TIMEOUT, run).await {
                Ok(run) => passed.push(run.passed),
                Err(_) => println!(
                    "| {} | did not finish within {RUN_TIMEOUT:?} | |",
                    kind.name()
                ),
            }
        }
        let worst = passed.iter().max().copied().unwrap_or(0);
        println!(
            "| {} | {} | {} |",
            kind.name(),
            passed
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            worst.saturating_sub(CALLER_LIMIT as usize)
        );
    }
}

/// A hanging Redis (SIGSTOP) behind one instance over HTTP: which requests
/// waited for the deadline, and how fast the others were.
async fn hanging(requests: usize) {
    println!(
        "\n### Redis hanging (SIGSTOP), one instance over HTTP, {requests} requests of distinct addresses, {CONNECTIONS} connections\n"
    );
    let server = RedisServer::start().await.expect("redis-server");
    let dir = tempfile::tempdir().expect("dir");
    let process = instance(dir.path(), "hanging", &app(Some(&server.url())), &[]).await;
    let url = format!("{}/api/items", process.url());
    let client = client();
    // One answered request first: the connection is up when Redis hangs.
    let warm = client
        .get(&url)
        .header("CF-Connecting-IP", hot_address(249))
        .send()
        .await
        .expect("the instance answers");
    assert_eq!(
        warm.status(),
        reqwest::StatusCode::OK,
        "a healthy Redis lets the first request through"
    );
    server.hang();
    let check = http_check(client, url, Keys::Distinct, 7, requests);
    let run = drive(requests, process.pid().unwrap_or(0), None, check).await;
    server.resume();
    process.stop().await;
    let waited: Vec<f64> = run
        .latencies
        .iter()
        .filter(|(_, d)| *d >= WAITED)
        .map(|(_, d)| d.as_secs_f64() * 1e3)
        .collect();
    let others: Vec<Duration> = run
        .latencies
        .iter()
        .map(|(_, d)| *d)
        .filter(|d| *d < WAITED)
        .collect();
    let after_first: Vec<Duration> = run.latencies.iter().skip(1).map(|(_, d)| *d).collect();
    println!(
        "| answered 200 | p50 after the first, ms | waited (>= 400 ms) | their min-max, ms | the others: p99 / max, ms |"
    );
    println!("|---:|---:|---:|---:|---:|");
    println!(
        "| {} of {} | {:.3} | {} | {:.1}-{:.1} | {:.3} / {:.3} |",
        run.passed,
        run.checks(),
        percentile_ms(after_first, 50),
        waited.len(),
        waited.iter().copied().fold(f64::INFINITY, f64::min),
        waited.iter().copied().fold(0.0, f64::max),
        percentile_ms(others.clone(), 99),
        percentile_ms(others, 100),
    );
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let number = |name: &str, default: usize| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let rounds = number("BENCH_ROUNDS", if quick { 1 } else { 3 });
    let total = number("BENCH_REQUESTS", if quick { 2_000 } else { 20_000 });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    if cfg!(not(feature = "limitador")) {
        println!(
            "(built without the `limitador` feature: ours only; tools/bench-native builds it with limitador)"
        );
    }
    runtime.block_on(async {
        let server = RedisServer::start().await.expect("redis-server");
        http(&server, total, rounds).await;
        stores(&server, total, rounds).await;
        exactness(&server, rounds).await;
        hanging(if quick { 40 } else { 200 }).await;
    });
}
