//! The request-time decision, driven natively with answers a binding could give.

use runtime::config::{Application, Counting};
use runtime::counter::Verdict;
use runtime::limiter::{BindingAnswer, FallbackReason, Limiter, Refusal, Subject};

const T0: u64 = 1_800_000_000_000;

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

/// Runs `n` requests with the same binding answer and returns the verdicts and log lines.
fn run(
    limiter: &mut Limiter,
    subject: &Subject,
    n: usize,
    answer: Option<BindingAnswer>,
) -> (usize, Vec<String>) {
    let mut within = 0;
    let mut logs = Vec::new();
    for _ in 0..n {
        let mut refused = false;
        for check in limiter.checks(subject, "/api/items") {
            let settled = limiter.settle(&check, answer.filter(|_| check.binding.is_some()), T0);
            logs.extend(settled.log.map(|l| l.to_json_line()));
            if settled.verdict == Verdict::Exceeded {
                refused = true;
                break;
            }
        }
        within += usize::from(!refused);
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
        Subject::Address("1.2.3.4".into())
    );
    assert_eq!(
        Subject::of_request(Some(""), None),
        Subject::Address(String::new())
    );
    let limiter = Limiter::new(&app("limits", ""), "edge", 1).expect("edge");
    let caller = limiter.checks(&Subject::Caller("u1".into()), "/api/items");
    assert_eq!(caller.len(), 1);
    assert_eq!(caller[0].key, "caller:u1");
    assert_eq!(caller[0].binding.as_deref(), Some("LIMITS_600_PER_60S"));
    let address = limiter.checks(&Subject::Address("1.2.3.4".into()), "/api/search");
    let keys: Vec<&str> = address.iter().map(|c| c.key.as_str()).collect();
    assert_eq!(keys, ["address:1.2.3.4", "/api/search|address:1.2.3.4"]);
    assert_eq!(address[1].binding.as_deref(), Some("LIMITS_2_PER_10S"));
}

#[test]
fn the_binding_decides_when_it_answers() {
    let mut limiter = Limiter::new(&app("limits", ""), "edge", 1).expect("edge");
    let subject = Subject::Address("1.2.3.4".into());
    assert_eq!(
        run(
            &mut limiter,
            &subject,
            500,
            Some(BindingAnswer::Answered { success: true })
        )
        .0,
        500
    );
    assert_eq!(
        run(
            &mut limiter,
            &subject,
            3,
            Some(BindingAnswer::Answered { success: false })
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
        let subject = Subject::Address("198.51.100.9".into());
        let (within, logs) = run(
            &mut limiter,
            &subject,
            121,
            Some(BindingAnswer::Unavailable(reason)),
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
fn a_deployable_serving_no_api_limits_nothing_and_tallies_refusals() {
    let mut limiter = Limiter::new(&app("limits", ""), "site", 1).expect("site");
    assert!(
        limiter
            .checks(&Subject::Address("a".into()), "/api/items")
            .is_empty()
    );
    limiter.record_refused();
    let tally = limiter.record_health_check();
    assert_eq!((tally.refused, tally.health_checks), (1, 1));
}

#[test]
fn refusal_is_a_429_with_the_whole_window() {
    let refusal = Refusal::for_limit(runtime::limits::ADDRESS_LIMIT);
    assert_eq!((Refusal::STATUS, refusal.retry_after_seconds), (429, 60));
    let body: serde_json::Value = serde_json::from_str(&refusal.body()).expect("json");
    assert_eq!(body["retry_after"], 60);
}

#[test]
fn an_unknown_deployable_is_an_error() {
    assert!(Limiter::new(&app("limits", ""), "nope", 1).is_err());
}
