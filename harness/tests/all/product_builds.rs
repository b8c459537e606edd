//! `runtime` builds as its users build it: each feature set docs/runtime.md
//! documents ("Cargo features"), native and wasm32, compiles on its own
//! with none of the harness's hooks, by the very commands that page gives.
//! Inside this workspace only the wasm32 Worker fixtures turn `testing` on
//! (runtime's own tests check they are built without it: its
//! `tests/all/product.rs`); these builds cover each feature set alone.

use std::process::Command;

use harness::world::cargo_build::CargoOutput;
use harness::world::paths::repo_root;

/// The commands under "Cargo features" that build `runtime` alone.
fn documented_builds(page: &str) -> Vec<String> {
    page.lines()
        .map(str::trim)
        .filter(|line| line.starts_with("cargo clippy -p runtime "))
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_documented_feature_set_builds_on_its_own_without_the_harness_hooks() {
    let page =
        std::fs::read_to_string(repo_root().join("docs/runtime.md")).expect("docs/runtime.md");
    let builds = documented_builds(&page);
    assert!(
        builds
            .iter()
            .any(|b| b.contains("--target wasm32-unknown-unknown"))
            && builds.iter().any(|b| !b.contains("--target")),
        "docs/runtime.md gives the native and the wasm32 builds: {builds:?}"
    );
    for build in &builds {
        assert!(
            !build.contains("testing"),
            "{build}: a user's build has no harness hooks"
        );
    }
    let here = CargoOutput::of_running_executable().expect("tests run from a target directory");
    let target_dir = here.target_dir.join("product-builds");
    for build in &builds {
        let mut words = build.split_whitespace();
        assert_eq!(words.next(), Some("cargo"));
        let output = Command::new(env!("CARGO"))
            .args(words)
            .current_dir(repo_root())
            .env("CARGO_TARGET_DIR", &target_dir)
            .output()
            .expect("cargo runs");
        assert!(
            output.status.success(),
            "{build} (docs/runtime.md, \"Cargo features\") failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

#[test]
fn the_documented_builds_are_read_one_a_line() {
    let page = "text\n```sh\ncargo clippy -p runtime --lib -- -D warnings\n\
                cargo clippy -p runtime --lib --features native -- -D warnings\n```\n\
                cargo test -p harness\n";
    assert_eq!(
        documented_builds(page),
        [
            "cargo clippy -p runtime --lib -- -D warnings",
            "cargo clippy -p runtime --lib --features native -- -D warnings"
        ]
    );
}
