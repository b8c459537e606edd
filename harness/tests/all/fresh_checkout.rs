//! What a fresh checkout meets: its first command (`cargo run -p harness --
//! run`) and the nightly job build only the harness binary, so the harness
//! must build `native-fixture` itself before any native scenario, and a
//! machine without `redis-server` that the harness cannot install it on
//! must get one line naming the command to run, not a failure a scenario.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use harness::world::cargo_build::CargoOutput;
use harness::world::paths::{repo_root, scenarios_dir};

/// A scenarios directory holding the corpus's native scenarios (their
/// applications beside them) and one Workers scenario.
fn native_corpus(dir: &Path) -> usize {
    let scenarios = dir.join("scenarios");
    std::fs::create_dir_all(scenarios.join("apps")).expect("mkdir");
    let mut files = 0;
    for entry in std::fs::read_dir(scenarios_dir()).expect("read scenarios") {
        let path = entry.expect("entry").path();
        let name = path
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        if name.starts_with("native-") && name.ends_with(".toml") {
            std::fs::copy(&path, scenarios.join(&name)).expect("copy scenario");
            files += 1;
        }
    }
    for entry in std::fs::read_dir(scenarios_dir().join("apps")).expect("read apps") {
        let path = entry.expect("entry").path();
        std::fs::copy(
            &path,
            scenarios.join("apps").join(path.file_name().expect("name")),
        )
        .expect("copy app");
    }
    std::fs::write(
        scenarios.join("workers.toml"),
        format!(
            "[[scenario]]\nname = \"a Workers scenario beside them\"\napplication_inline = '''{}'''\n\
             [[scenario.steps]]\nsend = {{ requests = 3, address = \"192.0.2.60\" }}\nexpect = {{ statuses = \"3 x 200\" }}\n",
            common::WORKERS_API
        ),
    )
    .expect("write workers scenario");
    files
}

/// A target directory of its own (`TARGET/fresh-checkout`) holding what
/// `cargo run -p harness` builds on a fresh clone: the harness binary and
/// everything it links, but never `native-fixture` (whatever an earlier run
/// of this test built of it is removed). It persists between runs so only
/// the first one compiles the dependencies.
fn target_without_the_fixture() -> CargoOutput {
    let here = CargoOutput::of_running_executable().expect("tests run from a target directory");
    let target_dir = here.target_dir.join("fresh-checkout");
    let status = Command::new(env!("CARGO"))
        .args([
            "build",
            "--quiet",
            "-p",
            "harness",
            "--bin",
            "harness",
            "--target-dir",
        ])
        .arg(&target_dir)
        .current_dir(repo_root())
        .env_remove("CARGO_TARGET_DIR")
        .status()
        .expect("cargo runs");
    assert!(status.success(), "cargo build of the harness failed");
    let profile_dir = target_dir.join("debug");
    remove_fixture(&profile_dir);
    CargoOutput::of_executable(&profile_dir.join("harness")).expect("a cargo output")
}

/// Removes every trace of `native-fixture` from a profile's folder: the
/// binary, its dep-info, stamp and lock, its copy in `deps/`, and cargo's
/// fingerprints of it, so cargo has to build it as if never built.
fn remove_fixture(profile_dir: &Path) {
    let remove = |path: PathBuf| {
        if path.is_dir() {
            std::fs::remove_dir_all(&path).expect("remove dir");
        } else if path.exists() {
            std::fs::remove_file(&path).expect("remove file");
        }
    };
    for name in [
        "native-fixture",
        "native-fixture.d",
        "native-fixture.stamp",
        "native-fixture.lock",
    ] {
        remove(profile_dir.join(name));
    }
    for entry in std::fs::read_dir(profile_dir.join("deps")).expect("deps") {
        let path = entry.expect("entry").path();
        if path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("native_fixture-"))
        {
            remove(path);
        }
    }
    for entry in std::fs::read_dir(profile_dir.join(".fingerprint")).expect("fingerprints") {
        let path = entry.expect("entry").path();
        if path.join("bin-native-fixture").exists() {
            remove(path);
        }
    }
    assert!(!profile_dir.join("native-fixture").exists());
}

#[test]
fn edge_compat_from_a_target_that_never_built_the_fixture_passes_every_scenario() {
    let output = target_without_the_fixture();
    let dir = tempfile::tempdir().expect("temp dir");
    let native_files = native_corpus(dir.path());
    assert!(
        native_files >= 6,
        "the corpus's native scenarios: {native_files}"
    );
    let out = dir.path().join("out");
    let pin = harness::world::workerd::find::pinned_npm_version(
        &harness::world::paths::pinned_workerd_dir(),
    )
    .expect("the pin");
    let result = Command::new(output.profile_dir.join("harness"))
        .args(["edge-compat", "--version", &pin, "--scenarios"])
        .arg(dir.path().join("scenarios"))
        .arg("--out")
        .arg(&out)
        .output()
        .expect("harness runs");
    let stderr = String::from_utf8_lossy(&result.stderr);
    let drift = std::fs::read_to_string(out.join("drift.md")).unwrap_or_default();
    assert_eq!(result.status.code(), Some(0), "{stderr}\n{drift}");
    assert!(
        stderr.contains("native-fixture does not exist; building it with `cargo build -p harness --bin native-fixture`"),
        "{stderr}"
    );
    assert!(output.profile_dir.join("native-fixture").is_file());
    // Every scenario passed on both columns, the native ones included.
    assert!(drift.contains("| failed | 0 | 0 |"), "{drift}");
    // The reference column's failures too, with what failed in each.
    let junit = std::fs::read_to_string(out.join("junit.xml")).unwrap_or_default();
    let failures: Vec<&str> = junit
        .split("<failure")
        .skip(1)
        .map(|rest| rest.split("</failure>").next().unwrap_or(rest))
        .collect();
    assert!(
        !stderr.contains("\nFAIL ") && failures.is_empty(),
        "{stderr}\n{}",
        failures.join("\n----\n")
    );
    let passed_native = stderr
        .lines()
        .filter(|l| l.starts_with("pass ") && l.contains("/native-"))
        .count();
    // Three runs (pinned, newest, the reference core) of each native scenario.
    assert!(passed_native >= 3 * native_files, "{stderr}");
}

#[test]
fn a_machine_without_redis_server_stops_before_the_first_scenario_with_one_line() {
    // A PATH with cargo and rustup but neither redis-server nor apt-get: the
    // harness cannot install Redis here, whoever runs it.
    let bin = tempfile::tempdir().expect("temp dir");
    for tool in ["cargo", "rustup", "rustc"] {
        if let Ok(path) = which::which(tool) {
            std::os::unix::fs::symlink(path, bin.path().join(tool)).expect("symlink");
        }
    }
    let dir = tempfile::tempdir().expect("temp dir");
    native_corpus(dir.path());
    let result = Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(["run", "--scenarios"])
        .arg(dir.path().join("scenarios"))
        .env("PATH", bin.path())
        .output()
        .expect("harness runs");
    let stderr = String::from_utf8_lossy(&result.stderr);
    let stdout = String::from_utf8_lossy(&result.stdout);
    assert_eq!(result.status.code(), Some(2), "{stderr}\n{stdout}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].contains("run `sudo apt-get install redis-server`"),
        "{stderr}"
    );
    assert!(lines[0].contains("scenario(s) count in Redis"), "{stderr}");
    // No scenario ran: no verdict, no table.
    assert!(stdout.is_empty(), "{stdout}");
}
