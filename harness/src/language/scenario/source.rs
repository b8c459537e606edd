//! A scenario with its file's text, so that every error and every failed
//! expectation points at `file:line:col`.

use std::fmt;
use std::ops::Range;
use std::path::PathBuf;

use runtime::config::Location;
use toml::Spanned;

use super::model::Scenario;

/// A place in a scenario file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// The file, as the user named it (or `scenarios/...`).
    pub file: PathBuf,
    /// Line and column (1-based), as editors count them.
    pub location: Location,
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file.display(), self.location)
    }
}

/// A scenario file that could not be read or does not make sense, pointing at where.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{place}: {message}")]
pub struct ScenarioError {
    /// Where in the file.
    pub place: Place,
    /// What is wrong there.
    pub message: String,
}

/// The parsed scenario with its file's text, for pointing at places later.
#[derive(Debug)]
pub struct ScenarioSource {
    /// The file, as the user named it.
    pub file: PathBuf,
    /// Its text: spans are offsets into it.
    pub text: String,
    /// The scenario, every value with its span.
    pub scenario: Spanned<Scenario>,
}

impl ScenarioSource {
    /// The place of a span in this scenario's file.
    pub fn place(&self, span: Range<usize>) -> Place {
        Place {
            file: self.file.clone(),
            location: Location::of_offset(&self.text, span.start),
        }
    }

    /// An error at a span of this scenario's file.
    pub fn error(&self, span: Range<usize>, message: impl Into<String>) -> ScenarioError {
        ScenarioError {
            place: self.place(span),
            message: message.into(),
        }
    }
}
