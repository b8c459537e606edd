//! A Workers scenario's emulated bindings: the ones its deployable's plan
//! needs and how each starts, `set_bindings` changing them in every
//! isolate, the keys that reached them read back, and a raw `limit()` call
//! on one.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use runtime::bindings::Bindings;
use runtime::config::Application;

use super::{ControlRequest, EngineError, Runner};
use crate::engine::limit_call::{control_body, read_outcome};
use crate::engine::observation::{BindingCall, BindingOutcome, CallRecord};
use crate::language::probe::LimitCall;
use crate::language::scenario::{ALL_BINDINGS, Action, Behaviour, Prepared, behaviour_of};
use crate::world::workerd::EmulatedBinding;

/// The bindings a scenario's deployable needs, with their starting behaviour.
pub fn emulated_bindings(
    app: &Application,
    deployable: &str,
    prepared: &Prepared,
) -> Result<Vec<EmulatedBinding>, EngineError> {
    let d = app
        .deployable(deployable)
        .ok_or_else(|| EngineError::UnknownDeployable(deployable.to_owned()))?;
    let plan = Bindings::for_deployable(app, d);
    let scenario = prepared.scenario.scenario.get_ref();
    let initial = scenario
        .bindings
        .as_ref()
        .map(|b| b.get_ref().clone())
        .unwrap_or_default();
    let changes: Vec<&BTreeMap<String, Behaviour>> = scenario
        .steps
        .iter()
        .filter_map(|s| match s.get_ref().action() {
            Ok(Action::SetBindings(changes)) => Some(changes),
            _ => None,
        })
        .collect();
    let known: BTreeSet<&str> = plan.bindings.iter().map(|b| b.name.as_str()).collect();
    for name in initial.keys().chain(changes.iter().flat_map(|c| c.keys())) {
        if name != ALL_BINDINGS && !known.contains(name.as_str()) {
            let listed: Vec<&str> = known.iter().copied().collect();
            return Err(EngineError::UnknownBinding {
                name: name.clone(),
                known: listed.join(", "),
            });
        }
    }
    Ok(plan
        .bindings
        .iter()
        .map(|b| {
            let start = behaviour_of(&initial, &b.name)
                .cloned()
                .unwrap_or(Behaviour::Healthy);
            let changed_later = changes
                .iter()
                .any(|c| behaviour_of(c, &b.name).is_some_and(|x| *x != Behaviour::Missing));
            EmulatedBinding {
                name: b.name.clone(),
                namespace_id: b.namespace_id,
                limit: b.limit.requests,
                period: b.limit.window_seconds,
                in_config: start != Behaviour::Missing || changed_later,
                initial: start,
            }
        })
        .collect())
}

impl Runner<'_> {
    /// `limit`: one raw call through the isolate's control endpoint
    /// (`assets/entry.js`), its outcome recorded.
    pub(super) async fn limit_call(
        &mut self,
        step: usize,
        call: &LimitCall,
    ) -> Result<(), EngineError> {
        let failed = |detail: String| EngineError::Control {
            request: ControlRequest::CallLimit,
            detail,
        };
        let url = match self.isolates.get(call.isolate) {
            Some(isolate) => format!("{}/limit", isolate.process.url()),
            None => return Err(failed(format!("isolate {} does not exist", call.isolate))),
        };
        let body = control_body(call);
        let answer = self
            .control(ControlRequest::CallLimit, self.client.post(url).json(&body))
            .await?;
        let outcome = read_outcome(&answer).map_err(|e| failed(e.to_string()))?;
        self.observation.calls.push(CallRecord {
            step,
            isolate: call.isolate,
            outcome,
        });
        Ok(())
    }

    /// `set_bindings`: changes the named bindings' behaviour in every isolate.
    pub(super) async fn set_bindings(
        &mut self,
        changes: &BTreeMap<String, Behaviour>,
    ) -> Result<(), EngineError> {
        let mut body = serde_json::Map::new();
        for name in &self.configured {
            if let Some(b) = changes.get(name).or_else(|| changes.get(ALL_BINDINGS)) {
                body.insert(name.clone(), b.to_json());
            }
        }
        for isolate in &self.isolates {
            let url = format!("{}/bindings", isolate.process.url());
            self.control(
                ControlRequest::ChangeBindings,
                self.client.post(url).json(&body),
            )
            .await?;
        }
        Ok(())
    }

    /// Each configured binding's stats in one isolate (`GET /bindings`, see `assets/entry.js`).
    pub(super) async fn binding_stats(
        &self,
        base: &str,
    ) -> Result<serde_json::Map<String, serde_json::Value>, EngineError> {
        let value = self
            .control(
                ControlRequest::ReadBindings,
                self.client.get(format!("{base}/bindings")),
            )
            .await?;
        Ok(value.as_object().cloned().unwrap_or_default())
    }

    /// Adds the calls the deployable made on each binding of process
    /// `generation` of `isolate`, as its binding stats log them
    /// ([`binding_calls`]), to the record.
    pub(super) fn record_binding_calls(
        &mut self,
        isolate: usize,
        generation: usize,
        stats: &serde_json::Map<String, serde_json::Value>,
    ) {
        let calls = binding_calls((isolate, generation), stats, self.epoch_wall_ms);
        self.observation.binding_calls.extend(calls);
    }

    /// Adds the keys in one process's binding stats to the record.
    pub(super) fn record_binding_keys(
        &mut self,
        stats: serde_json::Map<String, serde_json::Value>,
    ) {
        for (binding, stat) in stats {
            let keys = stat["keys"]
                .as_object()
                .map(|k| k.keys().cloned().collect::<Vec<_>>())
                .unwrap_or_default();
            self.observation
                .binding_keys
                .entry(binding)
                .or_default()
                .extend(keys);
        }
    }
}

