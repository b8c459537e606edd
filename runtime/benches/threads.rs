//! The native in-memory gate across threads, beside governor's keyed
//! limiter under the same load, and beside the floor of its job: the bare
//! count it cannot avoid (issue 44).
//!
//! Run: `cargo bench -p runtime --bench threads` (`BENCH_THREADS_ROUNDS`,
//! default 7; `BENCH_THREADS_SECONDS`, each run's length, default 0.5; a
//! filter argument `across_threads` or `floor` prints one table).
//!
//! Every figure is checks per second summed over the threads, each thread
//! deciding as fast as it can, in alternating rounds: within a round every
//! contender runs once with 1 thread and once with 2, so each ratio is of
//! two figures measured side by side, and the table gives the median of the
//! rounds' ratios.
//!
//! - **Across threads**: a `NativeGate` counting in memory
//!   (`NativeGate::decide`, the subject made beforehand, a path that meets
//!   no route: one check, the address's) and governor's
//!   `DefaultKeyedRateLimiter<String>` (`check_key`), on
//!   - *distinct keys*: each thread its own 8,192 addresses, in turn;
//!     the gate's clock moves a minute on every 20 ms (its testing hook),
//!     and governor's quota is 10^9 a second, so both let nearly every
//!     check through;
//!   - *one hot key*: every thread the same address, at the address limit
//!     (120 a minute) for both, so nearly every check is refused;
//!
//!   and, as the control, a gate of each thread's own (nothing shared): the
//!   most any split of the gate's state by key could reach on this machine.
//!
//!   Beside each 2-thread run: the cores its threads had (their CPU time ÷
//!   the run's time: 2 when the machine gave both, whatever the limiter),
//!   and how often they waited off the CPU per million checks (voluntary
//!   context switches: a thread sleeps only on a contended lock's futex),
//!   so whether the lock or the machine stops the scaling is measured.
//! - **Floor**: the gate on distinct keys ÷ the bare count it cannot avoid,
//!   the same keys counted in a `HashMap<String, u32>` under one `Mutex`
//!   (an increment per check, no window, no limit), with 1 and 2 threads.

mod common;

use common::{median, range};
use std::collections::HashMap;
use std::hint::black_box;
use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroU32;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use runtime::Subject;
use runtime::native::NativeGate;
use runtime::unstable_for_tools::limits::ADDRESS_LIMIT;

/// Addresses per thread on distinct keys: two threads' together fill
/// 16,384 of the counter's 28,672 table entries, so no check reaches a sketch.
const KEYS_PER_THREAD: u32 = 8_192;

/// A path no route of [`APP`] meets: one check per request, the address's.
const PATH: &str = "/health";

/// A native deployable counting in memory, one route (which [`PATH`] misses).
const APP: &str = "[[deployables]]\nname = \"server\"\ntarget = \"native\"\nserves_api = true\n\
     client_address = \"peer\"\n\
     [[routes]]\npath = \"/api/{*rest}\"\nrate_limit = { requests = 100000, window = 60 }\n";

