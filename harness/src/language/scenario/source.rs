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

/// Every error of one scenario file, in the file's order (then its
/// applications'): a file is refused whole, and its author sees them all
/// in one run. Shown one a line.
#[derive(Debug, Clone)]
pub struct ScenarioErrors(pub Vec<ScenarioError>);

impl fmt::Display for ScenarioErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, error) in self.0.iter().enumerate() {
            if index > 0 {
                writeln!(f)?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ScenarioErrors {}

impl From<ScenarioError> for ScenarioErrors {
    fn from(error: ScenarioError) -> ScenarioErrors {
        ScenarioErrors(vec![error])
    }
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

    /// Where `key = ` is written within `within` (a table's span), for an
    /// error about one entry of a table whose keys carry no span of their
    /// own: the first place the key stands as a key (bare or quoted,
    /// followed by `=`, or a dotted part).
    pub fn key_span(&self, within: Range<usize>, key: &str) -> Option<Range<usize>> {
        let text = self.text.get(within.clone())?;
        let mut from = 0;
        while let Some(found) = text.get(from..)?.find(key) {
            let start = from + found;
            let end = start + key.len();
            let before = text[..start].chars().next_back();
            let quoted = matches!(before, Some('"' | '\''));
            let key_start = if quoted { start - 1 } else { start };
            let opens = text[..key_start]
                .chars()
                .next_back()
                .is_none_or(|c| c.is_whitespace() || matches!(c, '{' | ',' | '.' | '['));
            let after = text[end..].trim_start_matches(['"', '\'']).trim_start();
            if opens && (after.starts_with('=') || after.starts_with('.')) {
                return Some(within.start + key_start..within.start + end);
            }
            from = end;
        }
        None
    }

    /// The text a table at `span` holds: a `[header]` table's span is its
    /// header alone, so its body runs to the next header (or the end); an
    /// inline table's span is all of it.
    pub fn table_body(&self, span: Range<usize>) -> Range<usize> {
        let Some(rest) = self.text.get(span.start..) else {
            return span;
        };
        if !rest.starts_with('[') {
            return span;
        }
        let mut offset = rest.find('\n').map_or(rest.len(), |i| i + 1);
        for line in rest[offset..].split_inclusive('\n') {
            if line.trim_start().starts_with('[') {
                break;
            }
            offset += line.len();
        }
        span.start..span.start + offset
    }

    /// An error at a span of this scenario's file.
    pub fn error(&self, span: Range<usize>, message: impl Into<String>) -> ScenarioError {
        ScenarioError {
            place: self.place(span),
            message: message.into(),
        }
    }
}
