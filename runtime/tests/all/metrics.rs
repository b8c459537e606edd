//! The native gate's metrics (the `metrics` feature) read back from a
//! Prometheus recorder: a troubled store's fallbacks counted by reason and
//! its state, a route template one series however many ids, and nothing of
//! the facade linked without the feature.

use std::sync::Arc;

use runtime::limiter::MAX_PATH_BYTES;
use runtime::native::NativeGate;
use runtime::native::metrics::{
    COUNTED_IN_MEMORY, DECISIONS, METRICS, PATHS_TOO_LONG, STORE_ROUND_TRIP, STORE_STATE,
};
use runtime::unstable_for_tools::breaker::COOL_OFF_MS;

use crate::common::metrics::{recorder, samples, total};

/// A native API named `deployable` on a Redis nothing listens on.
fn missing_redis_gate(deployable: &str) -> NativeGate {
    // Bound, then closed: nothing listens on the port any more.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let source = format!(
        "name = \"shop\"\n[connections.cache]\ndriver = \"redis\"\nurl = \"redis://127.0.0.1:{port}\"\n\
         [rate_limits]\nstore = \"cache\"\n\
         [[deployables]]\nname = \"{deployable}\"\ntarget = \"native\"\nserves_api = true\n"
    );
    NativeGate::from_toml(&source, deployable).expect("gate")
}

#[tokio::test]
async fn a_missing_store_is_counted_in_memory_by_reason_and_its_state_is_cooling_off() {
    let recorder = recorder();
    let gate = missing_redis_gate("metrics-missing");
    let subject = runtime::Subject::of_request(None, Some("192.0.2.1"));
    for _ in 0..5 {
        assert!(gate.decide(&subject, "GET", "/api/items").await.is_ok());
    }
    let ours = ("deployable", "metrics-missing");
    let store = ("store", "cache");
    let scrape = samples(&recorder.render());
    let in_memory = |samples: &_, reason| {
        total(
            samples,
            COUNTED_IN_MEMORY,
            &[ours, store, ("reason", reason)],
        )
    };
    // One dial found nothing; the four after it cooled off.
    assert_eq!(in_memory(&scrape, "missing"), 1.0);
    assert_eq!(in_memory(&scrape, "cooling_off"), 4.0);
    assert_eq!(in_memory(&scrape, "timed_out"), 0.0);
    let state = |samples: &_, state| total(samples, STORE_STATE, &[ours, store, ("state", state)]);
    assert_eq!(state(&scrape, "cooling_off"), 1.0);
    assert_eq!(state(&scrape, "asked") + state(&scrape, "probing"), 0.0);
    // No round trip answered.
    assert_eq!(
        total(
            &scrape,
            &format!("{STORE_ROUND_TRIP}_count"),
            &[ours, store]
        ),
        0.0
    );
    // After the cool-off one request probes, finds nothing again, and a new
    // cool-off begins: one more `missing`.
    gate.clock()
        .set_offset_ms(i64::try_from(COOL_OFF_MS).expect("small") + 1);
    for _ in 0..3 {
        assert!(gate.decide(&subject, "GET", "/api/items").await.is_ok());
    }
    let scrape = samples(&recorder.render());
    assert_eq!(in_memory(&scrape, "missing"), 2.0);
    assert_eq!(in_memory(&scrape, "cooling_off"), 6.0);
    assert_eq!(state(&scrape, "cooling_off"), 1.0);
    assert_eq!(
        total(
            &scrape,
            DECISIONS,
            &[ours, ("limit", "address"), ("outcome", "passed")]
        ),
        8.0
    );
}

