//! The in-isolate counter: fixed windows aligned to the clock, per limit and
//! key, in a bounded amount of memory.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use siphasher::sip::SipHasher13;

use crate::limits::Limit;

/// How many keys are tracked one by one before the sketch takes over: 7/8
/// of 32,768 table slots, so the table, allocated once at its full size,
/// never grows. With the sketch, about 1.5 MiB per isolate at rest and
/// 1.97 MiB during a sweep (see [`WindowCounter::heap_bytes`]).
pub const DEFAULT_MAX_KEYS: usize = 28_672;

/// Rows of each count-min sketch: a key is refused only when all of its
/// rows' counters reached its limit.
pub const SKETCH_ROWS: usize = 4;

/// Counters in each row of a sketch (a power of two: the index is 15 bits of
/// the key's digest, a different 16-bit lane of it per row).
pub const SKETCH_WIDTH: usize = 32_768;

/// How many sketches, one per window length counted past the table at once
/// (Cloudflare's binding counts 10 and 60 seconds, so two cover every store).
pub const SKETCHES: usize = 2;

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

/// A conservative-update count-min sketch for the keys of one window length
/// that did not get a table slot. Windows are aligned to the clock, so every
/// key of one length shares the window's end: the whole sketch is cleared
/// when it ends, and its counters need no stamp of their own.
struct Sketch {
    /// The window length it counts, 0 while unclaimed.
    window_s: u32,
    /// When its counts end, in whole seconds since the epoch.
    ends_at_s: u32,
    /// `SKETCH_ROWS` rows of `SKETCH_WIDTH` counters.
    cells: Box<[u32]>,
}

impl Sketch {
    fn new() -> Sketch {
        Sketch {
            window_s: 0,
            ends_at_s: 0,
            cells: vec![0; SKETCH_ROWS * SKETCH_WIDTH].into_boxed_slice(),
        }
    }

    fn restart(&mut self, window_s: u32, ends_at_s: u32) {
        self.window_s = window_s;
        self.ends_at_s = ends_at_s;
        self.cells.fill(0);
    }

    fn cells_of(digest: u64) -> [usize; SKETCH_ROWS] {
        std::array::from_fn(|row| {
            row * SKETCH_WIDTH + ((digest >> (16 * row)) as usize & (SKETCH_WIDTH - 1))
        })
    }

    /// The key's count: never below its true count, since every counter of
    /// the key holds at least every request counted for it.
    fn estimate(&self, digest: u64) -> u32 {
        Self::cells_of(digest)
            .iter()
            .map(|&i| self.cells[i])
            .min()
            .unwrap_or(0)
    }

    /// Counts one request unless the estimate reached the limit. Conservative
    /// update: only the counters at the estimate move, so a flood of keys
    /// sending one request each lifts the counters as little as it can.
    fn hit(&mut self, digest: u64, limit: Limit) -> Verdict {
        let cells = Self::cells_of(digest);
        let estimate = cells.iter().map(|&i| self.cells[i]).min().unwrap_or(0);
        if estimate >= limit.requests {
            return Verdict::Exceeded;
        }
        for i in cells {
            self.cells[i] = self.cells[i].max(estimate + 1);
        }
        Verdict::Within
    }
}

/// Counts requests per (limit, key) in fixed windows aligned to the clock
/// (`floor(now / window)`), answering like Cloudflare's binding: a request
/// is within the limit while the window's count is below it, and a request
/// that is refused is not counted.
///
/// Memory is bounded and allocated once: an exact table of at most
/// `max_keys` keys, each kept as a 64-bit keyed digest (the key itself is
/// never stored), and [`SKETCHES`] count-min sketches behind it. When the
/// table is full, entries whose window has ended are reclaimed first; if it
/// is still full, the new key is counted in the sketch of its window length
/// (conservative update, [`SKETCH_ROWS`] x [`SKETCH_WIDTH`] counters). A
/// sketch never counts a key lower than its true count, so flooding cannot
/// reset anybody's count, the flooder's own included; and since a flood of
/// distinct keys sending a request each spreads over every counter, an
/// innocent key is refused early only when all its counters reached its
/// limit (BENCHMARKS.md measures it under a flood of 1M addresses). A
/// tracked key is never evicted before its window ends, and a key that moves
/// from the sketch into the table takes its estimate with it. The digest key
/// is random per counter, so a flooder cannot aim at chosen counters.
///
/// A third window length counted past the table while both sketches hold
/// live windows of other lengths shares the sketch of the longest window,
/// which then lasts until the later of the two ends: still never lower than
/// a true count, but innocents may be refused early.
pub struct WindowCounter {
    max_keys: usize,
    /// Table slots, fixed at construction (hashbrown fills 7/8 of them).
    table_slots: usize,
    tracked: DigestMap,
    sketches: [Sketch; SKETCHES],
    hasher: SipHasher13,
    /// The earliest end of any tracked window: no sweep before it, since
    /// nothing can be reclaimed earlier.
    earliest_end_ms: u64,
}

