//! The clock a gate reads ([`Clock`], reached through its `clock()`): each
//! gate reads its own, so no caller passes the time in. Natively it is two
//! clocks, the wall clock and a monotonic one; on Workers (wasm32) one,
//! `Date.now()`, which it never lets go backwards within the isolate (the
//! native wall clock may step back, as NTP steps it: cool-offs read the
//! monotonic one). The 500 ms deadline runs on real timers whatever it reads.
//! A native gate's clock can be shifted (`set_offset_ms`, `step_wall_ms`),
//! as a test moves time (the harness's scenario clock, an application's
//! own tests); on Workers only the harness's fixtures can (the `testing`
//! feature).

#[cfg(not(target_arch = "wasm32"))]
use std::sync::atomic::{AtomicI64, Ordering};
#[cfg(not(target_arch = "wasm32"))]
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::limiter::Now;

/// The instance's two clocks ([`Now`]): the wall clock, which the windows of
/// the in-memory count read, and a monotonic one ([`Instant`]), which
/// cool-offs and the Redis store's refused-keys cache read so a wall clock
/// stepped back cannot stretch them. In Redis, Redis's own clock decides
/// the window (`native::scripts::COUNT_ALL`), so instances whose wall clocks
/// differ count one window together. Both are shifted by an
/// offset that is zero unless a test moves it ([`Clock::set_offset_ms`]).
#[cfg(not(target_arch = "wasm32"))]
#[derive(Debug)]
pub struct Clock {
    origin: Instant,
    /// The scenario clock: both clocks, as time passing moves them.
    offset_ms: AtomicI64,
    /// A step of the wall clock alone, as NTP or a resumed VM makes one.
    wall_step_ms: AtomicI64,
}

#[cfg(not(target_arch = "wasm32"))]
impl Default for Clock {
    fn default() -> Self {
        Clock {
            origin: Instant::now(),
            offset_ms: AtomicI64::new(0),
            wall_step_ms: AtomicI64::new(0),
        }
    }
}

/// One reading of both clocks, unshifted ([`Clock::read`]): what a caller
/// keeps to learn the time after a wait with one more reading
/// ([`Clock::read_after`]), and to time the wait (`instant`).
#[cfg(not(target_arch = "wasm32"))]
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reading {
    /// The monotonic clock.
    pub(crate) instant: Instant,
    /// The wall clock, ms since the Unix epoch, before any shift.
    wall_ms: u64,
}

#[cfg(not(target_arch = "wasm32"))]
impl Clock {
    /// Both clocks now.
    pub fn now(&self) -> Now {
        self.now_of(self.read())
    }

    /// Both clocks read now (two readings: the wall clock's and the
    /// monotonic one's).
    pub(crate) fn read(&self) -> Reading {
        Reading {
            wall_ms: unshifted_wall_ms(),
            instant: Instant::now(),
        }
    }

    /// Both clocks after a wait that began at `earlier`, with one reading,
    /// the monotonic clock's: the wall clock is taken to have moved as far
    /// (a step of it during the wait is read by the next request). A
    /// round trip to Redis reads the time once after it this way.
    #[cfg(feature = "redis")]
    pub(crate) fn read_after(&self, earlier: Reading) -> Reading {
        let instant = Instant::now();
        let waited = instant.saturating_duration_since(earlier.instant);
        Reading {
            wall_ms: earlier.wall_ms.saturating_add(millis(waited)),
            instant,
        }
    }

    /// The time `reading` shows, shifted by the offsets.
    pub(crate) fn now_of(&self, reading: Reading) -> Now {
        let shift =
            self.offset_ms.load(Ordering::Relaxed) + self.wall_step_ms.load(Ordering::Relaxed);
        Now {
            wall_ms: reading.wall_ms.saturating_add_signed(shift),
            monotonic_ms: self.monotonic_ms_at(reading.instant),
        }
    }

