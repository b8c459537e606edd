//! The in-isolate counter: fixed windows aligned to the clock, per limit and
//! key, in a bounded amount of memory.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use siphasher::sip::SipHasher13;

use crate::limits::Limit;

/// How many keys are tracked one by one before the overflow buckets take over.
/// At about 32 bytes a key that is some 2 MiB at most, per isolate.
pub const DEFAULT_MAX_KEYS: usize = 65_536;

/// How many shared buckets count the keys that arrive once the table is full.
pub const OVERFLOW_BUCKETS: usize = 4_096;

/// Whether a request is within its limit, the same answer the binding gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Within,
    Exceeded,
}

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    /// When the window this count belongs to ends, in ms since the epoch.
    ends_at_ms: u64,
    count: u32,
}

impl Slot {
    fn is_live(&self, now_ms: u64) -> bool {
        now_ms < self.ends_at_ms
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
/// Memory is bounded: at most `max_keys` keys are tracked one by one, each
/// as a 64-bit keyed digest (the key itself is never stored). When the table
/// is full, entries whose window has ended are reclaimed first; if it is
/// still full, the new key is counted in one of [`OVERFLOW_BUCKETS`] shared
/// buckets chosen by its digest. A bucket's count is the sum of every key in
/// it and lasts until the longest window counted in it ends, so it never
/// counts a key lower than its true count: flooding cannot reset anybody's
/// count, the flooder's own included, but an innocent key sharing a bucket
/// with a flood may be refused early. A tracked key is never evicted before
/// its window ends, and a key that moves from a bucket into the table takes
/// the bucket's count with it. The digest key is random per counter, so a
/// flooder cannot aim at a chosen bucket.
pub struct WindowCounter {
    max_keys: usize,
    tracked: DigestMap,
    overflow: Box<[Slot]>,
    hasher: SipHasher13,
    /// No sweep of ended windows before this time: nothing ends earlier.
    next_sweep_ms: u64,
}

impl WindowCounter {
    /// A counter tracking up to `max_keys` keys; `seed` keys the digest and
    /// should be random per isolate.
    pub fn new(max_keys: usize, seed: u128) -> WindowCounter {
        WindowCounter {
            max_keys: max_keys.max(1),
            tracked: DigestMap::default(),
            overflow: vec![Slot::default(); OVERFLOW_BUCKETS].into_boxed_slice(),
            hasher: SipHasher13::new_with_keys(seed as u64, (seed >> 64) as u64),
            next_sweep_ms: 0,
        }
    }

    /// Counts one request for `key` against `limit` at `now_ms` (ms since the epoch).
    pub fn hit(&mut self, limit: Limit, key: &str, now_ms: u64) -> Verdict {
        let digest = self.digest(limit, key);
        let window_ms = u64::from(limit.window_seconds.max(1)) * 1000;
        let ends_at_ms = (now_ms / window_ms + 1) * window_ms;
        let bucket_index = (digest % OVERFLOW_BUCKETS as u64) as usize;

        if !self.tracked.contains_key(&digest) && !self.has_room(now_ms) {
            let bucket = &mut self.overflow[bucket_index];
            if !bucket.is_live(now_ms) {
                *bucket = Slot { ends_at_ms, count: 0 };
            }
            bucket.ends_at_ms = bucket.ends_at_ms.max(ends_at_ms);
            return count_into(bucket, limit);
        }

        let bucket = self.overflow[bucket_index];
        let slot = self.tracked.entry(digest).or_insert_with(|| Slot {
            ends_at_ms,
            // A key that was counted in a bucket this window keeps that count.
            count: if bucket.is_live(now_ms) { bucket.count } else { 0 },
        });
        if !slot.is_live(now_ms) {
            *slot = Slot { ends_at_ms, count: 0 };
        }
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

    /// The bytes this counter holds on the heap: table capacity and buckets.
    pub fn heap_bytes(&self) -> usize {
        // hashbrown keeps one control byte per bucket beside each entry.
        let entry = std::mem::size_of::<(u64, Slot)>() + 1;
        self.tracked.capacity() * entry + self.overflow.len() * std::mem::size_of::<Slot>()
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
        if now_ms < self.next_sweep_ms {
            return false;
        }
        self.tracked.retain(|_, slot| slot.is_live(now_ms));
        self.next_sweep_ms = self.tracked.values().map(|s| s.ends_at_ms).min().unwrap_or(0);
        self.tracked.len() < self.max_keys
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
        (0..n).filter(|_| counter.hit(limit, key, now) == Verdict::Within).count()
    }

    #[test]
    fn counts_up_to_the_limit_then_refuses_without_counting() {
        let mut c = WindowCounter::new(16, 7);
        assert_eq!(allowed(&mut c, ADDRESS_LIMIT, "a", T0, 120), 120);
        assert_eq!(c.hit(ADDRESS_LIMIT, "a", T0), Verdict::Exceeded);
        assert_eq!(c.hit(ADDRESS_LIMIT, "b", T0), Verdict::Within, "keys are counted apart");
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
            c.hit(ADDRESS_LIMIT, &format!("10.{}.{}.{}", i >> 16, (i >> 8) & 255, i & 255), T0 + 1);
        }
        assert_eq!(c.tracked_keys(), 1_000);
        let bound = 2 * 1_000 * (std::mem::size_of::<(u64, Slot)>() + 1)
            + OVERFLOW_BUCKETS * std::mem::size_of::<Slot>();
        assert!(c.heap_bytes() <= bound, "{} bytes > bound {bound}", c.heap_bytes());
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
        assert_eq!(c.hit(ADDRESS_LIMIT, "flooder", T0 + 10_000), Verdict::Exceeded);
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
