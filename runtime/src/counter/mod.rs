//! The in-isolate counter: fixed windows aligned to the clock, per limit and
//! key, in a bounded amount of memory.

use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};

use siphasher::sip::SipHasher13;

use crate::limits::{BUILT_IN_LIMITS, Limit};

mod sketch;

use sketch::LimitSketch;

/// How many keys are tracked one by one before the sketches take over: 7/8
/// of 32,768 table slots, so the table, allocated once at its full size,
/// never grows (557,072 B, and 458,752 B more during a sweep).
pub const DEFAULT_MAX_KEYS: usize = 28_672;

/// Distinct keys in one window the sketch of a built-in limit is sized for:
/// any request counts under one, so a flood of addresses anywhere lands there.
pub const BUILT_IN_FLOOD_KEYS: usize = 1_000_000;

/// Distinct keys in one window the sketch of a route's limit is sized for,
/// per route with that limit, when the budget has room: the most a route
/// gets ([`MemoryBound::within`] shares the budget out below it).
pub const ROUTE_FLOOD_KEYS: usize = 300_000;

/// The most a Worker isolate's in-memory counting holds, table, sweep and
/// every sketch together: 32 MiB of the isolate's 128 MB, so the
/// application keeps three quarters of it. It holds the table and the
/// built-in limits' sketches (4.4 MB) and 45 routes' sketches at their full
/// [`ROUTE_FLOOD_KEYS`]; more routes share what is left (docs/design.md).
pub const WORKERS_MEMORY_BUDGET: usize = 32 << 20;

/// A native deployable's budget unless it sets `memory_budget_mib`: the
/// Workers' figure, so an application counts alike on both.
pub const DEFAULT_MEMORY_BUDGET: usize = WORKERS_MEMORY_BUDGET;

/// The fewest keys a route's sketch may be sized for: below it, a flood of
/// a few thousand addresses (one small network's) would refuse most new
/// users of the route, so validation refuses a description whose routes
/// cannot each have this many within its budget
/// (`rate_limits.memory_over_budget`).
pub const MIN_ROUTE_FLOOD_KEYS: usize = 1_000;

/// Whether a request is within its limit, the same answer the binding gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Within the limit: counted, and let through.
    Within,
    /// Over the limit: refused, and not counted.
    Exceeded,
}

/// One count: 8 bytes, so a tracked key costs 17 bytes of table.
#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    /// When the window this count belongs to ends, in whole seconds since
    /// the epoch (windows are whole seconds; u32 lasts until 2106).
    ends_at_s: u32,
    count: u32,
}

impl Slot {
    fn is_live(&self, now_ms: u64) -> bool {
        now_ms < u64::from(self.ends_at_s) * 1000
    }
}

/// When the window of `window_s` seconds holding `now_ms` ends, in whole
/// seconds since the epoch (windows are aligned: `floor(now / window)`).
fn window_end_s(window_s: u32, now_ms: u64) -> u32 {
    let window_s = u64::from(window_s.max(1));
    u32::try_from((now_ms / 1000 / window_s + 1) * window_s).unwrap_or(u32::MAX)
}

/// Keys are already keyed SipHash digests, so the table hashes them no further.
type DigestMap = HashMap<u64, Slot, BuildHasherDefault<PassThrough>>;

#[derive(Default)]
struct PassThrough(u64);

impl Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only u64 keys are hashed; fold anything else in so it stays correct.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// The most memory a counter holds, and where: the exact table from the
/// start, a sweep's list for a moment, and each limit's sketch from the
/// first time the table has no room for one of its keys; and the budget it
/// was shared out under. docs/design.md gives the formula; `harness
/// validate` prints it for each deployable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryBound {
    /// The bytes the counter was sized to stay within.
    pub budget: usize,
    /// Distinct keys in one window each route's sketch is sized for (per
    /// route: two routes with one limit share a sketch of twice as many).
    pub route_keys: usize,
    /// The exact table's slots, allocated when the counter is built.
    pub table: usize,
    /// The list of live entries a sweep of the full table builds.
    pub sweep: usize,
    /// One per limit counted.
    pub sketches: Vec<SketchBound>,
}

