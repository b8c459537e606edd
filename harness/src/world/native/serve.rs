//! `harness native`: a native deployable's instances (and, with `--redis`, a
//! fresh redis-server its store points at) running until Ctrl-C, for trying
//! it by hand and for the lifetime tests. Each process is announced on stdout
//! as a JSON line, `{"process":"redis"|"instance","url","pid"}`.

use std::path::Path;
use std::time::Instant;

use super::launch::with_store;
use super::{NativeError, NativeProcess, fixture_path};
use crate::world::redis::{RedisError, RedisServer};
use crate::world::scenario_redis::StoreAddress;

/// Why `harness native` could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The application description could not be read or rewritten.
    #[error("{path}: {message}")]
    Application {
        /// The description's path.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// redis-server did not start.
    #[error(transparent)]
    Redis(#[from] RedisError),
    /// An instance did not start.
    #[error(transparent)]
    Native(#[from] NativeError),
    /// Ctrl-C, which stops everything, could not be listened for.
    #[error("cannot listen for Ctrl-C: {0}")]
    CtrlC(std::io::Error),
}

fn announce(process: &str, url: &str, pid: Option<u32>) {
    println!(
        "{}",
        serde_json::json!({ "process": process, "url": url, "pid": pid })
    );
}

/// Starts everything, announces it, and waits for Ctrl-C; every process is
/// killed when this returns (or the harness dies).
pub async fn serve(
    application: &Path,
    deployable: &str,
    instances: usize,
    redis: bool,
) -> Result<(), ServeError> {
    let error = |message: String| ServeError::Application {
        path: application.display().to_string(),
        message,
    };
    // Listening for Ctrl-C before anything is announced: a SIGINT right
    // after the last announcement stops everything cleanly, never killing
    // the harness with the default action.
    let mut interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .map_err(ServeError::CtrlC)?;
    let source = std::fs::read_to_string(application).map_err(|e| error(e.to_string()))?;
    let dir = tempfile::tempdir().map_err(|e| error(e.to_string()))?;
    let server = if redis {
        let server = RedisServer::start().await?;
        announce("redis", &server.url(), server.pid());
        Some(server)
    } else {
        None
    };
    let source = match &server {
        Some(server) => with_store(&source, &StoreAddress::Url(server.url())).map_err(error)?,
        None => source,
    };
    let path = dir.path().join("application.toml");
    std::fs::write(&path, source).map_err(|e| error(e.to_string()))?;
    let fixture = fixture_path()?;
    let mut running = Vec::new();
    for _ in 0..instances {
        let instance = NativeProcess::start(&fixture, &path, deployable, Instant::now()).await?;
        announce("instance", &instance.url(), instance.pid());
        running.push(instance);
    }
    interrupt.recv().await;
    for instance in running {
        // Nobody reads a hand-run instance's log: its lines are dropped.
        drop(instance.stop().await);
    }
    drop(server);
    Ok(())
}