impl WindowCounter {
    /// A counter tracking up to `max_keys` keys; `seed` keys the digest and
    /// should be random per isolate. The whole table and the sketches are
    /// allocated here.
    pub fn new(max_keys: usize, seed: u128) -> WindowCounter {
        let max_keys = max_keys.max(1);
        let tracked = DigestMap::with_capacity_and_hasher(max_keys, BuildHasherDefault::default());
        WindowCounter {
            max_keys,
            table_slots: slots_for_capacity(tracked.capacity()),
            tracked,
            sketches: std::array::from_fn(|_| Sketch::new()),
            hasher: SipHasher13::new_with_keys(seed as u64, (seed >> 64) as u64),
            earliest_end_ms: u64::MAX,
        }
    }

    /// Counts one request for `key` against `limit` at `now_ms` (ms since the
    /// epoch). `now_ms` should not go backwards; when it does, counts last
    /// longer than their window, never shorter.
    pub fn hit(&mut self, limit: Limit, key: &str, now_ms: u64) -> Verdict {
        let digest = self.digest(limit, key);
        let window_s = limit.window_seconds.max(1);
        let ends_at_s =
            u32::try_from((now_ms / 1000 / u64::from(window_s) + 1) * u64::from(window_s))
                .unwrap_or(u32::MAX);

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

        if !self.has_room(now_ms) {
            let sketch = self.sketch_for(window_s, ends_at_s, now_ms);
            return self.sketches[sketch].hit(digest, limit);
        }
        // A key that was counted in a sketch this window keeps that count.
        let inherited = self
            .sketches
            .iter()
            .filter(|s| now_ms < u64::from(s.ends_at_s) * 1000 && s.ends_at_s >= ends_at_s)
            .map(|s| s.estimate(digest))
            .max()
            .unwrap_or(0);
        self.earliest_end_ms = self.earliest_end_ms.min(u64::from(ends_at_s) * 1000);
        let slot = self.tracked.entry(digest).or_insert(Slot {
            ends_at_s,
            count: inherited,
        });
        count_into(slot, limit)
    }

    /// How many keys are tracked one by one right now.
    pub fn tracked_keys(&self) -> usize {
        self.tracked.len()
    }

    /// The most keys this counter tracks one by one.
    pub fn max_keys(&self) -> usize {
        self.max_keys
    }

    /// The bytes this counter holds on the heap, all allocated by [`Self::new`]:
    /// the table's slots (a digest, a `Slot` and a control byte each, plus
    /// one group of trailing control bytes) and the sketches' counters. A
    /// sweep briefly adds a list of the live entries, at most `max_keys` of
    /// them (16 bytes each).
    pub fn heap_bytes(&self) -> usize {
        const GROUP_WIDTH: usize = 16;
        let entry = std::mem::size_of::<(u64, Slot)>();
        self.table_slots * (entry + 1)
            + GROUP_WIDTH
            + SKETCHES * SKETCH_ROWS * SKETCH_WIDTH * std::mem::size_of::<u32>()
    }

    fn digest(&self, limit: Limit, key: &str) -> u64 {
        let mut hasher = self.hasher;
        hasher.write_u32(limit.requests);
        hasher.write_u32(limit.window_seconds);
        hasher.write(key.as_bytes());
        hasher.finish()
    }

