//! The engine: runs one scenario's steps in the world (starting its
//! processes, moving its clock, sending its traffic, changing its bindings
//! and stores) and records what it observed, an [`Observation`]; and the
//! same for a scenario's Worker on Cloudflare itself ([`cloudflare`]). It
//! judges nothing.
//!
//! It may use [`crate::world`] and [`crate::language`], nothing above.

pub mod clock;
pub mod cloudflare;
pub mod limit_call;
pub mod load_probe;
pub mod observation;
mod runner;

pub use observation::{
    BindingCall, BindingOutcome, CallRecord, InstanceKind, InstanceRecord, LoadProbe, MetricsText,
    Observation, RequestRecord, StepRecord, Trouble,
};
pub use runner::{
    Aborted, CALLER_HEADER, CONTROL_HEADER, ControlRequest, EngineError, Environment, MINUTE_ROOM,
    REQUEST_TIMEOUT, WALL_MARGIN, emulated_bindings, run, shares_count,
};
