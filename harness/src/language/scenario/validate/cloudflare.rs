//! `on_cloudflare`: only on a scenario Cloudflare itself can run, and why
//! it cannot run the others.

use std::ops::Range;

use crate::language::cloudflare::CloudflareCheck;
use crate::language::scenario::behaviour::Behaviour;
use crate::language::scenario::model::Scenario;
use crate::language::scenario::prepared::Prepared;
use crate::language::scenario::source::ScenarioError;
use crate::language::scenario::step::Action;

/// `on_cloudflare`: only on a scenario Cloudflare can run, `exact` or
/// bounded; an expectation's own mark only in such a scenario.
pub(super) fn validate_for_cloudflare(prepared: &Prepared) -> Result<(), ScenarioError> {
    let source = &prepared.scenario;
    let s = source.scenario.get_ref();
    let marked_expectation = s.steps.iter().find_map(|step| {
        step.get_ref()
            .expect
            .as_ref()
            .and_then(|e| e.get_ref().on_cloudflare.as_ref())
    });
    let Some(mark) = &s.on_cloudflare else {
        return match marked_expectation {
            Some(marked) => Err(source.error(
                marked.span(),
                "an expectation's `on_cloudflare` needs the scenario's: set `on_cloudflare` on the scenario to run it on Cloudflare",
            )),
            None => Ok(()),
        };
    };
    if *mark.get_ref() == CloudflareCheck::NotChecked {
        return Err(source.error(
            mark.span(),
            "a scenario is `exact` or `{ refusal_by = N }` on Cloudflare; to keep it off Cloudflare, leave `on_cloudflare` out",
        ));
    }
    match cloudflare_obstacle(s, prepared.runs_natively()) {
        Some((span, why)) => Err(source.error(
            span.unwrap_or_else(|| mark.span()),
            format!("`on_cloudflare`, but Cloudflare cannot run this scenario: {why}"),
        )),
        None => Ok(()),
    }
}

/// Why Cloudflare itself cannot run a scenario, if it cannot: the first
/// thing in it the edge cannot do, and where (`None`: the whole scenario).
/// There the binding is the real one (only an upload without it can fault
/// it), the isolates and the clock are Cloudflare's, and the edge sets
/// `CF-Connecting-IP` (a run has one address: the runner's own).
pub fn cloudflare_obstacle(s: &Scenario, native: bool) -> Option<(Option<Range<usize>>, String)> {
    if s.expect_diagnostics.is_some() {
        return Some((
            None,
            "it expects diagnostics: it sends no traffic".to_owned(),
        ));
    }
    if native {
        return Some((
            None,
            "its deployable is native, and Cloudflare runs Workers".to_owned(),
        ));
    }
    if let Some(bindings) = &s.bindings
        && let Some(behaviour) = bindings
            .get_ref()
            .values()
            .find(|b| !matches!(b, Behaviour::Healthy | Behaviour::Missing))
    {
        return Some((
            Some(bindings.span()),
            format!(
                "Cloudflare's binding cannot be made {behaviour}: only `missing` (an upload without the binding) can be done there"
            ),
        ));
    }
    if let Some(binding) = &s.data_points_binding {
        return Some((
            Some(binding.span()),
            "`data_points_binding`: the dataset on Cloudflare is the real one, which cannot be made missing or throwing".to_owned(),
        ));
    }
    if let Some(expect) = s.expect.as_ref().map(|e| e.get_ref())
        && (expect.metrics.is_some()
            || expect.metrics_series.is_some()
            || expect.data_points_warning.is_some())
    {
        return Some((
            None,
            "it expects metrics at the end: the data points a Worker writes on Cloudflare are not read back there".to_owned(),
        ));
    }
    for step in &s.steps {
        let why = match step.get_ref().action() {
            Ok(Action::SetBindings(_)) => {
                "`set_bindings`: a binding on Cloudflare cannot change mid-run"
            }
            Ok(Action::SetRedis(_)) => "`set_redis`: Cloudflare runs no Redis of the harness's",
            Ok(Action::AdvanceClock(_)) => {
                "`advance_clock`: Cloudflare has no scenario clock (window steps wait real time there)"
            }
            Ok(Action::RestartIsolate(_)) => "`restart_isolate`: Cloudflare's isolates are its own",
            Ok(Action::StepWallClock(_)) => "`step_wall_clock`: Cloudflare's clocks are its own",
            Ok(Action::Limit(_)) => "`limit`: the Worker on Cloudflare has no control endpoint",
            Ok(Action::Send { send, .. }) if send.isolate.is_some() => {
                "a `send` to one isolate: Cloudflare's isolates are its own"
            }
            Ok(Action::Send {
                expect: Some(expect),
                ..
            }) if expect.get_ref().metrics.is_some() => {
                "`metrics`: the data points a Worker writes on Cloudflare are not read back there"
            }
            Ok(Action::Send {
                expect: Some(expect),
                ..
            }) if expect.get_ref().deadline.is_some() => {
                "a `deadline`: the real binding cannot be made to wait, and no load probe reaches the edge's isolates"
            }
            Ok(Action::Send { send, .. })
                if send.distinct_addresses
                    || send
                        .headers
                        .keys()
                        .any(|h| h.eq_ignore_ascii_case(runtime::limiter::ADDRESS_HEADER)) =>
            {
                "Cloudflare sets CF-Connecting-IP itself, so a run sends from one address, the runner's own"
            }
            _ => continue,
        };
        return Some((Some(step.span()), why.to_owned()));
    }
    None
}
