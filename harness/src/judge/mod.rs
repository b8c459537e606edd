//! The judge: an [`crate::engine::Observation`] held against the scenario's
//! expectations ([`scenario`]), the expected failures that turn a failure into
//! a verdict ([`expected_failures`]), the two counting cores' observations of one
//! scenario compared ([`differential`]), the statistics every figure is
//! taken with ([`stats`]), and a run on Cloudflare itself judged as its
//! marks say ([`cloudflare`]). Plain functions, no I/O.
//!
//! It may use [`crate::engine`], [`crate::world`] and [`crate::language`],
//! nothing above.

pub mod cloudflare;
pub mod differential;
pub mod expected_failures;
pub mod scenario;
pub mod stats;
