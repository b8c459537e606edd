//! What several of runtime's integration tests share: the JSON lines a gate
//! writes through `tracing`, captured while a test holds them, and an
//! application's handler behind the tower layer.
#![allow(dead_code)] // Each test binary uses its own part of this module.

use std::convert::Infallible;
use std::future::Future;
use std::io::Write;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

/// The JSON lines written through `tracing` on this thread while its guard is held.
#[derive(Clone, Default)]
pub struct Lines(Arc<Mutex<Vec<u8>>>);

impl Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("lines").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Lines {
    /// Starts capturing this thread's events as JSON lines.
    pub fn capture() -> (Lines, tracing::subscriber::DefaultGuard) {
        let lines = Lines::default();
        let writer = lines.clone();
        let subscriber = tracing_subscriber::fmt()
            .json()
            .flatten_event(true)
            .with_writer(move || writer.clone())
            .finish();
        (lines, tracing::subscriber::set_default(subscriber))
    }

    /// The events named `event`, as JSON.
    pub fn events(&self, event: &str) -> Vec<serde_json::Value> {
        self.text()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| v["event"] == event)
            .collect()
    }

    /// Everything written, as one text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().expect("lines")).into_owned()
    }
}

/// The application's own handler: answers 200 and counts the requests
/// that reach it (past the layer).
#[derive(Clone, Default)]
pub struct Handler(Arc<AtomicUsize>);

impl Handler {
    /// How many requests reached it.
    pub fn reached(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

impl tower_service::Service<http::Request<String>> for Handler {
    type Response = http::Response<String>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<http::Response<String>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: http::Request<String>) -> Self::Future {
        self.0.fetch_add(1, Ordering::SeqCst);
        Box::pin(async { Ok(http::Response::new("{\"ok\":true}".to_owned())) })
    }
}