/// The most one limit's sketch holds: its place in the counter's list of
/// sketches (72 B on a 64-bit target), its filter and its counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SketchBound {
    /// The limit it counts.
    pub limit: Limit,
    /// Distinct keys in one window it is sized for.
    pub keys: usize,
    /// Its bytes once in use.
    pub bytes: usize,
}

/// One sketch's share: its limit, the keys it has whatever the budget (a
/// built-in limit's), and how many routes share it out of the budget.
struct Share {
    limit: Limit,
    fixed_keys: usize,
    routes: usize,
}

impl Share {
    /// Keys it is sized for when each route has `route_keys`.
    fn keys(&self, route_keys: usize) -> usize {
        self.fixed_keys
            .saturating_add(self.routes.saturating_mul(route_keys))
    }
}

/// The built-in limits and `routes`, one share a distinct limit, in the
/// order first given (built-in limits first).
fn shares(routes: &[Limit]) -> Vec<Share> {
    let mut shares: Vec<Share> = BUILT_IN_LIMITS
        .iter()
        .map(|&limit| Share {
            limit,
            fixed_keys: BUILT_IN_FLOOD_KEYS,
            routes: 0,
        })
        .collect();
    for &limit in routes {
        match shares.iter_mut().find(|s| s.limit == limit) {
            Some(share) => share.routes += 1,
            None => shares.push(Share {
                limit,
                fixed_keys: 0,
                routes: 1,
            }),
        }
    }
    shares
}

/// The sketches' bytes when each route has `route_keys`.
fn sketches_bytes(shares: &[Share], route_keys: usize) -> usize {
    shares.iter().fold(0, |sum: usize, s| {
        sum.saturating_add(LimitSketch::bound_bytes(s.limit, s.keys(route_keys)))
    })
}

/// The most keys a route's sketch can have, up to [`ROUTE_FLOOD_KEYS`], for
/// the sketches to fit in `room` bytes (at least 1, even when none fits).
fn route_keys_within(shares: &[Share], room: usize) -> usize {
    if sketches_bytes(shares, ROUTE_FLOOD_KEYS) <= room {
        return ROUTE_FLOOD_KEYS;
    }
    // The bytes grow with the keys: the largest count that fits, by bisection.
    let (mut fits, mut over) = (1, ROUTE_FLOOD_KEYS);
    if sketches_bytes(shares, fits) > room {
        return fits;
    }
    while over - fits > 1 {
        let mid = fits + (over - fits) / 2;
        if sketches_bytes(shares, mid) <= room {
            fits = mid;
        } else {
            over = mid;
        }
    }
    fits
}

impl MemoryBound {
    /// The bound of a counter tracking `max_keys` keys one by one for the
    /// built-in limits and `routes`, sharing `budget` out: the table, its
    /// sweep and the built-in limits' sketches first, then every route's
    /// sketch sized for the same number of keys, the most that fits (up to
    /// [`ROUTE_FLOOD_KEYS`]). What [`WindowCounter::with_budget`] builds.
    pub fn within(max_keys: usize, routes: &[Limit], budget: usize) -> MemoryBound {
        let max_keys = max_keys.max(1);
        MemoryBound::share(
            table_bytes(slots_for_keys(max_keys)),
            sweep_bytes(max_keys),
            routes,
            budget,
        )
    }

    /// The least budget a counter for `routes` keeps its promises within:
    /// the table, its sweep, the built-in limits' sketches and every route's
    /// sketch sized for [`MIN_ROUTE_FLOOD_KEYS`] keys.
    pub fn least_budget(max_keys: usize, routes: &[Limit]) -> usize {
        let max_keys = max_keys.max(1);
        (table_bytes(slots_for_keys(max_keys)) + sweep_bytes(max_keys))
            .saturating_add(sketches_bytes(&shares(routes), MIN_ROUTE_FLOOD_KEYS))
    }

