//! Every validation rule of the spec, one test each (or more).

use crate::common::placed;
use runtime::config::{Application, Code, Counting, Location, StoreDriver};

fn codes(source: &str) -> Vec<Code> {
    match Application::from_toml(source) {
        Ok(_) => Vec::new(),
        Err(diagnostics) => diagnostics.codes(),
    }
}

fn diagnostics(source: &str) -> runtime::Diagnostics {
    Application::from_toml(source).expect_err("the description should be invalid")
}

const CLOUDFLARE: &str = r#"
[connections.limits]
driver = "cloudflare_rate_limits"
namespace = 1001

[connections.cache]
driver = "redis"
url = "redis://127.0.0.1:6379"
"#;

fn app(store: &str, deployables: &str) -> String {
    format!("{CLOUDFLARE}\n[rate_limits]\nstore = {store}\n\n{deployables}")
}

const WORKERS_API: &str = r#"
[[deployables]]
name = "edge"
target = "workers"
serves_api = true
"#;

const NATIVE_API: &str = r#"
[[deployables]]
name = "server"
target = "native"
serves_api = true
"#;

#[test]
fn the_issue_example_is_valid() {
    let source = format!(
        "{}\n[[routes]]\npath = \"/api/search\"\nrate_limit = {{ requests = 20, window = 10 }}\n",
        app("\"limits\"", WORKERS_API)
    );
    let app = Application::from_toml(&source).expect("valid");
    assert_eq!(
        app.store.as_ref().map(|s| &s.driver),
        Some(&StoreDriver::CloudflareRateLimits { namespace: 1001 })
    );
    let edge = app.deployable("edge").expect("edge");
    assert_eq!(
        app.counting(edge),
        Counting::Binding {
            connection: "limits".into(),
            namespace: 1001
        }
    );
}

#[test]
fn store_must_name_one_known_connection() {
    assert_eq!(
        codes(&app("\"nowhere\"", WORKERS_API)),
        [Code::StoreInvalid]
    );
    assert_eq!(
        codes(&app("[\"limits\", \"cache\"]", WORKERS_API)),
        [Code::StoreInvalid]
    );
    assert_eq!(
        codes(&app("{ name = \"limits\" }", WORKERS_API)),
        [Code::StoreInvalid]
    );
    assert_eq!(
        codes(&app("[\"limits\"]", WORKERS_API)),
        [Code::StoreInvalid],
        "even a list of one"
    );
}

#[test]
fn store_must_be_redis_or_cloudflare() {
    let source = format!(
        "[connections.db]\ndriver = \"postgres\"\n\n[rate_limits]\nstore = \"db\"\n{WORKERS_API}"
    );
    let d = diagnostics(&source);
    assert_eq!(d.codes(), [Code::StoreInvalid]);
    assert!(d.0[0].message.contains("postgres"), "{}", d.0[0].message);
}

#[test]
fn store_invalid_points_at_the_store() {
    let d = diagnostics(&app("\"nowhere\"", WORKERS_API));
    let at = d.0[0].location.expect("a location");
    assert_eq!(
        at,
        Location {
            line: 11,
            column: 9
        }
    );
}

#[test]
fn a_workers_deployable_serving_an_api_needs_a_store() {
    assert_eq!(
        codes(&format!("{CLOUDFLARE}{WORKERS_API}")),
        [Code::StoreRequired]
    );
}

#[test]
fn a_workers_deployable_serving_no_api_needs_no_store() {
    let source = format!(
        "{CLOUDFLARE}\n[[deployables]]\nname = \"site\"\ntarget = \"workers\"\nserves_api = false\n"
    );
    let app = Application::from_toml(&source).expect("valid");
    assert_eq!(app.counting(&app.deployables[0]), Counting::NoApi);
}

#[test]
fn a_native_deployable_serving_an_api_cannot_use_the_binding() {
    let d = diagnostics(&app("\"limits\"", NATIVE_API));
    assert_eq!(d.codes(), [Code::TargetUnsupported]);
    assert!(
        d.0[0].message.contains("Redis"),
        "names Redis: {}",
        d.0[0].message
    );
}

