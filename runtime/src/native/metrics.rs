//! What a native gate tells its operators (the `metrics` feature): every
//! decision, every request counted in memory because its store could not be
//! asked, the store's state, its round trips, the refused-keys cache's
//! answers, the addresses that could not be known, the paths refused as
//! too long and the in-memory
//! counter's size against its bound, recorded through the [`metrics`]
//! facade so the application picks the exporter (Prometheus's, say).
//!
//! Every label is a name from the application description (the deployable,
//! a limit's policy name, a store connection) or a fixed word: never a key,
//! an address or a caller, so no series grows with the number of clients.
//! The handles are registered on the gate's first decision, once, so a
//! request costs one add to its limits' counters; the gauges are set only
//! when their value changes (read and written under the gate's lock, with
//! no read-modify-write of their own), since every operation on an
//! exporter's handle is an atomic read-modify-write or two. Install the
//! recorder before the server serves.
//!
//! [`METRICS`] lists them all, as docs/operations.md does.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use metrics::{Counter, Gauge, Unit};

use crate::address::AddressUnknown;
use crate::backend::{BackendId, FallbackReason};
use crate::breaker::BackendState;
use crate::counter::Verdict;
use crate::limiter::{Counted, Decision, InMemory, Limiter};

/// Requests checked against a limit, by deployable, limit (its policy name,
/// as the 429's `RateLimit-Policy` names it) and outcome (`passed`, `refused`).
pub const DECISIONS: &str = "rate_limits_decisions_total";
/// Requests a shadow limit would have refused and let through, by
/// deployable and limit (its policy name): registered for shadow limits
/// only. Its `rate_limits_decisions_total` counts them `passed`.
pub const SHADOW_REFUSALS: &str = "rate_limits_shadow_refusals_total";
/// Checks counted in memory because their store could not be asked, by
/// deployable, store and reason (`missing`, `failed`, `timed_out`,
/// `cooling_off`, `not_asked`).
pub const COUNTED_IN_MEMORY: &str = "rate_limits_counted_in_memory_total";
/// Each store's state, by deployable, store and state (`asked`,
/// `cooling_off`, `probing`): 1 for the state it is in, 0 for the others.
/// Set each time the state changes: a probe that failed sets `cooling_off`
/// anew (a new cool-off begins), so whoever watches the sets sees each
/// cool-off and how it ended; requests that were asked before a cool-off
/// and end during it set nothing.
pub const STORE_STATE: &str = "rate_limits_store_state";
/// Each answered round trip to a store, in seconds, by deployable and store
/// (recorded with the `redis` feature only: no other store makes one).
pub const STORE_ROUND_TRIP: &str = "rate_limits_store_round_trip_seconds";
/// Buckets for [`STORE_ROUND_TRIP`], in seconds, for an exporter that needs
/// them (Prometheus's exports a summary without, whose quantiles cannot be
/// added up over instances): well under a millisecond up to the 500 ms
/// deadline, so a dashboard sees a store slowing down before it is given up on.
pub const STORE_ROUND_TRIP_BUCKETS: [f64; 10] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
];
/// Checks the refused-keys cache answered without a round trip, by
/// deployable and store.
pub const REFUSED_CACHE_ANSWERS: &str = "rate_limits_refused_cache_answers_total";
/// Requests whose address could not be known, by deployable and reason (as
/// `rate_limits.address_unknown` logs it).
pub const ADDRESS_UNKNOWN: &str = "rate_limits_address_unknown_total";
/// Requests refused 414 because their path is longer than
/// [`crate::limiter::MAX_PATH_BYTES`] (decided from its length, counted
/// under no limit), by deployable: never by path, which is a key.
pub const PATHS_TOO_LONG: &str = "rate_limits_paths_too_long_total";
/// The in-memory counter's bytes on the heap now, by deployable.
pub const MEMORY_BYTES: &str = "rate_limits_memory_bytes";
/// The most the in-memory counter can hold, by deployable: its stated bound.
pub const MEMORY_BOUND_BYTES: &str = "rate_limits_memory_bound_bytes";

/// A label a metric carries: its name and the values it takes, when they
/// are fixed words (`None`: the application's names, a policy's or a
/// store's), so a dashboard or a test can be held to them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Label {
    /// The label's name.
    pub name: &'static str,
    /// Every value it takes, or `None` for the application's names.
    pub values: Option<&'static [&'static str]>,
}

