//! The native Redis gate beside the Redis work it cannot avoid (issue 44's
//! floor): what the gate's own work costs a round trip's throughput.
//!
//! Run: `cargo bench -p harness --bench redis_floor` (`BENCH_REDIS_ROUNDS`,
//! default 15; `BENCH_REDIS_REQUESTS`, each side's requests a round, default
//! 50000; `BENCH_REDIS_TASKS`, requests in flight, default 8).
//!
//! One `redis-server` (the harness's), one tokio thread, `BENCH_REDIS_TASKS`
//! tasks each sending its requests one after another, each request from the
//! next of the task's own 65,536 addresses (so none is refused):
//!
//! - **gate**: `NativeGate::decide` of a native deployable counting in
//!   Redis (`GET /api/items`, which meets no route: one check, the
//!   address's), its connection made before the first round;
//! - **bare**: the same script call with no gate around it: one EVALSHA of
//!   `COUNT_ALL` with the one key and arguments the gate sends for that
//!   check (its key built per request, as the gate builds it), on a
//!   `ConnectionManager` as the gate's store holds one.
//!
//! Rounds alternate which side goes first; each round's ratio is the gate's
//! requests per second ÷ the bare side's, and the table gives the median.
//! Beside it, the CPU time the one tokio thread spent per request on each
//! side (`/proc/thread-self/schedstat`): the gate's own work and the
//! client's, without Redis's, so what the gate adds to a round trip is
//! measured, not guessed, also when other processes share the machine.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Instant;

use harness::world::redis::RedisServer;
use runtime::native::NativeGate;
use runtime::unstable_for_tools::keys;
use runtime::unstable_for_tools::limits::ADDRESS_LIMIT;
use runtime::unstable_for_tools::redis::COUNT_ALL;
use runtime::{ClientAddress, Subject};

type Error = Box<dyn std::error::Error + Send + Sync>;

const APPLICATION: &str = "floor";
const PATH: &str = "/api/items";

