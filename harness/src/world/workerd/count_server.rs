//! The harness's count server for a whole run: one workerd process
//! (`assets/count-server.js`) that every scenario's emulated bindings ask,
//! each scenario in a scope of its own (its counts and its clock), instead of
//! a store process started for every scenario.
//!
//! Why: starting a workerd costs ~85 ms of CPU, and a store per scenario was
//! ~50 of the ~120 processes of a run (BENCHMARKS-log.md, "the suite's CPU cut by half"). The store is
//! the emulation of Cloudflare's count, not the code under test, and a scope
//! gives each scenario counters and a clock no other scenario can touch.
//!
//! The process is started on first use, from a thread of its own that owns it
//! for as long as the handle lives, so its parent-death signal
//! (`PR_SET_PDEATHSIG`, which follows the spawning thread) fires only when the
//! harness itself goes; dropping the last handle stops it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use super::config::write_count_server_config;
use super::process::WorkerdProcess;
use crate::world::process::{Log, stderr_text};

/// Why the run's store is not there.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CountServerError {
    /// Its directory or config could not be written.
    #[error("could not write the count server's config: {0}")]
    Config(String),
    /// Its workerd did not start.
    #[error("the count server's workerd did not start: {0}")]
    Start(String),
    /// Its thread could not be started, or ended before the store listened.
    #[error("the count server's thread: {0}")]
    Thread(String),
    /// Its workerd exited while the run went on.
    #[error("the count server's workerd exited ({status}); its stderr:\n{stderr}")]
    Exited {
        /// Its exit status.
        status: String,
        /// What it wrote on stderr.
        stderr: String,
    },
}

/// A handle on the run's count server, cheap to clone; the process starts on
/// the first [`CountServer::port`] and stops when the last handle is dropped.
#[derive(Debug, Clone, Default)]
pub struct CountServer {
    inner: Arc<OnceLock<Result<Running, CountServerError>>>,
}

/// The started store: its port, and the thread that owns its process.
#[derive(Debug)]
struct Running {
    port: u16,
    log: Log,
    /// Set by the owning thread if the process exits by itself.
    exited: Arc<Mutex<Option<String>>>,
    stop: Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    _dir: tempfile::TempDir,
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.lock().ok().and_then(|mut s| s.take()) {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.lock().ok().and_then(|mut t| t.take()) {
            let _ = thread.join();
        }
    }
}

impl CountServer {
    /// The store's port, starting it with `workerd` on first use.
    pub fn port(&self, workerd: &Path, compatibility_date: &str) -> Result<u16, CountServerError> {
        let running = self
            .inner
            .get_or_init(|| Running::start(workerd.to_owned(), compatibility_date.to_owned()))
            .as_ref()
            .map_err(Clone::clone)?;
        running.alive()?;
        Ok(running.port)
    }

    /// An error if the store was started and has exited since.
    pub fn alive(&self) -> Result<(), CountServerError> {
        match self.inner.get() {
            Some(Ok(running)) => running.alive(),
            Some(Err(e)) => Err(e.clone()),
            None => Ok(()),
        }
    }
}

/// A fresh scope name, unique in this harness process: a scenario's counts
/// and clock in the run's store.
pub fn fresh_scope() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!("scenario-{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

impl Running {
    fn start(workerd: PathBuf, compatibility_date: String) -> Result<Running, CountServerError> {
        let dir = tempfile::Builder::new()
            .prefix("harness-count-server-")
            .tempdir()
            .map_err(|e| CountServerError::Config(e.to_string()))?;
        let config = write_count_server_config(dir.path(), &compatibility_date)
            .map_err(|e| CountServerError::Config(e.to_string()))?;
        let (ready_tx, ready_rx) =
            std::sync::mpsc::channel::<Result<(u16, Log), CountServerError>>();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let exited = Arc::new(Mutex::new(None));
        let exited_in_thread = exited.clone();
        let thread = std::thread::Builder::new()
            .name("count-server".into())
            .spawn(move || own_store(&workerd, &config, ready_tx, stop_rx, &exited_in_thread))
            .map_err(|e| CountServerError::Thread(e.to_string()))?;
        match ready_rx.recv() {
            Ok(Ok((port, log))) => Ok(Running {
                port,
                log,
                exited,
                stop: Mutex::new(Some(stop_tx)),
                thread: Mutex::new(Some(thread)),
                _dir: dir,
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => {
                let _ = thread.join();
                Err(CountServerError::Thread(
                    "it ended before the store listened".into(),
                ))
            }
        }
    }

    fn alive(&self) -> Result<(), CountServerError> {
        match self.exited.lock().ok().and_then(|e| e.clone()) {
            Some(status) => Err(CountServerError::Exited {
                status,
                stderr: stderr_text(&self.log),
            }),
            None => Ok(()),
        }
    }
}

/// The store's thread: starts the process, reports its port, and keeps it
/// (and the tasks reading its output) until told to stop or until it exits.
fn own_store(
    workerd: &Path,
    config: &Path,
    ready: std::sync::mpsc::Sender<Result<(u16, Log), CountServerError>>,
    stop: tokio::sync::oneshot::Receiver<()>,
    exited: &Mutex<Option<String>>,
) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            let _ = ready.send(Err(CountServerError::Thread(format!(
                "could not build its runtime: {e}"
            ))));
            return;
        }
    };
    runtime.block_on(async {
        let mut process = match WorkerdProcess::start(workerd, config, Instant::now()).await {
            Ok(process) => process,
            Err(e) => {
                let _ = ready.send(Err(CountServerError::Start(e.to_string())));
                return;
            }
        };
        // Nothing judges the store's log once it stops (it is quoted only
        // if the store dies mid-run), so what `stop` read is dropped.
        if ready.send(Ok((process.port, process.log.clone()))).is_err() {
            drop(process.stop().await);
            return;
        }
        tokio::select! {
            _ = stop => drop(process.stop().await),
            status = process.wait() => {
                if let Ok(mut slot) = exited.lock() {
                    *slot = Some(status);
                }
            }
        }
    });
}
