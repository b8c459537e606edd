//! What every child process of the harness has in common (workerd,
//! `native-fixture`, `redis-server`): it never outlives the harness
//! ([`die_with_harness`], and Ctrl-C stops the harness however it was
//! started: [`stop_on_interrupt`]), and what it writes is kept line by line
//! with the time since the scenario started ([`Log`]), read to its end once
//! it is gone ([`LogReaders`]). Every child starts from [`child_command`],
//! so none inherits the Cloudflare credentials.
#![allow(
    unsafe_code,
    reason = "die_with_harness sets PR_SET_PDEATHSIG in the child between fork and exec (pre_exec), and stop_on_interrupt sets a signal's disposition: only unsafe code can"
)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::Command;
use tokio::task::JoinHandle;

/// The environment variables that hold the Cloudflare account's secret and
/// its id: only the harness's own API client reads them (spelled here, as
/// `world::cloudflare` sits beside this module and imports it; its
/// credentials' tests check the two agree).
pub(crate) const CLOUDFLARE_SECRETS: [&str; 2] = ["CLOUDFLARE_API_TOKEN", "CLOUDFLARE_ACCOUNT_ID"];

/// The command every child process of the harness starts from (cargo, npm,
/// rustup, workerd, redis-server, native-fixture, wasm tools...): the
/// harness's environment without the Cloudflare credentials, which a child
/// has no use for and could leak (a build script, a crash dump, a log of
/// its environment). Async callers wrap it: `tokio::process::Command::from`.
pub fn child_command(program: impl AsRef<std::ffi::OsStr>) -> std::process::Command {
    let mut command = std::process::Command::new(program);
    for secret in CLOUDFLARE_SECRETS {
        command.env_remove(secret);
    }
    command
}

/// Which of a process's streams a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error: a failure report shows only these lines.
    Stderr,
}

/// One line a process wrote, with when (since the scenario started).
#[derive(Debug, Clone)]
pub struct LogLine {
    /// When, since the scenario started: failure reports show it beside the steps.
    pub at: Duration,
    /// Which stream.
    pub stream: Stream,
    /// The line, without its newline.
    pub text: String,
}

/// The lines a process has written so far, shared with the tasks reading them.
pub type Log = Arc<Mutex<Vec<LogLine>>>;

/// Makes a child started by `command` die with the harness: killed when
/// dropped, and `PR_SET_PDEATHSIG` (SIGKILL) if the harness dies some other
/// way. It follows the spawning thread, so spawn from a thread that lives as
/// long as the child (the harness's runtime threads do).
pub fn die_with_harness(command: &mut Command) {
    command.kill_on_drop(true);
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The harness may already be gone: then die now, not later.
            if libc::getppid() == 1 {
                return Err(std::io::Error::other("the harness exited"));
            }
            Ok(())
        });
    }
}

/// Makes SIGINT (Ctrl-C, `kill -INT`) stop the harness with its default
/// action, whatever disposition it inherited; its children then die by
/// `PR_SET_PDEATHSIG` ([`die_with_harness`]). A shell without job control
/// (a CI script's `cargo test ... &`) starts a background command with
/// SIGINT ignored, and ignored signals stay ignored across `exec`, down to
/// the harness: it would then run its scenarios to the end, children and
/// all, after being told to stop. Commands that wait for Ctrl-C (`harness
/// native`, `harness cloudflare`) install their own handler on top of this.
pub fn stop_on_interrupt() -> nix::Result<()> {
    use nix::sys::signal::{SigHandler, Signal, signal};
    // SAFETY: the default action installs no handler: no code of ours runs
    // in a signal's context.
    unsafe { signal(Signal::SIGINT, SigHandler::SigDfl) }.map(drop)
}

/// Everything on stderr so far, as one text.
pub fn stderr_text(log: &Log) -> String {
    stderr_of(&log.lock().map(|l| l.clone()).unwrap_or_default())
}

/// The stderr lines among `lines`, as one text.
pub fn stderr_of(lines: &[LogLine]) -> String {
    lines
        .iter()
        .filter(|l| l.stream == Stream::Stderr)
        .map(|l| l.text.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// How long a killed process's output may take to reach its end. A pipe
/// ends as soon as its writer is gone, so this is only reached when
/// something else holds it open (a grandchild that inherited it); the log
/// is then reported unfinished rather than waited for without end.
pub const READ_TO_END_TIMEOUT: Duration = Duration::from_secs(5);

/// A log whose streams did not end within [`READ_TO_END_TIMEOUT`] of the
/// process being killed: its last lines may be missing.
#[derive(Debug, thiserror::Error)]
#[error(
    "its output did not end within {READ_TO_END_TIMEOUT:?} of it being killed (something else holds its pipes open), so its last lines may be missing"
)]
pub struct LogUnfinished {
    /// The lines read until then.
    pub lines: Vec<LogLine>,
}

/// The tasks reading a child's streams into its [`Log`]. Scenarios judge
/// every line a process wrote (fallback lines, no key), so its log is taken
/// once these have read each stream to its end, after the process is gone,
/// never after a guess of how long the readers need.
#[derive(Debug, Default)]
pub struct LogReaders(Vec<JoinHandle<()>>);