fn knob(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn app(url: &str) -> String {
    format!(
        "name = \"{APPLICATION}\"\n[connections.cache]\ndriver = \"redis\"\nurl = \"{url}\"\n\
         [rate_limits]\nstore = \"cache\"\n\
         [[deployables]]\nname = \"api\"\ntarget = \"native\"\nserves_api = true\n"
    )
}

/// The `i`th address of `task`'s own, of 65,536 (distinct across tasks and sides).
fn address(side: u8, task: usize, i: usize) -> IpAddr {
    let task = u8::try_from(task % 256).unwrap_or(0);
    let i = u16::try_from(i % 65_536).unwrap_or(0).to_be_bytes();
    IpAddr::V4(Ipv4Addr::new(side, task, i[0], i[1]))
}

/// Nanoseconds this thread has run on a CPU (`/proc/thread-self/schedstat`):
/// the one tokio thread's work, the gate's and the client's, not Redis's.
fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// One side's round: requests per second, and this thread's CPU µs per request.
struct Side {
    rate: f64,
    cpu_us: f64,
}

fn median(values: &[f64]) -> f64 {
    let mut values = values.to_vec();
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn range(values: &[f64]) -> (f64, f64) {
    (
        values.iter().copied().fold(f64::MAX, f64::min),
        values.iter().copied().fold(0.0, f64::max),
    )
}

/// Requests per second of `requests` gate decisions over `tasks` tasks.
async fn gate_side(
    gate: &NativeGate,
    tasks: usize,
    requests: usize,
    round: usize,
) -> Result<Side, Error> {
    let (start, cpu) = (Instant::now(), thread_cpu_ns());
    let each = requests / tasks;
    let runs = (0..tasks).map(|task| async move {
        let mut refused = 0usize;
        for i in 0..each {
            let ip = address(1, task, round * each + i);
            let subject = Subject::Address(ClientAddress::of_ip(ip));
            if gate.decide(&subject, "GET", PATH).await.is_err() {
                refused += 1;
            }
        }
        refused
    });
    let refused: usize = futures::future::join_all(runs).await.into_iter().sum();
    if refused > 0 {
        return Err(
            format!("the gate refused {refused} requests: the load is not all within").into(),
        );
    }
    Ok(side(start, cpu, each * tasks))
}

fn side(start: Instant, cpu_ns: u64, requests: usize) -> Side {
    Side {
        rate: requests as f64 / start.elapsed().as_secs_f64(),
        cpu_us: (thread_cpu_ns() - cpu_ns) as f64 / 1e3 / requests as f64,
    }
}

/// Requests per second of `requests` bare script calls over `tasks` tasks.
async fn bare_side(
    manager: &redis::aio::ConnectionManager,
    sha: &str,
    tasks: usize,
    requests: usize,
    round: usize,
) -> Result<Side, Error> {
    let (start, cpu) = (Instant::now(), thread_cpu_ns());
    let each = requests / tasks;
    let window_ms = u64::from(ADDRESS_LIMIT.window_seconds) * 1000;
    let runs = (0..tasks).map(|task| async move {
        let mut within = 0usize;
        for i in 0..each {
            let ip = address(2, task, round * each + i);
            let subject_key = keys::subject(&Subject::Address(ClientAddress::of_ip(ip)));
            let key = keys::redis_key(
                APPLICATION,
                &keys::redis_tag(&subject_key),
                ADDRESS_LIMIT,
                &subject_key,
            );
            let reply: Vec<i64> = redis::cmd("EVALSHA")
                .arg(sha)
                .arg(1)
                .arg(&key)
                .arg(0)
                .arg(ADDRESS_LIMIT.requests)
                .arg(window_ms)
                .query_async(&mut manager.clone())
                .await?;
            within += usize::from(reply.first() == Some(&1));
        }
        Ok::<usize, redis::RedisError>(within)
    });
    let mut within = 0;
    for run in futures::future::join_all(runs).await {
        within += run?;
    }
    if within != each * tasks {
        return Err(format!("{} of the bare calls were refused", each * tasks - within).into());
    }
    Ok(side(start, cpu, each * tasks))
}

async fn run() -> Result<(), Error> {
    let rounds = knob("BENCH_REDIS_ROUNDS", 15);
    let requests = knob("BENCH_REDIS_REQUESTS", 50_000);
    let tasks = knob("BENCH_REDIS_TASKS", 8).max(1);
    let server = RedisServer::start().await?;
    let gate = NativeGate::from_toml(&app(&server.url()), "api")?;
    gate.connect().await?;
    let client = redis::Client::open(server.url())?;
    let manager = redis::aio::ConnectionManager::new(client).await?;
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(COUNT_ALL)
        .query_async(&mut manager.clone())
        .await?;
    // A warm-up of each side, not counted.
    gate_side(&gate, tasks, requests / 10, rounds).await?;
    bare_side(&manager, &sha, tasks, requests / 10, rounds).await?;
    let (mut gates, mut bares) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        if round % 2 == 0 {
            gates.push(gate_side(&gate, tasks, requests, round).await?);
            bares.push(bare_side(&manager, &sha, tasks, requests, round).await?);
        } else {
            bares.push(bare_side(&manager, &sha, tasks, requests, round).await?);
            gates.push(gate_side(&gate, tasks, requests, round).await?);
        }
    }
    let rate = |sides: &[Side]| -> Vec<f64> { sides.iter().map(|s| s.rate).collect() };
    let cpu = |sides: &[Side]| -> Vec<f64> { sides.iter().map(|s| s.cpu_us).collect() };
    let ratios: Vec<f64> = gates
        .iter()
        .zip(&bares)
        .map(|(g, b)| g.rate / b.rate)
        .collect();
    let cpu_ratios: Vec<f64> = gates
        .iter()
        .zip(&bares)
        .map(|(g, b)| b.cpu_us / g.cpu_us)
        .collect();
    println!(
        "#### The native Redis gate ÷ the bare script call: one redis-server, one tokio thread, {tasks} tasks, {rounds} alternating rounds of {requests} requests a side\n"
    );
    println!(
        "| round | gate, req/s | bare EVALSHA, req/s | gate ÷ bare | gate, this thread's CPU µs a request | bare, CPU µs a request | bare ÷ gate CPU |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    for (round, (g, b)) in gates.iter().zip(&bares).enumerate() {
        println!(
            "| {} | {:.0} | {:.0} | {:.3} | {:.2} | {:.2} | {:.3} |",
            round + 1,
            g.rate,
            b.rate,
            g.rate / b.rate,
            g.cpu_us,
            b.cpu_us,
            b.cpu_us / g.cpu_us
        );
    }
    let (lo, hi) = range(&ratios);
    let (clo, chi) = range(&cpu_ratios);
    println!(
        "| median | {:.0} | {:.0} | **{:.3}** ({lo:.3}-{hi:.3}) | {:.2} | {:.2} | **{:.3}** ({clo:.3}-{chi:.3}) |",
        median(&rate(&gates)),
        median(&rate(&bares)),
        median(&ratios),
        median(&cpu(&gates)),
        median(&cpu(&bares)),
        median(&cpu_ratios)
    );
    println!();
    drop(server);
    Ok(())
}

fn main() -> Result<(), Error> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(run())
}