    /// [`Self::within`] for a table and a sweep of known sizes.
    fn share(table: usize, sweep: usize, routes: &[Limit], budget: usize) -> MemoryBound {
        let shares = shares(routes);
        let room = budget.saturating_sub(table + sweep);
        let route_keys = route_keys_within(&shares, room);
        MemoryBound {
            budget,
            route_keys,
            table,
            sweep,
            sketches: shares
                .iter()
                .map(|s| {
                    let keys = s.keys(route_keys);
                    SketchBound {
                        limit: s.limit,
                        keys,
                        bytes: LimitSketch::bound_bytes(s.limit, keys),
                    }
                })
                .collect(),
        }
    }

    /// Everything at once: the most the counter can hold.
    pub fn total(&self) -> usize {
        self.sketches
            .iter()
            .fold(self.table + self.sweep, |sum, s| {
                sum.saturating_add(s.bytes)
            })
    }

    /// Whether it keeps its promises within its budget: the total within
    /// it, and every route's sketch sized for at least
    /// [`MIN_ROUTE_FLOOD_KEYS`] keys (validation refuses a deployable
    /// whose bound does not).
    pub fn fits(&self) -> bool {
        self.total() <= self.budget && self.route_keys >= MIN_ROUTE_FLOOD_KEYS
    }
}

/// Sketches listed one by one in [`MemoryBound`]'s text; the rest are summed.
const LISTED_SKETCHES: usize = 8;

impl fmt::Display for MemoryBound {
    /// `TOTAL B of a BUDGET B budget = table T B + sweep S B + R per W s for
    /// K keys B B + ...`, the sketches past the eighth summed as `+ N more
    /// sketches B B`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} B of a {} B budget = table {} B + sweep {} B",
            self.total(),
            self.budget,
            self.table,
            self.sweep
        )?;
        for s in self.sketches.iter().take(LISTED_SKETCHES) {
            write!(
                f,
                " + {} per {} s for {} keys {} B",
                s.limit.requests, s.limit.window_seconds, s.keys, s.bytes
            )?;
        }
        let rest = self.sketches.get(LISTED_SKETCHES..).unwrap_or_default();
        if !rest.is_empty() {
            let bytes = rest
                .iter()
                .fold(0usize, |sum, s| sum.saturating_add(s.bytes));
            write!(f, " + {} more sketches {} B", rest.len(), bytes)?;
        }
        Ok(())
    }
}

/// Counts requests per (limit, key) in fixed windows aligned to the clock
/// (`floor(now / window)`), answering like Cloudflare's binding: a request
/// is within the limit while the window's count is below it, and a request
/// that is refused is not counted.
///
/// Memory is bounded: an exact table of at most `max_keys` keys, each kept
/// as a 64-bit keyed digest (the key itself is never stored) with its own
/// window's end, and behind it one sketch per limit ([`MemoryBound`]). When
/// the table is full, entries whose window has ended are reclaimed first; if
/// it is still full, the key is counted in its limit's sketch: each key's
/// first request in a blocked Bloom filter, its later ones in a count-min
/// sketch with conservative update, counters as wide as the limit needs,
/// sized for [`BUILT_IN_FLOOD_KEYS`] keys a window for a built-in limit, and
/// for a route's limit the most keys up to [`ROUTE_FLOOD_KEYS`] that keep
/// every sketch together within the counter's budget ([`MemoryBound::within`]).
///
/// What is guaranteed, for any number of limits and window lengths:
/// - A count is never lower than the key's true count in its window: the
///   table is exact and never drops a live entry, a sketch never counts a key
///   lower than its true count, and a key that moves from its sketch into
///   the table takes its count with it. So nobody lets more than the limit
///   through by flooding, the flooder included.
/// - Every limit counts in its own window: a table entry ends when its
///   window ends, and a limit's sketch is cleared when the limit's window
///   ends, so no count restarts mid-window and no refusal outlives its window.
/// - The memory held never passes [`Self::bound`], which is within the
///   budget for any number of routes whose sketches can each have
///   [`MIN_ROUTE_FLOOD_KEYS`] (validation refuses more).
/// - A sketch only counts high: a key it holds may be refused early. At the
///   keys it is sized for, a new key is taken for one already counted 0.19 %
///   of the time (refused, for a limit of 1; let through one request fewer
///   than the limit, for any other); a flood on one limit never touches
///   another limit's sketch (BENCHMARKS.md measures both).
///
/// The digest key is random per counter, so a flooder cannot aim at chosen
/// counters.
pub struct WindowCounter {
    max_keys: usize,
    /// Table slots, fixed at construction (hashbrown fills 7/8 of them).
    table_slots: usize,
    /// The bytes its sketches were sized to stay within, with the table.
    budget: usize,
    /// Keys a route's sketch is sized for under the budget.
    route_keys: usize,
    tracked: DigestMap,
    /// One per limit, in the order first given; found by a scan (a handful).
    sketches: Vec<LimitSketch>,
    hasher: SipHasher13,
    /// The earliest end of any tracked window: no sweep before it, since
    /// nothing can be reclaimed earlier.
    earliest_end_ms: u64,
}

