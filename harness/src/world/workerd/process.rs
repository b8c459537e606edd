//! One workerd process: started on a generated config, listening on a port it
//! reports on `--control-fd`, its output kept with timestamps, and killed when
//! dropped. `PR_SET_PDEATHSIG` kills it too if the harness dies some other
//! way (a signal, an abort): no workerd outlives the harness.
#![allow(
    unsafe_code,
    reason = "workerd reports its port on fd 3: the pipe is put there between fork and exec (pre_exec), which only unsafe code can"
)]

use crate::world::process::child_command;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::world::process::{
    Log, LogLine, LogReaders, LogUnfinished, Stream, die_with_harness, stderr_of,
};

/// How long workerd may take to listen before it counts as failed to start.
pub const LISTEN_TIMEOUT: Duration = Duration::from_secs(30);

/// Why workerd could not be started or stopped working.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    /// The binary could not be started.
    #[error("could not start {path}: {source}")]
    Spawn {
        /// The binary.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The pipe workerd reports its port on could not be made.
    #[error("could not make the control pipe: {0}")]
    Pipe(std::io::Error),
    /// It exited before listening: usually a config it refused, which its stderr explains.
    #[error("workerd exited before listening ({status}); its stderr:\n{stderr}")]
    ExitedBeforeListening {
        /// Its exit status.
        status: String,
        /// What it wrote on stderr.
        stderr: String,
    },
    /// It did not listen in time.
    #[error("workerd did not listen within {timeout:?}; its stderr:\n{stderr}")]
    ListenTimeout {
        /// How long it was given.
        timeout: Duration,
        /// What it wrote on stderr.
        stderr: String,
    },
}

/// A running workerd.
pub struct WorkerdProcess {
    child: Child,
    /// The port of its `http` socket.
    pub port: u16,
    /// What it has written, kept for the scenario's record and failure reports.
    pub log: Log,
    readers: LogReaders,
    /// How long it took from spawn to the listen event.
    pub start_to_listen: Duration,
}

impl WorkerdProcess {
    /// Starts `workerd serve CONFIG --control-fd=3` and waits for it to listen.
    /// `epoch` is the scenario's start, for log timestamps.
    pub async fn start(
        workerd: &Path,
        config: &Path,
        epoch: Instant,
    ) -> Result<WorkerdProcess, ProcessError> {
        WorkerdProcess::start_with_flags(workerd, config, &[], epoch).await
    }

    /// [`WorkerdProcess::start`] with extra `serve` flags, such as `--experimental`.
    pub async fn start_with_flags(
        workerd: &Path,
        config: &Path,
        flags: &[&str],
        epoch: Instant,
    ) -> Result<WorkerdProcess, ProcessError> {
        // Close-on-exec, so workerds started by other threads never inherit it.
        let (control_read, control_write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
            .map_err(|e| ProcessError::Pipe(e.into()))?;
        let control_fd = control_write.as_raw_fd();
        let mut command = Command::from(child_command(workerd));
        command
            .arg("serve")
            .arg(config)
            .arg("--control-fd=3")
            .args(flags)
            .current_dir(config.parent().unwrap_or(Path::new(".")))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        die_with_harness(&mut command);
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            command.pre_exec(move || {
                // fd 3 without close-on-exec: dup2 clears it, unless it is fd 3 already.
                let ok = if control_fd == 3 {
                    libc::fcntl(3, libc::F_SETFD, 0) >= 0
                } else {
                    libc::dup2(control_fd, 3) >= 0
                };
                if !ok {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let spawned_at = Instant::now();
        let mut child = command.spawn().map_err(|source| ProcessError::Spawn {
            path: workerd.to_owned(),
            source,
        })?;
        drop(control_write);

        let log: Log = Arc::new(Mutex::new(Vec::new()));
        let mut readers = LogReaders::default();
        if let Some(out) = child.stdout.take() {
            readers.read(out, Stream::Stdout, &log, epoch);
        }
        if let Some(err) = child.stderr.take() {
            readers.read(err, Stream::Stderr, &log, epoch);
        }

        let listened = tokio::time::timeout(LISTEN_TIMEOUT, wait_for_listen(control_read)).await;
        match listened {
            Ok(Some(port)) => Ok(WorkerdProcess {
                child,
                port,
                log,
                readers,
                start_to_listen: spawned_at.elapsed(),
            }),
            Ok(None) => {
                let status = child
                    .wait()
                    .await
                    .map(|s| s.to_string())
                    .unwrap_or_else(|e| e.to_string());
                Err(ProcessError::ExitedBeforeListening {
                    status,
                    stderr: stderr_of(&readers.to_end_or_so_far(&log).await),
                })
            }
            Err(_) => {
                let _ = child.kill().await;
                Err(ProcessError::ListenTimeout {
                    timeout: LISTEN_TIMEOUT,
                    stderr: stderr_of(&readers.to_end_or_so_far(&log).await),
                })
            }
        }
    }

    /// The base URL of its `http` socket.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Its exit status, if it has exited (crashed, or refused its config).
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Waits until it exits by itself; its exit status, in words.
    pub async fn wait(&mut self) -> String {
        match self.child.wait().await {
            Ok(status) => status.to_string(),
            Err(e) => e.to_string(),
        }
    }

    /// Kills it, waits for it to go, then reads what it wrote to the end,
    /// its last lines included.
    pub async fn stop(mut self) -> Result<Vec<LogLine>, LogUnfinished> {
        // An error here is a process already gone: its streams end all the same.
        let _ = self.child.kill().await;
        self.readers.to_end(&self.log).await
    }
}

/// Reads the control fd until the `http` socket's listen event; `None` if
/// workerd closed it first (it exited).
async fn wait_for_listen(control: OwnedFd) -> Option<u16> {
    let receiver = tokio::net::unix::pipe::Receiver::from_owned_fd(control).ok()?;
    let mut lines = BufReader::new(receiver).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let Ok(event) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        if event["event"] == "listen" && event["socket"] == "http" {
            return event["port"].as_u64().and_then(|p| u16::try_from(p).ok());
        }
    }
    None
}
