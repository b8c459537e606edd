//! Bindings, their names and numbering, and the Wrangler entries.

use proptest::prelude::*;
use runtime::bindings::Bindings;
use runtime::config::Application;
use runtime::unstable_for_tools::limits::Limit;
use runtime::unstable_for_tools::names::binding_name;

fn app_with_routes(routes: &[(u32, u32)]) -> Application {
    let mut source = String::from(
        "[connections.limits]\ndriver = \"cloudflare_rate_limits\"\nnamespace = 1001\n\n\
         [rate_limits]\nstore = \"limits\"\n\n\
         [[deployables]]\nname = \"edge\"\ntarget = \"workers\"\nserves_api = true\n",
    );
    for (i, (requests, window)) in routes.iter().enumerate() {
        source.push_str(&format!(
            "\n[[routes]]\npath = \"/api/r{i}\"\nrate_limit = {{ requests = {requests}, window = {window} }}\n"
        ));
    }
    Application::from_toml(&source).expect("valid")
}

fn names_and_ids(plan: &Bindings) -> Vec<(String, u64)> {
    plan.bindings
        .iter()
        .map(|b| (b.name.clone(), b.namespace_id))
        .collect()
}

#[test]
fn todays_limits_are_two_bindings() {
    let plan = Bindings::for_application(&app_with_routes(&[]));
    assert_eq!(
        names_and_ids(&plan),
        [
            ("LIMITS_120_PER_60S".to_owned(), 1001),
            ("LIMITS_600_PER_60S".to_owned(), 1002)
        ]
    );
}

#[test]
fn numbered_by_window_then_requests_and_adding_a_limit_renumbers_the_ones_after_it() {
    let plan = Bindings::for_application(&app_with_routes(&[(20, 10), (300, 60)]));
    assert_eq!(
        names_and_ids(&plan),
        [
            ("LIMITS_20_PER_10S".to_owned(), 1001),
            ("LIMITS_120_PER_60S".to_owned(), 1002),
            ("LIMITS_300_PER_60S".to_owned(), 1003),
            ("LIMITS_600_PER_60S".to_owned(), 1004),
        ]
    );
}

#[test]
fn a_route_sharing_a_built_in_limit_shares_its_binding() {
    let plan = Bindings::for_application(&app_with_routes(&[(120, 60)]));
    assert_eq!(plan.bindings.len(), 2);
}

#[test]
fn no_bindings_without_the_cloudflare_store() {
    let app = Application::from_toml(
        "name = \"shop\"\n[connections.cache]\ndriver = \"redis\"\n[rate_limits]\nstore = \"cache\"\n\
         [[deployables]]\nname = \"server\"\ntarget = \"native\"\nserves_api = true\n",
    )
    .expect("valid");
    assert!(Bindings::for_application(&app).bindings.is_empty());
}

#[test]
fn names_are_upper_case_and_safe() {
    assert_eq!(
        binding_name("rate-limits.eu", Limit::new(120, 60)),
        "RATE_LIMITS_EU_120_PER_60S"
    );
}

#[test]
fn wrangler_jsonc_has_the_documented_shape() {
    let plan = Bindings::for_application(&app_with_routes(&[]));
    let json: serde_json::Value = serde_json::from_str(&plan.wrangler_jsonc()).expect("json");
    assert_eq!(
        json,
        serde_json::json!({ "ratelimits": [
            { "name": "LIMITS_120_PER_60S", "namespace_id": "1001", "simple": { "limit": 120, "period": 60 } },
            { "name": "LIMITS_600_PER_60S", "namespace_id": "1002", "simple": { "limit": 600, "period": 60 } },
        ]})
    );
}

#[test]
fn wrangler_toml_has_the_documented_shape() {
    let plan = Bindings::for_application(&app_with_routes(&[]));
    let text = plan.wrangler_toml();
    assert!(text.contains("[[ratelimits]]"), "{text}");
    assert!(text.contains("[ratelimits.simple]"), "{text}");
    let value: toml::Value = toml::from_str(&text).expect("toml");
    assert_eq!(
        value["ratelimits"][1]["namespace_id"].as_str(),
        Some("1002")
    );
    assert_eq!(
        value["ratelimits"][1]["simple"]["limit"].as_integer(),
        Some(600)
    );
}

proptest! {
    #[test]
    fn names_are_unique_and_numbering_dense_and_ordered(
        namespace in 1u64..1_000_000,
        limits in prop::collection::vec((1u32..5_000, prop::sample::select(vec![10u32, 60])), 0..20),
    ) {
        let limits: Vec<Limit> = limits.into_iter().map(|(r, w)| Limit::new(r, w)).collect();
        let plan = Bindings::new("limits", namespace, &limits);
        let mut names: Vec<&str> = plan.bindings.iter().map(|b| b.name.as_str()).collect();
        names.sort();
        names.dedup();
        prop_assert_eq!(names.len(), plan.bindings.len());
        for (i, b) in plan.bindings.iter().enumerate() {
            prop_assert_eq!(b.namespace_id, namespace + i as u64);
        }
        for pair in plan.bindings.windows(2) {
            let (a, b) = (pair[0].limit, pair[1].limit);
            prop_assert!((a.window_seconds, a.requests) < (b.window_seconds, b.requests));
        }
        let mut distinct = limits.clone();
        distinct.sort();
        distinct.dedup();
        prop_assert_eq!(plan.bindings.len(), distinct.len());
    }
}

#[test]
fn a_connections_binding_names_are_told_from_everyone_elses() {
    use runtime::unstable_for_tools::names::is_binding_name_of;
    for (name, ours) in [
        ("LIMITS_120_PER_60S", true),
        ("LIMITS_20_PER_10S", true),
        ("LIMITS_120_PER_60", false),
        ("LIMITS__PER_60S", false),
        ("LIMITS_X_PER_60S", false),
        ("OTHER_120_PER_60S", false),
        ("LIMITS_EXTRA_120_PER_60S", false),
        ("MY_LIMITER", false),
    ] {
        assert_eq!(is_binding_name_of("limits", name), ours, "{name}");
    }
    assert!(is_binding_name_of("rate-limits", "RATE_LIMITS_5_PER_10S"));
}
