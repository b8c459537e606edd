//! Builds a deployable for wasm32, glues it with wasm-bindgen (run as a
//! library so nothing extra has to be installed) and shrinks it with
//! binaryen's `wasm-opt`, as workers-rs's `worker-build` does.

use crate::world::process::child_command;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::world::cargo_build::{self, is_newer};
use crate::world::npm::{self, NpmError};
use crate::world::paths::{binaryen_dir, repo_root, wasm_target_dir};

const TARGET: &str = "wasm32-unknown-unknown";
/// The file stem wasm-bindgen gives its outputs (`deployable.js`, `deployable_bg.wasm`).
pub const STEM: &str = "deployable";

/// The environment variable that picks the Worker under `cargo test`.
pub const WORKER_VARIABLE: &str = "HARNESS_WORKER";

/// Which Rust Worker the harness builds and runs: one deployable written the
/// ways people write a Rust Worker, the same routes, the same gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum WorkerChoice {
    /// `harness/workers/wasm-bindgen`: raw wasm-bindgen, `runtime::workers::WorkersGate::decide`.
    #[default]
    WasmBindgen,
    /// `harness/workers/workers-rs`: workers-rs's `#[event(fetch)]`,
    /// `runtime::workers::WorkersGate::decide_async`.
    WorkersRs,
    /// `harness/workers/axum`: an axum `Router` on Workers (workers-rs's
    /// `http` feature), `runtime::workers::RateLimitLayer`.
    Axum,
}

impl WorkerChoice {
    /// Every Worker, in the order runs and reports list them.
    pub const ALL: [WorkerChoice; 3] = [
        WorkerChoice::WasmBindgen,
        WorkerChoice::WorkersRs,
        WorkerChoice::Axum,
    ];

    /// Its name on the command line (`run --worker`) and in `HARNESS_WORKER`.
    pub fn name(self) -> &'static str {
        match self {
            WorkerChoice::WasmBindgen => "wasm-bindgen",
            WorkerChoice::WorkersRs => "workers-rs",
            WorkerChoice::Axum => "axum",
        }
    }

    /// `HARNESS_WORKER`: unset or `wasm-bindgen` is `harness/workers/wasm-bindgen`,
    /// `workers-rs` and `axum` the workers-rs ones.
    pub fn from_env() -> Result<WorkerChoice, UnknownWorker> {
        match std::env::var(WORKER_VARIABLE) {
            Err(std::env::VarError::NotPresent) => Ok(WorkerChoice::WasmBindgen),
            Ok(value) => WorkerChoice::parse(&value),
            Err(std::env::VarError::NotUnicode(value)) => {
                WorkerChoice::parse(&value.to_string_lossy())
            }
        }
    }

    fn parse(value: &str) -> Result<WorkerChoice, UnknownWorker> {
        match value {
            "" => Ok(WorkerChoice::WasmBindgen),
            other => WorkerChoice::ALL
                .into_iter()
                .find(|w| w.name() == other)
                .ok_or_else(|| UnknownWorker(other.to_owned())),
        }
    }

    /// Its crate's folder in the repository.
    pub fn crate_dir(self) -> &'static str {
        match self {
            WorkerChoice::WasmBindgen => "harness/workers/wasm-bindgen",
            WorkerChoice::WorkersRs => "harness/workers/workers-rs",
            WorkerChoice::Axum => "harness/workers/axum",
        }
    }

    /// Its crate.
    fn crate_name(self) -> &'static str {
        match self {
            WorkerChoice::WasmBindgen => "harness-worker-wasm-bindgen",
            WorkerChoice::WorkersRs => "harness-worker-workers-rs",
            WorkerChoice::Axum => "harness-worker-axum",
        }
    }

    /// The folder of the wasm target directory its glued outputs go into.
    fn out_dir(self) -> &'static str {
        match self {
            WorkerChoice::WasmBindgen => "bindgen",
            WorkerChoice::WorkersRs => "bindgen-workers-rs",
            WorkerChoice::Axum => "bindgen-axum",
        }
    }
}

/// The error for a `HARNESS_WORKER` that names no Worker.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{WORKER_VARIABLE}={0:?} names no Worker; use `wasm-bindgen`, `workers-rs` or `axum`")]
pub struct UnknownWorker(pub String);

