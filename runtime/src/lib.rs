#![doc = include_str!("../../docs/runtime.md")]
//!
//! ## The modules
//!
//! Build time: [`config`] validates the application's rate-limit settings
//! (with stable diagnostic codes), [`bindings`] turns its limits into
//! Cloudflare bindings ([`names`]) and Wrangler entries, and [`gate_plan`]
//! writes what one deployable's gate needs, so a Worker builds it without
//! the description's parser. Request time:
//! [`limiter`] decides each request without doing I/O, under the [`keys`]
//! of its [`subject`] (an [`address`] or a signed-in caller) and its
//! [`limits`], asking the [`backend`]s the I/O layer reaches, counting in
//! [`counter`] when a store can't be asked, and leaving a troubled store
//! alone for a cool-off ([`breaker`]). The I/O layers: on wasm32,
//! `workers` asks Cloudflare's bindings inside workerd (and, with the
//! `workers-rs` feature, `workers_rs` gives it to workers-rs Workers and
//! axum on Workers); with the `native` feature, `native` limits a tokio
//! server (and with `redis`, counts in Redis). Each module's own
//! documentation says the rest.

#[cfg(all(feature = "native", target_arch = "wasm32"))]
compile_error!(
    "runtime's `native` and `redis` features are for native servers; a Worker (wasm32) needs \
     neither: its gate, `runtime::workers`, comes with the target"
);

#[cfg(all(feature = "workers-rs", not(target_arch = "wasm32")))]
compile_error!(
    "runtime's `workers-rs` feature is for a Worker (wasm32): enable it in the Worker's \
     `[target.'cfg(target_arch = \"wasm32\")'.dependencies]`"
);

pub mod address;
pub mod backend;
pub mod bindings;
pub mod breaker;
pub mod clock;
pub mod config;
pub mod counter;
pub mod gate_plan;
pub mod keys;
pub mod limiter;
pub mod limits;
pub mod names;
#[cfg(feature = "native")]
pub mod native;
#[cfg(any(target_arch = "wasm32", test))]
mod parked;
pub mod routes;
pub mod subject;
#[cfg(feature = "testing")]
pub mod testing;
#[cfg(any(target_arch = "wasm32", test))]
mod wire;
#[cfg(target_arch = "wasm32")]
pub mod workers;
#[cfg(all(feature = "workers-rs", target_arch = "wasm32"))]
pub mod workers_rs;

pub use address::{AddressSource, ClientAddress};
pub use bindings::Bindings;
pub use clock::Clock;
pub use config::{Application, Code, Counting, Diagnostic, Diagnostics};
pub use gate_plan::GatePlan;
pub use limiter::Limiter;
pub use limits::Limit;
pub use subject::{CallerId, Subject};
