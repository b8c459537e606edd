//! The I/O half on Cloudflare Workers (wasm32 only): asks every binding of a
//! request at once through a small JavaScript helper (`ask-bindings.js`,
//! carried beside the wasm-bindgen glue in its `snippets/` folder) that races
//! them against the 500 ms deadline on the isolate's own timer; hands the
//! answers to the sans-IO [`Limiter`], writes the fallback log lines, and
//! (when the plan names a dataset) a Workers Analytics Engine data point
//! for each refusal and each check counted in memory because its binding
//! could not be asked ([`DataPoints`]): an isolate's counters die with it,
//! so operators count these instead.
//!
//! One gate, [`WorkersGate`], whichever way the Worker is written: made
//! once per isolate by [`WorkersGate::of_isolate`] (and built ahead by
//! [`start`]), deciding with a callback from a wasm-bindgen Worker
//! ([`WorkersGate::decide`]) or, with the `workers-rs` feature, with a
//! future from a workers-rs Worker (`WorkersGate::decide_async`, with the
//! subject and path of a `worker::Request` or `http::Request`: `Limited`)
//! and as `RateLimitLayer`, a tower layer for axum on Workers. A refusal
//! is answered with [`refusal_response`] (or, as an `http::Response`,
//! `Refusal::to_http`).
//!
//! No Rust future is suspended on the way: [`WorkersGate::decide`] runs
//! synchronously, and when a binding has to be waited for, JavaScript awaits
//! it and calls back into wasm once with every answer. Awaiting a promise
//! from wasm (wasm-bindgen-futures' `JsFuture`, its task queue's
//! `queueMicrotask` on every wake-up, an `async` export's
//! `future_to_promise`) cost more CPU than the whole binding call does in
//! JavaScript (BENCHMARKS-log.md, "The cost of asking, second round").

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use wasm_bindgen::prelude::*;

use crate::address::{CLOUDFLARE_IPV6_HEADER, ClientAddress};
use crate::backend::{DEADLINE_MS, FallbackReason};
use crate::bindings::DATA_POINTS_EVENT;
use crate::clock::Clock;
use crate::config::Counting;
use crate::counter::Verdict;
use crate::gate_plan::{GatePlan, PlanError};
use crate::limiter::{
    ADDRESS_HEADER, Counted, Decision, InMemory, Limiter, Now, Pending, Refusal, url_path,
};
use crate::parked::ParkedRequests;
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

    /// Writes one data point to the dataset bound as `env[binding]`
    /// (`blobs: [limit, outcome, reason]`, `indexes: [deployable]`), not
    /// awaited; [`wire::POINT_WRITTEN`], or why not.
    #[wasm_bindgen(js_name = writeDataPoint)]
    fn write_data_point_js(
        env: &JsValue,
        binding: &JsValue,
        deployable: &JsValue,
        limit: &JsValue,
        outcome: &JsValue,
        reason: &JsValue,
    ) -> u32;
}

#[wasm_bindgen(module = "cloudflare:workers")]
extern "C" {
    /// The Worker's bindings outside any handler (`import { env } from
    /// "cloudflare:workers"`): how a gate is built in the global scope.
    #[wasm_bindgen(thread_local_v2, js_name = env)]
    static WORKER_ENV: JsValue;
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
    /// [`CLOUDFLARE_IPV6_HEADER`], read only when Pseudo IPv4 wrote the first.
    static ADDRESS_IPV6: HeaderName = HeaderName::new(CLOUDFLARE_IPV6_HEADER);
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
    /// The request's `env`, kept only when data points are written through it.
    env: Option<JsValue>,
}

/// What a gate writes its data points with: the dataset's binding and every
/// string a point holds, made JavaScript strings once per gate (a point
/// crosses into JavaScript with handles only), and whether the dataset's
/// trouble was logged yet.
struct DataPoints {
    binding: JsValue,
    binding_name: String,
    deployable: JsValue,
    /// By [`crate::limiter::PolicyId`]: the limits' policy names.
    limits: Vec<JsValue>,
    /// `passed`, `refused`, `shadow_refused` (a shadow limit would have
    /// refused it, and let it through).
    outcomes: [JsValue; 3],
    /// `none` (the binding counted it), then each of [`InMemory`]'s reasons
    /// in [`DataPoints::REASONS`]' order.
    reasons: Vec<JsValue>,
    logged: Cell<bool>,
}

