//! The cool-off of a troubled binding (or Redis), driven through the real
//! limiter (`checks`, `asks`, `conclude`) on clocks moved by hand.

use runtime::config::Application;
use runtime::limiter::{BackendAnswer, FallbackReason};
use runtime::limiter::{Decision, Now, Pending};
use runtime::unstable_for_tools::breaker::{COOL_OFF_MS, PROBE_LEASE_MS};
use runtime::{Limiter, Subject};

const T0: u64 = 1_800_000_000_000;
const BINDING: &str = "LIMITS_120_PER_60S";

fn limiter() -> Limiter {
    let app = Application::from_toml(
        "[connections.limits]\ndriver = \"cloudflare_rate_limits\"\nnamespace = 7\n\
         [rate_limits]\nstore = \"limits\"\n\
         [[deployables]]\nname = \"edge\"\ntarget = \"workers\"\nserves_api = true\n",
    )
    .expect("valid");
    Limiter::new(&app, "edge", 7).expect("edge")
}

/// What one request did: whether it asked the binding, and the decision,
/// the binding giving `answer` when asked.
fn request(
    limiter: &mut Limiter,
    key: &str,
    answer: BackendAnswer,
    now_ms: u64,
) -> (bool, Decision) {
    request_at(limiter, key, answer, Now::one_clock(now_ms))
}

/// [`request`] at `now` on both clocks.
fn request_at(
    limiter: &mut Limiter,
    key: &str,
    answer: BackendAnswer,
    now: Now,
) -> (bool, Decision) {
    let checks = limiter
        .checks(&Subject::of_request(None, Some(key)), "GET", "/api/items")
        .expect("a short path");
    let mut pending = limiter.asks(checks, now);
    let asked = pending.checks()[0].is_asked();
    for ask in pending.asks() {
        ask.answer(answer);
    }
    (asked, limiter.conclude(pending, now))
}

/// A request from `key` up to its asks, its one check on the binding.
fn ask(limiter: &mut Limiter, key: &str, now_ms: u64) -> Pending {
    let checks = limiter
        .checks(&Subject::of_request(None, Some(key)), "GET", "/api/items")
        .expect("a short path");
    let store = checks[0].backend().expect("a binding");
    assert_eq!(limiter.backend_name(store), BINDING);
    limiter.asks(checks, Now::one_clock(now_ms))
}

/// Whether a request from `key` at `now_ms` would ask the binding.
fn would_ask(limiter: &mut Limiter, key: &str, now_ms: u64) -> bool {
    ask(limiter, key, now_ms).checks()[0].is_asked()
}

const TIMED_OUT: BackendAnswer = BackendAnswer::Unavailable(FallbackReason::TimedOut);
const FAILED: BackendAnswer = BackendAnswer::Unavailable(FallbackReason::Failed);
const MISSING: BackendAnswer = BackendAnswer::Unavailable(FallbackReason::Missing);
const WITHIN: BackendAnswer = BackendAnswer::Answered { success: true };

#[test]
fn a_timed_out_binding_is_left_alone_for_the_cool_off_and_counted_in_memory() {
    let mut l = limiter();
    let (asked, first) = request(&mut l, "192.0.2.1", TIMED_OUT, T0 + 500);
    assert!(asked);
    assert_eq!(first.logs.len(), 1, "the first timeout is logged");
    // For the next 10 s nobody asks; the address is counted in memory,
    // the first request's count included: 119 more, then refused.
    for i in 0..119 {
        let (asked, d) = request(&mut l, "192.0.2.1", TIMED_OUT, T0 + 501 + i);
        assert!(!asked, "request {i} asked a cooling binding");
        assert!(d.logs.is_empty() && d.refusal.is_none());
    }
    let (asked, d) = request(&mut l, "192.0.2.1", TIMED_OUT, T0 + 700);
    assert!(!asked);
    assert!(d.refusal.is_some(), "the memory count reached 120");
}

#[test]
fn after_the_cool_off_one_probe_at_a_time_and_an_answer_closes_it() {
    let mut l = limiter();
    let _ = request(&mut l, "192.0.2.2", FAILED, T0);
    let probe_at = T0 + COOL_OFF_MS;
    let mut probe = ask(&mut l, "192.0.2.3", probe_at);
    assert!(probe.checks()[0].is_asked(), "the probe");
    // While the probe is out, the others count in memory.
    let (asked, _) = request(&mut l, "192.0.2.4", WITHIN, probe_at + 1);
    assert!(!asked);
    for ask in probe.asks() {
        ask.answer(WITHIN);
    }
    let d = l.conclude(probe, Now::one_clock(probe_at + 3));
    assert!(d.refusal.is_none() && d.logs.is_empty());
    let (asked, _) = request(&mut l, "192.0.2.5", WITHIN, probe_at + 4);
    assert!(asked, "the binding is asked again once a probe answered");
}

