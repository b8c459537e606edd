//! Where the harness finds the repository's files.

use std::path::PathBuf;

/// The repository root (the workspace that holds this crate).
pub fn repo_root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map(PathBuf::from).unwrap_or(manifest)
}

/// The npm folder that pins workerd.
pub fn pinned_workerd_dir() -> PathBuf {
    repo_root().join("tools/fixtures/workers")
}

/// The scenarios QA write.
pub fn scenarios_dir() -> PathBuf {
    repo_root().join("scenarios")
}

/// How trial names and errors show [`scenarios_dir`]: `scenarios/FILE::NAME`.
pub const SCENARIOS_SHOWN_AS: &str = "scenarios";

/// The harness's own files that go into every workerd config.
pub fn assets_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("assets")
}

/// The target directory of the nested wasm build: its own, so a build from
/// inside `cargo test` does not wait on the outer build's lock.
pub fn wasm_target_dir() -> PathBuf {
    repo_root().join("target/harness-wasm")
}

/// The npm folder that pins binaryen, whose `wasm-opt` shrinks the deployables.
pub fn binaryen_dir() -> PathBuf {
    repo_root().join("tools/fixtures/binaryen")
}