#[test]
fn a_native_deployable_serving_no_api_may_share_a_binding_store() {
    let native_site = "[[deployables]]\nname = \"site\"\ntarget = \"native\"\nserves_api = false\n";
    assert_eq!(
        codes(&app("\"limits\"", &format!("{WORKERS_API}{native_site}"))),
        []
    );
}

#[test]
fn namespace_must_be_a_whole_number_of_at_least_one() {
    for bad in ["0", "-3", "1.5", "\"1001\"", "true"] {
        let source = format!(
            "[connections.limits]\ndriver = \"cloudflare_rate_limits\"\nnamespace = {bad}\n\n[rate_limits]\nstore = \"limits\"\n{WORKERS_API}"
        );
        assert_eq!(
            codes(&source),
            [Code::NamespaceInvalid],
            "namespace = {bad}"
        );
    }
    let missing = format!(
        "[connections.limits]\ndriver = \"cloudflare_rate_limits\"\n\n[rate_limits]\nstore = \"limits\"\n{WORKERS_API}"
    );
    assert_eq!(codes(&missing), [Code::NamespaceInvalid]);
}

#[test]
fn a_workers_api_on_redis_is_counted_in_memory_unless_declined() {
    let d = diagnostics(&app("\"cache\"", WORKERS_API));
    assert_eq!(d.codes(), [Code::CountedInMemory]);
    let message = &d.0[0].message;
    assert!(
        message.contains("cloudflare_rate_limits"),
        "names the binding: {message}"
    );
    assert!(
        message.contains("declines"),
        "names the decline line: {message}"
    );

    let declined = WORKERS_API.replace(
        "serves_api = true",
        "serves_api = true\ndeclines = [\"rate_limits.counted_in_memory\"]",
    );
    let app = Application::from_toml(&app("\"cache\"", &declined)).expect("declined is valid");
    assert_eq!(app.counting(&app.deployables[0]), Counting::InMemory);
}

#[test]
fn a_native_deployable_on_redis_is_unaffected() {
    // Named, as an application counting in Redis is.
    let named = format!("name = \"shop\"\n{}", app("\"cache\"", NATIVE_API));
    assert_eq!(codes(&named), []);
}

#[test]
fn only_judgement_calls_can_be_declined() {
    let declined = WORKERS_API.replace(
        "serves_api = true",
        "serves_api = true\ndeclines = [\"rate_limits.store_required\"]",
    );
    assert_eq!(codes(&app("\"limits\"", &declined)), [Code::DeclineUnknown]);
}

#[test]
fn route_windows_must_suit_the_binding() {
    let route = |window: u32| {
        format!(
            "[[routes]]\npath = \"/api/search\"\nrate_limit = {{ requests = 20, window = {window} }}\n"
        )
    };
    for ok in [10, 60] {
        assert_eq!(
            codes(&app("\"limits\"", &format!("{WORKERS_API}{}", route(ok)))),
            []
        );
    }
    let d = diagnostics(&app("\"limits\"", &format!("{WORKERS_API}{}", route(30))));
    assert_eq!(d.codes(), [Code::WindowUnsupported]);
    assert!(d.0[0].message.contains("/api/search"), "names the route");
    assert!(
        d.0[0].message.contains("10 or 60"),
        "names the windows allowed"
    );
    // With a Redis store any window counts.
    let declined = WORKERS_API.replace(
        "serves_api = true",
        "serves_api = true\ndeclines = [\"rate_limits.counted_in_memory\"]",
    );
    assert_eq!(
        codes(&app("\"cache\"", &format!("{declined}{}", route(30)))),
        []
    );
}

#[test]
fn route_limits_must_be_positive() {
    let source = app(
        "\"limits\"",
        &format!(
            "{WORKERS_API}[[routes]]\npath = \"/x\"\nrate_limit = {{ requests = 0, window = -1 }}\n"
        ),
    );
    assert_eq!(codes(&source), [Code::LimitInvalid, Code::LimitInvalid]);
}

