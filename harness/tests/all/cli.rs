//! `harness validate` (and its `--plan`) and `harness wrangler`: what QA, the
//! nightly job and a Worker's build step run.
//! They print nothing but the result.

use crate::common;

use std::path::Path;
use std::process::Command;

use runtime::config::Application;
use runtime::unstable_for_tools::counter::{
    DEFAULT_MAX_KEYS, WORKERS_MEMORY_BUDGET, WindowCounter,
};
use runtime::unstable_for_tools::limits::Limit;

fn harness(args: &[&str], app: &str) -> (Option<i32>, String, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("app.toml");
    std::fs::write(&path, app).expect("write");
    let output = Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(args)
        .arg(&path)
        .current_dir(dir.path())
        .output()
        .expect("harness runs");
    let text =
        |b: &[u8]| String::from_utf8_lossy(b).replace(&path.display().to_string(), "app.toml");
    (
        output.status.code(),
        text(&output.stdout),
        text(&output.stderr),
    )
}

const VALID: &str = common::WORKERS_API;

/// Three routes with limits of their own, two of them the same.
const ROUTES: &str = "
[[routes]]
path = \"/login\"
rate_limit = { requests = 1, window = 10 }

[[routes]]
path = \"/api/search\"
rate_limit = { requests = 20, window = 60 }

[[routes]]
path = \"/api/report\"
rate_limit = { requests = 20, window = 60 }
";

/// The memory line `validate` prints for the Workers deployable `edge` of
/// an application whose routes have `routes` limits: the bound of a real
/// counter built within a Worker's budget.
fn memory_line(routes: &[Limit]) -> String {
    let bound =
        WindowCounter::with_budget(DEFAULT_MAX_KEYS, routes, WORKERS_MEMORY_BUDGET, 0).bound();
    format!(
        "memory of `edge` (per isolate counting in memory): at most {bound}; each route's \
         sketch for {} keys a window\n",
        bound.route_keys
    )
}

#[test]
fn check_says_ok_and_the_memory_bound_for_a_valid_description() {
    // The bindings by the names scenarios and Wrangler files give them.
    let bindings = "bindings of `edge`: LIMITS_120_PER_60S (120 per 60 s), LIMITS_600_PER_60S (600 per 60 s)\n";
    assert_eq!(
        harness(&["validate"], VALID),
        (
            Some(0),
            format!("ok\n{}{bindings}", memory_line(&[])),
            String::new()
        )
    );
    let (code, stdout, _) = harness(&["validate"], &format!("{VALID}{ROUTES}"));
    assert_eq!(code, Some(0));
    let limits = [Limit::new(1, 10), Limit::new(20, 60), Limit::new(20, 60)];
    assert_eq!(
        stdout,
        format!(
            "ok\n{}bindings of `edge`: LIMITS_1_PER_10S (1 per 10 s), LIMITS_20_PER_60S (20 per 60 s), LIMITS_120_PER_60S (120 per 60 s), LIMITS_600_PER_60S (600 per 60 s)\n",
            memory_line(&limits)
        )
    );
    // A sketch for each built-in limit and each distinct route limit: two
    // routes of one limit share one sized for both (and the line ends with
    // the keys a route's sketch gets).
    assert_eq!(stdout.matches(" keys ").count(), 2 + 2 + 1, "{stdout}");
    assert!(
        stdout.contains(" + 20 per 60 s for 600000 keys "),
        "{stdout}"
    );
}

