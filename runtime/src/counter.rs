//! The in-isolate counter: fixed windows aligned to the clock, per limit and
//! key, in a bounded amount of memory.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use siphasher::sip::SipHasher13;

use crate::limits::Limit;

/// How many keys are tracked one by one before the overflow buckets take
/// over: 7/8 of 65,536 table slots, so the table, allocated once at its full
/// size, never grows. About 1.1 MiB per isolate (see [`WindowCounter::heap_bytes`]).
pub const DEFAULT_MAX_KEYS: usize = 57_344;

/// How many shared buckets count the keys that arrive once the table is full.
pub const OVERFLOW_BUCKETS: usize = 4_096;

/// Whether a request is within its limit, the same answer the binding gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Within,
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

/// Counts requests per (limit, key) in fixed windows aligned to the clock
/// (`floor(now / window)`), answering like Cloudflare's binding: a request
/// is within the limit while the window's count is below it, and a request
/// that is refused is not counted.
///
/// Memory is bounded and allocated once: a table of at most `max_keys` keys,
/// each kept as a 64-bit keyed digest (the key itself is never stored), and
/// [`OVERFLOW_BUCKETS`] shared buckets. When the table is full, entries whose
/// window has ended are reclaimed first; if it is still full, the new key is
/// counted in one of the shared buckets, chosen by its digest. A bucket's
/// count is the sum of every key in it and lasts until the longest window
/// counted in it ends, so it never counts a key lower than its true count:
/// flooding cannot reset anybody's count, the flooder's own included, but an
/// innocent key sharing a bucket with a flood may be refused early. A tracked
/// key is never evicted before its window ends, and a key that moves from a
/// bucket into the table takes the bucket's count with it. The digest key is
/// random per counter, so a flooder cannot aim at a chosen bucket.
pub struct WindowCounter {
    max_keys: usize,
    /// Table slots, fixed at construction (hashbrown fills 7/8 of them).
    table_slots: usize,
    tracked: DigestMap,
    overflow: Box<[Slot]>,
    hasher: SipHasher13,
    /// The earliest end of any tracked window: no sweep before it, since
    /// nothing can be reclaimed earlier.
    earliest_end_ms: u64,
}

impl WindowCounter {
    /// A counter tracking up to `max_keys` keys; `seed` keys the digest and
    /// should be random per isolate. The whole table is allocated here.
    pub fn new(max_keys: usize, seed: u128) -> WindowCounter {
        let max_keys = max_keys.max(1);
        let tracked = DigestMap::with_capacity_and_hasher(max_keys, BuildHasherDefault::default());
        WindowCounter {
            max_keys,
            table_slots: slots_for_capacity(tracked.capacity()),
            tracked,
            overflow: vec![Slot::default(); OVERFLOW_BUCKETS].into_boxed_slice(),
            hasher: SipHasher13::new_with_keys(seed as u64, (seed >> 64) as u64),
            earliest_end_ms: u64::MAX,
        }
    }

    /// Counts one request for `key` against `limit` at `now_ms` (ms since the epoch).
    pub fn hit(&mut self, limit: Limit, key: &str, now_ms: u64) -> Verdict {
        let digest = self.digest(limit, key);
        let window_s = u64::from(limit.window_seconds.max(1));
        let ends_at_s =
            u32::try_from((now_ms / 1000 / window_s + 1) * window_s).unwrap_or(u32::MAX);
        let fresh = Slot {
            ends_at_s,
            count: 0,
        };

        if let Some(slot) = self.tracked.get_mut(&digest) {
            if !slot.is_live(now_ms) {
                *slot = fresh;
                self.earliest_end_ms = self.earliest_end_ms.min(u64::from(ends_at_s) * 1000);
            }
            return count_into(slot, limit);
        }

        let bucket = &mut self.overflow[(digest % OVERFLOW_BUCKETS as u64) as usize];
        if !bucket.is_live(now_ms) {
            *bucket = fresh;
        }
        if !self.has_room(now_ms) {
            let bucket = &mut self.overflow[(digest % OVERFLOW_BUCKETS as u64) as usize];
            bucket.ends_at_s = bucket.ends_at_s.max(ends_at_s);
            return count_into(bucket, limit);
        }
        // A key that was counted in a bucket this window keeps that count.
        let inherited = self.overflow[(digest % OVERFLOW_BUCKETS as u64) as usize].count;
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
    /// the table's slots (a digest, a [`Slot`] and a control byte each, plus
    /// one group of trailing control bytes) and the overflow buckets. A sweep
    /// briefly adds a list of the live entries, at most `max_keys` of them.
    pub fn heap_bytes(&self) -> usize {
        const GROUP_WIDTH: usize = 16;
        let entry = std::mem::size_of::<(u64, Slot)>();
        self.table_slots * (entry + 1)
            + GROUP_WIDTH
            + self.overflow.len() * std::mem::size_of::<Slot>()
    }

    fn digest(&self, limit: Limit, key: &str) -> u64 {
        let mut hasher = self.hasher;
        hasher.write_u32(limit.requests);
        hasher.write_u32(limit.window_seconds);
        hasher.write(key.as_bytes());
        hasher.finish()
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
    fn a_flooder_cannot_reset_its_own_count_through_the_buckets() {
        let ten_seconds = Limit::new(5, 10);
        let mut c = WindowCounter::new(100, 7);
        for i in 0..100 {
            c.hit(ten_seconds, &format!("filler-{i}"), T0);
        }
        // The table is full: the flooder is counted in a bucket up to its limit.
        assert_eq!(allowed(&mut c, ADDRESS_LIMIT, "flooder", T0, 121), 120);
        // The fillers' windows end and are reclaimed, so the flooder now gets
        // a table entry; it must carry the bucket's count, not start at zero.
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
}
