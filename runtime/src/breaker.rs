//! The cool-off of one backend (a Cloudflare binding, or a Redis connection),
//! with no I/O inside: a backend that timed out or failed is not asked again
//! for [`COOL_OFF_MS`], so a troubled backend costs one wait, not one per
//! request; then one request at a time probes it.
//!
//! Call order, per request and per backend the request would ask:
//! 1. [`Breaker::route`] with the time: ask the backend ([`Route::Ask`]), probe
//!    it ([`Route::Probe`]: ask it, and this request's answer decides), or
//!    count in memory without asking ([`Route::CoolingOff`]).
//! 2. When the request asked (`Ask` or `Probe`), [`Breaker::record`] with
//!    whether the backend answered in time, and the time. While a probe is
//!    under way only the probe asks (an ask begun before the cool-off ended
//!    its deadline 9.5 s earlier), so whatever is recorded then decides it.
//!
//! `monotonic_ms` is milliseconds since any fixed origin on a clock that
//! never goes backwards (a native server's `Instant`, the limiter's
//! [`crate::limiter::Now::monotonic_ms`]), never the wall clock that aligns
//! windows: a wall clock stepped back an hour would hold a cool-off an hour
//! longer. (Were it to go backwards anyway, a cool-off would last longer by
//! as much, never shorter.) A probe whose request never records (cancelled
//! by the runtime) holds the breaker for at most [`PROBE_LEASE_MS`], after
//! which another request probes.

use crate::backend::DEADLINE_MS;

/// How long a backend that timed out or failed is left alone: requests it
/// would count are counted in memory at once meanwhile.
pub const COOL_OFF_MS: u64 = 10_000;

/// How long a probe may go unrecorded before another request probes:
/// twice the deadline, so a recorded probe always comes first.
pub const PROBE_LEASE_MS: u64 = 2 * DEADLINE_MS as u64;

/// What one request does about one backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// Ask the backend, with the deadline: it is healthy as far as we know.
    Ask,
    /// Ask the backend, with the deadline: the cool-off is over and this
    /// request is the one that finds out whether it recovered.
    Probe,
    /// Don't ask: count in memory now, without waiting or logging.
    CoolingOff,
}

/// Where a backend stands, as operators see it (a native gate's
/// `rate_limits_store_state` gauge): asked on every request, cooling off,
/// or being probed by one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum BackendState {
    /// Asked on every request.
    Asked,
    /// Left alone after it timed out or failed: requests count in memory.
    CoolingOff,
    /// One request is finding out whether it recovered.
    Probing,
}

impl BackendState {
    /// Every state, in the order of their discriminants.
    pub const VALUES: [BackendState; 3] = [
        BackendState::Asked,
        BackendState::CoolingOff,
        BackendState::Probing,
    ];

    /// The state as a label: `asked`, `cooling_off`, `probing`.
    pub fn as_str(self) -> &'static str {
        match self {
            BackendState::Asked => "asked",
            BackendState::CoolingOff => "cooling_off",
            BackendState::Probing => "probing",
        }
    }
}

/// How an asked backend did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// It answered in time (whatever it answered).
    Answered,
    /// It threw, rejected, answered malformed, or missed the deadline.
    Troubled,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Asked on every request.
    Closed,
    /// Not asked until `until_ms`.
    Open { until_ms: u64 },
    /// One request is probing; the others count in memory until it records
    /// or its lease ends at `lease_ends_ms`.
    Probing { lease_ends_ms: u64 },
}

/// The cool-off state of one backend in one isolate (or process).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Breaker {
    state: State,
    /// How many times `state` changed: a new cool-off after a failed probe
    /// is a change though its kind is the same.
    changes: u64,
}

impl Default for Breaker {
    fn default() -> Self {
        Self::new()
    }
}

impl Breaker {
    /// A breaker for a backend not yet known to be in trouble.
    pub const fn new() -> Breaker {
        Breaker {
            state: State::Closed,
            changes: 0,
        }
    }

    /// Where the backend stands, as the last request left it (a cool-off
    /// that has run out is still `CoolingOff` until a request probes).
    pub fn state(&self) -> BackendState {
        match self.state {
            State::Closed => BackendState::Asked,
            State::Open { .. } => BackendState::CoolingOff,
            State::Probing { .. } => BackendState::Probing,
        }
    }

    /// How many times the state changed since the breaker was made: what a
    /// state gauge compares to know it must be set again (a cool-off that
    /// follows a failed probe is a new one, though [`Self::state`] says
    /// `CoolingOff` before and after).
    pub fn changes(&self) -> u64 {
        self.changes
    }

    fn set(&mut self, state: State) {
        if state != self.state {
            self.state = state;
            self.changes = self.changes.wrapping_add(1);
        }
    }

    /// What this request does about the backend at `monotonic_ms`. A `Probe`
    /// is handed to one request at a time: the caller must ask the backend and
    /// [`record`](Self::record) its outcome.
    pub fn route(&mut self, monotonic_ms: u64) -> Route {
        match self.state {
            State::Closed => Route::Ask,
            State::Open { until_ms }
            | State::Probing {
                lease_ends_ms: until_ms,
            } if monotonic_ms >= until_ms => {
                self.set(State::Probing {
                    lease_ends_ms: monotonic_ms.saturating_add(PROBE_LEASE_MS),
                });
                Route::Probe
            }
            State::Open { .. } | State::Probing { .. } => Route::CoolingOff,
        }
    }