#[test]
fn check_prints_each_deployables_bound_within_its_budget_and_refuses_what_cannot_fit() {
    // 300 routes on Workers: 160 MiB unshared, within 32 MiB shared; a
    // native deployable beside it with a budget of its own.
    let routes: String = (0..300)
        .map(|i| {
            format!(
                "[[routes]]\npath = \"/r/{i}\"\nrate_limit = {{ requests = {}, window = 60 }}\n",
                1 + i
            )
        })
        .collect();
    let native = "[[deployables]]\nname = \"api\"\ntarget = \"native\"\nserves_api = true\n\
                  memory_budget_mib = 64\n";
    let (code, workers, _) = harness(&["validate"], &format!("{VALID}{routes}"));
    assert_eq!(code, Some(0), "{workers}");
    let (code, native_out, _) = harness(&["validate"], &format!("{native}{routes}"));
    assert_eq!(code, Some(0), "{native_out}");
    let lines: Vec<&str> = workers.lines().chain(native_out.lines()).collect();
    // Workers: ok, its memory, its bindings; native: ok, its memory.
    assert_eq!(lines.len(), 5, "{workers}{native_out}");
    assert!(lines[2].starts_with("bindings of `edge`: "), "{workers}");
    assert!(
        lines[1].starts_with("memory of `edge` (per isolate counting in memory): at most "),
        "{workers}"
    );
    assert!(lines[1].contains(" of a 33554432 B budget = "), "{workers}");
    assert!(lines[1].contains(" more sketches "), "{workers}");
    assert!(
        lines[4].starts_with("memory of `api` (per process counting in memory): at most "),
        "{native_out}"
    );
    assert!(
        lines[4].contains(" of a 67108864 B budget = "),
        "{native_out}"
    );
    for line in [lines[1], lines[4]] {
        let total: usize = line
            .split(": at most ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse().ok())
            .expect("a total");
        let budget: usize = line
            .split(" of a ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse().ok())
            .expect("a budget");
        assert!(total <= budget, "{line}");
    }
    // A budget too small for its routes is refused at its place.
    let small = native.replace("= 64", "= 5");
    let (code, stdout, _) = harness(&["validate"], &format!("{small}{routes}"));
    assert_eq!(code, Some(1));
    assert!(
        stdout.starts_with("rate_limits.memory_over_budget: app.toml:5:21: deployable `api` "),
        "{stdout}"
    );
}

#[test]
fn check_lists_every_diagnostic_with_its_code_and_place() {
    let invalid = VALID
        .replace("namespace = 1001", "namespace = 0")
        .replace("serves_api = true", "serves_api = true\ndeclines = [\"x\"]");
    let (code, stdout, stderr) = harness(&["validate"], &invalid);
    assert_eq!(code, Some(1));
    assert_eq!(stderr, "");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    assert!(
        lines[0].starts_with("rate_limits.namespace_invalid: app.toml:4:13: "),
        "{stdout}"
    );
    assert!(
        lines[1].starts_with("deployable.decline_unknown: app.toml:13:13: "),
        "{stdout}"
    );
}

#[test]
fn check_reports_malformed_toml_with_its_place() {
    let (code, stdout, _) = harness(&["validate"], "[rate_limits\n");
    assert_eq!(code, Some(1));
    assert!(
        stdout.starts_with("application.invalid_toml: app.toml:1:"),
        "{stdout}"
    );
}

/// `harness validate APP --plan ...` in `dir`, where the description is `app.toml`.
fn check_plans(dir: &Path, plans: &[&str]) -> (Option<i32>, String, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_harness"));
    command.arg("validate").arg("app.toml").current_dir(dir);
    for plan in plans {
        command.args(["--plan", plan]);
    }
    let output = command.output().expect("harness runs");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (
        output.status.code(),
        text(&output.stdout),
        text(&output.stderr),
    )
}

#[test]
fn check_writes_each_deployables_plan_as_its_worker_reads_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let app_toml = format!(
        "{VALID}\n[[deployables]]\nname = \"site\"\ntarget = \"workers\"\nserves_api = false\n\
         [[routes]]\npath = \"/api/search\"\nrate_limit = {{ requests = 20, window = 10 }}\n"
    );
    std::fs::write(dir.path().join("app.toml"), &app_toml).expect("write");
    let app = runtime::Application::from_toml(&app_toml).expect("valid");
    let plans = ["edge=edge.plan", "site=plans/site.plan"];
    std::fs::create_dir(dir.path().join("plans")).expect("mkdir");

    let ok = format!(
        "ok\n{}bindings of `edge`: LIMITS_20_PER_10S (20 per 10 s), LIMITS_120_PER_60S (120 per 60 s), LIMITS_600_PER_60S (600 per 60 s)\n",
        memory_line(&[Limit::new(20, 10)])
    );
    let first = check_plans(dir.path(), &plans);
    assert_eq!(
        first,
        (
            Some(0),
            format!(
                "{ok}edge.plan: written (the plan of deployable `edge`)\n\
                 plans/site.plan: written (the plan of deployable `site`)\n"
            ),
            String::new()
        )
    );
    for (deployable, file) in [("edge", "edge.plan"), ("site", "plans/site.plan")] {
        let text = std::fs::read_to_string(dir.path().join(file)).expect("written");
        assert_eq!(
            runtime::GatePlan::from_text(&text),
            Ok(runtime::GatePlan::new(&app, deployable).expect("planned")),
            "{text}"
        );
    }
    let again = check_plans(dir.path(), &plans);
    assert_eq!(
        again.1,
        format!("{ok}edge.plan: unchanged\nplans/site.plan: unchanged\n")
    );
}

#[test]
fn check_writes_no_plan_for_an_invalid_description_nor_a_deployable_without_one() {
    let dir = tempfile::tempdir().expect("temp dir");
    let invalid = VALID.replace("namespace = 1001", "namespace = 0");
    std::fs::write(dir.path().join("app.toml"), invalid).expect("write");
    let (code, stdout, _) = check_plans(dir.path(), &["edge=edge.plan"]);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout.starts_with("rate_limits.namespace_invalid: "),
        "{stdout}"
    );

    std::fs::write(dir.path().join("app.toml"), VALID).expect("write");
    let (code, stdout, stderr) = check_plans(dir.path(), &["edge=edge.plan", "nope=nope.plan"]);
    assert_eq!(
        (code, stdout.as_str(), stderr.as_str()),
        (
            Some(2),
            "",
            "harness: the application has no deployable named `nope`\n"
        )
    );

    let redis = "name = \"shop\"\n[connections.cache]\ndriver = \"redis\"\nurl = \"redis://127.0.0.1:1\"\n\
                 [rate_limits]\nstore = \"cache\"\n\
                 [[deployables]]\nname = \"api\"\ntarget = \"native\"\nserves_api = true\n";
    std::fs::write(dir.path().join("app.toml"), redis).expect("write");
    let (code, _, stderr) = check_plans(dir.path(), &["api=api.plan"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("counts in Redis"), "{stderr}");
    let (code, _, stderr) = check_plans(dir.path(), &["api"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("`api` is not DEPLOYABLE=FILE"), "{stderr}");

    let written: Vec<_> = std::fs::read_dir(dir.path())
        .expect("dir")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(written, ["app.toml"], "no plan was written");
}

#[test]
fn wrangler_prints_the_entries_in_both_forms() {
    let (code, jsonc, stderr) = harness(&["wrangler"], VALID);
    assert_eq!((code, stderr.as_str()), (Some(0), ""));
    let json: serde_json::Value = serde_json::from_str(&jsonc).expect("json");
    assert_eq!(json["ratelimits"][0]["name"], "LIMITS_120_PER_60S");
    assert_eq!(json["ratelimits"][1]["namespace_id"], "1002");

    let (code, toml_text, _) = harness(&["wrangler", "--format", "toml"], VALID);
    assert_eq!(code, Some(0));
    assert!(toml_text.starts_with("[[ratelimits]]\n"), "{toml_text}");
    assert!(
        toml_text.contains("[ratelimits.simple]\nlimit = 600\nperiod = 60\n"),
        "{toml_text}"
    );
}

#[test]
fn wrangler_refuses_an_invalid_description_with_its_diagnostics() {
    let (code, stdout, _) = harness(
        &["wrangler"],
        &VALID.replace("store = \"limits\"", "store = \"nope\""),
    );
    assert_eq!(code, Some(1));
    assert!(
        stdout.starts_with("rate_limits.store_invalid: app.toml:7:9: "),
        "{stdout}"
    );
    assert!(
        !stdout.contains("ratelimits"),
        "no entries for an invalid description"
    );
}

#[test]
fn a_missing_file_is_an_error_not_a_panic() {
    let output = Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(["validate", "/nonexistent/app.toml"])
        .output()
        .expect("harness runs");
    assert_eq!(output.status.code(), Some(2));
    // The error names the file and why, on stderr alone; no verdict is printed.
    assert_eq!(
        String::from_utf8_lossy(&output.stderr),
        "/nonexistent/app.toml: cannot read: No such file or directory (os error 2)\n"
    );
    assert_eq!(String::from_utf8_lossy(&output.stdout), "");
}

/// A stand-in workerd that only knows its version, and a scenarios
/// directory that needs no workerd to run (diagnostics only).
fn fake_workerd_and_scenarios(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let fake = dir.join("workerd");
    std::fs::write(&fake, "#!/bin/sh\necho 'workerd 2020-01-01'\n").expect("write");
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let scenarios = dir.join("scenarios");
    std::fs::create_dir(&scenarios).expect("dir");
    std::fs::write(
        scenarios.join("d.toml"),
        "[[scenario]]\nname = \"no store\"\nexpect_diagnostics = [\"rate_limits.store_required\"]\n\
         application_inline = '''\n[[deployables]]\nname = \"edge\"\ntarget = \"workers\"\nserves_api = true\n'''\n",
    )
    .expect("write");
    (fake, scenarios)
}

#[test]
fn a_workerd_other_than_the_pin_is_refused_unless_it_is_an_edge_run() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (fake, scenarios) = fake_workerd_and_scenarios(dir.path());
    let run = |edge: bool| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_harness"));
        command
            .args(["run", "--workerd"])
            .arg(&fake)
            .arg("--scenarios")
            .arg(&scenarios);
        if edge {
            command.arg("--edge");
        }
        command
            .env_remove("HARNESS_EDGE")
            .env_remove("WORKERD")
            .env_remove("WORKERD_VERSION");
        command.output().expect("harness runs")
    };
    let refused = run(false);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("workerd 2020-01-01") && stderr.contains("not the pinned 2026-11-17"),
        "{stderr}"
    );
    assert!(stderr.contains("--edge"), "says how to allow it: {stderr}");

    let edge = run(true);
    let stdout = String::from_utf8_lossy(&edge.stdout);
    assert_eq!(
        edge.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&edge.stderr)
    );
    // The default run keeps the harness's own counting core.
    assert!(
        stdout.contains("(workerd 2020-01-01, counting core harness, Worker wasm-bindgen;"),
        "{stdout}"
    );
    // Trials are named by the scenarios directory as given, not `scenarios/...`.
    let stderr = String::from_utf8_lossy(&edge.stderr);
    let named = format!("pass {}::no store", scenarios.join("d.toml").display());
    assert!(stderr.contains(&named), "no `{named}` in: {stderr}");
}

