//! Heap used by the in-isolate counter (`WindowCounter`), measured with a
//! counting global allocator, beside the `governor` crate's keyed limiter.
//!
//! Run: `cargo bench -p runtime --bench memory`
//!
//! The counter allocates its whole table when it is built (32,768 slots of
//! a 16-byte `(u64, Slot)` entry and a control byte, filled to 7/8, so
//! `DEFAULT_MAX_KEYS` = 28,672 keys) and its count-min sketches, and says so
//! in `heap_bytes()`; a sweep (reclaiming ended windows when the table is
//! full) briefly adds a list of the live entries, at most `max_keys` of them.
//! The bound checked here is therefore `heap_bytes()` at rest and
//! `heap_bytes() + max_keys x 16 B` at the peak.
//!
//! Prints, as Markdown tables:
//! - the heap of `WindowCounter::new(DEFAULT_MAX_KEYS, seed)` after N
//!   distinct keys (N from 0 to 1,000,000), the keys it tracks one by one,
//!   bytes per tracked key, `heap_bytes()`, and the peak while filling;
//! - three floods of 1,000,000 distinct addresses, each with its peak heap,
//!   its heap after, and the bound:
//!   - `one limit`: the address limit only, the clock as in the `counter`
//!     bench (300 ms before a minute ends, 1 ms every 1,000 checks), so the
//!     table is swept once, when every entry has ended; governor's keyed
//!     limiter takes the same flood;
//!   - `route limit`: every request counted twice, as a route with its own
//!     limit is (120 a minute by address, and 20 per 10 seconds under
//!     `/api/search|address:...`), the clock moving 1 ms every 20 requests
//!     (50 s in all) so 10-second windows end while 60-second ones are
//!     live and each sweep keeps a full list;
//!   - in both floods every address sends one request, within its limit,
//!     so every refusal is an innocent refused; and a heavy hitter sends
//!     twice its limit in one burst before the table fills (at the flood's
//!     start) and another from a second address after it filled (half-way):
//!     each must be let through no more than its limit (+1 %);
//!   - `worst sweep`: a table full of live 60-second entries but one
//!     10-second one; once that ends, a new key sweeps and keeps
//!     `max_keys - 1` entries, the largest list a sweep can build.
//!
//! A moving `realloc` is counted as both blocks live at once (peak), as the
//! allocator may copy; the numbers are an upper bound on what the heap held.

use std::alloc::{GlobalAlloc, Layout, System};
use std::fmt::Write as _;
use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use runtime::counter::{
    DEFAULT_MAX_KEYS, SKETCH_ROWS, SKETCH_WIDTH, SKETCHES, Verdict, WindowCounter,
};
use runtime::limits::{ADDRESS_LIMIT, Limit};

/// Counts the bytes live on the heap and the most that were at once.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(bytes: usize) {
    let now = LIVE.fetch_add(bytes, Relaxed) + bytes;
    PEAK.fetch_max(now, Relaxed);
}

// Every method hands the call to `System` as it came, with its caller's
// guarantees, and only counts sizes beside it.
#[allow(
    unsafe_code,
    reason = "a global allocator is an unsafe trait; counting the heap needs one"
)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            // Both blocks may be live during a moving realloc: count the peak so.
            grew(new_size);
            LIVE.fetch_sub(layout.size(), Relaxed);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Heap live now, and the peak since the last call to `reset_peak`.
fn live() -> usize {
    LIVE.load(Relaxed)
}
fn peak() -> usize {
    PEAK.load(Relaxed)
}
fn reset_peak() {
    PEAK.store(LIVE.load(Relaxed), Relaxed);
}

