//! What a scenario expects of the limiter's metrics, its deployable can
//! produce: a native gate's series on a native deployable, data points on
//! a Worker whose application names a dataset; each label's value one the
//! deployable can write (its limits, its store, its name), so a typo is
//! refused at its place rather than summing nothing and passing by accident.

use std::ops::Range;

use runtime::config::{Application, Deployable, Target};
use toml::Spanned;

use crate::language::scenario::metrics::{
    DataPointsBinding, DataPointsWarningReason, MetricSelector, MetricSource, MetricsTable,
};
use crate::language::scenario::prepared::Prepared;
use crate::language::scenario::source::ScenarioError;

/// Every `metrics` table, `metrics_series`, `data_points_binding` and
/// `data_points_warning` of the scenario, held to what its deployable produces.
pub(super) fn validate_metrics(prepared: &Prepared) -> Result<(), ScenarioError> {
    let Some((app, d)) = prepared.described() else {
        return Ok(());
    };
    let source = &prepared.scenario;
    let s = source.scenario.get_ref();
    let dataset = prepared.data_points_dataset();
    let native = d.target == Target::Native;
    let no_dataset = format!(
        "the application names no dataset for `{}`'s data points: add `data_points = \"DATASET\"` to its `[rate_limits]`",
        d.name
    );
    let workers_only = |what: &str| {
        format!(
            "{what} is for a Workers deployable's data points; `{}` is native (its metrics are the `metrics` series: decisions, counted_in_memory, ...)",
            d.name
        )
    };
    let final_expect = s.expect.as_ref().map(Spanned::get_ref);
    let tables = s
        .steps
        .iter()
        .filter_map(|step| step.get_ref().expect.as_ref()?.get_ref().metrics.as_ref())
        .chain(final_expect.and_then(|e| e.metrics.as_ref()));
    for table in tables {
        validate_table(table.get_ref(), app, d, dataset.is_some())
            .map_err(|(span, m)| source.error(span, m))?;
    }
    if let Some(series) = final_expect.and_then(|e| e.metrics_series.as_ref())
        && !native
        && dataset.is_none()
    {
        return Err(source.error(
            series.span(),
            format!("`metrics_series` counts a Worker's data points, and {no_dataset}"),
        ));
    }
    let binding = s
        .data_points_binding
        .as_ref()
        .map(|b| (b.span(), *b.get_ref()));
    if let Some((span, _)) = &binding {
        if native {
            return Err(source.error(span.clone(), workers_only("`data_points_binding`")));
        }
        if dataset.is_none() {
            return Err(source.error(
                span.clone(),
                format!("`data_points_binding` is the dataset's binding, and {no_dataset}"),
            ));
        }
    }
    if let Some(warning) = final_expect.and_then(|e| e.data_points_warning.as_ref()) {
        let span = warning.span();
        if native {
            return Err(source.error(span, workers_only("`data_points_warning`")));
        }
        if dataset.is_none() {
            return Err(source.error(
                span,
                format!("`data_points_warning` expects the dataset's log line, and {no_dataset}"),
            ));
        }
        let wanted = match binding.map_or(DataPointsBinding::Recording, |(_, b)| b) {
            DataPointsBinding::Recording => {
                return Err(source.error(
                    span,
                    "the dataset binding is `recording`, which never fails: a `rate_limits.data_points` line is for `data_points_binding = \"missing\"` or `\"throwing\"`",
                ));
            }
            DataPointsBinding::Missing => DataPointsWarningReason::Missing,
            DataPointsBinding::Throwing => DataPointsWarningReason::Failed,
        };
        if warning.get_ref().reason != wanted {
            return Err(source.error(
                span,
                format!(
                    "the dataset binding is `{}`, so its line's reason is `{}`",
                    if wanted == DataPointsWarningReason::Missing {
                        "missing"
                    } else {
                        "throwing"
                    },
                    wanted.as_str()
                ),
            ));
        }
    }
    Ok(())
}

/// One `metrics` table: each selector's metric one the deployable produces,
/// each label's value one it writes.
fn validate_table(
    table: &MetricsTable,
    app: &Application,
    d: &Deployable,
    has_dataset: bool,
) -> Result<(), (Range<usize>, String)> {
    for selector in table.keys() {
        let span = selector.span();
        let selector: &MetricSelector = selector.get_ref();
        let name = selector.name;
        match (name.source(), d.target) {
            (MetricSource::Native, Target::Workers) => {
                return Err((
                    span,
                    format!(
                        "`{name}` is a native gate's metric; `{}` is a Workers deployable, whose only metric is `data_points`",
                        d.name
                    ),
                ));
            }
            (MetricSource::Workers, Target::Native) => {
                return Err((
                    span,
                    format!(
                        "`data_points` are a Worker's; `{}` is native (its metrics are decisions, counted_in_memory, store_state, ...)",
                        d.name
                    ),
                ));
            }
            (MetricSource::Workers, Target::Workers) if !has_dataset => {
                return Err((
                    span,
                    format!(
                        "`data_points`, but the application names no dataset for `{}`'s data points: add `data_points = \"DATASET\"` to its `[rate_limits]`",
                        d.name
                    ),
                ));
            }
            _ => {}
        }
        for (label, value) in &selector.labels {
            let known = match label.as_str() {
                "limit" => limits_of(app).contains(value),
                "store" => app.store.as_ref().is_some_and(|s| s.connection == *value),
                "deployable" => d.name == *value,
                _ => true,
            };
            if !known {
                let what = match label.as_str() {
                    "limit" => format!("its limits are {}", limits_of(app).join(", ")),
                    "store" => match &app.store {
                        Some(store) => format!("its store is `{}`", store.connection),
                        None => "it has no store".to_owned(),
                    },
                    _ => format!("it is `{}`", d.name),
                };
                return Err((
                    span,
                    format!(
                        "`{label}=\"{value}\"`: the deployable never writes it ({what}), so this would sum nothing"
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// The limits a request can be checked against, as `RateLimit-Policy` names
/// them: a signed-in caller's and an address's (`runtime::Subject::policy`),
/// each route's own by its name (its path, after its methods if not all:
/// `POST /login`).
fn limits_of(app: &Application) -> Vec<String> {
    let mut limits = vec!["caller".to_owned(), "address".to_owned()];
    for route in &app.routes {
        let name = route.limit_name();
        if route.rate_limit.is_some() && !limits.contains(&name) {
            limits.push(name);
        }
    }
    limits
}