    /// The sketch that counts a window of `window_s` ending at `ends_at_s`:
    /// its own (cleared when its previous window ended), else one whose
    /// window ended, else the longest one's, stretched to last as long.
    fn sketch_for(&mut self, window_s: u32, ends_at_s: u32, now_ms: u64) -> usize {
        let ended = |s: &Sketch| u64::from(s.ends_at_s) * 1000 <= now_ms;
        if let Some(i) = self.sketches.iter().position(|s| s.window_s == window_s) {
            let sketch = &mut self.sketches[i];
            if sketch.ends_at_s < ends_at_s && ended(sketch) {
                sketch.restart(window_s, ends_at_s);
            } else {
                sketch.ends_at_s = sketch.ends_at_s.max(ends_at_s);
            }
            return i;
        }
        if let Some(i) = self.sketches.iter().position(ended) {
            self.sketches[i].restart(window_s, ends_at_s);
            return i;
        }
        let i = (0..SKETCHES)
            .max_by_key(|&i| self.sketches[i].window_s)
            .unwrap_or(0);
        let sketch = &mut self.sketches[i];
        sketch.ends_at_s = sketch.ends_at_s.max(ends_at_s);
        i
    }

    /// Whether a new key can be tracked, reclaiming ended windows when full.
    fn has_room(&mut self, now_ms: u64) -> bool {
        if self.tracked.len() < self.max_keys {
            return true;
        }
        if now_ms < self.earliest_end_ms {
            return false;
        }
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
        let mut c = WindowCounter::new(16, 7);
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
        let mut c = WindowCounter::new(16, 7);
        // 120 hits in the last second of a window, then the next window starts fresh.
        assert_eq!(allowed(&mut c, ADDRESS_LIMIT, "a", T0 + 59_999, 121), 120);
        assert_eq!(c.hit(ADDRESS_LIMIT, "a", T0 + 60_000), Verdict::Within);
    }

    #[test]
    fn limits_are_counted_apart() {
        let mut c = WindowCounter::new(16, 7);
        let other = Limit::new(2, 10);
        assert_eq!(allowed(&mut c, other, "a", T0, 3), 2);
        assert_eq!(c.hit(ADDRESS_LIMIT, "a", T0), Verdict::Within);
    }

    #[test]
    fn a_flood_of_a_million_addresses_stays_within_the_bound() {
        let mut c = WindowCounter::new(1_000, 7);
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
        let mut c = WindowCounter::new(1_000, 7);
        assert_eq!(allowed(&mut c, ADDRESS_LIMIT, "victim", T0, 120), 120);
        for i in 0..200_000u32 {
            c.hit(ADDRESS_LIMIT, &format!("flood-{i}"), T0 + 10);
        }
        assert_eq!(c.hit(ADDRESS_LIMIT, "victim", T0 + 20), Verdict::Exceeded);
    }

    #[test]
    fn a_flooder_cannot_reset_its_own_count_through_the_sketch() {
        let ten_seconds = Limit::new(5, 10);
        let mut c = WindowCounter::new(100, 7);
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
        let mut c = WindowCounter::new(10, 7);
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
        // under a route's 20 per 10 s: the shared buckets this sketch replaced
        // refused most of them (73 per bucket on average, over 20).
        let route = Limit::new(20, 10);
        let mut c = WindowCounter::new(1_000, 7);
        let refused = (0..300_000u32)
            .filter(|i| c.hit(route, &format!("address:{i}"), T0 + 1) == Verdict::Exceeded)
            .count();
        assert!(refused <= 3_000, "{refused} of 300,000 innocents refused");
    }

    #[test]
    fn a_heavy_hitter_past_the_table_is_refused_at_its_limit() {
        let mut c = WindowCounter::new(1_000, 7);
        for i in 0..100_000u32 {
            c.hit(ADDRESS_LIMIT, &format!("flood-{i}"), T0 + 1);
        }
        assert_eq!(c.tracked_keys(), 1_000, "the table is full");
        assert!(allowed(&mut c, ADDRESS_LIMIT, "heavy", T0 + 2, 500) <= 120);
        assert_eq!(c.hit(ADDRESS_LIMIT, "heavy", T0 + 3), Verdict::Exceeded);
    }

    #[test]
    fn sketch_counts_end_with_their_window() {
        let mut c = WindowCounter::new(1, 7);
        c.hit(ADDRESS_LIMIT, "fills the table", T0);
        assert_eq!(allowed(&mut c, Limit::new(5, 10), "k", T0, 6), 5);
        // The 10-second window ended: the 60-second table entry is still
        // live, so the key is counted in the sketch again, from zero.
        assert_eq!(allowed(&mut c, Limit::new(5, 10), "k", T0 + 10_000, 6), 5);
    }
}
