//! The workflows are valid GitHub Actions syntax (checked with
//! action-validator against the workflow schema): the nightly one runs the
//! script that `edge_compat.rs` exercises, and the pull-request one runs what
//! `.ci/run` runs (the README's two commands) plus fmt and clippy on the
//! declared MSRV and stable, so neither job can rot silently.

use std::path::{Path, PathBuf};
use std::process::Command;

fn lint_dir() -> PathBuf {
    harness::world::paths::repo_root().join("tools/fixtures/ci-lint")
}

fn validator() -> PathBuf {
    let bin = lint_dir().join("node_modules/.bin/action-validator");
    harness::world::npm::ci_unless(
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

fn pull_request_workflow() -> PathBuf {
    harness::world::paths::repo_root().join(".github/workflows/ci.yml")
}

#[test]
fn every_workflow_is_valid() {
    let dir = harness::world::paths::repo_root().join(".github/workflows");
    let mut checked = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("workflows dir") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "yml" || e == "yaml") {
            let (ok, text) = validate(&path);
            assert!(ok, "{}: {text}", path.display());
            checked.push(path);
        }
    }
    // Both jobs exist, so a deleted one cannot pass as "nothing to check".
    assert!(checked.contains(&workflow()), "{checked:?}");
    assert!(checked.contains(&pull_request_workflow()), "{checked:?}");
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
        "reports/edge-compat/drift.html",
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

/// The workspace's declared MSRV (`rust-version` under `[workspace.package]`).
fn declared_msrv() -> String {
    let manifest = std::fs::read_to_string(harness::world::paths::repo_root().join("Cargo.toml"))
        .expect("read Cargo.toml");
    let manifest: toml::Table = manifest.parse().expect("Cargo.toml is TOML");
    manifest["workspace"]["package"]["rust-version"]
        .as_str()
        .expect("rust-version")
        .to_owned()
}

#[test]
fn the_pull_request_workflow_runs_ci_fmt_and_clippy_on_the_msrv_and_stable() {
    let text = std::fs::read_to_string(pull_request_workflow()).expect("read ci.yml");
    let workflow: serde_json::Value = serde_yaml_ng::from_str(&text).expect("ci.yml is YAML");
    let on = &workflow["on"];
    assert!(on.get("pull_request").is_some(), "not run on pull requests");
    let jobs = workflow["jobs"].as_object().expect("jobs");
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    let job = jobs.values().next().expect("one job");
    let toolchains: Vec<&str> = job["strategy"]["matrix"]["toolchain"]
        .as_array()
        .expect("a toolchain matrix")
        .iter()
        .filter_map(|t| t.as_str())
        .collect();
    assert_eq!(toolchains, [declared_msrv().as_str(), "stable"]);
    let runs: Vec<&str> = job["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .filter_map(|step| step["run"].as_str())
        .collect();
    let position = |needle: &str| {
        runs.iter()
            .position(|run| run.contains(needle))
            .unwrap_or_else(|| panic!("no step runs `{needle}`: {runs:#?}"))
    };
    // .ci/run first (a clean checkout, as CI gets it), then the lints.
    let ci = position(".ci/run");
    assert!(ci < position("cargo fmt --all -- --check"));
    assert!(ci < position("cargo clippy --workspace --all-targets -- -D warnings"));
    position("cargo clippy -p harness-worker-wasm-bindgen --target wasm32-unknown-unknown");
}

#[test]
fn the_nightly_job_installs_redis_server_before_the_run() {
    let text = std::fs::read_to_string(workflow()).expect("read");
    let install = text
        .find("apt-get install -y -qq redis-server")
        .expect("the nightly job installs redis-server");
    let run = text
        .find("run: tools/edge-compat")
        .expect("runs tools/edge-compat");
    assert!(install < run, "redis-server is installed after the run");
}

/// The workflow's jobs, as YAML.
fn jobs() -> serde_json::Value {
    let text = std::fs::read_to_string(workflow()).expect("read");
    let workflow: serde_json::Value = serde_yaml_ng::from_str(&text).expect("YAML");
    workflow["jobs"].clone()
}

fn runs(job: &serde_json::Value) -> Vec<(String, String)> {
    job["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .map(|step| {
            (
                step["run"].as_str().unwrap_or_default().to_owned(),
                step["if"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

#[test]
fn the_cloudflare_job_runs_the_subcommand_with_the_secrets_or_says_it_skipped() {
    let jobs = jobs();
    let job = &jobs["cloudflare"];
    let steps = job["steps"].as_array().expect("steps");
    // First, before anything is checked out or built: the secrets' check,
    // one line when one is missing.
    let check = &steps[0];
    let script = check["run"].as_str().expect("a script");
    assert!(
        script.contains("echo \"skipped: no CLOUDFLARE_API_TOKEN\""),
        "{script}"
    );
    assert_eq!(
        check["env"]["CLOUDFLARE_API_TOKEN"],
        "${{ secrets.CLOUDFLARE_API_TOKEN }}"
    );
    assert_eq!(
        check["env"]["CLOUDFLARE_ACCOUNT_ID"],
        "${{ secrets.CLOUDFLARE_ACCOUNT_ID }}"
    );
    let id = check["id"].as_str().expect("an id");
    // Every other step waits for its answer; the run has the secrets.
    for step in &steps[1..] {
        let condition = step["if"].as_str().unwrap_or_default();
        assert!(
            condition.contains(&format!("steps.{id}.outputs.run == 'true'")),
            "a step runs without the secrets: {step}"
        );
    }
    let run = steps
        .iter()
        .find(|s| {
            s["run"]
                .as_str()
                .is_some_and(|r| r.contains("-- cloudflare "))
        })
        .expect("a step runs `harness cloudflare`");
    let command = run["run"].as_str().expect("run");
    for needed in ["--namespace-base", "--out reports/cloudflare"] {
        assert!(command.contains(needed), "{command}");
    }
    assert!(!command.contains("--dry-run"), "{command}");
    assert_eq!(
        run["env"]["CLOUDFLARE_API_TOKEN"],
        "${{ secrets.CLOUDFLARE_API_TOKEN }}"
    );
    let text = std::fs::read_to_string(workflow()).expect("read");
    for kept in [
        "reports/cloudflare/results.json",
        "reports/cloudflare/report.html",
    ] {
        assert!(text.contains(kept), "the workflow does not keep {kept}");
    }
}

#[test]
fn the_drift_report_gets_the_cloudflare_results_beside_the_workerd_columns() {
    let jobs = jobs();
    let edge = &jobs["edge-compat"];
    assert_eq!(edge["needs"], "cloudflare");
    assert_eq!(
        edge["if"], "${{ !cancelled() }}",
        "it runs whatever Cloudflare's job did"
    );
    let steps = edge["steps"].as_array().expect("steps");
    let download = steps
        .iter()
        .position(|s| {
            s["uses"]
                .as_str()
                .is_some_and(|u| u.starts_with("actions/download-artifact@"))
        })
        .expect("the Cloudflare results are downloaded");
    assert_eq!(steps[download]["with"]["name"], "cloudflare-report");
    assert_eq!(
        steps[download]["continue-on-error"], true,
        "absent when the job skipped"
    );
    let compare = runs(edge)
        .iter()
        .position(|(run, _)| run.starts_with("tools/edge-compat"))
        .expect("runs tools/edge-compat");
    assert!(download < compare);
    let (command, _) = &runs(edge)[compare];
    assert!(
        command.contains("--cloudflare reports/cloudflare/results.json"),
        "{command}"
    );
}
