//! The scenario clock's arithmetic, with no I/O: time is passed in.
//!
//! Every process of a scenario (each isolate's deployable and the binding
//! store) reads the scenario clock: the wall clock plus an offset the harness
//! sets through their control channels. The harness picks the first offset so
//! that the scenario starts at the beginning of a minute (10 s and 60 s
//! windows both start there), and the steps move it forward instead of
//! sleeping. The engine ([`crate::engine`]) does the I/O.
//!
//! Every `*_ms` argument is in ms since the Unix epoch, on one clock that
//! never goes backwards during a scenario; `window_ms` is at least 1.

/// A minute in ms: the longest window the binding counts, and the one every
/// scenario starts at the beginning of.
pub const MINUTE_MS: u64 = 60_000;

/// What a scenario's processes add to the wall clock.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScenarioClock {
    /// Added to the wall clock, in ms; it only grows.
    pub offset_ms: u64,
}

impl ScenarioClock {
    /// The clock that puts `wall_ms` at the beginning of a minute (at or
    /// after it: the scenario clock never runs behind the wall clock).
    pub fn starting_at(wall_ms: u64) -> ScenarioClock {
        ScenarioClock {
            offset_ms: (MINUTE_MS - wall_ms % MINUTE_MS) % MINUTE_MS,
        }
    }

    /// The scenario's time when the wall clock says `wall_ms`.
    pub fn now_ms(self, wall_ms: u64) -> u64 {
        wall_ms.saturating_add(self.offset_ms)
    }

    /// The same clock, `by_ms` later.
    pub fn advanced(self, by_ms: u64) -> ScenarioClock {
        ScenarioClock {
            offset_ms: self.offset_ms.saturating_add(by_ms),
        }
    }
}

/// The beginning of the minute `now_ms` is in.
pub fn minute_of(now_ms: u64) -> u64 {
    now_ms - now_ms % MINUTE_MS
}

/// How far `now_ms` is from the next boundary of a clock-aligned window of
/// `window_ms`: never 0 (at a boundary, the next one is a whole window away).
pub fn to_next_boundary(now_ms: u64, window_ms: u64) -> u64 {
    let window_ms = window_ms.max(1);
    window_ms - now_ms % window_ms
}

/// How far to move so that at least `room_ms` is left in the current window
/// of `window_ms`: 0 when there is room, else to the next boundary.
pub fn to_room(now_ms: u64, window_ms: u64, room_ms: u64) -> u64 {
    let left = to_next_boundary(now_ms, window_ms);
    if left < room_ms { left } else { 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scenario_starts_at_the_beginning_of_a_minute_whatever_the_second() {
        for wall in [0, 1, 59_999, 60_000, 1_764_479_521_337, 1_764_479_579_999] {
            let clock = ScenarioClock::starting_at(wall);
            let now = clock.now_ms(wall);
            assert_eq!(now % MINUTE_MS, 0, "wall {wall} -> {now}");
            assert!(
                now >= wall && now - wall < MINUTE_MS,
                "wall {wall} -> {now}"
            );
            // Both windows the binding counts start there.
            assert_eq!(now % 10_000, 0);
        }
    }

    #[test]
    fn the_next_boundary_is_never_now() {
        assert_eq!(to_next_boundary(60_000, 60_000), 60_000);
        assert_eq!(to_next_boundary(60_001, 60_000), 59_999);
        assert_eq!(to_next_boundary(125_500, 10_000), 4_500);
        assert_eq!(
            to_next_boundary(5, 0),
            1,
            "a zero window is treated as 1 ms"
        );
    }

    #[test]
    fn room_moves_only_when_too_little_is_left() {
        assert_eq!(to_room(120_000, 10_000, 6_000), 0);
        assert_eq!(to_room(125_000, 10_000, 6_000), 5_000);
        assert_eq!(to_room(124_000, 10_000, 6_000), 0);
    }

    #[test]
    fn advancing_moves_every_reading_by_the_same_amount() {
        let clock = ScenarioClock::starting_at(1_000).advanced(30_000);
        assert_eq!(clock.now_ms(1_000), 90_000);
        assert_eq!(clock.now_ms(2_000), 91_000);
    }
}
