//! Cloudflare's own simulator as a counting core: the reference the harness's
//! emulation is checked against.
//!
//! The emulated binding (`assets/ratelimit-binding.js`) is a fault layer
//! around a counting core. The harness's core counts in
//! `assets/count-server.js`; the reference core is miniflare's rate-limit
//! simulator, pinned in `tools/fixtures/workers` and read from its
//! `node_modules` at run time (nothing of it is in this repository). It runs
//! inside the pinned workerd as miniflare wires it: in each isolate the
//! client `ratelimit.worker.js` is the internal module
//! `cloudflare-internal:ratelimit:module` behind a wrapped binding, whose
//! `fetcher` reaches one process every isolate of the scenario shares; there
//! `object-entry.worker.js` picks the namespace's `RateLimiterObject`
//! (`ratelimit-object.worker.js`, importing `miniflare:shared`), a durable
//! object with SQLite storage on a disk service in a directory new for each
//! scenario, so every scenario starts with no counts. The simulator reads
//! `Date.now()`; `assets/reference/clock.js`, the main module of its
//! service, makes that the scenario clock, set with the same `POST /clock`
//! as the harness's count server.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::world::workerd::find::{FindError, install_pinned};

/// The miniflare release the reference is pinned to: the one built on the
/// pinned workerd (`tools/fixtures/workers/package.json`).
pub const MINIFLARE_VERSION: &str = "5.20261117.0-beta";

/// The environment variable that picks the core under `cargo test`.
pub const CORE_VARIABLE: &str = "HARNESS_BINDING";

/// Which counting core the emulated binding's fault layer wraps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum CoreChoice {
    /// The harness's own store (`assets/count-server.js`): the default.
    #[default]
    Harness,
    /// Cloudflare's simulator (miniflare), pinned beside workerd.
    Reference,
}

impl CoreChoice {
    /// Its name on the command line and in `HARNESS_BINDING`.
    pub fn name(self) -> &'static str {
        match self {
            CoreChoice::Harness => "harness",
            CoreChoice::Reference => "reference",
        }
    }

    /// `HARNESS_BINDING`: unset or `harness` is the harness's core, `reference` the simulator.
    pub fn from_env() -> Result<CoreChoice, ReferenceError> {
        match std::env::var(CORE_VARIABLE) {
            Err(std::env::VarError::NotPresent) => Ok(CoreChoice::Harness),
            Ok(value) => CoreChoice::parse(&value),
            Err(std::env::VarError::NotUnicode(value)) => {
                CoreChoice::parse(&value.to_string_lossy())
            }
        }
    }

    fn parse(value: &str) -> Result<CoreChoice, ReferenceError> {
        match value {
            "" | "harness" => Ok(CoreChoice::Harness),
            "reference" => Ok(CoreChoice::Reference),
            other => Err(ReferenceError::UnknownCore(other.to_owned())),
        }
    }
}

/// The counting core of a run, ready to be wired into configs.
#[derive(Debug, Clone, Default)]
pub enum CountingCore {
    /// The harness's own store.
    #[default]
    Harness,
    /// Cloudflare's simulator, its worker files read from `node_modules`.
    Reference(Arc<Simulator>),
}

impl CountingCore {
    /// The core a choice names, loading (and if need be installing) the simulator.
    pub fn prepare(choice: CoreChoice, npm_dir: &Path) -> Result<CountingCore, ReferenceError> {
        Ok(match choice {
            CoreChoice::Harness => CountingCore::Harness,
            CoreChoice::Reference => CountingCore::Reference(Arc::new(Simulator::load(npm_dir)?)),
        })
    }

    /// Which choice it was made from.
    pub fn choice(&self) -> CoreChoice {
        match self {
            CountingCore::Harness => CoreChoice::Harness,
            CountingCore::Reference(_) => CoreChoice::Reference,
        }
    }
}

