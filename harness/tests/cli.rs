//! `harness check` and `harness wrangler`: what QA and the nightly job run.
//! They print nothing but the result.

mod common;

use std::path::Path;
use std::process::Command;

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

#[test]
fn check_says_ok_for_a_valid_description() {
    assert_eq!(
        harness(&["check"], VALID),
        (Some(0), "ok\n".into(), String::new())
    );
}

#[test]
fn check_lists_every_diagnostic_with_its_code_and_place() {
    let invalid = VALID
        .replace("namespace = 1001", "namespace = 0")
        .replace("serves_api = true", "serves_api = true\ndeclines = [\"x\"]");
    let (code, stdout, stderr) = harness(&["check"], &invalid);
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
    let (code, stdout, _) = harness(&["check"], "[rate_limits\n");
    assert_eq!(code, Some(1));
    assert!(
        stdout.starts_with("application.invalid_toml: app.toml:1:"),
        "{stdout}"
    );
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
        .args(["check", "/nonexistent/app.toml"])
        .output()
        .expect("harness runs");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("cannot read"));
    assert!(!Path::new("/nonexistent/app.toml").exists());
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
        stdout.contains("(workerd 2020-01-01, counting core harness;"),
        "{stdout}"
    );
    // Trials are named by the scenarios directory as given, not `scenarios/...`.
    let stderr = String::from_utf8_lossy(&edge.stderr);
    let named = format!("pass {}::no store", scenarios.join("d.toml").display());
    assert!(stderr.contains(&named), "no `{named}` in: {stderr}");
}
