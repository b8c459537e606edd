//! What every child process of the harness has in common (workerd,
//! `native-fixture`, `redis-server`): it never outlives the harness
//! ([`die_with_harness`]), and what it writes is kept line by line with the
//! time since the scenario started ([`Log`]).
#![allow(
    unsafe_code,
    reason = "die_with_harness sets PR_SET_PDEATHSIG in the child between fork and exec (pre_exec), which only unsafe code can"
)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::Command;

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

/// Everything on stderr so far, as one text.
pub fn stderr_text(log: &Log) -> String {
    let lines = log.lock().map(|l| l.clone()).unwrap_or_default();
    lines
        .iter()
        .filter(|l| l.stream == Stream::Stderr)
        .map(|l| l.text.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Keeps every line of `stream` in `log`, stamped with the time since `epoch`,
/// until the stream ends.
pub async fn keep_lines(stream: impl AsyncRead + Unpin, which: Stream, log: Log, epoch: Instant) {
    let mut lines = BufReader::new(stream).lines();
    while let Ok(Some(text)) = lines.next_line().await {
        if let Ok(mut log) = log.lock() {
            log.push(LogLine {
                at: epoch.elapsed(),
                stream: which,
                text,
            });
        }
    }
}