#[test]
fn every_diagnostic_is_reported_at_once() {
    let source = r#"
[connections.limits]
driver = "cloudflare_rate_limits"
namespace = 0

[rate_limits]
store = ["a", "b"]

[[deployables]]
name = "edge"
target = "workers"
serves_api = true
declines = ["nonsense"]

[[deployables]]
name = "edge"
target = "native"
serves_api = true
"#;
    let mut got = codes(source);
    got.sort();
    assert_eq!(
        got,
        [
            Code::StoreInvalid,
            Code::NamespaceInvalid,
            Code::DeclineUnknown,
            Code::DeployableDuplicate
        ]
    );
}

#[test]
fn malformed_toml_has_a_line_and_column() {
    let d = diagnostics("[connections.limits]\ndriver = \n");
    assert_eq!(d.codes(), [Code::InvalidToml]);
    let at = d.0[0].location.expect("a location");
    assert_eq!(at.line, 2);
}

#[test]
fn unknown_fields_are_errors_with_a_place() {
    let d = diagnostics(&format!(
        "{CLOUDFLARE}\n[rate_limits]\nstore = \"limits\"\nstroe = 1\n"
    ));
    assert_eq!(d.codes(), [Code::InvalidToml]);
    assert!(d.0[0].message.contains("stroe"), "{}", d.0[0].message);
    assert_eq!(d.0[0].location.map(|l| l.line), Some(12));
}

#[test]
fn codes_are_stable_strings() {
    let all: Vec<&str> = Code::ALL.iter().map(|c| c.as_str()).collect();
    for expected in [
        "rate_limits.store_invalid",
        "rate_limits.store_required",
        "deployable.target_unsupported",
        "rate_limits.namespace_invalid",
        "rate_limits.counted_in_memory",
        "rate_limits.window_unsupported",
        "rate_limits.client_address_invalid",
        "rate_limits.route_path_invalid",
    ] {
        assert!(all.contains(&expected), "{expected}");
        assert_eq!(expected.parse::<Code>().map(|c| c.as_str()), Ok(expected));
    }
}

#[test]
fn rendering_names_the_code_file_and_place() {
    let d = diagnostics(&app("\"nowhere\"", WORKERS_API));
    let text = d.render("app.toml");
    assert!(
        text.starts_with("rate_limits.store_invalid: app.toml:11:9: "),
        "{text}"
    );
}

#[test]
fn an_invalid_namespace_hides_no_other_diagnostic() {
    // The issue's example: the driver is known, so every rule that needs only the driver runs.
    let source = r#"[connections.limits]
driver = "cloudflare_rate_limits"
namespace = 0

[rate_limits]
store = "limits"

[[deployables]]
name = "server"
target = "native"
serves_api = true

[[routes]]
path = "/api/search"
rate_limit = { requests = 20, window = 1 }
"#;
    assert_eq!(
        placed(source),
        [
            "rate_limits.namespace_invalid 3:13",
            "deployable.target_unsupported 8:1",
            "rate_limits.window_unsupported 15:40",
        ]
    );
}

#[test]
fn an_invalid_request_count_still_gets_its_window_checked() {
    let source = app(
        "\"limits\"",
        &format!(
            "{WORKERS_API}[[routes]]\npath = \"/x\"\nrate_limit = {{ requests = 0, window = 30 }}\n"
        ),
    );
    assert_eq!(
        codes(&source),
        [Code::LimitInvalid, Code::WindowUnsupported]
    );
}

#[test]
fn a_route_listed_twice_is_reported_at_the_second_entry_naming_the_first() {
    let routes = "[[routes]]\npath = \"/api/search\"\nrate_limit = { requests = 20, window = 10 }\n\n\
                  [[routes]]\npath = \"/api/other\"\n\n\
                  [[routes]]\npath = \"/api/search\"\nrate_limit = { requests = 20, window = 10 }\n";
    let source = app("\"limits\"", &format!("{WORKERS_API}{routes}"));
    // The 1-based line of the first entry's `[[routes]]`, just above its path.
    let first_line = source
        .lines()
        .position(|l| l == "path = \"/api/search\"")
        .expect("the first entry");
    let d = diagnostics(&source);
    assert_eq!(d.codes(), [Code::RouteDuplicate]);
    let at = d.0[0].location.expect("placed");
    assert_eq!(source.lines().nth(at.line - 1), Some("[[routes]]"));
    assert!(
        at.line > first_line + 4,
        "at the second entry, not the first"
    );
    assert!(
        d.0[0].message.contains(&format!("line {first_line}"))
            && d.0[0].message.contains("/api/search"),
        "{}",
        d.0[0].message
    );
    // Even without limits of their own, two entries of one path are one too many.
    let bare = app(
        "\"limits\"",
        &format!("{WORKERS_API}[[routes]]\npath = \"/a\"\n[[routes]]\npath = \"/a\"\n"),
    );
    assert_eq!(codes(&bare), [Code::RouteDuplicate]);
}

