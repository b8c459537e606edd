//! Native deployables counting in Redis, measured on one real redis-server:
//!
//! 1. **Over HTTP** (`http`): one native instance on loopback (the
//!    `native-fixture` process), 8 connections, limiting off / in memory / in
//!    Redis, a hot key and distinct keys: throughput, p50 and p99, the
//!    instance's CPU per request, and EVALSHA per counted request and per
//!    refusal from Redis's `INFO commandstats`. The instance believes the
//!    bench's `CF-Connecting-IP` from loopback (`cloudflare_via`), so each
//!    address is a client of its own, which the section checks first.
//! 2. **Beside Kuadrant's limitador** (`stores`, with the `limitador`
//!    feature): the Redis store in process through the whole native gate,
//!    against limitador 0.14's exact async Redis storage and its cached Redis
//!    storage, same server, same limit (120 per 60 s per address), same keys,
//!    8 tasks.
//! 3. **Redis over TLS** (`tls`): the same in-process comparison, ours and
//!    limitador's exact storage, each over a plain-text and over a TLS
//!    connection to one redis-server that listens on both (certificates made
//!    for the run by `harness::world::tls`). Both clients verify the server
//!    against the platform's roots, which they read from `SSL_CERT_FILE`
//!    (ours through rustls-native-certs, limitador's through native-tls's
//!    OpenSSL), so the bench runs this section in a child process of itself
//!    whose `SSL_CERT_FILE` is the run's authority ([`tls`]).
//! 4. **Exactness** (`exactness`): three instances on one key (600 per 60 s,
//!    3000 checks): how many got through, ours and limitador's.
//! 5. **A hanging Redis** (`hanging`, SIGSTOP) over HTTP: the requests that
//!    waited for the deadline, and the p50 of the others.
//! 6. **What the metrics cost** (`metrics`): the gate's checks per second
//!    built without runtime's `metrics` feature and built with it, a
//!    Prometheus recorder installed, side by side: two builds of
//!    `harness/bench-native/metrics-cost` (a package of its own: this bench
//!    links the harness, which turns the feature on), each run as a child
//!    per round, the two alternating. In memory on one thread (the cheapest
//!    decision, where recording weighs most) and in Redis over 8 tasks.
//!
//! Every comparison is a ratio of two figures from the same round; rounds
//! alternate the targets, and the median over rounds is reported.
//! `tools/bench-native [--quick] [SECTION...]` builds and runs it, every
//! section or the ones named (BENCHMARKS.md has the command, the figures and
//! the machine). Environment: `BENCH_ROUNDS` (default 3, `--quick` 1),
//! `BENCH_REQUESTS` (per target and round, default 20000, `--quick` 2000).

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use harness::judge::stats::{self, median};
use harness::world::native::{NativeProcess, fixture_path, trust_only};
use harness::world::proc;
use harness::world::process::{child_command, die_with_harness};
use harness::world::redis::RedisServer;
use harness::world::tls::TlsFiles;
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
/// The two sides of the `metrics` section: harness/bench-native/metrics-cost
/// built without runtime's `metrics` feature and with it (tools/bench-native
/// builds both and sets these).
const METRICS_WITHOUT_VAR: &str = "BENCH_METRICS_WITHOUT";
const METRICS_WITH_VAR: &str = "BENCH_METRICS_WITH";
/// Set in the environment of a side of the `metrics` section: the Redis
/// URL its runs count in.
const METRICS_CHILD_VAR: &str = "BENCH_METRICS_REDIS";

/// Set in the environment of the child that runs the `tls` section: the
/// directory of the certificates its parent made ([`TlsFiles::open`]).
const TLS_FILES_VAR: &str = "BENCH_NATIVE_TLS_FILES";
/// The addresses the HTTP section checks are counted apart, in
/// 203.0.113.0/24 (TEST-NET-3), which no run of the bench uses.
const APART: [&str; 2] = ["203.0.113.1", "203.0.113.2"];
/// The address of a fresh store's first check, which connects it before a
/// run is timed (also in TEST-NET-3).
const READY_ADDRESS: &str = "203.0.113.9";