impl DataPoints {
    /// Where a check was counted, as a point's reason says it.
    const REASONS: [InMemory; 6] = [
        InMemory::NoBackend,
        InMemory::CoolingOff,
        InMemory::Unavailable(FallbackReason::Missing),
        InMemory::Unavailable(FallbackReason::Failed),
        InMemory::Unavailable(FallbackReason::TimedOut),
        InMemory::NotAsked,
    ];

    fn new(binding: &str, deployable: &str, limiter: &Limiter) -> DataPoints {
        let js = |s: &str| JsValue::from_str(s);
        DataPoints {
            binding: binding_keys_js(vec![binding.to_owned()])
                .dyn_into::<js_sys::Array>()
                .map_or_else(|_| js(binding), |keys| keys.get(0)),
            binding_name: binding.to_owned(),
            deployable: js(deployable),
            limits: limiter.policy_names().map(js).collect(),
            outcomes: [js("passed"), js("refused"), js("shadow_refused")],
            reasons: std::iter::once("none")
                .chain(Self::REASONS.iter().map(|r| r.as_str()))
                .map(js)
                .collect(),
            logged: Cell::new(false),
        }
    }

    /// Writes a point for each of `decision`'s checks that was refused (or
    /// would have been, by a shadow limit: outcome `shadow_refused`), or
    /// counted in memory because its binding could not be asked (counting
    /// in memory by design, with no binding, is no news: a refusal then is).
    /// The dataset's first trouble is logged, once per isolate.
    fn write(&self, env: &JsValue, decision: &Decision, writes_logs: bool) {
        for check in &decision.checks {
            let Some((verdict, counted)) = check.settled() else {
                continue;
            };
            let refused = verdict == Verdict::Exceeded;
            let outcome = match (refused, check.is_shadow()) {
                (false, _) => 0,
                (true, false) => 1,
                (true, true) => 2,
            };
            let reason = match counted {
                Counted::Backend | Counted::Remembered => 0,
                Counted::InMemory(why) => {
                    1 + Self::REASONS.iter().position(|r| *r == why).unwrap_or(0)
                }
            };
            let troubled = matches!(counted, Counted::InMemory(why) if why != InMemory::NoBackend);
            if !(refused || troubled) {
                continue;
            }
            let (Some(limit), Some(reason)) = (
                self.limits.get(check.policy().index()),
                self.reasons.get(reason),
            ) else {
                continue;
            };
            let code = write_data_point_js(
                env,
                &self.binding,
                &self.deployable,
                limit,
                &self.outcomes[outcome],
                reason,
            );
            if let Some(reason) = wire::point_trouble(code)
                && writes_logs
                && !self.logged.replace(true)
            {
                // A struct, not a `serde_json::Value`, whose serialiser
                // would link float formatting into the Worker.
                #[derive(serde::Serialize)]
                struct Line<'a> {
                    event: &'static str,
                    binding: &'a str,
                    reason: &'a str,
                }
                let line = Line {
                    event: DATA_POINTS_EVENT,
                    binding: &self.binding_name,
                    reason,
                };
                console_warn(&serde_json::to_string(&line).unwrap_or_default());
            }
        }
    }
}

/// The state requests share: the limiter, and the requests waiting for a
/// binding (a slot freed when its request resumes).
struct Shared {
    limiter: RefCell<Limiter>,
    waiting: RefCell<ParkedRequests<Waiting>>,
    /// Whether fallback lines are written: always, but for [`warm_up`]'s gate.
    writes_logs: bool,
    /// The data points' dataset, when the plan names one.
    data_points: Option<DataPoints>,
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
        let verdict = self.conclude(waiting.env.as_ref(), waiting.pending, settled_ms);
        (waiting.respond)(verdict)
    }

    /// Settles a request, writes the fallback lines and its data points
    /// (through `env`, when the plan names a dataset), and says whether it
    /// passes. A Worker has one clock: its time is both of [`Now`]'s.
    fn conclude(
        &self,
        env: Option<&JsValue>,
        pending: Pending,
        now_ms: u64,
    ) -> Result<(), Refusal> {
        let decision = self
            .limiter
            .borrow_mut()
            .conclude(pending, Now::one_clock(now_ms));
        if self.writes_logs {
            for log in &decision.logs {
                console_warn(&log.to_json_line());
            }
            for log in &decision.shadow_logs {
                console_warn(&log.to_json_line());
            }
        }
        if let (Some(points), Some(env)) = (&self.data_points, env) {
            points.write(env, &decision, self.writes_logs);
        }
        match decision.refusal {
            Some(refusal) => Err(refusal),
            None => Ok(()),
        }
    }
}

