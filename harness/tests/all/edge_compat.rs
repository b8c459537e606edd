//! `harness edge-compat` (what `tools/edge-compat` runs nightly), exercised
//! here against the pinned release on both sides: it installs that release
//! from npm into a temporary place, runs a small scenarios directory on both
//! and with Cloudflare's simulator as the counting core, writes the drift
//! report and JUnit XML, and its exit status follows the expected failures.

use crate::common;

use std::path::Path;
use std::process::Command;

const APP: &str = common::WORKERS_API;

/// Writes `dir/scenarios/`, whose trials are named `scenarios/edge.toml::NAME`.
fn scenarios(dir: &Path, expectations: &str) {
    let dir = &dir.join("scenarios");
    std::fs::create_dir_all(dir).expect("scenarios dir");
    let scenarios = format!(
        "[[scenario]]\nname = \"passes\"\napplication_inline = '''{APP}'''\n\
         [[scenario.steps]]\nsend = {{ requests = 3, address = \"192.0.2.50\" }}\nexpect = {{ statuses = \"3 x 200\" }}\n\n\
         [[scenario]]\nname = \"fails\"\napplication_inline = '''{APP}'''\n\
         [[scenario.steps]]\nsend = {{ requests = 2, address = \"192.0.2.51\" }}\nexpect = {{ statuses = \"2 x 429\" }}\n"
    );
    std::fs::write(dir.join("edge.toml"), scenarios).expect("write scenarios");
    std::fs::write(dir.join("expected-failures.toml"), expectations).expect("write expectations");
}

fn pinned_npm_version() -> String {
    harness::world::workerd::find::pinned_npm_version(&harness::world::paths::pinned_workerd_dir())
        .expect("the pin")
}

fn edge_compat(dir: &Path, out: &Path) -> (Option<i32>, String, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_harness"))
        .args([
            "edge-compat",
            "--version",
            &pinned_npm_version(),
            "--scenarios",
        ])
        .arg(dir.join("scenarios"))
        .arg("--out")
        .arg(out)
        .output()
        .expect("harness runs");
    let drift = std::fs::read_to_string(out.join("drift.md")).unwrap_or_default();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let junit = std::fs::read_to_string(out.join("junit.xml")).unwrap_or_default();
    (output.status.code(), drift, junit, stderr)
}

#[test]
fn expected_failures_keep_the_job_green_and_the_reports_are_written() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("out");
    scenarios(
        dir.path(),
        "[[expected_failure]]\nscenario = \"scenarios/edge.toml::fails\"\nworkerd = [\"*\"]\nreason = \"a test of the list itself\"\n",
    );
    let (code, drift, junit, stderr) = edge_compat(dir.path(), &out);
    assert_eq!(code, Some(0), "{drift}\n{stderr}");
    assert!(
        stderr.contains("installing @cloudflare/workerd-linux-64@"),
        "{stderr}"
    );
    assert!(drift.contains("| passed | 1 | 1 |"), "{drift}");
    assert!(drift.contains("| expected failures | 1 | 1 |"), "{drift}");
    assert!(drift.contains("**no regression**"), "{drift}");
    assert!(drift.contains("## Newly failing: 0"), "{drift}");
    // The reference ran too: its verdicts beside the emulation's.
    assert!(
        drift.contains("## The reference: Cloudflare's simulator beside the emulation"),
        "{drift}"
    );
    assert!(drift.contains("## Verdicts that differ: 0"), "{drift}");
    assert!(
        drift.contains("/edge.toml::passes | pass | pass |"),
        "{drift}"
    );
    assert!(
        drift.contains("/edge.toml::fails | xfail | xfail |"),
        "{drift}"
    );
    assert_eq!(junit.matches("<testsuite ").count(), 3, "{junit}");
    let page = std::fs::read_to_string(out.join("drift.html")).expect("drift.html is written");
    assert!(
        page.matches("class=\"scenario-row unchanged\"").count() == 2
            && page.contains("edge.toml::passes\"")
            && page.contains("edge.toml::fails\""),
        "{page}"
    );
}

#[test]
fn an_unexpected_pass_fails_the_job() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("out");
    scenarios(
        dir.path(),
        "[[expected_failure]]\nscenario = \"scenarios/edge.toml::passes\"\nworkerd = [\"*\"]\nreason = \"stale entry\"\n\n\
         [[expected_failure]]\nscenario = \"scenarios/edge.toml::fails\"\nworkerd = [\"*\"]\nreason = \"known\"\n",
    );
    let (code, drift, _, stderr) = edge_compat(dir.path(), &out);
    assert_eq!(code, Some(1), "{drift}\n{stderr}");
    assert!(drift.contains("| unexpected passes | 1 | 1 |"), "{drift}");
    assert!(
        drift.contains("scenarios/edge.toml::passes (listed because: stale entry)"),
        "{drift}"
    );
    assert!(drift.contains("**REGRESSED**"), "{drift}");
}