/// Why the reference core could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum ReferenceError {
    /// `HARNESS_BINDING` names no core.
    #[error("{CORE_VARIABLE}={0:?} names no counting core; use `harness` or `reference`")]
    UnknownCore(String),
    /// `npm ci` could not install the pinned folder.
    #[error("installing Cloudflare's simulator (miniflare): {0}")]
    Install(#[from] FindError),
    /// miniflare is installed, but not the pinned release.
    #[error(
        "{path} is miniflare {found}, not the pinned {MINIFLARE_VERSION}; run `npm ci --ignore-scripts` there"
    )]
    Version {
        /// miniflare's `package.json`.
        path: PathBuf,
        /// The version found there.
        found: String,
    },
    /// One of the simulator's files could not be read.
    #[error("reading Cloudflare's simulator file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
}

/// The simulator's worker files, as the pinned miniflare ships them.
#[derive(Debug, Clone)]
pub struct Simulator {
    /// `ratelimit/ratelimit.worker.js`: the binding's client (validation, then a POST to `fetcher`).
    pub client_js: String,
    /// `ratelimit/ratelimit-object.worker.js`: `RateLimiterObject`, the count.
    object_js: String,
    /// `shared/object-entry.worker.js`: routes a request to the namespace's object.
    object_entry_js: String,
    /// `shared/index.worker.js`: the `miniflare:shared` module the object imports.
    shared_js: String,
}

const STORE_ENTRY_JS: &str = include_str!("../../../assets/reference/store-entry.js");
const CLOCK_JS: &str = include_str!("../../../assets/reference/clock.js");
/// The `fetcher` worker of the simulator's client in each isolate.
pub const FORWARD_JS: &str = include_str!("../../../assets/reference/forward.js");
/// The internal module name miniflare registers the client under.
pub const CLIENT_MODULE: &str = "cloudflare-internal:ratelimit:module";

impl Simulator {
    /// Reads the pinned miniflare's worker files from `npm_dir/node_modules`,
    /// running `npm ci --ignore-scripts` there first when it is not installed.
    pub fn load(npm_dir: &Path) -> Result<Simulator, ReferenceError> {
        let package = npm_dir.join("node_modules/miniflare");
        let manifest = package.join("package.json");
        install_pinned(npm_dir)?;
        let read = |path: PathBuf| {
            std::fs::read_to_string(&path).map_err(|source| ReferenceError::Read { path, source })
        };
        let manifest_text = read(manifest.clone())?;
        let found = serde_json::from_str::<serde_json::Value>(&manifest_text)
            .ok()
            .and_then(|v| v["version"].as_str().map(str::to_owned))
            .unwrap_or_default();
        if found != MINIFLARE_VERSION {
            return Err(ReferenceError::Version {
                path: package,
                found,
            });
        }
        let workers = package.join("dist/src/workers");
        Ok(Simulator {
            client_js: read(workers.join("ratelimit/ratelimit.worker.js"))?,
            object_js: read(workers.join("ratelimit/ratelimit-object.worker.js"))?,
            object_entry_js: read(workers.join("shared/object-entry.worker.js"))?,
            shared_js: read(workers.join("shared/index.worker.js"))?,
        })
    }

    /// Placeholder files, for tests of the configs that name them.
    #[cfg(test)]
    pub(crate) fn placeholder() -> Simulator {
        Simulator {
            client_js: "// client".into(),
            object_js: "// object".into(),
            object_entry_js: "// entry".into(),
            shared_js: "// shared".into(),
        }
    }

    /// Writes the shared reference process's config and its modules into
    /// `dir` (the scenario's temporary directory); the counters' SQLite files
    /// go in `storage`, new for each scenario ([`fresh_storage`]). Run it
    /// with `workerd serve --experimental` ([`STORE_FLAGS`]).
    pub fn write_reference_config(&self, dir: &Path, storage: &Path) -> std::io::Result<PathBuf> {
        let files = [
            ("reference-store-entry.js", STORE_ENTRY_JS),
            ("reference-clock.js", CLOCK_JS),
            ("ratelimit-object.worker.js", self.object_js.as_str()),
            ("object-entry.worker.js", self.object_entry_js.as_str()),
            ("miniflare-shared.worker.js", self.shared_js.as_str()),
        ];
        for (name, text) in files {
            std::fs::write(dir.join(name), text)?;
        }
        let path = dir.join("reference-store.capnp");
        std::fs::write(&path, store_config_text(storage))?;
        Ok(path)
    }
}