/// Runs `harness wrangler APP --write FILE` in `dir`, with `app` as the description.
fn write_into(dir: &Path, app: &str, file: &str) -> (Option<i32>, String, String) {
    common::wrangler_write(dir, app, file, &[])
}

/// The application with a route of its own: three bindings, numbered from 1001.
fn with_route() -> String {
    format!(
        "{VALID}\n[[routes]]\npath = \"/api/search\"\nrate_limit = {{ requests = 20, window = 10 }}\n"
    )
}

const JSONC_BEFORE: &str = r#"{
  // The Worker's name
  "name": "edge",
  "main": "src/index.js", // entry
  "ratelimits": [
    // someone else's limiter
    { "name": "MY_LIMITER", "namespace_id": "5", "simple": { "limit": 1, "period": 10 } },
    {
      "name": "LIMITS_120_PER_60S", // ours
      "namespace_id": "999",
      "simple": { "limit": 120, "period": 60 }
    } // after ours
  ],
  "vars": { "A": 1 } /* the end */
}
"#;

const JSONC_AFTER: &str = r#"{
  // The Worker's name
  "name": "edge",
  "main": "src/index.js", // entry
  "ratelimits": [
    // someone else's limiter
    { "name": "MY_LIMITER", "namespace_id": "5", "simple": { "limit": 1, "period": 10 } },
    {
      "name": "LIMITS_20_PER_10S", // ours
      "namespace_id": "1001",
      "simple": { "limit": 20, "period": 10 }
    }, // after ours
    {
      "name": "LIMITS_120_PER_60S",
      "namespace_id": "1002",
      "simple": {
        "limit": 120,
        "period": 60
      }
    },
    {
      "name": "LIMITS_600_PER_60S",
      "namespace_id": "1003",
      "simple": {
        "limit": 600,
        "period": 60
      }
    }
  ],
  "vars": {
    "A": 1,
    "PLAN": "rate-limits-plan 2\ndeployable edge\ncounting binding limits 1001\nbackend LIMITS_20_PER_10S\nbackend LIMITS_120_PER_60S\nbackend LIMITS_600_PER_60S\nsubjects 2 1\nroute 0 20 10 /api/search\n"
  } /* the end */
}
"#;

