//! What the worst input a server accepts costs a native gate's decision,
//! beside a normal request's, and what a client sending it costs everyone
//! else's (issue 40's "cost per request bounded for any input, outside the
//! lock"; issue 44's "hostile inputs' rows").
//!
//! Run: `cargo bench -p runtime --bench hostile` (`BENCH_HOSTILE_ROUNDS`, default
//! 7; `BENCH_HOSTILE_SECONDS`, each throughput round's length, default 1).
//!
//! Two tables, each of alternating rounds (so every ratio is of two
//! figures measured side by side, the median of the per-round ratios):
//!
//! - **Per decision**: one thread, a `NativeGate` counting in memory, each
//!   request's subject found (`NativeGate::subject`) and decided
//!   (`NativeGate::decide`), in batches over 4,096 addresses; each hostile
//!   shape ÷ the normal request (`/api/items/42`, the peer's address):
//!   the longest path read (`MAX_PATH_BYTES`) in the canonicaliser's
//!   costliest shapes, the longest URI hyper takes (65,534 bytes, refused
//!   unread), the address headers at hyper's sizes, a 64 KiB caller id, and
//!   a deployable of 1,000 routes.
//! - **Beside a hostile sender**: thread A decides normal requests as fast
//!   as it can while thread B sends (a) normal requests, (b) the costliest
//!   path read, (c) the longest URI hyper takes, (d) that URI made
//!   canonical with the counts locked, as 5fd830b made every request's
//!   checks (the gate's own `lock_counts`, so the one run has the old
//!   design beside the new). A's decisions per second, and ÷ (a).

mod common;

use common::median;
use std::hint::black_box;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use runtime::Subject;
use runtime::limiter::MAX_PATH_BYTES;
use runtime::native::NativeGate;
use runtime::unstable_for_tools::native::lock_counts;

/// A native API counting in memory with a catch-all route, so every path
/// under `/api/` is matched and counted under a route's limit too.
fn app(client_address: &str, routes: usize) -> String {
    let mut source = format!(
        "[[deployables]]\nname = \"server\"\ntarget = \"native\"\nserves_api = true\n\
         client_address = {client_address}\n\
         [[routes]]\npath = \"/api/{{*rest}}\"\nrate_limit = {{ requests = 100000, window = 60 }}\n"
    );
    for i in 1..routes {
        source.push_str(&format!(
            "[[routes]]\npath = \"/r{i}/{{id}}/x\"\nrate_limit = {{ requests = 100000, window = 60 }}\n"
        ));
    }
    source
}

fn gate(client_address: &str, routes: usize) -> NativeGate {
    NativeGate::from_toml(&app(client_address, routes), "server").expect("a valid description")
}

/// `/api` and one-byte segments with a dot segment after each, to `bytes`:
/// each segment a step of the canonicaliser's walk, and a copy.
fn dotted_path(bytes: usize) -> String {
    let mut path = String::from("/api");
    while path.len() + 4 <= bytes {
        path.push_str("/a/.");
    }
    path.push_str(&"a".repeat(bytes - path.len()));
    path
}

/// `/api/` and one-byte segments, already canonical (borrowed, one scan).
fn plain_path(bytes: usize) -> String {
    let mut path = String::from("/api");
    while path.len() + 2 <= bytes {
        path.push_str("/a");
    }
    path.push_str(&"a".repeat(bytes - path.len()));
    path
}

/// `/api/` and one segment of escapes of unreserved characters, each decoded.
fn escaped_path(bytes: usize) -> String {
    let mut path = String::from("/api/");
    while path.len() + 3 <= bytes {
        path.push_str("%61");
    }
    path.push_str(&"a".repeat(bytes - path.len()));
    path
}

/// The longest URI hyper takes (http's `Uri` refuses longer).
const HYPER_MAX_URI: usize = 65_534;

fn peer(i: u32) -> SocketAddr {
    SocketAddr::new(
        IpAddr::from((0xC000_0000u32 | (i & 0xfff)).to_be_bytes()),
        40_000,
    )
}

