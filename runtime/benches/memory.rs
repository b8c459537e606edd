//! Heap used by the in-isolate counter (`WindowCounter`), measured with a
//! counting global allocator, beside the `governor` crate's keyed limiter;
//! and every limit under a flood, through the limiter's public API.
//!
//! Run: `cargo bench -p runtime --bench memory` (~1 minute after the build)
//!
//! The counter allocates its table when it is built (32,768 slots of a
//! 16-byte `(u64, Slot)` entry and a control byte, filled to 7/8, so
//! `DEFAULT_MAX_KEYS` = 28,672 keys) and each limit's sketch the first time
//! the table has no room for one of that limit's keys, and says so in
//! `heap_bytes()`; a sweep (reclaiming ended windows when the table is full)
//! briefly adds a list of the live entries, at most `max_keys` of them.
//! `bound()` adds all of it up: the table, a sweep's list, every sketch.
//!
//! Prints, as Markdown tables:
//! - the heap of `WindowCounter::new(DEFAULT_MAX_KEYS, &[], seed)` after N
//!   distinct keys (N from 0 to 1,000,000), the keys it tracks one by one,
//!   bytes per tracked key, `heap_bytes()`, and the peak while filling;
//! - three floods of 1,000,000 distinct addresses, each with its peak heap,
//!   its heap after, and its bound:
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
//!     start) and another from a second address after it filled (half-way);
//!   - `worst sweep`: a table full of live 60-second entries but one
//!     10-second one; once that ends, a new key sweeps and keeps
//!     `max_keys - 1` entries, the largest list a sweep can build.
//! - every limit under a flood (see `flood_table`): one application with a
//!   route for each of 1, 2, 5, 20, 120 and 600 requests per 10, 60 and
//!   3600 s, and `/login` at 5 per 60 s, driven through `Limiter::checks`
//!   and `Limiter::conclude` counting in memory: the new users refused after
//!   300,000 keys on a route, on that route and on every other; after
//!   1,000,000 addresses on a path with no route of its own; the built-in
//!   limits under 1,000,000 addresses or callers; and where keys sending
//!   twice their limit are refused, before the table fills and after; with
//!   each run's peak heap against the application's bound.
//!
//! - the budget (`budget`, alone with `cargo bench -p runtime --bench memory
//!   -- budget`): a Workers deployable with 1, 10, 100 and 1,000 routes of
//!   limits from 1 to 70,000 per 10 and 60 s, its binding failing, so every
//!   request counts in memory: the bound unshared (as at 5fd830b, every
//!   route's sketch for 300,000 keys) and shared within
//!   `WORKERS_MEMORY_BUDGET`, the keys a route's sketch gets, the heap after
//!   40,000 addresses over all the routes (every sketch in use) and its peak,
//!   and the new users refused on `/r/0` after a flood of as many addresses
//!   as its sketch is sized for.
//!
//! A moving `realloc` is counted as both blocks live at once (peak), as the
//! allocator may copy; the numbers are an upper bound on what the heap held.

use std::alloc::{GlobalAlloc, Layout, System};
use std::fmt::Write as _;
use std::hint::black_box;
use std::net::Ipv4Addr;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use runtime::Subject;
use runtime::limiter::{BackendAnswer, FallbackReason};
use runtime::limiter::{Limiter, Now, Refusal};
use runtime::unstable_for_tools::counter::{
    DEFAULT_MAX_KEYS, MemoryBound, Verdict, WORKERS_MEMORY_BUDGET, WindowCounter,
};
use runtime::unstable_for_tools::limits::{ADDRESS_LIMIT, CALLER_LIMIT, Limit};
use runtime::{Application, ClientAddress};

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
    /// `bound().total()`: the most the counter can hold.
    bound: usize,
    tracked: usize,
    within: u32,
    /// What the heavy hitters were let through: (before the table filled, after).
    heavy: (u32, u32),
}