/// A new, empty directory for one scenario's counters, removed when dropped.
/// In memory (`/dev/shm`) where there is one: the simulator writes SQLite on
/// every call, and on a disk that doubled its median latency and
/// quadrupled its p99 on a loaded machine (BENCHMARKS.md).
pub fn fresh_storage() -> std::io::Result<tempfile::TempDir> {
    let mut builder = tempfile::Builder::new();
    builder.prefix("harness-reference-");
    let memory = Path::new("/dev/shm");
    if memory.is_dir()
        && let Ok(dir) = builder.tempdir_in(memory)
    {
        return Ok(dir);
    }
    builder.tempdir()
}

/// The flags the reference process needs: the simulator's object uses the
/// `experimental` compatibility flag, as miniflare runs it.
pub const STORE_FLAGS: &[&str] = &["--experimental"];

/// The reference process's config: miniflare's services and names
/// (`ratelimit:ns:entry`, `ratelimit:ns`, `ratelimit:storage`, the object's
/// unique key and compatibility settings), behind one socket.
fn store_config_text(storage: &Path) -> String {
    let storage = serde_json::to_string(&storage.to_string_lossy()).unwrap_or_default();
    format!(
        r#"# Generated by the conformance harness for one scenario; not for editing.
# Cloudflare's rate-limit simulator (miniflare {MINIFLARE_VERSION}), wired as miniflare wires it.
using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [
    (name = "reference", worker = (
      modules = [ (name = "reference-store-entry.js", esModule = embed "reference-store-entry.js") ],
      compatibilityDate = "2023-07-24",
      bindings = [
        (name = "ENTRY", service = "ratelimit:ns:entry"),
        (name = "CLOCK", service = "ratelimit:ns"),
      ],
    )),
    (name = "ratelimit:ns:entry", worker = (
      modules = [ (name = "object-entry.worker.js", esModule = embed "object-entry.worker.js") ],
      compatibilityDate = "2023-07-24",
      bindings = [
        (name = "MINIFLARE_OBJECT", durableObjectNamespace = (serviceName = "ratelimit:ns", className = "RateLimiterObject")),
      ],
    )),
    (name = "ratelimit:ns", worker = (
      modules = [
        (name = "reference-clock.js", esModule = embed "reference-clock.js"),
        (name = "ratelimit-object.worker.js", esModule = embed "ratelimit-object.worker.js"),
      ],
      compatibilityDate = "2023-07-24",
      compatibilityFlags = ["nodejs_compat", "experimental"],
      durableObjectNamespaces = [
        (className = "RateLimiterObject", uniqueKey = "miniflare-RateLimiterObject", enableSql = true),
      ],
      durableObjectStorage = (localDisk = "ratelimit:storage"),
    )),
    (name = "ratelimit:storage", disk = (path = {storage}, writable = true)),
  ],
  sockets = [ (name = "http", address = "127.0.0.1:0", http = (), service = "reference") ],
  extensions = [ (modules = [
    (name = "miniflare:shared", esModule = embed "miniflare-shared.worker.js"),
  ]) ],
  logging = (structuredLogging = true),
);
"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_core_variable_names_one_of_two_cores() {
        assert_eq!(
            CoreChoice::parse("reference").ok(),
            Some(CoreChoice::Reference)
        );
        assert_eq!(CoreChoice::parse("harness").ok(), Some(CoreChoice::Harness));
        assert_eq!(CoreChoice::parse("").ok(), Some(CoreChoice::Harness));
        let error = CoreChoice::parse("miniflare").err().map(|e| e.to_string());
        assert_eq!(
            error.as_deref(),
            Some(
                "HARNESS_BINDING=\"miniflare\" names no counting core; use `harness` or `reference`"
            )
        );
    }

    #[test]
    fn the_store_config_keeps_counts_in_the_given_directory() {
        let text = store_config_text(Path::new("/tmp/x/reference-storage"));
        assert!(
            text.contains(r#"disk = (path = "/tmp/x/reference-storage", writable = true)"#),
            "{text}"
        );
        assert!(text.contains("enableSql = true"), "{text}");
        assert!(
            text.contains(r#"compatibilityFlags = ["nodejs_compat", "experimental"]"#),
            "{text}"
        );
    }
}
