//! A Worker's tail on Cloudflare: the WebSocket the API hands out
//! (`POST .../tails` gives its URL), spoken as wrangler speaks it:
//! subprotocol `trace-v1`, `{"debug":false}` once open, then one JSON event
//! per frame, each with the invocation's `logs[]` and `exceptions[]`.
//!
//! Each log becomes a line shaped as workerd's structured logging writes
//! one (`{"timestamp","level","message"}`), so the local run's log checks
//! (`rate_limits.fallback` lines, no key in any line) read both alike.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use tokio::sync::Notify;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;

use crate::world::process::{LogLine, Stream};

/// The tail's subprotocol.
pub const SUBPROTOCOL: &str = "trace-v1";
/// The first message, once open: no debug events, only the Worker's own.
pub const FIRST_MESSAGE: &str = r#"{"debug":false}"#;
/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// Why the tail could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TailError {
    /// The URL the API gave is not a WebSocket URL.
    #[error("the tail's URL is not a WebSocket URL: {0}")]
    Url(String),
    /// The connection failed.
    #[error("cannot connect to the tail: {0}")]
    Connect(String),
    /// The tail answered with another subprotocol, or none.
    #[error("the tail answered with subprotocol {0:?}, not {SUBPROTOCOL}")]
    Subprotocol(Option<String>),
    /// The first message could not be sent.
    #[error("cannot send {FIRST_MESSAGE} to the tail: {0}")]
    Send(String),
}

/// One event of the tail, read (no I/O).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TailEvent {
    /// Its logs and exceptions as log lines' text, in order, with their streams.
    pub lines: Vec<(Stream, String)>,
    /// The path of the request it was for.
    pub request_path: Option<String>,
    /// The address Cloudflare saw the request come from (`CF-Connecting-IP`).
    pub address: Option<String>,
    /// When the invocation began on Cloudflare's clock (`eventTimestamp`,
    /// ms since the Unix epoch): where its lines are placed.
    pub timestamp_ms: Option<u64>,
}