#[test]
fn wrangler_write_replaces_the_applications_entries_in_a_jsonc_file_and_keeps_the_rest() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("wrangler.jsonc"), JSONC_BEFORE).expect("write");
    let (code, stdout, stderr) = write_into(dir.path(), &with_route(), "wrangler.jsonc");
    assert_eq!((code, stderr.as_str()), (Some(0), ""), "{stdout}");
    assert_eq!(
        stdout,
        "wrangler.jsonc: updated (3 ratelimits entries of connection `limits`, the plan of \
         deployable `edge` as vars.PLAN)\n"
    );
    let written = std::fs::read_to_string(dir.path().join("wrangler.jsonc")).expect("read");
    assert_eq!(written, JSONC_AFTER);

    let (code, stdout, _) = write_into(dir.path(), &with_route(), "wrangler.jsonc");
    assert_eq!(code, Some(0));
    assert!(stdout.contains(": unchanged"), "{stdout}");
    let again = std::fs::read(dir.path().join("wrangler.jsonc")).expect("read");
    assert_eq!(again, written.as_bytes(), "a second run changes nothing");
}

const TOML_BEFORE: &str = r#"# top comment
name = "edge"
main = "src/index.js"

[vars]
A = "1" # a var

# someone else's
[[ratelimits]]
name = "MY_LIMITER"
namespace_id = "5"
simple = { limit = 1, period = 10 }

# ours, from an older plan
[[ratelimits]]
name = "LIMITS_120_PER_60S" # the built-in one
namespace_id = "999"
burst = 3
[ratelimits.simple]
limit = 120
period = 60 # a minute

[observability]
enabled = true
"#;

const TOML_AFTER: &str = r#"# top comment
name = "edge"
main = "src/index.js"

[vars]
A = "1" # a var
PLAN = """
rate-limits-plan 2
deployable edge
counting binding limits 1001
backend LIMITS_120_PER_60S
backend LIMITS_600_PER_60S
subjects 1 0
"""

