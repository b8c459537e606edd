//! The I/O half on Cloudflare Workers (wasm32 only): asks each binding with a
//! 500 ms deadline raced on the isolate's own timer, hands the answers to the
//! sans-IO [`Limiter`], and writes the fallback log lines.

use std::cell::RefCell;

use js_sys::{Object, Promise, Reflect};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

use crate::config::{Application, Counting, Diagnostics};
use crate::counter::Verdict;
use crate::limiter::{
    ADDRESS_HEADER, BINDING_DEADLINE_MS, BindingAnswer, FallbackReason, Limiter, Refusal, Subject,
    Tally, UnknownDeployable,
};

#[wasm_bindgen]
extern "C" {
    /// Cloudflare's Rate Limiting binding (`env.NAME`), a `Ratelimit` object.
    #[wasm_bindgen(js_name = Ratelimit)]
    pub type RateLimiter;

    /// `limit({ key })`: a promise of `{ success }`. `catch` turns a synchronous throw into `Err`.
    #[wasm_bindgen(method, catch)]
    fn limit(this: &RateLimiter, options: &JsValue) -> Result<JsValue, JsValue>;

    #[wasm_bindgen(js_name = setTimeout)]
    fn set_timeout(handler: &js_sys::Function, ms: u32) -> JsValue;

    #[wasm_bindgen(js_name = clearTimeout)]
    fn clear_timeout(id: &JsValue);

    #[wasm_bindgen(js_namespace = console, js_name = warn)]
    fn console_warn(line: &str);
}

/// Why the gate could not be built from the application description.
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    #[error(transparent)]
    Invalid(#[from] Diagnostics),
    #[error(transparent)]
    UnknownDeployable(#[from] UnknownDeployable),
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
        let answers = futures::future::join_all(checks.iter().map(|check| async move {
            match &check.binding {
                Some(name) => Some(ask_binding(env, name, &check.key).await),
                None => None,
            }
        }))
        .await;
        for (check, answer) in checks.iter().zip(answers) {
            // The borrow is never held across an await: requests interleave in an isolate.
            let settled = self.limiter.borrow_mut().settle(check, answer, now_ms);
            if let Some(log) = settled.log {
                console_warn(&log.to_json_line());
            }
            if settled.verdict == Verdict::Exceeded {
                self.limiter.borrow_mut().record_refused();
                return Err(Refusal::for_limit(check.limit));
            }
        }
        Ok(())
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
    response.headers().set("Content-Type", "application/json")?;
    Ok(response)
}

/// Asks one binding, turning every way it can fail into a fallback reason.
async fn ask_binding(env: &JsValue, name: &str, key: &str) -> BindingAnswer {
    let binding = Reflect::get(env, &JsValue::from_str(name)).unwrap_or(JsValue::UNDEFINED);
    if binding.is_undefined() || binding.is_null() {
        return BindingAnswer::Unavailable(FallbackReason::Missing);
    }
    let options = Object::new();
    if Reflect::set(&options, &"key".into(), &key.into()).is_err() {
        return BindingAnswer::Unavailable(FallbackReason::Failed);
    }
    let called = match binding.unchecked_into::<RateLimiter>().limit(&options) {
        Ok(value) => Promise::resolve(&value),
        Err(_) => return BindingAnswer::Unavailable(FallbackReason::Failed),
    };

    // Race the binding against the deadline on the isolate's own timer. The
    // timer's closure is owned here and dropped once the race is over: a
    // closure handed to JS with `once_into_js` would leak whenever the
    // binding answers first and the timer never fires.
    let deadline = Object::new();
    let mut resolve_deadline = None;
    let timeout = Promise::new(&mut |resolve, _reject| resolve_deadline = Some(resolve));
    let Some(resolve_deadline) = resolve_deadline else {
        return BindingAnswer::Unavailable(FallbackReason::Failed);
    };
    let sentinel = deadline.clone();
    let fire = Closure::once(move || {
        let _ = resolve_deadline.call1(&JsValue::UNDEFINED, &sentinel);
    });
    let timer = set_timeout(fire.as_ref().unchecked_ref(), BINDING_DEADLINE_MS);
    let race = Promise::race(&js_sys::Array::of2(&called, &timeout));
    let outcome = JsFuture::from(race).await;
    clear_timeout(&timer);
    drop(fire);

    match outcome {
        Ok(value) if value == JsValue::from(deadline) => {
            BindingAnswer::Unavailable(FallbackReason::TimedOut)
        }
        Ok(value) => match Reflect::get(&value, &"success".into())
            .ok()
            .and_then(|s| s.as_bool())
        {
            Some(success) if value.is_object() => BindingAnswer::Answered { success },
            _ => BindingAnswer::Unavailable(FallbackReason::Failed),
        },
        Err(_) => BindingAnswer::Unavailable(FallbackReason::Failed),
    }
}