/// The application: one native API deployable, counting in Redis at `store`
/// or (without one) in its own memory. Its instances believe
/// `CF-Connecting-IP` from loopback, where the bench's client is, as behind
/// a Cloudflare Tunnel (`"cloudflare"` alone would believe it only from
/// Cloudflare's ranges, and count every request under 127.0.0.1).
fn app(store: Option<&str>) -> String {
    let store = match store {
        Some(url) => format!(
            "name = \"shop\"\n[connections.cache]\ndriver = \"redis\"\nurl = \"{url}\"\n\n[rate_limits]\nstore = \"cache\"\n"
        ),
        None => String::new(),
    };
    format!(
        "{store}\n[[deployables]]\nname = \"api\"\ntarget = \"native\"\nserves_api = true\n\
         client_address = {{ cloudflare_via = [\"127.0.0.1\"] }}\n"
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
    for (name, process) in &targets[1..] {
        addresses_apart(&client, &format!("{}/api/items", process.url()), name).await;
    }
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
        drop(process.stop().await);
    }
}

/// Checks that the instance at `url` (limiting on) counts the bench's
/// addresses apart: [`ADDRESS_LIMIT`] requests of one address pass and the
/// next is refused, while another address still passes. Were the header not
/// believed, both would be 127.0.0.1 and "distinct keys" one key.
async fn addresses_apart(client: &reqwest::Client, url: &str, target: &str) {
    let status = |address: &'static str| async move {
        client
            .get(url)
            .header("CF-Connecting-IP", address)
            .send()
            .await
            .expect("the instance answers")
            .status()
    };
    // The limit's window is a minute: its end between the requests below
    // would let the refused one through.
    wait_for_room(Duration::from_secs(10)).await;
    for _ in 0..ADDRESS_LIMIT {
        assert_eq!(status(APART[0]).await, reqwest::StatusCode::OK, "{target}");
    }
    assert_eq!(
        status(APART[0]).await,
        reqwest::StatusCode::TOO_MANY_REQUESTS,
        "{target}: an address past its limit was let through"
    );
    assert_eq!(
        status(APART[1]).await,
        reqwest::StatusCode::OK,
        "{target}: a second address was refused with the first, so the instance counts every request under one address (is CF-Connecting-IP believed from loopback?)"
    );
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
                .decide(
                    &Subject::of_request(caller, Some(address)),
                    "GET",
                    "/api/items",
                )
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

    /// A fresh instance (its own connection and caches) on the Redis at `url`.
    async fn limiter(self, url: &str) -> Limiter {
        match self {
            Kind::Ours => Limiter::Ours(Arc::new(
                NativeGate::from_toml(&app(Some(url)), "api").expect("gate"),
            )),
            #[cfg(feature = "limitador")]
            Kind::LimitadorExact => Limiter::Limitador(peer::exact(url).await),
            #[cfg(feature = "limitador")]
            Kind::LimitadorCached => Limiter::Limitador(peer::cached(url).await),
        }
    }
}

