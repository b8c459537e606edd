//! The generated Wrangler entries pass Wrangler's own config schema (the
//! `config-schema.json` shipped in the wrangler npm package of the same
//! release as the pinned workerd, installed in `tools/fixtures/wrangler`).

use crate::common;

use runtime::bindings::Bindings;
use runtime::config::Application;

/// Wrangler's schema, installing the package (without its install scripts) when missing.
fn schema() -> serde_json::Value {
    let path = common::wrangler_package().join("config-schema.json");
    let text = std::fs::read_to_string(&path).expect("config-schema.json");
    serde_json::from_str(&text).expect("the schema is JSON")
}

fn validator() -> jsonschema::Validator {
    jsonschema::validator_for(&schema()).expect("the schema compiles")
}

fn errors(validator: &jsonschema::Validator, instance: &serde_json::Value) -> Vec<String> {
    validator
        .iter_errors(instance)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

fn plan(routes: &str) -> Bindings {
    let source = format!(
        "[connections.limits]\ndriver = \"cloudflare_rate_limits\"\nnamespace = 1001\n\
         [rate_limits]\nstore = \"limits\"\n\
         [[deployables]]\nname = \"edge\"\ntarget = \"workers\"\nserves_api = true\n{routes}"
    );
    Bindings::for_application(&Application::from_toml(&source).expect("valid"))
}

fn wrangler_file(entries_json: serde_json::Value) -> serde_json::Value {
    // The smallest whole wrangler.jsonc these entries could sit in.
    let mut file = serde_json::json!({ "name": "edge", "main": "src/index.js", "compatibility_date": "2026-11-17" });
    file["ratelimits"] = entries_json["ratelimits"].clone();
    file
}

#[test]
fn jsonc_entries_pass_wranglers_schema() {
    let validator = validator();
    for routes in [
        "",
        "[[routes]]\npath = \"/api/search\"\nrate_limit = { requests = 20, window = 10 }\n",
    ] {
        let entries: serde_json::Value =
            serde_json::from_str(&plan(routes).wrangler_jsonc()).expect("json");
        assert!(
            entries["ratelimits"]
                .as_array()
                .is_some_and(|a| !a.is_empty())
        );
        let file = wrangler_file(entries);
        assert_eq!(errors(&validator, &file), Vec::<String>::new(), "{file}");
    }
}

#[test]
fn toml_entries_pass_wranglers_schema() {
    let validator = validator();
    let text = plan("[[routes]]\npath = \"/x\"\nrate_limit = { requests = 5, window = 60 }\n")
        .wrangler_toml();
    let value: toml::Value = toml::from_str(&text).expect("toml");
    let entries = serde_json::to_value(value).expect("as json");
    let file = wrangler_file(entries);
    assert_eq!(errors(&validator, &file), Vec::<String>::new(), "{file}");
}

#[test]
fn the_schema_really_checks_ratelimits() {
    // A control: entries Wrangler refuses must fail here, or the tests above prove nothing.
    let validator = validator();
    let bad = [
        serde_json::json!({ "name": "A", "namespace_id": 1001, "simple": { "limit": 1, "period": 60 } }),
        serde_json::json!({ "name": "A", "namespace_id": "1001", "simple": { "limit": 1, "period": 30 } }),
        serde_json::json!({ "name": "A", "namespace_id": "1001", "simple": { "limit": 1, "period": 60 }, "x": 1 }),
    ];
    for entry in bad {
        let file = wrangler_file(serde_json::json!({ "ratelimits": [entry] }));
        assert!(
            !errors(&validator, &file).is_empty(),
            "wrangler's schema should refuse {file}"
        );
    }
}

#[test]
fn files_written_by_wrangler_write_pass_wranglers_schema() {
    let validator = validator();
    let dir = tempfile::tempdir().expect("temp dir");
    let app = "[connections.limits]\ndriver = \"cloudflare_rate_limits\"\nnamespace = 1001\n\
         [rate_limits]\nstore = \"limits\"\n\
         [[deployables]]\nname = \"edge\"\ntarget = \"workers\"\nserves_api = true\n\
         [[routes]]\npath = \"/api/search\"\nrate_limit = { requests = 20, window = 10 }\n";
    let existing = [
        (
            "wrangler.jsonc",
            "{\n  // the Worker\n  \"name\": \"edge\",\n  \"main\": \"src/index.js\",\n  \"compatibility_date\": \"2026-11-17\",\n  \"ratelimits\": [\n    { \"name\": \"LIMITS_1_PER_10S\", \"namespace_id\": \"9\", \"simple\": { \"limit\": 1, \"period\": 10 }, \"old\": true }\n  ]\n}\n",
        ),
        (
            "wrangler.json",
            "{\n  \"name\": \"edge\",\n  \"main\": \"src/index.js\",\n  \"compatibility_date\": \"2026-11-17\"\n}\n",
        ),
        (
            "wrangler.toml",
            "# the Worker\nname = \"edge\"\nmain = \"src/index.js\"\ncompatibility_date = \"2026-11-17\"\n\n[[ratelimits]]\nname = \"LIMITS_1_PER_10S\"\nnamespace_id = \"9\"\nold = true\n[ratelimits.simple]\nlimit = 1\nperiod = 10\n",
        ),
    ];
    for (name, text) in existing {
        for created in [true, false] {
            let file_name = if created {
                format!("new-{name}")
            } else {
                name.to_owned()
            };
            let path = dir.path().join(&file_name);
            if !created {
                std::fs::write(&path, text).expect("write");
            }
            let (code, stdout, stderr) = common::wrangler_write(dir.path(), app, &file_name, &[]);
            assert_eq!(code, Some(0), "{}: {stdout}{stderr}", path.display());
            let file = common::read_wrangler_file(&path);
            assert_eq!(
                file["ratelimits"].as_array().map(Vec::len),
                Some(3),
                "{}: {file}",
                path.display()
            );
            assert_eq!(
                errors(&validator, &file),
                Vec::<String>::new(),
                "{}: {file}",
                path.display()
            );
        }
    }
}