/// `outcome`'s values, in the order the handles are made.
const OUTCOMES: [&str; 2] = ["passed", "refused"];
/// [`COUNTED_IN_MEMORY`]'s `reason`s: [`MEMORY_REASONS`] as labels.
const IN_MEMORY_REASONS: [&str; 5] = ["missing", "failed", "timed_out", "cooling_off", "not_asked"];
/// [`STORE_STATE`]'s `state`s: [`BackendState::VALUES`] as labels.
const STORE_STATES: [&str; 3] = ["asked", "cooling_off", "probing"];
/// [`ADDRESS_UNKNOWN`]'s `reason`s: [`AddressUnknown::VALUES`] as labels.
const ADDRESS_UNKNOWN_REASONS: [&str; 4] = [
    "no_peer_address",
    "no_forwarded_for",
    "forwarded_for_invalid",
    "no_cf_connecting_ip",
];

const fn label(name: &'static str) -> Label {
    Label { name, values: None }
}

const fn words(name: &'static str, values: &'static [&'static str]) -> Label {
    Label {
        name,
        values: Some(values),
    }
}

/// Every metric a native gate records, with its labels (beside
/// `deployable`, which every series carries), for documentation, dashboards
/// and tests ([`STORE_ROUND_TRIP`] with the `redis` feature only).
pub const METRICS: [(&str, &[Label]); 10] = [
    (DECISIONS, &[label("limit"), words("outcome", &OUTCOMES)]),
    (SHADOW_REFUSALS, &[label("limit")]),
    (
        COUNTED_IN_MEMORY,
        &[label("store"), words("reason", &IN_MEMORY_REASONS)],
    ),
    (
        STORE_STATE,
        &[label("store"), words("state", &STORE_STATES)],
    ),
    (STORE_ROUND_TRIP, &[label("store")]),
    (REFUSED_CACHE_ANSWERS, &[label("store")]),
    (
        ADDRESS_UNKNOWN,
        &[words("reason", &ADDRESS_UNKNOWN_REASONS)],
    ),
    (PATHS_TOO_LONG, &[]),
    (MEMORY_BYTES, &[]),
    (MEMORY_BOUND_BYTES, &[]),
];

/// The handles of one gate's series, registered with the recorder installed
/// when the gate first decides.
pub(super) struct GateMetrics {
    /// By the limiter's policy index: passed, refused.
    decisions: Vec<[Counter; 2]>,
    /// By the limiter's policy index: `Some` for a shadow limit.
    shadow_refusals: Vec<Option<Counter>>,
    /// By backend: by [`MEMORY_REASONS`].
    in_memory: Vec<[Counter; 5]>,
    /// By backend: one gauge per [`BackendState::VALUES`], and the
    /// [`Limiter::backend_state_changes`] they were last set at.
    states: Vec<([Gauge; 3], AtomicU64)>,
    /// By backend: only a Redis store makes round trips.
    #[cfg(feature = "redis")]
    round_trips: Vec<metrics::Histogram>,
    refused_cache: Vec<Counter>,
    /// By [`AddressUnknown::VALUES`].
    address_unknown: [Counter; 4],
    paths_too_long: Counter,
    memory_bytes: Gauge,
    /// The value `memory_bytes` was last set to.
    memory_bytes_set: AtomicUsize,
}

impl std::fmt::Debug for GateMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GateMetrics")
            .field("limits", &self.decisions.len())
            .field("stores", &self.states.len())
            .finish_non_exhaustive()
    }
}

/// The reasons [`COUNTED_IN_MEMORY`] is labelled with, in its handles' order.
const MEMORY_REASONS: [InMemory; 5] = [
    InMemory::Unavailable(FallbackReason::Missing),
    InMemory::Unavailable(FallbackReason::Failed),
    InMemory::Unavailable(FallbackReason::TimedOut),
    InMemory::CoolingOff,
    InMemory::NotAsked,
];