# someone else's
[[ratelimits]]
name = "MY_LIMITER"
namespace_id = "5"
simple = { limit = 1, period = 10 }

# ours, from an older plan
[[ratelimits]]
name = "LIMITS_120_PER_60S" # the built-in one
namespace_id = "1001"
[ratelimits.simple]
limit = 120
period = 60 # a minute

[[ratelimits]]
name = "LIMITS_600_PER_60S"
namespace_id = "1002"
simple = { limit = 600, period = 60 }

[observability]
enabled = true
"#;

#[test]
fn wrangler_write_replaces_the_applications_entries_in_a_toml_file_and_keeps_the_rest() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("wrangler.toml"), TOML_BEFORE).expect("write");
    let (code, _, stderr) = write_into(dir.path(), VALID, "wrangler.toml");
    assert_eq!((code, stderr.as_str()), (Some(0), ""));
    let written = std::fs::read_to_string(dir.path().join("wrangler.toml")).expect("read");
    assert_eq!(written, TOML_AFTER);
    let (_, stdout, _) = write_into(dir.path(), VALID, "wrangler.toml");
    assert!(stdout.contains(": unchanged"), "{stdout}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("wrangler.toml")).expect("read"),
        written
    );
}

#[test]
fn wrangler_write_edits_an_inline_toml_list_and_a_plain_json_file_in_their_own_form() {
    let dir = tempfile::tempdir().expect("temp dir");
    let inline = "name = \"edge\"\nratelimits = [\n  { name = \"MY_LIMITER\", namespace_id = \"5\", simple = { limit = 1, period = 10 } },\n]\n";
    std::fs::write(dir.path().join("wrangler.toml"), inline).expect("write");
    assert_eq!(write_into(dir.path(), VALID, "wrangler.toml").0, Some(0));
    let written = std::fs::read_to_string(dir.path().join("wrangler.toml")).expect("read");
    assert!(
        written.starts_with("name = \"edge\"\nratelimits = [\n  { name = \"MY_LIMITER\""),
        "{written}"
    );
    let value: toml::Table = toml::from_str(&written).expect("toml");
    let names: Vec<&str> = value["ratelimits"]
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|e| e.get("name")?.as_str())
        .collect();
    assert_eq!(
        names,
        ["MY_LIMITER", "LIMITS_120_PER_60S", "LIMITS_600_PER_60S"]
    );
    let before = written;
    write_into(dir.path(), VALID, "wrangler.toml");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("wrangler.toml")).expect("read"),
        before
    );

    // A .json file stays plain JSON: no comments, no trailing commas.
    let json = "{\n  \"name\": \"edge\",\n  \"compatibility_date\": \"2026-11-17\"\n}\n";
    std::fs::write(dir.path().join("wrangler.json"), json).expect("write");
    assert_eq!(write_into(dir.path(), VALID, "wrangler.json").0, Some(0));
    let written = std::fs::read_to_string(dir.path().join("wrangler.json")).expect("read");
    let value: serde_json::Value = serde_json::from_str(&written).expect("strict JSON");
    assert_eq!(value["name"], "edge");
    assert_eq!(value["ratelimits"][1]["namespace_id"], "1002");
    assert!(
        written.starts_with(json.trim_end_matches("\n}\n")),
        "{written}"
    );
}

/// The plan `vars.PLAN` of a written Wrangler file holds, in either format.
fn plan_in(dir: &Path, file: &str) -> Option<String> {
    let file = common::read_wrangler_file(&dir.join(file));
    Some(file.get("vars")?.get("PLAN")?.as_str()?.to_owned())
}

