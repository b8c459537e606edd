//! The bounded cache of keys Redis refused, so a caller who keeps knocking
//! after a refusal is answered without a round trip until the window ends.
//!
//! It can never let through what Redis would refuse: it only ever answers
//! "refused", and a window's count only grows, so a key Redis refused stays
//! refused until its window ends (when the entry ends too). It never
//! outlives that window either: Redis says how long the window has left on
//! its own clock, which decides it, and the entry lasts that long on the
//! instance's monotonic clock counted from before the call was sent (so a
//! little less than the window's rest), which no step of the wall clock
//! moves. An entry is the (limit, key) pair, never the instance's view of
//! the window, so an instance whose clock is off remembers exactly what
//! Redis said. Its memory is
//! bounded by [`MAX_REFUSED_KEYS`]: when full, entries whose window ended are
//! swept, and if none has ended yet a new refusal is simply not cached (Redis
//! answers it, exactly). A flood of distinct keys therefore never grows it,
//! and never evicts a live entry to make room.

use std::collections::HashMap;

use crate::limits::Limit;

/// How many refused (limit, key) pairs one process remembers at most.
pub(crate) const MAX_REFUSED_KEYS: usize = 16_384;

/// Keys Redis refused, each until its window's end (sans-IO: time passed in;
/// `now_ms` is the instance's monotonic clock, [`crate::Clock::monotonic_ms`]).
/// Its `Debug` counts the keys and shows none.
pub struct RefusedCache {
    entries: HashMap<(Limit, String), u64>,
    max: usize,
    /// The earliest window end among the entries: nothing can be swept before it.
    earliest_end_ms: u64,
}

impl std::fmt::Debug for RefusedCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RefusedCache")
            .field("entries", &self.entries.len())
            .field("max", &self.max)
            .finish()
    }
}

impl Default for RefusedCache {
    fn default() -> Self {
        Self::with_capacity(MAX_REFUSED_KEYS)
    }
}

impl RefusedCache {
    /// A cache of at most `max` entries.
    pub fn with_capacity(max: usize) -> RefusedCache {
        RefusedCache {
            entries: HashMap::new(),
            max,
            earliest_end_ms: u64::MAX,
        }
    }

    /// Whether Redis refused `key` for `limit` in the window still running at `now_ms`.
    pub fn is_refused(&self, limit: Limit, key: &str, now_ms: u64) -> bool {
        // Looking up by a borrowed pair would need a custom Borrow; the key is short.
        self.entries
            .get(&(limit, key.to_owned()))
            .is_some_and(|&end_ms| now_ms < end_ms)
    }

    /// Remembers that Redis refused `key` for `limit` until `window_end_ms`
    /// (on the monotonic clock: when the call was sent plus what Redis said
    /// was left of the window).
    pub fn remember(&mut self, limit: Limit, key: &str, window_end_ms: u64, now_ms: u64) {
        if now_ms >= window_end_ms {
            return;
        }
        if self.entries.len() >= self.max {
            if now_ms < self.earliest_end_ms {
                // Full of live entries: Redis keeps answering this one exactly.
                return;
            }
            self.entries.retain(|_, &mut end_ms| now_ms < end_ms);
            self.earliest_end_ms = self.entries.values().copied().min().unwrap_or(u64::MAX);
            if self.entries.len() >= self.max {
                return;
            }
        }
        self.entries.insert((limit, key.to_owned()), window_end_ms);
        self.earliest_end_ms = self.earliest_end_ms.min(window_end_ms);
    }

    /// How many entries are held (live or not yet swept).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const L: Limit = Limit::new(120, 60);
    const T0: u64 = 1_800_000_000_000;

    #[test]
    fn a_refusal_is_remembered_until_its_window_ends() {
        let mut cache = RefusedCache::default();
        cache.remember(L, "address:192.0.2.1", T0 + 1_000, T0);
        assert!(cache.is_refused(L, "address:192.0.2.1", T0 + 999));
        assert!(!cache.is_refused(L, "address:192.0.2.1", T0 + 1_000));
        assert!(!cache.is_refused(Limit::new(600, 60), "address:192.0.2.1", T0));
        assert!(!cache.is_refused(L, "address:192.0.2.2", T0));
    }

    #[test]
    fn a_flood_of_distinct_keys_never_grows_it_nor_evicts_a_live_entry() {
        let mut cache = RefusedCache::with_capacity(4);
        cache.remember(L, "victim", T0 + 60_000, T0);
        for i in 0..10_000 {
            cache.remember(L, &format!("flood-{i}"), T0 + 60_000, T0 + 1);
        }
        assert_eq!(cache.len(), 4);
        assert!(cache.is_refused(L, "victim", T0 + 2));
    }

    #[test]
    fn ended_windows_make_room() {
        let mut cache = RefusedCache::with_capacity(2);
        cache.remember(L, "a", T0 + 10, T0);
        cache.remember(L, "b", T0 + 60_000, T0);
        cache.remember(L, "c", T0 + 60_000, T0 + 10);
        assert_eq!(cache.len(), 2);
        assert!(cache.is_refused(L, "c", T0 + 11));
        assert!(cache.is_refused(L, "b", T0 + 11));
    }
}
