//! Time per check of the in-isolate counter (`WindowCounter::hit`) beside
//! the `governor` crate's keyed limiter, on the same keys in the same run.
//!
//! Run: `cargo bench -p runtime --bench counter -- --warm-up-time 1 --measurement-time 3`
//!
//! Workloads, each benched for both limiters with the same `String` keys:
//! - `hot_keys`: 16 addresses hit round-robin, on one long-lived limiter.
//! - `flood_fill`: a new address every check, the first `DEFAULT_MAX_KEYS`
//!   of them, into a fresh limiter (the counter's table-insert path).
//! - `flood_past_bound`: a new address every check after `DEFAULT_MAX_KEYS`
//!   were already seen (untimed), up to 1,000,000 in all: mostly the
//!   counter's sketch of the address limit (its filter, for a key's first
//!   request); governor just keeps inserting.
//! - `flood_1m`: 1,000,000 new addresses into a fresh limiter, timed whole.
//!
//! A flood's time is per pass (criterion's "time"); divide by the checks in
//! a pass (its throughput elements) for the time per check.
//!
//! governor's keyed store grows without bound unless `retain_recent` is
//! called; it is never called here (nothing in a flood would be reclaimed
//! within the flood's first second anyway), so its map holds every address.
//!
//! The counter is sans-IO: it is given `now_ms`, which starts off a window
//! boundary and advances 1 ms every 1,000 checks. governor reads its own
//! clock (quanta) inside every check, so `hot_keys` also has a counter
//! variant that reads `SystemTime::now()` per check, as a caller must.

use std::hint::black_box;
use std::num::NonZeroU32;
use std::time::{SystemTime, UNIX_EPOCH};

use criterion::measurement::WallTime;
use criterion::{
    BatchSize, BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main,
};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use runtime::unstable_for_tools::counter::{DEFAULT_MAX_KEYS, WindowCounter};
use runtime::unstable_for_tools::limits::ADDRESS_LIMIT;

/// 300 ms before a minute window ends, in ms since the epoch: a flood of a
/// million checks (1,000 ms on the counter's clock) crosses into the next
/// window at its 300,000th check, so the sweep that reclaims ended windows
/// and the refill of the table after it are timed too.
const T0_MS: u64 = 1_800_000_000_000 + 59_700;
const SEED: u128 = 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210;
const HOT_KEYS: usize = 16;
const FLOOD: usize = 1_000_000;
const _: () = assert!(
    FLOOD > DEFAULT_MAX_KEYS * 10,
    "the flood must go well past the bound"
);

/// The `i`th of 2^32 distinct IPv4 addresses, spread over the whole space.
fn address(i: u32) -> String {
    let a = i.wrapping_mul(0x9E37_79B1); // odd, so a bijection on u32
    format!(
        "{}.{}.{}.{}",
        a >> 24,
        (a >> 16) & 255,
        (a >> 8) & 255,
        a & 255
    )
}

fn governor() -> DefaultKeyedRateLimiter<String> {
    // The same limit as ADDRESS_LIMIT: 120 a minute (GCRA, burst 120).
    RateLimiter::keyed(Quota::per_minute(
        NonZeroU32::new(ADDRESS_LIMIT.requests).unwrap(),
    ))
}

/// The counter's clock: `now_ms` advancing 1 ms every 1,000 checks.
struct Clock {
    now_ms: u64,
    tick: u32,
}

impl Clock {
    fn new() -> Clock {
        Clock {
            now_ms: T0_MS,
            tick: 0,
        }
    }
    #[inline(always)]
    fn now(&mut self) -> u64 {
        self.tick += 1;
        if self.tick == 1_000 {
            self.tick = 0;
            self.now_ms += 1;
        }
        self.now_ms
    }
}

fn hot_keys(c: &mut Criterion) {
    let keys: Vec<String> = (0..HOT_KEYS as u32).map(address).collect();
    let mut group = c.benchmark_group("hot_keys");
    group.throughput(Throughput::Elements(1));

    let mut counter = WindowCounter::new(DEFAULT_MAX_KEYS, &[], SEED);
    let mut clock = Clock::new();
    let mut i = 0usize;
    group.bench_function("counter", |b| {
        b.iter(|| {
            i = (i + 1) % HOT_KEYS;
            black_box(counter.hit(ADDRESS_LIMIT, &keys[i], clock.now()))
        })
    });

    let mut counter = WindowCounter::new(DEFAULT_MAX_KEYS, &[], SEED);
    let mut i = 0usize;
    group.bench_function("counter_systemtime", |b| {
        b.iter(|| {
            i = (i + 1) % HOT_KEYS;
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_millis() as u64;
            black_box(counter.hit(ADDRESS_LIMIT, &keys[i], now))
        })
    });

    let limiter = governor();
    let mut i = 0usize;
    group.bench_function("governor", |b| {
        b.iter(|| {
            i = (i + 1) % HOT_KEYS;
            black_box(limiter.check_key(&keys[i]).is_ok())
        })
    });
    group.finish();
}

/// Something that takes one check per key, fresh at the start of each pass.
/// Keys are `&String` because governor's `check_key` takes `&K`.
#[allow(clippy::ptr_arg)]
trait Check {
    fn fresh() -> Self;
    fn check(&mut self, key: &String) -> bool;
}

struct Counter(WindowCounter, Clock);

impl Check for Counter {
    fn fresh() -> Counter {
        Counter(
            WindowCounter::new(DEFAULT_MAX_KEYS, &[], SEED),
            Clock::new(),
        )
    }
    #[inline(always)]
    fn check(&mut self, key: &String) -> bool {
        let now = self.1.now();
        self.0.hit(ADDRESS_LIMIT, key, now) == runtime::unstable_for_tools::counter::Verdict::Within
    }
}

struct Governor(DefaultKeyedRateLimiter<String>);

impl Check for Governor {
    fn fresh() -> Governor {
        Governor(governor())
    }
    #[inline(always)]
    fn check(&mut self, key: &String) -> bool {
        self.0.check_key(key).is_ok()
    }
}

/// Times one pass of checks over `keys[skip..]`, each key new to a fresh
/// limiter that has already seen `keys[..skip]`. Building, filling and
/// dropping the limiter is not timed. Criterion's time is per pass; the
/// throughput is set to the checks in a pass.
fn flood<L: Check>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    keys: &[String],
    skip: usize,
) {
    group.bench_function(name, |b| {
        b.iter_batched(
            || {
                let mut fresh = L::fresh();
                for key in &keys[..skip] {
                    black_box(fresh.check(key));
                }
                fresh
            },
            |mut limiter| {
                for key in &keys[skip..] {
                    black_box(limiter.check(key));
                }
                limiter
            },
            BatchSize::PerIteration,
        )
    });
}

fn floods(c: &mut Criterion) {
    let keys: Vec<String> = (0..FLOOD as u32).map(address).collect();
    for (name, keys, skip) in [
        ("flood_fill", &keys[..DEFAULT_MAX_KEYS], 0),
        ("flood_past_bound", &keys[..], DEFAULT_MAX_KEYS),
        ("flood_1m", &keys[..], 0),
    ] {
        let mut group = c.benchmark_group(name);
        group.throughput(Throughput::Elements((keys.len() - skip) as u64));
        group.sample_size(10);
        flood::<Counter>(&mut group, "counter", keys, skip);
        flood::<Governor>(&mut group, "governor", keys, skip);
        group.finish();
    }
}

criterion_group!(benches, hot_keys, floods);
criterion_main!(benches);