/// One isolate's gate for one deployable: its limiter, whose memory is the
/// fallback count, and its bindings. There is one per isolate, made by
/// [`WorkersGate::of_isolate`] and kept for the isolate's life.
pub struct WorkersGate {
    shared: Rc<Shared>,
    /// The limiter's bindings, by [`crate::backend::BackendId`], as
    /// `ask-bindings.js` looks them up in `env` (`bindingKeys`).
    names: JsValue,
    /// The one continuation every waiting request resumes through, made
    /// once (a closure per request would be made and freed per request).
    resume: Resume,
    deployable: String,
    /// Whether the in-memory counter's digest is keyed by a random seed yet
    /// (drawn on the first decision: see [`start`]).
    seeded: Cell<bool>,
    /// The clock its decisions read (see [`WorkersGate::clock`]).
    clock: Clock,
}

pub use crate::gate_plan::PLAN_BINDING;
#[cfg(feature = "workers-rs")]
pub use crate::workers_rs::{Limited, Limiting, RateLimitLayer, RateLimited};

/// Why a Worker has no gate ([`WorkersGate::of_isolate`]): its plan could
/// not be read. Nothing else fails a Workers gate: its bindings' troubles
/// fall back to memory, and a decision that finds no random seed for the
/// in-memory counter (Web Crypto's `crypto.getRandomValues` failed) throws
/// that reason as the Worker's error.
#[derive(Debug, thiserror::Error)]
pub enum WorkersGateError {
    /// The `PLAN` text binding is absent, or not text.
    #[error("the text binding {PLAN_BINDING} is missing")]
    PlanMissing,
    /// It holds no plan this runtime reads.
    #[error("the text binding {PLAN_BINDING}: {0}")]
    PlanInvalid(#[from] PlanError),
}

/// A wasm-bindgen Worker's error: the message.
impl From<WorkersGateError> for JsValue {
    fn from(error: WorkersGateError) -> JsValue {
        JsValue::from_str(&error.to_string())
    }
}

/// The error of a decision that found no random seed for the counter.
#[cold]
#[inline(never)]
fn no_randomness(error: JsValue) -> JsValue {
    let reason = error.as_string().unwrap_or_else(|| format!("{error:?}"));
    JsValue::from_str(&format!(
        "no random seed for the in-memory counter: {reason}"
    ))
}

thread_local! {
    /// The isolate's gate (see [`WorkersGate::of_isolate`]).
    static ISOLATE_GATE: RefCell<Option<Rc<WorkersGate>>> = const { RefCell::new(None) };
}

/// Builds the isolate's gate, once: out of line, so the code of every
/// request after the first (which V8 compiles whole on its first call)
/// carries none of it.
#[cold]
#[inline(never)]
fn build_isolate_gate(env: &JsValue) -> Result<Rc<WorkersGate>, WorkersGateError> {
    let plan = js_sys::Reflect::get(env, &JsValue::from_str(PLAN_BINDING))
        .ok()
        .and_then(|plan| plan.as_string())
        .ok_or(WorkersGateError::PlanMissing)?;
    let gate = Rc::new(WorkersGate::new(GatePlan::from_text(&plan)?));
    ISOLATE_GATE.with(|g| *g.borrow_mut() = Some(gate.clone()));
    Ok(gate)
}

/// What a Worker's start function calls (`#[wasm_bindgen(start)]`,
/// workers-rs's `#[event(start)]`), in the global scope: [`warm_up`] (and,
/// with the `workers-rs` feature, the adapter's own path run once), then
/// the isolate's gate built from the plan in `env` as `cloudflare:workers`
/// gives it there. Cloudflare pre-warms a Worker while the TLS handshake of
/// its first request is under way (its blog, "Eliminating cold starts with
/// Cloudflare Workers"), so this work is off that request's path
/// (BENCHMARKS-log.md, "Cold start, function by function").
/// Without a readable plan here, the first request builds the gate and
/// reports why it could not.
pub fn start() {
    let gate = warm_up();
    #[cfg(feature = "workers-rs")]
    crate::workers_rs::warm_up_decide(&gate);
    drop(gate);
    let env = WORKER_ENV.with(JsValue::clone);
    if !env.is_undefined() {
        let _ = WorkersGate::of_isolate(&env);
    }
}

impl WorkersGate {
    /// The isolate's gate: built by [`start`] in the global scope, or else
    /// on the isolate's first request from that request's `env` (a
    /// wasm-bindgen Worker's `JsValue`, a workers-rs `worker::Env`), then
    /// kept for the isolate's life and shared. Its plan is the
    /// [`PLAN_BINDING`] text binding, the text the build step wrote
    /// ([`GatePlan::to_text`]), so no description parser is linked.
    pub fn of_isolate(env: &impl AsRef<JsValue>) -> Result<Rc<WorkersGate>, WorkersGateError> {
        match ISOLATE_GATE.with(|g| g.borrow().clone()) {
            Some(gate) => Ok(gate),
            None => build_isolate_gate(env.as_ref()),
        }
    }

