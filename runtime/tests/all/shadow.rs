//! Shadow limits (issue 43): a limit marked to count without refusing is
//! counted exactly as an enforced one (its binding, its keys), refuses
//! nothing, and names itself in each decision it would have refused, with
//! one log line per limit per isolate (or process); a wrong mark is a
//! diagnostic at its place.

use runtime::Subject;
use runtime::bindings::Bindings;
use runtime::config::{Application, Code};
use runtime::gate_plan::{GatePlan, PlanError};
use runtime::limiter::{BackendAnswer, Decision, Limiter, Now, ShadowLog};
use runtime::native::NativeGate;
use runtime::native::metrics::{DECISIONS, SHADOW_REFUSALS};

use crate::common;
use crate::common::metrics::{recorder, samples, total};

const T0: u64 = 1_800_000_000_000;

/// A Workers API counting through Cloudflare's binding (`binding = true`)
/// or in memory (a Redis store, declined), with `/api/search` limited to
/// `requests` per 10 s; `route_shadow` and `built_in` (the
/// `rate_limits.shadow` list, TOML) mark shadow limits.
fn description(binding: bool, requests: u32, route_shadow: bool, built_in: &str) -> String {
    let (store, declines) = if binding {
        ("limits", "")
    } else {
        ("cache", "declines = [\"rate_limits.counted_in_memory\"]\n")
    };
    format!(
        "[connections.limits]\ndriver = \"cloudflare_rate_limits\"\nnamespace = 7\n\
         [connections.cache]\ndriver = \"redis\"\n\
         [rate_limits]\nstore = \"{store}\"\nshadow = {built_in}\n\
         [[deployables]]\nname = \"edge\"\ntarget = \"workers\"\nserves_api = true\n{declines}\
         [[routes]]\npath = \"/api/search\"\n\
         rate_limit = {{ requests = {requests}, window = 10, shadow = {route_shadow} }}\n"
    )
}

fn limiter(source: &str) -> Limiter {
    let app = Application::from_toml(source).expect("valid");
    Limiter::new(&app, "edge", 1).expect("edge")
}

/// One request, every binding asked answering as a binding that counted
/// `sent` requests before it under a limit of `limits` would (within while
/// `sent < limit`), or none asked (in memory).
fn decide(limiter: &mut Limiter, subject: &Subject, path: &str, sent: u32) -> Decision {
    let checks = limiter.checks(subject, "GET", path).expect("a short path");
    let mut pending = limiter.asks(checks, Now::one_clock(T0));
    for ask in pending.asks() {
        let success = sent < ask.limit().requests;
        ask.answer(BackendAnswer::Answered { success });
    }
    limiter.conclude(pending, Now::one_clock(T0))
}

fn names(decision: &Decision) -> Vec<&str> {
    decision
        .shadow_refusals
        .iter()
        .map(|p| p.name.as_str())
        .collect()
}

#[test]
fn a_shadow_route_limit_refuses_nothing_and_names_every_request_it_would_have_refused() {
    for binding in [true, false] {
        for requests in [1, 2, 5, 17] {
            let mut limiter = limiter(&description(binding, requests, true, "[]"));
            let subject = Subject::of_request(None, Some("192.0.2.7"));
            let sent = requests + 4;
            let mut shadowed = 0;
            let mut logs: Vec<ShadowLog> = Vec::new();
            for n in 0..sent {
                let decision = decide(&mut limiter, &subject, "/api/search", n);
                assert_eq!(decision.refusal, None, "binding {binding}, {requests}: {n}");
                match names(&decision).as_slice() {
                    [] => assert!(n < requests, "binding {binding}, {requests}: {n} passed"),
                    ["/api/search"] => {
                        assert!(n >= requests, "binding {binding}, {requests}: {n}");
                        shadowed += 1;
                    }
                    other => panic!("binding {binding}, {requests}: {n}: {other:?}"),
                }
                logs.extend(decision.shadow_logs);
            }
            assert_eq!(shadowed, sent - requests, "binding {binding}, {requests}");
            assert_eq!(
                logs,
                [ShadowLog {
                    limit: "/api/search".into()
                }],
                "one line, at the first request it would have refused"
            );
            assert_eq!(
                logs[0].to_json_line(),
                r#"{"event":"rate_limits.shadow_refusal","limit":"/api/search"}"#
            );
        }
    }
}

#[test]
fn the_same_limit_enforced_refuses_exactly_the_requests_its_shadow_named() {
    for binding in [true, false] {
        for requests in [1, 3, 8] {
            let mut shadow = limiter(&description(binding, requests, true, "[]"));
            let mut enforced = limiter(&description(binding, requests, false, "[]"));
            let subject = Subject::of_request(None, Some("192.0.2.8"));
            for n in 0..requests + 3 {
                let would = !names(&decide(&mut shadow, &subject, "/api/search", n)).is_empty();
                let decision = decide(&mut enforced, &subject, "/api/search", n);
                assert_eq!(
                    decision.refusal.is_some(),
                    would,
                    "{binding} {requests} {n}"
                );
                assert!(decision.shadow_refusals.is_empty());
                assert!(decision.shadow_logs.is_empty());
            }
        }
    }
}

