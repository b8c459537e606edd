//! Native deployables as real processes: the `native-fixture` binary (a hyper
//! server wrapping `runtime::native`, see `harness/native/main.rs`), one
//! process per instance, each reporting its port on stdout when it listens,
//! its `tracing` JSON lines kept with timestamps, killed when dropped and
//! never outliving the harness ([`die_with_harness`]).
//!
//! It uses the world's child-process plumbing (`process`), `cargo_build`
//! (the fixture is built when stale), and Redis (`redis`, `scenario_redis`:
//! where a scenario's store is, and `harness native`'s server); nothing of
//! `workerd/`.

mod fixture;
pub mod launch;
pub mod serve;

pub use fixture::FixtureError;

use crate::world::process::child_command;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, Command};

use crate::world::process::{
    Log, LogLine, LogReaders, LogUnfinished, Stream, die_with_harness, stderr_of, stderr_text,
};

/// How long an instance may take to listen.
pub const LISTEN_TIMEOUT: Duration = Duration::from_secs(15);

/// The fixture binary's name, built beside the harness's own.
pub const FIXTURE: &str = "native-fixture";

/// Why a native instance could not be started.
#[derive(Debug, thiserror::Error)]
pub enum NativeError {
    /// The fixture binary could not be built beside the harness.
    #[error(transparent)]
    Fixture(#[from] Arc<FixtureError>),
    /// The process could not be spawned.
    #[error("could not start {path}: {source}")]
    Spawn {
        /// The fixture's path.
        path: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
    /// It exited, or wrote no listen line, before listening in time.
    #[error("the native instance did not listen within {LISTEN_TIMEOUT:?}; its stderr:\n{stderr}")]
    NotListening {
        /// What it wrote on stderr.
        stderr: String,
    },
}

/// The fixture beside the running executable, built first when it is
/// missing or older than its sources ([`fixture::built_fixture`]).
pub fn fixture_path() -> Result<PathBuf, NativeError> {
    fixture::built_fixture().map_err(NativeError::Fixture)
}

/// The environment variable the native fixture takes its control token from
/// (`harness/native/main.rs` reads and clears the same name).
pub const CONTROL_TOKEN_VAR: &str = "NATIVE_FIXTURE_CONTROL_TOKEN";

/// The event native-fixture writes on stderr each time its store's state
/// gauge is raised (`{"event":..,"store":..,"state":..}`; its
/// `STORE_STATE_EVENT`): the gate raises it each time the state changes,
/// `cooling_off` when a cool-off begins (again when its probe fails),
/// `probing` when a probe starts (seen only if another request ends
/// meanwhile), `asked` when a probe answers. The report page draws a native
/// instance's cool-offs from these lines.
pub const STORE_STATE_EVENT: &str = "harness.store_state";

/// Where rustls-native-certs (and so the instance's `rediss://` client)
/// reads the authorities it trusts, in place of the platform's.
pub const TRUSTED_CA_VAR: &str = "SSL_CERT_FILE";

/// The directory of authorities rustls-native-certs reads beside
/// [`TRUSTED_CA_VAR`]. An instance given an authority does not inherit it:
/// it trusts that one alone (a machine's `SSL_CERT_DIR=/etc/ssl/certs` would
/// also have it trust every public root, and parse them all again at every
/// TLS connection: 20-100 ms each in the debug build, past the 500 ms
/// deadline on a loaded machine).
pub const TRUSTED_CA_DIR_VAR: &str = "SSL_CERT_DIR";

/// Has the process `command` starts trust `ca` alone for TLS
/// ([`TRUSTED_CA_VAR`], without [`TRUSTED_CA_DIR_VAR`]).
pub fn trust_only(command: &mut Command, ca: &Path) {
    command
        .env(TRUSTED_CA_VAR, ca)
        .env_remove(TRUSTED_CA_DIR_VAR);
}

/// One running native instance.
pub struct NativeProcess {
    child: Child,
    port: u16,
    log: Log,
    readers: LogReaders,
}

impl NativeProcess {
    /// Starts `fixture APPLICATION DEPLOYABLE` and waits for its listen line
    /// (the description's `client_address` says where it takes addresses
    /// from). `epoch` is the run's start, for log timestamps.
    pub async fn start(
        fixture: &Path,
        application: &Path,
        deployable: &str,
        epoch: Instant,
    ) -> Result<NativeProcess, NativeError> {
        Self::spawn(fixture, application, deployable, &[], &[], None, epoch).await
    }

    /// [`NativeProcess::start`], its clock moved by the harness's `POST
    /// /clock` with `control_token`. The token goes in the child's
    /// environment ([`CONTROL_TOKEN_VAR`]), never its argv: any local user
    /// reads a process's argv (`/proc/PID/cmdline`), only its owner its
    /// environment.
    ///
    /// `trusted_ca`, when given, is the instance's `SSL_CERT_FILE`: the
    /// authority it verifies a TLS Redis against, as an operator gives a
    /// private CA to rustls-native-certs, and the only one
    /// ([`TRUSTED_CA_DIR_VAR`] is not passed on).
    pub async fn start_controlled(
        fixture: &Path,
        application: &Path,
        deployable: &str,
        control_token: &str,
        trusted_ca: Option<&Path>,
        epoch: Instant,
    ) -> Result<NativeProcess, NativeError> {
        let env = [(CONTROL_TOKEN_VAR, control_token.as_ref())];
        Self::spawn(
            fixture,
            application,
            deployable,
            &[],
            &env,
            trusted_ca,
            epoch,
        )
        .await
    }

    /// [`NativeProcess::start`] with more fixture arguments (`--limiting-off` for benchmarks).
    pub async fn start_with(
        fixture: &Path,
        application: &Path,
        deployable: &str,
        extra: &[&str],
        epoch: Instant,
    ) -> Result<NativeProcess, NativeError> {
        Self::spawn(fixture, application, deployable, extra, &[], None, epoch).await
    }

    async fn spawn(
        fixture: &Path,
        application: &Path,
        deployable: &str,
        extra: &[&str],
        env: &[(&str, &std::ffi::OsStr)],
        trusted_ca: Option<&Path>,
        epoch: Instant,
    ) -> Result<NativeProcess, NativeError> {
        let mut command = Command::from(child_command(fixture));
        command.envs(env.iter().copied());
        if let Some(ca) = trusted_ca {
            trust_only(&mut command, ca);
        }
        command
            .arg(application)
            .arg(deployable)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        die_with_harness(&mut command);
        let mut child = command.spawn().map_err(|source| NativeError::Spawn {
            path: fixture.to_owned(),
            source,
        })?;
        let log: Log = Arc::new(Mutex::new(Vec::new()));
        let mut readers = LogReaders::default();
        if let Some(err) = child.stderr.take() {
            readers.read(err, Stream::Stderr, &log, epoch);
        }
        let port = match child.stdout.take() {
            Some(out) => tokio::time::timeout(LISTEN_TIMEOUT, listen_port(out))
                .await
                .ok()
                .flatten(),
            None => None,
        };
        match port {
            Some(port) => Ok(NativeProcess {
                child,
                port,
                log,
                readers,
            }),
            None => {
                // An error here is a process already gone: its stderr ends all the same.
                let _ = child.kill().await;
                Err(NativeError::NotListening {
                    stderr: stderr_of(&readers.to_end_or_so_far(&log).await),
                })
            }
        }
    }

    /// Its base URL.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Its process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Everything it wrote on stderr so far, as one text.
    pub fn stderr(&self) -> String {
        stderr_text(&self.log)
    }

    /// How it exited, if it has.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Kills it, waits for it to go, then reads what it wrote to the end,
    /// its last lines included.
    pub async fn stop(mut self) -> Result<Vec<LogLine>, LogUnfinished> {
        // An error here is a process already gone: its stderr ends all the same.
        let _ = self.child.kill().await;
        self.readers.to_end(&self.log).await
    }
}

/// The port of the first `{"event":"listen","port":N}` line on stdout.
async fn listen_port(stdout: impl AsyncRead + Unpin + Send + 'static) -> Option<u16> {
    let mut lines = BufReader::new(stdout).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let Ok(event) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        if event["event"] == "listen" {
            let port = event["port"].as_u64().and_then(|p| u16::try_from(p).ok());
            // Keep draining stdout so the instance never blocks writing it.
            tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
            return port;
        }
    }
    None
}
