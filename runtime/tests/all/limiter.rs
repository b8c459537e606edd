//! The request-time decision, driven natively with answers a binding could give.

use std::net::Ipv4Addr;

use runtime::ClientAddress;
use runtime::Subject;
use runtime::config::{Application, Counting};
use runtime::config::{Deployable, RedisEndpoint, Route, Store, StoreDriver, Target};
use runtime::limiter::{BackendAnswer, FallbackReason};
use runtime::limiter::{Decision, FallbackLog, Limiter, Now, Policy, Refusal};
use runtime::unstable_for_tools::limits::{ADDRESS_LIMIT, Limit};

const T0: u64 = 1_800_000_000_000;

/// Anyone not signed in, by the `CF-Connecting-IP` header's value.
fn address(header: &str) -> Subject {
    Subject::of_request(None, Some(header))
}

fn app(store: &str, extra: &str) -> Application {
    Application::from_toml(&format!(
        "[connections.limits]\ndriver = \"cloudflare_rate_limits\"\nnamespace = 7\n\
         [connections.cache]\ndriver = \"redis\"\n\
         [rate_limits]\nstore = \"{store}\"\n\
         [[deployables]]\nname = \"edge\"\ntarget = \"workers\"\nserves_api = true\n{extra}\n\
         [[deployables]]\nname = \"site\"\ntarget = \"workers\"\nserves_api = false\n\
         [[routes]]\npath = \"/api/search\"\nrate_limit = {{ requests = 2, window = 10 }}\n"
    ))
    .expect("valid")
}

/// One request decided by the real [`Limiter::conclude`], every binding
/// asked giving `answer` (none: not answering).
fn decide(
    limiter: &mut Limiter,
    subject: &Subject,
    path: &str,
    answer: Option<BackendAnswer>,
) -> Decision {
    let checks = limiter.checks(subject, "GET", path).expect("a short path");
    let mut pending = limiter.asks(checks, Now::one_clock(T0));
    for ask in pending.asks() {
        if let Some(answer) = answer {
            ask.answer(answer);
        }
    }
    limiter.conclude(pending, Now::one_clock(T0))
}

/// One request decided by the real [`Limiter::conclude`], the binding of
/// its `i`th ask giving `answers[i]`.
fn decide_each(
    limiter: &mut Limiter,
    subject: &Subject,
    path: &str,
    answers: &[Option<BackendAnswer>],
) -> Decision {
    let checks = limiter.checks(subject, "GET", path).expect("a short path");
    let mut pending = limiter.asks(checks, Now::one_clock(T0));
    for (ask, answer) in pending.asks().zip(answers) {
        if let Some(answer) = *answer {
            ask.answer(answer);
        }
    }
    limiter.conclude(pending, Now::one_clock(T0))
}

/// The name of the binding `check` asks.
fn binding(limiter: &Limiter, check: &runtime::limiter::Check) -> String {
    limiter
        .backend_name(check.backend().expect("a binding"))
        .to_owned()
}

/// Runs `n` requests with the same binding answer and returns how many passed and the log lines.
fn run(
    limiter: &mut Limiter,
    subject: &Subject,
    n: usize,
    answer: Option<BackendAnswer>,
) -> (usize, Vec<String>) {
    let mut within = 0;
    let mut logs = Vec::new();
    for _ in 0..n {
        let decision = decide(limiter, subject, "/api/items", answer);
        logs.extend(decision.logs.iter().map(FallbackLog::to_json_line));
        within += usize::from(decision.refusal.is_none());
    }
    (within, logs)
}

#[test]
fn callers_by_id_and_others_by_address() {
    assert_eq!(
        Subject::of_request(Some("u1"), Some("1.2.3.4")),
        Subject::Caller("u1".into())
    );
    assert_eq!(
        Subject::of_request(None, Some("1.2.3.4")),
        Subject::Address(ClientAddress::V4(Ipv4Addr::new(1, 2, 3, 4)))
    );
    assert_eq!(
        Subject::of_request(Some(""), None),
        Subject::Address(ClientAddress::Unknown)
    );
    let limiter = Limiter::new(&app("limits", ""), "edge", 1).expect("edge");
    let caller = limiter
        .checks(&Subject::Caller("u1".into()), "GET", "/api/items")
        .expect("a short path");
    assert_eq!(caller.len(), 1);
    assert_eq!(caller[0].key(), "caller:u1");
    assert_eq!(binding(&limiter, &caller[0]), "LIMITS_600_PER_60S");
    let address = limiter
        .checks(&address("1.2.3.4"), "GET", "/api/search")
        .expect("a short path");
    let keys: Vec<&str> = address.iter().map(|c| c.key()).collect();
    assert_eq!(keys, ["address:1.2.3.4", "/api/search|address:1.2.3.4"]);
    assert_eq!(binding(&limiter, &address[1]), "LIMITS_2_PER_10S");
}