impl WindowCounter {
    /// A counter tracking up to `max_keys` keys one by one, for the built-in
    /// limits and routes whose limits are `routes`, within
    /// [`DEFAULT_MEMORY_BUDGET`] (see [`Self::with_budget`]).
    pub fn new(max_keys: usize, routes: &[Limit], seed: u128) -> WindowCounter {
        WindowCounter::with_budget(max_keys, routes, DEFAULT_MEMORY_BUDGET, seed)
    }

    /// A counter tracking up to `max_keys` keys one by one, for the built-in
    /// limits and routes whose limits are `routes` (a route each: two routes
    /// with one limit share a sketch twice the size), holding at most
    /// `budget` bytes: each route's sketch is sized for the most keys that
    /// fit ([`MemoryBound::within`]). `seed` keys the digest and should be
    /// random per isolate. The table is allocated here; each sketch the
    /// first time the table has no room for one of its keys.
    pub fn with_budget(
        max_keys: usize,
        routes: &[Limit],
        budget: usize,
        seed: u128,
    ) -> WindowCounter {
        let max_keys = max_keys.max(1);
        let tracked = DigestMap::with_capacity_and_hasher(max_keys, BuildHasherDefault::default());
        let table_slots = slots_for_capacity(tracked.capacity());
        let bound = MemoryBound::share(
            table_bytes(table_slots),
            sweep_bytes(max_keys),
            routes,
            budget,
        );
        let mut sketches: Vec<LimitSketch> = bound
            .sketches
            .iter()
            .map(|s| LimitSketch::new(s.limit, s.keys))
            .collect();
        // The list holds no spare room, so the sketches' bytes are all it holds.
        sketches.shrink_to_fit();
        WindowCounter {
            max_keys,
            table_slots,
            budget,
            route_keys: bound.route_keys,
            tracked,
            sketches,
            hasher: SipHasher13::new_with_keys(seed as u64, (seed >> 64) as u64),
            earliest_end_ms: u64::MAX,
        }
    }

    /// Counts one request for `key` against `limit` at `now_ms` (ms since the
    /// epoch). `now_ms` should not go backwards; when it does, counts last
    /// longer than their window, never shorter. A limit the counter was not
    /// built for gets a sketch sized as a route's when it first needs one,
    /// and [`Self::bound`] grows by it, past the budget if need be.
    pub fn hit(&mut self, limit: Limit, key: &str, now_ms: u64) -> Verdict {
        let digest = self.digest(limit, key);
        let ends_at_s = window_end_s(limit.window_seconds, now_ms);

        if let Some(slot) = self.tracked.get_mut(&digest) {
            if !slot.is_live(now_ms) {
                *slot = Slot {
                    ends_at_s,
                    count: 0,
                };
                self.earliest_end_ms = self.earliest_end_ms.min(u64::from(ends_at_s) * 1000);
            }
            return count_into(slot, limit);
        }

        let sketch = self.sketch_of(limit);
        if !self.has_room(now_ms) {
            return self.hit_sketch(sketch, digest, now_ms, ends_at_s);
        }
        // A key counted in its sketch this window keeps that count.
        let (count, ends_at_s) = self.sketches[sketch]
            .count(digest, now_ms)
            .map_or((0, ends_at_s), |(count, ends)| (count, ends.max(ends_at_s)));
        self.earliest_end_ms = self.earliest_end_ms.min(u64::from(ends_at_s) * 1000);
        let slot = self
            .tracked
            .entry(digest)
            .or_insert(Slot { ends_at_s, count });
        count_into(slot, limit)
    }