/// A route template is one limit: its series are the template's, however
/// many ids and addresses come, so no series grows with the clients.
#[tokio::test]
async fn a_route_template_is_one_series_however_many_ids_and_clients() {
    let recorder = recorder();
    let source = r#"
[[deployables]]
name = "metrics-templated"
target = "native"
serves_api = true

[[routes]]
path = "/api/users/{id}"
rate_limit = { requests = 2, window = 60 }
"#;
    let gate = Arc::new(NativeGate::from_toml(source, "metrics-templated").expect("gate"));
    let series = |text: &str| {
        text.lines()
            .filter(|l| !l.starts_with('#') && l.contains("deployable=\"metrics-templated\""))
            .count()
    };
    let first = runtime::Subject::of_request(None, Some("198.51.100.250"));
    assert!(gate.decide(&first, "GET", "/api/users/0").await.is_ok());
    let after_one = series(&recorder.render());
    for n in 0..200 {
        let subject =
            runtime::Subject::of_request(None, Some(&format!("10.1.{}.{}", n / 250, n % 250)));
        assert!(
            gate.decide(&subject, "GET", &format!("/api/users/{n}"))
                .await
                .is_ok()
        );
    }
    // One client on three ids: the template counts them as one.
    let one = runtime::Subject::of_request(None, Some("192.0.2.9"));
    for id in ["a", "b", "c"] {
        let _ = gate.decide(&one, "GET", &format!("/api/users/{id}")).await;
    }
    let text = recorder.render();
    assert_eq!(series(&text), after_one, "{text}");
    let scrape = samples(&text);
    let ours = ("deployable", "metrics-templated");
    let template = ("limit", "/api/users/{id}");
    assert_eq!(
        total(&scrape, DECISIONS, &[ours, template, ("outcome", "passed")]),
        203.0
    );
    assert_eq!(
        total(
            &scrape,
            DECISIONS,
            &[ours, template, ("outcome", "refused")]
        ),
        1.0
    );
    assert!(
        !text.contains("/api/users/1\""),
        "a request's path as a label: {text}"
    );
    assert!(
        !text.contains("192.0.2.9") && !text.contains("10.1.0.7"),
        "{text}"
    );
}

/// A path longer than the gate reads is refused 414 and counted by
/// deployable alone, at every length past the bound (hyper's longest
/// included), and under no limit; a path at the bound is decided, not
/// counted there. No series carries the path.
#[tokio::test]
async fn a_path_too_long_is_counted_by_deployable_and_never_named() {
    let recorder = recorder();
    let source = "[[deployables]]\nname = \"metrics-too-long\"\ntarget = \"native\"\nserves_api = true\n\
                  [[routes]]\npath = \"/api/{*rest}\"\nrate_limit = { requests = 100, window = 60 }\n";
    let gate = NativeGate::from_toml(source, "metrics-too-long").expect("gate");
    let subject = runtime::Subject::of_request(None, Some("192.0.2.4"));
    let path = |bytes: usize| {
        format!("/api/{}", "toolongsegment/".repeat(bytes / 15 + 1))[..bytes].to_owned()
    };
    let ours = ("deployable", "metrics-too-long");
    let decided = |text: &str| total(&samples(text), DECISIONS, &[ours]);
    let too_long = |text: &str| total(&samples(text), PATHS_TOO_LONG, &[ours]);
    assert!(
        gate.decide(&subject, "GET", &path(MAX_PATH_BYTES))
            .await
            .is_ok()
    );
    let text = recorder.render();
    let route = ("limit", "/api/{*rest}");
    let on_route = total(&samples(&text), DECISIONS, &[ours, route]);
    assert_eq!((on_route, too_long(&text)), (1.0, 0.0), "{text}");
    let decided_at_bound = decided(&text);
    let lengths = [MAX_PATH_BYTES + 1, 2 * MAX_PATH_BYTES, 65_534];
    for (n, bytes) in lengths.into_iter().enumerate() {
        let refusal = gate
            .decide(&subject, "GET", &path(bytes))
            .await
            .expect_err("too long");
        assert_eq!(refusal.status(), 414, "{bytes} bytes");
        let text = recorder.render();
        assert_eq!(too_long(&text), (n + 1) as f64, "{bytes} bytes: {text}");
        assert_eq!(
            decided(&text),
            decided_at_bound,
            "counted under no limit: {text}"
        );
        assert!(
            !text.contains("toolongsegment"),
            "a path in a series: {text}"
        );
    }
}