#[test]
fn connections_of_other_drivers_keep_their_own_settings() {
    let others = "[connections.db]\ndriver = \"postgres\"\nhost = \"db.internal\"\nport = 5432\n\n\
                  [connections.queue]\ndriver = \"sqs\"\nregion = { name = \"eu\" }\n";
    let source = format!("{others}{}", app("\"limits\"", WORKERS_API));
    assert_eq!(codes(&source), []);
}

#[test]
fn a_redis_connection_refuses_a_field_it_does_not_know_and_hides_nothing() {
    // `uri` for `url` would leave the connection with no server: every
    // process would count in its own memory.
    let redis = CLOUDFLARE.replace(
        "url = \"redis://127.0.0.1:6379\"",
        "uri = \"redis://127.0.0.1:6379\"\npool_size = 8",
    );
    let declined = WORKERS_API.replace(
        "serves_api = true",
        "serves_api = true\ndeclines = [\"rate_limits.counted_in_memory\"]",
    );
    let source = format!(
        "{redis}\n[rate_limits]\nstore = \"cache\"\n\n{declined}[[routes]]\npath = \"api\"\n"
    );
    let found = diagnostics(&source);
    let rendered = found.render("app.toml");
    assert_eq!(
        found.codes(),
        [Code::InvalidToml, Code::InvalidToml, Code::RoutePathInvalid],
        "{rendered}"
    );
    assert!(
        !rendered.contains("127.0.0.1"),
        "a URL may hold a password: {rendered}"
    );
    // Each at its own line, naming its field.
    let line_of = |text: &str| {
        source
            .lines()
            .position(|l| l.starts_with(text))
            .map(|n| n + 1)
    };
    for field in ["uri", "pool_size"] {
        let diagnostic = found
            .0
            .iter()
            .find(|d| d.message.contains(&format!("unknown field `{field}`")))
            .unwrap_or_else(|| panic!("no diagnostic for `{field}`: {rendered}"));
        let at = diagnostic.location.map(|l| (l.line, l.column));
        assert_eq!(at, line_of(&format!("{field} =")).map(|line| (line, 1)));
    }
}

#[test]
fn what_rate_limits_own_on_a_connection_is_still_checked_with_its_place() {
    // A Cloudflare connection is all rate limits': a typo is an error, with
    // its place, and hides nothing else.
    let source =
        app("\"limits\"", NATIVE_API).replace("namespace = 1001", "namespace = 1001\nnamespce = 3");
    assert_eq!(
        placed(&source),
        [
            "application.invalid_toml 5:1",
            "deployable.target_unsupported 15:1"
        ]
    );
    assert!(diagnostics(&source).0[0].message.contains("namespce"));
    // A Redis url is a string; a connection has a string driver.
    let bad = CLOUDFLARE.replace("url = \"redis://127.0.0.1:6379\"", "url = 6379")
        + "[connections.db]\nhost = \"x\"\n";
    assert_eq!(
        placed(&format!(
            "{bad}[rate_limits]\nstore = \"limits\"\n{WORKERS_API}"
        )),
        [
            "application.invalid_toml 8:7",
            "application.invalid_toml 9:1"
        ]
    );
    // Unknown fields elsewhere stay errors with line and column.
    for (extra, line) in [
        (
            "[[deployables]]\nname = \"b\"\ntarget = \"workers\"\nserves_api = false\ncolour = 1\n",
            5,
        ),
        ("[[routes]]\npath = \"/x\"\nmethod = \"GET\"\n", 3),
        (
            "[[routes]]\npath = \"/x\"\nrate_limit = { requests = 1, window = 10, burst = 2 }\n",
            3,
        ),
    ] {
        let d = diagnostics(&format!("{extra}{}", app("\"limits\"", WORKERS_API)));
        assert_eq!(d.codes(), [Code::InvalidToml], "{extra}");
        assert_eq!(d.0[0].location.map(|l| l.line), Some(line), "{extra}");
    }
}

