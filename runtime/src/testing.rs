//! What the harness's Worker fixtures share beside the gate, only with the
//! `testing` feature: one tally per isolate of health checks and refusals
//! (the production gate counts no health checks), which their health route
//! reports, and the scenario clock's hook.

use std::cell::Cell;

use crate::config::Counting;

thread_local! {
    /// This isolate's health checks answered and requests refused.
    static TALLY: (Cell<u64>, Cell<u64>) = const { (Cell::new(0), Cell::new(0)) };
}

/// Counts a refused request (a 429, or an API request to a deployable serving none).
pub fn tally_refused() {
    TALLY.with(|(_, refused)| refused.set(refused.get() + 1));
}

/// What the fixtures' `GET /health` answers:
/// `{"status":"ok","deployable","counting","health_checks","refused"}`. A
/// struct rather than a `serde_json::Value`, whose serialiser would link
/// float formatting into the Worker for numbers that are never floats.
#[derive(Debug, serde::Serialize)]
pub struct HealthReport<'a> {
    status: &'static str,
    deployable: &'a str,
    counting: &'static str,
    health_checks: u64,
    refused: u64,
}

impl HealthReport<'_> {
    /// As JSON text.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// Counts a health check and returns what the fixtures' `GET /health` answers.
pub fn health_report<'a>(deployable: &'a str, counting: &Counting) -> HealthReport<'a> {
    let (health_checks, refused) = TALLY.with(|(health_checks, refused)| {
        health_checks.set(health_checks.get() + 1);
        (health_checks.get(), refused.get())
    });
    HealthReport {
        status: "ok",
        deployable,
        counting: counting.name(),
        health_checks,
        refused,
    }
}

/// Shifts the clock of this isolate's gate (built from `env`'s plan) by
/// `offset_ms`: what each fixture's exported `set_clock_offset_ms` does when
/// the harness's entry module gets `POST /clock`.
#[cfg(target_arch = "wasm32")]
pub fn set_clock_offset_ms(
    offset_ms: f64,
    env: &wasm_bindgen::JsValue,
) -> Result<(), wasm_bindgen::JsValue> {
    let gate = crate::workers::WorkersGate::of_isolate(env)?;
    gate.clock().set_offset_ms(offset_ms as i64);
    Ok(())
}

#[cfg(target_arch = "wasm32")]
thread_local! {
    /// What the `LIMITING` text binding says (see [`limiting_off`]).
    static LIMITING_OFF: Cell<Option<bool>> = const { Cell::new(None) };
}

/// Whether the text binding `LIMITING` says `off`: the benchmarks' switch
/// (`harness/benches/workerd.rs`, `IsolateConfig::limiting_off`) that has
/// each harness Worker answer its API without asking the gate. Read on the
/// first request and kept. A harness hook, outside the gate.
#[cfg(target_arch = "wasm32")]
pub fn limiting_off(env: &wasm_bindgen::JsValue) -> bool {
    if let Some(off) = LIMITING_OFF.with(Cell::get) {
        return off;
    }
    let off = js_sys::Reflect::get(env, &wasm_bindgen::JsValue::from_str("LIMITING"))
        .ok()
        .and_then(|v| v.as_string())
        .is_some_and(|v| v == "off");
    LIMITING_OFF.with(|l| l.set(Some(off)));
    off
}
