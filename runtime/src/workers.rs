//! The I/O half on Cloudflare Workers (wasm32 only): asks every binding of a
//! request at once through a small JavaScript helper (`ask-bindings.js`,
//! carried beside the wasm-bindgen glue in its `snippets/` folder) that races
//! them against the 500 ms deadline on the isolate's own timer; hands the
//! answers to the sans-IO [`Limiter`], and writes the fallback log lines.
//!
//! No Rust future is suspended on the way: [`Gate::decide`] runs
//! synchronously, and when a binding has to be waited for, JavaScript awaits
//! it and calls back into wasm once with every answer. Awaiting a promise
//! from wasm (wasm-bindgen-futures' `JsFuture`, its task queue's
//! `queueMicrotask` on every wake-up, an `async` export's
//! `future_to_promise`) cost more CPU than the whole binding call does in
//! JavaScript (BENCHMARKS.md, "The cost of asking a healthy binding").

use std::cell::RefCell;
use std::rc::Rc;

use js_sys::{Array, Promise, Uint8Array};
use wasm_bindgen::prelude::*;

use crate::config::{Application, Counting};
pub use crate::limiter::GateError;
use crate::limiter::{
    ADDRESS_HEADER, BINDING_DEADLINE_MS, BindingAnswer, Check, FallbackReason, Limiter, Refusal,
    Subject, Tally, url_path,
};

#[wasm_bindgen(module = "/src/ask-bindings.js")]
extern "C" {
    /// Asks the bindings `[name0, key0, name1, key1, ...]` of `env` at once,
    /// racing `deadline_ms`: a `Uint8Array` of answer codes, or a promise of
    /// one when a binding was asked (codes in `ask-bindings.js`, `ANSWER`).
    #[wasm_bindgen(js_name = askBindings)]
    fn ask_bindings_js(env: &JsValue, asks: &Array, deadline_ms: u32) -> JsValue;

    /// `answer.then(resume)`: the promise of what `resume` returns.
    #[wasm_bindgen(js_name = whenAnswered)]
    fn when_answered(answer: &Promise, resume: &JsValue) -> Promise;
}

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = console, js_name = warn)]
    fn console_warn(line: &str);
}

/// One isolate's limiter for one deployable. Keep it for the isolate's
/// lifetime (a `thread_local!`): its memory is the fallback count.
pub struct Gate {
    /// Shared with the continuations of requests waiting for a binding.
    limiter: Rc<RefCell<Limiter>>,
    /// Each planned binding's name as a JavaScript string, made once, so a
    /// request does not encode it again.
    names: Vec<(String, JsValue)>,
}

impl Gate {
    /// Builds the gate from the application description, as at build time.
    pub fn new(application_toml: &str, deployable: &str) -> Result<Gate, GateError> {
        let app = Application::from_toml(application_toml)?;
        let seed = (js_sys::Math::random() * u64::MAX as f64) as u128
            ^ ((js_sys::Math::random() * u64::MAX as f64) as u128) << 64;
        let limiter = Limiter::new(&app, deployable, seed)?;
        let names = limiter
            .plan()
            .bindings
            .iter()
            .map(|b| (b.name.clone(), JsValue::from_str(&b.name)))
            .collect();
        Ok(Gate {
            limiter: Rc::new(RefCell::new(limiter)),
            names,
        })
    }

