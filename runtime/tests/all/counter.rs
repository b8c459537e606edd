//! The in-isolate counter through its public API: every limit size and
//! window length past a full table, every limit under a flood of its own
//! (300,000 keys) and of a built-in limit (1,000,000) beside all the others,
//! the memory bound, and (proptest) the same answers as an exact count.

use std::collections::HashMap;

use crate::sweep::{HOUR, WINDOWS, every_limit, step};
use proptest::prelude::*;
use runtime::unstable_for_tools::counter::{
    BUILT_IN_FLOOD_KEYS, ROUTE_FLOOD_KEYS, Verdict, WindowCounter,
};
use runtime::unstable_for_tools::limits::{ADDRESS_LIMIT, CALLER_LIMIT, Limit};

/// How many of `n` hits of `key` at `now` were let through.
fn within(c: &mut WindowCounter, limit: Limit, key: &str, now: u64, n: u32) -> u32 {
    (0..n)
        .filter(|_| c.hit(limit, key, now) == Verdict::Within)
        .count() as u32
}

/// A counter with a one-key table, filled for the rest of the day: every
/// other key is counted in its limit's sketch.
fn past_a_full_table(routes: &[Limit]) -> WindowCounter {
    let mut c = WindowCounter::new(1, routes, 7);
    c.hit(Limit::new(1, 86_400), "fills the table", HOUR);
    c
}

#[test]
fn every_limit_and_window_counts_exactly_past_a_full_table() {
    let limits = every_limit();
    let mut c = past_a_full_table(&limits);
    for &limit in &limits {
        assert_eq!(
            within(&mut c, limit, "heavy", HOUR + 1_000, 2 * limit.requests),
            limit.requests,
            "{limit:?}: let through exactly its limit"
        );
    }
    assert_eq!(c.tracked_keys(), 1, "all of them were counted in sketches");
    // Three window lengths at once: each ends on its own boundary, not before
    // (no count restarted mid-window) and not after (no refusal outlives it).
    for window in WINDOWS {
        let end = HOUR + u64::from(window) * 1_000;
        for &limit in limits.iter().filter(|l| l.window_seconds >= window) {
            assert_eq!(
                c.hit(limit, "heavy", end - 1),
                Verdict::Exceeded,
                "{limit:?} refuses until {window} s"
            );
        }
        for &limit in limits.iter().filter(|l| l.window_seconds == window) {
            assert_eq!(
                within(&mut c, limit, "heavy", end, 2 * limit.requests),
                limit.requests,
                "{limit:?} starts again at {window} s"
            );
        }
    }
}

#[test]
fn any_number_of_window_lengths_each_count_their_own_window() {
    // Nine lengths, some not dividing the others, past a full table.
    let windows = [1, 7, 10, 45, 60, 61, 600, 3600, 86_400];
    let limits: Vec<Limit> = windows.iter().map(|&w| Limit::new(3, w)).collect();
    let mut c = past_a_full_table(&limits);
    let start = HOUR + 500;
    for &limit in &limits {
        assert_eq!(within(&mut c, limit, "heavy", start, 6), 3, "{limit:?}");
    }
    // Each window's end (aligned: floor(now / window) + 1), earliest first.
    let mut ends: Vec<(u64, Limit)> = limits
        .iter()
        .map(|&l| {
            let w = u64::from(l.window_seconds) * 1_000;
            ((start / w + 1) * w, l)
        })
        .collect();
    ends.sort_by_key(|&(end, _)| end);
    for (n, &(end, limit)) in ends.iter().enumerate() {
        // Every window not yet ended still refuses, this one until its end.
        for &(_, later) in &ends[n..] {
            assert_eq!(
                c.hit(later, "heavy", end - 1),
                Verdict::Exceeded,
                "{later:?} at {} ms",
                end - 1 - HOUR
            );
        }
        assert_eq!(
            within(&mut c, limit, "heavy", end, 6),
            3,
            "{limit:?} starts again at {} ms",
            end - HOUR
        );
    }
}

/// A route's flood (keys sending one request each), new keys after it, and
/// over-limit keys before it and after.
const ROUTE_FLOOD: u32 = ROUTE_FLOOD_KEYS as u32;
const NEW_KEYS: u32 = 10_000;
const NEW_KEYS_ELSEWHERE: u32 = 1_000;
const OVER_LIMIT_KEYS: u32 = 200;

/// How many of `n` new keys (`{prefix}-0` on), one hit each at `now`, `limit` refused.
fn refused(c: &mut WindowCounter, limit: Limit, prefix: &str, n: u32, now: u64) -> u32 {
    (0..n)
        .filter(|i| c.hit(limit, &format!("{prefix}-{i}"), now) == Verdict::Exceeded)
        .count() as u32
}