    /// Keys the digest with `seed` from now on, forgetting every count
    /// (counts keyed by the old seed would be found no more). Meant for a
    /// counter made before randomness could be drawn (a Worker's global
    /// scope refuses it) and reseeded before its first [`Self::hit`]; the
    /// table keeps its allocation, and no sketch has one yet.
    pub fn reseed(&mut self, seed: u128) {
        self.hasher = SipHasher13::new_with_keys(seed as u64, (seed >> 64) as u64);
        // Clearing rewrites every control byte even of an empty table, and a
        // Worker's gate is reseeded on its first request, empty.
        if !self.tracked.is_empty() {
            self.tracked.clear();
        }
        for sketch in &mut self.sketches {
            *sketch = LimitSketch::new(sketch.limit(), sketch.keys());
        }
        self.earliest_end_ms = u64::MAX;
    }

    /// How many keys are tracked one by one right now.
    pub fn tracked_keys(&self) -> usize {
        self.tracked.len()
    }

    /// The bytes this counter holds on the heap now: the table, and the
    /// sketches allocated so far.
    pub fn heap_bytes(&self) -> usize {
        self.table_bytes()
            + self
                .sketches
                .iter()
                .map(LimitSketch::heap_bytes)
                .sum::<usize>()
    }

    /// The most this counter holds: [`Self::heap_bytes`] once every sketch is
    /// in use, and a sweep's list of at most `max_keys` live entries (16 bytes each).
    pub fn bound(&self) -> MemoryBound {
        MemoryBound {
            budget: self.budget,
            route_keys: self.route_keys,
            table: self.table_bytes(),
            sweep: sweep_bytes(self.max_keys),
            sketches: self
                .sketches
                .iter()
                .map(|s| SketchBound {
                    limit: s.limit(),
                    keys: s.keys(),
                    bytes: LimitSketch::bound_bytes(s.limit(), s.keys()),
                })
                .collect(),
        }
    }

    fn table_bytes(&self) -> usize {
        table_bytes(self.table_slots)
    }

    fn digest(&self, limit: Limit, key: &str) -> u64 {
        let mut hasher = self.hasher;
        hasher.write_u32(limit.requests);
        hasher.write_u32(limit.window_seconds);
        hasher.write(key.as_bytes());
        hasher.finish()
    }

    /// The index of `limit`'s sketch, added if the counter was not built for it.
    fn sketch_of(&mut self, limit: Limit) -> usize {
        match self.sketches.iter().position(|s| s.limit() == limit) {
            Some(i) => i,
            None => {
                self.sketches.reserve_exact(1);
                self.sketches.push(LimitSketch::new(limit, self.route_keys));
                self.sketches.len() - 1
            }
        }
    }

    /// Whether a new key can be tracked, reclaiming ended windows when full.
    fn has_room(&mut self, now_ms: u64) -> bool {
        if self.tracked.len() < self.max_keys {
            return true;
        }
        if now_ms < self.earliest_end_ms {
            return false;
        }
        self.sweep(now_ms)
    }

    /// Counts a key the full table has no room for in its limit's sketch.
    /// Out of line, as is [`Self::sweep`]: neither runs until the table is
    /// full, and V8 compiles a wasm function whole on its first call, so the
    /// first request of a Worker compiles [`Self::hit`] without them.
    #[cold]
    #[inline(never)]
    fn hit_sketch(&mut self, sketch: usize, digest: u64, now_ms: u64, ends_at_s: u32) -> Verdict {
        self.sketches[sketch].hit(digest, now_ms, ends_at_s)
    }

