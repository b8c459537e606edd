//! What a failed expectation says, and where the failures of one run are
//! collected, each pointing into its scenario file.

use std::fmt;
use std::ops::Range;

use crate::language::scenario::{Place, ScenarioSource};

/// One expectation that did not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The expectation's place in the scenario file, so an editor can jump there.
    pub place: Place,
    /// Such as `step 2 (send), request 121`.
    pub context: String,
    /// Which expectation, such as `status sequence`.
    pub what: String,
    /// What the scenario says.
    pub expected: String,
    /// What the run gave.
    pub actual: String,
    /// The step it is about (1-based), when it is about one: the report
    /// page marks that step.
    pub step: Option<usize>,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "error: {}", self.what)?;
        writeln!(f, "  --> {}", self.place)?;
        if !self.context.is_empty() {
            writeln!(f, "   | {}", self.context)?;
        }
        writeln!(f, "   | expected: {}", self.expected)?;
        write!(f, "   | actual:   {}", self.actual)
    }
}

/// Where failures of one run are collected, pointing into its scenario file.
pub(in crate::judge) struct Failures<'a> {
    pub(in crate::judge) source: &'a ScenarioSource,
    pub(in crate::judge) list: Vec<Failure>,
    /// The step being judged (0-based), if the check goes step by step.
    pub(in crate::judge) step: Option<usize>,
}

impl Failures<'_> {
    pub(in crate::judge) fn fail(
        &mut self,
        span: Range<usize>,
        context: String,
        what: &str,
        expected: String,
        actual: String,
    ) {
        self.list.push(Failure {
            place: self.source.place(span),
            context,
            what: what.to_owned(),
            expected,
            actual,
            step: self.step.map(|index| index + 1),
        });
    }
}