/// [`OVER_LIMIT_KEYS`] keys send their limit and one more: none is let past
/// the limit; how many were refused before it.
fn refused_early(c: &mut WindowCounter, limit: Limit, prefix: &str, now: u64) -> u32 {
    (0..OVER_LIMIT_KEYS)
        .map(|k| {
            let through = within(c, limit, &format!("{prefix}-{k}"), now, limit.requests + 1);
            assert!(
                through <= limit.requests,
                "{limit:?}: {through} let through"
            );
            u32::from(through < limit.requests)
        })
        .sum()
}

/// The targets for every limit of one window length, each flooded
/// by 300,000 keys on a counter built for all 18 limits (as an application
/// with a route for each): new keys on the flooded limit refused at most
/// 1 %, on every other limit at most 1 %, and over-limit keys refused
/// exactly at their limit while the table has room, at most 1 % of them
/// early once the table is full, none late.
fn every_limit_of_a_window_keeps_its_promises_under_a_flood(window: u32) {
    let limits = every_limit();
    for flooded in limits
        .iter()
        .copied()
        .filter(|l| l.window_seconds == window)
    {
        let mut c = WindowCounter::new(1_000, &limits, 7);
        assert_eq!(
            refused_early(&mut c, flooded, "before", HOUR + 1_000),
            0,
            "{flooded:?}: the exact table refuses at the limit"
        );
        for i in 0..ROUTE_FLOOD {
            c.hit(flooded, &format!("flood-{i}"), HOUR + 2_000);
        }
        let same = refused(&mut c, flooded, "new", NEW_KEYS, HOUR + 3_000);
        assert!(
            same <= NEW_KEYS / 100,
            "{flooded:?}: {same} of {NEW_KEYS} new keys refused after its flood"
        );
        for other in limits.iter().copied().filter(|&l| l != flooded) {
            let refused = refused(&mut c, other, "elsewhere", NEW_KEYS_ELSEWHERE, HOUR + 3_000);
            assert!(
                refused <= NEW_KEYS_ELSEWHERE / 100,
                "{other:?}: {refused} of {NEW_KEYS_ELSEWHERE} new keys refused after a flood on {flooded:?}"
            );
        }
        let early = refused_early(&mut c, flooded, "after", HOUR + 4_000);
        assert!(
            early <= OVER_LIMIT_KEYS / 100,
            "{flooded:?}: {early} of {OVER_LIMIT_KEYS} over-limit keys refused early past the table"
        );
    }
}

#[test]
fn every_limit_of_10_s_keeps_its_promises_under_a_flood() {
    every_limit_of_a_window_keeps_its_promises_under_a_flood(10);
}

#[test]
fn every_limit_of_60_s_keeps_its_promises_under_a_flood() {
    every_limit_of_a_window_keeps_its_promises_under_a_flood(60);
}

#[test]
fn every_limit_of_3600_s_keeps_its_promises_under_a_flood() {
    every_limit_of_a_window_keeps_its_promises_under_a_flood(3600);
}

/// A flood of 1,000,000 keys on a built-in limit (what a flood on a path
/// with no route of its own counts under), then new keys on it and on every
/// route's limit: at most 1 % refused on each.
fn a_million_keys_on_a_built_in_limit_leave_every_limit_open(built_in: Limit) {
    let limits = every_limit();
    let mut c = WindowCounter::new(1_000, &limits, 7);
    for i in 0..BUILT_IN_FLOOD_KEYS {
        c.hit(built_in, &format!("flood-{i}"), HOUR + 1_000);
    }
    let same = refused(&mut c, built_in, "new", NEW_KEYS, HOUR + 2_000);
    assert!(
        same <= NEW_KEYS / 100,
        "{built_in:?}: {same} of {NEW_KEYS} new keys refused after its flood"
    );
    for route in limits {
        let refused = refused(&mut c, route, "route", NEW_KEYS_ELSEWHERE, HOUR + 2_000);
        assert!(
            refused <= NEW_KEYS_ELSEWHERE / 100,
            "{route:?}: {refused} of {NEW_KEYS_ELSEWHERE} new keys refused after a flood on {built_in:?}"
        );
    }
    let early = refused_early(&mut c, built_in, "heavy", HOUR + 3_000);
    assert!(
        early <= OVER_LIMIT_KEYS / 100,
        "{built_in:?}: {early} of {OVER_LIMIT_KEYS} over-limit keys refused early past the table"
    );
}

#[test]
fn a_million_addresses_leave_every_limit_open() {
    a_million_keys_on_a_built_in_limit_leave_every_limit_open(ADDRESS_LIMIT);
}

#[test]
fn a_million_callers_leave_every_limit_open() {
    a_million_keys_on_a_built_in_limit_leave_every_limit_open(CALLER_LIMIT);
}

