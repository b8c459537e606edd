//! The repository's npm folders (`tools/fixtures/*`, each a `package.json`
//! and its lockfile): what the harness and its tests run from them (workerd,
//! miniflare, wasm-opt, schema tools) is installed with `npm ci` when it is
//! missing, saying so.

use crate::world::process::child_command;
use std::path::{Path, PathBuf};

/// The lock file [`ci_unless`] holds in an npm folder while it looks and installs.
pub const INSTALL_LOCK: &str = ".npm-ci.lock";

/// Why an npm folder could not be installed.
#[derive(Debug, thiserror::Error)]
pub enum NpmError {
    /// npm ran and failed.
    #[error("`npm {args}` in {dir} failed ({status}):\n{stderr}")]
    Failed {
        /// The npm folder.
        dir: PathBuf,
        /// npm's arguments.
        args: String,
        /// npm's exit status.
        status: String,
        /// What npm said.
        stderr: String,
    },
    /// npm could not be run at all (not installed).
    #[error("could not run npm in {dir}: {source}; install Node.js and npm")]
    Missing {
        /// The npm folder.
        dir: PathBuf,
        /// Why it could not run.
        source: std::io::Error,
    },
    /// Another process installing the same folder could not be waited for.
    #[error("could not take the install lock {path}: {source}")]
    InstallLock {
        /// The lock file.
        path: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
}

/// Runs `npm ci` (with `extra` flags) in an npm folder of the repository
/// unless every file of `ready` is there, saying why on stderr: the harness
/// and its tests install what they need. Tests run at once, so the look and
/// the install happen under an exclusive lock on [`INSTALL_LOCK`] in `dir`:
/// one of them installs, and none runs a file another is still writing.
pub fn ci_unless(dir: &Path, ready: &[&Path], why: &str, extra: &[&str]) -> Result<(), NpmError> {
    let lock_path = dir.join(INSTALL_LOCK);
    let lock = std::fs::File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .and_then(|file| file.lock().map(|()| file))
        .map_err(|source| NpmError::InstallLock {
            path: lock_path.clone(),
            source,
        })?;
    if ready.iter().all(|path| path.exists()) {
        return Ok(());
    }
    let mut args = vec!["ci"];
    args.extend_from_slice(extra);
    eprintln!(
        "harness: {why}; running `npm {}` in {}",
        args.join(" "),
        dir.display()
    );
    let installed = run(dir, &args);
    drop(lock);
    installed
}

/// Runs `npm ARGS` in `dir`.
pub fn run(dir: &Path, args: &[&str]) -> Result<(), NpmError> {
    let output = child_command("npm")
        .args(args)
        .args(["--no-audit", "--no-fund"])
        .current_dir(dir)
        .output()
        .map_err(|source| NpmError::Missing {
            dir: dir.to_owned(),
            source,
        })?;
    if output.status.success() {
        Ok(())
    } else {
        Err(NpmError::Failed {
            dir: dir.to_owned(),
            args: args.join(" "),
            status: output.status.to_string(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        })
    }
}
