//! The production rate limiter of a framework that deploys natively or to
//! Cloudflare Workers.
//!
//! Build time: [`config`] validates the application's rate-limit settings
//! (with stable diagnostic codes) and [`plan`] turns its limits into
//! Cloudflare bindings and Wrangler entries. Request time: [`limiter`]
//! decides each request without doing I/O, counting in [`counter`] when the
//! binding can't be asked and leaving a troubled binding alone for a
//! cool-off ([`breaker`]); on wasm32, [`workers`] does the I/O in workerd.

pub mod address;
pub mod breaker;
pub mod config;
pub mod counter;
pub mod limiter;
pub mod limits;
#[cfg(not(target_arch = "wasm32"))]
pub mod native;
pub mod plan;
#[cfg(target_arch = "wasm32")]
pub mod workers;

pub use address::ClientAddress;
pub use config::{Application, Code, Counting, Diagnostic, Diagnostics};
pub use limiter::{Limiter, Subject};
pub use limits::Limit;
pub use plan::BindingPlan;
