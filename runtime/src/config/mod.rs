//! The application description (TOML, in the spec's vocabulary) and its
//! validation into an [`Application`], with every diagnostic at once.
//!
//! Parsing keeps byte spans so each diagnostic can point at `line:col`;
//! the rules themselves are plain functions over the parsed description.
//! A description goes through this folder's files in order: `raw.rs` reads
//! it as written (each value with its place), `validate/` runs the rules,
//! reporting every [`Diagnostic`] (`diagnostics.rs`, with the stable
//! [`Code`]s), and builds the model (`model.rs`: the [`Application`], its
//! deployables, routes and store). The model and the diagnostics are public,
//! from here; the rest is how they are made.

mod diagnostics;
mod model;
mod raw;
mod validate;

pub use diagnostics::{
    Code, Diagnostic, Diagnostics, FileError, Location, TOML_KEY_NESTING_LIMIT, UnknownCode,
};
pub use model::{
    Application, BINDING_WINDOWS, Counting, Deployable, MAX_NAMESPACE_ID, RedisEndpoint, Route,
    Store, StoreDriver, Target, redacted_url,
};

use raw::RawApplication;

impl Application {
    /// Parses and validates a description, returning every diagnostic if it is invalid.
    pub fn from_toml(source: &str) -> Result<Application, Diagnostics> {
        let raw: RawApplication = toml::from_str(source).map_err(|error| {
            Diagnostics(vec![Diagnostic {
                code: Code::InvalidToml,
                message: error.message().trim().to_owned(),
                location: Some(Location::of_toml_error(source, &error)),
            }])
        })?;
        validate::validate(source, raw)
    }

    /// Reads and validates the description in `file`: its errors name the
    /// file (`CODE: FILE:line:col: message`, [`FileError`]), as the path
    /// was given.
    pub fn from_file(file: impl AsRef<std::path::Path>) -> Result<Application, FileError> {
        let file = file.as_ref();
        let source = std::fs::read_to_string(file).map_err(|error| FileError::Unreadable {
            file: file.to_owned(),
            error,
        })?;
        Application::from_toml(&source).map_err(|diagnostics| FileError::Invalid {
            file: file.to_owned(),
            diagnostics,
        })
    }
}
