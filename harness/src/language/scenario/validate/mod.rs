//! Whether a scenario makes sense, validated as its file is loaded so that
//! nothing runs that could not be judged: each step does one thing, its
//! sequences parse and add up, its isolates exist ([`send`], [`deadline`],
//! [`redis`]); what it asks of its deployable, the deployable can do
//! ([`deployable`]), the metrics it expects among those it produces
//! ([`metrics`]), the addresses it sends among what it reads
//! ([`address`]); Cloudflare can run what is marked to run there
//! ([`cloudflare`]); and it judges something. Every refusal is a
//! [`ScenarioError`] at the place in the file.

mod address;
mod cloudflare;
mod deadline;
mod deployable;
mod metrics;
mod redis;
mod send;

use std::collections::BTreeSet;
use std::ops::Range;

use runtime::config::Target;

pub use cloudflare::cloudflare_obstacle;
use cloudflare::validate_for_cloudflare;
use deadline::validate_deadline_isolate;
use deployable::validate_for_deployable;
use metrics::validate_metrics;
use redis::{validate_redis_change, validate_redis_start};
use send::validate_send;

use super::behaviour::ALL_BINDINGS;
use super::bounds::{MAX_ISOLATES, MAX_REQUESTS};
use super::model::{ClockKind, Scenario};
use super::prepared::Prepared;
use super::source::{ScenarioError, ScenarioSource};
use super::step::Action;

/// Every validation of a scenario: an error for each group that fails
/// (each step's own sense apart), so a file's author sees them all at once.
/// `windows` are the window lengths its deployable counts, when its
/// application validates.
pub(super) fn validate(prepared: &Prepared, windows: Option<BTreeSet<u32>>) -> Vec<ScenarioError> {
    let source = &prepared.scenario;
    let mut errors = validate_alone(source, windows.as_ref());
    let groups = [
        validate_for_deployable(prepared),
        validate_binding_names(prepared),
        validate_metrics(prepared),
        validate_for_cloudflare(prepared),
    ];
    errors.extend(groups.into_iter().filter_map(Result::err));
    // A scenario with a wrong step may judge nothing for that alone: said
    // only of one that is otherwise right.
    if errors.is_empty()
        && let Err(error) = validate_judges_something(source)
    {
        errors.push(error);
    }
    errors
}

/// The validations that need no application (but the windows its limits
/// count, where it has them): each step does one thing, sequences parse
/// and add up. An error for each step that is wrong.
fn validate_alone(source: &ScenarioSource, windows: Option<&BTreeSet<u32>>) -> Vec<ScenarioError> {
    let s = source.scenario.get_ref();
    let mut errors = Vec::new();
    if !(1..=MAX_ISOLATES).contains(&s.isolates) {
        errors.push(
            source.error(
                source
                    .key_span(source.table_body(source.scenario.span()), "isolates")
                    .unwrap_or_else(|| source.scenario.span()),
                format!(
                    "`isolates` is {}: a scenario runs 1 to {MAX_ISOLATES} (each is a process)",
                    s.isolates
                ),
            ),
        );
        return errors;
    }
    if let Some(codes) = &s.expect_diagnostics {
        if !s.steps.is_empty() {
            errors.push(source.error(
                codes.span(),
                "a scenario that expects diagnostics has no steps",
            ));
        }
        for code in codes.get_ref() {
            if let Err(e) = code.parse::<runtime::Code>() {
                errors.push(source.error(codes.span(), e.to_string()));
            }
        }
    }
    if let Some(starts) = &s.redis_starts
        && let Err(m) = validate_redis_start(s, *starts.get_ref())
    {
        errors.push(source.error(starts.span(), m));
    }
    let mut requests = 0;
    let mut served = vec![false; s.isolates];
    for step in &s.steps {
        let action = match step.get_ref().action() {
            Ok(action) => action,
            Err(m) => {
                errors.push(source.error(step.span(), m));
                continue;
            }
        };
        let step_error = validate_action(s, action)
            .and_then(|()| validate_window(action, windows))
            .map_err(|(span, m)| {
                source.error(
                    span.unwrap_or_else(|| step_place(source, step.span(), action)),
                    m,
                )
            })
            .and_then(|()| {
                validate_deadline_isolate(s, action, &mut served)
                    .map_err(|(span, m)| source.error(span, m))
            });
        if let Err(error) = step_error {
            errors.push(error);
            continue;
        }
        if let Action::Send { send, .. } = action {
            // Each is at most MAX_REQUESTS (validate_send), so the sum never overflows.
            requests += send.requests;
            if requests > MAX_REQUESTS {
                errors.push(source.error(
                    step.span(),
                    format!(
                        "this step brings the scenario to {requests} requests, above the {MAX_REQUESTS} a scenario may send"
                    ),
                ));
                break;
            }
        }
    }
    errors
}

/// Where a step's error about its action as a whole is shown: the line of
/// the action's key in the step, or the step's own.
fn step_place(source: &ScenarioSource, step: Range<usize>, action: Action<'_>) -> Range<usize> {
    source
        .key_span(source.table_body(step.clone()), action.key())
        .unwrap_or(step)
}

