//! The in-isolate counter through its public API: every limit size and
//! window length past a full table, a flood on one limit beside the others,
//! the memory bound, and (proptest) the same answers as an exact count.

use std::collections::HashMap;

use proptest::prelude::*;
use runtime::counter::{BUILT_IN_FLOOD_KEYS, ROUTE_FLOOD_KEYS, Verdict, WindowCounter};
use runtime::limits::{ADDRESS_LIMIT, CALLER_LIMIT, Limit};

/// An hour boundary, so windows of 10, 60 and 3600 s all start here.
const HOUR: u64 = 1_800_000_000_000;
const LIMITS: [u32; 6] = [1, 2, 5, 20, 120, 600];
const WINDOWS: [u32; 3] = [10, 60, 3600];

fn every_limit() -> Vec<Limit> {
    WINDOWS
        .iter()
        .flat_map(|&w| LIMITS.iter().map(move |&r| Limit::new(r, w)))
        .collect()
}

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
fn a_flood_on_one_limit_leaves_every_other_limit_alone() {
    let limits = every_limit();
    let mut c = WindowCounter::new(1_000, &limits, 7);
    // The strictest route, flooded: it shares its window length with five others.
    let flooded = Limit::new(1, 10);
    for i in 0..ROUTE_FLOOD_KEYS {
        c.hit(flooded, &format!("flood-{i}"), HOUR + 1_000);
    }
    for limit in limits
        .iter()
        .copied()
        .filter(|&l| l != flooded)
        .chain([ADDRESS_LIMIT, CALLER_LIMIT])
    {
        let refused = (0..1_000)
            .filter(|i| c.hit(limit, &format!("new-{i}"), HOUR + 2_000) == Verdict::Exceeded)
            .count();
        assert_eq!(refused, 0, "{limit:?}: new keys refused after the flood");
    }
}

#[test]
fn each_limit_size_keeps_its_promises_under_a_flood_of_its_own() {
    for requests in LIMITS {
        let limit = Limit::new(requests, 60);
        let mut c = WindowCounter::new(1_000, &[limit], 7);
        for i in 0..ROUTE_FLOOD_KEYS {
            c.hit(limit, &format!("flood-{i}"), HOUR + 1_000);
        }
        let refused = (0..10_000)
            .filter(|i| c.hit(limit, &format!("new-{i}"), HOUR + 2_000) == Verdict::Exceeded)
            .count();
        assert!(
            refused <= 100,
            "{limit:?}: {refused} of 10,000 new keys refused"
        );
        let mut early = 0;
        for k in 0..200 {
            let through = within(
                &mut c,
                limit,
                &format!("heavy-{k}"),
                HOUR + 3_000,
                requests + 1,
            );
            assert!(through <= requests, "{limit:?}: {through} let through");
            early += u32::from(through < requests);
        }
        assert!(
            early <= 2,
            "{limit:?}: {early} of 200 over-limit keys refused early"
        );
    }
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

/// A step of the clock: mostly short, sometimes across a window of each length.
fn step() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => Just(0u64),
        4 => 0u64..2_000,
        1 => 9_000u64..11_000,
        1 => 55_000u64..65_000,
        1 => 3_590_000u64..3_610_000,
    ]
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
