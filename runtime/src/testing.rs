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

/// Counts a health check and returns what the fixtures' `GET /health`
/// answers: `{"status":"ok","deployable","counting","health_checks","refused"}`.
pub fn health_report(deployable: &str, counting: &Counting) -> serde_json::Value {
    let (health_checks, refused) = TALLY.with(|(health_checks, refused)| {
        health_checks.set(health_checks.get() + 1);
        (health_checks.get(), refused.get())
    });
    serde_json::json!({
        "status": "ok",
        "deployable": deployable,
        "counting": counting.name(),
        "health_checks": health_checks,
        "refused": refused,
    })
}

/// Shifts the clock of this isolate's gate (built from `env`'s plan) by
/// `offset_ms`: what each fixture's exported `set_clock_offset_ms` does when
/// the harness's entry module gets `POST /clock`.
#[cfg(target_arch = "wasm32")]
pub fn set_clock_offset_ms(
    offset_ms: f64,
    env: &wasm_bindgen::JsValue,
) -> Result<(), wasm_bindgen::JsValue> {
    let gate = crate::workers::isolate_gate(env)
        .map_err(|e| wasm_bindgen::JsValue::from_str(&e.to_string()))?;
    gate.clock().set_offset_ms(offset_ms as i64);
    Ok(())
}