#[test]
fn wrong_types_on_a_route_limit_are_limit_diagnostics_with_their_place() {
    let source = format!(
        "[[routes]]\npath = \"/x\"\nrate_limit = {{ requests = 20.0, window = \"60\" }}\n{}",
        app("\"limits\"", "")
    )
    .replace("store = \"limits\"", "store = \"nowhere\"");
    let d = diagnostics(&source);
    assert_eq!(
        placed(&source),
        [
            "rate_limits.store_invalid 14:9",
            "rate_limits.limit_invalid 3:27",
            "rate_limits.window_unsupported 3:42",
        ],
        "neither hides the other, nor the store's"
    );
    assert!(
        d.0[1].message.contains("write `requests = 20`"),
        "{}",
        d.0[1].message
    );
    assert!(
        d.0[2].message.contains("write `window = 60`"),
        "{}",
        d.0[2].message
    );
}

#[test]
fn a_connection_name_must_give_javascript_identifiers() {
    for (name, ok) in [
        ("limits", true),
        ("rate-limits", true),
        ("_limits", true),
        ("1limits", false),
        ("--", false),
        ("", false),
    ] {
        let source = app("\"limits\"", WORKERS_API)
            .replace("[connections.limits]", &format!("[connections.\"{name}\"]"))
            .replace("store = \"limits\"", &format!("store = \"{name}\""));
        let got = diagnostics_or_none(&source);
        if ok {
            assert_eq!(got, None, "{name:?}");
        } else {
            let d = got.unwrap_or_else(|| panic!("{name:?} should be refused"));
            assert_eq!(d.codes(), [Code::BindingNameInvalid], "{name:?}");
            assert!(
                d.0[0].message.contains(&format!("`{name}`")),
                "names the connection"
            );
            assert_eq!(d.0[0].location.map(|l| l.line), Some(2));
        }
    }
}

fn diagnostics_or_none(source: &str) -> Option<runtime::Diagnostics> {
    Application::from_toml(source).err()
}

#[test]
fn the_largest_namespace_id_fits_every_json_tool() {
    let max = runtime::config::MAX_NAMESPACE_ID;
    assert_eq!(max, 9_007_199_254_740_991);
    let with_namespace = |n: u64, routes: &str| {
        app("\"limits\"", &format!("{WORKERS_API}{routes}"))
            .replace("namespace = 1001", &format!("namespace = {n}"))
    };
    // Two built-in bindings: ids n and n + 1.
    assert_eq!(codes(&with_namespace(max - 1, "")), []);
    let d = diagnostics(&with_namespace(max, ""));
    assert_eq!(d.codes(), [Code::NamespaceInvalid]);
    assert!(d.0[0].message.contains("2^53 - 1"), "{}", d.0[0].message);
    assert!(d.0[0].message.contains(&format!("at most {}", max - 1)));
    // A route's limit adds a binding, and so lowers the bound.
    let route = "[[routes]]\npath = \"/x\"\nrate_limit = { requests = 5, window = 10 }\n";
    assert_eq!(
        codes(&with_namespace(max - 1, route)),
        [Code::NamespaceInvalid]
    );
    assert_eq!(codes(&with_namespace(max - 2, route)), []);
    assert_eq!(
        codes(&with_namespace(i64::MAX as u64, "")),
        [Code::NamespaceInvalid]
    );
}

