//! The commands on an application description: `validate` (every diagnostic,
//! or `ok` and, for each deployable serving an API, the most memory its
//! counting in memory takes within its budget; with `--plan`, the
//! deployables' plans written for their Workers), `wrangler` (its
//! `ratelimits` entries) and `wrangler --write` (those entries written into a
//! Wrangler file, [`wrangler_file`]). Each prints what it found on stdout and
//! says whether the description is valid.

use std::path::{Path, PathBuf};
use std::str::FromStr;

use runtime::GatePlan;
use runtime::bindings::{Bindings, DatasetEntry};
use runtime::config::{Application, StoreDriver, Target};
use runtime::unstable_for_tools::counter::{DEFAULT_MAX_KEYS, MemoryBound};

use crate::commands::error::CommandError;
use crate::commands::wrangler_file::{self, WranglerEdit, Written};

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

/// Where `check --plan` writes one deployable's plan: `DEPLOYABLE=FILE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanOutput {
    /// The deployable of the application.
    pub deployable: String,
    /// The file its plan goes into (its Worker embeds it).
    pub file: PathBuf,
}

impl FromStr for PlanOutput {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.split_once('=') {
            Some((deployable, file)) if !deployable.is_empty() && !file.is_empty() => {
                Ok(PlanOutput {
                    deployable: deployable.to_owned(),
                    file: PathBuf::from(file),
                })
            }
            _ => Err(format!("`{s}` is not DEPLOYABLE=FILE")),
        }
    }
}

/// `validate`: prints `ok` and, for each deployable serving an API, the
/// most memory an isolate (or a native process) of it takes when it counts
/// in memory, within its budget ([`memory_line`]); or every diagnostic. Whether the description is valid.
/// A valid one also has each of `plans` written: the plan its
/// Worker builds its gate from (`runtime::GatePlan`, no description parser
/// in the Worker). Every plan is made before any is written, and a file
/// already holding its plan is left untouched (`unchanged`).
pub fn validate(path: &Path, plans: &[PlanOutput]) -> Result<bool, CommandError> {
    let Some(app) = load(path)? else {
        return Ok(false);
    };
    let mut texts = Vec::with_capacity(plans.len());
    for output in plans {
        let plan = GatePlan::new(&app, &output.deployable)
            .map_err(|e| CommandError::Plan(e.to_string()))?;
        texts.push(
            plan.to_text()
                .map_err(|e| CommandError::Plan(e.to_string()))?,
        );
    }
    println!("ok");
    for deployable in app.deployables.iter().filter(|d| d.serves_api) {
        print!("{}", memory_line(&app, deployable));
    }
    print_bindings(&app);
    for (output, text) in plans.iter().zip(texts) {
        let file = &output.file;
        if std::fs::read_to_string(file).is_ok_and(|old| old == text) {
            println!("{}: unchanged", file.display());
            continue;
        }
        wrangler_file::replace(file, &text).map_err(|source| CommandError::PlanFile {
            path: file.clone(),
            source,
        })?;
        println!(
            "{}: written (the plan of deployable `{}`)",
            file.display(),
            output.deployable
        );
    }
    Ok(true)
}

/// Each Workers deployable's bindings, by the names a scenario's
/// `bindings` and `set_bindings` use and a Wrangler file gives them, with
/// the limit each counts.
fn print_bindings(app: &Application) {
    for deployable in app
        .deployables
        .iter()
        .filter(|d| d.target == Target::Workers)
    {
        let plan = Bindings::for_deployable(app, deployable);
        let names: Vec<String> = plan
            .bindings
            .iter()
            .map(|b| {
                format!(
                    "{} ({} per {} s)",
                    b.name, b.limit.requests, b.limit.window_seconds
                )
            })
            .collect();
        if !names.is_empty() {
            println!("bindings of `{}`: {}", deployable.name, names.join(", "));
        }
    }
}

/// The line `validate` prints for `deployable`: the most its counter holds,
/// part by part, of its budget, and the keys each route's sketch is sized for.
pub fn memory_line(app: &Application, deployable: &runtime::config::Deployable) -> String {
    let routes: Vec<_> = app.routes.iter().filter_map(|r| r.rate_limit).collect();
    let bound = MemoryBound::within(DEFAULT_MAX_KEYS, &routes, deployable.memory_budget);
    let target = match deployable.target {
        Target::Workers => "per isolate",
        Target::Native => "per process",
    };
    format!(
        "memory of `{}` ({target} counting in memory): at most {bound}; each route's sketch \
         for {} keys a window\n",
        deployable.name, bound.route_keys
    )
}

