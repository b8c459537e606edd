//! The drift report as a page (`drift.html`, beside `drift.md`): one row
//! per scenario with its result on the pinned workerd, on the newest and on
//! the newest with Cloudflare's simulator as the counting core, the rows
//! whose results differ marked and listed first, filtered by name with the
//! report page's script, and each failure's block. Like [`super::render`]
//! it shows statuses and times only, never a key.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{HtmlError, message_of, render_page, result_of};
use crate::commands::report::TrialOutcome;

/// One side of the drift report as its page shows it: the page is a plain
/// function of these, so `html_report` imports nothing of the commands
/// that render it (`edge` reads Cloudflare's results, and `cloudflare`
/// renders the report page).
#[derive(Debug, Clone, Copy)]
pub struct DriftSide<'a> {
    /// `pinned`, `newest` or `reference`.
    pub label: &'a str,
    /// As `workerd --version` prints it.
    pub workerd_version: &'a str,
    /// The npm release, such as `1.20261117.1`.
    pub npm_version: &'a str,
    /// How each trial went on it.
    pub outcomes: &'a [TrialOutcome],
}

/// The page's template; its style and filter script are the report page's.
const TEMPLATE: &str = include_str!("drift.html");

/// The page's context.
#[derive(Debug, Serialize)]
struct Page {
    columns: Vec<Column>,
    changed: usize,
    total: usize,
    results: Vec<(&'static str, &'static str)>,
    rows: Vec<Row>,
}

/// One side as a column heading.
#[derive(Debug, Serialize)]
struct Column {
    label: String,
    workerd: String,
    npm: String,
}

/// One scenario: its result in each column.
#[derive(Debug, Serialize)]
struct Row {
    id: String,
    name: String,
    /// `changed` or `unchanged`, what the filter's boxes select.
    result: &'static str,
    cells: Vec<Cell>,
}

/// A scenario's result on one side.
#[derive(Debug, Serialize)]
struct Cell {
    column: String,
    result: &'static str,
    result_label: &'static str,
    p99: Option<u64>,
    time: Option<String>,
    message: String,
}

/// The results a row can have: (value of the filter, what it says).
const RESULTS: [(&str, &str); 2] = [("changed", "changed"), ("unchanged", "unchanged")];

/// The drift page of the sides `edge-compat` ran: pinned, newest and
/// reference, in that order of columns.
pub fn drift_page(sides: [DriftSide<'_>; 3]) -> Result<String, HtmlError> {
    let mut names: Vec<&str> = Vec::new();
    let by_side: Vec<BTreeMap<&str, &TrialOutcome>> = sides
        .iter()
        .map(|side| {
            side.outcomes
                .iter()
                .map(|o| {
                    if !names.contains(&o.name.as_str()) {
                        names.push(o.name.as_str());
                    }
                    (o.name.as_str(), o)
                })
                .collect()
        })
        .collect();
    let mut rows: Vec<Row> = names
        .iter()
        .enumerate()
        .map(|(index, name)| {
            let cells: Vec<Cell> = sides
                .iter()
                .zip(&by_side)
                .map(|(side, outcomes)| cell(side.label, outcomes.get(name).copied()))
                .collect();
            let changed = cells.iter().any(|c| c.result != cells[0].result);
            Row {
                id: format!("d{index}"),
                name: (*name).to_owned(),
                result: if changed { RESULTS[0].0 } else { RESULTS[1].0 },
                cells,
            }
        })
        .collect();
    // What changed first; otherwise in the order the scenarios ran.
    rows.sort_by_key(|row| row.result != RESULTS[0].0);
    let page = Page {
        columns: sides
            .iter()
            .map(|side| Column {
                label: side.label.to_owned(),
                workerd: side.workerd_version.to_owned(),
                npm: side.npm_version.to_owned(),
            })
            .collect(),
        changed: rows.iter().filter(|r| r.result == RESULTS[0].0).count(),
        total: rows.len(),
        results: RESULTS.to_vec(),
        rows,
    };
    render_page("drift.html", TEMPLATE, &page)
}

fn cell(column: &str, outcome: Option<&TrialOutcome>) -> Cell {
    let Some(outcome) = outcome else {
        return Cell {
            column: column.to_owned(),
            result: "notrun",
            result_label: "not run",
            p99: None,
            time: None,
            message: String::new(),
        };
    };
    let (result, result_label) = result_of(&outcome.verdict);
    Cell {
        column: column.to_owned(),
        result,
        result_label,
        p99: outcome.p99_ms,
        time: Some(format!("{:.1}", outcome.duration.as_secs_f64())),
        message: message_of(outcome),
    }
}