/// One shape of request: its gate, its path, and how its subject is found.
struct Shape {
    name: &'static str,
    gate: NativeGate,
    path: String,
    caller: Option<String>,
    peer: Option<SocketAddr>,
    headers: http::HeaderMap,
}

impl Shape {
    fn new(name: &'static str, gate: NativeGate, path: String) -> Shape {
        Shape {
            name,
            gate,
            path,
            caller: None,
            peer: None,
            headers: http::HeaderMap::new(),
        }
    }

    /// Decides `n` requests, from 4,096 peers in turn (unless the shape
    /// has its own peer); the time per decision, in ns.
    fn ns_per_decision(&self, rt: &tokio::runtime::Runtime, n: u32) -> f64 {
        let start = Instant::now();
        rt.block_on(async {
            for i in 0..n {
                let subject = self
                    .gate
                    .subject(
                        self.caller.as_deref(),
                        Some(self.peer.unwrap_or_else(|| peer(i))),
                        &self.headers,
                    )
                    .expect("a peer");
                let _ = black_box(
                    self.gate
                        .decide(&subject, "GET", black_box(&self.path))
                        .await,
                );
            }
        });
        start.elapsed().as_nanos() as f64 / f64::from(n)
    }
}

fn header(name: &'static str, value: &str) -> http::HeaderMap {
    let mut headers = http::HeaderMap::new();
    headers.insert(
        name,
        http::HeaderValue::from_str(value).expect("a header value"),
    );
    headers
}

/// The shapes of request the per-decision table times, the normal first.
fn shapes() -> Vec<Shape> {
    let proxies = "{ trusted_proxies = [\"10.0.0.0/8\"] }";
    let cloudflare = "\"cloudflare\"";
    let proxy_peer = Some("10.0.0.2:40000".parse().expect("addr"));
    let cloudflare_peer = Some("173.245.48.1:40000".parse().expect("addr"));
    let mut shapes = vec![
        Shape::new(
            "normal: `/api/items/42`, the peer's address",
            gate("\"peer\"", 1),
            "/api/items/42".into(),
        ),
        Shape::new(
            "path of 8 KiB (the longest read), `/a/.` segments",
            gate("\"peer\"", 1),
            dotted_path(MAX_PATH_BYTES),
        ),
        Shape::new(
            "path of 8 KiB, `/a` segments (canonical already)",
            gate("\"peer\"", 1),
            plain_path(MAX_PATH_BYTES),
        ),
        Shape::new(
            "path of 8 KiB, `%61` escapes",
            gate("\"peer\"", 1),
            escaped_path(MAX_PATH_BYTES),
        ),
        Shape::new(
            "path of 65,534 B (hyper's longest URI), `/a/.`: refused unread",
            gate("\"peer\"", 1),
            dotted_path(HYPER_MAX_URI),
        ),
        Shape::new(
            "deployable of 1,000 routes, `/api/items/42`",
            gate("\"peer\"", 1_000),
            "/api/items/42".into(),
        ),
    ];
    let mut caller = Shape::new(
        "caller id of 64 KiB",
        gate("\"peer\"", 1),
        "/api/items/42".into(),
    );
    caller.caller = Some("u".repeat(64 * 1024));
    shapes.push(caller);
    let mut forwarded = Shape::new(
        "normal via a proxy: `X-Forwarded-For` of one entry",
        gate(proxies, 1),
        "/api/items/42".into(),
    );
    forwarded.peer = proxy_peer;
    forwarded.headers = header("x-forwarded-for", "203.0.113.9");
    shapes.push(forwarded);
    let mut junk = Shape::new(
        "`X-Forwarded-For` of 64 KiB: the client's junk, then its address",
        gate(proxies, 1),
        "/api/items/42".into(),
    );
    junk.peer = proxy_peer;
    junk.headers = header(
        "x-forwarded-for",
        &format!("{}, 203.0.113.9", "1".repeat(64 * 1024)),
    );
    shapes.push(junk);
    let mut hops = Shape::new(
        "`X-Forwarded-For` of 64 KiB of proxies' addresses (client inside)",
        gate(proxies, 1),
        "/api/items/42".into(),
    );
    hops.peer = proxy_peer;
    hops.headers = header("x-forwarded-for", &"10.0.0.1, ".repeat(64 * 1024 / 10));
    shapes.push(hops);
    let mut cf = Shape::new(
        "`CF-Connecting-IP` of 64 KiB, from Cloudflare",
        gate(cloudflare, 1),
        "/api/items/42".into(),
    );
    cf.peer = cloudflare_peer;
    cf.headers = header(
        "cf-connecting-ip",
        &format!("203.0.113.9{}", " ".repeat(64 * 1024)),
    );
    shapes.push(cf);

    shapes
}