/// 300 ms before a minute window ends, in ms since the epoch (as the `counter` bench).
const T0_MS: u64 = 1_800_000_000_000 + 59_700;
/// A minute boundary, for the floods that need whole windows ahead.
const MINUTE_MS: u64 = 1_800_000_000_000;
const SEED: u128 = 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210;
const FLOOD: u32 = 1_000_000;
/// `size_of::<(u64, Slot)>()`: a digest, and a slot of two `u32`s.
const ENTRY: usize = 16;
/// A route's own limit, as `scenarios/apps/cloudflare.toml`'s `/api/search`.
const ROUTE_LIMIT: Limit = Limit::new(20, 10);

/// Writes the `i`th of 2^32 distinct IPv4 addresses (as the `counter`
/// bench's `address`) into `buf`, which is reused so nothing is allocated.
fn address(buf: &mut String, prefix: &str, i: u32) -> usize {
    let a = i.wrapping_mul(0x9E37_79B1);
    buf.clear();
    write!(
        buf,
        "{prefix}{}.{}.{}.{}",
        a >> 24,
        (a >> 16) & 255,
        (a >> 8) & 255,
        a & 255
    )
    .unwrap();
    prefix.len()
}

fn now_ms(check: u32) -> u64 {
    T0_MS + u64::from(check) / 1_000
}

fn governor() -> DefaultKeyedRateLimiter<String> {
    RateLimiter::keyed(Quota::per_minute(
        NonZeroU32::new(ADDRESS_LIMIT.requests).unwrap(),
    ))
}

fn mib(bytes: usize) -> String {
    format!("{:.2} MiB", bytes as f64 / (1024.0 * 1024.0))
}

/// What one flood left: the peak and the heap after it, over the heap before.
struct Flood {
    peak: usize,
    after: usize,
    heap_bytes: usize,
    tracked: usize,
    within: u32,
    /// What the heavy hitters were let through: (before the table filled, after).
    heavy: (u32, u32),
}

/// Runs `hits` on a fresh counter and measures its heap.
fn flood(hits: impl FnOnce(&mut WindowCounter) -> (u32, (u32, u32))) -> Flood {
    let base = live();
    reset_peak();
    let mut c = WindowCounter::new(DEFAULT_MAX_KEYS, SEED);
    let (within, heavy) = hits(&mut c);
    let flood = Flood {
        peak: peak() - base,
        after: live() - base,
        heap_bytes: c.heap_bytes(),
        tracked: c.tracked_keys(),
        within,
        heavy,
    };
    drop(c);
    flood
}

fn main() {
    let mut buf = String::with_capacity(48);
    bytes_per_tracked_key(&mut buf);
    let floods = Floods {
        one: flood_one_limit(&mut buf),
        route: flood_route_limit(&mut buf),
        worst: flood_worst_sweep(&mut buf),
        governor: flood_governor(&mut buf),
    };
    floods.print();
}

/// The heap of a counter after N distinct keys, printed as a table.
fn bytes_per_tracked_key(buf: &mut String) {
    let max = DEFAULT_MAX_KEYS;
    println!("### Bytes per tracked key (WindowCounter, DEFAULT_MAX_KEYS = {max})\n");
    println!(
        "| keys N | heap, B | keys tracked | heap / tracked, B | heap_bytes(), B | heap = heap_bytes() | peak while filling, B |"
    );
    println!("|---:|---:|---:|---:|---:|:---:|---:|");
    for n in [0u32, 1_000, 10_000, max as u32, 65_536, FLOOD] {
        let base = live();
        reset_peak();
        let mut c = WindowCounter::new(max, SEED);
        for i in 0..n {
            address(buf, "", i);
            black_box(c.hit(ADDRESS_LIMIT, buf, now_ms(i)));
        }
        // Read before printing, which allocates.
        let (heap, filling) = (live() - base, peak() - base);
        let tracked = c.tracked_keys();
        assert_eq!(tracked, (n as usize).min(max), "keys tracked one by one");
        println!(
            "| {n} | {heap} | {tracked} | {} | {} | {} | {} |",
            if tracked == 0 {
                "-".to_owned()
            } else {
                format!("{:.1}", heap as f64 / tracked as f64)
            },
            c.heap_bytes(),
            if heap == c.heap_bytes() {
                "yes"
            } else {
                "**no**"
            },
            filling,
        );
        drop(c);
    }
}

