//! The top: what the command line (`main.rs`) and the test targets call. A
//! scenarios directory as trials run in parallel ([`suite`]), how they went
//! for people and CI ([`report`]), the edge-compatibility job's drift report
//! ([`edge`]), `wrangler --write` ([`wrangler_file`]), and the scenarios run
//! on Cloudflare itself ([`cloudflare`]).
//!
//! It may use every layer below; nothing in the library uses it.

pub mod cloudflare;
pub mod edge;
pub mod preflight;
pub mod report;
pub mod suite;
pub mod wrangler_file;