/// The `i`th key of `thread` (distinct across threads), as an address.
fn address(thread: u32, i: u32) -> IpAddr {
    IpAddr::from((0x0A00_0000u32 | (thread << 16) | i).to_be_bytes())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Load {
    Distinct,
    Hot,
}

impl Load {
    fn keys(self, thread: u32) -> Vec<IpAddr> {
        match self {
            Load::Distinct => (0..KEYS_PER_THREAD).map(|i| address(thread, i)).collect(),
            Load::Hot => vec![address(0, 0)],
        }
    }
}

/// Something that takes checks from several threads at once.
trait Contender: Sync {
    /// Checks `keys` in turn on thread number `thread` until `stop`; how
    /// many it checked.
    fn run(&self, thread: usize, keys: &[IpAddr], stop: &AtomicBool) -> u64;
}

/// One gate every thread shares.
struct Gate(NativeGate);

impl Contender for Gate {
    fn run(&self, _: usize, keys: &[IpAddr], stop: &AtomicBool) -> u64 {
        decide_until(&self.0, keys, stop)
    }
}

/// A gate of each thread's own: the same work with nothing shared, the
/// most any split of the gate's state could reach.
struct GatePerThread([NativeGate; 2]);

impl Contender for GatePerThread {
    fn run(&self, thread: usize, keys: &[IpAddr], stop: &AtomicBool) -> u64 {
        decide_until(&self.0[thread], keys, stop)
    }
}

/// Decides requests from `keys` in turn through `gate` until `stop`.
fn decide_until(gate: &NativeGate, keys: &[IpAddr], stop: &AtomicBool) -> u64 {
    let subjects: Vec<Subject> = keys
        .iter()
        .map(|&ip| {
            gate.subject(
                None,
                Some(SocketAddr::new(ip, 40_000)),
                &http::HeaderMap::new(),
            )
            .expect("a peer")
        })
        .collect();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    rt.block_on(async {
        let mut n = 0u64;
        while !stop.load(Ordering::Relaxed) {
            for subject in subjects.iter().cycle().take(256) {
                let _ = black_box(gate.decide(subject, "GET", black_box(PATH)).await);
            }
            n += 256;
        }
        n
    })
}

struct Governor(DefaultKeyedRateLimiter<String>);

impl Contender for Governor {
    fn run(&self, _: usize, keys: &[IpAddr], stop: &AtomicBool) -> u64 {
        let keys: Vec<String> = keys.iter().map(IpAddr::to_string).collect();
        let mut n = 0u64;
        while !stop.load(Ordering::Relaxed) {
            for key in keys.iter().cycle().take(256) {
                black_box(self.0.check_key(key).is_ok());
            }
            n += 256;
        }
        n
    }
}

/// The floor: a count per key under one lock, nothing else.
struct BareCount(Mutex<HashMap<String, u32>>);

impl Contender for BareCount {
    fn run(&self, _: usize, keys: &[IpAddr], stop: &AtomicBool) -> u64 {
        let keys: Vec<String> = keys.iter().map(IpAddr::to_string).collect();
        let mut n = 0u64;
        while !stop.load(Ordering::Relaxed) {
            for key in keys.iter().cycle().take(256) {
                let mut counts = self.0.lock().unwrap_or_else(|e| e.into_inner());
                match counts.get_mut(key.as_str()) {
                    Some(count) => *count += 1,
                    None => {
                        counts.insert(key.clone(), 1);
                    }
                }
                black_box(&counts);
            }
            n += 256;
        }
        n
    }
}

fn gate() -> Gate {
    Gate(NativeGate::from_toml(APP, "server").expect("a valid description"))
}

fn governor(load: Load) -> Governor {
    let quota = match load {
        Load::Distinct => Quota::per_second(NonZeroU32::new(1_000_000_000).expect("non-zero")),
        Load::Hot => Quota::per_minute(NonZeroU32::new(ADDRESS_LIMIT.requests).expect("non-zero")),
    };
    Governor(RateLimiter::keyed(quota))
}

/// What one thread's run cost it, from `/proc/thread-self`: its CPU time,
/// and how often it left the CPU of its own accord (voluntary context
/// switches: a thread that waits for a contended lock sleeps on a futex,
/// and nothing else in a run sleeps).
#[derive(Default, Clone, Copy)]
struct ThreadCost {
    cpu_ns: u64,
    waits: u64,
}

impl ThreadCost {
    fn now() -> ThreadCost {
        let read = |file: &str| std::fs::read_to_string(format!("/proc/thread-self/{file}"));
        let cpu_ns = read("schedstat")
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse().ok())
            .unwrap_or(0);
        let waits = read("status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))?
                    .trim()
                    .parse()
                    .ok()
            })
            .unwrap_or(0);
        ThreadCost { cpu_ns, waits }
    }

    fn since(self, before: ThreadCost) -> ThreadCost {
        ThreadCost {
            cpu_ns: self.cpu_ns.saturating_sub(before.cpu_ns),
            waits: self.waits.saturating_sub(before.waits),
        }
    }
}

/// One run of a contender: checks per second, the cores its threads had
/// (their CPU time ÷ the run's), and their waits off the CPU per million checks.
#[derive(Default, Clone, Copy)]
struct Figure {
    rate: f64,
    cores: f64,
    waits_per_million: f64,
}

