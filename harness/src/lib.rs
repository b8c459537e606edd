//! The conformance harness: proves the rate limiter inside a real, pinned workerd.
//!
//! Data flows one way: a scenario file ([`scenario`]) names an application
//! description; `runtime` validates it and plans the bindings; [`workerd`]
//! builds the deployable ([`wasm`]), generates a config with emulated bindings
//! and starts the processes; [`engine`] fires the traffic and records what it
//! observes; [`checks`] compares that with the scenario's expectations; and
//! [`report`] prints it for people and for CI.

pub mod checks;
pub mod clock;
pub mod differential;
pub mod edge;
pub mod engine;
pub mod expectations;
pub mod instance;
pub mod native;
pub mod paths;
pub mod probe;
pub mod redis;
pub mod reference;
pub mod report;
pub mod scenario;
pub mod store;
pub mod suite;
pub mod wasm;
pub mod workerd;
