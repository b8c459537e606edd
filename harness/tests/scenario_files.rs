//! The scenario format itself: its checked-in JSON Schema is current and
//! agrees with the parser, and malformed files fail with `file:line:col`.

use std::path::Path;

use harness::paths::scenarios_dir;
use harness::scenario::{self, load_file};
use harness::suite::{self, Trial};

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
        "scenarios/scenario.schema.json is stale: run `UPDATE_SCHEMA=1 cargo test -p harness --test scenario_files` and commit it"
    );
    let json: serde_json::Value = serde_json::from_str(&generated).expect("json");
    assert_eq!(json["$schema"], "http://json-schema.org/draft-07/schema#");
}

#[test]
fn every_scenario_file_references_the_schema_and_validates_against_it() {
    let schema: serde_json::Value = serde_json::from_str(&scenario::json_schema()).expect("json");
    let validator = jsonschema::validator_for(&schema).expect("the schema compiles");
    for (path, display) in scenario::scenario_files(&scenarios_dir()).expect("scenarios") {
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
    let trials = suite::discover(&scenarios).expect("discover").trials;
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

#[test]
fn a_step_doing_two_things_is_refused() {
    let error = malformed(
        "[[scenario]]\nname = \"a\"\napplication_inline = ''\n[[scenario.steps]]\nsleep_ms = 1\nrestart_isolate = 0\n",
    );
    assert!(error.starts_with("scenarios/bad.toml:4:"), "{error}");
    assert!(error.contains("exactly one of"), "{error}");
}

#[test]
fn not_toml_at_all_is_a_located_error() {
    let error = malformed("[[scenario]\n");
    assert!(error.starts_with("scenarios/bad.toml:1:"), "{error}");
}

#[test]
fn a_missing_application_file_is_named() {
    let error = malformed("application = \"apps/nope.toml\"\n[[scenario]]\nname = \"a\"\n");
    assert!(error.contains("apps/nope.toml"), "{error}");
    assert!(Path::new("scenarios/bad.toml").is_relative());
}
