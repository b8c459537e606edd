//! The commands on an application description: `check` (every diagnostic,
//! or `ok` and the most memory counting in memory takes), `wrangler` (its
//! `ratelimits` entries) and `wrangler --write` (those entries written into a
//! Wrangler file, [`wrangler_file`]). Each prints what it found on stdout and
//! says whether the description is valid.

use std::path::Path;

use runtime::config::{Application, StoreDriver};
use runtime::counter::{DEFAULT_MAX_KEYS, WindowCounter};
use runtime::plan::BindingPlan;

use crate::commands::error::CommandError;
use crate::commands::wrangler_file::{self, Written};

/// The format `wrangler` prints the entries in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EntriesFormat {
    /// JSON with comments, for `wrangler.jsonc`.
    Jsonc,
    /// For `wrangler.toml`.
    Toml,
}

/// Reads and validates a description; `None` (its diagnostics printed as
/// `CODE: file:line:col: message`) when it is invalid.
fn load(path: &Path) -> Result<Option<Application>, CommandError> {
    let source = std::fs::read_to_string(path).map_err(|source| CommandError::Application {
        path: path.to_owned(),
        source,
    })?;
    match Application::from_toml(&source) {
        Ok(app) => Ok(Some(app)),
        Err(diagnostics) => {
            print!("{}", diagnostics.render(&path.display().to_string()));
            Ok(None)
        }
    }
}

/// `check`: prints `ok` and the most memory an isolate (or a native
/// process) of the application takes when it counts in memory, from its
/// route limits; or every diagnostic. Whether the description is valid.
pub fn check(path: &Path) -> Result<bool, CommandError> {
    let Some(app) = load(path)? else {
        return Ok(false);
    };
    let routes: Vec<_> = app.routes.iter().filter_map(|r| r.rate_limit).collect();
    let bound = WindowCounter::new(DEFAULT_MAX_KEYS, &routes, 0).bound();
    println!("ok\nmemory (per isolate counting in memory): at most {bound}");
    Ok(true)
}

/// `wrangler`: prints the description's `ratelimits` entries in `format`.
pub fn wrangler(path: &Path, format: EntriesFormat) -> Result<bool, CommandError> {
    let Some(app) = load(path)? else {
        return Ok(false);
    };
    let plan = BindingPlan::for_application(&app);
    match format {
        EntriesFormat::Jsonc => print!("{}", plan.wrangler_jsonc()),
        EntriesFormat::Toml => print!("{}", plan.wrangler_toml()),
    }
    Ok(true)
}

/// `wrangler --write FILE`: the entries written into `file`; nothing is
/// written for an invalid description.
pub fn write_wrangler_file(path: &Path, file: &Path) -> Result<bool, CommandError> {
    let Some(app) = load(path)? else {
        return Ok(false);
    };
    let Some(connection) = app.store.as_ref().and_then(|store| match store.driver {
        StoreDriver::CloudflareRateLimits { .. } => Some(store.connection.as_str()),
        StoreDriver::Redis(_) => None,
    }) else {
        println!(
            "{}: left as it was: the application counts through no Cloudflare binding",
            file.display()
        );
        return Ok(true);
    };
    let entries = BindingPlan::for_application(&app).wrangler_entries();
    let what = match wrangler_file::write(file, connection, &entries)? {
        Written::Created => "created",
        Written::Changed => "updated",
        Written::Unchanged => "unchanged",
    };
    println!(
        "{}: {what} ({} ratelimits entries of connection `{connection}`)",
        file.display(),
        entries.len()
    );
    Ok(true)
}
