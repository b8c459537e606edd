//! The top: what the command line (`main.rs`) and the test targets call. A
//! scenarios directory as trials run in parallel ([`suite`]), the corpus as
//! the test targets' trials ([`trials`]), how they went
//! for people and CI ([`report`], and the report page [`html_report`] drawn
//! from each scenario's [`trace`]), what they need of the machine
//! ([`preflight`]), and one module per command: [`run`], the
//! edge-compatibility job ([`edge_compat`], its drift report [`edge`]), the
//! application description's `validate` and `wrangler` ([`application`], with
//! [`wrangler_file`] for `--write`), and the scenarios run on Cloudflare
//! itself ([`cloudflare`]). A command prints what it found and
//! returns whether everything held, or a [`CommandError`].
//!
//! It may use every layer below; nothing in the library uses it.

pub mod application;
pub mod cloudflare;
pub mod edge;
pub mod edge_compat;
mod error;
pub mod html_report;
pub mod preflight;
pub mod report;
pub mod run;
pub mod suite;
pub mod trace;
pub mod trials;
pub mod wrangler_file;

pub use error::CommandError;
