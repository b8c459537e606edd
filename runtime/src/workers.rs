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
//! JavaScript (BENCHMARKS-log.md, "The cost of asking, second round").

use std::cell::RefCell;
use std::rc::Rc;

use wasm_bindgen::prelude::*;

use crate::config::Counting;
use crate::gate_plan::GatePlan;
pub use crate::limiter::GateError;
use crate::limiter::{ADDRESS_HEADER, Limiter, Now, Pending, Refusal, Tally, url_path};
use crate::parked::ParkedRequests;
use crate::store::DEADLINE_MS;
use crate::subject::Subject;
use crate::wire::{self, AskList, Code};

#[wasm_bindgen(module = "/src/ask-bindings.js")]
extern "C" {
    /// The names of a gate's bindings as property keys ready for `env`
    /// lookups (a name decoded from wasm is looked up the slow way on every
    /// request); made once per gate.
    #[wasm_bindgen(js_name = bindingKeys)]
    fn binding_keys_js(names: Vec<String>) -> JsValue;

    /// Asks bindings of `env` at once, racing `deadline_ms`: the asks of
    /// an [`AskList`], and `resume(ticket, codes, settled_at_ms)` gets the
    /// answer codes packed in a number ([`wire::answer`] reads them).
    /// Returns what `resume` returned when no binding was asked (it is
    /// called before this returns), else the promise of it; an error
    /// `resume` (or the helper) threw is `Err`.
    #[wasm_bindgen(catch, js_name = askBindings)]
    fn ask_bindings_js(
        env: &JsValue,
        names: &JsValue,
        asks: &[u32],
        keys: &str,
        deadline_ms: u32,
        resume: &Resume,
        ticket: u32,
    ) -> Result<JsValue, JsValue>;
}

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = console, js_name = warn)]
    fn console_warn(line: &str);

    /// Web Crypto's `crypto.getRandomValues`: the seed of the in-memory
    /// counter's digest, which a flooder must not predict to aim at chosen
    /// sketch counters (`Math.random()` is no cryptographic source).
    #[wasm_bindgen(catch, js_namespace = crypto, js_name = getRandomValues)]
    fn get_random_values(bytes: &mut [u8]) -> Result<JsValue, JsValue>;

    /// A request's `Headers`, seen through [`HeaderName::read`].
    type HeadersByName;

    /// `headers.get(name)` with the name passed as a JavaScript string (an
    /// interned `&str` is fetched from wasm-bindgen's table on every call).
    #[wasm_bindgen(method, catch, js_name = get)]
    fn get_by_name(this: &HeadersByName, name: &JsValue) -> Result<Option<String>, JsValue>;
}

/// A header name made a JavaScript string once (keep it in a
/// `thread_local!`), so a request reads the header without passing the name
/// from wasm.
pub struct HeaderName(JsValue);

impl HeaderName {
    /// The name `name`, made a JavaScript string now.
    pub fn new(name: &str) -> HeaderName {
        HeaderName(JsValue::from_str(name))
    }

    /// The header's value in `headers` (`None` when absent, or when reading
    /// it threw).
    pub fn read(&self, headers: &web_sys::Headers) -> Option<String> {
        headers
            .unchecked_ref::<HeadersByName>()
            .get_by_name(&self.0)
            .ok()
            .flatten()
    }
}

thread_local! {
    /// [`ADDRESS_HEADER`], read on every request counted by address.
    static ADDRESS: HeaderName = HeaderName::new(ADDRESS_HEADER);
}

/// The continuation of a request whose bindings were asked: its ticket, the
/// packed answer codes, and `Date.now()` when they settled if a binding
/// failed or timed out, else -1 (the clock is read only when it moves a cool-off).
type Resume = Closure<dyn FnMut(u32, f64, f64) -> Result<JsValue, JsValue>>;

/// What builds a request's response (or a promise of it) from its verdict.
type Respond = Box<dyn FnOnce(Result<(), Refusal>) -> Result<JsValue, JsValue>>;

/// A request waiting for its bindings (parked in [`ParkedRequests`], which
/// keeps it through an event-loop stall).
struct Waiting {
    pending: Pending,
    now_ms: u64,
    respond: Respond,
}

/// The state requests share: the limiter, and the requests waiting for a
/// binding (a slot freed when its request resumes).
struct Shared {
    limiter: RefCell<Limiter>,
    waiting: RefCell<ParkedRequests<Waiting>>,
}