fn per_decision(rounds: usize) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    let shapes = shapes();
    // Batches of about 20 ms each on this machine's normal request.
    let batch = |shape: &Shape| -> u32 {
        let probe = shape.ns_per_decision(&rt, 200).max(1.0);
        ((20e6 / probe) as u32).clamp(200, 200_000)
    };
    let sizes: Vec<u32> = shapes.iter().map(batch).collect();
    let mut ns: Vec<Vec<f64>> = vec![Vec::new(); shapes.len()];
    for _ in 0..rounds {
        for (i, shape) in shapes.iter().enumerate() {
            ns[i].push(shape.ns_per_decision(&rt, sizes[i]));
        }
    }
    println!("#### Per decision: one thread, in memory, {rounds} alternating rounds\n");
    println!(
        "| request | ns per decision, median (min-max) | ÷ normal, median of the rounds (min-max) |"
    );
    println!("|---|---|---|");
    for (i, shape) in shapes.iter().enumerate() {
        let ratios: Vec<f64> = ns[i].iter().zip(&ns[0]).map(|(a, b)| a / b).collect();
        let times = ns[i].clone();
        let (lo, hi) = (
            times.iter().copied().fold(f64::MAX, f64::min),
            times.iter().copied().fold(0.0, f64::max),
        );
        let (rlo, rhi) = (
            ratios.iter().copied().fold(f64::MAX, f64::min),
            ratios.iter().copied().fold(0.0, f64::max),
        );
        println!(
            "| {} | {:.0} ({:.0}-{:.0}) | {:.2} ({:.2}-{:.2}) |",
            shape.name,
            median(&times),
            lo,
            hi,
            median(&ratios),
            rlo,
            rhi
        );
    }
    println!();
}

/// What thread B sends while thread A decides normal requests.
#[derive(Clone, Copy)]
enum Neighbour {
    Normal,
    LongestRead,
    HyperLongest,
    UnderTheLock,
}

impl Neighbour {
    const ALL: [Neighbour; 4] = [
        Neighbour::Normal,
        Neighbour::LongestRead,
        Neighbour::HyperLongest,
        Neighbour::UnderTheLock,
    ];

    fn name(self) -> &'static str {
        match self {
            Neighbour::Normal => "(a) normal requests",
            Neighbour::LongestRead => "(b) 8 KiB `/a/.` paths (the costliest read)",
            Neighbour::HyperLongest => "(c) 65,534 B paths (refused unread)",
            Neighbour::UnderTheLock => {
                "(d) 65,534 B paths made canonical (today's canonicaliser) with the counts locked, where 5fd830b made every request's checks"
            }
        }
    }
}