    /// Milliseconds since the Unix epoch, shifted by the offset.
    pub fn wall_ms(&self) -> u64 {
        let shift =
            self.offset_ms.load(Ordering::Relaxed) + self.wall_step_ms.load(Ordering::Relaxed);
        unshifted_wall_ms().saturating_add_signed(shift)
    }

    /// Milliseconds since the clock was made, shifted by the offset: never
    /// going backwards in production.
    #[doc(hidden)]
    pub fn monotonic_ms(&self) -> u64 {
        self.monotonic_ms_at(Instant::now())
    }

    /// [`Clock::monotonic_ms`] at `instant`.
    fn monotonic_ms_at(&self, instant: Instant) -> u64 {
        let elapsed = millis(instant.saturating_duration_since(self.origin));
        elapsed.saturating_add_signed(self.offset_ms.load(Ordering::Relaxed))
    }

    /// The scenario clock's offset: zero in production. The Redis store
    /// adds it to Redis's own clock, which decides the windows there, so a
    /// scenario moves Redis's windows as it moves the gate's; a step of the
    /// wall clock alone (`step_wall_ms`) is this instance's own
    /// error and never reaches Redis.
    #[cfg(feature = "redis")]
    pub(crate) fn scenario_offset_ms(&self) -> i64 {
        self.offset_ms.load(Ordering::Relaxed)
    }

    /// Shifts both clocks by `offset_ms` (as time passing would), for tests
    /// that move time instead of waiting for it (the harness's scenario
    /// clock, an application's own tests of its limits). Zero unless set.
    pub fn set_offset_ms(&self, offset_ms: i64) {
        self.offset_ms.store(offset_ms, Ordering::Relaxed);
    }

    /// Steps the wall clock alone by `by_ms` (negative: back), as NTP or a
    /// resumed VM steps it, for tests of what a stepped clock does.
    pub fn step_wall_ms(&self, by_ms: i64) {
        self.wall_step_ms.fetch_add(by_ms, Ordering::Relaxed);
    }
}

/// The wall clock, ms since the Unix epoch (0 before it).
#[cfg(not(target_arch = "wasm32"))]
fn unshifted_wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, millis)
}

/// Whole milliseconds of `duration` (saturating).
#[cfg(not(target_arch = "wasm32"))]
fn millis(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// An isolate's clock: `Date.now()`, the one clock a Worker has, so both of
/// [`Now`]'s are it. It never goes backwards within the isolate (the
/// fallback count's windows are aligned to it): a reading behind the last
/// one is the last one. Shifted by an offset that is zero in production
/// (the harness's scenario clock moves it, with the `testing` feature).
#[cfg(target_arch = "wasm32")]
#[derive(Debug, Default)]
pub struct Clock {
    /// The latest reading, which no later one goes behind.
    last_ms: std::cell::Cell<u64>,
    /// The scenario clock.
    #[cfg(feature = "testing")]
    offset_ms: std::cell::Cell<i64>,
}

#[cfg(target_arch = "wasm32")]
impl Clock {
    /// The clock now, as both of [`Now`]'s.
    pub fn now(&self) -> Now {
        Now::one_clock(self.wall_ms())
    }

    /// Milliseconds since the Unix epoch (`Date.now()`), shifted by the
    /// offset, never behind an earlier reading.
    pub fn wall_ms(&self) -> u64 {
        let now = js_sys::Date::now() as u64;
        #[cfg(feature = "testing")]
        let now = now.saturating_add_signed(self.offset_ms.get());
        let now = now.max(self.last_ms.get());
        self.last_ms.set(now);
        now
    }

    /// Shifts the clock by `offset_ms` (as time passing would): a test hook
    /// (the harness's scenario clock, which only moves forward), so only
    /// with the `testing` feature. Timers (the 500 ms deadline) stay real.
    #[cfg(feature = "testing")]
    pub fn set_offset_ms(&self, offset_ms: i64) {
        self.offset_ms.set(offset_ms);
    }
}