/// Runs `hits` on a fresh counter built for `routes` and measures its heap.
fn flood(routes: &[Limit], hits: impl FnOnce(&mut WindowCounter) -> (u32, (u32, u32))) -> Flood {
    let base = live();
    reset_peak();
    let mut c = WindowCounter::new(DEFAULT_MAX_KEYS, routes, SEED);
    let (within, heavy) = hits(&mut c);
    let flood = Flood {
        peak: peak() - base,
        after: live() - base,
        heap_bytes: c.heap_bytes(),
        bound: c.bound().total(),
        tracked: c.tracked_keys(),
        within,
        heavy,
    };
    drop(c);
    flood
}

fn main() {
    if std::env::args().any(|a| a == "budget") {
        budget_table();
        return;
    }
    let mut buf = String::with_capacity(48);
    bytes_per_tracked_key(&mut buf);
    let floods = Floods {
        one: flood_one_limit(&mut buf),
        route: flood_route_limit(&mut buf),
        worst: flood_worst_sweep(&mut buf),
        governor: flood_governor(&mut buf),
    };
    floods.print();
    flood_table();
    budget_table();
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
        let mut c = WindowCounter::new(max, &[], SEED);
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
    flood(&[], |c| {
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
    flood(&[ROUTE_LIMIT], |c| {
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
    flood(&[ROUTE_LIMIT], |c| {
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
            "| bound: `bound().total()` | {} | {} | {} | none |",
            b(one.bound),
            b(route.bound),
            b(worst.bound),
        );
        println!(
            "| peak / bound | {:.3} | {:.3} | {:.3} | {:.1} (of the one-limit bound) |",
            one.peak as f64 / one.bound as f64,
            route.peak as f64 / route.bound as f64,
            worst.peak as f64 / worst.bound as f64,
            g_peak as f64 / one.bound as f64,
        );
        println!();
        for (what, routes) in [
            ("the built-in limits only", &[][..]),
            ("and a route of 20 per 10 s", &[ROUTE_LIMIT][..]),
        ] {
            println!("Bound, {what}: {}", bound_line(routes));
        }
    }
}

// ---------------------------------------------------------------------------
// Every limit under a flood, through the limiter's public API.

/// The route limits the table covers: every size by every window length.
const LIMITS: [u32; 6] = [1, 2, 5, 20, 120, 600];
const WINDOWS: [u32; 3] = [10, 60, 3600];
/// Distinct keys in a flood on one route, and on the built-in limits.
const ROUTE_FLOOD: u32 = 300_000;
const BUILT_IN_FLOOD: u32 = 1_000_000;
/// New users (one request each) measured on the flooded route, and on each other route.
const NEW_USERS: u32 = 10_000;
const NEW_USERS_ELSEWHERE: u32 = 2_000;
/// Keys that send twice their limit, before the table fills and after.
const OVER_LIMIT_KEYS: u32 = 1_000;
/// An hour boundary, so every window length starts together; floods start a second in.
const HOUR_MS: u64 = 1_800_000_000_000;
const START_MS: u64 = HOUR_MS + 1_000;
/// A path no route limits: only the built-in limit counts it.
const ELSEWHERE: &str = "/elsewhere";
const LOGIN: &str = "/login";
const LOGIN_LIMIT: Limit = Limit::new(5, 60);

/// Disjoint ranges of subject indexes, one per role, so no two roles share a key.
const NEW_BASE: u32 = 0x4000_0000;
const ELSEWHERE_BASE: u32 = 0x5000_0000;
const BEFORE_BASE: u32 = 0x6000_0000;
const AFTER_BASE: u32 = 0x7000_0000;

fn route_path(limit: Limit) -> String {
    format!("/r/{}-per-{}s", limit.requests, limit.window_seconds)
}

/// Every route of the flood application: one per limit x window, then `/login`.
fn flood_routes() -> Vec<(String, Limit)> {
    let mut routes: Vec<(String, Limit)> = WINDOWS
        .iter()
        .flat_map(|&w| LIMITS.iter().map(move |&r| Limit::new(r, w)))
        .map(|limit| (route_path(limit), limit))
        .collect();
    routes.push((LOGIN.to_owned(), LOGIN_LIMIT));
    routes
}

/// One application with every route of [`flood_routes`], counting in memory.
fn flood_app(routes: &[(String, Limit)]) -> Application {
    let mut toml =
        String::from("[[deployables]]\nname = \"api\"\ntarget = \"native\"\nserves_api = true\n");
    for (path, limit) in routes {
        writeln!(
            toml,
            "[[routes]]\npath = \"{path}\"\nrate_limit = {{ requests = {}, window = {} }}",
            limit.requests, limit.window_seconds
        )
        .unwrap();
    }
    Application::from_toml(&toml).expect("the flood application is valid")
}

fn anonymous(i: u32) -> Subject {
    Subject::Address(ClientAddress::V4(Ipv4Addr::from(
        i.wrapping_mul(0x9E37_79B1),
    )))
}

fn signed_in(i: u32) -> Subject {
    Subject::Caller(format!("user-{i}"))
}

/// One request through `checks` and `conclude`, every check counted in memory.
fn request(limiter: &mut Limiter, subject: &Subject, path: &str, now: u64) -> Option<Refusal> {
    let checks = limiter.checks(subject, "GET", path).expect("a short path");
    let now = Now::one_clock(now);
    let pending = limiter.asks(checks, now);
    limiter.conclude(pending, now).refusal
}

/// A flood of `n` distinct subjects (indexes from 0), one request each, 1 ms
/// every 1,000 requests from [`START_MS`]; returns the time after it.
fn flood_of(limiter: &mut Limiter, n: u32, path: &str, who: fn(u32) -> Subject) -> u64 {
    for i in 0..n {
        let now = START_MS + u64::from(i) / 1_000;
        black_box(request(limiter, &who(i), path, now));
    }
    START_MS + u64::from(n) / 1_000 + 1
}

/// How many of `n` new subjects (indexes from `base`), one request each, are refused on `path`.
fn new_users_refused(
    limiter: &mut Limiter,
    (n, base): (u32, u32),
    path: &str,
    who: fn(u32) -> Subject,
    now: u64,
) -> u32 {
    (0..n)
        .filter(|&i| request(limiter, &who(base + i), path, now).is_some())
        .count() as u32
}

/// Where [`OVER_LIMIT_KEYS`] keys sending twice their limit were first
/// refused by the limit named `policy`: how many requests it let through.
struct RefusalPoints {
    limit: u32,
    min: u32,
    max: u32,
    /// Refused before their limit, and let past it.
    early: u32,
    late: u32,
}

impl RefusalPoints {
    fn measure(
        limiter: &mut Limiter,
        base: u32,
        (path, policy, limit): (&str, &str, u32),
        who: fn(u32) -> Subject,
        now: u64,
    ) -> RefusalPoints {
        let mut points = RefusalPoints {
            limit,
            min: u32::MAX,
            max: 0,
            early: 0,
            late: 0,
        };
        for k in 0..OVER_LIMIT_KEYS {
            let subject = who(base + k);
            let through = (0..2 * limit)
                .find(|_| {
                    request(limiter, &subject, path, now)
                        .is_some_and(|r| r.policies.iter().any(|p| p.name == policy))
                })
                .unwrap_or(2 * limit);
            points.min = points.min.min(through);
            points.max = points.max.max(through);
            points.early += u32::from(through < limit);
            points.late += u32::from(through > limit);
        }
        points
    }

    /// `let through (min-max); early N of 1,000`, late ones in bold.
    fn cell(&self) -> String {
        let range = if self.min == self.max {
            self.min.to_string()
        } else {
            format!("{}-{}", self.min, self.max)
        };
        let early = f64::from(self.early) / f64::from(OVER_LIMIT_KEYS) * 100.0;
        let mut cell = format!("{range}; early {}", self.early);
        if early > 1.0 {
            cell = format!("**{cell}**");
        }
        if self.late > 0 {
            write!(cell, "; **over the limit {}**", self.late).unwrap();
        }
        debug_assert!(self.max <= 2 * self.limit);
        cell
    }
}

/// `x.xx %`, in bold above 1 %.
fn pct(refused: u32, of: u32) -> String {
    let share = f64::from(refused) / f64::from(of) * 100.0;
    if share > 1.0 {
        format!("**{share:.2} %**")
    } else {
        format!("{share:.2} %")
    }
}

/// Runs `run` on a fresh limiter; returns its result and the peak heap over the heap before.
fn measured<T>(app: &Application, run: impl FnOnce(&mut Limiter) -> T) -> (T, usize) {
    let base = live();
    reset_peak();
    let mut limiter = Limiter::new(app, "api", SEED).expect("the deployable exists");
    let result = run(&mut limiter);
    let peak = peak() - base;
    drop(limiter);
    (result, peak)
}

/// A flood of distinct subjects, one request each, on one path.
struct Flooded<'a> {
    path: &'a str,
    /// The limit measured: its name in `RateLimit-Policy`, and its requests.
    policy: &'a str,
    limit: u32,
    subjects: u32,
    who: fn(u32) -> Subject,
}

/// What one flood did: new users refused on its path and (the worst) on
/// another route, and where over-limit keys were refused before and after it.
struct Row {
    same: u32,
    worst_other: (u32, String),
    before: RefusalPoints,
    after: RefusalPoints,
}

/// Runs `flooded` on a fresh limiter: over-limit keys, the flood, new users
/// on its path and on every other route, over-limit keys again. Returns the
/// row and the peak heap.
fn flooded_row(app: &Application, routes: &[(String, Limit)], f: &Flooded) -> (Row, usize) {
    measured(app, |l| {
        let over = (f.path, f.policy, f.limit);
        let before = RefusalPoints::measure(l, BEFORE_BASE, over, f.who, START_MS);
        let t = flood_of(l, f.subjects, f.path, f.who);
        let same = new_users_refused(l, (NEW_USERS, NEW_BASE), f.path, f.who, t);
        let worst_other = (0..routes.len() as u32)
            .filter(|&m| routes[m as usize].0 != f.path)
            .map(|m| {
                let base = ELSEWHERE_BASE + m * NEW_USERS_ELSEWHERE;
                let other = &routes[m as usize].0;
                let refused = new_users_refused(l, (NEW_USERS_ELSEWHERE, base), other, f.who, t);
                (refused, other.clone())
            })
            .max()
            .unwrap_or_default();
        let after = RefusalPoints::measure(l, AFTER_BASE, over, f.who, t);
        Row {
            same,
            worst_other,
            before,
            after,
        }
    })
}

fn flood_table() {
    let routes = flood_routes();
    let app = flood_app(&routes);
    let route_limits: Vec<Limit> = routes.iter().map(|(_, limit)| *limit).collect();
    let bound = WindowCounter::new(DEFAULT_MAX_KEYS, &route_limits, SEED).bound();
    let mut most = 0;

    // A flood on a path with no route of its own, then new users on every route.
    let (after_elsewhere, peak) = measured(&app, |l| {
        let t = flood_of(l, BUILT_IN_FLOOD, ELSEWHERE, anonymous);
        (0..routes.len() as u32)
            .map(|n| {
                let base = ELSEWHERE_BASE + n * NEW_USERS_ELSEWHERE;
                let (path, _) = &routes[n as usize];
                new_users_refused(l, (NEW_USERS_ELSEWHERE, base), path, anonymous, t)
            })
            .collect::<Vec<u32>>()
    });
    most = most.max(peak);

    println!(
        "\n### Every limit under a flood (through `Limiter::checks`, `asks` and `conclude`, counting in memory)\n"
    );
    println!(
        "One application with a route for each limit below and `{LOGIN}` ({} per {} s); a new user sends one request \
         ({NEW_USERS} of them on the flooded route, {NEW_USERS_ELSEWHERE} on each other route: the worst route shown). \
         {OVER_LIMIT_KEYS} over-limit keys send twice their limit before the flood (the exact table empty) and after it \
         (the table full): what the limit let through (min-max), and how many it refused early. Over 1 % in bold.\n",
        LOGIN_LIMIT.requests, LOGIN_LIMIT.window_seconds
    );
    println!(
        "| limit | new users refused after {ROUTE_FLOOD} keys on its route | on the other routes after it (worst) | on its route after {BUILT_IN_FLOOD} addresses on `{ELSEWHERE}` | over-limit keys before the table fills | after |"
    );
    println!("|---|---:|---:|---:|---|---|");
    let flooded = routes
        .iter()
        .take(routes.len() - 1)
        .map(|(path, limit)| {
            (
                format!("{} per {} s", limit.requests, limit.window_seconds),
                path.as_str(),
                path.as_str(),
                *limit,
                ROUTE_FLOOD,
                anonymous as fn(u32) -> Subject,
            )
        })
        .chain(
            [
                ("address", ADDRESS_LIMIT, anonymous as fn(u32) -> Subject),
                ("caller", CALLER_LIMIT, signed_in as fn(u32) -> Subject),
            ]
            .map(|(name, limit, who)| {
                (
                    format!(
                        "{} per {} s, {name} (built in), after {BUILT_IN_FLOOD}",
                        limit.requests, limit.window_seconds
                    ),
                    ELSEWHERE,
                    name,
                    limit,
                    BUILT_IN_FLOOD,
                    who,
                )
            }),
        );
    for (n, (label, path, policy, limit, subjects, who)) in flooded.enumerate() {
        let flood = Flooded {
            path,
            policy,
            limit: limit.requests,
            subjects,
            who,
        };
        let (row, peak) = flooded_row(&app, &routes, &flood);
        most = most.max(peak);
        let elsewhere = after_elsewhere
            .get(n)
            .filter(|_| path != ELSEWHERE)
            .map_or(String::new(), |&refused| pct(refused, NEW_USERS_ELSEWHERE));
        println!(
            "| {label} | {} | {} (`{}`) | {elsewhere} | {} | {} |",
            pct(row.same, NEW_USERS),
            pct(row.worst_other.0, NEW_USERS_ELSEWHERE),
            row.worst_other.1,
            row.before.cell(),
            row.after.cell(),
        );
    }
    let login = routes.len() - 1;
    println!(
        "\n`{LOGIN}` after {BUILT_IN_FLOOD} addresses on `{ELSEWHERE}`: {} of its new users refused. \
         Memory: the most any run above held was {most} B ({}), against this application's bound \
         ({} routes with a limit; {} sketches): {} B ({}), {:.3} of it.",
        pct(after_elsewhere[login], NEW_USERS_ELSEWHERE),
        mib(most),
        routes.len(),
        bound.sketches.len(),
        bound.total(),
        mib(bound.total()),
        most as f64 / bound.total() as f64,
    );
}

/// `bound()` of a counter built for `routes`, part by part.
fn bound_line(routes: &[Limit]) -> String {
    let bound = WindowCounter::new(DEFAULT_MAX_KEYS, routes, SEED).bound();
    format!("{bound} ({})", mib(bound.total()))
}

/// Route `i`'s limit in [`budget_table`]: requests from 1 to 70,000
/// (counters of 0, 1, 2 and 4 bytes), both windows the binding counts.
fn budget_limit(i: usize) -> Limit {
    const REQUESTS: [u32; 6] = [1, 5, 20, 300, 1_000, 70_000];
    Limit::new(
        REQUESTS[i % REQUESTS.len()],
        [10, 60][i / REQUESTS.len() % 2],
    )
}

/// A Workers deployable `edge` counting through Cloudflare's binding, with
/// `n` routes `/r/I` of [`budget_limit`]s.
fn workers_app(n: usize) -> Application {
    let mut toml = String::from(
        "[connections.limits]\ndriver = \"cloudflare_rate_limits\"\nnamespace = 1001\n\
         [rate_limits]\nstore = \"limits\"\n\
         [[deployables]]\nname = \"edge\"\ntarget = \"workers\"\nserves_api = true\n",
    );
    for i in 0..n {
        let limit = budget_limit(i);
        writeln!(
            toml,
            "[[routes]]\npath = \"/r/{i}\"\nrate_limit = {{ requests = {}, window = {} }}",
            limit.requests, limit.window_seconds
        )
        .unwrap();
    }
    Application::from_toml(&toml).expect("the budget application is valid")
}

/// One request with every binding asked failing: counted in memory.
/// Whether it was refused.
fn request_binding_failing(limiter: &mut Limiter, subject: &Subject, path: &str, now: u64) -> bool {
    let checks = limiter
        .checks(subject, "GET", path)
        .expect("a path within the bound");
    let mut pending = limiter.asks(checks, Now::one_clock(now));
    for ask in pending.asks() {
        ask.answer(BackendAnswer::Unavailable(FallbackReason::Failed));
    }
    limiter
        .conclude(pending, Now::one_clock(now))
        .refusal
        .is_some()
}

/// The budget at 1, 10, 100 and 1,000 routes, as a table.
fn budget_table() {
    const SPREAD: u32 = 40_000;
    const NEW: u32 = 2_000;
    println!("### The in-memory budget: a Workers deployable by its routes, its binding failing\n");
    println!(
        "Budget: `WORKERS_MEMORY_BUDGET` = {WORKERS_MEMORY_BUDGET} B ({}). Routes `/r/I` of 1, 5, 20, 300, 1,000 and 70,000 requests per 10 and 60 s; every request answered `failed` by its binding, so counted in memory. Heap: the counting allocator's live bytes over those before the limiter was built, after {SPREAD} addresses (one request each, route `I mod N`: the table fills at 14,336, then every route's sketch is in use); peak over the whole run. Then as many addresses as a route's sketch is sized for on `/r/0` (1 per 10 s) and {NEW} new users there.\n",
        mib(WORKERS_MEMORY_BUDGET)
    );
    println!(
        "| routes | bound unshared (5fd830b), B | bound shared, B | keys a route's sketch | heap after {SPREAD} addresses, B | `heap_bytes()`, B | peak, B | peak ÷ budget | new users refused on `/r/0` after its flood |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for n in [1usize, 10, 100, 1_000] {
        let app = workers_app(n);
        let limits: Vec<Limit> = (0..n).map(budget_limit).collect();
        let unshared = MemoryBound::within(DEFAULT_MAX_KEYS, &limits, usize::MAX).total();
        let base = live();
        reset_peak();
        let mut limiter = Limiter::new(&app, "edge", SEED).expect("edge");
        let bound = limiter.memory_bound_bytes();
        let route_keys =
            MemoryBound::within(DEFAULT_MAX_KEYS, &limits, WORKERS_MEMORY_BUDGET).route_keys;
        for i in 0..SPREAD {
            let path = format!("/r/{}", i as usize % n);
            let now = START_MS + u64::from(i / 1_000);
            black_box(request_binding_failing(
                &mut limiter,
                &anonymous(i),
                &path,
                now,
            ));
        }
        let after = live() - base;
        let heap_bytes = limiter.memory_bytes();
        let t = START_MS + 100;
        for i in 0..route_keys as u32 {
            let who = anonymous(0x1000_0000 + i);
            black_box(request_binding_failing(&mut limiter, &who, "/r/0", t));
        }
        let refused = (0..NEW)
            .filter(|&i| request_binding_failing(&mut limiter, &anonymous(NEW_BASE + i), "/r/0", t))
            .count() as u32;
        let peak = peak() - base;
        drop(limiter);
        println!(
            "| {n} | {unshared} ({}) | {bound} ({}) | {route_keys} | {after} ({}) | {heap_bytes} | {peak} ({}) | {:.3} | {} |",
            mib(unshared),
            mib(bound),
            mib(after),
            mib(peak),
            peak as f64 / WORKERS_MEMORY_BUDGET as f64,
            pct(refused, NEW),
        );
    }
    println!();
}
