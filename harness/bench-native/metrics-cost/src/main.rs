//! One side of bench-native's `metrics` section: the native gate's checks
//! per second, built without runtime's `metrics` feature, or with it and
//! Prometheus's recorder installed. `tools/bench-native` builds this package
//! both ways and `harness/bench-native/benches/native.rs` runs the two
//! executables in alternating rounds.
//!
//! It is a package of its own because cargo unifies a crate's features
//! within one build: bench-native's bench links the harness, which turns
//! runtime's `metrics` on, so a side built there would record either way.
//!
//! Reads the Redis URL to count in from `BENCH_METRICS_REDIS` and the checks
//! per run from `BENCH_REQUESTS`; prints one line per run,
//! `NAME CHECKS_PER_SECOND`, in the order of [`RUNS`]. With the recorder it
//! fails unless every decision was recorded.

use runtime::Subject;
use runtime::native::NativeGate;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

/// The runs, in the order they are made and printed (the two in memory of
/// [`PASSES`] passes each, the one in Redis of one).
const RUNS: [&str; 3] = ["memory-distinct", "memory-hot", "redis-distinct"];
/// The concurrent tasks of the run in Redis (bench-native's `CONNECTIONS`).
const TASKS: usize = 8;
/// The path every check is for: the deployable serves its API there.
const PATH: &str = "/api/items";
/// The address of the check that warms a gate up before its clock starts.
const WARM_UP_ADDRESS: &str = "192.0.2.254";
/// Passes of an in-memory run, each with a new gate, of which the median is
/// the run's figure: a pass takes some 30 ms, where one preemption shows.
const PASSES: usize = 9;

/// The application: one deployable behind Cloudflare, counting in the
/// process's memory or, given its URL, in Redis.
fn application(redis: Option<&str>) -> String {
    let mut text = String::new();
    if let Some(url) = redis {
        text.push_str(&format!(
            "name = \"shop\"\n[connections.cache]\ndriver = \"redis\"\nurl = \"{url}\"\n"
        ));
        text.push_str("[rate_limits]\nstore = \"cache\"\n");
    }
    text.push_str("[[deployables]]\nname = \"api\"\ntarget = \"native\"\nserves_api = true\n");
    text.push_str("client_address = { cloudflare_via = [\"127.0.0.1\"] }\n");
    text
}

/// The `i`-th of the run's distinct addresses, in the benchmarking range
/// 198.18.0.0/15 (`first` apart for each run, so no run meets another's
/// keys in Redis).
fn distinct(first: usize, i: usize) -> String {
    let i = (first + i) % (1 << 17);
    format!("198.{}.{}.{}", 18 + (i >> 16), (i >> 8) & 255, i & 255)
}

fn gate(redis: Option<&str>) -> Result<NativeGate, String> {
    NativeGate::from_toml(&application(redis), "api").map_err(|e| e.to_string())
}

/// Checks per second of a gate counting in memory: `total` checks in a row
/// on this thread, the subjects made before the clock starts; the median
/// of [`PASSES`] passes, each with a new gate (so each address is new to it).
async fn in_memory(hot: bool, total: usize) -> Result<f64, String> {
    let subjects: Vec<Subject> = (0..total)
        .map(|i| {
            let address = if hot {
                "192.0.2.1".to_owned()
            } else {
                distinct(0, i)
            };
            Subject::of_request(None, Some(&address))
        })
        .collect();
    let mut passes = Vec::with_capacity(PASSES);
    for _ in 0..PASSES {
        let gate = gate(None)?;
        let _ = gate
            .decide(
                &Subject::of_request(None, Some(WARM_UP_ADDRESS)),
                "GET",
                PATH,
            )
            .await;
        let started = Instant::now();
        for subject in &subjects {
            let _ = std::hint::black_box(gate.decide(subject, "GET", PATH).await);
        }
        passes.push(total as f64 / started.elapsed().as_secs_f64());
    }
    passes.sort_by(f64::total_cmp);
    Ok(passes[PASSES / 2])
}

/// Checks per second of one gate counting in the Redis at `url`: `total`
/// distinct addresses over [`TASKS`] tasks, every one of which must pass.
async fn in_redis(url: &str, total: usize) -> Result<f64, String> {
    let gate = Arc::new(gate(Some(url))?);
    let _ = gate
        .decide(
            &Subject::of_request(None, Some(WARM_UP_ADDRESS)),
            "GET",
            PATH,
        )
        .await;
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let (gate, next) = (gate.clone(), next.clone());
            tokio::spawn(async move {
                let mut passed = 0;
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= total {
                        return passed;
                    }
                    let subject = Subject::of_request(None, Some(&distinct(total, i)));
                    passed += usize::from(gate.decide(&subject, "GET", PATH).await.is_ok());
                }
            })
        })
        .collect();
    let mut passed = 0;
    for task in tasks {
        passed += task.await.map_err(|e| e.to_string())?;
    }
    let per_second = total as f64 / started.elapsed().as_secs_f64();
    if passed != total {
        return Err(format!(
            "{passed} of {total} distinct addresses passed in Redis"
        ));
    }
    Ok(per_second)
}

async fn run(url: &str, total: usize) -> Result<(), String> {
    #[cfg(feature = "metrics")]
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new()
        .install_recorder()
        .map_err(|e| e.to_string())?;
    for name in RUNS {
        let per_second = match name {
            "memory-distinct" => in_memory(false, total).await?,
            "memory-hot" => in_memory(true, total).await?,
            _ => in_redis(url, total).await?,
        };
        println!("{name} {per_second}");
    }
    // Each pass decided its warm-up and `total` checks, one check each.
    #[cfg(feature = "metrics")]
    {
        let decided = (2 * PASSES + 1) * (total + 1);
        let text = recorder.render();
        let recorded: f64 = text
            .lines()
            .filter(|l| l.starts_with("rate_limits_decisions_total{"))
            .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
            .sum();
        if recorded as usize != decided {
            return Err(format!(
                "{recorded} decisions recorded of {decided}:\n{text}"
            ));
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let Ok(url) = std::env::var("BENCH_METRICS_REDIS") else {
        eprintln!(
            "metrics-cost: set BENCH_METRICS_REDIS to a Redis URL (bench-native's `metrics` section runs this)"
        );
        return ExitCode::from(2);
    };
    let total = std::env::var("BENCH_REQUESTS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(20_000);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("metrics-cost: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(&url, total)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("metrics-cost: {e}");
            ExitCode::FAILURE
        }
    }
}
