//! The scenario language: what QA write in `scenarios/*.toml`, read into a
//! model, every error located at `file:line:col`, and its JSON Schema; and
//! what a scenario marked `on_cloudflare` sends and checks on Cloudflare
//! itself ([`cloudflare`], [`on_cloudflare`]).
//!
//! The bottom layer: it uses nothing else of the harness (only `runtime`,
//! for an application description's locations), so the language can be read
//! and changed without knowing how a scenario is run.

pub mod cloudflare;
pub mod on_cloudflare;
pub mod probe;
pub mod scenario;