/// The calls the deployable of `process` (its isolate and generation) made
/// on each binding, as that process's binding stats log them (`log`:
/// `[Date.now(), outcome, ms until settled]`), placed since the scenario
/// started, whose wall clock then read `epoch_wall_ms`. An entry that is
/// not of that shape is left out: it can only be a fault of
/// `assets/ratelimit-binding.js`, and the page draws what it can. A log
/// that was full (`log_dropped`, past ten thousand calls in one process) is
/// left out whole: the calls it lacks would read as a binding not asked.
fn binding_calls(
    (isolate, generation): (usize, usize),
    stats: &serde_json::Map<String, serde_json::Value>,
    epoch_wall_ms: u64,
) -> Vec<BindingCall> {
    let mut calls = Vec::new();
    for (binding, stat) in stats {
        if stat["log_dropped"]
            .as_u64()
            .is_some_and(|dropped| dropped > 0)
        {
            continue;
        }
        for entry in stat["log"].as_array().into_iter().flatten() {
            let Some(wall_ms) = entry[0].as_f64().filter(|ms| *ms >= 0.0) else {
                continue;
            };
            let after = entry[2]
                .as_f64()
                .map(|ms| Duration::from_millis(ms.max(0.0) as u64));
            let outcome = match (entry[1].as_str(), after) {
                (Some("answered"), Some(after)) => BindingOutcome::Answered(after),
                (Some("malformed"), Some(after)) => BindingOutcome::Malformed(after),
                (Some("rejected"), Some(after)) => BindingOutcome::Rejected(after),
                (Some("threw"), _) => BindingOutcome::Threw,
                (Some("pending"), _) => BindingOutcome::Pending,
                _ => continue,
            };
            calls.push(BindingCall {
                isolate,
                generation,
                binding: binding.clone(),
                at: Duration::from_millis((wall_ms as u64).saturating_sub(epoch_wall_ms)),
                outcome,
            });
        }
    }
    calls
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_binding_s_log_is_read_as_calls_placed_since_the_scenario_started() {
        let stats = serde_json::json!({
            "LIMITS_120_PER_60S": {
                "calls": 5,
                "log": [
                    [1_000_100, "answered", 2],
                    [1_000_200, "pending", null],
                    [1_000_300, "threw", null],
                    [1_000_400, "rejected", 0],
                    [1_000_500, "malformed", 1],
                    [1_000_600, "answered", null],
                    ["soon", "answered", 1]
                ],
                "log_dropped": 0
            },
            "LIMITS_600_PER_60S": {
                "log": [[1_000_100, "answered", 1]],
                "log_dropped": 3
            }
        });
        let stats = stats.as_object().expect("an object");
        let calls = binding_calls((1, 2), stats, 1_000_000);
        let ms = Duration::from_millis;
        let seen: Vec<(Duration, BindingOutcome)> =
            calls.iter().map(|c| (c.at, c.outcome)).collect();
        assert_eq!(
            seen,
            [
                (ms(100), BindingOutcome::Answered(ms(2))),
                (ms(200), BindingOutcome::Pending),
                (ms(300), BindingOutcome::Threw),
                (ms(400), BindingOutcome::Rejected(ms(0))),
                (ms(500), BindingOutcome::Malformed(ms(1))),
            ],
            "an answer with no time, and a time that is no number, are left out"
        );
        assert!(
            calls
                .iter()
                .all(|c| c.isolate == 1 && c.generation == 2 && c.binding == "LIMITS_120_PER_60S")
        );
    }
}
