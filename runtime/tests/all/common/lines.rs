//! The JSON lines a gate writes through `tracing`, captured while a test
//! holds them. Shared by runtime's tests and the harness's
//! (`harness/tests/all/redis_store.rs` includes this file).

use std::cell::RefCell;
use std::io::Write;
use std::sync::{Arc, Mutex, Once};

/// The JSON lines written through `tracing` on this thread while its guard is held.
#[derive(Clone, Default)]
pub struct Lines(Arc<Mutex<Vec<u8>>>);

thread_local! {
    /// Where this thread's events go while a test captures them.
    static CAPTURED: RefCell<Option<Lines>> = const { RefCell::new(None) };
}

/// Hands each event to the capture of the thread that wrote it, if any.
struct ThisThread;

impl Write for ThisThread {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        CAPTURED.with(|captured| {
            if let Some(lines) = &*captured.borrow() {
                lines.0.lock().expect("lines").extend_from_slice(buf);
            }
        });
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Stops the capture of its thread when dropped.
pub struct CaptureGuard(());

impl Drop for CaptureGuard {
    fn drop(&mut self) {
        CAPTURED.with(|captured| captured.borrow_mut().take());
    }
}

impl Lines {
    /// Starts capturing this thread's events as JSON lines.
    ///
    /// One global subscriber, installed once, rather than a thread's own
    /// default: `tracing` caches whether a call site is enabled when it is
    /// first hit, and a site first hit by another test's thread while this
    /// one was installing its default could stay disabled for it (a test
    /// saw no line at all about once in ten runs).
    pub fn capture() -> (Lines, CaptureGuard) {
        static GLOBAL: Once = Once::new();
        GLOBAL.call_once(|| {
            tracing_subscriber::fmt()
                .json()
                .flatten_event(true)
                .with_writer(|| ThisThread)
                .init();
        });
        let lines = Lines::default();
        CAPTURED.with(|captured| *captured.borrow_mut() = Some(lines.clone()));
        (lines, CaptureGuard(()))
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