/// One limit: the address limit only; one sweep, when every entry has ended.
fn flood_one_limit(buf: &mut String) -> Flood {
    flood(|c| {
        let (mut within, mut heavy) = (0, (0, 0));
        for i in 0..FLOOD {
            let burst = |c: &mut WindowCounter, key: &str| {
                (0..2 * ADDRESS_LIMIT.requests)
                    .filter(|_| c.hit(ADDRESS_LIMIT, key, now_ms(i)) == Verdict::Within)
                    .count() as u32
            };
            if i == 0 {
                heavy.0 = burst(c, "heavy-before");
            } else if i == FLOOD / 5 {
                // Still before the minute ends (the clock crosses it at 300,000).
                heavy.1 = burst(c, "heavy-after");
            }
            address(buf, "", i);
            within += u32::from(c.hit(ADDRESS_LIMIT, buf, now_ms(i)) == Verdict::Within);
        }
        (within, heavy)
    })
}

/// A route with its own 10-second limit: two keys a request, sweeps that keep live entries.
fn flood_route_limit(buf: &mut String) -> Flood {
    flood(|c| {
        let (mut within, mut heavy) = (0, (0, 0));
        let mut route_key = String::with_capacity(48);
        for i in 0..FLOOD {
            let now = MINUTE_MS + 5_000 + u64::from(i) / 20;
            let burst = |c: &mut WindowCounter, address: &str| {
                let key = format!("/api/search|address:{address}");
                (0..2 * ROUTE_LIMIT.requests)
                    .filter(|_| {
                        c.hit(ADDRESS_LIMIT, address, now) == Verdict::Within
                            && c.hit(ROUTE_LIMIT, &key, now) == Verdict::Within
                    })
                    .count() as u32
            };
            if i == 0 {
                heavy.0 = burst(c, "heavy-before");
            } else if i == 100_001 {
                // 5 s later, past the table's 28,672 keys, in the same 10-second window.
                heavy.1 = burst(c, "heavy-after");
            }
            let at = address(buf, "address:", i);
            route_key.clear();
            route_key.push_str("/api/search|");
            route_key.push_str(&buf[..]);
            let a = c.hit(ADDRESS_LIMIT, &buf[at - "address:".len()..], now);
            let r = c.hit(ROUTE_LIMIT, &route_key, now);
            within += u32::from(a == Verdict::Within && r == Verdict::Within);
        }
        (within, heavy)
    })
}

/// The largest sweep: max - 1 live entries kept.
fn flood_worst_sweep(buf: &mut String) -> Flood {
    let max = DEFAULT_MAX_KEYS;
    flood(|c| {
        address(buf, "", u32::MAX);
        c.hit(ROUTE_LIMIT, buf, MINUTE_MS);
        for i in 1..max as u32 {
            address(buf, "", i);
            c.hit(ADDRESS_LIMIT, buf, MINUTE_MS + 1);
        }
        assert_eq!(c.tracked_keys(), max);
        address(buf, "", max as u32);
        let v = c.hit(ADDRESS_LIMIT, buf, MINUTE_MS + 10_000);
        assert_eq!(
            c.tracked_keys(),
            max,
            "the sweep kept max - 1 and took the new key"
        );
        (u32::from(v == Verdict::Within), (0, 0))
    })
}

/// What governor's keyed limiter held after the one-limit flood.
struct GovernorFlood {
    peak: usize,
    after: usize,
    len: usize,
    within: u32,
}

/// The one-limit flood through governor's keyed limiter.
fn flood_governor(buf: &mut String) -> GovernorFlood {
    let base = live();
    reset_peak();
    let g = governor();
    let mut within = 0u32;
    for i in 0..FLOOD {
        address(buf, "", i);
        let key = buf.clone();
        within += u32::from(g.check_key(&key).is_ok());
        drop(key); // the caller's copy; governor keeps its own clone
    }
    let flood = GovernorFlood {
        peak: peak() - base,
        after: live() - base,
        len: g.len(),
        within,
    };
    drop(g);
    flood
}