impl GateMetrics {
    /// Registers the series of `limiter`'s deployable (named `deployable`)
    /// with the recorder installed now, describes them, and sets the gauges
    /// that are known before any request: each store's state, the memory bound.
    pub(super) fn register(limiter: &Limiter, deployable: &str) -> GateMetrics {
        describe();
        let deployable = deployable.to_owned();
        let decisions = limiter
            .policy_names()
            .map(|limit| {
                OUTCOMES.map(|outcome| {
                    metrics::counter!(DECISIONS, "deployable" => deployable.clone(),
                        "limit" => limit.to_owned(), "outcome" => outcome)
                })
            })
            .collect();
        let shadow_refusals = limiter
            .policy_names()
            .zip(limiter.rules().shadow_policies())
            .map(|(limit, shadow)| {
                shadow.then(|| {
                    metrics::counter!(SHADOW_REFUSALS, "deployable" => deployable.clone(),
                        "limit" => limit.to_owned())
                })
            })
            .collect();
        let stores: Vec<String> = limiter.backend_names().map(str::to_owned).collect();
        let in_memory = stores
            .iter()
            .map(|store| {
                MEMORY_REASONS.map(|reason| {
                    metrics::counter!(COUNTED_IN_MEMORY, "deployable" => deployable.clone(),
                        "store" => store.clone(), "reason" => reason.as_str())
                })
            })
            .collect();
        let states = (0..stores.len())
            .map(|index| {
                let store = BackendId::new(index);
                let gauges = BackendState::VALUES.map(|state| {
                    metrics::gauge!(STORE_STATE, "deployable" => deployable.clone(),
                        "store" => stores[index].clone(), "state" => state.as_str())
                });
                set_state(&gauges, limiter.backend_state(store));
                (gauges, AtomicU64::new(limiter.backend_state_changes(store)))
            })
            .collect();
        #[cfg(feature = "redis")]
        let round_trips = stores
            .iter()
            .map(|store| {
                metrics::histogram!(STORE_ROUND_TRIP, "deployable" => deployable.clone(),
                    "store" => store.clone())
            })
            .collect();
        let refused_cache = stores
            .iter()
            .map(|store| {
                metrics::counter!(REFUSED_CACHE_ANSWERS, "deployable" => deployable.clone(),
                    "store" => store.clone())
            })
            .collect();
        let address_unknown = AddressUnknown::VALUES.map(|reason| {
            metrics::counter!(ADDRESS_UNKNOWN, "deployable" => deployable.clone(),
                "reason" => reason.as_str())
        });
        let paths_too_long = metrics::counter!(PATHS_TOO_LONG, "deployable" => deployable.clone());
        let memory_bytes = metrics::gauge!(MEMORY_BYTES, "deployable" => deployable.clone());
        let memory_bytes_set = limiter.memory_bytes();
        memory_bytes.set(memory_bytes_set as f64);
        metrics::gauge!(MEMORY_BOUND_BYTES, "deployable" => deployable)
            .set(limiter.memory_bound_bytes() as f64);
        GateMetrics {
            decisions,
            shadow_refusals,
            in_memory,
            states,
            #[cfg(feature = "redis")]
            round_trips,
            refused_cache,
            address_unknown,
            paths_too_long,
            memory_bytes,
            memory_bytes_set: AtomicUsize::new(memory_bytes_set),
        }
    }

    /// Records one request's decision: each of its checks, the stores'
    /// states after it, and the counter's size when it counted in memory.
    /// `limiter` is the one that decided, still locked: the gauges' last
    /// values are read and written under that lock, so plain loads and
    /// stores keep them.
    pub(super) fn record(&self, limiter: &Limiter, decision: &Decision) {
        let mut counted_in_memory = false;
        for check in &decision.checks {
            let Some((verdict, counted)) = check.settled() else {
                continue;
            };
            let exceeded = verdict == Verdict::Exceeded;
            let refused = exceeded && !check.is_shadow();
            if let Some(pair) = self.decisions.get(check.policy().index()) {
                pair[usize::from(refused)].increment(1);
            }
            if exceeded
                && check.is_shadow()
                && let Some(Some(counter)) = self.shadow_refusals.get(check.policy().index())
            {
                counter.increment(1);
            }
            let store = check.backend().map(BackendId::index);
            match counted {
                Counted::InMemory(reason) => {
                    counted_in_memory = true;
                    // A check with no backend counts in memory by design: no trouble to count.
                    let reason = MEMORY_REASONS.iter().position(|r| *r == reason);
                    if let (Some(store), Some(reason)) = (store, reason)
                        && let Some(counters) = self.in_memory.get(store)
                    {
                        counters[reason].increment(1);
                    }
                }
                Counted::Remembered => {
                    if let Some(counter) = store.and_then(|s| self.refused_cache.get(s)) {
                        counter.increment(1);
                    }
                }
                Counted::Backend => {}
            }
        }
        if counted_in_memory {
            let bytes = limiter.memory_bytes();
            if self.memory_bytes_set.load(Ordering::Relaxed) != bytes {
                self.memory_bytes_set.store(bytes, Ordering::Relaxed);
                self.memory_bytes.set(bytes as f64);
            }
        }
        for (index, (gauges, last)) in self.states.iter().enumerate() {
            let store = BackendId::new(index);
            let changes = limiter.backend_state_changes(store);
            if last.load(Ordering::Relaxed) != changes {
                last.store(changes, Ordering::Relaxed);
                set_state(gauges, limiter.backend_state(store));
            }
        }
    }