    /// Reclaims the full table's ended windows; whether there is room now.
    #[cold]
    #[inline(never)]
    fn sweep(&mut self, now_ms: u64) -> bool {
        // Clear and refill rather than `retain`, so no deleted markers are
        // left behind to make the table grow past its allocation later.
        // Sized exactly, so the sweep never holds more than the live entries.
        let live_count = self
            .tracked
            .values()
            .filter(|slot| slot.is_live(now_ms))
            .count();
        let mut live: Vec<(u64, Slot)> = Vec::with_capacity(live_count);
        live.extend(
            self.tracked
                .iter()
                .filter(|(_, slot)| slot.is_live(now_ms))
                .map(|(k, v)| (*k, *v)),
        );
        self.earliest_end_ms = live
            .iter()
            .map(|(_, s)| u64::from(s.ends_at_s) * 1000)
            .min()
            .unwrap_or(u64::MAX);
        self.tracked.clear();
        self.tracked.extend(live);
        self.tracked.len() < self.max_keys
    }
}

/// The table's bytes for `slots` slots: a digest, a `Slot` and a control
/// byte each, plus one group of trailing control bytes.
fn table_bytes(slots: usize) -> usize {
    const GROUP_WIDTH: usize = 16;
    slots * (std::mem::size_of::<(u64, Slot)>() + 1) + GROUP_WIDTH
}

/// A sweep's list of at most `max_keys` live entries.
fn sweep_bytes(max_keys: usize) -> usize {
    max_keys * std::mem::size_of::<(u64, Slot)>()
}

/// hashbrown's slots for a table asked to hold `keys` (7/8 of a power of
/// two from 8 keys on, as [`slots_for_capacity`]; at most 16 below).
fn slots_for_keys(keys: usize) -> usize {
    if keys < 8 {
        16
    } else {
        (keys.saturating_mul(8) / 7).next_power_of_two()
    }
}

/// hashbrown's slot count for a table whose usable capacity is `capacity`
/// (it fills 7/8 of tables of 8 slots or more, and all but one of smaller ones).
fn slots_for_capacity(capacity: usize) -> usize {
    if capacity < 8 {
        (capacity + 1).next_power_of_two()
    } else {
        (capacity / 7 * 8).next_power_of_two()
    }
}

