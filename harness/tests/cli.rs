//! `harness check` and `harness wrangler`: what QA and the nightly job run.
//! They print nothing but the result.

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

const VALID: &str = r#"
[connections.limits]
driver = "cloudflare_rate_limits"
namespace = 1001

[rate_limits]
store = "limits"

[[deployables]]
name = "edge"
target = "workers"
serves_api = true
"#;

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
