//! The rules: a raw description in, an [`Application`] or every diagnostic
//! out, the rules collecting them in a [`Report`]. One file per family of
//! rules, run in the order their diagnostics are reported in:
//! `connections.rs` (each connection, and the store), `deployables.rs`
//! (each deployable, its store and its client address), `routes.rs` (each
//! route's path and limit), the namespace ids (`connections.rs`), which
//! depend on the routes too, each deployable's memory budget against the
//! routes' limits (`memory.rs`), the data points' dataset
//! (`data_points.rs`), and last the application's name (`name.rs`), which
//! the deployables' counting requires.

use std::ops::Range;

use super::raw::RawApplication;
use super::{Application, Code, Diagnostic, Diagnostics, Location};

mod connections;
mod data_points;
mod deployables;
mod memory;
mod name;
mod routes;
mod shadow;

use connections::{validate_connections, validate_namespace_ids, validate_store};
use data_points::validate_data_points;
use deployables::validate_deployables;
use memory::validate_memory;
use name::validate_name;
use routes::validate_routes;
use shadow::validate_built_in_shadow;

/// Collects diagnostics with their places while the rules run.
struct Report<'a> {
    source: &'a str,
    diagnostics: Vec<Diagnostic>,
}

impl Report<'_> {
    fn add(&mut self, code: Code, span: Option<Range<usize>>, message: String) {
        let location = span.map(|s| Location::of_offset(self.source, s.start));
        self.diagnostics.push(Diagnostic {
            code,
            message,
            location,
        });
    }
}

/// Every rule over the description as written, in order; the model only when
/// none of them reported a diagnostic.
pub(super) fn validate(source: &str, raw: RawApplication) -> Result<Application, Diagnostics> {
    let mut report = Report {
        source,
        diagnostics: Vec::new(),
    };

    let connections = validate_connections(&mut report, &raw.connections);
    let store = validate_store(&mut report, &raw, &connections);
    let mut deployables = validate_deployables(&mut report, &raw.deployables, &store);
    let binding_store = store.is_binding();
    let routes = validate_routes(&mut report, &raw.routes, binding_store);
    validate_namespace_ids(&mut report, &connections, &routes);
    validate_memory(&mut report, &raw.deployables, &mut deployables, &routes);
    let data_points = validate_data_points(&mut report, &raw);
    let built_in_shadow = validate_built_in_shadow(&mut report, &raw);
    let name = validate_name(&mut report, &raw, &store, &deployables);

    if !report.diagnostics.is_empty() {
        return Err(Diagnostics(report.diagnostics));
    }
    Ok(Application {
        name,
        store: store.to_store(),
        deployables,
        routes,
        data_points,
        built_in_shadow,
    })
}