    /// Decides one request to `path` and answers it with `respond`, which is
    /// given `Ok` to pass or `Err` with the refusal, and builds the response
    /// (for a refusal, usually [`refusal_response`]). Never fails for the binding's sake: every
    /// binding problem falls back to memory.
    ///
    /// Returns `respond`'s response itself when no binding had to be waited
    /// for (counting in memory, a binding missing or cooling off), else a
    /// promise of it, settled once every asked binding answered or the 500 ms
    /// deadline passed: either way what a Worker's `fetch` handler returns.
    /// `respond` runs exactly once; an `Err` it returns is thrown (or rejects
    /// the promise).
    ///
    /// `now_ms` is the embedding's clock in ms since the Unix epoch, read when
    /// the request arrived: a production Worker passes `Date.now()`, a test
    /// embedding may pass its own clock. It must never go backwards between
    /// requests of one isolate (the fallback count's windows are aligned to
    /// it). The 500 ms deadline runs on the isolate's real timers whatever it is.
    pub fn decide<F>(
        &self,
        env: &JsValue,
        subject: &Subject,
        path: &str,
        now_ms: u64,
        respond: F,
    ) -> Result<JsValue, JsValue>
    where
        F: FnOnce(Result<(), Refusal>) -> Result<web_sys::Response, JsValue> + 'static,
    {
        let checks = self.limiter.borrow().checks(subject, path);
        let asked = self.limiter.borrow_mut().asks(&checks, now_ms);
        let Some(list) = self.ask_list(&checks, &asked) else {
            let verdict = conclude(&self.limiter, &checks, &asked, &JsValue::UNDEFINED, now_ms);
            return respond(verdict).map(JsValue::from);
        };
        // The embedding's clock at arrival, moved on by the real time the asks
        // took, so a cool-off is measured from when a binding failed.
        let started = js_sys::Date::now();
        let outcome = ask_bindings_js(env, &list, BINDING_DEADLINE_MS);
        let Some(promise) = outcome.dyn_ref::<Promise>() else {
            // Every binding answered at once (missing, or threw).
            let verdict = conclude(&self.limiter, &checks, &asked, &outcome, now_ms);
            return respond(verdict).map(JsValue::from);
        };
        let limiter = Rc::clone(&self.limiter);
        // The borrow is never held across the wait: requests interleave in an isolate.
        let resume = move |codes: JsValue| -> Result<JsValue, JsValue> {
            let settled_ms = now_ms + (js_sys::Date::now() - started).max(0.0) as u64;
            let verdict = conclude(&limiter, &checks, &asked, &codes, settled_ms);
            respond(verdict).map(JsValue::from)
        };
        Ok(when_answered(promise, &Closure::once_into_js(resume)).into())
    }

    /// The `[name, key, ...]` list of the bindings to ask now, or `None` when
    /// there is none.
    fn ask_list(&self, checks: &[Check], asked: &[bool]) -> Option<Array> {
        let asks: Vec<(&str, &str)> = checks
            .iter()
            .zip(asked)
            .filter(|(_, ask)| **ask)
            .filter_map(|(check, _)| Some((check.binding.as_deref()?, check.key.as_str())))
            .collect();
        if asks.is_empty() {
            return None;
        }
        let list = Array::new_with_length(2 * asks.len() as u32);
        for (i, (name, key)) in asks.into_iter().enumerate() {
            let name = match self.names.iter().find(|(n, _)| n == name) {
                Some((_, js)) => js.clone(),
                None => JsValue::from_str(name),
            };
            list.set(2 * i as u32, name);
            list.set(2 * i as u32 + 1, JsValue::from_str(key));
        }
        Some(list)
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

/// Settles a request with the answer codes of the bindings it asked
/// (`codes`: the helper's `Uint8Array`, in the order of the asked checks;
/// anything else means every asked binding failed), writes the fallback
/// lines, and says whether it passes.
fn conclude(
    limiter: &RefCell<Limiter>,
    checks: &[Check],
    asked: &[bool],
    codes: &JsValue,
    now_ms: u64,
) -> Result<(), Refusal> {
    let codes = codes
        .dyn_ref::<Uint8Array>()
        .map(Uint8Array::to_vec)
        .unwrap_or_default();
    let mut codes = codes.into_iter();
    let answers = asked
        .iter()
        .map(|&ask| ask.then(|| answer_of(codes.next())))
        .collect();
    let decision = limiter.borrow_mut().conclude(checks, answers, now_ms);
    for log in &decision.logs {
        console_warn(&log.to_json_line());
    }
    match decision.refusal {
        Some(refusal) => Err(refusal),
        None => Ok(()),
    }
}

/// One answer code of `ask-bindings.js` (`ANSWER`) as the limiter reads it;
/// a code that is absent or unknown is a failure.
fn answer_of(code: Option<u8>) -> BindingAnswer {
    match code {
        Some(0) => BindingAnswer::Answered { success: false },
        Some(1) => BindingAnswer::Answered { success: true },
        Some(2) => BindingAnswer::Unavailable(FallbackReason::Missing),
        Some(4) => BindingAnswer::Unavailable(FallbackReason::TimedOut),
        _ => BindingAnswer::Unavailable(FallbackReason::Failed),
    }
}

/// The path a request is limited under: its URL's path, as
/// `new URL(request.url).pathname` gives it, without building a URL object.
pub fn path_of(request: &web_sys::Request) -> String {
    url_path(&request.url()).to_owned()
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