/// Why the deployable could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// A build tool (cargo, rustup) could not be run.
    #[error("could not run {what}: {source}")]
    Spawn {
        /// The command.
        what: String,
        /// Why.
        source: std::io::Error,
    },
    /// A build tool ran and failed: its stderr says why (a compile error, most often).
    #[error("{what} failed ({status}):\n{stderr}")]
    Failed {
        /// The command.
        what: String,
        /// Its exit status.
        status: String,
        /// What it said.
        stderr: String,
    },
    /// wasm-bindgen could not glue the wasm module.
    #[error("wasm-bindgen failed: {0}")]
    Bindgen(String),
    /// A build file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
}

/// The glued deployable: the JS module, the wasm module beside it, and the
/// JavaScript snippets the glue imports (`#[wasm_bindgen(module = ...)]`).
#[derive(Debug, Clone)]
pub struct WorkerBuild {
    /// Which Worker it is.
    pub worker: WorkerChoice,
    /// The JS module workerd loads: wasm-bindgen's glue.
    pub glue_js: PathBuf,
    /// The wasm module the glue instantiates: `wasm-opt`'s output, or
    /// wasm-bindgen's when `wasm-opt` could not be had.
    pub wasm: PathBuf,
    /// Each snippet as (its module name beside the glue, e.g.
    /// `snippets/runtime-HASH/src/ask-bindings.js`, and its file).
    pub snippets: Vec<(String, PathBuf)>,
}

