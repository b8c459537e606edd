//! The judge: an [`crate::engine::Observation`] held against the scenario's
//! expectations ([`checks`]), the expected failures that turn a failure into
//! a verdict ([`expectations`]), the two counting cores' observations of one
//! scenario compared ([`differential`]), and the statistics every figure is
//! taken with ([`stats`]). Plain functions, no I/O.
//!
//! It may use [`crate::engine`], [`crate::world`] and [`crate::language`],
//! nothing above.

pub mod checks;
pub mod differential;
pub mod expectations;
pub mod stats;