#[test]
fn the_binding_decides_when_it_answers() {
    let mut limiter = Limiter::new(&app("limits", ""), "edge", 1).expect("edge");
    let subject = address("1.2.3.4");
    assert_eq!(
        run(
            &mut limiter,
            &subject,
            500,
            Some(BackendAnswer::Answered { success: true })
        )
        .0,
        500
    );
    assert_eq!(
        run(
            &mut limiter,
            &subject,
            3,
            Some(BackendAnswer::Answered { success: false })
        )
        .0,
        0
    );
}

#[test]
fn each_fallback_counts_in_memory_and_logs_once_without_a_key() {
    for reason in [
        FallbackReason::Missing,
        FallbackReason::Failed,
        FallbackReason::TimedOut,
    ] {
        let mut limiter = Limiter::new(&app("limits", ""), "edge", 1).expect("edge");
        let subject = address("198.51.100.9");
        let (within, logs) = run(
            &mut limiter,
            &subject,
            121,
            Some(BackendAnswer::Unavailable(reason)),
        );
        assert_eq!(within, 120, "{reason:?}: counted in memory up to the limit");
        assert_eq!(logs.len(), 1, "{reason:?}: logged once");
        let line: serde_json::Value = serde_json::from_str(&logs[0]).expect("one JSON line");
        assert_eq!(line["event"], "rate_limits.fallback");
        assert_eq!(line["binding"], "LIMITS_120_PER_60S");
        assert_eq!(line["reason"], reason.as_str());
        assert!(!logs[0].contains("198.51.100.9"), "no key in the log");
    }
}

#[test]
fn a_redis_store_counts_in_memory_without_logging() {
    let app = app("cache", "declines = [\"rate_limits.counted_in_memory\"]");
    let mut limiter = Limiter::new(&app, "edge", 1).expect("edge");
    assert_eq!(limiter.counting(), &Counting::InMemory);
    let (within, logs) = run(&mut limiter, &Subject::Caller("u".into()), 601, None);
    assert_eq!((within, logs.len()), (600, 0));
}

#[test]
fn a_deployable_serving_no_api_limits_nothing() {
    let limiter = Limiter::new(&app("limits", ""), "site", 1).expect("site");
    assert!(
        limiter
            .checks(&address("a"), "GET", "/api/items")
            .expect("a short path")
            .is_empty()
    );
}

#[test]
fn refusal_is_a_429_with_the_whole_window() {
    let refusal = Refusal::by(vec![Policy {
        name: "address".into(),
        limit: ADDRESS_LIMIT,
    }])
    .expect("a refusal");
    assert_eq!((Refusal::STATUS, refusal.retry_after_seconds), (429, 60));
    assert_eq!(refusal.rate_limit_policy(), "\"address\";q=120;w=60");
    let body: serde_json::Value = serde_json::from_str(&refusal.body()).expect("json");
    assert_eq!(body["retry_after"], 60);
    assert_eq!(Refusal::by(Vec::new()), None, "nothing refused, no refusal");
}

#[test]
fn a_policy_name_is_a_structured_field_string() {
    let policy = Policy {
        name: "/api/\"odd\"\\path/é".into(),
        limit: Limit::new(5, 10),
    };
    assert_eq!(
        policy.to_header_item(),
        "\"/api/\\\"odd\\\"\\\\path/%C3%A9\";q=5;w=10"
    );
}

/// A Redis store (memory mode) with a route whose window only memory can count.
fn memory_app(route_limit: &str) -> Application {
    Application::from_toml(&format!(
        "name = \"shop\"\n[connections.cache]\ndriver = \"redis\"\n[rate_limits]\nstore = \"cache\"\n\
         [[deployables]]\nname = \"edge\"\ntarget = \"workers\"\nserves_api = true\n\
         declines = [\"rate_limits.counted_in_memory\"]\n\
         [[routes]]\npath = \"/api/search\"\nrate_limit = {route_limit}\n"
    ))
    .expect("valid")
}

#[test]
fn memory_mode_settles_every_limit_even_after_one_refuses() {
    // The built-in limit refuses from the 121st request on; the route's own
    // limit must still count those requests, as the binding would.
    let mut limiter =
        Limiter::new(&memory_app("{ requests = 2, window = 10 }"), "edge", 1).expect("edge");
    let subject = address("192.0.2.1");
    assert_eq!(run(&mut limiter, &subject, 120, None).0, 120);
    for _ in 0..2 {
        let decision = decide(&mut limiter, &subject, "/api/search", None);
        let refusal = decision.refusal.expect("the built-in limit refuses");
        assert_eq!(refusal.rate_limit_policy(), "\"address\";q=120;w=60");
    }
    let third = decide(&mut limiter, &subject, "/api/search", None);
    let refusal = third.refusal.expect("refused");
    assert_eq!(
        refusal.rate_limit_policy(),
        "\"address\";q=120;w=60, \"/api/search\";q=2;w=10",
        "the route counted the two requests the built-in limit refused"
    );
    assert_eq!(refusal.retry_after_seconds, 60);
}