impl LogReaders {
    /// Keeps every line of `stream` in `log`, stamped with the time since `epoch`.
    pub fn read(
        &mut self,
        stream: impl AsyncRead + Unpin + Send + 'static,
        which: Stream,
        log: &Log,
        epoch: Instant,
    ) {
        self.0
            .push(tokio::spawn(keep_lines(stream, which, log.clone(), epoch)));
    }

    /// Every line of `log` once each stream has ended: call it when the
    /// process is gone (killed, or exited). At most [`READ_TO_END_TIMEOUT`].
    pub async fn to_end(self, log: &Log) -> Result<Vec<LogLine>, LogUnfinished> {
        let aborts: Vec<_> = self.0.iter().map(JoinHandle::abort_handle).collect();
        let ended = tokio::time::timeout(READ_TO_END_TIMEOUT, futures::future::join_all(self.0))
            .await
            .is_ok();
        let lines = log.lock().map(|l| l.clone()).unwrap_or_default();
        if ended {
            Ok(lines)
        } else {
            for abort in aborts {
                abort.abort();
            }
            Err(LogUnfinished { lines })
        }
    }

    /// [`LogReaders::to_end`] for an error quoting a failed start's stderr:
    /// the lines read until then if the streams did not end in time.
    pub async fn to_end_or_so_far(self, log: &Log) -> Vec<LogLine> {
        self.to_end(log)
            .await
            .unwrap_or_else(|unfinished| unfinished.lines)
    }
}

/// Keeps every line of `stream` in `log`, stamped with the time since `epoch`,
/// until the stream ends. A line that is not UTF-8 is kept (lossily), not
/// the end of reading: the rest of the stream still counts.
async fn keep_lines(stream: impl AsyncRead + Unpin, which: Stream, log: Log, epoch: Instant) {
    let mut reader = BufReader::new(stream);
    let mut line = Vec::new();
    while let Ok(read) = reader.read_until(b'\n', &mut line).await {
        if read == 0 {
            break;
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.strip_suffix('\n').unwrap_or(&text);
        let text = text.strip_suffix('\r').unwrap_or(text).to_owned();
        if let Ok(mut log) = log.lock() {
            log.push(LogLine {
                at: epoch.elapsed(),
                stream: which,
                text,
            });
        }
        line.clear();
    }
}

#[cfg(test)]
mod tests {
    use std::process::Stdio;

    use super::*;

    /// `sh -c script` with its stdout read into a log.
    fn spawn(script: &str) -> (tokio::process::Child, Log, LogReaders) {
        let mut child = Command::from(child_command("sh"))
            .args(["-c", script])
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("sh starts");
        let log: Log = Arc::new(Mutex::new(Vec::new()));
        let mut readers = LogReaders::default();
        let stdout = child.stdout.take().expect("stdout");
        readers.read(stdout, Stream::Stdout, &log, Instant::now());
        (child, log, readers)
    }

    /// Lines still in the pipe when the process is killed are read: on a
    /// single thread the reader cannot run until `to_end` awaits it, so
    /// nothing is read before the kill and every line after it.
    #[tokio::test(flavor = "current_thread")]
    async fn the_lines_written_before_the_kill_are_all_read() {
        let dir = tempfile::tempdir().expect("temp dir");
        let written = dir.path().join("written");
        // 5000 lines (24 KB) fit in the pipe, so `seq` never waits for the reader.
        let script = format!("seq 1 5000; touch '{}'; exec sleep 60", written.display());
        let (mut child, log, readers) = spawn(&script);
        while !written.exists() {
            std::thread::sleep(Duration::from_millis(5));
        }
        child.start_kill().expect("killed");
        assert!(log.lock().expect("log").is_empty(), "nothing read yet");
        let lines = readers.to_end(&log).await.expect("the pipe ended");
        assert_eq!(lines.len(), 5000);
        assert_eq!(lines.last().map(|l| l.text.as_str()), Some("5000"));
    }

    /// A pipe something else holds open is reported unfinished, with what
    /// was read, after [`READ_TO_END_TIMEOUT`] instead of a wait without end.
    #[tokio::test(flavor = "current_thread")]
    async fn a_pipe_held_open_by_another_process_is_reported_not_waited_for() {
        let (mut child, log, readers) = spawn("sleep 60 & echo $!; exec sleep 60");
        while log.lock().expect("log").is_empty() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let holder: i32 = log.lock().expect("log")[0].text.parse().expect("a pid");
        child.kill().await.expect("killed");
        let started = Instant::now();
        let outcome = readers.to_end(&log).await;
        let waited = started.elapsed();
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(holder),
            nix::sys::signal::Signal::SIGKILL,
        )
        .expect("the holder killed");
        let unfinished = outcome.expect_err("the holder keeps the pipe open");
        assert_eq!(unfinished.lines.len(), 1);
        assert!(
            waited >= READ_TO_END_TIMEOUT && waited < READ_TO_END_TIMEOUT * 2,
            "{waited:?}"
        );
        assert!(unfinished.to_string().contains("last lines may be missing"));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_line_that_is_not_utf8_does_not_end_the_reading() {
        let (child, log, readers) = spawn("printf 'a\\n\\377\\nb\\r\\nc'");
        child.wait_with_output().await.expect("exits");
        let lines = readers.to_end(&log).await.expect("ended");
        let texts: Vec<&str> = lines.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(texts, ["a", "\u{fffd}", "b", "c"]);
    }
}