/// One run of `total` checks of `keys` in round `round` on a fresh `kind`
/// connected to `url`, the server flushed first, and how long the store took
/// to be ready; none when the run did not finish within [`RUN_TIMEOUT`]
/// (limitador's cached storage hung once, on distinct keys: such a run is
/// reported, not waited for).
///
/// limitador's storages connect when they are made, ours on its first
/// request, so each store is made and asked once ([`READY_ADDRESS`]) before
/// the run is timed: the run measures checks on a connection that is up, on
/// either side (a TLS handshake included in neither), and the time to be
/// ready is given apart.
async fn store_run(
    server: &RedisServer,
    url: &str,
    kind: Kind,
    keys: Keys,
    round: usize,
    total: usize,
) -> Option<(Duration, Run)> {
    server.command(&["FLUSHALL"]).await.expect("flush");
    let started = Instant::now();
    let limiter = kind.limiter(url).await;
    limiter.check(READY_ADDRESS, None).await;
    let ready = started.elapsed();
    let check: Arc<dyn Fn(usize) -> Check + Send + Sync> = Arc::new(move |i| {
        let limiter = limiter.clone();
        let address = keys.address(round, total, i);
        Box::pin(async move { limiter.check(&address, None).await })
    });
    let run = tokio::time::timeout(
        RUN_TIMEOUT,
        drive(total, std::process::id(), Some(server), check),
    )
    .await
    .ok()?;
    // Ours falls back to its memory when Redis cannot be reached (a
    // certificate that does not verify, for one), silently to a bench: every
    // check it let through must have asked Redis.
    if kind == Kind::Ours {
        assert!(
            run.evalsha >= run.passed as u64,
            "ours let {} checks through on {} EVALSHA at {url}: it counted in memory",
            run.passed,
            run.evalsha
        );
    }
    Some((ready, run))
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
                match store_run(server, &server.url(), *kind, keys, round, total).await {
                    Some((_, run)) => runs[k][s].push(run),
                    None => hung[k][s] += 1,
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

/// How a store reaches Redis in the `tls` section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Connection {
    /// `redis://127.0.0.1:PORT`.
    Plain,
    /// `rediss://localhost:PORT`, the server verified against the run's authority.
    Tls,
}

impl Connection {
    const ALL: [Connection; 2] = [Connection::Plain, Connection::Tls];

    fn name(self) -> &'static str {
        match self {
            Connection::Plain => "plain text",
            Connection::Tls => "TLS",
        }
    }

    /// The URL of `server` on this connection.
    fn url(self, server: &RedisServer) -> String {
        match self {
            Connection::Plain => server.url(),
            Connection::Tls => server.tls_url().expect("the server speaks TLS"),
        }
    }
}

/// The stores the `tls` section runs over both connections: ours and
/// limitador's exact storage (its cached one hangs on distinct keys,
/// [`Kind::hangs_on`], and asks Redis about a hot key only when it flushes).
const TLS_KINDS: &[Kind] = &[
    Kind::Ours,
    #[cfg(feature = "limitador")]
    Kind::LimitadorExact,
];

/// A store on a connection, a target of the `tls` section.
type TlsTarget = (Kind, Connection);

/// The ratios the `tls` section reports, each per round: a label, the target
/// divided and the one it is divided by. Of checks/s, above 1 is the first
/// faster; of p50 and p99, above 1 is the first slower.
const TLS_RATIOS: &[(&str, TlsTarget, TlsTarget)] = &[
    (
        "ours over TLS / ours in plain text",
        (Kind::Ours, Connection::Tls),
        (Kind::Ours, Connection::Plain),
    ),
    #[cfg(feature = "limitador")]
    (
        "ours / limitador exact, both over TLS",
        (Kind::Ours, Connection::Tls),
        (Kind::LimitadorExact, Connection::Tls),
    ),
    #[cfg(feature = "limitador")]
    (
        "limitador exact over TLS / in plain text",
        (Kind::LimitadorExact, Connection::Tls),
        (Kind::LimitadorExact, Connection::Plain),
    ),
    #[cfg(feature = "limitador")]
    (
        "ours / limitador exact, both in plain text",
        (Kind::Ours, Connection::Plain),
        (Kind::LimitadorExact, Connection::Plain),
    ),
];

/// The `tls` section: the run's certificates made here, then this bench run
/// again as a child process ([`tls_rounds`]), [`TLS_FILES_VAR`] naming
/// their directory and `SSL_CERT_FILE` their authority, so that both
/// clients in it verify the run's server; its tables go to this process's
/// stdout. (This process's own `SSL_CERT_FILE`, if any, is the system's
/// bundle, which does not verify it; and changing the environment of a
/// process whose threads run is unsound.)
async fn tls(total: usize, rounds: usize) {
    let files = TlsFiles::make().expect("the run's certificates");
    let bench = std::env::current_exe().expect("the bench's own path");
    let mut child = tokio::process::Command::from(child_command(bench));
    trust_only(&mut child, &files.ca());
    child
        .env(TLS_FILES_VAR, files.dir())
        .env("BENCH_ROUNDS", rounds.to_string())
        .env("BENCH_REQUESTS", total.to_string())
        .stdin(Stdio::null());
    die_with_harness(&mut child);
    let status = child
        .status()
        .await
        .expect("the tls section's child starts");
    assert!(
        status.success(),
        "the tls section's child failed ({status})"
    );
}