#[test]
fn retry_after_is_the_longest_window_among_the_refusing_limits() {
    let mut limiter =
        Limiter::new(&memory_app("{ requests = 1, window = 3600 }"), "edge", 1).expect("edge");
    let subject = address("192.0.2.2");
    assert_eq!(run(&mut limiter, &subject, 120, None).0, 120);
    assert!(
        decide(&mut limiter, &subject, "/api/search", None)
            .refusal
            .is_some()
    );
    let refusal = decide(&mut limiter, &subject, "/api/search", None)
        .refusal
        .expect("refused by both");
    assert_eq!(refusal.retry_after_seconds, 3600);
    assert_eq!(refusal.policies.len(), 2);
    // Refused by the route alone (a caller's limit is far away): its window.
    let caller = Subject::Caller("c1".into());
    assert!(
        decide(&mut limiter, &caller, "/api/search", None)
            .refusal
            .is_none()
    );
    let refusal = decide(&mut limiter, &caller, "/api/search", None)
        .refusal
        .expect("refused by the route");
    assert_eq!(refusal.retry_after_seconds, 3600);
    assert_eq!(refusal.rate_limit_policy(), "\"/api/search\";q=1;w=3600");
}

#[test]
fn binding_mode_refuses_with_every_refusing_limit_and_the_longest_window() {
    let mut limiter = Limiter::new(&app("limits", ""), "edge", 1).expect("edge");
    let subject = address("192.0.2.3");
    let only_route = decide_each(
        &mut limiter,
        &subject,
        "/api/search",
        &[
            Some(BackendAnswer::Answered { success: true }),
            Some(BackendAnswer::Answered { success: false }),
        ],
    );
    let refusal = only_route.refusal.expect("the route refused");
    assert_eq!(refusal.retry_after_seconds, 10);
    assert_eq!(refusal.rate_limit_policy(), "\"/api/search\";q=2;w=10");
    let both = decide(
        &mut limiter,
        &subject,
        "/api/search",
        Some(BackendAnswer::Answered { success: false }),
    );
    assert_eq!(both.refusal.expect("both refused").retry_after_seconds, 60);
}

#[test]
fn a_route_binding_that_cannot_be_asked_is_logged_while_the_built_in_limit_refuses() {
    let mut limiter = Limiter::new(&app("limits", ""), "edge", 1).expect("edge");
    let subject = address("192.0.2.4");
    let answers = [
        Some(BackendAnswer::Answered { success: false }),
        Some(BackendAnswer::Unavailable(FallbackReason::Missing)),
    ];
    let decision = decide_each(&mut limiter, &subject, "/api/search", &answers);
    assert!(decision.refusal.is_some());
    assert_eq!(
        decision.logs,
        [FallbackLog {
            backend: "LIMITS_2_PER_10S".into(),
            reason: FallbackReason::Missing
        }]
    );
    let again = decide_each(&mut limiter, &subject, "/api/search", &answers);
    assert!(again.logs.is_empty(), "logged once");
    assert!(again.refusal.is_some(), "refused again");
}

#[test]
fn a_route_listed_twice_counts_each_request_once() {
    // Built by hand, as no checked description can be (route_duplicate):
    // the limiter must not count a request twice under one key whatever it is given.
    let route = Route {
        path: "/api/search".into(),
        rate_limit: Some(Limit::new(20, 10)),
        methods: runtime::Methods::ALL,
        shadow: false,
    };
    let app = Application {
        name: Some("shop".into()),
        store: Some(Store {
            connection: "cache".into(),
            driver: StoreDriver::Redis(RedisEndpoint::Single { url: None }),
        }),
        deployables: vec![Deployable {
            name: "edge".into(),
            target: Target::Workers,
            serves_api: true,
            declines: Vec::new(),
            client_address: runtime::AddressSource::CloudflareHeader(Default::default()),
            memory_budget: runtime::unstable_for_tools::counter::DEFAULT_MEMORY_BUDGET,
        }],
        routes: vec![route.clone(), route],
        data_points: None,
        built_in_shadow: [false, false],
    };
    let mut limiter = Limiter::new(&app, "edge", 1).expect("edge");
    let subject = address("192.0.2.5");
    assert_eq!(
        limiter
            .checks(&subject, "GET", "/api/search")
            .expect("a short path")
            .len(),
        2
    );
    let passed = (0..25)
        .filter(|_| {
            decide(&mut limiter, &subject, "/api/search", None)
                .refusal
                .is_none()
        })
        .count();
    assert_eq!(passed, 20, "20 per 10 s lets 20 through, not 10");
}

#[test]
fn an_unknown_deployable_is_an_error() {
    assert!(Limiter::new(&app("limits", ""), "nope", 1).is_err());
}