/// Thread A's normal decisions per second while thread B sends
/// `neighbour`'s, and the 99.9th percentile and the longest of A's
/// decisions, in µs: a decision waiting on a lock B holds is a long one.
fn beside(gate: &NativeGate, neighbour: Neighbour, seconds: f64) -> (f64, f64, f64) {
    let stop = AtomicBool::new(false);
    let decided = AtomicU64::new(0);
    let read = dotted_path(MAX_PATH_BYTES);
    let longest = dotted_path(HYPER_MAX_URI);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let rt = tokio::runtime::Builder::new_current_thread()
                .build()
                .expect("a runtime");
            let subject = Subject::of_request(None, Some("198.51.100.7"));
            rt.block_on(async {
                while !stop.load(Ordering::Relaxed) {
                    match neighbour {
                        Neighbour::Normal => {
                            let _ = black_box(gate.decide(&subject, "GET", "/api/items/7").await);
                        }
                        Neighbour::LongestRead => {
                            let _ = black_box(gate.decide(&subject, "GET", &read).await);
                        }
                        Neighbour::HyperLongest => {
                            let _ = black_box(gate.decide(&subject, "GET", &longest).await);
                        }
                        Neighbour::UnderTheLock => {
                            let held = lock_counts(gate);
                            black_box(runtime::routes::canonical(black_box(&longest)));
                            drop(held);
                            let _ = black_box(gate.decide(&subject, "GET", "/api/items/7").await);
                        }
                    }
                }
            });
        });
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        let start = Instant::now();
        let mut n = 0u32;
        let mut took: Vec<f64> = Vec::with_capacity(1 << 20);
        rt.block_on(async {
            while start.elapsed() < Duration::from_secs_f64(seconds) {
                for _ in 0..64 {
                    let subject = Subject::Address(runtime::ClientAddress::of_ip(peer(n).ip()));
                    let one = Instant::now();
                    let _ = black_box(gate.decide(&subject, "GET", "/api/items/42").await);
                    took.push(one.elapsed().as_secs_f64() * 1e6);
                    n = n.wrapping_add(1);
                }
                decided.fetch_add(64, Ordering::Relaxed);
            }
        });
        stop.store(true, Ordering::Relaxed);
        let rate = decided.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64();
        took.sort_by(f64::total_cmp);
        let p999 = took[(took.len() * 999 / 1000).min(took.len() - 1)];
        (rate, p999, took.last().copied().unwrap_or(0.0))
    })
}

fn beside_hostile(rounds: usize, seconds: f64) {
    let gate = gate("\"peer\"", 1);
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); Neighbour::ALL.len()];
    let mut p999s: Vec<Vec<f64>> = vec![Vec::new(); Neighbour::ALL.len()];
    let mut maxes: Vec<Vec<f64>> = vec![Vec::new(); Neighbour::ALL.len()];
    for _ in 0..rounds {
        for (i, neighbour) in Neighbour::ALL.into_iter().enumerate() {
            let (rate, p999, max) = beside(&gate, neighbour, seconds);
            rates[i].push(rate);
            p999s[i].push(p999);
            maxes[i].push(max);
        }
    }
    println!(
        "#### Normal requests beside a hostile sender: two threads, one gate in memory, {rounds} alternating rounds of {seconds} s\n"
    );
    println!(
        "| thread B sends | thread A's decisions/s, median (min-max) | ÷ (a), median of the rounds (min-max) | A's 99.9th percentile decision, µs, median of the rounds | A's longest decision, µs, median of the rounds (max) |"
    );
    println!("|---|---|---|---|---|");
    for (i, neighbour) in Neighbour::ALL.into_iter().enumerate() {
        let ratios: Vec<f64> = rates[i].iter().zip(&rates[0]).map(|(a, b)| a / b).collect();
        let r = rates[i].clone();
        let (lo, hi) = (
            r.iter().copied().fold(f64::MAX, f64::min),
            r.iter().copied().fold(0.0, f64::max),
        );
        let (rlo, rhi) = (
            ratios.iter().copied().fold(f64::MAX, f64::min),
            ratios.iter().copied().fold(0.0, f64::max),
        );
        let longest = maxes[i].iter().copied().fold(0.0, f64::max);
        println!(
            "| {} | {:.0} ({:.0}-{:.0}) | {:.3} ({:.3}-{:.3}) | {:.1} | {:.0} ({:.0}) |",
            neighbour.name(),
            median(&r),
            lo,
            hi,
            median(&ratios),
            rlo,
            rhi,
            median(&p999s[i]),
            median(&maxes[i]),
            longest
        );
    }
    println!();
}

fn main() {
    let run = common::Run::from_env("HOSTILE", 1.0);
    if run.wants("per_decision") {
        per_decision(run.rounds);
    }
    if run.wants("beside_hostile") {
        beside_hostile(run.rounds, run.seconds);
    }
}