/// A Wrangler file written by the build step gives a Worker its gate: the
/// plan `validate --plan` writes goes in as `vars.PLAN`, every other var
/// kept, and a second run changes nothing.
#[test]
fn wrangler_write_carries_the_workers_plan_as_its_plan_var() {
    let dir = tempfile::tempdir().expect("temp dir");
    let app = Application::from_toml(&with_route()).expect("valid");
    let expected = runtime::GatePlan::new(&app, "edge")
        .expect("edge")
        .to_text()
        .expect("a Workers plan");
    for file in ["wrangler.jsonc", "wrangler.json", "wrangler.toml"] {
        let (code, stdout, _) = common::wrangler_write(dir.path(), &with_route(), file, &[]);
        assert_eq!(code, Some(0), "{stdout}");
        assert_eq!(
            stdout,
            format!(
                "{file}: created (3 ratelimits entries of connection `limits`, the plan of \
                 deployable `edge` as vars.PLAN)\n"
            )
        );
        let plan = plan_in(dir.path(), file).expect("vars.PLAN");
        assert_eq!(plan, expected, "{file}");
        // The Worker's own reading of it.
        assert_eq!(
            runtime::GatePlan::from_text(&plan).ok(),
            runtime::GatePlan::new(&app, "edge").ok(),
            "{file}"
        );
        let (_, again, _) = common::wrangler_write(dir.path(), &with_route(), file, &[]);
        assert!(again.contains(": unchanged"), "{again}");
    }
    // Another var is kept; a changed plan replaces the old one.
    std::fs::write(
        dir.path().join("wrangler.toml"),
        "name = \"edge\"\n[vars]\nA = \"1\" # mine\nPLAN = \"rate-limits-plan 1\"\n",
    )
    .expect("write");
    assert_eq!(
        common::wrangler_write(dir.path(), VALID, "wrangler.toml", &[]).0,
        Some(0)
    );
    let written = std::fs::read_to_string(dir.path().join("wrangler.toml")).expect("read");
    assert!(written.contains("A = \"1\" # mine\n"), "{written}");
    let plan = plan_in(dir.path(), "wrangler.toml").expect("vars.PLAN");
    assert!(plan.starts_with("rate-limits-plan 2\n"), "{plan}");
}

/// With several Workers deployables the file is for one of them:
/// `--deployable` says which, and without it nothing is written.
#[test]
fn wrangler_write_needs_the_deployable_when_there_are_several_workers() {
    let dir = tempfile::tempdir().expect("temp dir");
    let two = format!(
        "{VALID}\n[[deployables]]\nname = \"site\"\ntarget = \"workers\"\nserves_api = false\n\
         [[deployables]]\nname = \"server\"\ntarget = \"native\"\nserves_api = false\n"
    );
    let (code, stdout, _) = common::wrangler_write(dir.path(), &two, "wrangler.jsonc", &[]);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout.contains("2 Workers deployables (edge, site)") && stdout.contains("--deployable"),
        "{stdout}"
    );
    assert!(!dir.path().join("wrangler.jsonc").exists());
    let (code, stdout, _) = common::wrangler_write(
        dir.path(),
        &two,
        "wrangler.jsonc",
        &["--deployable", "site"],
    );
    assert_eq!(code, Some(0), "{stdout}");
    let plan = plan_in(dir.path(), "wrangler.jsonc").expect("vars.PLAN");
    assert!(
        plan.contains("deployable site\ncounting no_api\n"),
        "{plan}"
    );
    for other in ["server", "nobody"] {
        let (code, stdout, _) =
            common::wrangler_write(dir.path(), &two, "wrangler.toml", &["--deployable", other]);
        assert_eq!(code, Some(1), "{stdout}");
        assert!(
            stdout.contains(&format!("no Workers deployable `{other}`")),
            "{stdout}"
        );
    }
    assert!(!dir.path().join("wrangler.toml").exists());
}

#[test]
fn wrangler_write_creates_the_file_when_absent() {
    let dir = tempfile::tempdir().expect("temp dir");
    for file in ["wrangler.jsonc", "wrangler.json", "wrangler.toml"] {
        let (code, stdout, _) = write_into(dir.path(), VALID, file);
        assert_eq!(code, Some(0), "{file}");
        assert!(stdout.starts_with(&format!("{file}: created")), "{stdout}");
        let written = std::fs::read_to_string(dir.path().join(file)).expect("created");
        assert!(written.contains("LIMITS_600_PER_60S"), "{written}");
        write_into(dir.path(), VALID, file);
        assert_eq!(
            std::fs::read_to_string(dir.path().join(file)).expect("read"),
            written,
            "{file}: a second run changes nothing"
        );
    }
}

#[test]
fn wrangler_write_writes_nothing_for_an_invalid_description_or_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let invalid = VALID.replace("namespace = 1001", "namespace = 0");
    let (code, stdout, _) = write_into(dir.path(), &invalid, "wrangler.jsonc");
    assert_eq!(code, Some(1));
    assert!(
        stdout.starts_with("rate_limits.namespace_invalid: "),
        "{stdout}"
    );
    assert!(
        !dir.path().join("wrangler.jsonc").exists(),
        "no file created"
    );

    std::fs::write(dir.path().join("wrangler.toml"), TOML_BEFORE).expect("write");
    assert_eq!(write_into(dir.path(), &invalid, "wrangler.toml").0, Some(1));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("wrangler.toml")).expect("read"),
        TOML_BEFORE,
        "an existing file is left as it was"
    );

    for (file, text, says) in [
        ("wrangler.yaml", None, "ends in .jsonc, .json or .toml"),
        ("broken.jsonc", Some("{ \"name\": "), "not valid JSON"),
        ("broken.toml", Some("name = "), "not valid TOML"),
        ("list.json", Some("[1, 2]"), "top level is not an object"),
        (
            "odd.toml",
            Some("ratelimits = 3\n"),
            "is not a list of entries",
        ),
        (
            "odd-vars.toml",
            Some("vars = 3\n"),
            "its `vars` is not a table",
        ),
        (
            "odd-vars.jsonc",
            Some("{ \"vars\": [\"PLAN\"] }"),
            "its `vars` is not a table",
        ),
    ] {
        if let Some(text) = text {
            std::fs::write(dir.path().join(file), text).expect("write");
        }
        let (code, _, stderr) = write_into(dir.path(), VALID, file);
        assert_eq!(code, Some(2), "{file}");
        assert!(
            stderr.contains(says) && stderr.contains(file),
            "{file}: {stderr}"
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join(file))
                .ok()
                .as_deref(),
            text,
            "{file} untouched"
        );
    }
}

