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
/// per route with that limit.
pub const ROUTE_FLOOD_KEYS: usize = 300_000;

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
/// first time the table has no room for one of its keys. docs/design.md gives
/// the formula; `harness validate` prints it for an application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryBound {
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

impl MemoryBound {
    /// Everything at once: the most the counter can hold.
    pub fn total(&self) -> usize {
        self.table + self.sweep + self.sketches.iter().map(|s| s.bytes).sum::<usize>()
    }
}

impl fmt::Display for MemoryBound {
    /// `TOTAL B = table T B + sweep S B + R per W s for K keys B B + ...`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} B = table {} B + sweep {} B",
            self.total(),
            self.table,
            self.sweep
        )?;
        for s in &self.sketches {
            write!(
                f,
                " + {} per {} s for {} keys {} B",
                s.limit.requests, s.limit.window_seconds, s.keys, s.bytes
            )?;
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
/// sized for [`BUILT_IN_FLOOD_KEYS`] or [`ROUTE_FLOOD_KEYS`] keys a window.
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
    /// limits and routes whose limits are `routes` (a route each: two routes
    /// with one limit share a sketch twice the size). `seed` keys the digest
    /// and should be random per isolate. The table is allocated here; each
    /// sketch the first time the table has no room for one of its keys.
    pub fn new(max_keys: usize, routes: &[Limit], seed: u128) -> WindowCounter {
        let max_keys = max_keys.max(1);
        let tracked = DigestMap::with_capacity_and_hasher(max_keys, BuildHasherDefault::default());
        let limits = BUILT_IN_LIMITS
            .iter()
            .map(|&limit| (limit, BUILT_IN_FLOOD_KEYS))
            .chain(routes.iter().map(|&limit| (limit, ROUTE_FLOOD_KEYS)));
        let mut sketches: Vec<LimitSketch> = Vec::with_capacity(limits.clone().count());
        for (limit, keys) in limits {
            match sketches.iter_mut().find(|s| s.limit() == limit) {
                Some(sketch) => *sketch = LimitSketch::new(limit, sketch.keys() + keys),
                None => sketches.push(LimitSketch::new(limit, keys)),
            }
        }
        // The list holds no spare room, so the sketches' bytes are all it holds.
        sketches.shrink_to_fit();
        WindowCounter {
            max_keys,
            table_slots: slots_for_capacity(tracked.capacity()),
            tracked,
            sketches,
            hasher: SipHasher13::new_with_keys(seed as u64, (seed >> 64) as u64),
            earliest_end_ms: u64::MAX,
        }
    }

    /// Counts one request for `key` against `limit` at `now_ms` (ms since the
    /// epoch). `now_ms` should not go backwards; when it does, counts last
    /// longer than their window, never shorter. A limit the counter was not
    /// built for gets a sketch sized for [`ROUTE_FLOOD_KEYS`] when it first
    /// needs one, and [`Self::bound`] grows by it.
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

    /// The most keys this counter tracks one by one.
    pub fn max_keys(&self) -> usize {
        self.max_keys
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
            table: self.table_bytes(),
            sweep: self.max_keys * std::mem::size_of::<(u64, Slot)>(),
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

    /// The table's slots: a digest, a `Slot` and a control byte each, plus
    /// one group of trailing control bytes.
    fn table_bytes(&self) -> usize {
        const GROUP_WIDTH: usize = 16;
        self.table_slots * (std::mem::size_of::<(u64, Slot)>() + 1) + GROUP_WIDTH
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
                self.sketches
                    .push(LimitSketch::new(limit, ROUTE_FLOOD_KEYS));
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