    /// Builds the gate of a deployable's plan. It may be built in the global
    /// scope (see [`start`]): the seed of its in-memory counter, from
    /// `crypto.getRandomValues`, which the global scope refuses, is drawn on
    /// its first decision.
    fn new(plan: GatePlan) -> WorkersGate {
        WorkersGate::build(plan, None, true)
    }

    /// The gate of `plan`, its in-memory count keyed by `seed`, or by one
    /// drawn on its first decision when `None`.
    fn build(plan: GatePlan, seed: Option<u128>, writes_logs: bool) -> WorkersGate {
        let deployable = plan.deployable().to_owned();
        let data_points = plan.data_points().map(str::to_owned);
        let limiter = Limiter::from_plan(plan, seed.unwrap_or(0));
        let names = binding_keys_js(limiter.backend_names().map(str::to_owned).collect());
        let data_points =
            data_points.map(|binding| DataPoints::new(&binding, &deployable, &limiter));
        let shared = Rc::new(Shared {
            limiter: RefCell::new(limiter),
            waiting: RefCell::new(ParkedRequests::new()),
            writes_logs,
            data_points,
        });
        let resumed = Rc::clone(&shared);
        let resume: Resume = Closure::new(move |ticket, codes, settled_at_ms| {
            resumed.resume(ticket, codes, settled_at_ms)
        });
        WorkersGate {
            shared,
            names,
            resume,
            deployable,
            seeded: Cell::new(seed.is_some()),
            clock: Clock::default(),
        }
    }

    /// Keys the in-memory counter by a random seed, on the first decision.
    #[cold]
    #[inline(never)]
    fn draw_seed(&self) -> Result<(), JsValue> {
        let mut seed = [0u8; 16];
        get_random_values(&mut seed).map_err(no_randomness)?;
        self.shared
            .limiter
            .borrow_mut()
            .reseed(u128::from_le_bytes(seed));
        self.seeded.set(true);
        Ok(())
    }

    /// Decides one request to `path` with `method` (`request.method()`: a
    /// route's limit may count some methods only) and answers it with `respond`, which is
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
    /// The time is the gate's [`Clock`] (`Date.now()`, never going
    /// backwards within the isolate), read when the request arrives; the
    /// 500 ms deadline runs on the isolate's real timers whatever it reads.
    pub fn decide<F>(
        &self,
        env: &JsValue,
        subject: &Subject,
        method: &str,
        path: &str,
        respond: F,
    ) -> Result<JsValue, JsValue>
    where
        F: FnOnce(Result<(), Refusal>) -> Result<JsValue, JsValue> + 'static,
    {
        self.decide_boxed(env, subject, method, path, Box::new(respond))
    }

    /// [`WorkersGate::decide`], one function whatever `respond` is: the code
    /// [`warm_up`] has V8 compile is the code every Worker's requests run.
    fn decide_boxed(
        &self,
        env: &JsValue,
        subject: &Subject,
        method: &str,
        path: &str,
        respond: Respond,
    ) -> Result<JsValue, JsValue> {
        if !self.seeded.get() {
            self.draw_seed()?;
        }
        let now_ms = self.clock.wall_ms();
        let Ok(checks) = self.shared.limiter.borrow().checks(subject, method, path) else {
            return respond(Err(Refusal::path_too_long()));
        };
        let mut pending = self
            .shared
            .limiter
            .borrow_mut()
            .asks(checks, Now::one_clock(now_ms));
        let list = AskList::of(&mut pending);
        if list.asks.is_empty() {
            return respond(self.shared.conclude(Some(env), pending, now_ms));
        }
        // The borrows are never held across the wait: requests interleave in an isolate.
        let waiting = Waiting {
            pending,
            now_ms,
            respond,
            env: self.shared.data_points.as_ref().map(|_| env.clone()),
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
            // Thrown before the resume (the helper never throws for a
            // binding's doing): the request is decided as though no binding
            // answered, counted in memory, never failed nor let through
            // unchecked. Thrown by the resume (by `respond`): its slot is
            // already free, and the error is the embedding's.
            let parked = self.shared.waiting.borrow_mut().take(ticket);
            if let Some(parked) = parked {
                let waiting = parked.item;
                let verdict =
                    self.shared
                        .conclude(waiting.env.as_ref(), waiting.pending, waiting.now_ms);
                return (waiting.respond)(verdict);
            }
        }
        outcome
    }