impl Shared {
    /// Resumes the request of `ticket` with its bindings' packed answer
    /// codes; `settled_at_ms` as [`Resume`] says.
    fn resume(&self, ticket: u32, codes: f64, settled_at_ms: f64) -> Result<JsValue, JsValue> {
        let parked =
            self.waiting.borrow_mut().take(ticket).ok_or_else(|| {
                JsValue::from_str("rate limiter: no request waits on this ticket")
            })?;
        let mut waiting = parked.item;
        // The embedding's clock at arrival, moved on by the real time the asks
        // took, so a cool-off is measured from when a binding failed (an
        // answer in time closes a cool-off whenever it came: no time needed).
        let elapsed_ms = if settled_at_ms >= 0.0 {
            (settled_at_ms - parked.parked_at_ms).max(0.0)
        } else {
            0.0
        };
        let settled_ms = waiting.now_ms + elapsed_ms as u64;
        wire::answer(&mut waiting.pending, codes);
        let verdict = self.conclude(waiting.pending, settled_ms);
        (waiting.respond)(verdict)
    }

    /// Settles a request, writes the fallback lines, and says whether it
    /// passes. A Worker has one clock: its time is both of [`Now`]'s.
    fn conclude(&self, pending: Pending, now_ms: u64) -> Result<(), Refusal> {
        let decision = self
            .limiter
            .borrow_mut()
            .conclude(pending, Now::one_clock(now_ms));
        for log in &decision.logs {
            console_warn(&log.to_json_line());
        }
        match decision.refusal {
            Some(refusal) => Err(refusal),
            None => Ok(()),
        }
    }
}

/// One isolate's limiter for one deployable. Keep it for the isolate's
/// lifetime (a `thread_local!`): its memory is the fallback count.
pub struct Gate {
    shared: Rc<Shared>,
    /// The limiter's bindings, by [`crate::store::StoreId`], as
    /// `ask-bindings.js` looks them up in `env` (`bindingKeys`).
    names: JsValue,
    /// The one continuation every waiting request resumes through, made
    /// once (a closure per request would be made and freed per request).
    resume: Resume,
    deployable: String,
}

impl Gate {
    /// Builds the gate of a deployable's plan: in production the text the
    /// build step wrote ([`GatePlan::from_text`]), so no description parser
    /// is linked; a test may plan from the description ([`GatePlan::new`]).
    /// Call it in a request, not in the global scope: it draws its seed from
    /// `crypto.getRandomValues`, which the global scope refuses.
    pub fn new(plan: GatePlan) -> Result<Gate, GateError> {
        let deployable = plan.deployable().to_owned();
        let mut seed = [0u8; 16];
        get_random_values(&mut seed).map_err(|error| {
            GateError::NoRandomness(error.as_string().unwrap_or_else(|| format!("{error:?}")))
        })?;
        let limiter = Limiter::from_plan(plan, u128::from_le_bytes(seed));
        let names = binding_keys_js(limiter.store_names().map(str::to_owned).collect());
        let shared = Rc::new(Shared {
            limiter: RefCell::new(limiter),
            waiting: RefCell::new(ParkedRequests::new()),
        });
        let resumed = Rc::clone(&shared);
        let resume: Resume = Closure::new(move |ticket, codes, settled_at_ms| {
            resumed.resume(ticket, codes, settled_at_ms)
        });
        Ok(Gate {
            shared,
            names,
            resume,
            deployable,
        })
    }

    /// Decides one request to `path` and answers it with `respond`, which is
    /// given `Ok` to pass or `Err` with the refusal, and returns the response
    /// or a promise of it (an async handler: `future_to_promise`; for a
    /// refusal, usually [`refusal_response`]). Never fails for the binding's
    /// sake: every binding problem falls back to memory.
    ///
    /// Returns what `respond` returned when no binding had to be waited for
    /// (counting in memory, a binding missing or cooling off), else a promise
    /// of it, settled once every asked binding answered or the 500 ms
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
        F: FnOnce(Result<(), Refusal>) -> Result<JsValue, JsValue> + 'static,
    {
        let mut pending = {
            let mut limiter = self.shared.limiter.borrow_mut();
            let checks = limiter.checks(subject, path);
            limiter.asks(checks, Now::one_clock(now_ms))
        };
        let list = AskList::of(&mut pending);
        if list.asks.is_empty() {
            return respond(self.shared.conclude(pending, now_ms));
        }
        // The borrows are never held across the wait: requests interleave in an isolate.
        let waiting = Waiting {
            pending,
            now_ms,
            respond: Box::new(respond),
        };
        let ticket = self
            .shared
            .waiting
            .borrow_mut()
            .park(waiting, js_sys::Date::now());
        // When every binding answered at once (missing, or threw), the
        // helper resumes the request itself before returning: no second
        // crossing to tell a number from a promise.
        let outcome = ask_bindings_js(
            env,
            &self.names,
            &list.asks,
            &list.keys,
            DEADLINE_MS,
            &self.resume,
            ticket,
        );
        if outcome.is_err() {
            // Thrown before or by the resume: the slot must not wait for a
            // resume that may never come.
            self.shared.waiting.borrow_mut().take(ticket);
        }
        outcome
    }