/// A step that waits for a window's end names a window its deployable
/// counts: any other length would wait for a boundary no limit has.
fn validate_window(
    action: Action<'_>,
    windows: Option<&BTreeSet<u32>>,
) -> Result<(), (Option<Range<usize>>, String)> {
    let (Some(windows), Some(window)) = (windows, action.window()) else {
        return Ok(());
    };
    if windows.contains(&window) {
        return Ok(());
    }
    let counted: Vec<String> = windows.iter().map(|w| format!("{w} s")).collect();
    Err((
        None,
        format!(
            "no limit of the deployable has a window of {window} s: its windows are {}",
            counted.join(", ")
        ),
    ))
}

/// The bindings a scenario sets (`bindings`, `set_bindings`) are its
/// deployable's, each named at its own key: a typo would set nothing.
fn validate_binding_names(prepared: &Prepared) -> Result<(), ScenarioError> {
    let Some((app, d)) = prepared.described() else {
        return Ok(());
    };
    if d.target == Target::Native {
        // `bindings` on a native deployable is refused as a whole.
        return Ok(());
    }
    let source = &prepared.scenario;
    let s = source.scenario.get_ref();
    let plan = runtime::bindings::Bindings::for_deployable(app, d);
    let known: Vec<&str> = plan.bindings.iter().map(|b| b.name.as_str()).collect();
    let maps = s.bindings.iter().chain(
        s.steps
            .iter()
            .filter_map(|step| step.get_ref().set_bindings.as_ref()),
    );
    for map in maps {
        for name in map.get_ref().keys() {
            if name == ALL_BINDINGS || known.contains(&name.as_str()) {
                continue;
            }
            let at = source
                .key_span(map.span(), name)
                .unwrap_or_else(|| map.span());
            return Err(source.error(
                at,
                format!(
                    "`{name}` is not one of the deployable's bindings: [{}] (`harness validate APP.toml` lists them)",
                    known.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

/// One step's own sense; the error's span is `None` for the whole step.
/// The longest step of a wall clock a scenario may take, either way: a day.
const MAX_WALL_STEP_MS: u64 = 86_400_000;

fn validate_action(s: &Scenario, action: Action<'_>) -> Result<(), (Option<Range<usize>>, String)> {
    let whole = |m: &str| Err((None, m.to_owned()));
    let isolate_exists = |isolate: usize| {
        if isolate < s.isolates {
            Ok(())
        } else {
            Err((
                None,
                format!(
                    "isolate {isolate} does not exist: the scenario has {} (numbered from 0)",
                    s.isolates
                ),
            ))
        }
    };
    match action {
        Action::WaitForWindow(0) => whole("a window is a length in seconds, at least 1"),
        Action::WaitForRoom(room) if room.window == 0 => {
            whole("a window is a length in seconds, at least 1")
        }
        Action::WaitForRoom(room) if room.seconds > room.window => {
            whole("`wait_for_room` cannot need more seconds than the window has")
        }
        Action::AdvanceClock(_) if s.clock == ClockKind::Wall => whole(
            "`advance_clock` moves the scenario clock; a `clock = \"wall\"` scenario waits for real time (use `wait_for_window` or `sleep_ms`)",
        ),
        Action::AdvanceClock(0) => whole("`advance_clock` needs at least 1 second"),
        Action::RestartIsolate(isolate) => isolate_exists(isolate),
        Action::StepWallClock(step) if step.ms == 0 => {
            whole("`step_wall_clock` needs a step: `ms` is not 0")
        }
        Action::StepWallClock(step) if step.ms.unsigned_abs() > MAX_WALL_STEP_MS => whole(
            &format!("`step_wall_clock` steps at most a day ({MAX_WALL_STEP_MS} ms) either way"),
        ),
        Action::StepWallClock(step) => isolate_exists(step.isolate),
        Action::SetRedis(behaviour) => validate_redis_change(s, behaviour).map_err(|m| (None, m)),
        Action::Limit(call) => isolate_exists(call.isolate),
        Action::Send { send, expect } => {
            if let Some(isolate) = send.isolate {
                isolate_exists(isolate)?;
            }
            validate_send(send, expect)
        }
        Action::SetBindings(_)
        | Action::WaitForWindow(_)
        | Action::WaitForRoom(_)
        | Action::AdvanceClock(_)
        | Action::SleepMs(_) => Ok(()),
    }
}

/// A scenario must judge something, or it would pass having judged
/// nothing: its diagnostics, a raw `limit()` call's outcome, or traffic,
/// whose every answer is judged (answered, no 5xx unless allowed) and whose
/// processes' logs are (the fallback lines, no key in any line), whatever
/// else the steps expect.
fn validate_judges_something(source: &ScenarioSource) -> Result<(), ScenarioError> {
    let s = source.scenario.get_ref();
    let judged = s.expect_diagnostics.is_some()
        || s.steps.iter().any(|step| {
            matches!(
                step.get_ref().action(),
                Ok(Action::Send { .. } | Action::Limit(_))
            )
        });
    if judged {
        return Ok(());
    }
    Err(source.error(
        source.scenario.span(),
        "this scenario judges nothing: give it a `send` step (its answers and the logs are judged), a `limit` step or `expect_diagnostics`",
    ))
}