/// The four floods, printed side by side.
struct Floods {
    one: Flood,
    route: Flood,
    worst: Flood,
    governor: GovernorFlood,
}

impl Floods {
    fn print(&self) {
        let Floods {
            one,
            route,
            worst,
            governor,
        } = self;
        let (g_peak, g_after, g_len, g_within) =
            (governor.peak, governor.after, governor.len, governor.within);
        let max = DEFAULT_MAX_KEYS;
        let at_rest = one.heap_bytes;
        let bound = at_rest + max * ENTRY;
        println!("\n### Floods of {FLOOD} distinct addresses\n");
        println!(
            "| | WindowCounter, one limit | WindowCounter, route limit (2 keys a request) | WindowCounter, worst sweep | governor keyed, one limit |"
        );
        println!("|---|---:|---:|---:|---:|");
        let b = |x: usize| format!("{x} B ({})", mib(x));
        println!(
            "| peak heap | {} | {} | {} | {} |",
            b(one.peak),
            b(route.peak),
            b(worst.peak),
            b(g_peak)
        );
        println!(
            "| heap after | {} | {} | {} | {} |",
            b(one.after),
            b(route.after),
            b(worst.after),
            b(g_after)
        );
        println!(
            "| `heap_bytes()` after | {} | {} | {} | n/a |",
            b(one.heap_bytes),
            b(route.heap_bytes),
            b(worst.heap_bytes)
        );
        println!(
            "| keys held one by one | {} | {} | {} | {g_len} |",
            one.tracked, route.tracked, worst.tracked
        );
        println!(
            "| bytes per key held (heap after / keys) | {:.1} | {:.1} | {:.1} | {:.1} |",
            one.after as f64 / one.tracked as f64,
            route.after as f64 / route.tracked as f64,
            worst.after as f64 / worst.tracked as f64,
            g_after as f64 / g_len as f64
        );
        println!(
            "| requests let through | {} of {FLOOD} | {} of {FLOOD} | {} of 1 (the new key) | {g_within} of {FLOOD} |",
            one.within, route.within, worst.within
        );
        println!(
            "| innocents refused | {} ({:.3} %) | {} ({:.3} %) | | {} ({:.3} %) |",
            FLOOD - one.within,
            f64::from(FLOOD - one.within) / f64::from(FLOOD) * 100.0,
            FLOOD - route.within,
            f64::from(FLOOD - route.within) / f64::from(FLOOD) * 100.0,
            FLOOD - g_within,
            f64::from(FLOOD - g_within) / f64::from(FLOOD) * 100.0,
        );
        println!(
            "| heavy hitter let through, before / after the table filled (limit) | {} / {} ({}) | {} / {} ({}) | | |",
            one.heavy.0,
            one.heavy.1,
            ADDRESS_LIMIT.requests,
            route.heavy.0,
            route.heavy.1,
            ROUTE_LIMIT.requests,
        );
        println!(
            "| peak / bound | {:.3} | {:.3} | {:.3} | {:.1} |",
            one.peak as f64 / bound as f64,
            route.peak as f64 / bound as f64,
            worst.peak as f64 / bound as f64,
            g_peak as f64 / bound as f64,
        );
        println!();
        println!(
            "Bound: heap_bytes() = {at_rest} B ({}) at rest (the {} table slots and {SKETCHES} sketches of {SKETCH_ROWS} x {SKETCH_WIDTH} counters, allocated once); \
             with a sweep's list of at most max_keys x {ENTRY} B = {} B, {bound} B ({}) at the peak.",
            mib(at_rest),
            (max / 7 * 8).next_power_of_two(),
            max * ENTRY,
            mib(bound),
        );
    }
}