/// The names in `dir`, sorted: a write leaves no temporary file behind.
fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn wrangler_write_keeps_the_files_permissions_and_writes_through_a_symlink() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("wrangler.jsonc");
    std::fs::write(&file, JSONC_BEFORE).expect("write");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).expect("chmod");
    assert_eq!(
        write_into(dir.path(), &with_route(), "wrangler.jsonc").0,
        Some(0)
    );
    assert_eq!(std::fs::read_to_string(&file).expect("read"), JSONC_AFTER);
    let mode = std::fs::metadata(&file).expect("stat").permissions().mode();
    assert_eq!(mode & 0o7777, 0o640, "permissions kept: {mode:o}");

    // A link to the file in another directory: the link stays a link, and
    // the file it points to gets the entries.
    let elsewhere = tempfile::tempdir().expect("temp dir");
    let target = elsewhere.path().join("wrangler.toml");
    std::fs::write(&target, TOML_BEFORE).expect("write");
    std::os::unix::fs::symlink(&target, dir.path().join("wrangler.toml")).expect("symlink");
    let (code, stdout, _) = write_into(dir.path(), VALID, "wrangler.toml");
    assert_eq!(code, Some(0), "{stdout}");
    let link = std::fs::symlink_metadata(dir.path().join("wrangler.toml")).expect("lstat");
    assert!(link.file_type().is_symlink(), "the link is still a link");
    assert_eq!(std::fs::read_to_string(&target).expect("read"), TOML_AFTER);
    assert_eq!(
        names_in(dir.path()),
        ["app.toml", "wrangler.jsonc", "wrangler.toml"]
    );
    assert_eq!(names_in(elsewhere.path()), ["wrangler.toml"]);
}

/// `harness wrangler APP --write wrangler.jsonc` in `dir`, allowed to write
/// at most `limit` bytes into any file (RLIMIT_FSIZE, as a full disk stops a
/// write midway); with `survive`, SIGXFSZ is ignored and the write fails
/// with EFBIG, else the signal kills the harness mid-write, as a crash would.
fn write_with_file_size_limit(dir: &Path, limit: usize, survive: bool) -> std::process::Output {
    let app = dir.join("app.toml");
    std::fs::write(&app, with_route()).expect("write");
    // `trap '' XFSZ` ignores the signal, and an ignored signal stays ignored across exec.
    let trap = if survive { "trap '' XFSZ; " } else { "" };
    Command::new("prlimit")
        .arg(format!("--fsize={limit}"))
        .args(["sh", "-c"])
        .arg(format!("{trap}exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_harness"))
        .arg("wrangler")
        .arg(&app)
        .arg("--write")
        .arg(dir.join("wrangler.jsonc"))
        .output()
        .expect("prlimit runs (util-linux)")
}

#[test]
fn a_write_that_fails_midway_leaves_the_file_as_it_was() {
    use std::os::unix::process::ExitStatusExt;
    // The new text is longer than the limit: the write stops at 64 bytes.
    assert!(JSONC_AFTER.len() > 64);
    for survive in [false, true] {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("wrangler.jsonc");
        std::fs::write(&file, JSONC_BEFORE).expect("write");
        let output = write_with_file_size_limit(dir.path(), 64, survive);
        let stderr = String::from_utf8_lossy(&output.stderr);
        if survive {
            assert_eq!(output.status.code(), Some(2), "{stderr}");
            assert!(
                stderr.contains("wrangler.jsonc") && stderr.contains("File too large"),
                "{stderr}"
            );
        } else {
            assert_eq!(
                output.status.signal(),
                Some(libc::SIGXFSZ),
                "killed mid-write: {:?} {stderr}",
                output.status
            );
        }
        assert_eq!(
            std::fs::read_to_string(&file).expect("read"),
            JSONC_BEFORE,
            "survive = {survive}: the file is whole"
        );
        let mut names = names_in(dir.path());
        if !survive {
            // Nothing cleans up after a crash: the partial text stays in a
            // hidden temporary file beside the whole one.
            let partial = names.remove(0);
            assert!(
                partial.starts_with(".wrangler.jsonc.") && partial.ends_with(".tmp"),
                "{partial}"
            );
        }
        assert_eq!(
            names,
            ["app.toml", "wrangler.jsonc"],
            "survive = {survive}: no other file"
        );
    }
    // The same limit with room for the new text: the write goes through.
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("wrangler.jsonc"), JSONC_BEFORE).expect("write");
    let output = write_with_file_size_limit(dir.path(), 1 << 20, true);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("wrangler.jsonc")).expect("read"),
        JSONC_AFTER
    );
}