#[test]
fn a_route_path_that_cannot_match_or_holds_the_key_separator_is_invalid_at_its_path() {
    let route = |path: &str| {
        app(
            "\"limits\"",
            &format!(
                "{WORKERS_API}[[routes]]\npath = {path}\nrate_limit = {{ requests = 3, window = 60 }}\n"
            ),
        )
    };
    for (path, says) in [
        ("\"api/search\"", "write `/api/search`"),
        ("\"\"", "does not start with `/`"),
        ("\"/api/a|caller:x\"", "`|`"),
        ("\"/api/search?q=1\"", "`?`"),
        ("\"/api/search#top\"", "`#`"),
        ("\"/api/my search\"", "write `/api/my%20search`"),
        ("\"/api/café\"", "write `/api/caf%C3%A9`"),
        ("\"/api/\\t\"", "percent-encoded"),
    ] {
        let source = route(path);
        let d = diagnostics(&source);
        assert_eq!(d.codes(), [Code::RoutePathInvalid], "{path}");
        assert!(d.0[0].message.contains(says), "{path}: {}", d.0[0].message);
        let at = d.0[0].location.expect("placed");
        let line = source.lines().nth(at.line - 1).expect("the line");
        assert_eq!(&line[..at.column - 1], "path = ", "{path}: at its value");
    }
    // Paths a request can have are valid, percent-encoding included.
    for path in [
        "\"/\"",
        "\"/api/search\"",
        "\"/api/caf%C3%A9\"",
        "\"/a-b_c.d~e!$&'()*+,;=:@\"",
    ] {
        assert_eq!(codes(&route(path)), [], "{path}");
    }
}

/// `rate_limits.data_points` names the Workers Analytics Engine dataset:
/// the plan then names the binding written through, and the Wrangler entry
/// binds it; a value that is no dataset name is invalid at its place, every
/// other diagnostic still reported.
#[test]
fn data_points_name_a_dataset_that_the_plan_and_the_wrangler_entry_carry() {
    use runtime::GatePlan;
    use runtime::bindings::{DATA_POINTS_BINDING, DatasetEntry};
    let with = |value: &str| {
        format!(
            "{CLOUDFLARE}\n[rate_limits]\nstore = \"limits\"\ndata_points = {value}\n\n{WORKERS_API}"
        )
    };
    let named = Application::from_toml(&with("\"rate_limits\"")).expect("valid");
    assert_eq!(named.data_points.as_deref(), Some("rate_limits"));
    let plan = GatePlan::new(&named, "edge").expect("edge");
    assert_eq!(plan.data_points(), Some(DATA_POINTS_BINDING));
    let text = plan.to_text().expect("a Workers plan");
    assert!(
        text.ends_with("\ndata_points RATE_LIMIT_DATA_POINTS\n"),
        "{text}"
    );
    assert_eq!(GatePlan::from_text(&text), Ok(plan));
    assert_eq!(
        DatasetEntry::of(&named),
        Some(DatasetEntry {
            binding: DATA_POINTS_BINDING.to_owned(),
            dataset: "rate_limits".to_owned()
        })
    );
    // None named: no line, no entry.
    let none = Application::from_toml(&app("\"limits\"", WORKERS_API)).expect("valid");
    assert_eq!(none.data_points, None);
    assert_eq!(DatasetEntry::of(&none), None);
    let plain = GatePlan::new(&none, "edge")
        .expect("edge")
        .to_text()
        .expect("text");
    assert!(!plain.contains("data_points"), "{plain}");

    let long = format!("\"d{}\"", "x".repeat(64));
    for (value, says) in [
        ("\"\"", "is empty"),
        ("\"1st\"", "must start with an ASCII letter"),
        ("\"rate-limits\"", "only letters, digits and `_`"),
        ("\"naïve\"", "only letters, digits and `_`"),
        // What would break out of the Wrangler file or the SQL it is named in.
        (
            "\"a\\\"\\nmain = \\\"evil.js\"",
            "only letters, digits and `_`",
        ),
        ("\"a; DROP TABLE x\"", "only letters, digits and `_`"),
        ("\"a\\u0000\"", "only letters, digits and `_`"),
        (long.as_str(), "characters long, over 64"),
        ("7", "not a integer"),
        ("[\"a\"]", "not a array"),
    ] {
        let source = with(value);
        let d = diagnostics(&source);
        assert_eq!(d.codes(), [Code::DataPointsInvalid], "{value}");
        assert!(d.0[0].message.contains(says), "{value}: {}", d.0[0].message);
        let at = d.0[0].location.expect("a place");
        assert_eq!((at.line, at.column), (12, 15), "{value}");
    }
    // Beside another problem, both are reported.
    let both = format!(
        "{CLOUDFLARE}\n[rate_limits]\nstore = \"nowhere\"\ndata_points = \"\"\n\n{WORKERS_API}"
    );
    assert_eq!(
        diagnostics(&both).codes(),
        [Code::StoreInvalid, Code::DataPointsInvalid]
    );
}