#[test]
fn a_shadow_built_in_limit_lets_the_121st_request_through_and_an_enforced_route_still_refuses() {
    // In memory: the address's 120 a minute is counted here, not answered.
    let mut limiter = limiter(&description(false, 200, false, "[\"address\"]"));
    let subject = Subject::of_request(None, Some("192.0.2.9"));
    for n in 0..120 {
        let decision = decide(&mut limiter, &subject, "/api/items", n);
        assert!(decision.refusal.is_none() && decision.shadow_refusals.is_empty());
    }
    let over = decide(&mut limiter, &subject, "/api/items", 120);
    assert_eq!(over.refusal, None);
    assert_eq!(names(&over), ["address"]);
    assert_eq!(over.shadow_logs.len(), 1);
    // The caller's limit stays enforced, and so does an enforced route.
    let mut both = self::limiter(&description(false, 1, false, "[\"address\"]"));
    for n in 0..121 {
        let _ = decide(&mut both, &subject, "/api/search", n);
    }
    let refused = decide(&mut both, &subject, "/api/search", 121);
    let refusal = refused.refusal.as_ref().expect("the route's limit refuses");
    assert_eq!(refusal.rate_limit_policy(), "\"/api/search\";q=1;w=10");
    assert_eq!(
        names(&refused),
        ["address"],
        "the shadow one is named apart"
    );
    assert!(refused.shadow_logs.is_empty(), "logged once already");
}

#[test]
fn a_shadow_limit_is_counted_through_the_same_binding_and_keys_as_enforced() {
    for built_in in ["[]", "[\"caller\", \"address\"]"] {
        for binding in [true, false] {
            let shadow =
                Application::from_toml(&description(binding, 5, true, built_in)).expect("valid");
            let enforced =
                Application::from_toml(&description(binding, 5, false, "[]")).expect("valid");
            let edge = |app: &Application| app.deployable("edge").cloned().expect("edge");
            assert_eq!(
                Bindings::for_deployable(&shadow, &edge(&shadow)),
                Bindings::for_deployable(&enforced, &edge(&enforced)),
                "the same Wrangler entries"
            );
            let (shadow, enforced) = (
                Limiter::new(&shadow, "edge", 1).expect("edge"),
                Limiter::new(&enforced, "edge", 1).expect("edge"),
            );
            for subject in [
                Subject::of_request(None, Some("192.0.2.10")),
                Subject::of_request(Some("alice"), Some("192.0.2.10")),
            ] {
                let a = shadow
                    .checks(&subject, "GET", "/api/search")
                    .expect("short");
                let b = enforced
                    .checks(&subject, "GET", "/api/search")
                    .expect("short");
                assert_eq!(a.len(), b.len());
                // The subject's built-in limit first, then the route's.
                for (index, (a, b)) in a.iter().zip(&b).enumerate() {
                    assert_eq!(a.key(), b.key(), "the same key: its count is kept");
                    assert_eq!(a.limit(), b.limit());
                    let name = |l: &Limiter, c: &runtime::limiter::Check| {
                        c.backend().map(|id| l.backend_name(id).to_owned())
                    };
                    assert_eq!(name(&shadow, a), name(&enforced, b), "the same binding");
                    assert_eq!(a.is_shadow(), index == 1 || built_in != "[]");
                    assert!(!b.is_shadow());
                }
            }
        }
    }
}

#[test]
fn shadow_marks_survive_the_plans_text_and_a_wrong_shadow_line_is_an_error_at_its_line() {
    let app = Application::from_toml(&description(true, 5, true, "[\"caller\"]")).expect("valid");
    let plan = GatePlan::new(&app, "edge").expect("edge");
    let text = plan.to_text().expect("a Workers plan");
    assert!(text.contains("\nshadow 0 2\n"), "{text}");
    assert_eq!(GatePlan::from_text(&text), Ok(plan));
    let enforced = Application::from_toml(&description(true, 5, false, "[]")).expect("valid");
    let enforced = GatePlan::new(&enforced, "edge").expect("edge");
    let enforced_text = enforced.to_text().expect("a Workers plan");
    assert!(!enforced_text.contains("shadow"), "{enforced_text}");
    assert_eq!(
        text.replace("shadow 0 2\n", ""),
        enforced_text,
        "the line is all that differs"
    );
    let line = text
        .lines()
        .position(|l| l.starts_with("shadow"))
        .expect("a line")
        + 1;
    for (wrong, problem) in [
        ("shadow 3", "no such policy"),
        ("shadow x", "a shadow policy is no whole number"),
        ("shadow", "a shadow line names no policy"),
    ] {
        let broken = text.replace("shadow 0 2", wrong);
        assert_eq!(
            GatePlan::from_text(&broken),
            Err(PlanError::Line { line, problem }),
            "{wrong}"
        );
    }
}