/// The README's main command is `cargo run -p harness -- run`: with a second
/// binary in the package (the native fixture), cargo needs `default-run` to
/// know which one that is, or the command fails before the harness starts.
#[test]
fn cargo_run_p_harness_runs_the_harness() {
    let manifest_path = harness::world::paths::repo_root().join("harness/Cargo.toml");
    let text = std::fs::read_to_string(&manifest_path).expect("harness/Cargo.toml");
    let manifest: toml::Table = toml::from_str(&text).expect("a TOML manifest");
    let binaries = manifest
        .get("bin")
        .and_then(|b| b.as_array())
        .map_or(0, Vec::len);
    let default_run = manifest["package"]
        .get("default-run")
        .and_then(|d| d.as_str());
    assert!(
        binaries <= 1 || default_run == Some("harness"),
        "{binaries} binaries and default-run = {default_run:?}"
    );
}

/// The data points' dataset entry in each of a Wrangler file's forms: added
/// beside the user's own datasets, its dataset changed in place (a `remote`
/// of the user's kept), left alone when it already says it, and a
/// `analytics_engine_datasets` that is no list refused.
#[test]
fn the_data_points_dataset_entry_is_added_changed_in_place_or_left_alone() {
    use harness::commands::wrangler_file::{EditError, FileFormat, update_dataset};
    use runtime::bindings::DatasetEntry;
    let entry = DatasetEntry {
        binding: "RATE_LIMIT_DATA_POINTS".to_owned(),
        dataset: "limits_v2".to_owned(),
    };
    let cases = [
        (
            FileFormat::Toml,
            "[[analytics_engine_datasets]]\nbinding = \"ORDERS\"\n",
            "[[analytics_engine_datasets]]\nbinding = \"ORDERS\"\n\n[[analytics_engine_datasets]]\nbinding = \"RATE_LIMIT_DATA_POINTS\"\ndataset = \"limits_v2\"\n",
        ),
        (
            FileFormat::Toml,
            "analytics_engine_datasets = [{ binding = \"RATE_LIMIT_DATA_POINTS\", dataset = \"limits\", remote = true }] # ours\n",
            "analytics_engine_datasets = [{ binding = \"RATE_LIMIT_DATA_POINTS\", dataset = \"limits_v2\", remote = true }] # ours\n",
        ),
        (
            FileFormat::Jsonc,
            "{\n  \"analytics_engine_datasets\": [\n    { \"binding\": \"RATE_LIMIT_DATA_POINTS\", \"dataset\": \"limits\", \"remote\": true } // ours\n  ]\n}\n",
            "{\n  \"analytics_engine_datasets\": [\n    { \"binding\": \"RATE_LIMIT_DATA_POINTS\", \"dataset\": \"limits_v2\", \"remote\": true } // ours\n  ]\n}\n",
        ),
    ];
    for (format, before, after) in cases {
        let written = update_dataset(Some(before), format, &entry)
            .expect("editable")
            .expect("changed");
        assert_eq!(written, after, "{format:?}");
        assert_eq!(
            update_dataset(Some(&written), format, &entry).expect("editable"),
            None,
            "{format:?}: a second run changes nothing"
        );
    }
    // The JSONC form's new entry sits beside the user's.
    let json = update_dataset(
        Some("{ \"analytics_engine_datasets\": [{ \"binding\": \"ORDERS\" }] }"),
        FileFormat::Json,
        &entry,
    )
    .expect("editable")
    .expect("changed");
    let value: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    assert_eq!(
        value["analytics_engine_datasets"],
        serde_json::json!([
            { "binding": "ORDERS" },
            { "binding": "RATE_LIMIT_DATA_POINTS", "dataset": "limits_v2" },
        ])
    );
    for (format, text) in [
        (FileFormat::Toml, "analytics_engine_datasets = \"x\"\n"),
        (FileFormat::Json, "{ \"analytics_engine_datasets\": 3 }"),
    ] {
        assert!(
            matches!(
                update_dataset(Some(text), format, &entry),
                Err(EditError::DatasetsNotAList)
            ),
            "{format:?}"
        );
    }
}
