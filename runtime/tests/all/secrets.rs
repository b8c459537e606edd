//! Nothing secret in output: the `Debug` (and `Display`) of every public
//! type of `runtime`, made from an application whose Redis URLs hold a
//! password and used for a request whose caller id and address are keys,
//! carries neither the password nor a key; nor do the diagnostics of an
//! invalid description that holds passwords. A public type added to
//! `runtime/src` without being shown here fails
//! `every_public_type_is_shown_here`, so the list cannot fall behind.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use runtime::CallerId;
use runtime::bindings::Bindings;
use runtime::config::{Application, Code, UnknownCode};
use runtime::gate_plan::{GatePlan, UnknownDeployable};
use runtime::limiter::Now;
use runtime::limiter::{BackendAnswer, FallbackReason};
use runtime::native::NativeGateError;
use runtime::native::{NativeGate, NoPeerAddress, PeerAddr, RateLimitLayer};
use runtime::unstable_for_tools::address::{
    AddressHeaders, AddressSource, AddressUnknown, CloudflarePeers, TrustedProxies,
};
use runtime::unstable_for_tools::breaker::{Breaker, Outcome, Route as BreakerRoute};
use runtime::unstable_for_tools::counter::{DEFAULT_MAX_KEYS, Verdict, WindowCounter};
use runtime::unstable_for_tools::redis::RedisStore;
use runtime::unstable_for_tools::redis::RefusedCache;
use runtime::{Limit, Limiter, Subject};
use tower_layer::Layer;

const PASSWORD: &str = "hunter2";
const CALLER: &str = "caller-s3cret-id";
const ADDRESS: &str = "203.0.113.77";

/// A native API on a Redis whose URL holds the password, with a route.
fn application() -> String {
    format!(
        r#"
name = "shop"

[connections.cache]
driver = "redis"
url = "redis://admin:{PASSWORD}@127.0.0.1:1/0?protocol=resp3"

[rate_limits]
store = "cache"

[[deployables]]
name = "server"
target = "native"
serves_api = true
client_address = {{ trusted_proxies = ["10.0.0.0/8"] }}

[[routes]]
path = "/api/search"
rate_limit = {{ requests = 2, window = 10 }}
"#
    )
}

/// Descriptions that do not validate, each with passwords where a
/// diagnostic might echo them.
fn invalid_applications() -> Vec<String> {
    let connection = |settings: &str| {
        format!(
            "name = \"shop\"\n[connections.cache]\ndriver = \"redis\"\n{settings}\n[rate_limits]\nstore = \"cache\"\n\
             [[deployables]]\nname = \"server\"\ntarget = \"native\"\nserves_api = true\n"
        )
    };
    vec![
        connection(&format!(
            "url = \"redis://:{PASSWORD}@10.0.0.1:6379\"\nnodes = [\"redis://:{PASSWORD}@10.0.0.2:7000\"]"
        )),
        connection(&format!("nodes = \"redis://:{PASSWORD}@10.0.0.2:7000\"")),
        connection(&format!(
            "nodes = [1, \"redis://:{PASSWORD}@10.0.0.2:7000\"]"
        )),
        connection(&format!("url = [\"redis://:{PASSWORD}@10.0.0.1:6379\"]")),
        connection(&format!("url = {{ password = \"{PASSWORD}\" }}")),
        connection(&format!("url = \"redis-tls://:{PASSWORD}@10.0.0.1:6380\"")),
        connection(&format!("url = \"{PASSWORD}@10.0.0.1:6379\"")),
        connection(&format!("url = \"ftp://:{PASSWORD}@10.0.0.1:6379\"")),
    ]
}