#[test]
fn a_failed_probe_starts_a_new_cool_off_without_a_new_line() {
    let mut l = limiter();
    let (_, first) = request(&mut l, "192.0.2.6", TIMED_OUT, T0);
    assert_eq!(first.logs.len(), 1);
    let (asked, probe) = request(&mut l, "192.0.2.6", TIMED_OUT, T0 + COOL_OFF_MS);
    assert!(asked && probe.logs.is_empty(), "probing adds no line");
    let (asked, _) = request(&mut l, "192.0.2.6", WITHIN, T0 + 2 * COOL_OFF_MS - 1);
    assert!(!asked, "a new cool-off from the failed probe");
    let (asked, _) = request(&mut l, "192.0.2.6", WITHIN, T0 + 2 * COOL_OFF_MS);
    assert!(asked);
}

#[test]
fn a_flapping_binding_is_logged_once() {
    let mut l = limiter();
    let mut lines = 0;
    let mut now = T0;
    for answer in [TIMED_OUT, WITHIN, FAILED, WITHIN, TIMED_OUT] {
        // Ask until the binding is asked (the probe), then give this answer.
        loop {
            let (asked, d) = request(&mut l, "192.0.2.7", answer, now);
            lines += d.logs.len();
            now += 1_000;
            if asked {
                break;
            }
        }
    }
    assert_eq!(lines, 1);
}

#[test]
fn a_missing_binding_is_looked_up_on_every_request() {
    let mut l = limiter();
    for i in 0..5 {
        let (asked, _) = request(&mut l, "192.0.2.8", MISSING, T0 + i);
        assert!(asked, "missing costs nothing: looked up every time");
    }
    let (asked, d) = request(&mut l, "192.0.2.8", WITHIN, T0 + 6);
    assert!(
        asked && d.refusal.is_none(),
        "a restored entry is used at once"
    );
}

#[test]
fn a_wall_clock_stepped_back_stretches_no_cool_off() {
    let mut l = limiter();
    let at = |wall_ms, monotonic_ms| Now {
        wall_ms,
        monotonic_ms,
    };
    let (_, first) = request_at(&mut l, "192.0.2.10", TIMED_OUT, at(T0, 5_000));
    assert_eq!(first.logs.len(), 1);
    // The wall clock is stepped back an hour (NTP, a resumed VM) while the
    // monotonic clock runs on: the cool-off ends 10 s later all the same.
    let back = T0 - 3_600_000;
    let (asked, _) = request_at(
        &mut l,
        "192.0.2.10",
        WITHIN,
        at(back, 5_000 + COOL_OFF_MS - 1),
    );
    assert!(!asked, "still cooling off");
    let (asked, _) = request_at(
        &mut l,
        "192.0.2.10",
        WITHIN,
        at(back + 1, 5_000 + COOL_OFF_MS),
    );
    assert!(asked, "the probe comes when the monotonic clock says");
    // And a wall clock stepped forward ends none early.
    let (_, _) = request_at(&mut l, "192.0.2.11", FAILED, at(T0, 60_000));
    let ahead = T0 + 3_600_000;
    let (asked, _) = request_at(&mut l, "192.0.2.11", WITHIN, at(ahead, 60_001));
    assert!(!asked, "a wall clock stepped forward ends no cool-off");
}

#[test]
fn a_redis_missing_from_the_start_is_asked_once_per_cool_off_and_logged_once() {
    let app = Application::from_toml(
        "name = \"shop\"\n[connections.cache]\ndriver = \"redis\"\nurl = \"redis://127.0.0.1:1\"\n\
         [rate_limits]\nstore = \"cache\"\n\
         [[deployables]]\nname = \"api\"\ntarget = \"native\"\nserves_api = true\n",
    )
    .expect("valid");
    let mut l = Limiter::new(&app, "api", 7).expect("api");
    let mut asked_at = Vec::new();
    let mut lines = 0;
    // A request every 100 ms for 25 s, Redis never there.
    for i in 0..250 {
        let now = T0 + i * 100;
        let (asked, d) = request(&mut l, "192.0.2.12", MISSING, now);
        if asked {
            asked_at.push(now - T0);
        }
        lines += d.logs.len();
        assert!(
            d.logs
                .iter()
                .all(|log| log.reason == FallbackReason::Missing)
        );
    }
    // Each look is a dial: once, then once per cool-off.
    assert_eq!(asked_at, [0, COOL_OFF_MS, 2 * COOL_OFF_MS]);
    assert_eq!(lines, 1);
}

#[test]
fn a_probe_that_never_ends_is_replaced() {
    let mut l = limiter();
    let _ = request(&mut l, "192.0.2.9", FAILED, T0);
    // That request is cancelled and never concluded.
    assert!(would_ask(&mut l, "192.0.2.9", T0 + COOL_OFF_MS));
    let lease_ends = T0 + COOL_OFF_MS + PROBE_LEASE_MS;
    assert!(!would_ask(&mut l, "192.0.2.9", lease_ends - 1));
    assert!(would_ask(&mut l, "192.0.2.9", lease_ends));
}