#[test]
fn the_memory_bound_is_what_the_counter_holds_with_every_sketch_in_use() {
    let routes = [
        Limit::new(1, 10),
        Limit::new(20, 10),
        Limit::new(20, 10),
        Limit::new(70_000, 3600),
    ];
    let mut c = WindowCounter::new(100, &routes, 7);
    let bound = c.bound();
    let keys: Vec<(Limit, usize)> = bound.sketches.iter().map(|s| (s.limit, s.keys)).collect();
    assert_eq!(
        keys,
        [
            (CALLER_LIMIT, BUILT_IN_FLOOD_KEYS),
            (ADDRESS_LIMIT, BUILT_IN_FLOOD_KEYS),
            (Limit::new(1, 10), ROUTE_FLOOD_KEYS),
            (Limit::new(20, 10), 2 * ROUTE_FLOOD_KEYS),
            (Limit::new(70_000, 3600), ROUTE_FLOOD_KEYS),
        ],
        "one sketch a limit; two routes with one limit share one twice the size"
    );
    // The README's formula: 72 B (the sketch in its counter's list, on a
    // 64-bit target), 64 B x ceil(14 x keys / 512) of filter, and 4 rows x
    // next_power_of_two(keys / 32) counters of 0, 1, 2 or 4 bytes.
    let bytes: Vec<usize> = bound.sketches.iter().map(|s| s.bytes).collect();
    assert_eq!(
        bytes,
        [
            72 + 64 * 27_344 + 4 * 32_768 * 2,
            72 + 64 * 27_344 + 4 * 32_768,
            72 + 64 * 8_204,
            72 + 64 * 16_407 + 4 * 32_768,
            72 + 64 * 8_204 + 4 * 16_384 * 4,
        ]
    );
    assert_eq!(
        bound.table,
        128 * 17 + 16,
        "100 keys' table: 128 slots of 17 B"
    );
    assert_eq!(
        c.heap_bytes(),
        bound.table + 5 * 72,
        "filters and counters wait until needed"
    );
    for i in 0..100 {
        c.hit(ADDRESS_LIMIT, &format!("filler-{i}"), HOUR);
    }
    for sketch in &bound.sketches {
        c.hit(sketch.limit, "past the table", HOUR);
        c.hit(sketch.limit, "past the table", HOUR);
    }
    assert_eq!(c.heap_bytes(), bound.total() - bound.sweep);
    assert_eq!(c.bound(), bound, "nothing grew");
}

#[test]
fn a_limit_the_counter_was_not_built_for_gets_a_sketch_of_its_own() {
    let mut c = past_a_full_table(&[]);
    let before = c.bound();
    let unplanned = Limit::new(3, 10);
    assert_eq!(within(&mut c, unplanned, "k", HOUR + 1_000, 5), 3);
    let after = c.bound();
    assert_eq!(after.sketches.len(), before.sketches.len() + 1);
    assert_eq!(after.sketches.last().map(|s| s.limit), Some(unplanned));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// With a table of a few keys, so most keys are counted in sketches and
    /// move in and out of the table as windows end, every answer is the
    /// answer of an exact count: nothing let through past a limit, no count
    /// restarted mid-window, no refusal outliving its window, for three
    /// window lengths at once.
    #[test]
    fn answers_like_an_exact_count(
        max_keys in 1usize..6,
        seed in any::<u128>(),
        start in 0u64..3_600_000,
        ops in proptest::collection::vec((0usize..12, 0u8..10, step()), 1..400),
    ) {
        let limits: Vec<Limit> = WINDOWS
            .iter()
            .flat_map(|&w| [1, 2, 5, 20].map(|r| Limit::new(r, w)))
            .collect();
        let mut c = WindowCounter::new(max_keys, &limits[..6], seed);
        let mut exact: HashMap<(usize, u8, u64), u32> = HashMap::new();
        let mut now = HOUR + start;
        for (l, key, step) in ops {
            now += step;
            let limit = limits[l];
            let window = now / (u64::from(limit.window_seconds) * 1_000);
            let count = exact.entry((l, key, window)).or_default();
            let expected = if *count < limit.requests {
                *count += 1;
                Verdict::Within
            } else {
                Verdict::Exceeded
            };
            prop_assert_eq!(
                c.hit(limit, &format!("key-{key}"), now),
                expected,
                "{:?}, key {}, at {} ms into the hour",
                limit,
                key,
                now - HOUR
            );
        }
    }
}

/// A Worker's gate is built in the global scope, where no random seed can be
/// drawn, and reseeded on its first decision: whatever was counted under the
/// first seed, in the table or in a sketch, is gone, and counting goes on.
#[test]
fn a_reseeded_counter_forgets_its_counts_and_counts_again() {
    let limit = Limit::new(2, 60);
    let mut c = past_a_full_table(&[limit]);
    let no_sketch_in_use = c.heap_bytes();
    // "in the sketch" is counted in its limit's sketch: the table is full.
    assert_eq!(within(&mut c, limit, "in the sketch", HOUR, 3), 2);
    assert!(c.heap_bytes() > no_sketch_in_use);
    c.reseed(11);
    assert_eq!(c.tracked_keys(), 0, "the table is emptied");
    assert_eq!(
        c.heap_bytes(),
        no_sketch_in_use,
        "the sketch's storage is dropped"
    );
    assert_eq!(within(&mut c, limit, "in the sketch", HOUR, 3), 2);
    assert_eq!(c.tracked_keys(), 1, "the key is in the emptied table now");
}
