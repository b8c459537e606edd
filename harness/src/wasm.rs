//! Builds the deployable for wasm32 and glues it with wasm-bindgen, run as a
//! library so nothing extra has to be installed.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::paths::{repo_root, wasm_target_dir};

const TARGET: &str = "wasm32-unknown-unknown";
const CRATE: &str = "harness-deployable";
/// The file stem wasm-bindgen gives its outputs (`deployable.js`, `deployable_bg.wasm`).
pub const STEM: &str = "deployable";

/// Why the deployable could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("could not run {what}: {source}")]
    Spawn {
        what: String,
        source: std::io::Error,
    },
    #[error("{what} failed ({status}):\n{stderr}")]
    Failed {
        what: String,
        status: String,
        stderr: String,
    },
    #[error("wasm-bindgen failed: {0}")]
    Bindgen(String),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The glued deployable: the JS module, the wasm module beside it, and the
/// JavaScript snippets the glue imports (`#[wasm_bindgen(module = ...)]`).
#[derive(Debug, Clone)]
pub struct Deployable {
    pub glue_js: PathBuf,
    pub wasm: PathBuf,
    /// Each snippet as (its module name beside the glue, e.g.
    /// `snippets/runtime-HASH/src/ask-bindings.js`, and its file).
    pub snippets: Vec<(String, PathBuf)>,
}

/// Builds the deployable when its sources changed (cargo decides) and re-runs
/// wasm-bindgen when the wasm is newer than its glue. Several harness
/// processes may call this at once: a file lock serialises them.
pub fn build_deployable() -> Result<Deployable, BuildError> {
    let target_dir = wasm_target_dir();
    std::fs::create_dir_all(&target_dir).map_err(|source| BuildError::Io {
        path: target_dir.clone(),
        source,
    })?;
    let lock_path = target_dir.join("harness-build.lock");
    let lock = File::create(&lock_path).map_err(|source| BuildError::Io {
        path: lock_path.clone(),
        source,
    })?;
    lock.lock().map_err(|source| BuildError::Io {
        path: lock_path,
        source,
    })?;

    ensure_target()?;
    run(
        Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args([
                "build",
                "--quiet",
                "--release",
                "-p",
                CRATE,
                "--target",
                TARGET,
                "--target-dir",
            ])
            .arg(&target_dir)
            .current_dir(repo_root())
            // The outer cargo's flags are for the host, not for wasm32.
            .env_remove("RUSTFLAGS")
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .env_remove("CARGO_TARGET_DIR"),
        "cargo build of the deployable for wasm32",
    )?;

    let raw = target_dir
        .join(TARGET)
        .join("release")
        .join(format!("{}.wasm", CRATE.replace('-', "_")));
    let out_dir = target_dir.join("bindgen");
    let glue_js = out_dir.join(format!("{STEM}.js"));
    let wasm = out_dir.join(format!("{STEM}_bg.wasm"));
    if is_newer(&raw, &wasm) {
        // Snippets live in folders named by a hash: drop the old ones so only
        // those the new glue imports are carried.
        let snippets = out_dir.join(SNIPPETS);
        if snippets.exists() {
            std::fs::remove_dir_all(&snippets).map_err(|source| BuildError::Io {
                path: snippets,
                source,
            })?;
        }
        let mut bindgen = wasm_bindgen_cli_support::Bindgen::new();
        bindgen
            .input_path(&raw)
            .out_name(STEM)
            .web(true)
            .map_err(|e| BuildError::Bindgen(e.to_string()))?
            .generate(&out_dir)
            .map_err(|e| BuildError::Bindgen(format!("{e:#}")))?;
    }
    let mut snippets = Vec::new();
    collect_files(&out_dir, Path::new(SNIPPETS), &mut snippets)?;
    Ok(Deployable {
        glue_js,
        wasm,
        snippets,
    })
}

/// The folder wasm-bindgen writes the crates' JavaScript snippets into, beside the glue.
const SNIPPETS: &str = "snippets";

/// Every file under `root/relative`, as (its `/`-separated path from `root`, its path).
fn collect_files(
    root: &Path,
    relative: &Path,
    found: &mut Vec<(String, PathBuf)>,
) -> Result<(), BuildError> {
    let dir = root.join(relative);
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => return Err(BuildError::Io { path: dir, source }),
    };
    for entry in entries {
        let entry = entry.map_err(|source| BuildError::Io {
            path: dir.clone(),
            source,
        })?;
        let relative = relative.join(entry.file_name());
        if entry.path().is_dir() {
            collect_files(root, &relative, found)?;
        } else {
            let name = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect::<Vec<_>>()
                .join("/");
            found.push((name, entry.path()));
        }
    }
    found.sort();
    Ok(())
}

/// Adds the wasm32 target with rustup when it is missing, saying so.
fn ensure_target() -> Result<(), BuildError> {
    let installed = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output();
    match installed {
        Ok(out)
            if String::from_utf8_lossy(&out.stdout)
                .lines()
                .any(|l| l.trim() == TARGET) =>
        {
            Ok(())
        }
        // Without rustup, let cargo say whether the target is there.
        Err(_) => Ok(()),
        Ok(_) => {
            eprintln!("harness: adding the {TARGET} target with rustup");
            run(
                Command::new("rustup").args(["target", "add", TARGET]),
                "rustup target add",
            )
        }
    }
}

fn run(command: &mut Command, what: &str) -> Result<(), BuildError> {
    let output = command.output().map_err(|source| BuildError::Spawn {
        what: what.to_owned(),
        source,
    })?;
    if output.status.success() {
        Ok(())
    } else {
        Err(BuildError::Failed {
            what: what.to_owned(),
            status: output.status.to_string(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        })
    }
}

fn is_newer(source: &Path, derived: &Path) -> bool {
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    match (modified(source), modified(derived)) {
        (Some(s), Some(d)) => s > d,
        _ => true,
    }
}