    /// The deployable this gate limits, as its plan names it.
    pub fn deployable(&self) -> &str {
        &self.deployable
    }

    /// How this deployable counts: through the binding, in memory, or not at all (no API).
    pub fn counting(&self) -> Counting {
        self.shared.limiter.borrow().counting().clone()
    }

    /// Whether this deployable serves an API (asked on every request, so no clone).
    pub fn serves_api(&self) -> bool {
        *self.shared.limiter.borrow().counting() != Counting::NoApi
    }

    /// Records a request refused for another reason (an API request to a deployable without one).
    pub fn record_refused(&self) {
        self.shared.limiter.borrow_mut().record_refused();
    }

    /// Records a health check and returns the tally its response reports.
    pub fn record_health_check(&self) -> Tally {
        self.shared.limiter.borrow_mut().record_health_check()
    }
}

/// Runs the request path once on a limiter of its own, so that V8 compiles
/// its wasm (Liftoff compiles a function on its first call) while the
/// Worker starts, not on its first request: call it from the Worker's start
/// function (`#[wasm_bindgen(start)]`, workers-rs's `#[event(start)]`),
/// which runs in the global scope, before the first request (BENCHMARKS-log.md,
/// "Build-time plans"). It reads a request's headers and path, plans, and
/// decides for a caller and for an IPv4 and an IPv6 address, counting through
/// a binding that answers and in memory. It touches nothing of the Worker's
/// gate, asks no binding, draws no random number (the global scope allows
/// none), and writes no log line.
pub fn warm_up() {
    const PLAN: &str = "rate-limits-plan 1\ndeployable warm-up\ncounting binding warm-up 1\n\
                        store WARM_UP\nsubjects 0 0\nroute 0 1 10 /warm-up\n";
    let Ok(plan) = GatePlan::from_text(PLAN) else {
        return;
    };
    let mut limiter = Limiter::from_plan(plan, 0);
    let now = Now::one_clock(js_sys::Date::now() as u64);
    let request = web_sys::Request::new_with_str("https://warm-up.invalid/warm-up");
    let subjects = [
        request.as_ref().map_or_else(
            |_| Subject::of_request(None, None),
            |request| subject_of(&request.headers(), None),
        ),
        Subject::of_request(None, Some("192.0.2.1")),
        Subject::of_request(None, Some("2001:db8::1")),
        Subject::of_request(Some("warm-up"), None),
    ];
    let path = request.map_or_else(|_| "/warm-up".to_owned(), |r| path_of(&r));
    // Both asks answered within the limit (two base-8 digits), then left
    // unanswered, counted in memory.
    let within_twice = f64::from(Code::Within as u8 * 9);
    for answered in [true, false] {
        for subject in &subjects {
            let checks = limiter.checks(subject, &path);
            let mut pending = limiter.asks(checks, now);
            let _ = AskList::of(&mut pending);
            if answered {
                wire::answer(&mut pending, within_twice);
            }
            let _ = limiter.conclude(pending, now);
        }
    }
}

/// The path a request is limited under: its URL's path, as
/// `new URL(request.url).pathname` gives it, without building a URL object.
pub fn path_of(request: &web_sys::Request) -> String {
    url_path(&request.url()).to_owned()
}

/// The subject of a request: the caller the application signed in, else the
/// address from `CF-Connecting-IP` in the request's `headers` (read once,
/// for the sign-in too: each read crosses from wasm into JavaScript).
pub fn subject_of(headers: &web_sys::Headers, caller_id: Option<&str>) -> Subject {
    let address = ADDRESS.with(|name| name.read(headers));
    Subject::of_request(caller_id, address.as_deref())
}

/// The 429 response for a refusal.
pub fn refusal_response(refusal: &Refusal) -> Result<web_sys::Response, JsValue> {
    let init = web_sys::ResponseInit::new();
    init.set_status(Refusal::STATUS);
    let response = web_sys::Response::new_with_opt_str_and_init(Some(&refusal.body()), &init)?;
    let headers = response.headers();
    for (name, value) in refusal.headers() {
        headers.set(name, &value)?;
    }
    Ok(response)
}