    /// Records how the backend did for a request that asked it. A trouble
    /// while closed starts a cool-off; while probing, the outcome closes the
    /// breaker or starts a new cool-off. During a cool-off nothing changes:
    /// requests asked before it began, ending late, do not lengthen or end it.
    pub fn record(&mut self, outcome: Outcome, monotonic_ms: u64) {
        let cool_off = State::Open {
            until_ms: monotonic_ms.saturating_add(COOL_OFF_MS),
        };
        self.set(match (outcome, self.state) {
            (Outcome::Troubled, State::Closed | State::Probing { .. }) => cool_off,
            (Outcome::Answered, State::Probing { .. }) => State::Closed,
            (Outcome::Answered, State::Closed) | (_, State::Open { .. }) => self.state,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: u64 = 1_800_000_000_000;

    #[test]
    fn a_healthy_store_is_always_asked() {
        let mut b = Breaker::new();
        for t in 0..100 {
            assert_eq!(b.route(T0 + t), Route::Ask);
            b.record(Outcome::Answered, T0 + t);
        }
        assert_eq!(b.state(), BackendState::Asked);
    }

    #[test]
    fn one_trouble_cools_off_for_ten_seconds_then_one_request_probes() {
        let mut b = Breaker::new();
        assert_eq!(b.route(T0), Route::Ask);
        b.record(Outcome::Troubled, T0 + 500);
        assert_eq!(b.route(T0 + 501), Route::CoolingOff);
        assert_eq!(b.route(T0 + 500 + COOL_OFF_MS - 1), Route::CoolingOff);
        assert_eq!(b.route(T0 + 500 + COOL_OFF_MS), Route::Probe);
        // Only one probe at a time: the others keep counting in memory.
        assert_eq!(b.route(T0 + 500 + COOL_OFF_MS + 1), Route::CoolingOff);
        b.record(Outcome::Answered, T0 + 500 + COOL_OFF_MS + 3);
        assert_eq!(b.state(), BackendState::Asked);
        assert_eq!(b.route(T0 + 500 + COOL_OFF_MS + 4), Route::Ask);
    }

    #[test]
    fn a_failed_probe_starts_a_new_cool_off() {
        let mut b = Breaker::new();
        b.record(Outcome::Troubled, T0);
        assert_eq!(b.route(T0 + COOL_OFF_MS), Route::Probe);
        b.record(Outcome::Troubled, T0 + COOL_OFF_MS + 500);
        assert_eq!(b.route(T0 + COOL_OFF_MS + 501), Route::CoolingOff);
        assert_eq!(b.route(T0 + 2 * COOL_OFF_MS + 499), Route::CoolingOff);
        assert_eq!(b.route(T0 + 2 * COOL_OFF_MS + 500), Route::Probe);
    }

    #[test]
    fn requests_asked_before_the_cool_off_change_nothing() {
        let mut b = Breaker::new();
        // Eight requests asked at once; the first to time out opens.
        for _ in 0..8 {
            assert_eq!(b.route(T0), Route::Ask);
        }
        b.record(Outcome::Troubled, T0 + 500);
        // The others time out later, or one answers: the cool-off stands as begun.
        b.record(Outcome::Troubled, T0 + 900);
        b.record(Outcome::Answered, T0 + 901);
        assert_eq!(b.route(T0 + 500 + COOL_OFF_MS - 1), Route::CoolingOff);
        assert_eq!(b.route(T0 + 500 + COOL_OFF_MS), Route::Probe);
    }

    #[test]
    fn changes_count_each_new_state_and_nothing_else() {
        let mut b = Breaker::new();
        b.record(Outcome::Answered, T0);
        assert_eq!(b.changes(), 0, "an answer while closed changes nothing");
        b.record(Outcome::Troubled, T0);
        b.record(Outcome::Troubled, T0 + 400);
        assert_eq!(
            b.changes(),
            1,
            "a late trouble during the cool-off is no change"
        );
        assert_eq!(b.route(T0 + COOL_OFF_MS), Route::Probe);
        assert_eq!(b.changes(), 2);
        b.record(Outcome::Troubled, T0 + COOL_OFF_MS + 500);
        assert_eq!(
            (b.state(), b.changes()),
            (BackendState::CoolingOff, 3),
            "a failed probe's new cool-off is a change of its own"
        );
        assert_eq!(b.route(T0 + 2 * COOL_OFF_MS + 500), Route::Probe);
        b.record(Outcome::Answered, T0 + 2 * COOL_OFF_MS + 501);
        assert_eq!((b.state(), b.changes()), (BackendState::Asked, 5));
    }

    #[test]
    fn an_unrecorded_probe_is_replaced_after_its_lease() {
        let mut b = Breaker::new();
        b.record(Outcome::Troubled, T0);
        assert_eq!(b.route(T0 + COOL_OFF_MS), Route::Probe);
        assert_eq!(
            b.route(T0 + COOL_OFF_MS + PROBE_LEASE_MS - 1),
            Route::CoolingOff
        );
        assert_eq!(b.route(T0 + COOL_OFF_MS + PROBE_LEASE_MS), Route::Probe);
    }

    #[test]
    fn time_going_backwards_only_lengthens_a_cool_off() {
        let mut b = Breaker::new();
        b.record(Outcome::Troubled, T0);
        assert_eq!(b.route(T0 - 60_000), Route::CoolingOff);
        assert_eq!(b.route(T0 + COOL_OFF_MS), Route::Probe);
    }
}