/// Builds the chosen Worker when its sources changed (cargo decides, unless
/// no file it read changed since it was last asked:
/// [`built_from_current_sources`]), re-runs wasm-bindgen when the wasm is
/// newer than its glue, and `wasm-opt` when the glued wasm is newer than
/// its output. Several harness processes may call this at once: a file lock
/// serialises them.
pub fn build_worker(worker: WorkerChoice) -> Result<WorkerBuild, BuildError> {
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

    let crate_name = worker.crate_name();
    let raw = target_dir
        .join(TARGET)
        .join("release")
        .join(format!("{}.wasm", crate_name.replace('-', "_")));
    let stamp = target_dir.join(format!("{crate_name}{CARGO_STAMP}"));
    if !built_from_current_sources(&raw, &stamp) {
        let asked_at = std::time::SystemTime::now();
        ensure_target()?;
        run(
            child_command(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
                .args([
                    "build",
                    "--quiet",
                    "--release",
                    "-p",
                    crate_name,
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
        // Dated when cargo was asked, so a source edited while it built is newer.
        File::create(&stamp)
            .and_then(|file| file.set_modified(asked_at))
            .map_err(|source| BuildError::Io {
                path: stamp.clone(),
                source,
            })?;
    }
    let out_dir = target_dir.join(worker.out_dir());
    let glue_js = out_dir.join(format!("{STEM}.js"));
    let glued = out_dir.join(format!("{STEM}_bg.wasm"));
    if is_newer(&raw, &glued) {
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
            // What a deployed Worker ships: no function names, no producers.
            .remove_name_section(true)
            .remove_producers_section(true)
            .web(true)
            .map_err(|e| BuildError::Bindgen(e.to_string()))?
            .generate(&out_dir)
            .map_err(|e| BuildError::Bindgen(format!("{e:#}")))?;
    }
    let mut snippets = Vec::new();
    collect_files(&out_dir, Path::new(SNIPPETS), &mut snippets)?;
    let wasm = optimised(worker, glued, &out_dir);
    Ok(WorkerBuild {
        worker,
        glue_js,
        wasm,
        snippets,
    })
}

/// The wasm a Worker ships: `glued` shrunk by `wasm-opt` into `out_dir`
/// (again when it is newer than the shrunk one, or was shrunk with other
/// flags), or `glued` itself, said on stderr, when `wasm-opt` fails.
fn optimised(worker: WorkerChoice, glued: PathBuf, out_dir: &Path) -> PathBuf {
    let optimised = out_dir.join(format!("{STEM}_opt.wasm"));
    // The flags it was shrunk with are kept beside it.
    let flags_file = out_dir.join(format!("{STEM}_opt.flags"));
    let flags = WASM_OPT_FLAGS.join(" ");
    let same_flags = std::fs::read_to_string(&flags_file).is_ok_and(|f| f == flags);
    if same_flags && !is_newer(&glued, &optimised) {
        return optimised;
    }
    let shrunk = wasm_opt(&glued, &optimised).and_then(|()| {
        std::fs::write(&flags_file, &flags).map_err(|source| {
            WasmOptError::Build(BuildError::Io {
                path: flags_file.clone(),
                source,
            })
        })
    });
    match shrunk {
        Ok(()) => optimised,
        Err(why) => {
            eprintln!(
                "harness: the {} Worker is used as wasm-bindgen wrote it ({} bytes), not \
                 shrunk by wasm-opt: {why}",
                worker.name(),
                std::fs::metadata(&glued).map_or(0, |m| m.len())
            );
            glued
        }
    }
}

/// The flags `wasm-opt` is run with: optimise for size (BENCHMARKS-log.md,
/// "Build-time plans": `-Oz` beside `-O` and `-Os`), but inline a function
/// called from one place only when it is small. V8 compiles a Worker's wasm
/// lazily, a whole function on its first call: a cold path inlined into the
/// function that calls it (a fixture's `/health` answer, the gate's
/// construction, a table sweep) is compiled with it on the first request
/// whether it runs or not. `#[inline(never)]` keeps such paths apart in
/// LLVM, and this keeps them apart in `wasm-opt` (BENCHMARKS-log.md, "Cold
/// start, function by function": the first request's instructions 8.8 →
/// 7.6 million, the module 0.4 % bigger).
pub const WASM_OPT_FLAGS: [&str; 2] = ["-Oz", "--one-caller-inline-max-function-size=200"];

/// Why `wasm-opt` did not shrink the wasm (the build goes on without it).
#[derive(Debug, thiserror::Error)]
pub enum WasmOptError {
    /// binaryen's npm folder could not be installed.
    #[error("{0}")]
    Install(#[from] NpmError),
    /// `wasm-opt` could not be run, failed, or its flags could not be
    /// recorded beside its output.
    #[error(transparent)]
    Build(#[from] BuildError),
}

/// Runs binaryen's `wasm-opt` (pinned in `tools/fixtures/binaryen`,
/// installed with `npm ci` when missing) on `input`, writing `output`.
fn wasm_opt(input: &Path, output: &Path) -> Result<(), WasmOptError> {
    let dir = binaryen_dir();
    let binary = dir.join("node_modules/.bin/wasm-opt");
    npm::ci_unless(
        &dir,
        &[&binary],
        "wasm-opt is not installed",
        &["--ignore-scripts"],
    )?;
    run(
        child_command(&binary)
            .args(WASM_OPT_FLAGS)
            .arg(input)
            .arg("-o")
            .arg(output),
        "wasm-opt",
    )?;
    Ok(())
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
    let installed = child_command("rustup")
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
                child_command("rustup").args(["target", "add", TARGET]),
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

/// The end of a file's name in the wasm target directory (after the
/// crate's) dated when cargo was last asked to build that deployable, and
/// succeeded.
const CARGO_STAMP: &str = "-built.stamp";

/// Whether cargo, last asked at `stamp`'s date, saw every file the build of
/// the wasm at `raw` reads ([`cargo_build::up_to_date`]). Then cargo would
/// find nothing to do, and not asking it spares every run ~0.3-0.6 s before
/// its first scenario can start (BENCHMARKS-log.md, "the suite's wall time").
fn built_from_current_sources(raw: &Path, stamp: &Path) -> bool {
    cargo_build::modified(stamp)
        .is_some_and(|asked_at| cargo_build::up_to_date(raw, &raw.with_extension("d"), asked_at))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, SystemTime};

    #[test]
    fn a_source_changed_after_the_build_asks_cargo_again() {
        let dir = tempfile::tempdir().expect("tempdir");
        let source = dir.path().join("lib.rs");
        let raw = dir.path().join("harness_worker_wasm_bindgen.wasm");
        let stamp = dir.path().join(CARGO_STAMP);
        let set_time = |path: &Path, time: SystemTime| {
            let file = File::options()
                .write(true)
                .create(true)
                .truncate(false)
                .open(path)
                .expect("open");
            file.set_modified(time).expect("mtime");
        };
        let now = SystemTime::now();
        set_time(&source, now - Duration::from_secs(100));
        set_time(&raw, now);
        set_time(&stamp, now);
        std::fs::write(
            raw.with_extension("d"),
            format!("{}: {}\n", raw.display(), source.display()),
        )
        .expect("dep-info");
        // The manifests are the repository's: older than a wasm made now.
        let fresh = built_from_current_sources(&raw, &stamp);
        set_time(&source, now + Duration::from_secs(100));
        let edited = built_from_current_sources(&raw, &stamp);
        set_time(&source, now - Duration::from_secs(100));
        std::fs::remove_file(&stamp).expect("rm stamp");
        let never_asked = built_from_current_sources(&raw, &stamp);
        set_time(&stamp, now);
        std::fs::remove_file(raw.with_extension("d")).expect("rm dep-info");
        let no_dep_info = built_from_current_sources(&raw, &stamp);
        assert_eq!(
            (fresh, edited, never_asked, no_dep_info),
            (true, false, false, false)
        );
    }
}