#[test]
fn a_wrong_shadow_mark_is_a_diagnostic_at_its_place_and_every_one_is_reported() {
    let source = "[connections.limits]\ndriver = \"cloudflare_rate_limits\"\nnamespace = 7\n\
                  [rate_limits]\nstore = \"limits\"\n\
                  shadow = [\"caller\", \"nobody\", 3, \"caller\"]\n\
                  [[deployables]]\nname = \"edge\"\ntarget = \"workers\"\nserves_api = true\n\
                  [[routes]]\npath = \"/a\"\nrate_limit = { requests = 1, window = 10, shadow = \"yes\" }\n\
                  [[routes]]\npath = \"/b\"\nrate_limit = { requests = 1, window = 10, shadow = 1 }\n";
    let diagnostics = Application::from_toml(source).expect_err("invalid");
    let found: Vec<(Code, String)> = diagnostics
        .0
        .iter()
        .map(|d| {
            (
                d.code,
                d.location.map(|l| l.to_string()).unwrap_or_default(),
            )
        })
        .collect();
    let shadow = Code::ShadowInvalid;
    assert_eq!(
        found,
        [
            (shadow, "13:52".to_owned()),
            (shadow, "16:52".to_owned()),
            (shadow, "6:21".to_owned()),
            (shadow, "6:31".to_owned()),
            (shadow, "6:34".to_owned()),
        ],
        "{}",
        diagnostics.render("app.toml")
    );
    let text = diagnostics.render("app.toml");
    for words in [
        "`nobody`, which is no built-in limit (\"caller\", \"address\")",
        "holds an integer",
        "names `caller` twice",
        "shadow = \"yes\", a string; it must be `true`",
    ] {
        assert!(text.contains(words), "{words}: {text}");
    }
    let not_a_list = source.replace(
        "shadow = [\"caller\", \"nobody\", 3, \"caller\"]",
        "shadow = \"caller\"",
    );
    let diagnostics = Application::from_toml(&not_a_list).expect_err("invalid");
    assert!(
        diagnostics.render("app.toml").contains(
            "rate_limits.shadow_invalid: app.toml:6:10: `rate_limits.shadow` is a string; it must be a list"
        ),
        "{}",
        diagnostics.render("app.toml")
    );
    assert_eq!(Code::ShadowInvalid.as_str(), "rate_limits.shadow_invalid");
}

/// A native API in memory whose `/api/search` is limited to 2 per 10 s,
/// shadow or not.
fn native_gate(deployable: &str, shadow: bool) -> NativeGate {
    let source = format!(
        "[[deployables]]\nname = \"{deployable}\"\ntarget = \"native\"\nserves_api = true\n\
         [[routes]]\npath = \"/api/search\"\n\
         rate_limit = {{ requests = 2, window = 10, shadow = {shadow} }}\n"
    );
    NativeGate::from_toml(&source, deployable).expect("gate")
}

#[tokio::test]
async fn the_native_gate_counts_would_be_refusals_by_limit_and_logs_the_first_once() {
    let recorder = recorder();
    let (lines, _guard) = common::Lines::capture();
    let gate = native_gate("shadow-native", true);
    let subject = Subject::of_request(None, Some("192.0.2.11"));
    for sent in [1, 2, 3, 4, 5] {
        assert!(
            gate.decide(&subject, "GET", "/api/search").await.is_ok(),
            "{sent}"
        );
    }
    let ours = ("deployable", "shadow-native");
    let limit = ("limit", "/api/search");
    let scrape = samples(&recorder.render());
    assert_eq!(total(&scrape, SHADOW_REFUSALS, &[ours, limit]), 3.0);
    let decided = |outcome| total(&scrape, DECISIONS, &[ours, limit, ("outcome", outcome)]);
    assert_eq!(decided("passed"), 5.0, "a shadow limit refuses nothing");
    assert_eq!(decided("refused"), 0.0);
    assert_eq!(
        total(&scrape, SHADOW_REFUSALS, &[ours, ("limit", "address")]),
        0.0,
        "no series for an enforced limit"
    );
    assert!(
        !recorder.render().contains("192.0.2.11"),
        "no key in a label"
    );
    let logged = lines.events(ShadowLog::EVENT);
    assert_eq!(logged.len(), 1, "{logged:?}");
    assert_eq!(logged[0]["limit"], "/api/search");
    assert!(!lines.text().contains("192.0.2.11"), "no key in a line");

    // Enforced, the same gate refuses the third and logs nothing of shadows.
    let gate = native_gate("shadow-native-enforced", false);
    for sent in [1, 2] {
        assert!(
            gate.decide(&subject, "GET", "/api/search").await.is_ok(),
            "{sent}"
        );
    }
    assert!(gate.decide(&subject, "GET", "/api/search").await.is_err());
    assert_eq!(lines.events(ShadowLog::EVENT).len(), 1);
}
