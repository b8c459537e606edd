//! Everything about workerd itself: finding it, writing its config, running
//! it; the run's count server and Cloudflare's simulator (the reference
//! core), which run in workerd processes of their own.
//!
//! It uses the world's child-process plumbing (`process`), `paths`, the
//! wasm build, the language's binding behaviours and the metrics' reading
//! (`metrics`); nothing of `native/` or Redis.

pub mod config;
pub mod count_server;
pub mod data_points;
pub mod find;
pub mod process;
pub mod reference;

pub use config::{EmulatedBinding, IsolateConfig};
pub use count_server::CountServer;
pub use find::{Workerd, WorkerdChoice, find_workerd};
pub use process::WorkerdProcess;