    /// Decides a request by its limits in this isolate's memory alone,
    /// asking no binding: for `WorkersGate::decide_async` when [`WorkersGate::decide`]
    /// gave no verdict (its seed could not be drawn), so that no request
    /// passes unchecked.
    #[cfg(feature = "workers-rs")]
    pub(crate) fn decide_in_memory(
        &self,
        env: &JsValue,
        subject: &Subject,
        method: &str,
        path: &str,
    ) -> Result<(), Refusal> {
        let now_ms = self.clock.wall_ms();
        let pending = {
            let limiter = self.shared.limiter.borrow();
            let checks = limiter
                .checks(subject, method, path)
                .map_err(|_| Refusal::path_too_long())?;
            limiter.asks_none(checks)
        };
        self.shared.conclude(Some(env), pending, now_ms)
    }

    /// The clock this gate's decisions read (with the `testing` feature, the
    /// harness's scenario clock shifts it).
    #[doc(hidden)]
    pub fn clock(&self) -> &Clock {
        &self.clock
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
}

/// Runs the request path once on a gate of its own, so that V8 compiles its
/// wasm (Liftoff compiles a function on its first call) and the JavaScript
/// it calls while the Worker starts ([`start`]), not on its first request.
///
/// It reads a request's headers and path, builds a gate, and decides for a
/// caller and for an IPv4 and an IPv6 address: through [`WorkersGate::decide`] with
/// its binding missing (answered at once, as no timer can be set in the
/// global scope), and through the limiter with the binding answering. The
/// throw-away gate is keyed by a fixed seed (the global scope refuses random
/// numbers) and writes no log line; the Worker's gate is untouched. The
/// gate is returned for the workers-rs adapter's own warm-up.
fn warm_up() -> WorkersGate {
    let plan = GatePlan::warm_up();
    let gate = WorkersGate::build(plan, Some(0), false);
    let now_ms = gate.clock.wall_ms();
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
    // No `WARM_UP` in this `env`: every ask is answered "missing" before
    // `decide` returns, and the request is counted in memory.
    let env = JsValue::from(js_sys::Object::new());
    for subject in &subjects {
        let _ = gate.decide(&env, subject, "GET", &path, |_| Ok(JsValue::UNDEFINED));
    }
    // The binding answering within the limit (two base-8 digits).
    let within_twice = f64::from(Code::Within as u8 * 9);
    let now = Now::one_clock(now_ms);
    for subject in &subjects {
        let mut pending = {
            let mut limiter = gate.shared.limiter.borrow_mut();
            let checks = limiter.checks(subject, "GET", &path).unwrap_or_default();
            limiter.asks(checks, now)
        };
        let _ = AskList::of(&mut pending);
        wire::answer(&mut pending, within_twice);
        let _ = gate.shared.conclude(Some(&env), pending, now_ms);
    }
    gate
}

/// The path a request is limited under: its URL's path, as
/// `new URL(request.url).pathname` gives it, without building a URL object.
pub fn path_of(request: &web_sys::Request) -> String {
    url_path(&request.url()).to_owned()
}

/// The subject of a request: the caller the application signed in, else the
/// address from `CF-Connecting-IP` in the request's `headers` (or, where
/// Pseudo IPv4 wrote a Class E address there, the IPv6 address in
/// `CF-Connecting-IPv6`: [`ClientAddress::from_cloudflare_headers`]). Each
/// read crosses from wasm into JavaScript, so the second header is read
/// only then.
pub fn subject_of(headers: &web_sys::Headers, caller_id: Option<&str>) -> Subject {
    if let Some(caller) = Subject::signed_in(caller_id) {
        return caller;
    }
    let address = ADDRESS.with(|name| name.read(headers));
    Subject::Address(ClientAddress::from_cloudflare_header_then(
        address.as_deref(),
        || ADDRESS_IPV6.with(|name| name.read(headers)),
    ))
}

/// The response for a refusal: the 429 (or the 414 of a path too long).
pub fn refusal_response(refusal: &Refusal) -> Result<web_sys::Response, JsValue> {
    let init = web_sys::ResponseInit::new();
    init.set_status(refusal.status());
    let response = web_sys::Response::new_with_opt_str_and_init(Some(&refusal.body()), &init)?;
    let headers = response.headers();
    for (name, value) in refusal.headers() {
        headers.set(name, &value)?;
    }
    Ok(response)
}
