//! A `deadline`'s sense: one a request can wait for, its waiting requests
//! sent together, to one isolate that has served a request before.

use std::ops::Range;

use crate::language::scenario::bounds::MAX_DEADLINE_MS;
use crate::language::scenario::expect::Deadline;
use crate::language::scenario::model::Scenario;
use crate::language::scenario::step::{Action, SendRequests};

/// A `deadline` step sends to one isolate, which has served a request
/// before: which requests wait is told by their order, which only one
/// isolate keeps, and an isolate's first request also pays for its start
/// (hundreds of ms under load), which is no deadline's. `served` follows
/// which isolates have served a request, step by step.
pub(super) fn validate_deadline_isolate(
    s: &Scenario,
    action: Action<'_>,
    served: &mut [bool],
) -> Result<(), (Range<usize>, String)> {
    match action {
        Action::RestartIsolate(isolate) => {
            if let Some(served) = served.get_mut(isolate) {
                *served = false;
            }
        }
        Action::Send { send, expect } => {
            let deadline = expect.and_then(|e| e.get_ref().deadline.as_ref());
            if let Some(deadline) = deadline {
                let isolate = match send.isolate {
                    Some(isolate) => isolate,
                    None if s.isolates == 1 => 0,
                    None => return Err((
                        deadline.span(),
                        "which requests wait is told by their order, which only one isolate keeps: name the step's `isolate`".to_owned(),
                    )),
                };
                if !served.get(isolate).copied().unwrap_or(true) {
                    return Err((
                        deadline.span(),
                        format!(
                            "the waiting requests would be isolate {isolate}'s first, which also pay for its start: send it a request first (such as `path = \"/health\"`)"
                        ),
                    ));
                }
            }
            let reached = match send.isolate {
                Some(isolate) => isolate..isolate + 1,
                None => 0..send.requests.min(s.isolates),
            };
            for isolate in reached {
                if let Some(served) = served.get_mut(isolate) {
                    *served = true;
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// `deadline`: a deadline a request can wait for, and waiting requests sent together.
pub(super) fn validate_deadline(send: &SendRequests, deadline: Deadline) -> Result<(), String> {
    let Deadline { ms, waiting } = deadline;
    if !(1..=MAX_DEADLINE_MS).contains(&ms) {
        return Err(format!(
            "a deadline of {ms} ms: write 1 to {MAX_DEADLINE_MS}"
        ));
    }
    if waiting == 0 || waiting > send.requests {
        return Err(format!(
            "`waiting` is {waiting} of {} requests: at least one, at most all of them",
            send.requests
        ));
    }
    if waiting > send.concurrency {
        return Err(format!(
            "{waiting} requests wait together, but the step sends {} at a time: raise `concurrency`",
            send.concurrency
        ));
    }
    Ok(())
}
