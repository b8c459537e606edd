//! Each deployable's in-memory budget: `memory_budget_mib` (a whole number
//! of MiB, at most [`WORKERS_MEMORY_BUDGET`] on Workers, whose isolate has
//! 128 MB for everything), and whether the routes' limits can share it with
//! every route's sketch sized for [`MIN_ROUTE_FLOOD_KEYS`] keys or more
//! (docs/design.md, "The memory budget").

use toml::Spanned;

use super::{Code, Report};
use crate::config::raw::RawDeployable;
use crate::config::{Deployable, Route, Target};
use crate::counter::{
    DEFAULT_MAX_KEYS, DEFAULT_MEMORY_BUDGET, MIN_ROUTE_FLOOD_KEYS, MemoryBound,
    WORKERS_MEMORY_BUDGET,
};

/// The largest budget a native deployable may set: 64 GiB, past any
/// number of routes a description holds.
pub(super) const MAX_NATIVE_BUDGET_MIB: i64 = 64 * 1024;

const MIB: usize = 1 << 20;

/// Sets each deployable's budget from its `memory_budget_mib` (`raw` and
/// `deployables` in one order), then refuses, at the setting or else at the
/// deployable, one serving an API whose routes' limits cannot share it.
pub(super) fn validate_memory(
    report: &mut Report<'_>,
    raw: &[Spanned<RawDeployable>],
    deployables: &mut [Deployable],
    routes: &[Route],
) {
    let limits: Vec<_> = routes.iter().filter_map(|r| r.rate_limit).collect();
    for (spanned, deployable) in raw.iter().zip(deployables.iter_mut()) {
        let setting = spanned.get_ref().memory_budget_mib.as_ref();
        let Some(budget) = budget(report, deployable, setting) else {
            continue;
        };
        deployable.memory_budget = budget;
        if !deployable.serves_api {
            continue;
        }
        let bound = MemoryBound::within(DEFAULT_MAX_KEYS, &limits, budget);
        if bound.fits() {
            continue;
        }
        let least = MemoryBound::least_budget(DEFAULT_MAX_KEYS, &limits);
        let fix = match deployable.target {
            Target::Workers => format!(
                "give fewer routes a limit of their own (a Worker's budget is at most {} MiB \
                 of its isolate's 128 MB)",
                WORKERS_MEMORY_BUDGET / MIB
            ),
            Target::Native => format!(
                "set `memory_budget_mib = {}` or more on it, or give fewer routes a limit of \
                 their own",
                least.div_ceil(MIB)
            ),
        };
        let span = setting.map_or_else(|| spanned.span(), Spanned::span);
        report.add(
            Code::MemoryOverBudget,
            Some(span),
            format!(
                "deployable `{}` counts in memory within {} MiB ({budget} B), too little for \
                 its exact table, the built-in limits' sketches and its {} limited routes' \
                 sketches of at least {MIN_ROUTE_FLOOD_KEYS} keys a window each: they need \
                 {least} B; {fix}",
                deployable.name,
                budget / MIB,
                limits.len(),
            ),
        );
    }
}

/// The budget `setting` gives, [`DEFAULT_MEMORY_BUDGET`] without one, or
/// `None` when it is invalid (reported at its place).
fn budget(
    report: &mut Report<'_>,
    deployable: &Deployable,
    setting: Option<&Spanned<toml::Value>>,
) -> Option<usize> {
    let Some(setting) = setting else {
        return Some(DEFAULT_MEMORY_BUDGET);
    };
    let name = &deployable.name;
    let (most, on) = match deployable.target {
        Target::Workers => (
            (WORKERS_MEMORY_BUDGET / MIB) as i64,
            "on Workers, whose isolate has 128 MB for the application too",
        ),
        Target::Native => (MAX_NATIVE_BUDGET_MIB, "natively"),
    };
    let problem = match setting.get_ref() {
        toml::Value::Integer(mib) if (1..=most).contains(mib) => {
            // Past a 32-bit address space's bytes: as much as it has.
            let bytes = usize::try_from(*mib).ok().and_then(|m| m.checked_mul(MIB));
            return Some(bytes.unwrap_or(usize::MAX));
        }
        toml::Value::Integer(mib) if *mib < 1 => format!("is {mib}, below 1"),
        toml::Value::Integer(mib) => format!("is {mib}, over the {most} MiB allowed {on}"),
        other => format!("is a {}, not a whole number of MiB", other.type_str()),
    };
    report.add(
        Code::MemoryBudgetInvalid,
        Some(setting.span()),
        format!(
            "deployable `{name}` has memory_budget_mib that {problem}: write a whole number \
             of MiB from 1 to {most}, or leave it out for {} MiB",
            DEFAULT_MEMORY_BUDGET / MIB
        ),
    );
    None
}
