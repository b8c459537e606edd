//! The nightly workflow is valid GitHub Actions syntax (checked with
//! action-validator against the workflow schema) and runs the script that
//! `edge_compat.rs` exercises, so the job cannot rot silently.

use std::path::{Path, PathBuf};
use std::process::Command;

fn lint_dir() -> PathBuf {
    harness::world::paths::repo_root().join("tools/fixtures/ci-lint")
}

fn validator() -> PathBuf {
    let bin = lint_dir().join("node_modules/.bin/action-validator");
    harness::world::workerd::find::npm_ci_unless(
        &lint_dir(),
        &[&bin],
        "action-validator is not installed",
        &[],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    bin
}

fn validate(file: &Path) -> (bool, String) {
    let output = Command::new(validator())
        .arg(file)
        .output()
        .expect("action-validator runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

fn workflow() -> PathBuf {
    harness::world::paths::repo_root().join(".github/workflows/edge-compat.yml")
}

#[test]
fn the_edge_compat_workflow_is_valid() {
    let (ok, text) = validate(&workflow());
    assert!(ok, "{text}");
}

#[test]
fn the_validator_refuses_a_broken_workflow() {
    // A control: without it a validator that accepts anything would pass the test above.
    let text = std::fs::read_to_string(workflow()).expect("read");
    let broken = text.replace("runs-on:", "runs-onn:");
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("broken.yml");
    std::fs::write(&path, broken).expect("write");
    let (ok, text) = validate(&path);
    assert!(!ok, "accepted a job without runs-on: {text}");
}

#[test]
fn the_workflow_runs_nightly_and_on_demand_and_keeps_its_reports() {
    let text = std::fs::read_to_string(workflow()).expect("read");
    for needed in [
        "schedule:",
        "workflow_dispatch:",
        "tools/edge-compat",
        "actions/cache@",
        "cache: npm",
        "actions/upload-artifact@",
        "reports/edge-compat/drift.md",
        "reports/edge-compat/junit.xml",
    ] {
        assert!(text.contains(needed), "the workflow lacks `{needed}`");
    }
    assert!(
        harness::world::paths::repo_root()
            .join("tools/edge-compat")
            .is_file()
    );
}