/// Reads one frame's event. An event of another kind (a scheduled one, a
/// queue's) has no request and may have logs all the same.
pub fn read_event(text: &str) -> Result<TailEvent, String> {
    let event: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("a tail frame that is no JSON ({e})"))?;
    if !event.is_object() {
        return Err(format!("a tail frame that is no event: {text}"));
    }
    let mut lines = Vec::new();
    for log in event["logs"].as_array().into_iter().flatten() {
        let level = log["level"].as_str().unwrap_or("log");
        let parts: Vec<String> = log["message"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|part| match part {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect();
        let stream = match level {
            "warn" | "error" => Stream::Stderr,
            _ => Stream::Stdout,
        };
        let line = serde_json::json!({
            "timestamp": log["timestamp"],
            "level": level,
            "message": parts.join(" "),
        });
        lines.push((stream, line.to_string()));
    }
    for exception in event["exceptions"].as_array().into_iter().flatten() {
        let line = serde_json::json!({
            "timestamp": exception["timestamp"],
            "level": "error",
            "message": format!(
                "uncaught {}: {}",
                exception["name"].as_str().unwrap_or("Error"),
                exception["message"].as_str().unwrap_or("")
            ),
        });
        lines.push((Stream::Stderr, line.to_string()));
    }
    let request = &event["event"]["request"];
    let request_path = request["url"].as_str().map(|url| {
        let after_scheme = url.split_once("://").map_or(url, |(_, rest)| rest);
        let path = after_scheme.find('/').map_or("/", |at| &after_scheme[at..]);
        path.split(['?', '#']).next().unwrap_or("/").to_owned()
    });
    let headers = &request["headers"];
    let address = headers
        .as_object()
        .and_then(|h| {
            h.iter()
                .find(|(name, _)| name.eq_ignore_ascii_case(runtime::limiter::ADDRESS_HEADER))
        })
        .and_then(|(_, v)| v.as_str())
        .map(str::to_owned);
    Ok(TailEvent {
        lines,
        request_path,
        address,
        timestamp_ms: event["eventTimestamp"].as_u64(),
    })
}

/// When a line of an event stamped `timestamp_ms` (Cloudflare's clock, ms
/// since the Unix epoch) that arrived `arrived` after the epoch (on the
/// wall clock, `epoch_wall_ms`) happened, since the epoch: at the event's
/// time, which the tail delivers up to seconds later, when it falls between
/// the epoch and the arrival; else (no stamp, or a clock that disagrees)
/// at the arrival.
pub fn placed(timestamp_ms: Option<u64>, epoch_wall_ms: u64, arrived: Duration) -> Duration {
    timestamp_ms
        .and_then(|stamp| stamp.checked_sub(epoch_wall_ms))
        .map(Duration::from_millis)
        .filter(|at| *at <= arrived)
        .unwrap_or(arrived)
}

/// What the tail has delivered so far.
#[derive(Debug, Clone, Default)]
pub struct TailRecord {
    /// Every log and exception line, in arrival order.
    pub lines: Vec<LogLine>,
    /// The path of each event's request, in arrival order.
    pub request_paths: Vec<String>,
    /// The addresses the requests came from, as Cloudflare saw them.
    pub addresses: BTreeSet<String>,
    /// Frames that could not be read, and why the tail ended early, if it did.
    pub problems: Vec<String>,
}

/// An open tail, read in the background; dropped, it stops reading.
pub struct Tail {
    record: Arc<Mutex<TailRecord>>,
    arrived: Arc<Notify>,
    reader: tokio::task::JoinHandle<()>,
    closer: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for Tail {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl Tail {
    /// Connects to `url` with subprotocol `trace-v1` and sends `{"debug":false}`.
    /// Lines are timed from `epoch`, at their event's time ([`placed`]).
    pub async fn connect(url: &str, epoch: Instant) -> Result<Tail, TailError> {
        let epoch_wall_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64)
            .saturating_sub(epoch.elapsed().as_millis() as u64);
        let mut request = url
            .into_client_request()
            .map_err(|e| TailError::Url(e.to_string()))?;
        request.headers_mut().insert(
            "Sec-WebSocket-Protocol",
            HeaderValue::from_static(SUBPROTOCOL),
        );
        let (socket, response) =
            tokio::time::timeout(CONNECT_TIMEOUT, tokio_tungstenite::connect_async(request))
                .await
                .map_err(|_| TailError::Connect(format!("no answer in {CONNECT_TIMEOUT:?}")))?
                .map_err(|e| TailError::Connect(e.to_string()))?;
        let chosen = response
            .headers()
            .get("Sec-WebSocket-Protocol")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        if chosen.as_deref() != Some(SUBPROTOCOL) {
            return Err(TailError::Subprotocol(chosen));
        }
        let (mut sink, mut stream) = socket.split();
        sink.send(Message::text(FIRST_MESSAGE))
            .await
            .map_err(|e| TailError::Send(e.to_string()))?;
        let record = Arc::new(Mutex::new(TailRecord::default()));
        let arrived = Arc::new(Notify::new());
        let (closer, mut close) = tokio::sync::oneshot::channel::<()>();
        let reader = {
            let record = record.clone();
            let arrived = arrived.clone();
            tokio::spawn(async move {
                loop {
                    let frame = tokio::select! {
                        _ = &mut close => {
                            let _ = sink.send(Message::Close(None)).await;
                            break;
                        }
                        frame = stream.next() => frame,
                    };
                    let text = match frame {
                        Some(Ok(Message::Text(text))) => text.to_string(),
                        Some(Ok(Message::Binary(bytes))) => {
                            String::from_utf8_lossy(&bytes).into_owned()
                        }
                        Some(Ok(Message::Close(_))) | None => break,
                        Some(Ok(_)) => continue,
                        Some(Err(e)) => {
                            lock(&record).problems.push(format!("the tail broke: {e}"));
                            break;
                        }
                    };
                    let came = epoch.elapsed();
                    {
                        let mut record = lock(&record);
                        match read_event(&text) {
                            Ok(event) => {
                                let at = placed(event.timestamp_ms, epoch_wall_ms, came);
                                for (stream, text) in event.lines {
                                    record.lines.push(LogLine { at, stream, text });
                                }
                                if let Some(path) = event.request_path {
                                    record.request_paths.push(path);
                                }
                                record.addresses.extend(event.address);
                            }
                            Err(problem) => record.problems.push(problem),
                        }
                    }
                    arrived.notify_waiters();
                }
                arrived.notify_waiters();
            })
        };
        Ok(Tail {
            record,
            arrived,
            reader,
            closer: Some(closer),
        })
    }

    /// Waits until the tail has delivered events for `count` requests whose
    /// path `counts` accepts, or `quiet` passes without a frame, or `most`
    /// in all (the tail samples under heavy traffic, so not every request
    /// need arrive).
    pub async fn settle(
        &self,
        count: usize,
        counts: impl Fn(&str) -> bool,
        quiet: Duration,
        most: Duration,
    ) {
        let deadline = Instant::now() + most;
        loop {
            let seen = lock(&self.record)
                .request_paths
                .iter()
                .filter(|p| counts(p))
                .count();
            if seen >= count || self.reader.is_finished() {
                return;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            let notified = self.arrived.notified();
            if tokio::time::timeout(quiet.min(left), notified)
                .await
                .is_err()
            {
                return;
            }
        }
    }

    /// Closes the WebSocket and gives what it delivered.
    pub async fn close(mut self) -> TailRecord {
        if let Some(closer) = self.closer.take() {
            let _ = closer.send(());
        }
        // The reader ends when the tail answers the close (dropping `self` stops it anyway).
        let _ = tokio::time::timeout(Duration::from_secs(2), &mut self.reader).await;
        std::mem::take(&mut *lock(&self.record))
    }
}

fn lock(record: &Mutex<TailRecord>) -> std::sync::MutexGuard<'_, TailRecord> {
    record
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_s_logs_and_exceptions_become_structured_lines() {
        let frame = r#"{
            "outcome": "ok", "scriptName": "s-1", "eventTimestamp": 1700000000000,
            "exceptions": [{"name": "TypeError", "message": "x is undefined", "timestamp": 1700000000002}],
            "logs": [
              {"message": ["{\"event\":\"rate_limits.fallback\",\"binding\":\"LIMITS_120_PER_60S\",\"reason\":\"missing\"}"], "level": "warn", "timestamp": 1700000000001},
              {"message": ["a", 1, {"b": true}], "level": "log", "timestamp": 1700000000001}
            ],
            "event": {"request": {"url": "https://s-1.acct.workers.dev/api/items?x=1", "method": "GET",
              "headers": {"cf-connecting-ip": "198.51.100.4", "x-test-caller": "caller-1"}, "cf": {}}}
        }"#;
        let event = read_event(frame).expect("an event");
        assert_eq!(event.request_path.as_deref(), Some("/api/items"));
        assert_eq!(event.address.as_deref(), Some("198.51.100.4"));
        assert_eq!(event.lines.len(), 3);
        let (stream, fallback) = &event.lines[0];
        assert_eq!(*stream, Stream::Stderr);
        let json: serde_json::Value = serde_json::from_str(fallback).expect("JSON");
        assert_eq!(json["level"], "warn");
        assert_eq!(
            json["message"],
            r#"{"event":"rate_limits.fallback","binding":"LIMITS_120_PER_60S","reason":"missing"}"#
        );
        assert!(event.lines[1].1.contains(r#""message":"a 1 {\"b\":true}""#));
        assert!(
            event.lines[2]
                .1
                .contains("uncaught TypeError: x is undefined")
        );
        assert_eq!(event.timestamp_ms, Some(1_700_000_000_000));
        assert!(read_event("not json").is_err());
        assert!(read_event("[1]").is_err());
    }

    #[test]
    fn a_line_is_placed_at_its_event_s_time_when_the_clocks_agree() {
        let ms = Duration::from_millis;
        // Stamped 300 ms after the epoch, arrived at 2.5 s: at 300 ms.
        assert_eq!(placed(Some(10_300), 10_000, ms(2_500)), ms(300));
        // No stamp, one before the epoch, or one after the arrival: at the arrival.
        assert_eq!(placed(None, 10_000, ms(2_500)), ms(2_500));
        assert_eq!(placed(Some(9_000), 10_000, ms(2_500)), ms(2_500));
        assert_eq!(placed(Some(13_000), 10_000, ms(2_500)), ms(2_500));
    }
}