#[test]
fn a_probe_answered_from_the_stores_own_cache_leaves_the_cool_off_to_a_real_probe() {
    let mut l = limiter();
    let _ = request(&mut l, "192.0.2.1", FAILED, T0);
    // The probe's key was refused earlier in its window: the store answers
    // from its cache, with no round trip, which says nothing of its health.
    let (asked, d) = request(
        &mut l,
        "192.0.2.2",
        BackendAnswer::Remembered,
        T0 + COOL_OFF_MS,
    );
    assert!(asked, "after the cool-off one request probes");
    assert!(d.refusal.is_some() && d.logs.is_empty());
    let (asked, _) = request(&mut l, "192.0.2.3", WITHIN, T0 + COOL_OFF_MS + 1);
    assert!(!asked, "a cached refusal closed the cool-off");
    // The probe's lease ends and the next request probes for real.
    let (asked, _) = request(
        &mut l,
        "192.0.2.3",
        WITHIN,
        T0 + COOL_OFF_MS + PROBE_LEASE_MS,
    );
    assert!(asked);
    let (asked, _) = request(
        &mut l,
        "192.0.2.4",
        WITHIN,
        T0 + COOL_OFF_MS + PROBE_LEASE_MS + 1,
    );
    assert!(asked, "an answer in time closed it");
}

/// Each settled check says where it was counted, and the backend's state
/// follows the cool-off: what the native gate's metrics and the Worker's
/// data points report.
#[test]
fn every_settled_check_says_where_it_was_counted_and_the_state_follows_the_cool_off() {
    use runtime::limiter::{Counted, InMemory};
    use runtime::unstable_for_tools::breaker::BackendState;
    use runtime::unstable_for_tools::counter::Verdict;
    let mut l = limiter();
    let store = ask(&mut l, "192.0.2.40", T0).checks()[0]
        .backend()
        .expect("a binding");
    let counted = |d: &Decision| d.checks.iter().map(|c| c.settled()).collect::<Vec<_>>();
    assert_eq!(l.backend_state(store), BackendState::Asked);
    let (_, answered) = request(&mut l, "192.0.2.40", WITHIN, T0);
    assert_eq!(
        counted(&answered),
        [Some((Verdict::Within, Counted::Backend))]
    );
    let (_, failed) = request(&mut l, "192.0.2.40", FAILED, T0 + 1);
    assert_eq!(
        counted(&failed),
        [Some((
            Verdict::Within,
            Counted::InMemory(InMemory::Unavailable(FallbackReason::Failed))
        ))]
    );
    assert_eq!(l.backend_state(store), BackendState::CoolingOff);
    let (_, cooling) = request(&mut l, "192.0.2.40", WITHIN, T0 + 2);
    assert_eq!(
        counted(&cooling),
        [Some((
            Verdict::Within,
            Counted::InMemory(InMemory::CoolingOff)
        ))]
    );
    // The cool-off over, one request probes while another counts in memory.
    let probe = ask(&mut l, "192.0.2.41", T0 + 1 + COOL_OFF_MS);
    assert_eq!(l.backend_state(store), BackendState::Probing);
    let (_, meanwhile) = request(&mut l, "192.0.2.42", WITHIN, T0 + 2 + COOL_OFF_MS);
    assert_eq!(
        counted(&meanwhile),
        [Some((
            Verdict::Within,
            Counted::InMemory(InMemory::CoolingOff)
        ))]
    );
    let mut probe = probe;
    for a in probe.asks() {
        a.answer(BackendAnswer::Answered { success: false });
    }
    let refused = l.conclude(probe, Now::one_clock(T0 + 3 + COOL_OFF_MS));
    assert_eq!(
        counted(&refused),
        [Some((Verdict::Exceeded, Counted::Backend))]
    );
    assert_eq!(l.backend_state(store), BackendState::Asked);
    assert_eq!(l.policy_name(refused.checks[0].policy()), "address");
    // Asking nothing counts every check in memory as not asked.
    let checks = l
        .checks(
            &Subject::of_request(None, Some("192.0.2.43")),
            "GET",
            "/api/items",
        )
        .expect("a short path");
    let none = l.asks_none(checks);
    let decided = l.conclude(none, Now::one_clock(T0 + 4 + COOL_OFF_MS));
    assert_eq!(
        counted(&decided),
        [Some((
            Verdict::Within,
            Counted::InMemory(InMemory::NotAsked)
        ))]
    );
    assert_eq!(
        l.policy_names().collect::<Vec<_>>(),
        ["caller", "address"],
        "no route: the built-in limits only"
    );
}