/// Every metric the module lists is described to the recorder, so a
/// scrape's `# HELP` names each one.
#[tokio::test]
async fn every_metric_listed_is_described() {
    let recorder = recorder();
    let gate = missing_redis_gate("metrics-described");
    let subject = runtime::Subject::of_request(None, Some("192.0.2.3"));
    let _ = gate.decide(&subject, "GET", "/api/items").await;
    // A series of `SHADOW_REFUSALS` is registered for a shadow limit only.
    let shadowed = NativeGate::from_toml(
        "[rate_limits]\nshadow = [\"address\"]\n\
         [[deployables]]\nname = \"metrics-described-shadow\"\ntarget = \"native\"\nserves_api = true\n",
        "metrics-described-shadow",
    )
    .expect("gate");
    let _ = shadowed.decide(&subject, "GET", "/api/items").await;
    let text = recorder.render();
    for (name, _) in METRICS {
        assert!(text.contains(&format!("# HELP {name} ")), "{name}: {text}");
    }
}

/// Without the `metrics` feature the facade is not linked: its crate is an
/// optional dependency that only that feature enables.
#[test]
fn without_the_feature_the_facade_is_not_linked() {
    let manifest: toml::Table = toml::from_str(include_str!("../../Cargo.toml")).expect("toml");
    let dependency = &manifest["dependencies"]["metrics"];
    assert_eq!(dependency["optional"].as_bool(), Some(true), "{dependency}");
    let features = manifest["features"].as_table().expect("features");
    let enabling: Vec<&String> = features
        .iter()
        .filter(|(_, list)| {
            list.as_array()
                .is_some_and(|l| l.iter().any(|f| f.as_str() == Some("dep:metrics")))
        })
        .map(|(name, _)| name)
        .collect();
    assert_eq!(enabling, ["metrics"]);
    assert_eq!(features["default"].as_array().map(Vec::len), Some(0));
}

/// A recorder that keeps every value set on a gauge, in order, by its
/// labels: to see when a state gauge was set, which a scrape cannot show.
#[derive(Default, Clone)]
struct GaugeSets(Arc<std::sync::Mutex<Vec<(String, f64)>>>);

struct Set {
    labels: String,
    sets: GaugeSets,
}

impl metrics::GaugeFn for Set {
    fn increment(&self, _: f64) {}
    fn decrement(&self, _: f64) {}
    fn set(&self, value: f64) {
        if let Ok(mut sets) = self.sets.0.lock() {
            sets.push((self.labels.clone(), value));
        }
    }
}

impl metrics::Recorder for GaugeSets {
    fn describe_counter(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn describe_gauge(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn describe_histogram(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn register_counter(&self, _: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Counter {
        metrics::Counter::noop()
    }
    fn register_gauge(&self, key: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Gauge {
        if key.name() != STORE_STATE {
            return metrics::Gauge::noop();
        }
        let labels = key
            .labels()
            .filter(|l| l.key() == "state")
            .map(|l| l.value().to_owned())
            .collect();
        metrics::Gauge::from_arc(Arc::new(Set {
            labels,
            sets: self.clone(),
        }))
    }
    fn register_histogram(
        &self,
        _: &metrics::Key,
        _: &metrics::Metadata<'_>,
    ) -> metrics::Histogram {
        metrics::Histogram::noop()
    }
}

/// The state gauge is set when a cool-off begins, and set again when its
/// probe fails and a new one begins (the state reads `cooling_off` before
/// and after), and not by the requests between: whoever watches the sets
/// sees each cool-off, as the harness's report page draws them.
#[test]
fn a_failed_probe_sets_cooling_off_again() {
    let sets = GaugeSets::default();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    metrics::with_local_recorder(&sets, || {
        runtime.block_on(async {
            let gate = missing_redis_gate("metrics-probes");
            let subject = runtime::Subject::of_request(None, Some("192.0.2.5"));
            for _ in 0..3 {
                let _ = gate.decide(&subject, "GET", "/api/items").await;
            }
            gate.clock()
                .set_offset_ms(i64::try_from(COOL_OFF_MS).expect("small") + 1);
            for _ in 0..3 {
                let _ = gate.decide(&subject, "GET", "/api/items").await;
            }
        });
    });
    let sets = sets.0.lock().expect("sets").clone();
    let raised: Vec<&str> = sets
        .iter()
        .filter(|(_, value)| *value == 1.0)
        .map(|(state, _)| state.as_str())
        .collect();
    // Registered by the first decision, which found the trouble: the state
    // it left, and nothing more until the probe failed and a new cool-off began.
    assert_eq!(raised, ["cooling_off", "cooling_off"], "{sets:?}");
}