/// A description whose route path (line 7, column 8) lacks its `/`, and
/// whose route's limit counts no requests (line 8): two problems.
const TWO_PROBLEMS: &str = r#"[[deployables]]
name = "server"
target = "native"
serves_api = true

[[routes]]
path = "api/search"
rate_limit = { requests = 0, window = 60 }
"#;

#[test]
fn a_description_error_reads_the_same_through_debug_as_through_display_one_line_each() {
    let diagnostics = diagnostics(TWO_PROBLEMS);
    let debug = format!("{diagnostics:?}");
    assert_eq!(debug, diagnostics.to_string());
    let lines: Vec<&str> = debug.lines().collect();
    assert_eq!(lines.len(), 2, "{debug}");
    assert!(
        lines[0].starts_with("rate_limits.route_path_invalid: 7:8: "),
        "{debug}"
    );
    assert!(
        lines[1].starts_with("rate_limits.limit_invalid: 8:"),
        "{debug}"
    );
    // What a `main` returning the native gate's error with `?` prints.
    let gate = runtime::native::NativeGate::from_toml(TWO_PROBLEMS, "server").expect_err("invalid");
    assert_eq!(format!("{gate:?}"), debug);
    let boxed: Box<dyn std::error::Error> = gate.into();
    assert_eq!(format!("Error: {boxed:?}").lines().count(), 2);
}