/// A run of `contender` with `threads` threads on `load` for `seconds`;
/// on distinct keys the gate's clock moves a minute every 20 ms.
fn rate(
    contender: &dyn Contender,
    clocks: &[&NativeGate],
    load: Load,
    threads: u32,
    seconds: f64,
) -> Figure {
    let stop = AtomicBool::new(false);
    let checked = AtomicU64::new(0);
    let cpu_ns = AtomicU64::new(0);
    let waits = AtomicU64::new(0);
    let keys: Vec<Vec<IpAddr>> = (0..threads).map(|t| load.keys(t)).collect();
    let start = Instant::now();
    std::thread::scope(|scope| {
        for (thread, keys) in keys.iter().enumerate() {
            let (stop, checked, cpu_ns, waits) = (&stop, &checked, &cpu_ns, &waits);
            scope.spawn(move || {
                let before = ThreadCost::now();
                checked.fetch_add(contender.run(thread, keys, stop), Ordering::Relaxed);
                let cost = ThreadCost::now().since(before);
                cpu_ns.fetch_add(cost.cpu_ns, Ordering::Relaxed);
                waits.fetch_add(cost.waits, Ordering::Relaxed);
            });
        }
        let mut minutes = 0i64;
        while start.elapsed() < Duration::from_secs_f64(seconds) {
            std::thread::sleep(Duration::from_millis(20));
            if load == Load::Distinct {
                minutes += 1;
                for gate in clocks {
                    gate.clock().set_offset_ms(minutes * 60_000);
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
    let elapsed = start.elapsed().as_secs_f64();
    let checked = checked.load(Ordering::Relaxed) as f64;
    Figure {
        rate: checked / elapsed,
        cores: cpu_ns.load(Ordering::Relaxed) as f64 / 1e9 / elapsed,
        waits_per_million: waits.load(Ordering::Relaxed) as f64 * 1e6 / checked.max(1.0),
    }
}

/// One contender's 1- and 2-thread rates over the rounds, and its
/// 2-thread runs' cores and waits.
#[derive(Default)]
struct Rates {
    one: Vec<f64>,
    two: Vec<f64>,
    two_cores: Vec<f64>,
    two_waits: Vec<f64>,
}

impl Rates {
    fn scaling(&self) -> Vec<f64> {
        self.two.iter().zip(&self.one).map(|(t, o)| t / o).collect()
    }
}

fn across_threads(rounds: usize, seconds: f64) {
    let loads = [
        (Load::Distinct, "distinct keys"),
        (Load::Hot, "one hot key"),
    ];
    let limiters = [
        "gate, shared",
        "governor, shared",
        "a gate per thread (nothing shared)",
    ];
    // rates[load][limiter]
    let mut rates: Vec<Vec<Rates>> = loads
        .iter()
        .map(|_| limiters.iter().map(|_| Rates::default()).collect())
        .collect();
    for _ in 0..rounds {
        for (i, &(load, _)) in loads.iter().enumerate() {
            for threads in [1, 2] {
                let shared = gate();
                let gov = governor(load);
                let apart = GatePerThread([gate().0, gate().0]);
                let figures = [
                    rate(&shared, &[&shared.0], load, threads, seconds),
                    rate(&gov, &[], load, threads, seconds),
                    rate(&apart, &[&apart.0[0], &apart.0[1]], load, threads, seconds),
                ];
                for (j, figure) in figures.into_iter().enumerate() {
                    let r = &mut rates[i][j];
                    match threads {
                        1 => r.one.push(figure.rate),
                        _ => {
                            r.two.push(figure.rate);
                            r.two_cores.push(figure.cores);
                            r.two_waits.push(figure.waits_per_million);
                        }
                    }
                }
            }
        }
    }
    println!(
        "#### The in-memory gate across threads, beside governor: {rounds} alternating rounds of {seconds} s a run\n"
    );
    println!(
        "| load | limiter | 1 thread, checks/s, median (min-max) | 2 threads, checks/s, median (min-max) | 2 threads ÷ 1, median of the rounds (min-max) | ÷ governor's 2 ÷ 1, median of the rounds | 2 threads: cores they had, median (min-max) | 2 threads: waits off the CPU a million checks, median (min-max) |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for (i, &(_, name)) in loads.iter().enumerate() {
        let governors = rates[i][1].scaling();
        for (j, limiter) in limiters.iter().enumerate() {
            let r = &rates[i][j];
            let (lo1, hi1) = range(&r.one);
            let (lo2, hi2) = range(&r.two);
            let scaling = r.scaling();
            let (slo, shi) = range(&scaling);
            let versus: Vec<f64> = scaling.iter().zip(&governors).map(|(g, s)| g / s).collect();
            let versus = match j {
                1 => String::new(),
                _ => format!("**{:.2}**", median(&versus)),
            };
            let (clo, chi) = range(&r.two_cores);
            let (wlo, whi) = range(&r.two_waits);
            println!(
                "| {name} | {limiter} | {:.0} ({:.0}-{:.0}) | {:.0} ({:.0}-{:.0}) | **{:.2}** ({:.2}-{:.2}) | {versus} | {:.2} ({clo:.2}-{chi:.2}) | {:.1} ({wlo:.1}-{whi:.1}) |",
                median(&r.one),
                lo1,
                hi1,
                median(&r.two),
                lo2,
                hi2,
                median(&scaling),
                slo,
                shi,
                median(&r.two_cores),
                median(&r.two_waits),
            );
        }
    }
    println!("\nPer round, 2 threads ÷ 1:\n");
    for (i, &(_, name)) in loads.iter().enumerate() {
        for (j, limiter) in limiters.iter().enumerate() {
            println!("- {name}, {limiter}: {}", per_round(&rates[i][j].scaling()));
        }
    }
    println!();
}

/// Each round's ratio, in order: `0.98, 1.02, ...`.
fn per_round(ratios: &[f64]) -> String {
    let ratios: Vec<String> = ratios.iter().map(|r| format!("{r:.3}")).collect();
    ratios.join(", ")
}

fn floor(rounds: usize, seconds: f64) {
    let mut gates = Rates::default();
    let mut bare = Rates::default();
    for _ in 0..rounds {
        for threads in [1, 2] {
            let g = gate();
            let r = rate(&g, &[&g.0], Load::Distinct, threads, seconds).rate;
            let b = BareCount(Mutex::new(HashMap::new()));
            let s = rate(&b, &[], Load::Distinct, threads, seconds).rate;
            let (gr, br) = if threads == 1 {
                (&mut gates.one, &mut bare.one)
            } else {
                (&mut gates.two, &mut bare.two)
            };
            gr.push(r);
            br.push(s);
        }
    }
    println!(
        "#### The in-memory gate ÷ the bare count under one lock, distinct keys: {rounds} alternating rounds of {seconds} s a run\n"
    );
    println!(
        "| threads | gate, checks/s, median (min-max) | bare count, checks/s, median (min-max) | gate ÷ bare count, median of the rounds (min-max) |"
    );
    println!("|---:|---|---|---|");
    for (threads, g, b) in [(1, &gates.one, &bare.one), (2, &gates.two, &bare.two)] {
        let ratios: Vec<f64> = g.iter().zip(b).map(|(g, b)| g / b).collect();
        let (glo, ghi) = range(g);
        let (blo, bhi) = range(b);
        let (rlo, rhi) = range(&ratios);
        println!(
            "| {threads} | {:.0} ({:.0}-{:.0}) | {:.0} ({:.0}-{:.0}) | **{:.3}** ({:.3}-{:.3}) |",
            median(g),
            glo,
            ghi,
            median(b),
            blo,
            bhi,
            median(&ratios),
            rlo,
            rhi
        );
    }
    println!("\nPer round, gate ÷ bare count:\n");
    for (threads, g, b) in [(1, &gates.one, &bare.one), (2, &gates.two, &bare.two)] {
        let ratios: Vec<f64> = g.iter().zip(b).map(|(g, b)| g / b).collect();
        println!("- {threads} thread(s): {}", per_round(&ratios));
    }
    println!();
}

fn main() {
    let run = common::Run::from_env("THREADS", 0.5);
    if run.wants("across_threads") {
        across_threads(run.rounds, run.seconds);
    }
    if run.wants("floor") {
        floor(run.rounds, run.seconds);
    }
}
