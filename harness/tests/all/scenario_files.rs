//! The scenario format itself: its checked-in JSON Schema is current and
//! agrees with the parser, and malformed files fail with `file:line:col`.

use std::path::Path;

use crate::common::WORKERS_API;
use harness::commands::suite::{self, Trial};
use harness::language::scenario::{self, load_file};
use harness::world::paths::{SCENARIOS_SHOWN_AS, scenarios_dir};

fn schema_path() -> std::path::PathBuf {
    scenarios_dir().join("scenario.schema.json")
}

#[test]
fn the_checked_in_schema_is_current() {
    let generated = scenario::json_schema();
    if std::env::var_os("UPDATE_SCHEMA").is_some() {
        std::fs::write(schema_path(), &generated).expect("write the schema");
    }
    let checked_in = std::fs::read_to_string(schema_path()).unwrap_or_default();
    assert!(
        checked_in == generated,
        "scenarios/scenario.schema.json is stale: run `UPDATE_SCHEMA=1 cargo test -p harness --test all -- scenario_files::the_checked_in_schema_is_current` and commit it"
    );
    let json: serde_json::Value = serde_json::from_str(&generated).expect("json");
    assert_eq!(json["$schema"], "http://json-schema.org/draft-07/schema#");
}

#[test]
fn every_scenario_file_references_the_schema_and_validates_against_it() {
    let schema: serde_json::Value = serde_json::from_str(&scenario::json_schema()).expect("json");
    let validator = jsonschema::validator_for(&schema).expect("the schema compiles");
    for (path, display) in scenario::scenario_files(&scenarios_dir(), Path::new(SCENARIOS_SHOWN_AS))
        .expect("scenarios")
    {
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(
            text.starts_with("#:schema ./scenario.schema.json\n"),
            "{} lacks the #:schema line",
            display.display()
        );
        let value: toml::Value = toml::from_str(&text).expect("toml");
        let json = serde_json::to_value(value).expect("as json");
        let errors: Vec<String> = validator
            .iter_errors(&json)
            .map(|e| format!("{e} at {}", e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{}: {errors:#?}", display.display());
        load_file(&path, &display).unwrap_or_else(|e| panic!("{e}"));
    }
}

#[test]
fn the_schema_refuses_what_the_parser_refuses() {
    let schema: serde_json::Value = serde_json::from_str(&scenario::json_schema()).expect("json");
    let validator = jsonschema::validator_for(&schema).expect("the schema compiles");
    let bad = serde_json::json!({ "scenario": [{ "name": "x", "stpes": [] }] });
    assert!(!validator.is_valid(&bad), "unknown fields are errors");
    let bad_behaviour =
        serde_json::json!({ "scenario": [{ "name": "x", "bindings": { "A": "flaky" } }] });
    assert!(!validator.is_valid(&bad_behaviour));
}

fn malformed(text: &str) -> String {
    let dir = tempfile::tempdir().expect("temp dir");
    let scenarios = dir.path().join("scenarios");
    std::fs::create_dir(&scenarios).expect("dir");
    std::fs::write(scenarios.join("bad.toml"), text).expect("write");
    // Trials are named by the directory as given: here, `scenarios`.
    let trials = suite::discover(&scenarios, Path::new("scenarios"))
        .expect("discover")
        .trials;
    assert_eq!(
        trials.len(),
        1,
        "a malformed file is one failed trial, not a silent skip"
    );
    match &trials[0] {
        Trial::Malformed { error, .. } => error.to_string(),
        Trial::Scenario(p) => panic!("{} parsed", p.trial_name),
    }
}

#[test]
fn an_unknown_field_names_file_line_and_column() {
    let error = malformed("[[scenario]]\nname = \"a\"\napplication_inline = ''\nstpes = []\n");
    assert!(error.starts_with("scenarios/bad.toml:4:1: "), "{error}");
    assert!(error.contains("stpes"), "{error}");
}

#[test]
fn a_wrong_type_names_file_line_and_column() {
    let error =
        malformed("[[scenario]]\nname = \"a\"\napplication_inline = ''\nisolates = \"two\"\n");
    assert!(error.starts_with("scenarios/bad.toml:4:12: "), "{error}");
}

#[test]
fn an_unknown_behaviour_is_named() {
    let error = malformed(
        "[[scenario]]\nname = \"a\"\napplication_inline = ''\nbindings = { A = \"flaky\" }\n",
    );
    assert!(error.starts_with("scenarios/bad.toml:4:"), "{error}");
    assert!(error.contains("flaky"), "{error}");
}

#[test]
fn a_sequence_that_does_not_add_up_points_at_it() {
    let error = malformed(
        "[[scenario]]\nname = \"a\"\napplication_inline = ''\n[[scenario.steps]]\nsend = { requests = 3 }\nexpect = { statuses = \"2 x 200\" }\n",
    );
    assert!(error.starts_with("scenarios/bad.toml:6:23: "), "{error}");
    assert!(
        error.contains("counts 2 responses but the step sends 3"),
        "{error}"
    );
}

/// A scenario whose steps are `steps`, each a TOML step body.
fn with_steps(steps: &[&str]) -> String {
    scenario_with("", steps)
}

/// A scenario with these `fields` (TOML lines) and `steps`.
fn scenario_with(fields: &str, steps: &[&str]) -> String {
    let mut text = format!("[[scenario]]\nname = \"a\"\napplication_inline = ''\n{fields}");
    for step in steps {
        text.push_str("[[scenario.steps]]\n");
        text.push_str(step);
        text.push('\n');
    }
    text
}

#[test]
fn counts_that_overflow_are_a_located_error_not_a_panic_or_a_wrapped_sum() {
    // 2^64 - 1 + 2 wraps to 1 in a usize: two requests would have "added up".
    let error = malformed(&with_steps(&[
        "send = { requests = 1 }\nexpect = { statuses = \"18446744073709551615 x 200 then 2 x 200\" }",
    ]));
    assert_eq!(
        error,
        "scenarios/bad.toml:6:23: the sequence counts 18446744073709551617 responses but the step sends 1 requests"
    );
    let error = malformed(&with_steps(&[
        "send = { requests = 1 }\nexpect = { statuses = \"18446744073709551616 x 200\" }",
    ]));
    assert!(error.starts_with("scenarios/bad.toml:6:23: "), "{error}");
    assert!(error.contains("is not a count"), "{error}");
    let error = malformed(&with_steps(&[
        "send = { requests = 2 }\nexpect = { counts = { 200 = 9223372036854775807, 429 = 9223372036854775807 } }",
    ]));
    assert_eq!(
        error,
        "scenarios/bad.toml:6:21: the counts add up to 18446744073709551614 responses but the step sends 2 requests"
    );
}

#[test]
fn requests_concurrency_and_isolates_have_stated_bounds() {
    use harness::language::scenario::{MAX_CONCURRENCY, MAX_ISOLATES, MAX_REQUESTS};
    // Refused at once, before anything is allocated for them (~200 GB here).
    let error = malformed(&with_steps(&["send = { requests = 100000000000 }"]));
    assert_eq!(
        error,
        format!(
            "scenarios/bad.toml:5:1: `requests` is 100000000000: a step has 1 to {MAX_REQUESTS}"
        )
    );
    let error = malformed(&with_steps(&[&format!(
        "send = {{ requests = 1, concurrency = {} }}",
        MAX_CONCURRENCY + 1
    )]));
    assert!(
        error.starts_with("scenarios/bad.toml:5:1: `concurrency` is 257: a step has 1 to 256"),
        "{error}"
    );
    let error = malformed(&format!(
        "[[scenario]]\nname = \"a\"\napplication_inline = ''\nisolates = {}\n",
        MAX_ISOLATES + 1
    ));
    assert!(
        error.starts_with("scenarios/bad.toml:4:1: `isolates` is 17: a scenario runs 1 to 16"),
        "{error}"
    );

    // At the bound, a step loads (its sequence expands to one status per request) ...
    let at_bound = format!(
        "send = {{ requests = {MAX_REQUESTS}, concurrency = {MAX_CONCURRENCY} }}\nexpect = {{ statuses = \"{} x 200 then 429\", counts = {{ 200 = {}, 429 = 1 }} }}",
        MAX_REQUESTS - 1,
        MAX_REQUESTS - 1
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("ok.toml");
    std::fs::write(&path, with_steps(&[&at_bound])).expect("write");
    load_file(&path, Path::new("ok.toml")).unwrap_or_else(|e| panic!("{e}"));
    // ... one more is refused, and so is a scenario whose steps together pass it,
    // at the step that does.
    let error = malformed(&with_steps(&[&format!(
        "send = {{ requests = {} }}",
        MAX_REQUESTS + 1
    )]));
    assert!(
        error.starts_with("scenarios/bad.toml:5:1: `requests` is 100001"),
        "{error}"
    );
    let error = malformed(&with_steps(&[
        &format!("send = {{ requests = {MAX_REQUESTS} }}"),
        "sleep_ms = 1",
        "send = { requests = 1 }",
    ]));
    assert_eq!(
        error,
        format!(
            "scenarios/bad.toml:8:1: this step brings the scenario to 100001 requests, above the {MAX_REQUESTS} a scenario may send"
        )
    );
}

#[test]
fn a_scenario_that_judges_nothing_is_refused_at_its_place() {
    for steps in [
        "",
        "[[scenario.steps]]\nsleep_ms = 1\n[[scenario.steps]]\nset_bindings = { \"*\" = \"healthy\" }\n",
        "[scenario.expect]\nbinding_keys = { \"*\" = [] }\n",
    ] {
        let error = malformed(&format!(
            "[[scenario]]\nname = \"a\"\napplication_inline = '''{WORKERS_API}'''\n{steps}"
        ));
        assert!(
            error.starts_with("scenarios/bad.toml:1:1: this scenario judges nothing: "),
            "{steps}: {error}"
        );
    }
}

#[test]
fn binding_keys_name_the_plans_bindings_and_a_star_only_says_none() {
    let keys = |keys: &str| {
        malformed(&format!(
            "[[scenario]]\nname = \"a\"\napplication_inline = '''{WORKERS_API}'''\n[[scenario.steps]]\nsend = {{ requests = 1 }}\n[scenario.expect]\nbinding_keys = {{ {keys} }}\n"
        ))
    };
    let error = keys("LIMITS_120_PER_60 = []");
    assert!(error.starts_with("scenarios/bad.toml:19:16: "), "{error}");
    assert!(
        error.contains(
            "`LIMITS_120_PER_60` is not one of the deployable's bindings: [LIMITS_120_PER_60S, LIMITS_600_PER_60S]"
        ),
        "{error}"
    );
    let error = keys("\"*\" = [\"caller:c\"]");
    assert!(error.starts_with("scenarios/bad.toml:19:16: "), "{error}");
    assert!(error.contains("write `\"*\" = []`"), "{error}");
}

#[test]
fn a_deadline_step_is_refused_where_its_waits_could_not_be_told_apart() {
    let warm = "send = { requests = 2, path = \"/health\" }";
    let deadline = |send: &str, deadline: &str| {
        format!("send = {{ {send} }}\nexpect = {{ deadline = {{ {deadline} }} }}")
    };
    let two_isolates = |steps: &[&str]| malformed(&scenario_with("isolates = 2\n", steps));
    for (error, says, place) in [
        (
            malformed(&with_steps(&[&deadline(
                "requests = 4, concurrency = 2",
                "ms = 500, waiting = 1",
            )])),
            "the waiting requests would be isolate 0's first",
            "scenarios/bad.toml:6:23: ",
        ),
        (
            two_isolates(&[
                warm,
                &deadline("requests = 4, concurrency = 2", "ms = 500, waiting = 1"),
            ]),
            "name the step's `isolate`",
            "scenarios/bad.toml:9:23: ",
        ),
        (
            two_isolates(&[
                warm,
                "restart_isolate = 1",
                &deadline(
                    "requests = 4, concurrency = 2, isolate = 1",
                    "ms = 500, waiting = 1",
                ),
            ]),
            "would be isolate 1's first",
            "scenarios/bad.toml:11:23: ",
        ),
        (
            malformed(&with_steps(&[
                warm,
                &deadline("requests = 3, concurrency = 4", "ms = 500, waiting = 4"),
            ])),
            "`waiting` is 4 of 3 requests",
            "scenarios/bad.toml:8:23: ",
        ),
        (
            malformed(&with_steps(&[
                warm,
                &deadline("requests = 4, concurrency = 2", "ms = 500, waiting = 3"),
            ])),
            "raise `concurrency`",
            "scenarios/bad.toml:8:23: ",
        ),
        (
            malformed(&with_steps(&[
                warm,
                &deadline("requests = 4", "ms = 0, waiting = 1"),
            ])),
            "a deadline of 0 ms: write 1 to 60000",
            "scenarios/bad.toml:8:23: ",
        ),
    ] {
        assert!(error.contains(says), "{says}: {error}");
        assert!(error.starts_with(place), "{error}");
    }
    // Cloudflare's own binding cannot be made to wait: a marked scenario's deadline is refused.
    let error = malformed(&scenario_with(
        "on_cloudflare = \"exact\"\n",
        &[
            warm,
            &deadline("requests = 4, concurrency = 2", "ms = 500, waiting = 1"),
        ],
    ));
    assert!(
        error.starts_with("scenarios/bad.toml:7:1: `on_cloudflare`, but Cloudflare cannot run this scenario: a `deadline`"),
        "{error}"
    );
    // A warmed isolate named by the step, after another isolate's restart: fine.
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("ok.toml");
    let text = scenario_with(
        "isolates = 2\n",
        &[
            warm,
            "restart_isolate = 0",
            &deadline(
                "requests = 4, concurrency = 2, isolate = 1",
                "ms = 500, waiting = 2",
            ),
        ],
    );
    std::fs::write(&path, text).expect("write");
    load_file(&path, Path::new("ok.toml")).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn a_step_doing_two_things_is_refused() {
    let error = malformed(
        "[[scenario]]\nname = \"a\"\napplication_inline = ''\n[[scenario.steps]]\nsleep_ms = 1\nrestart_isolate = 0\n[[scenario.steps]]\nsend = { requests = 1 }\n",
    );
    assert!(error.starts_with("scenarios/bad.toml:4:"), "{error}");
    assert!(error.contains("exactly one of"), "{error}");
}

#[test]
fn advance_clock_is_refused_on_the_wall_clock() {
    let error = malformed(
        "[[scenario]]\nname = \"a\"\nclock = \"wall\"\napplication_inline = ''\n[[scenario.steps]]\nadvance_clock = { seconds = 5 }\n",
    );
    // At the step's action, the line that is wrong.
    assert!(error.starts_with("scenarios/bad.toml:6:1: "), "{error}");
    assert!(error.contains("advance_clock"), "{error}");
}

#[test]
fn an_unknown_clock_is_named() {
    let error = malformed("[[scenario]]\nname = \"a\"\nclock = \"wal\"\napplication_inline = ''\n");
    assert!(error.starts_with("scenarios/bad.toml:3:9: "), "{error}");
    assert!(
        error.contains("wal") && error.contains("scenario"),
        "{error}"
    );
}

#[test]
fn one_address_or_a_new_one_for_each_request_not_both() {
    let error = malformed(
        "[[scenario]]\nname = \"a\"\napplication_inline = ''\n[[scenario.steps]]\nsend = { requests = 1, address = \"192.0.2.1\", distinct_addresses = true }\n",
    );
    assert!(error.starts_with("scenarios/bad.toml:5:1: "), "{error}");
    assert!(error.contains("not both"), "{error}");
}

#[test]
fn a_caller_may_send_from_an_address() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("ok.toml");
    std::fs::write(
        &path,
        "[[scenario]]\nname = \"a\"\napplication_inline = ''\n[[scenario.steps]]\nsend = { requests = 1, caller = \"c\", address = \"192.0.2.1\" }\n[[scenario.steps]]\nsend = { requests = 2, caller = \"c\", distinct_addresses = true }\n",
    )
    .expect("write");
    let prepared = load_file(&path, Path::new("ok.toml")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(prepared.len(), 1);
}

#[test]
fn not_toml_at_all_is_a_located_error() {
    let error = malformed("[[scenario]\n");
    assert!(error.starts_with("scenarios/bad.toml:1:"), "{error}");
}

/// The TOML reader's own limits are located in a scenario file as
/// everywhere: a dotted key of more parts than the reader nests (an error
/// it gives no span, once placed at 1:1) at its first part past the limit
/// (the 81st, column 161 of `k.k.…`), and inline tables and arrays nested
/// past its depth at the first one past it. An inline application's are
/// the application's diagnostics, placed in it.
#[test]
fn the_toml_readers_own_limits_are_located_in_a_scenario_file() {
    let key = vec!["k"; 100_000].join(".");
    let error = malformed(&format!("[[scenario]]\nname = \"a\"\n{key} = 1\n"));
    assert_eq!(error, "scenarios/bad.toml:3:161: recursion limit");
    let error = malformed(&format!("[[scenario]]\nname = \"a\"\n[scenario.{key}]\n"));
    assert_eq!(error, "scenarios/bad.toml:3:169: recursion limit");
    for (open, close) in [("{ a = ", " }"), ("[", "]")] {
        let value = format!("{}1{}", open.repeat(1_000), close.repeat(1_000));
        let error = malformed(&format!("[[scenario]]\nname = \"a\"\nx = {value}\n"));
        let column = "x = ".len() + 80 * open.len() + 1;
        assert!(
            error.starts_with(&format!("scenarios/bad.toml:3:{column}: ")),
            "{error}"
        );
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("ok.toml");
    std::fs::write(
        &path,
        format!(
            "[[scenario]]\nname = \"a\"\nexpect_diagnostics = [\"application.invalid_toml\"]\n\
             application_inline = \"\"\"\n[rate_limits]\n{key} = 1\n\"\"\"\n"
        ),
    )
    .expect("write");
    let prepared = load_file(&path, Path::new("ok.toml")).unwrap_or_else(|e| panic!("{e}"));
    let diagnostics = prepared[0].application.as_ref().expect_err("too deep");
    assert_eq!(
        diagnostics.render("app.toml"),
        "application.invalid_toml: app.toml:2:161: recursion limit\n"
    );
}

#[test]
fn a_missing_application_file_is_named_at_its_application_line_once() {
    let error = malformed(
        "application = \"apps/nope.toml\"\n[[scenario]]\nname = \"a\"\n[[scenario]]\nname = \"b\"\n",
    );
    // At the `application =` that names it (its value), naming it as
    // written and why; once, though two scenarios need it.
    assert!(
        error.starts_with(
            "scenarios/bad.toml:1:15: cannot read application `apps/nope.toml`: No such file"
        ),
        "{error}"
    );
    assert_eq!(error.lines().count(), 1, "{error}");
    let error = malformed("[[scenario]]\nname = \"a\"\napplication = \"apps/nope.toml\"\n");
    assert!(error.starts_with("scenarios/bad.toml:3:15: "), "{error}");
}

#[test]
fn every_error_of_a_file_is_reported_in_one_run_each_at_its_line() {
    // Two typos in one scenario, a wrong type in another, and a step that
    // does two things in a third: four lines, in the file's order.
    let error = malformed(
        "[[scenario]]\nname = \"a\"\napplication_inline = ''\nstpes = []\ntgas = []\n\
         [[scenario]]\nname = \"b\"\napplication_inline = ''\nisolates = \"two\"\n\
         [[scenario]]\nname = \"c\"\napplication_inline = ''\n[[scenario.steps]]\nsleep_ms = 1\nrestart_isolate = 0\n[[scenario.steps]]\nsend = { requests = 1 }\n",
    );
    let lines: Vec<&str> = error.lines().collect();
    assert_eq!(lines.len(), 4, "{error}");
    assert!(
        lines[0].starts_with("scenarios/bad.toml:4:1: ") && lines[0].contains("stpes"),
        "{error}"
    );
    assert!(
        lines[1].starts_with("scenarios/bad.toml:5:1: ") && lines[1].contains("tgas"),
        "{error}"
    );
    assert!(lines[2].starts_with("scenarios/bad.toml:9:12: "), "{error}");
    assert!(
        lines[3].starts_with("scenarios/bad.toml:13:1: ") && lines[3].contains("exactly one"),
        "{error}"
    );
}

#[test]
fn an_application_s_diagnostics_are_at_the_application_file_s_lines_once_when_the_file_loads() {
    let dir = tempfile::tempdir().expect("temp dir");
    let scenarios = dir.path().join("scenarios");
    std::fs::create_dir_all(scenarios.join("apps")).expect("dir");
    std::fs::write(
        scenarios.join("apps/bad.toml"),
        "[connections.limits]\ndriver = \"cloudflare_rate_limits\"\nnamespace = 0\n",
    )
    .expect("write the application");
    std::fs::write(
        scenarios.join("bad.toml"),
        "application = \"apps/bad.toml\"\n[[scenario]]\nname = \"a\"\n[[scenario.steps]]\nsend = { requests = 1 }\n\
         [[scenario]]\nname = \"b\"\n[[scenario.steps]]\nsend = { requests = 1 }\n",
    )
    .expect("write the scenarios");
    let trials = suite::discover(&scenarios, Path::new("scenarios"))
        .expect("discover")
        .trials;
    let [Trial::Malformed { error, .. }] = trials.as_slice() else {
        panic!("one malformed file, before any scenario runs");
    };
    let error = error.to_string();
    assert_eq!(error.lines().count(), 1, "once, for two scenarios: {error}");
    assert!(
        error.starts_with("scenarios/apps/bad.toml:3:13: rate_limits.namespace_invalid: "),
        "{error}"
    );
    // Inline: at the line of the scenario file the description is on.
    let error = malformed(
        "[[scenario]]\nname = \"a\"\napplication_inline = \'\'\'\n[connections.limits]\ndriver = \"cloudflare_rate_limits\"\nnamespace = 0\n\'\'\'\n[[scenario.steps]]\nsend = { requests = 1 }\n",
    );
    assert!(
        error.starts_with("scenarios/bad.toml:6:13: rate_limits.namespace_invalid: "),
        "{error}"
    );
}

#[test]
fn a_binding_the_plan_lacks_is_refused_at_its_name_when_the_file_loads() {
    let error = malformed(&format!(
        "[[scenario]]\nname = \"a\"\napplication_inline = \'\'\'{WORKERS_API}\'\'\'\nbindings = {{ LIMITS_120_PER_60S = \"throwing\", LIMITS_12_PER_60S = \"hanging\" }}\n[[scenario.steps]]\nsend = {{ requests = 1 }}\n"
    ));
    let line = 4 + WORKERS_API.lines().count();
    let column = "bindings = { LIMITS_120_PER_60S = \"throwing\", ".len() + 1;
    assert!(
        error.starts_with(&format!("scenarios/bad.toml:{line}:{column}: `LIMITS_12_PER_60S` is not one of the deployable's bindings: [LIMITS_120_PER_60S, LIMITS_600_PER_60S]")),
        "{error}"
    );
    let error = malformed(&format!(
        "[[scenario]]\nname = \"a\"\napplication_inline = \'\'\'{WORKERS_API}\'\'\'\n[[scenario.steps]]\nsend = {{ requests = 1 }}\n[[scenario.steps]]\nset_bindings = {{ LIMITS_600 = \"missing\" }}\n"
    ));
    let line = 4 + WORKERS_API.lines().count() + 3;
    assert!(
        error.starts_with(&format!(
            "scenarios/bad.toml:{line}:18: `LIMITS_600` is not one"
        )),
        "{error}"
    );
}

#[test]
fn waiting_for_a_window_no_limit_has_is_refused_at_its_line_with_the_windows_there_are() {
    let error = malformed(&format!(
        "[[scenario]]\nname = \"a\"\napplication_inline = \'\'\'{WORKERS_API}\'\'\'\n[[scenario.steps]]\nsend = {{ requests = 1 }}\n[[scenario.steps]]\nwait_for_window = 30\n"
    ));
    let line = 4 + WORKERS_API.lines().count() + 3;
    assert!(
        error.starts_with(&format!("scenarios/bad.toml:{line}:1: no limit of the deployable has a window of 30 s: its windows are 60 s")),
        "{error}"
    );
    let room = malformed(&format!(
        "[[scenario]]\nname = \"a\"\napplication_inline = \'\'\'{WORKERS_API}\'\'\'\n[[scenario.steps]]\nwait_for_room = {{ window = 10, seconds = 5 }}\n[[scenario.steps]]\nsend = {{ requests = 1 }}\n"
    ));
    assert!(
        room.contains("a window of 10 s: its windows are 60 s"),
        "{room}"
    );
    // A route's own window is one the deployable has.
    loads(&format!(
        "[[scenario]]\nname = \"a\"\napplication_inline = \'\'\'{WORKERS_API}\n[[routes]]\npath = \"/api/search\"\nrate_limit = {{ requests = 3, window = 10 }}\n\'\'\'\n[[scenario.steps]]\nwait_for_window = 10\n[[scenario.steps]]\nsend = {{ requests = 1 }}\n"
    ));
}

/// A native API on Redis, inline, for the Redis scenario errors (its name
/// on the first line, so the lines after it are where they were without one).
const NATIVE_REDIS: &str = "application_inline = \'\'\'name = \"shop\"\n[connections.cache]\ndriver = \"redis\"\n[rate_limits]\nstore = \"cache\"\n[[deployables]]\nname = \"api\"\ntarget = \"native\"\nserves_api = true\n\'\'\'\ndeployable = \"api\"\n";

#[test]
fn an_unknown_redis_behaviour_names_file_line_and_column() {
    let error = malformed(&format!(
        "[[scenario]]\nname = \"a\"\n{NATIVE_REDIS}redis_starts = \"flaky\"\n"
    ));
    assert!(error.starts_with("scenarios/bad.toml:14:16: "), "{error}");
    assert!(
        error.contains("flaky") && error.contains("hanging"),
        "{error}"
    );
}

#[test]
fn redis_behaviours_only_where_they_make_sense() {
    let at_start = malformed(&format!(
        "[[scenario]]\nname = \"a\"\n{NATIVE_REDIS}redis_starts = \"restarted\"\n"
    ));
    assert!(
        at_start.starts_with("scenarios/bad.toml:14:16: "),
        "{at_start}"
    );
    assert!(at_start.contains("mid-run"), "{at_start}");
    let missing_mid_run = malformed(&format!(
        "[[scenario]]\nname = \"a\"\n{NATIVE_REDIS}[[scenario.steps]]\nset_redis = \"missing\"\n"
    ));
    assert!(
        missing_mid_run.starts_with("scenarios/bad.toml:15:1: "),
        "{missing_mid_run}"
    );
    assert!(
        missing_mid_run.contains("from the start"),
        "{missing_mid_run}"
    );
    let cluster_restart = malformed(&format!(
        "[[scenario]]\nname = \"a\"\nredis = \"cluster\"\n{NATIVE_REDIS}[[scenario.steps]]\nset_redis = \"restarted\"\n"
    ));
    assert!(
        cluster_restart.contains("cluster is not restarted"),
        "{cluster_restart}"
    );
    // A failover and a resharding are done to a cluster, mid-run.
    for change in ["failed_over", "migrating", "resharded"] {
        let on_one_server = malformed(&format!(
            "[[scenario]]\nname = \"a\"\n{NATIVE_REDIS}[[scenario.steps]]\nset_redis = \"{change}\"\n"
        ));
        assert!(
            on_one_server.starts_with("scenarios/bad.toml:15:1: "),
            "{on_one_server}"
        );
        assert!(
            on_one_server.contains(&format!("`{change}` is done to a Redis Cluster")),
            "{on_one_server}"
        );
        let at_start = malformed(&format!(
            "[[scenario]]\nname = \"a\"\nredis = \"cluster\"\n{NATIVE_REDIS}redis_starts = \"{change}\"\n"
        ));
        assert!(at_start.contains("mid-run"), "{at_start}");
    }
}

#[test]
fn a_wall_clock_steps_on_a_native_instance_that_exists_by_some_ms() {
    let step = |step: &str| {
        malformed(&format!(
            "[[scenario]]\nname = \"a\"\n{NATIVE_REDIS}[[scenario.steps]]\nstep_wall_clock = {step}\n"
        ))
    };
    for (bad, says) in [
        ("{ ms = 0 }", "needs a step"),
        ("{ ms = 86400001 }", "at most a day"),
        ("{ isolate = 1, ms = -1000 }", "isolate 1 does not exist"),
    ] {
        let error = step(bad);
        assert!(error.starts_with("scenarios/bad.toml:"), "{bad}: {error}");
        assert!(error.contains(says), "{bad}: {error}");
    }
    // A Worker's one clock never goes back within its isolate.
    let workers = "application_inline = \'\'\'\n[[deployables]]\nname = \"edge\"\ntarget = \"workers\"\nserves_api = false\n\'\'\'\n";
    let error = malformed(&format!(
        "[[scenario]]\nname = \"a\"\n{workers}[[scenario.steps]]\nstep_wall_clock = {{ ms = -1000 }}\n"
    ));
    assert!(error.starts_with("scenarios/bad.toml:9:"), "{error}");
    assert!(
        error.contains("`step_wall_clock` steps a native instance's wall clock"),
        "{error}"
    );
}

#[test]
fn a_tls_redis_is_a_running_redis_a_native_deployable_counts_in() {
    // A Workers deployable has no Redis to speak TLS.
    let workers = "application_inline = \'\'\'\n[[deployables]]\nname = \"edge\"\ntarget = \"workers\"\nserves_api = false\n\'\'\'\n";
    let error = malformed(&format!(
        "[[scenario]]\nname = \"a\"\n{workers}redis_tls = \"trusted\"\n"
    ));
    assert!(error.starts_with("scenarios/bad.toml:9:13: "), "{error}");
    assert!(
        error.contains("`redis_tls` is for a native deployable counting in Redis"),
        "{error}"
    );
    // A TLS Redis needs a server (one, or a cluster's) to speak it.
    let error = malformed(&format!(
        "[[scenario]]\nname = \"a\"\n{NATIVE_REDIS}redis_starts = \"missing\"\nredis_tls = \"untrusted\"\n"
    ));
    assert!(error.starts_with("scenarios/bad.toml:15:13: "), "{error}");
    assert!(error.contains("has none"), "{error}");
    let error = malformed(&format!(
        "[[scenario]]\nname = \"a\"\n{NATIVE_REDIS}redis_tls = \"maybe\"\n"
    ));
    assert!(error.starts_with("scenarios/bad.toml:14:13: "), "{error}");
    assert!(error.contains("trusted"), "{error}");
}

#[test]
fn redis_steps_belong_to_a_native_deployable_counting_in_redis() {
    let workers = "application_inline = \'\'\'\n[[deployables]]\nname = \"edge\"\ntarget = \"workers\"\nserves_api = false\n\'\'\'\n";
    let error = malformed(&format!(
        "[[scenario]]\nname = \"a\"\n{workers}[[scenario.steps]]\nsend = {{ requests = 1 }}\nexpect = {{ redis_calls = {{ evalsha = 1 }} }}\n"
    ));
    assert!(error.starts_with("scenarios/bad.toml:11:"), "{error}");
    assert!(
        error.contains("`redis_calls` is for a native deployable counting in Redis"),
        "{error}"
    );
    let error = malformed(&format!(
        "[[scenario]]\nname = \"a\"\n{workers}[[scenario.steps]]\nset_redis = \"down\"\n"
    ));
    assert!(error.starts_with("scenarios/bad.toml:9:"), "{error}");
    assert!(error.contains("Workers deployable"), "{error}");
    let error = malformed(&format!(
        "[[scenario]]\nname = \"a\"\n{NATIVE_REDIS}bindings = {{ \"*\" = \"missing\" }}\n"
    ));
    assert!(error.starts_with("scenarios/bad.toml:14:12: "), "{error}");
    assert!(error.contains("native"), "{error}");
}

#[test]
fn a_peer_is_a_loopback_address_of_a_native_instance_and_a_chain_has_one_address_an_entry() {
    let native = "application_inline = \'\'\'\n[[deployables]]\nname = \"api\"\ntarget = \"native\"\nserves_api = true\n\'\'\'\ndeployable = \"api\"\n";
    let step = |send: &str| {
        format!("[[scenario]]\nname = \"a\"\n{native}[[scenario.steps]]\nsend = {send}\n")
    };
    let error = malformed(&step("{ requests = 1, peer = \"10.0.0.1\" }"));
    assert!(error.starts_with("scenarios/bad.toml:11:31: "), "{error}");
    assert!(error.contains("loopback address, 127.x.y.z"), "{error}");
    let error = malformed(&step("{ requests = 1, peer = \"127.0.0.300\" }"));
    assert!(error.starts_with("scenarios/bad.toml:11:31: "), "{error}");
    let error = malformed(&step(
        "{ requests = 1, forwarded_for = [\"203.0.113.7, 10.0.0.1\"] }",
    ));
    assert!(error.contains("holds a comma"), "{error}");
    let error = malformed(&step(
        "{ requests = 1, forwarded_for = [\"203.0.113.7\"], headers = { \"x-forwarded-for\" = \"1.2.3.4\" } }",
    ));
    assert!(error.contains("not both"), "{error}");
    // A Worker's peer is Cloudflare's edge: `peer` is for native instances.
    let workers = "application_inline = \'\'\'\n[[deployables]]\nname = \"edge\"\ntarget = \"workers\"\nserves_api = false\n\'\'\'\n";
    let error = malformed(&format!(
        "[[scenario]]\nname = \"a\"\n{workers}[[scenario.steps]]\nsend = {{ requests = 1, peer = \"127.0.0.2\" }}\n"
    ));
    assert!(error.starts_with("scenarios/bad.toml:9:"), "{error}");
    assert!(error.contains("Workers deployable"), "{error}");
}

/// A scenario of one `send` step to a native deployable `api` whose
/// `client_address` is `source`: the step is line 12.
fn native_send(source: &str, send: &str) -> String {
    format!(
        "[[scenario]]\nname = \"a\"\napplication_inline = '''\n[[deployables]]\nname = \"api\"\ntarget = \"native\"\nserves_api = true\nclient_address = {source}\n'''\ndeployable = \"api\"\n[[scenario.steps]]\nsend = {send}\n"
    )
}

/// Where `needle` is in the `send` line of [`native_send`]: `file:12:col: `.
fn on_send_line(send: &str, needle: &str) -> String {
    let column = "send = ".len() + send.find(needle).expect("in the step") + 1;
    format!("scenarios/bad.toml:12:{column}: ")
}

/// Loads `text` as a scenario file, or panics with its error.
fn loads(text: &str) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("ok.toml");
    std::fs::write(&path, text).expect("write");
    load_file(&path, Path::new("ok.toml")).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn an_address_the_deployable_never_reads_is_refused_unless_the_step_says_it_is_spoofed() {
    let peer = "\"peer\"";
    let proxies = "{ trusted_proxies = [\"127.0.0.2\"] }";
    let cloudflare = "\"cloudflare\"";
    // A native deployable counting its peers sees every `address` as 127.0.0.1.
    let send = "{ requests = 2, address = \"10.0.0.1\" }";
    let error = malformed(&native_send(peer, send));
    assert!(
        error.starts_with(&on_send_line(send, "\"10.0.0.1\"")),
        "{error}"
    );
    for said in [
        "`address` 10.0.0.1 is sent as CF-Connecting-IP, which deployable `api` does not read",
        "client_address = \"peer\": it counts the connecting peer (`peer`)",
        "counts this step's client as 127.0.0.1",
        "`spoofed = true`",
    ] {
        assert!(error.contains(said), "{said}: {error}");
    }
    loads(&native_send(
        peer,
        "{ requests = 2, address = \"10.0.0.1\", spoofed = true }",
    ));
    let send = "{ requests = 2, distinct_addresses = true }";
    let error = malformed(&native_send(peer, send));
    assert!(error.starts_with("scenarios/bad.toml:11:"), "{error}");
    assert!(error.contains("`distinct_addresses`"), "{error}");

    // Behind a trusted proxy: the chain from the proxy is read, from any
    // other peer it is not, and CF-Connecting-IP never is.
    loads(&native_send(
        proxies,
        "{ requests = 1, peer = \"127.0.0.2\", forwarded_for = [\"203.0.113.7\"] }",
    ));
    let send = "{ requests = 1, peer = \"127.0.0.3\", forwarded_for = [\"203.0.113.7\"] }";
    let error = malformed(&native_send(proxies, send));
    assert!(
        error.starts_with(&on_send_line(send, "[\"203.0.113.7\"]")),
        "{error}"
    );
    assert!(
        error.contains("does not read from peer 127.0.0.3")
            && error.contains("counts this step's client as 127.0.0.3"),
        "{error}"
    );
    let send = "{ requests = 1, peer = \"127.0.0.2\", forwarded_for = [\"203.0.113.7\"], address = \"203.0.113.7\" }";
    let error = malformed(&native_send(proxies, send));
    assert!(
        error.starts_with(&on_send_line(send, "\"203.0.113.7\" }")),
        "{error}"
    );

    // Behind Cloudflare the header is read from Cloudflare or a relay, and
    // from any other peer (loopback is no Cloudflare address) it is not.
    let relay = "{ cloudflare_via = [\"127.0.0.1\"] }";
    loads(&native_send(
        relay,
        "{ requests = 1, address = \"2001:db8::1\" }",
    ));
    let send = "{ requests = 1, peer = \"127.0.0.2\", address = \"203.0.113.7\" }";
    let error = malformed(&native_send(relay, send));
    assert!(
        error.starts_with(&on_send_line(send, "\"203.0.113.7\"")),
        "{error}"
    );
    assert!(
        error.contains("counts this step's client as 127.0.0.2"),
        "{error}"
    );
    let send = "{ requests = 1, address = \"203.0.113.7\" }";
    let error = malformed(&native_send(cloudflare, send));
    assert!(
        error.contains("`cloudflare_via` relays, and any other peer itself")
            && error.contains("counts this step's client as 127.0.0.1"),
        "{error}"
    );
    loads(&native_send(
        cloudflare,
        "{ requests = 1, address = \"203.0.113.7\", spoofed = true }",
    ));

    // A Worker reads CF-Connecting-IP, never X-Forwarded-For.
    let workers = format!(
        "[[scenario]]\nname = \"a\"\napplication_inline = '''{WORKERS_API}'''\n[[scenario.steps]]\nsend = "
    );
    loads(&format!(
        "{workers}{{ requests = 1, address = \"garbage\" }}\n"
    ));
    let error = malformed(&format!(
        "{workers}{{ requests = 1, address = \"203.0.113.7\", forwarded_for = [\"198.51.100.1\"] }}\n"
    ));
    assert!(
        error.contains("`forwarded_for` is sent as X-Forwarded-For")
            && error.contains("a Workers deployable counts `CF-Connecting-IP`"),
        "{error}"
    );
}

#[test]
fn spoofed_on_a_step_whose_every_address_is_read_is_refused() {
    for (source, send) in [
        (
            "\"peer\"",
            "{ requests = 1, peer = \"127.0.0.2\", spoofed = true }",
        ),
        (
            "{ trusted_proxies = [\"127.0.0.2\"] }",
            "{ requests = 1, peer = \"127.0.0.2\", forwarded_for = [\"203.0.113.7\"], spoofed = true }",
        ),
        ("\"cloudflare\"", "{ requests = 1, spoofed = true }"),
    ] {
        let error = malformed(&native_send(source, send));
        assert!(
            error.starts_with(&on_send_line(send, "true }")),
            "{send}: {error}"
        );
        assert!(
            error.contains(
                "`spoofed = true`, but deployable `api` reads every address this step sends"
            ),
            "{error}"
        );
    }
}

#[test]
fn on_cloudflare_only_where_cloudflare_can_run_it() {
    // Every way a marked scenario asks what the edge cannot do, at its place.
    for (body, place, said) in [
        (
            "bindings = { A = \"throwing\" }\n",
            "scenarios/bad.toml:5:12: ",
            "cannot be made throwing",
        ),
        (
            "[[scenario.steps]]\nadvance_clock = { seconds = 5 }\n",
            "scenarios/bad.toml:5:",
            "no scenario clock",
        ),
        (
            "[[scenario.steps]]\nsend = { requests = 2, distinct_addresses = true }\n",
            "scenarios/bad.toml:5:",
            "sets CF-Connecting-IP itself",
        ),
        (
            "[[scenario.steps]]\nsend = { requests = 2, headers = { \"cf-connecting-ip\" = \"192.0.2.1\" } }\n",
            "scenarios/bad.toml:5:",
            "sets CF-Connecting-IP itself",
        ),
        (
            "[[scenario.steps]]\nrestart_isolate = 0\n",
            "scenarios/bad.toml:5:",
            "isolates are its own",
        ),
        (
            "[[scenario.steps]]\nlimit = { binding = \"A\", outcome = \"pending\" }\n",
            "scenarios/bad.toml:5:",
            "no control endpoint",
        ),
        (
            "expect_diagnostics = []\n",
            "scenarios/bad.toml:4:17: ",
            "sends no traffic",
        ),
    ] {
        let error = malformed(&format!(
            "[[scenario]]\nname = \"a\"\napplication_inline = ''\non_cloudflare = {{ refusal_by = 3 }}\n{body}"
        ));
        assert!(error.starts_with(place), "{body}: {error}");
        assert!(
            error.contains("Cloudflare cannot run this scenario") && error.contains(said),
            "{body}: {error}"
        );
    }
    let native = malformed(&format!(
        "[[scenario]]\nname = \"a\"\non_cloudflare = \"exact\"\n{NATIVE_REDIS}"
    ));
    assert!(native.starts_with("scenarios/bad.toml:3:17: "), "{native}");
    assert!(native.contains("native"), "{native}");
    let not_checked = malformed(
        "[[scenario]]\nname = \"a\"\napplication_inline = ''\non_cloudflare = \"not_checked\"\n",
    );
    assert!(
        not_checked.starts_with("scenarios/bad.toml:4:17: "),
        "{not_checked}"
    );
    assert!(
        not_checked.contains("leave `on_cloudflare` out"),
        "{not_checked}"
    );
    let zero = malformed(
        "[[scenario]]\nname = \"a\"\napplication_inline = ''\non_cloudflare = { refusal_by = 0 }\n",
    );
    assert!(zero.starts_with("scenarios/bad.toml:4:"), "{zero}");
    assert!(zero.contains("at least 1"), "{zero}");
    let unmarked = malformed(
        "[[scenario]]\nname = \"a\"\napplication_inline = ''\n[[scenario.steps]]\nsend = { requests = 1 }\nexpect = { on_cloudflare = { latency = \"exact\" } }\n",
    );
    assert!(unmarked.starts_with("scenarios/bad.toml:6:"), "{unmarked}");
    assert!(unmarked.contains("needs the scenario's"), "{unmarked}");
}

#[test]
fn a_marked_scenario_may_send_as_a_caller_wait_for_windows_and_lose_a_binding() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("ok.toml");
    std::fs::write(
        &path,
        "[[scenario]]\nname = \"a\"\napplication_inline = ''\non_cloudflare = { refusal_by = 3 }\nbindings = { A = \"missing\" }\nisolates = 2\n\
         [[scenario.steps]]\nsend = { requests = 3, caller = \"c\", address = \"192.0.2.1\" }\nexpect = { statuses = \"2 x 200 then 429\", on_cloudflare = { statuses = { refusal_by = 10 }, latency = \"not_checked\" } }\n\
         [[scenario.steps]]\nwait_for_window = 10\n[[scenario.steps]]\nwait_for_room = { window = 60, seconds = 30 }\n[[scenario.steps]]\nsleep_ms = 5\n",
    )
    .expect("write");
    let prepared = load_file(&path, Path::new("ok.toml")).unwrap_or_else(|e| panic!("{e}"));
    let sends = harness::language::on_cloudflare::sends(prepared[0].scenario.scenario.get_ref());
    assert_eq!(sends.len(), 1);
    let bound = sends[0].bound.expect("bounded");
    assert_eq!(
        (bound.limit, bound.refusal_by, sends[0].requests()),
        (2, 10, 21)
    );
}

/// The pinned taplo (the engine of Even Better TOML), installed on first use.
fn taplo() -> std::path::PathBuf {
    let dir = harness::world::paths::repo_root().join("tools/fixtures/taplo");
    let bin = dir.join("node_modules/.bin/taplo");
    harness::world::npm::ci_unless(&dir, &[&bin], "taplo is not installed", &[])
        .unwrap_or_else(|e| panic!("{e}"));
    bin
}

/// `taplo check` on files in `dir`, as an editor checks them: (passed, output).
fn taplo_check(dir: &Path, files: &[&str]) -> (bool, String) {
    let output = std::process::Command::new(taplo())
        .args(["check", "--colors", "never"])
        .args(files)
        .current_dir(dir)
        .env_remove("TAPLO_CONFIG")
        .output()
        .expect("taplo runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

#[test]
fn taplo_accepts_every_scenario_file() {
    let files = scenario::scenario_files(&scenarios_dir(), Path::new(SCENARIOS_SHOWN_AS))
        .expect("scenarios");
    let names: Vec<String> = files
        .iter()
        .filter_map(|(path, _)| Some(path.file_name()?.to_str()?.to_owned()))
        .collect();
    assert!(names.len() > 5, "{names:?}");
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let (ok, text) = taplo_check(&scenarios_dir(), &names);
    assert!(ok, "{text}");
}

#[test]
fn taplo_names_the_unknown_field_and_where_it_is() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::copy(schema_path(), dir.path().join("scenario.schema.json")).expect("copy schema");
    let head = "#:schema ./scenario.schema.json\napplication = \"apps/cloudflare.toml\"\n[[scenario]]\nname = \"a\"\n";
    let broken = [
        // (file, body after the head, what taplo must say, the place)
        (
            "expect.toml",
            "[[scenario.steps]]\nsend = { requests = 1 }\nexpect = { retry_afterr = 60 }\n",
            "'retry_afterr' was unexpected",
            "expect.toml:7:12",
        ),
        (
            "step.toml",
            "[[scenario.steps]]\nadvance_clok = { seconds = 5 }\n",
            "'advance_clok' was unexpected",
            "step.toml:6:1",
        ),
        (
            "send.toml",
            "[[scenario.steps]]\nsend = { requests = 1, adress = \"192.0.2.1\" }\n",
            "'adress' was unexpected",
            "send.toml:6:24",
        ),
        (
            "final.toml",
            "[scenario.expect]\nbinding_keyz = {}\n",
            "'binding_keyz' was unexpected",
            "final.toml:6:1",
        ),
    ];
    for (file, body, _, _) in broken {
        std::fs::write(dir.path().join(file), format!("{head}{body}")).expect("write");
    }
    // One taplo for every file: each start costs seconds.
    let files: Vec<&str> = broken.iter().map(|(file, ..)| *file).collect();
    let (ok, text) = taplo_check(dir.path(), &files);
    assert!(!ok, "broken files passed: {text}");
    assert!(!text.contains("anyOf"), "{text}");
    for (file, _, says, place) in broken {
        let at = text
            .find(place)
            .unwrap_or_else(|| panic!("{file}: nothing at {place}: {text}"));
        // taplo prints the message, then the place it points at.
        let before = &text[..at];
        let message = before.rsplit("error: ").next().unwrap_or_default();
        assert!(message.contains(says), "{file}: {message}\n---\n{text}");
    }
    // A control: the same head with a known field passes, so the failures
    // above are the typos, not the head.
    std::fs::write(
        dir.path().join("good.toml"),
        format!("{head}[[scenario.steps]]\nadvance_clock = {{ seconds = 5 }}\n"),
    )
    .expect("write");
    let (ok, text) = taplo_check(dir.path(), &["good.toml"]);
    assert!(ok, "{text}");
}

#[test]
fn the_schema_has_no_null_branches() {
    let schema = scenario::json_schema();
    assert!(!schema.contains("\"null\""), "{schema}");
    let json: serde_json::Value = serde_json::from_str(&schema).expect("json");
    for name in [
        "Scenario",
        "Step",
        "SendRequests",
        "SendExpectations",
        "FinalExpectations",
    ] {
        assert_eq!(
            json["definitions"][name]["additionalProperties"],
            serde_json::Value::Bool(false),
            "{name} denies unknown fields"
        );
    }
}

/// A native scenario counting in Redis (`cache`), one `send` expecting these `metrics`.
fn native_metrics(metrics: &str) -> String {
    format!(
        "[[scenario]]\nname = \"a\"\n{NATIVE_REDIS}[[scenario.steps]]\nsend = {{ requests = 1 }}\nexpect = {{ metrics = {{ {metrics} }} }}\n"
    )
}

#[test]
fn a_metric_selector_is_refused_at_its_place_unless_the_deployable_writes_it() {
    for (metrics, at, wanted) in [
        (
            "'decisions{outcome=\"refuse\"}' = 1",
            "16:24",
            "`outcome` of `decisions` is never `refuse`: it is one of passed, refused",
        ),
        (
            "'rate_limits_decisions_total' = 1",
            "16:24",
            "write `decisions`, without the `rate_limits_` prefix",
        ),
        (
            "'decisions{limit=address}' = 1",
            "16:24",
            "is not a selector: the value of `limit` is not in double quotes",
        ),
        ("'data_points' = 1", "16:24", "`data_points` are a Worker's"),
        (
            "'memory_bytes' = 0, 'decisions{limit=\"/api/nowhere\"}' = 1",
            "16:44",
            "the deployable never writes it (its limits are caller, address)",
        ),
        (
            "'counted_in_memory{store=\"other\"}' = 1",
            "16:24",
            "never writes it (its store is `cache`)",
        ),
        (
            "'decisions' = { at_least = 3, at_most = 1 }",
            "16:38",
            "`at_least = 3` is above `at_most = 1`",
        ),
        (
            "'decisions' = 1.5",
            "16:38",
            "a whole number, or { at_least = N }",
        ),
    ] {
        let error = malformed(&native_metrics(metrics));
        assert!(
            error.starts_with(&format!("scenarios/bad.toml:{at}: ")),
            "{metrics}: {error}"
        );
        assert!(error.contains(wanted), "{metrics}: {error}");
    }
    loads(&native_metrics(
        "'decisions{limit=\"address\",outcome=\"refused\"}' = 1, 'counted_in_memory{store=\"cache\",reason=\"cooling_off\"}' = { at_least = 1 }, 'store_state{state=\"asked\"}' = -3",
    ));
    let at_the_end = malformed(&format!(
        "[[scenario]]\nname = \"a\"\n{NATIVE_REDIS}[[scenario.steps]]\nsend = {{ requests = 1 }}\n\
         [scenario.expect]\nmetrics = {{ 'decisions{{deployable=\"edge\"}}' = 1 }}\n"
    ));
    assert!(
        at_the_end.starts_with("scenarios/bad.toml:17:13: "),
        "{at_the_end}"
    );
    assert!(at_the_end.contains("(it is `api`)"), "{at_the_end}");
}

#[test]
fn a_worker_s_only_metric_is_its_data_points_and_only_with_a_dataset() {
    let workers = |fields: &str, expect: &str| {
        format!(
            "[[scenario]]\nname = \"a\"\napplication_inline = '''{WORKERS_API}'''\n{fields}[[scenario.steps]]\nsend = {{ requests = 1 }}\n{expect}"
        )
    };
    for (text, at, wanted) in [
        (
            workers("", "expect = { metrics = { 'decisions' = 1 } }\n"),
            "18:24",
            "`decisions` is a native gate's metric; `edge` is a Workers deployable, whose only metric is `data_points`",
        ),
        (
            workers("", "expect = { metrics = { 'data_points' = 1 } }\n"),
            "18:24",
            "the application names no dataset for `edge`'s data points: add `data_points = \"DATASET\"` to its `[rate_limits]`",
        ),
        (
            workers("data_points_binding = \"missing\"\n", ""),
            "16:23",
            "`data_points_binding` is the dataset's binding, and the application names no dataset",
        ),
        (
            workers("", "[scenario.expect]\nmetrics_series = { at_most = 3 }\n"),
            "19:18",
            "`metrics_series` counts a Worker's data points, and the application names no dataset",
        ),
    ] {
        let error = malformed(&text);
        assert!(
            error.starts_with(&format!("scenarios/bad.toml:{at}: ")),
            "{text}\n{error}"
        );
        assert!(error.contains(wanted), "{error}");
    }
    let native = malformed(&format!(
        "[[scenario]]\nname = \"a\"\n{NATIVE_REDIS}data_points_binding = \"throwing\"\n[[scenario.steps]]\nsend = {{ requests = 1 }}\n"
    ));
    assert!(native.starts_with("scenarios/bad.toml:14:23: "), "{native}");
    assert!(native.contains("`api` is native"), "{native}");
}

#[test]
fn a_dataset_s_binding_and_warning_agree() {
    let app = WORKERS_API.replace(
        "store = \"limits\"\n",
        "store = \"limits\"\ndata_points = \"rate_limits\"\n",
    );
    let workers = |fields: &str, expect: &str| {
        format!(
            "[[scenario]]\nname = \"a\"\napplication_inline = '''{app}'''\n{fields}[[scenario.steps]]\nsend = {{ requests = 1 }}\n[scenario.expect]\n{expect}"
        )
    };
    loads(&workers(
        "data_points_binding = \"throwing\"\n",
        "data_points_warning = { reason = \"failed\" }\nmetrics = { 'data_points{limit=\"address\",reason=\"cooling_off\"}' = 0 }\nmetrics_series = { at_most = 4 }\n",
    ));
    for (text, at, wanted) in [
        (
            workers("", "data_points_warning = { reason = \"missing\" }\n"),
            "20:23",
            "the dataset binding is `recording`, which never fails",
        ),
        (
            workers(
                "data_points_binding = \"throwing\"\n",
                "data_points_warning = { reason = \"missing\" }\n",
            ),
            "21:23",
            "the dataset binding is `throwing`, so its line's reason is `failed`",
        ),
        (
            workers(
                "",
                "metrics = { 'data_points{limit=\"/api/nowhere\"}' = 0 }\n",
            ),
            "20:13",
            "never writes it (its limits are caller, address)",
        ),
        (
            workers("", "metrics = { 'data_points{reason=\"no_store\"}' = 0 }\n"),
            "20:13",
            "`reason` of `data_points` is never `no_store`",
        ),
    ] {
        let error = malformed(&text);
        assert!(
            error.starts_with(&format!("scenarios/bad.toml:{at}: ")),
            "{text}\n{error}"
        );
        assert!(error.contains(wanted), "{error}");
    }
    // With no dataset named, the warning names what is missing.
    let error = malformed(&format!(
        "[[scenario]]\nname = \"a\"\napplication_inline = '''{WORKERS_API}'''\n[[scenario.steps]]\nsend = {{ requests = 1 }}\n[scenario.expect]\ndata_points_warning = {{ reason = \"missing\" }}\n"
    ));
    assert!(
        error.starts_with("scenarios/bad.toml:")
            && error.contains("`data_points_warning` expects the dataset's log line"),
        "{error}"
    );
}

#[test]
fn a_send_s_method_is_an_http_method_the_harness_can_send_refused_at_its_place() {
    let step = |send: &str| {
        format!(
            "[[scenario]]\nname = \"a\"\napplication_inline = '''{WORKERS_API}'''\n[[scenario.steps]]\nsend = {send}\n"
        )
    };
    let line = 1 + step("{}")
        .lines()
        .position(|l| l.starts_with("send = "))
        .expect("the send line");
    let col = |send: &str| 1 + "send = ".len() + send.find("method").expect("method");
    for (send, says) in [
        ("{ requests = 1, method = \"PO ST\" }", "no HTTP method"),
        ("{ requests = 1, method = \"\" }", "no HTTP method"),
        ("{ requests = 1, method = \"G(E)T\" }", "no HTTP method"),
        ("{ requests = 1, method = \"CONNECT\" }", "a tunnel"),
    ] {
        let error = malformed(&step(send));
        assert!(
            error.starts_with(&format!(
                "scenarios/bad.toml:{line}:{}: ",
                col(send) + "method = ".len()
            )),
            "{send}: {error}"
        );
        assert!(error.contains(says), "{send}: {error}");
    }
    // A method that is a token loads, standard or not.
    for method in ["POST", "HEAD", "DELETE", "PROPFIND"] {
        let text = step(&format!("{{ requests = 1, method = \"{method}\" }}"));
        let loaded = scenario::load_text(&text, Path::new("."), Path::new("ok.toml"))
            .unwrap_or_else(|e| panic!("{method}: {e}"));
        let send = match loaded[0].scenario.scenario.get_ref().steps[0]
            .get_ref()
            .action()
        {
            Ok(scenario::Action::Send { send, .. }) => send.http_method(),
            other => panic!("{other:?}"),
        };
        assert_eq!(send.map(|m| m.to_string()), Ok(method.to_owned()));
    }
}
