//! Heap used by the in-isolate counter (`WindowCounter`), measured with a
//! counting global allocator, beside the `governor` crate's keyed limiter.
//!
//! Run: `cargo bench -p runtime --bench memory`
//!
//! Prints, as Markdown tables:
//! - bytes per tracked key: the heap a fresh counter holds after N distinct
//!   keys (N up to `DEFAULT_MAX_KEYS`), divided by N, and what the counter's
//!   own `heap_bytes()` says;
//! - a flood of 1,000,000 distinct addresses into
//!   `WindowCounter::new(DEFAULT_MAX_KEYS, seed)`: the peak heap while it
//!   runs and the heap after it, against `heap_bytes()` and the bound the
//!   counter documents (about 32 bytes a key, some 2 MiB at
//!   `DEFAULT_MAX_KEYS`, plus the overflow buckets), and governor's heap
//!   after the same flood.
//!
//! The counter's clock starts 300 ms before a minute window ends and moves
//! 1 ms every 1,000 checks, as in the `counter` bench, so the flood crosses
//! into the next window and the table is swept and refilled once.

use std::alloc::{GlobalAlloc, Layout, System};
use std::fmt::Write as _;
use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use runtime::counter::{DEFAULT_MAX_KEYS, OVERFLOW_BUCKETS, Verdict, WindowCounter};
use runtime::limits::ADDRESS_LIMIT;

/// Counts the bytes live on the heap and the most that were at once.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(bytes: usize) {
    let now = LIVE.fetch_add(bytes, Relaxed) + bytes;
    PEAK.fetch_max(now, Relaxed);
}

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

const T0_MS: u64 = 1_800_000_000_000 + 59_700;
const SEED: u128 = 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210;
const FLOOD: u32 = 1_000_000;

/// Writes the `i`th of 2^32 distinct IPv4 addresses (as the `counter`
/// bench's `address`) into `buf`, which is reused so nothing is allocated.
fn address(buf: &mut String, i: u32) -> &str {
    let a = i.wrapping_mul(0x9E37_79B1);
    buf.clear();
    write!(
        buf,
        "{}.{}.{}.{}",
        a >> 24,
        (a >> 16) & 255,
        (a >> 8) & 255,
        a & 255
    )
    .unwrap();
    buf
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

fn main() {
    let mut buf = String::with_capacity(32);
    let slot = 16; // size_of::<Slot>(): a u64 and a u32, padded.
    let empty = {
        let base = live();
        let c = WindowCounter::new(DEFAULT_MAX_KEYS, SEED);
        let bytes = live() - base;
        drop(black_box(c));
        bytes
    };

    println!("### Bytes per tracked key (WindowCounter, DEFAULT_MAX_KEYS = {DEFAULT_MAX_KEYS})\n");
    println!("Empty counter: {empty} B on the heap (the {OVERFLOW_BUCKETS} overflow buckets).\n");
    println!(
        "| keys N | heap | heap / N | (heap - empty) / N | heap_bytes() | peak while filling |"
    );
    println!("|---:|---:|---:|---:|---:|---:|");
    for n in [
        1_000u32,
        10_000,
        28_672,
        28_673,
        57_344,
        57_345,
        DEFAULT_MAX_KEYS as u32,
    ] {
        let base = live();
        reset_peak();
        let mut c = WindowCounter::new(DEFAULT_MAX_KEYS, SEED);
        for i in 0..n {
            black_box(c.hit(ADDRESS_LIMIT, address(&mut buf, i), now_ms(i)));
        }
        assert_eq!(c.tracked_keys(), n as usize);
        let heap = live() - base;
        println!(
            "| {n} | {heap} | {:.1} | {:.1} | {} | {} |",
            heap as f64 / f64::from(n),
            (heap - empty) as f64 / f64::from(n),
            c.heap_bytes(),
            peak() - base,
        );
        drop(c);
    }

    // The flood: 1,000,000 distinct addresses into one counter.
    let base = live();
    reset_peak();
    let mut c = WindowCounter::new(DEFAULT_MAX_KEYS, SEED);
    let mut within = 0u32;
    for i in 0..FLOOD {
        within +=
            u32::from(c.hit(ADDRESS_LIMIT, address(&mut buf, i), now_ms(i)) == Verdict::Within);
    }
    let (c_peak, c_after, c_said, c_tracked) = (
        peak() - base,
        live() - base,
        c.heap_bytes(),
        c.tracked_keys(),
    );
    drop(c);

    let base = live();
    reset_peak();
    let g = governor();
    let mut g_within = 0u32;
    for i in 0..FLOOD {
        let key = address(&mut buf, i).to_owned();
        g_within += u32::from(g.check_key(&key).is_ok());
        drop(key); // the caller's copy; governor keeps its own clone
    }
    let (g_peak, g_after, g_len) = (peak() - base, live() - base, g.len());
    drop(g);

    // The bounds the counter states: "about 32 bytes a key ... some 2 MiB
    // at most" for the table, and its test's bound: twice the keys at one
    // (u64, Slot) entry and a control byte each, plus the buckets.
    let documented = DEFAULT_MAX_KEYS * 32 + OVERFLOW_BUCKETS * slot;
    let test_bound = 2 * DEFAULT_MAX_KEYS * (8 + slot + 1) + OVERFLOW_BUCKETS * slot;

    println!("\n### A flood of {FLOOD} distinct addresses\n");
    println!("| | WindowCounter | governor keyed |");
    println!("|---|---:|---:|");
    println!(
        "| peak heap during the flood | {c_peak} B ({}) | {g_peak} B ({}) |",
        mib(c_peak),
        mib(g_peak)
    );
    println!(
        "| heap after the flood | {c_after} B ({}) | {g_after} B ({}) |",
        mib(c_after),
        mib(g_after)
    );
    println!(
        "| `heap_bytes()` after the flood | {c_said} B ({}) | n/a |",
        mib(c_said)
    );
    println!("| keys held one by one | {c_tracked} | {g_len} |");
    println!(
        "| bytes per key held (heap after / keys) | {:.1} | {:.1} |",
        c_after as f64 / c_tracked as f64,
        g_after as f64 / g_len as f64
    );
    println!("| checks let through | {within} | {g_within} |");
    println!();
    println!(
        "Documented bound: DEFAULT_MAX_KEYS x 32 B = {} B ({}) for the table, {} B ({}) with the {OVERFLOW_BUCKETS} buckets.",
        DEFAULT_MAX_KEYS * 32,
        mib(DEFAULT_MAX_KEYS * 32),
        documented,
        mib(documented),
    );
    println!(
        "Bound in counter.rs's flood test (2 x max_keys x 25 B + buckets): {test_bound} B ({}).",
        mib(test_bound)
    );
    println!(
        "Peak / documented bound: {:.2}; peak / test bound: {:.2}; peak / heap_bytes(): {:.2}.",
        c_peak as f64 / documented as f64,
        c_peak as f64 / test_bound as f64,
        c_peak as f64 / c_said as f64,
    );
}