/// What a type shows: `module::Type`, and its `Debug` (and `Display`).
type Shown = Vec<(&'static str, String)>;

/// Every public type's `Debug`, by `module::Type`, made from the secrets above.
async fn shown() -> Shown {
    let mut shown = shown_description();
    shown.extend(shown_addresses());
    shown.extend(shown_decision());
    shown.extend(shown_native().await);
    shown.extend(shown_data_points());
    shown.extend(shown_file_errors());
    shown
}

/// The Wrangler entry of the Worker's data points' dataset.
fn shown_data_points() -> Shown {
    let entry = runtime::bindings::DatasetEntry {
        binding: runtime::bindings::DATA_POINTS_BINDING.into(),
        dataset: "rate_limits".into(),
    };
    vec![("bindings::DatasetEntry", format!("{entry:?}"))]
}

/// A description file's errors, alone and as the native gate's.
fn shown_file_errors() -> Shown {
    let invalid = Application::from_toml(&invalid_applications()[0]).expect_err("invalid");
    let file_errors = [
        runtime::config::FileError::Invalid {
            file: "app.toml".into(),
            diagnostics: invalid,
        },
        Application::from_file("/nonexistent/app.toml").expect_err("no file"),
    ];
    let shown = format!("{file_errors:?} {}", file_errors[0]);
    let [invalid, _] = file_errors;
    let gate = NativeGateError::File(invalid);
    vec![(
        "config::diagnostics::FileError",
        format!("{shown} {gate:?} {gate}"),
    )]
}

/// The description's types, its plan's, and its diagnostics'.
fn shown_description() -> Shown {
    let app = Application::from_toml(&application()).expect("valid");
    let deployable = app.deployable("server").expect("server").clone();
    let store = app.store.clone().expect("a store");
    let counting = app.counting(&deployable);
    let cluster = runtime::config::RedisEndpoint::Cluster {
        nodes: vec![
            format!("redis://:{PASSWORD}@10.0.0.1:7000"),
            format!("redis+unix:///run/redis.sock?pass={PASSWORD}"),
            format!("rediss://user:{PASSWORD}@[2001:db8::1]:6380"),
        ],
    };
    let proxies = TrustedProxies::new(vec!["10.0.0.0/8".parse().expect("net")]);
    let plan = Bindings::for_deployable(&app, &deployable);
    let invalid = Application::from_toml(&invalid_applications()[0]).expect_err("invalid");
    let diagnostic = invalid.0[0].clone();
    let gate_errors = [
        NativeGateError::Invalid(invalid.clone()),
        NativeGateError::UnknownDeployable(UnknownDeployable("server".into())),
        NativeGateError::RedisNotBuilt {
            connection: "cache".into(),
        },
    ];
    let errors: Vec<String> = gate_errors.iter().map(ToString::to_string).collect();
    let endpoint = redis_endpoint(&counting);
    // A Redis deployable's plan: the worst case, with the URL in its counting.
    let gate_plan = GatePlan::new(&app, "server").expect("server");
    let plan_errors = [
        gate_plan.to_text().expect_err("a Redis plan has no text"),
        GatePlan::from_text("x").expect_err("no plan"),
        GatePlan::from_text(&format!("rate-limits-plan 2\n{PASSWORD} {CALLER}\n"))
            .expect_err("no plan"),
    ];
    let plan_error_texts: Vec<String> = plan_errors.iter().map(ToString::to_string).collect();
    vec![
        (
            "address::AddressSource",
            format!("{:?}", deployable.client_address),
        ),
        (
            "address::AddressUnknown",
            format!("{:?}", AddressUnknown::NoPeer),
        ),
        ("address::TrustedProxies", format!("{proxies:?}")),
        ("config::model::Application", format!("{app:?}")),
        (
            "config::diagnostics::Code",
            format!("{0:?} {0}", Code::StoreInvalid),
        ),
        ("config::model::Counting", format!("{counting:?}")),
        ("config::model::Deployable", format!("{deployable:?}")),
        ("config::diagnostics::Diagnostic", format!("{diagnostic:?}")),
        (
            "config::diagnostics::Diagnostics",
            format!("{invalid:?} {invalid} {}", invalid.render("app.toml")),
        ),
        (
            "config::diagnostics::Location",
            format!("{:?}", diagnostic.location),
        ),
        (
            "config::model::RedisEndpoint",
            format!("{endpoint:?} {cluster:?}"),
        ),
        ("config::model::Route", format!("{:?}", app.routes)),
        ("config::model::Store", format!("{store:?}")),
        ("config::model::StoreDriver", format!("{:?}", store.driver)),
        ("config::model::Target", format!("{:?}", deployable.target)),
        (
            "config::diagnostics::UnknownCode",
            format!("{0:?} {0}", UnknownCode("x".into())),
        ),
        (
            "native::NativeGateError",
            format!("{gate_errors:?} {errors:?}"),
        ),
        (
            "gate_plan::UnknownDeployable",
            format!("{0:?} {0}", UnknownDeployable("x".into())),
        ),
        ("gate_plan::GatePlan", format!("{gate_plan:?}")),
        (
            "gate_plan::PlanError",
            format!("{plan_errors:?} {plan_error_texts:?}"),
        ),
        ("limits::Limit", format!("{:?}", Limit::new(2, 10))),
        ("limits::Methods", format!("{:?}", runtime::Methods::ALL)),
        (
            "routes::TemplateError",
            format!(
                "{:?}",
                runtime::routes::canonical_template("/api/users/:id")
            ),
        ),
        ("bindings::Bindings", format!("{plan:?}")),
        ("bindings::Binding", format!("{:?}", plan.bindings)),
        ("bindings::Simple", format!("{:?}", plan.wrangler_entries())),
        (
            "bindings::WranglerEntry",
            format!("{:?}", plan.wrangler_entries()),
        ),
    ]
}

/// The endpoint a deployable counting in Redis reaches.
fn redis_endpoint(counting: &runtime::config::Counting) -> runtime::config::RedisEndpoint {
    match counting {
        runtime::config::Counting::Redis { endpoint, .. } => endpoint.clone(),
        other => panic!("counts in Redis, not {other:?}"),
    }
}

/// The sans-IO decision's types, after a request of the address and
/// requests of the caller, the last of them refused.
/// What a source reads and finds: the headers hold addresses, which are keys.
fn shown_addresses() -> Shown {
    vec![
        (
            "address::AddressHeaders",
            format!(
                "{:?}",
                AddressHeaders {
                    cf_connecting_ip: Some(ADDRESS.as_bytes()),
                    cf_connecting_ipv6: Some(b"2001:db8::77"),
                    forwarded_for: &[ADDRESS.as_bytes()],
                }
            ),
        ),
        (
            "address::CloudflarePeers",
            format!(
                "{:?}",
                CloudflarePeers::new(vec!["10.0.0.0/8".parse().expect("net")])
            ),
        ),
        (
            "address::Resolved",
            format!(
                "{:?}",
                AddressSource::CloudflareHeader(CloudflarePeers::default()).resolve(
                    Some(ADDRESS.parse().expect("ip")),
                    &AddressHeaders::default()
                )
            ),
        ),
    ]
}

fn shown_decision() -> Shown {
    let app = Application::from_toml(&application()).expect("valid");
    let caller = Subject::of_request(Some(CALLER), None);
    let address = Subject::of_request(None, Some(ADDRESS));
    let Subject::Address(client_address) = address else {
        panic!("an address");
    };
    let now = Now::one_clock(1_800_000_000_000);
    let mut limiter = Limiter::new(&app, "server", 7).expect("limiter");
    let checks = limiter
        .checks(&address, "GET", "/api/search")
        .expect("a short path");
    let check = checks[0].clone();
    let mut pending = limiter.asks(checks, now);
    let ask = format!("{:?}", pending.asks().next().expect("an ask to Redis"));
    let pending_shown = format!("{pending:?}");
    let decision = limiter.conclude(pending, now);
    let mut refused = None;
    for _ in 0..4 {
        let checks = limiter
            .checks(&caller, "GET", "/api/search")
            .expect("a short path");
        let pending = limiter.asks(checks, now);
        refused = Some(limiter.conclude(pending, now));
    }
    let refused = refused.expect("decided");
    let refusal = refused.refusal.clone().expect("the route's limit refused");
    let routes: Vec<Limit> = app.routes.iter().filter_map(|r| r.rate_limit).collect();
    let bound = WindowCounter::new(DEFAULT_MAX_KEYS, &routes, 7).bound();
    let shadow_log = runtime::limiter::ShadowLog {
        limit: "/api".into(),
    };
    let mut refused_keys = RefusedCache::default();
    refused_keys.remember(check.limit(), check.key(), u64::MAX, 0);
    vec![
        ("address::ClientAddress", format!("{client_address:?}")),
        ("breaker::Breaker", format!("{:?}", Breaker::new())),
        (
            "breaker::BackendState",
            format!(
                "{:?}",
                runtime::unstable_for_tools::breaker::BackendState::VALUES
            ),
        ),
        ("breaker::Outcome", format!("{:?}", Outcome::Troubled)),
        ("breaker::Route", format!("{:?}", BreakerRoute::Probe)),
        ("counter::MemoryBound", format!("{bound:?} {bound}")),
        ("counter::SketchBound", format!("{:?}", bound.sketches)),
        ("counter::Verdict", format!("{:?}", Verdict::Exceeded)),
        ("limiter::Ask", ask),
        ("limiter::Check", format!("{check:?}")),
        (
            "limiter::Counted",
            format!(
                "{:?}",
                decision
                    .checks
                    .iter()
                    .map(|c| c.settled())
                    .collect::<Vec<_>>()
            ),
        ),
        (
            "limiter::InMemory",
            format!("{:?}", runtime::limiter::InMemory::CoolingOff),
        ),
        ("limiter::PolicyId", format!("{:?}", check.policy())),
        ("limiter::Decision", format!("{decision:?} {refused:?}")),
        ("limiter::FallbackLog", format!("{:?}", decision.logs)),
        ("limiter::ShadowLog", format!("{shadow_log:?}")),
        ("limiter::Limiter", format!("{limiter:?}")),
        ("limiter::Rules", format!("{:?}", limiter.rules())),
        (
            "limiter::PathTooLong",
            format!("{:?}", runtime::limiter::PathTooLong { bytes: 9000 }),
        ),
        (
            "limiter::Refused",
            format!("{:?}", runtime::limiter::Refusal::path_too_long()),
        ),
        ("limiter::Now", format!("{now:?}")),
        ("limiter::Pending", pending_shown),
        ("limiter::Policy", format!("{:?}", refusal.policies)),
        (
            "limiter::Refusal",
            format!("{refusal:?} {}", refusal.body()),
        ),
        ("native::refused::RefusedCache", format!("{refused_keys:?}")),
        (
            "backend::BackendAnswer",
            format!("{:?}", BackendAnswer::Remembered),
        ),
        (
            "backend::FallbackReason",
            format!("{:?}", FallbackReason::Missing),
        ),
        ("backend::BackendId", format!("{:?}", check.backend())),
        ("subject::Subject", format!("{caller:?} {address:?}")),
    ]
}

/// The native gate's types, after it decided a request of each.
async fn shown_native() -> Shown {
    let source = application();
    let gate = Arc::new(NativeGate::from_toml(&source, "server").expect("gate"));
    for subject in [
        Subject::of_request(Some(CALLER), None),
        Subject::of_request(None, Some(ADDRESS)),
    ] {
        let _ = gate.decide(&subject, "GET", "/api/search").await;
    }
    let layer = RateLimitLayer::new(gate.clone());
    let limited = layer.clone().layer(());
    let app = Application::from_toml(&source).expect("valid");
    let counting = app.counting(app.deployable("server").expect("server"));
    let redis = RedisStore::new(&redis_endpoint(&counting), "shop");
    let peer = PeerAddr(format!("{ADDRESS}:4000").parse().expect("addr"));
    // Its Redis (whose URL holds the password) is nowhere to be reached.
    let unreachable = match gate.connect().await {
        Err(unreachable) => format!("{unreachable:?} {unreachable}"),
        Ok(()) => panic!("the application's Redis answered"),
    };
    vec![
        (
            "subject::CallerId",
            format!("{:?}", CallerId(CALLER.into())),
        ),
        ("clock::Clock", format!("{:?}", gate.clock())),
        ("native::NativeGate", format!("{gate:?}")),
        (
            "native::NoPeerAddress",
            format!("{NoPeerAddress:?} {NoPeerAddress}"),
        ),
        ("native::PeerAddr", format!("{peer:?}")),
        ("native::StoreUnreachable", unreachable),
        ("native::RateLimitLayer", format!("{layer:?}")),
        ("native::RateLimited", format!("{limited:?}")),
        ("native::redis::RedisStore", format!("{redis:?}")),
        (
            "native::metrics::Label",
            format!("{:?}", runtime::native::metrics::METRICS),
        ),
    ]
}

#[tokio::test]
async fn no_debug_or_display_carries_a_password_or_a_key() {
    for (name, text) in shown().await {
        for secret in [PASSWORD, CALLER, ADDRESS] {
            assert!(!text.contains(secret), "{name} shows `{secret}`: {text}");
        }
    }
}

#[tokio::test]
async fn a_redis_url_is_shown_with_its_host_but_not_its_password() {
    let shown = shown().await;
    let endpoint = &shown
        .iter()
        .find(|(name, _)| *name == "config::model::RedisEndpoint")
        .expect("shown")
        .1;
    // Still useful to read: the host, port and database, the scheme.
    for visible in [
        "redis://***@127.0.0.1:1/0?***",
        "redis://***@10.0.0.1:7000",
        "redis+unix:///run/redis.sock?***",
        "rediss://***@[2001:db8::1]:6380",
    ] {
        assert!(endpoint.contains(visible), "{endpoint}");
    }
}

#[test]
fn no_diagnostic_echoes_a_password() {
    for source in invalid_applications() {
        let diagnostics = Application::from_toml(&source).expect_err("invalid");
        let rendered = diagnostics.render("app.toml");
        assert!(!rendered.contains(PASSWORD), "{rendered}");
        assert!(
            !format!("{diagnostics:?}").contains(PASSWORD),
            "{diagnostics:?}"
        );
        assert!(
            diagnostics
                .codes()
                .iter()
                .all(|c| [Code::StoreInvalid, Code::InvalidToml].contains(c)),
            "{rendered}"
        );
    }
}

/// `module::Type` of every `pub struct` and `pub enum` in `runtime/src`.
fn public_types() -> BTreeSet<String> {
    fn walk(dir: &Path, module: &str, found: &mut BTreeSet<String>) {
        for entry in std::fs::read_dir(dir).expect("runtime/src") {
            let path = entry.expect("entry").path();
            let stem = path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or_default();
            let inner = match (module, stem) {
                ("", "lib" | "mod") => String::new(),
                ("", _) => stem.to_owned(),
                (_, "mod") => module.to_owned(),
                _ => format!("{module}::{stem}"),
            };
            if path.is_dir() {
                walk(&path, &inner, found);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("source");
            for line in text.lines() {
                let Some(rest) = line
                    .strip_prefix("pub struct ")
                    .or_else(|| line.strip_prefix("pub enum "))
                else {
                    continue;
                };
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                found.insert(format!("{inner}::{name}"));
            }
        }
    }
    let mut found = BTreeSet::new();
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        "",
        &mut found,
    );
    found
}

/// Public types with no `Debug` to show here, and why.
const NOT_SHOWN: [(&str, &str); 7] = [
    (
        "counter::WindowCounter",
        "has no Debug: it keeps digests of keys, never keys",
    ),
    ("workers::HeaderName", "wasm32 only, and has no Debug"),
    ("workers::WorkersGate", "wasm32 only, and has no Debug"),
    (
        "workers::WorkersGateError",
        "wasm32 only: says the PLAN binding is missing or which plan line is wrong (a plan holds binding names and limits, no key or secret)",
    ),
    (
        "workers_rs::RateLimitLayer",
        "wasm32 only, and has no Debug",
    ),
    ("workers_rs::RateLimited", "wasm32 only, and has no Debug"),
    (
        "testing::HealthReport",
        "the harness fixtures' `testing` feature only: a deployable's name, its counting mode and two tallies, no key",
    ),
];

#[tokio::test]
async fn every_public_type_is_shown_here() {
    let mut listed: BTreeSet<String> = shown()
        .await
        .into_iter()
        .map(|(n, _)| n.to_owned())
        .collect();
    listed.extend(NOT_SHOWN.iter().map(|(n, _)| (*n).to_owned()));
    let found = public_types();
    let missing: Vec<&String> = found.difference(&listed).collect();
    assert!(
        missing.is_empty(),
        "public types whose Debug is not checked here: {missing:?}"
    );
    let stale: Vec<&String> = listed.difference(&found).collect();
    assert!(
        stale.is_empty(),
        "listed here but no longer public types: {stale:?}"
    );
}