/// The `tls` section's rounds, in the child [`tls`] starts: one redis-server
/// listening in plain text and over TLS (the certificates in `dir`), and
/// every store of [`TLS_KINDS`] on each connection in turn, in process, as
/// [`stores`] runs them.
async fn tls_rounds(dir: &Path, total: usize, rounds: usize) {
    let files = TlsFiles::open(dir).expect("the parent's certificates");
    let server = RedisServer::start_tls(Arc::new(files))
        .await
        .expect("redis-server with a TLS port");
    println!(
        "\n### Redis over TLS beside plain text: in process, {CONNECTIONS} tasks, {total} checks per store and round, {rounds} round(s), limit {ADDRESS_LIMIT} per 60 s per address, one redis-server on both ports\n"
    );
    let targets: Vec<TlsTarget> = TLS_KINDS
        .iter()
        .flat_map(|&kind| Connection::ALL.map(|connection| (kind, connection)))
        .collect();
    let mut measured = TlsRuns {
        runs: vec![vec![Vec::new(); targets.len()]; Keys::ALL.len()],
        ready: vec![vec![Vec::new(); targets.len()]; Keys::ALL.len()],
        targets,
    };
    for round in 0..rounds {
        for (k, keys) in Keys::ALL.into_iter().enumerate() {
            for (t, (kind, connection)) in measured.targets.iter().enumerate() {
                let url = connection.url(&server);
                let run = store_run(&server, &url, *kind, keys, round, total).await;
                if let Some((took, _)) = &run {
                    measured.ready[k][t].push(took.as_secs_f64() * 1e3);
                }
                measured.runs[k][t].push(run.map(|(_, run)| run));
            }
        }
    }
    measured.table(rounds);
    measured.ratios();
}

/// What the `tls` section measured.
struct TlsRuns {
    /// Its targets, in the order of the indices below.
    targets: Vec<TlsTarget>,
    /// `runs[keys][target][round]`, none for a run that did not finish.
    runs: Vec<Vec<Vec<Option<Run>>>>,
    /// `ready[keys][target]`: how long each finished run's store took to be
    /// ready, ms.
    ready: Vec<Vec<Vec<f64>>>,
}

impl TlsRuns {
    /// Each target's figures, the median over its rounds.
    fn table(&self, rounds: usize) {
        let (targets, runs, ready) = (&self.targets, &self.runs, &self.ready);
        println!(
            "| keys | store | connection | checks/s, median | p50, ms | p99, ms | CPU per check: bench process / redis-server, us | passed | EVALSHA per check | ready (made, connected, one check), ms, median |"
        );
        println!("|---|---|---|---:|---:|---:|---:|---:|---:|---:|");
        for (k, keys) in Keys::ALL.into_iter().enumerate() {
            for (t, (kind, connection)) in targets.iter().enumerate() {
                let these: Vec<&Run> = runs[k][t].iter().flatten().collect();
                let unfinished = rounds - these.len();
                if unfinished > 0 {
                    println!(
                        "| {} | {} | {} | did not finish within {RUN_TIMEOUT:?} in {unfinished} of {rounds} round(s) | | | | | | |",
                        keys.name(),
                        kind.name(),
                        connection.name()
                    );
                }
                if these.is_empty() {
                    continue;
                }
                let of = |figure: fn(&Run) -> f64| {
                    median(&these.iter().map(|r| figure(r)).collect::<Vec<_>>())
                };
                let passed: usize = these.iter().map(|r| r.passed).sum();
                let checks: usize = these.iter().map(|r| r.checks()).sum();
                let evalsha: u64 = these.iter().map(|r| r.evalsha).sum();
                println!(
                    "| {} | {} | {} | {:.0} | {:.3} | {:.3} | {:.1} / {:.1} | {passed} of {checks} | {:.3} | {:.1} |",
                    keys.name(),
                    kind.name(),
                    connection.name(),
                    of(Run::per_second),
                    of(|r| r.percentile_ms(50)),
                    of(|r| r.percentile_ms(99)),
                    of(Run::cpu_us),
                    of(Run::redis_cpu_us),
                    evalsha as f64 / checks as f64,
                    median(&ready[k][t]),
                );
            }
        }
    }