#[test]
fn a_description_read_from_its_file_names_the_file_in_every_line() {
    let dir = std::env::temp_dir().join(format!("runtime-from-file-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a folder");
    let file = dir.join("app.toml");
    std::fs::write(&file, TWO_PROBLEMS).expect("write");
    let shown = file.display().to_string();
    let error = Application::from_file(&file).expect_err("invalid");
    let debug = format!("{error:?}");
    assert_eq!(debug, error.to_string());
    assert!(
        debug.starts_with(&format!("rate_limits.route_path_invalid: {shown}:7:8: ")),
        "{debug}"
    );
    assert!(
        debug
            .lines()
            .nth(1)
            .is_some_and(|l| l.starts_with(&format!("rate_limits.limit_invalid: {shown}:8:"))),
        "{debug}"
    );
    // The native gate's constructor from a file, as `main`'s `?` shows it.
    let gate = runtime::native::NativeGate::from_file(&file, "server").expect_err("invalid");
    let boxed: Box<dyn std::error::Error> = gate.into();
    assert_eq!(format!("{boxed:?}"), debug);
    // A file that is not there is named too.
    std::fs::remove_dir_all(&dir).expect("remove");
    let missing = Application::from_file(&file).expect_err("no file");
    assert!(
        format!("{missing:?}").starts_with(&format!("{shown}: ")),
        "{missing:?}"
    );
}

/// A dotted key of `n` parts, `k.k.k`: two characters a part but the last.
fn dotted(n: usize) -> String {
    vec!["k"; n].join(".")
}

/// The TOML reader's own limits are diagnostics with a place like any other:
/// its error for a dotted key of more parts than it nests has no span of its
/// own, and was reported with no `line:col` (a 100,000-part key was
/// `application.invalid_toml: app.toml: recursion limit`). Each is placed at
/// the part past the limit (the 81st: column 161 of `k.k.…`), however the key
/// is written: a key, a table header, an array of tables' header, a key of an
/// inline table, quoted parts with whitespace around the dots.
#[test]
fn a_key_nested_past_the_toml_readers_limit_is_placed_at_its_first_part_past_it() {
    use runtime::config::TOML_KEY_NESTING_LIMIT;
    // The figure is the reader's: a key of the limit's parts is read, one more is not.
    let within = format!("{} = 1\n", dotted(TOML_KEY_NESTING_LIMIT));
    assert!(toml::from_str::<toml::Table>(&within).is_ok());
    let past = format!("{} = 1\n", dotted(TOML_KEY_NESTING_LIMIT + 1));
    let error = toml::from_str::<toml::Table>(&past).expect_err("past the limit");
    assert_eq!((error.message(), error.span()), ("recursion limit", None));
    let quoted = vec!["\"k\""; 100].join(" . ");
    for (source, at) in [
        (format!("[rate_limits]\n{} = 1\n", dotted(100_000)), "2:161"),
        (format!("[rate_limits]\n{} = 1\n", dotted(81)), "2:161"),
        (format!("{WORKERS_API}\n[{}]\n", dotted(100)), "7:162"),
        (format!("[[{}]]\nx = 1\n", dotted(100)), "1:163"),
        (
            format!(
                "[[routes]]\npath = \"/a\"\nrate_limit = {{ {} = 1 }}\n",
                dotted(90)
            ),
            "3:176",
        ),
        (format!("x = 1\n{quoted} = 2\n"), "2:481"),
    ] {
        let d = diagnostics(&source);
        assert_eq!(d.codes(), [Code::InvalidToml]);
        assert_eq!(d.0[0].message, "recursion limit");
        let line = d.render("app.toml");
        assert_eq!(
            line,
            format!("application.invalid_toml: app.toml:{at}: recursion limit\n"),
        );
    }
}

/// Inline tables and arrays nested past the reader's depth are placed at
/// the first one past it, every other diagnostic of the file too.
#[test]
fn values_nested_past_the_toml_readers_depth_are_placed() {
    for (open, close) in [("{ a = ", " }"), ("[", "]")] {
        let value = format!("{}1{}", open.repeat(10_000), close.repeat(10_000));
        let source = format!("{WORKERS_API}[connections.c]\ndriver = \"redis\"\nx = {value}\n");
        let d = diagnostics(&source);
        assert_eq!(d.codes(), [Code::InvalidToml], "{open}");
        assert!(d.0.iter().all(|d| d.location.is_some()), "{d:?}");
        let at = d.0[0].location.expect("placed");
        // The 81st `{` or `[`: past the 80 the reader nests.
        let column = "x = ".len() + 80 * open.len() + 1;
        assert_eq!(
            (at.line, at.column),
            (8, column),
            "{open}: {}",
            d.0[0].message
        );
    }
}

/// A native API on Redis, `name` (a line of TOML, or none) first.
fn named_redis_app(name: &str) -> String {
    format!(
        "{name}\n[connections.cache]\ndriver = \"redis\"\n[rate_limits]\nstore = \"cache\"\n\
         [[deployables]]\nname = \"server\"\ntarget = \"native\"\nserves_api = true\n"
    )
}

#[test]
fn an_application_counting_in_redis_names_itself_and_its_name_is_one_a_key_holds() {
    let app = Application::from_toml(&named_redis_app("name = \"shop-eu.v2\"")).expect("valid");
    assert_eq!(app.name.as_deref(), Some("shop-eu.v2"));
    // No name: at `rate_limits.store`, which makes it count in Redis.
    let d = diagnostics(&named_redis_app(""));
    assert_eq!(d.codes(), [Code::ApplicationNameInvalid]);
    assert_eq!(d.0[0].location, Some(Location { line: 5, column: 9 }));
    assert!(
        d.0[0].message.contains("name = \"shop\""),
        "{}",
        d.0[0].message
    );
    // A name a key cannot hold plainly, at its place.
    for bad in [
        "\"\"",
        "\"shop:eu\"",
        "\"{shop}\"",
        "\"-shop\"",
        "\"café\"",
        "7",
        "65 letters",
    ] {
        let bad = if bad == "65 letters" {
            format!("\"{}\"", "a".repeat(65))
        } else {
            bad.to_owned()
        };
        let d = diagnostics(&named_redis_app(&format!("name = {bad}")));
        assert_eq!(d.codes(), [Code::ApplicationNameInvalid], "{bad}");
        assert_eq!(
            d.0[0].location,
            Some(Location { line: 1, column: 8 }),
            "{bad}"
        );
    }
    // Nothing counts in Redis: no name needed (a Worker counts in memory).
    let workers = named_redis_app("").replace(
        "target = \"native\"\nserves_api = true\n",
        "target = \"workers\"\nserves_api = true\ndeclines = [\"rate_limits.counted_in_memory\"]\n",
    );
    assert_eq!(codes(&workers), []);
}
