//! The engine: runs one scenario's steps in the world (starting its
//! processes, moving its clock, sending its traffic, changing its bindings
//! and stores) and records what it observed, an [`Observation`]. It judges
//! nothing.
//!
//! It may use [`crate::world`] and [`crate::language`], nothing above.

pub mod clock;
mod runner;

pub use runner::{
    Aborted, CALLER_HEADER, CONTROL_HEADER, ControlRequest, EngineError, Environment,
    InstanceRecord, MINUTE_ROOM, Observation, REQUEST_TIMEOUT, RequestRecord, WALL_MARGIN,
    emulated_bindings, run, shares_count,
};
