//! The `native-fixture` binary, built when a native scenario needs it and it
//! is missing or older than its sources: in the profile the running harness
//! was built in, into the same target directory, saying so on stderr (as the
//! wasm deployable is built). `cargo run -p harness` builds only the harness
//! binary, so a fresh checkout's first run would otherwise have no fixture,
//! and an edit to `runtime::native` or `harness/native` would go unseen.

use std::fs::File;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::SystemTime;

use super::FIXTURE;
use crate::world::cargo_build::{self, CargoOutput};

/// Why `native-fixture` could not be had.
#[derive(Debug, thiserror::Error)]
pub enum FixtureError {
    /// The running executable is not in a cargo target directory.
    #[error(
        "cannot tell which cargo target directory {0} was built in, so `native-fixture` cannot be built beside it"
    )]
    NoTargetDir(PathBuf),
    /// cargo could not be run, or failed.
    #[error("`{command}` failed ({status}):\n{stderr}")]
    Build {
        /// The command, as a person would type it.
        command: String,
        /// How it ended.
        status: String,
        /// What it said.
        stderr: String,
    },
    /// A lock or stamp file could not be written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
}

/// The fixture beside the running executable (`target/PROFILE/native-fixture`,
/// also for a test or bench in `target/PROFILE/deps/`), built first when it
/// is missing or stale. Checked once per process: the check stats the files
/// its dep-info lists (a few milliseconds); a failure is kept too, so every
/// native scenario of a run reports the same build error at once.
pub fn built_fixture() -> Result<PathBuf, Arc<FixtureError>> {
    static FIXTURE_PATH: OnceLock<Result<PathBuf, Arc<FixtureError>>> = OnceLock::new();
    FIXTURE_PATH
        .get_or_init(|| ensure_fixture().map_err(Arc::new))
        .clone()
}

fn ensure_fixture() -> Result<PathBuf, FixtureError> {
    let exe = std::env::current_exe().unwrap_or_default();
    let output = CargoOutput::of_executable(&exe).ok_or(FixtureError::NoTargetDir(exe))?;
    let fixture = output.profile_dir.join(FIXTURE);
    let stamp = output.profile_dir.join(format!("{FIXTURE}.stamp"));
    if fresh(&fixture, &stamp) {
        return Ok(fixture);
    }
    // One build for every harness process at once (nextest runs each trial
    // in its own); whoever waited looks again once the lock is theirs.
    let lock_path = output.profile_dir.join(format!("{FIXTURE}.lock"));
    let io = |path: &PathBuf| {
        let path = path.clone();
        move |source| FixtureError::Io { path, source }
    };
    std::fs::create_dir_all(&output.profile_dir).map_err(io(&output.profile_dir))?;
    let lock = File::create(&lock_path).map_err(io(&lock_path))?;
    lock.lock().map_err(io(&lock_path))?;
    if fresh(&fixture, &stamp) {
        return Ok(fixture);
    }
    let why = if fixture.is_file() {
        "is older than its sources"
    } else {
        "does not exist"
    };
    let shown = output.shown("harness", FIXTURE);
    eprintln!(
        "harness: {} {why}; building it with `{shown}`",
        fixture.display()
    );
    let asked_at = SystemTime::now();
    let result = output
        .build_command("harness", FIXTURE)
        .output()
        .map_err(|e| FixtureError::Build {
            command: shown.clone(),
            status: "not started".into(),
            stderr: e.to_string(),
        })?;
    if !result.status.success() || !fixture.is_file() {
        return Err(FixtureError::Build {
            command: shown,
            status: result.status.to_string(),
            stderr: String::from_utf8_lossy(&result.stderr).into_owned(),
        });
    }
    // Dated when cargo was asked, so a source edited while it built is newer.
    File::create(&stamp)
        .and_then(|file| file.set_modified(asked_at))
        .map_err(io(&stamp))?;
    Ok(fixture)
}

/// Whether the fixture is newer than every file it was built from, by its
/// own date or by the stamp of the last build the harness asked for (cargo
/// leaves a binary it did not need to relink as old as it was).
fn fresh(fixture: &std::path::Path, stamp: &std::path::Path) -> bool {
    let built_at = cargo_build::modified(fixture).max(cargo_build::modified(stamp));
    built_at.is_some_and(|at| cargo_build::up_to_date(fixture, &fixture.with_extension("d"), at))
}