fn count_into(slot: &mut Slot, limit: Limit) -> Verdict {
    if slot.count >= limit.requests {
        Verdict::Exceeded
    } else {
        slot.count += 1;
        Verdict::Within
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::ADDRESS_LIMIT;

    const T0: u64 = 1_800_000_000_000; // aligned to a minute

    fn allowed(counter: &mut WindowCounter, limit: Limit, key: &str, now: u64, n: usize) -> usize {
        (0..n)
            .filter(|_| counter.hit(limit, key, now) == Verdict::Within)
            .count()
    }

    #[test]
    fn counts_up_to_the_limit_then_refuses_without_counting() {
        let mut c = WindowCounter::new(16, &[], 7);
        assert_eq!(allowed(&mut c, ADDRESS_LIMIT, "a", T0, 120), 120);
        assert_eq!(c.hit(ADDRESS_LIMIT, "a", T0), Verdict::Exceeded);
        assert_eq!(
            c.hit(ADDRESS_LIMIT, "b", T0),
            Verdict::Within,
            "keys are counted apart"
        );
    }

    #[test]
    fn windows_are_aligned_to_the_clock() {
        let mut c = WindowCounter::new(16, &[], 7);
        // 120 hits in the last second of a window, then the next window starts fresh.
        assert_eq!(allowed(&mut c, ADDRESS_LIMIT, "a", T0 + 59_999, 121), 120);
        assert_eq!(c.hit(ADDRESS_LIMIT, "a", T0 + 60_000), Verdict::Within);
    }

    #[test]
    fn limits_are_counted_apart() {
        let mut c = WindowCounter::new(16, &[], 7);
        let other = Limit::new(2, 10);
        assert_eq!(allowed(&mut c, other, "a", T0, 3), 2);
        assert_eq!(c.hit(ADDRESS_LIMIT, "a", T0), Verdict::Within);
    }

    #[test]
    fn a_flood_of_a_million_addresses_stays_within_the_bound() {
        let mut c = WindowCounter::new(1_000, &[], 7);
        c.hit(ADDRESS_LIMIT, "warm", T0);
        for i in 0..1_000_000u32 {
            c.hit(
                ADDRESS_LIMIT,
                &format!("10.{}.{}.{}", i >> 16, (i >> 8) & 255, i & 255),
                T0 + 1,
            );
        }
        assert_eq!(c.tracked_keys(), 1_000);
        let capacity = c.tracked.capacity();
        assert!(
            capacity >= 1_000,
            "the table was allocated at its full size"
        );
        for i in 0..100_000u32 {
            c.hit(ADDRESS_LIMIT, &format!("again-{i}"), T0 + 60_001);
        }
        assert_eq!(
            c.tracked.capacity(),
            capacity,
            "the table never grows, sweeps included"
        );
    }

    #[test]
    fn flooding_does_not_reset_a_tracked_count() {
        let mut c = WindowCounter::new(1_000, &[], 7);
        assert_eq!(allowed(&mut c, ADDRESS_LIMIT, "victim", T0, 120), 120);
        for i in 0..200_000u32 {
            c.hit(ADDRESS_LIMIT, &format!("flood-{i}"), T0 + 10);
        }
        assert_eq!(c.hit(ADDRESS_LIMIT, "victim", T0 + 20), Verdict::Exceeded);
    }

    #[test]
    fn a_flooder_cannot_reset_its_own_count_through_the_sketch() {
        let ten_seconds = Limit::new(5, 10);
        let mut c = WindowCounter::new(100, &[], 7);
        for i in 0..100 {
            c.hit(ten_seconds, &format!("filler-{i}"), T0);
        }
        // The table is full: the flooder is counted in the sketch up to its limit.
        assert_eq!(allowed(&mut c, ADDRESS_LIMIT, "flooder", T0, 121), 120);
        // The fillers' windows end and are reclaimed, so the flooder now gets
        // a table entry; it must carry the sketch's count, not start at zero.
        assert_eq!(
            c.hit(ADDRESS_LIMIT, "flooder", T0 + 10_000),
            Verdict::Exceeded
        );
        assert_eq!(c.tracked_keys(), 1);
    }

    #[test]
    fn ended_windows_are_reclaimed_when_full() {
        let mut c = WindowCounter::new(10, &[], 7);
        for i in 0..10 {
            c.hit(ADDRESS_LIMIT, &format!("old-{i}"), T0);
        }
        assert_eq!(c.tracked_keys(), 10);
        c.hit(ADDRESS_LIMIT, "new", T0 + 60_000);
        assert_eq!(c.tracked_keys(), 1, "the ten ended windows were reclaimed");
    }

    #[test]
    fn innocents_pass_a_flood_of_distinct_addresses() {
        // One request from each of 300,000 addresses past a table of 1,000,
        // under a route's 20 per 10 s: the shared buckets the sketches
        // replaced refused most of them (73 per bucket on average, over 20).
        let route = Limit::new(20, 10);
        let mut c = WindowCounter::new(1_000, &[], 7);
        let refused = (0..300_000u32)
            .filter(|i| c.hit(route, &format!("address:{i}"), T0 + 1) == Verdict::Exceeded)
            .count();
        assert!(refused <= 3_000, "{refused} of 300,000 innocents refused");
    }

    #[test]
    fn a_heavy_hitter_past_the_table_is_refused_at_its_limit() {
        let mut c = WindowCounter::new(1_000, &[], 7);
        for i in 0..100_000u32 {
            c.hit(ADDRESS_LIMIT, &format!("flood-{i}"), T0 + 1);
        }
        assert_eq!(c.tracked_keys(), 1_000, "the table is full");
        assert_eq!(allowed(&mut c, ADDRESS_LIMIT, "heavy", T0 + 2, 500), 120);
        assert_eq!(c.hit(ADDRESS_LIMIT, "heavy", T0 + 3), Verdict::Exceeded);
    }

    #[test]
    fn sketch_counts_end_with_their_window() {
        let mut c = WindowCounter::new(1, &[], 7);
        c.hit(ADDRESS_LIMIT, "fills the table", T0);
        assert_eq!(allowed(&mut c, Limit::new(5, 10), "k", T0, 6), 5);
        // The 10-second window ended: the 60-second table entry is still
        // live, so the key is counted in the sketch again, from zero.
        assert_eq!(allowed(&mut c, Limit::new(5, 10), "k", T0 + 10_000, 6), 5);
    }
}
