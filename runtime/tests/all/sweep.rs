//! The parameters the flood tests sweep (`counter.rs`, `floods.rs`): every
//! limit size by every window length, from an hour boundary, and clock
//! steps that cross a window of each length.

use proptest::prelude::*;
use runtime::unstable_for_tools::limits::Limit;

/// An hour boundary, so windows of 10, 60 and 3600 s all start here.
pub const HOUR: u64 = 1_800_000_000_000;
pub const LIMITS: [u32; 6] = [1, 2, 5, 20, 120, 600];
pub const WINDOWS: [u32; 3] = [10, 60, 3600];

/// Every limit of [`LIMITS`] requests per each of [`WINDOWS`], by window.
pub fn every_limit() -> Vec<Limit> {
    WINDOWS
        .iter()
        .flat_map(|&w| LIMITS.iter().map(move |&r| Limit::new(r, w)))
        .collect()
}

/// A step of the clock: mostly short, sometimes across a window of each length.
pub fn step() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => Just(0u64),
        4 => 0u64..2_000,
        1 => 9_000u64..11_000,
        1 => 55_000u64..65_000,
        1 => 3_590_000u64..3_610_000,
    ]
}