    /// The ratios of [`TLS_RATIOS`], each the median of its per-round ratios.
    fn ratios(&self) {
        let (targets, runs) = (&self.targets, &self.runs);
        println!("\n| keys | ratio | checks/s, median (min-max) | p50, median | p99, median |");
        println!("|---|---|---:|---:|---:|");
        let index = |target: TlsTarget| {
            targets
                .iter()
                .position(|t| *t == target)
                .expect("a target of the section")
        };
        for (k, keys) in Keys::ALL.into_iter().enumerate() {
            for (label, over, under) in TLS_RATIOS {
                let pairs: Vec<(&Run, &Run)> = runs[k][index(*over)]
                    .iter()
                    .zip(&runs[k][index(*under)])
                    .filter_map(|(o, u)| o.as_ref().zip(u.as_ref()))
                    .collect();
                if pairs.is_empty() {
                    println!("| {} | {label} | no round finished both | | |", keys.name());
                    continue;
                }
                let ratio = |figure: fn(&Run) -> f64| {
                    pairs
                        .iter()
                        .map(|(o, u)| figure(o) / figure(u))
                        .collect::<Vec<_>>()
                };
                println!(
                    "| {} | {label} | {} | {:.3} | {:.3} |",
                    keys.name(),
                    spread(&ratio(Run::per_second)),
                    median(&ratio(|r| r.percentile_ms(50))),
                    median(&ratio(|r| r.percentile_ms(99))),
                );
            }
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
                instances.push(kind.limiter(&server.url()).await);
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
    drop(process.stop().await);
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

/// The bench's sections, which `tools/bench-native SECTION...` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Section {
    /// One native instance over HTTP: off, memory, Redis.
    Http,
    /// In process, ours beside limitador.
    Stores,
    /// In process over TLS beside plain text, ours and limitador's exact.
    Tls,
    /// Three instances on one key.
    Exactness,
    /// A hanging Redis behind one instance over HTTP.
    Hanging,
    /// The gate without the `metrics` feature beside it with a recorder.
    Metrics,
}

impl Section {
    /// Every section, in the order a run takes them.
    const ALL: [Section; 6] = [
        Section::Http,
        Section::Stores,
        Section::Tls,
        Section::Exactness,
        Section::Hanging,
        Section::Metrics,
    ];

    fn name(self) -> &'static str {
        match self {
            Section::Http => "http",
            Section::Stores => "stores",
            Section::Tls => "tls",
            Section::Exactness => "exactness",
            Section::Hanging => "hanging",
            Section::Metrics => "metrics",
        }
    }

    /// The sections `args` name (those not starting with `-`), in the order
    /// of [`Section::ALL`], or every one when none is named; `Err` with the
    /// first name that is no section.
    fn named(args: &[String]) -> Result<Vec<Section>, String> {
        let names: Vec<&str> = args
            .iter()
            .map(String::as_str)
            .filter(|a| !a.starts_with('-'))
            .collect();
        if let Some(unknown) = names
            .iter()
            .find(|name| !Self::ALL.iter().any(|s| s.name() == **name))
        {
            return Err((*unknown).to_owned());
        }
        Ok(Self::ALL
            .into_iter()
            .filter(|s| names.is_empty() || names.contains(&s.name()))
            .collect())
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let sections = Section::named(&args).unwrap_or_else(|unknown| {
        let all: Vec<&str> = Section::ALL.iter().map(|s| s.name()).collect();
        eprintln!(
            "bench-native: no section {unknown:?}; the sections: {}",
            all.join(", ")
        );
        std::process::exit(2)
    });
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
    if let Some(dir) = std::env::var_os(TLS_FILES_VAR) {
        runtime.block_on(tls_rounds(Path::new(&dir), total, rounds));
        return;
    }
    if cfg!(not(feature = "limitador")) {
        println!(
            "(built without the `limitador` feature: ours only; tools/bench-native builds it with limitador)"
        );
    }
    runtime.block_on(async {
        let server = RedisServer::start().await.expect("redis-server");
        for section in sections {
            match section {
                Section::Http => http(&server, total, rounds).await,
                Section::Stores => stores(&server, total, rounds).await,
                Section::Tls => tls(total, rounds).await,
                Section::Exactness => exactness(&server, rounds).await,
                Section::Hanging => hanging(if quick { 40 } else { 200 }).await,
                Section::Metrics => metrics_cost::section(&server, total, rounds).await,
            }
        }
    });
}

/// The `metrics` section: what recording the gate's metrics costs.
mod metrics_cost {
    use super::{
        METRICS_CHILD_VAR, METRICS_WITH_VAR, METRICS_WITHOUT_VAR, RedisServer, median, spread,
    };
    use harness::world::process::{child_command, die_with_harness};
    use std::path::{Path, PathBuf};

    /// What a side measures, by line: `NAME CHECKS_PER_SECOND`
    /// (`harness/bench-native/metrics-cost`'s `RUNS`), and how the table names it.
    const RUNS: [(&str, &str); 3] = [
        (
            "memory-distinct",
            "in memory, one thread, a new address per check",
        ),
        (
            "memory-hot",
            "in memory, one thread, one address (refused after 120)",
        ),
        (
            "redis-distinct",
            "in Redis, 8 tasks, a new address per check",
        ),
    ];

    /// One side's figures, by [`RUNS`].
    async fn run_side(exe: &Path, server: &RedisServer, total: usize) -> Vec<f64> {
        server.command(&["FLUSHALL"]).await.expect("flush");
        let mut command = tokio::process::Command::from(child_command(exe));
        command
            .env(METRICS_CHILD_VAR, server.url())
            .env("BENCH_REQUESTS", total.to_string())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped());
        die_with_harness(&mut command);
        let output = command.output().await.expect("the side runs");
        assert!(
            output.status.success(),
            "{} failed: {}",
            exe.display(),
            output.status
        );
        let text = String::from_utf8_lossy(&output.stdout);
        RUNS.iter()
            .map(|(name, _)| {
                text.lines()
                    .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
                    .unwrap_or_else(|| panic!("{}: no {name} in {text}", exe.display()))
            })
            .collect()
    }

    pub(super) async fn section(server: &RedisServer, total: usize, rounds: usize) {
        let side = |var: &str| std::env::var_os(var).map(PathBuf::from);
        let (Some(without), Some(with)) = (side(METRICS_WITHOUT_VAR), side(METRICS_WITH_VAR))
        else {
            println!(
                "\n### What the metrics cost: not run (tools/bench-native builds harness/bench-native/metrics-cost both ways and sets {METRICS_WITHOUT_VAR} and {METRICS_WITH_VAR})\n"
            );
            return;
        };
        println!(
            "\n### What the metrics cost: the gate built without runtime's `metrics` feature, and with it and a Prometheus recorder installed (harness/bench-native/metrics-cost, built both ways), {total} checks per run, {rounds} round(s) alternating the builds\n"
        );
        let (mut off, mut on) = (Vec::new(), Vec::new());
        for round in 0..rounds {
            // Alternating which build goes first, so neither always meets the warmer machine.
            if round % 2 == 0 {
                off.push(run_side(&without, server, total).await);
                on.push(run_side(&with, server, total).await);
            } else {
                on.push(run_side(&with, server, total).await);
                off.push(run_side(&without, server, total).await);
            }
        }
        println!(
            "| run | without the feature, checks/s, median | with the recorder, checks/s, median | with ÷ without, median (min-max) |"
        );
        println!("|---|---:|---:|---:|");
        for (r, (_, name)) in RUNS.iter().enumerate() {
            let without: Vec<f64> = off.iter().map(|f| f[r]).collect();
            let with: Vec<f64> = on.iter().map(|f| f[r]).collect();
            let ratios: Vec<f64> = with.iter().zip(&without).map(|(w, o)| w / o).collect();
            println!(
                "| {name} | {:.0} | {:.0} | {} |",
                median(&without),
                median(&with),
                spread(&ratios)
            );
        }
    }
}