/// `wrangler`: prints the description's `ratelimits` entries in `format`.
pub fn wrangler(path: &Path, format: EntriesFormat) -> Result<bool, CommandError> {
    let Some(app) = load(path)? else {
        return Ok(false);
    };
    let plan = Bindings::for_application(&app);
    match format {
        EntriesFormat::Jsonc => print!("{}", plan.wrangler_jsonc()),
        EntriesFormat::Toml => print!("{}", plan.wrangler_toml()),
    }
    Ok(true)
}

/// `wrangler --write FILE [--deployable NAME]`: the entries and the Worker's
/// plan (`vars.PLAN`) written into `file`; nothing is written for an
/// invalid description, or when the Worker the file is for is not clear.
pub fn write_wrangler_file(
    path: &Path,
    file: &Path,
    deployable: Option<&str>,
) -> Result<bool, CommandError> {
    let Some(app) = load(path)? else {
        return Ok(false);
    };
    let workers: Vec<&str> = app
        .deployables
        .iter()
        .filter(|d| d.target == Target::Workers)
        .map(|d| d.name.as_str())
        .collect();
    let worker = match (deployable, workers.as_slice()) {
        (Some(name), _) if workers.contains(&name) => Some(name),
        (Some(name), _) => {
            println!(
                "{}: left as it was: the application has no Workers deployable `{name}` \
                 (its Workers deployables: {})",
                file.display(),
                list_or_none(&workers)
            );
            return Ok(false);
        }
        (None, [one]) => Some(*one),
        (None, []) => None,
        (None, several) => {
            println!(
                "{}: left as it was: the application has {} Workers deployables ({}); name \
                 the one this file is for with --deployable, for its plan",
                file.display(),
                several.len(),
                several.join(", ")
            );
            return Ok(false);
        }
    };
    let plan = match worker {
        Some(name) => match GatePlan::new(&app, name).map(|plan| plan.to_text()) {
            Ok(Ok(text)) => Some((name, text)),
            // A Workers deployable never counts in Redis (it counts in
            // memory when its store is Redis), so it always has a plan.
            _ => None,
        },
        None => None,
    };
    let connection = app.store.as_ref().and_then(|store| match store.driver {
        StoreDriver::CloudflareRateLimits { .. } => Some(store.connection.as_str()),
        StoreDriver::Redis(_) => None,
    });
    let entries = Bindings::for_application(&app).wrangler_entries();
    // The dataset a Worker writes its data points to, when there is a Worker.
    let dataset = worker.and_then(|_| DatasetEntry::of(&app));
    let edit = WranglerEdit {
        entries: connection.map(|c| (c, entries.as_slice())),
        plan: plan.as_ref().map(|(_, text)| text.as_str()),
        dataset: dataset.as_ref(),
    };
    if edit.entries.is_none() && edit.plan.is_none() {
        println!(
            "{}: left as it was: the application counts through no Cloudflare binding and \
             has no Workers deployable",
            file.display()
        );
        return Ok(true);
    }
    let what = match wrangler_file::write(file, &edit)? {
        Written::Created => "created",
        Written::Changed => "updated",
        Written::Unchanged => "unchanged",
    };
    let mut parts = Vec::new();
    if let Some(connection) = connection {
        parts.push(format!(
            "{} ratelimits entries of connection `{connection}`",
            entries.len()
        ));
    }
    if let Some((name, _)) = &plan {
        parts.push(format!("the plan of deployable `{name}` as vars.PLAN"));
    }
    if let Some(dataset) = &dataset {
        parts.push(format!(
            "the analytics_engine_datasets entry {} of dataset `{}`",
            dataset.binding, dataset.dataset
        ));
    }
    println!("{}: {what} ({})", file.display(), parts.join(", "));
    Ok(true)
}

/// Names for a message, or `none`.
fn list_or_none(names: &[&str]) -> String {
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    }
}
