//! What several of runtime's test modules share: the JSON lines a gate
//! writes through `tracing`, captured while a test holds them, the
//! process's metrics recorder and its scrapes, and an application's handler
//! behind the tower layer.

mod lines;
pub mod metrics;
pub use lines::Lines;

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

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

/// The diagnostics of `source`, each as `code line:col`.
pub fn placed(source: &str) -> Vec<String> {
    match runtime::Application::from_toml(source) {
        Ok(_) => Vec::new(),
        Err(d) => {
            d.0.iter()
                .map(|d| match d.location {
                    Some(at) => format!("{} {at}", d.code),
                    None => d.code.to_string(),
                })
                .collect()
        }
    }
}
