//! The I/O half on Cloudflare Workers (wasm32 only): asks every binding of a
//! request at once through a small JavaScript helper (`ask-bindings.js`,
//! carried beside the wasm-bindgen glue in its `snippets/` folder) that races
//! them against the 500 ms deadline on the isolate's own timer, so wasm
//! awaits one promise per request; hands the answers to the sans-IO
//! [`Limiter`], and writes the fallback log lines.

use std::cell::RefCell;

use js_sys::{Array, Promise, Uint8Array};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

use crate::config::{Application, Counting};
pub use crate::limiter::GateError;
use crate::limiter::{
    ADDRESS_HEADER, BINDING_DEADLINE_MS, BindingAnswer, FallbackReason, Limiter, Refusal, Subject,
    Tally,
};

#[wasm_bindgen(module = "/src/ask-bindings.js")]
extern "C" {
    /// Asks the bindings `[name0, key0, name1, key1, ...]` of `env` at once,
    /// racing `deadline_ms`: a `Uint8Array` of answer codes, or a promise of
    /// one when a binding was asked (codes in `ask-bindings.js`, `ANSWER`).
    #[wasm_bindgen(js_name = askBindings)]
    fn ask_bindings_js(env: &JsValue, asks: &Array, deadline_ms: u32) -> JsValue;
}

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = console, js_name = warn)]
    fn console_warn(line: &str);
}

/// One isolate's limiter for one deployable. Keep it for the isolate's
/// lifetime (a `thread_local!`): its memory is the fallback count.
pub struct Gate {
    limiter: RefCell<Limiter>,
}

impl Gate {
    /// Builds the gate from the application description, as at build time.
    pub fn new(application_toml: &str, deployable: &str) -> Result<Gate, GateError> {
        let app = Application::from_toml(application_toml)?;
        let seed = (js_sys::Math::random() * u64::MAX as f64) as u128
            ^ ((js_sys::Math::random() * u64::MAX as f64) as u128) << 64;
        let limiter = Limiter::new(&app, deployable, seed)?;
        Ok(Gate {
            limiter: RefCell::new(limiter),
        })
    }

    /// Decides one request to `path`: `Ok` to pass, `Err` with the 429 to send.
    /// Never fails for the binding's sake: every binding problem falls back to memory.
    ///
    /// `now_ms` is the embedding's clock in ms since the Unix epoch, read when
    /// the request arrived: a production Worker passes `Date.now()`, a test
    /// embedding may pass its own clock. It must never go backwards between
    /// requests of one isolate (the fallback count's windows are aligned to
    /// it). The 500 ms deadline runs on the isolate's real timers whatever it is.
    pub async fn decide(
        &self,
        env: &JsValue,
        subject: &Subject,
        path: &str,
        now_ms: u64,
    ) -> Result<(), Refusal> {
        let checks = self.limiter.borrow().checks(subject, path);
        // Every binding is asked at once, so the 500 ms deadline bounds the
        // whole request however many limits count it.
        // The embedding's clock at arrival, moved on by the real time the asks took,
        // so the cool-off is measured from when a binding failed.
        let started = js_sys::Date::now();
        let asks_now = self.limiter.borrow_mut().asks(&checks, now_ms);
        let asks: Vec<(&str, &str)> = checks
            .iter()
            .zip(&asks_now)
            .filter(|(_, ask)| **ask)
            .filter_map(|(check, _)| Some((check.binding.as_deref()?, check.key.as_str())))
            .collect();
        let mut asked = ask_bindings(env, &asks).await.into_iter();
        let answers = asks_now
            .iter()
            .map(|&ask| if ask { asked.next() } else { None })
            .collect();
        // The borrow is never held across an await: requests interleave in an isolate.
        let settled_ms = now_ms + (js_sys::Date::now() - started).max(0.0) as u64;
        let decision = self
            .limiter
            .borrow_mut()
            .conclude(&checks, answers, settled_ms);
        for log in &decision.logs {
            console_warn(&log.to_json_line());
        }
        match decision.refusal {
            Some(refusal) => Err(refusal),
            None => Ok(()),
        }
    }

    /// How this deployable counts: through the binding, in memory, or not at all (no API).
    pub fn counting(&self) -> Counting {
        self.limiter.borrow().counting().clone()
    }

    /// Whether this deployable serves an API (asked on every request, so no clone).
    pub fn serves_api(&self) -> bool {
        *self.limiter.borrow().counting() != Counting::NoApi
    }

    /// Records a request refused for another reason (an API request to a deployable without one).
    pub fn record_refused(&self) {
        self.limiter.borrow_mut().record_refused();
    }

    /// Records a health check and returns the tally its response reports.
    pub fn record_health_check(&self) -> Tally {
        self.limiter.borrow_mut().record_health_check()
    }
}

/// The subject of a request: the caller the application signed in, else the
/// address from `CF-Connecting-IP`.
pub fn subject_of(request: &web_sys::Request, caller_id: Option<&str>) -> Subject {
    let address = request.headers().get(ADDRESS_HEADER).ok().flatten();
    Subject::of_request(caller_id, address.as_deref())
}

/// The 429 response for a refusal.
pub fn refusal_response(refusal: &Refusal) -> Result<web_sys::Response, JsValue> {
    let init = web_sys::ResponseInit::new();
    init.set_status(Refusal::STATUS);
    let response = web_sys::Response::new_with_opt_str_and_init(Some(&refusal.body()), &init)?;
    response
        .headers()
        .set("Retry-After", &refusal.retry_after_seconds.to_string())?;
    response
        .headers()
        .set(Refusal::POLICY_HEADER, &refusal.rate_limit_policy())?;
    response.headers().set("Content-Type", "application/json")?;
    Ok(response)
}

/// Asks the bindings `(name, key)` at once with the deadline, turning every
/// way one can fail into a fallback reason; one answer per ask, in order.
async fn ask_bindings(env: &JsValue, asks: &[(&str, &str)]) -> Vec<BindingAnswer> {
    if asks.is_empty() {
        return Vec::new();
    }
    let list = Array::new_with_length(2 * asks.len() as u32);
    for (i, (name, key)) in asks.iter().enumerate() {
        list.set(2 * i as u32, JsValue::from_str(name));
        list.set(2 * i as u32 + 1, JsValue::from_str(key));
    }
    let outcome = ask_bindings_js(env, &list, BINDING_DEADLINE_MS);
    let codes = match outcome.dyn_into::<Promise>() {
        // The helper never rejects; if it did, every binding failed.
        Ok(promise) => JsFuture::from(promise).await.unwrap_or(JsValue::UNDEFINED),
        Err(codes) => codes,
    };
    let codes = codes
        .dyn_into::<Uint8Array>()
        .map(|c| c.to_vec())
        .unwrap_or_default();
    (0..asks.len())
        .map(|i| match codes.get(i) {
            Some(0) => BindingAnswer::Answered { success: false },
            Some(1) => BindingAnswer::Answered { success: true },
            Some(2) => BindingAnswer::Unavailable(FallbackReason::Missing),
            Some(4) => BindingAnswer::Unavailable(FallbackReason::TimedOut),
            _ => BindingAnswer::Unavailable(FallbackReason::Failed),
        })
        .collect()
}