    /// Records a round trip to store `store` that answered after `took`.
    #[cfg(feature = "redis")]
    pub(super) fn round_trip(&self, store: BackendId, took: std::time::Duration) {
        if let Some(histogram) = self.round_trips.get(store.index()) {
            histogram.record(took.as_secs_f64());
        }
    }

    /// Records a request whose address could not be known.
    pub(super) fn address_unknown(&self, reason: AddressUnknown) {
        if let Some(index) = AddressUnknown::VALUES.iter().position(|r| *r == reason) {
            self.address_unknown[index].increment(1);
        }
    }

    /// Records a request refused 414, its path too long to read.
    pub(super) fn path_too_long(&self) {
        self.paths_too_long.increment(1);
    }
}

/// The metrics' help texts, given to the recorder (Prometheus's `# HELP`).
/// Sets a store's state gauges: 1 for `state`, 0 for the others.
fn set_state(gauges: &[Gauge; 3], state: BackendState) {
    for (gauge, value) in gauges.iter().zip(BackendState::VALUES) {
        gauge.set(f64::from(u8::from(value == state)));
    }
}

fn describe() {
    metrics::describe_counter!(
        DECISIONS,
        "Requests checked against a limit, by limit (its RateLimit-Policy name) and outcome"
    );
    metrics::describe_counter!(
        SHADOW_REFUSALS,
        "Requests a shadow limit would have refused and let through, by limit"
    );
    metrics::describe_counter!(
        COUNTED_IN_MEMORY,
        "Checks counted in the process's memory because their store could not be asked, by reason"
    );
    metrics::describe_gauge!(
        STORE_STATE,
        "1 for the state each store is in (asked, cooling_off, probing), 0 for the others"
    );
    metrics::describe_histogram!(
        STORE_ROUND_TRIP,
        Unit::Seconds,
        "Each round trip to a store that answered"
    );
    metrics::describe_counter!(
        REFUSED_CACHE_ANSWERS,
        "Checks the refused-keys cache answered without asking the store"
    );
    metrics::describe_counter!(
        ADDRESS_UNKNOWN,
        "Requests whose client address could not be known, by reason (counted under one shared key)"
    );
    metrics::describe_counter!(
        PATHS_TOO_LONG,
        "Requests refused 414, their path longer than the gate reads (counted under no limit)"
    );
    metrics::describe_gauge!(
        MEMORY_BYTES,
        Unit::Bytes,
        "The in-memory counter's bytes on the heap"
    );
    metrics::describe_gauge!(
        MEMORY_BOUND_BYTES,
        Unit::Bytes,
        "The most the in-memory counter can hold"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The values [`METRICS`] lists are the ones the handles are made with.
    #[test]
    fn the_listed_label_values_are_the_recorded_ones() {
        assert_eq!(IN_MEMORY_REASONS, MEMORY_REASONS.map(InMemory::as_str));
        assert_eq!(STORE_STATES, BackendState::VALUES.map(BackendState::as_str));
        assert_eq!(
            ADDRESS_UNKNOWN_REASONS,
            AddressUnknown::VALUES.map(AddressUnknown::as_str)
        );
        // `decisions`' handles are indexed by `Verdict::Exceeded`.
        assert_eq!(OUTCOMES[usize::from(false)], "passed");
        assert_eq!(OUTCOMES[usize::from(true)], "refused");
    }
}
