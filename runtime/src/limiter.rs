//! The decision for each request, with no I/O inside: the caller asks the
//! store (Cloudflare's binding) and passes in its answer and the time, so the
//! same code runs in native unit tests and in wasm inside workerd.
//!
//! A request goes through three steps, two inputs and an output:
//! 1. [`Limiter::checks`] says which limits count it, under which key, and
//!    which binding (if any) to ask for each.
//! 2. [`Limiter::asks`] says which of those bindings to ask now: a binding
//!    that timed out or failed is left alone for a cool-off
//!    ([`crate::breaker::COOL_OFF_MS`]), then probed by one request at a time
//!    ([`crate::breaker`]), so a troubled binding costs one wait, not one per request.
//! 3. The I/O layer asks those bindings (all at once, so one deadline bounds
//!    the request) and hands every answer, in the checks' order, to
//!    [`Limiter::conclude`], which settles every check (falling back to the
//!    isolate's memory for a binding that can't be or isn't asked), records
//!    how each asked binding did, and returns the [`Decision`]: the refusal,
//!    if any limit refused, and the fallback log lines to write. Every I/O
//!    layer (Workers today, native and Redis next) calls these three and
//!    nothing else, so the decision exists once.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::address::ClientAddress;
use crate::breaker::{Breaker, Outcome, Route};
use crate::config::{Application, Counting, Deployable};
use crate::counter::{DEFAULT_MAX_KEYS, Verdict, WindowCounter};
use crate::limits::{ADDRESS_LIMIT, CALLER_LIMIT, Limit};
use crate::plan::BindingPlan;

/// How long a binding is waited for before the request is counted in memory.
pub const BINDING_DEADLINE_MS: u32 = 500;

/// The header the address is taken from. Never `X-Forwarded-For`, which any
/// client can write.
pub const ADDRESS_HEADER: &str = "CF-Connecting-IP";

/// The path of an absolute URL as the WHATWG URL parser serialises it (a
/// Worker's `request.url`): what `new URL(url).pathname` gives, read off the
/// string instead of parsed again (the authority of a serialised URL holds no
/// `/`, `?` or `#`). Without one, the path is `/`.
pub fn url_path(url: &str) -> &str {
    let rest = url.find("://").map_or(url, |i| &url[i + 3..]);
    let path = rest.find(['/', '?', '#']).map_or("", |i| &rest[i..]);
    let path = path.find(['?', '#']).map_or(path, |i| &path[..i]);
    if path.is_empty() { "/" } else { path }
}

/// Who a request is counted for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    /// A signed-in caller, by the id the application's sign-in gave.
    Caller(String),
    /// Anyone else, by the address in [`ADDRESS_HEADER`]: an IPv6 client by
    /// its /64. Requests without a usable address share one count.
    Address(ClientAddress),
}

impl Subject {
    /// The subject of a request: the caller if signed in (an id that is
    /// empty or only whitespace is no sign-in), else the address.
    pub fn of_request(caller_id: Option<&str>, connecting_ip: Option<&str>) -> Subject {
        match caller_id {
            Some(id) if !id.trim().is_empty() => Subject::Caller(id.to_owned()),
            _ => Subject::Address(ClientAddress::from_header(connecting_ip)),
        }
    }

    /// The built-in limit for this kind of subject.
    pub fn limit(&self) -> Limit {
        match self {
            Subject::Caller(_) => CALLER_LIMIT,
            Subject::Address(_) => ADDRESS_LIMIT,
        }
    }

    /// The built-in limit's name in the `RateLimit-Policy` header.
    fn policy(&self) -> &'static str {
        match self {
            Subject::Caller(_) => "caller",
            Subject::Address(_) => "address",
        }
    }

    /// `caller:ID` or `address:IP`, built without the formatting machinery
    /// (it runs on every request).
    fn key(&self) -> String {
        match self {
            Subject::Caller(id) => {
                let mut key = String::with_capacity("caller:".len() + id.len());
                key.push_str("caller:");
                key.push_str(id);
                key
            }
            Subject::Address(address) => {
                // The longest IPv4 key, so one allocation in the common case.
                let mut key = String::with_capacity("address:255.255.255.255".len());
                key.push_str("address:");
                address.push_key(&mut key);
                key
            }
        }
    }
}

/// One limit that counts a request, and the key it is counted under.
///
/// Keys are `caller:ID` or `address:IP` for the built-in limits, and
/// `PATH|caller:ID` or `PATH|address:IP` for a route's own limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub limit: Limit,
    pub key: String,
    /// The store to ask: Cloudflare's binding by name, or the Redis
    /// connection's name (a native deployable counting in Redis); `None`
    /// when the request is counted in memory.
    pub binding: Option<String>,
    /// The limit's name in the 429's `RateLimit-Policy` header: `caller`,
    /// `address`, or the route's path. Never a key.
    pub policy: String,
}

/// Why a binding could not be asked, as logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FallbackReason {
    /// The Worker has no binding of that name.
    Missing,
    /// The binding threw, rejected, or answered something other than `{ success: boolean }`.
    Failed,
    /// The binding did not answer within [`BINDING_DEADLINE_MS`].
    TimedOut,
}

impl FallbackReason {
    /// The reason as logged: `missing`, `failed` or `timed_out`.
    pub fn as_str(self) -> &'static str {
        match self {
            FallbackReason::Missing => "missing",
            FallbackReason::Failed => "failed",
            FallbackReason::TimedOut => "timed_out",
        }
    }
}

/// What the binding said for one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindingAnswer {
    /// `{ success }` in time.
    Answered { success: bool },
    /// No usable answer: the request is counted in memory instead.
    Unavailable(FallbackReason),
    /// Refused from the store's own cache of keys it refused earlier in
    /// their window: no round trip was made, so it is no news of the store's
    /// health and moves no cool-off (a probe answered so is not a probe).
    Remembered,
}

/// The `rate_limits.fallback` log line, emitted once per binding per isolate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FallbackLog {
    pub binding: String,
    pub reason: FallbackReason,
}

impl FallbackLog {
    /// The event's name, which operators search for.
    pub const EVENT: &'static str = "rate_limits.fallback";

    /// One JSON line, event first. It names the binding and the reason, never a key.
    pub fn to_json_line(&self) -> String {
        #[derive(serde::Serialize)]
        struct Line<'a> {
            event: &'static str,
            binding: &'a str,
            reason: &'static str,
        }
        let line = Line {
            event: Self::EVENT,
            binding: &self.binding,
            reason: self.reason.as_str(),
        };
        serde_json::to_string(&line).unwrap_or_default()
    }
}

/// One limit that refused a request, as the `RateLimit-Policy` header names it
/// (draft-ietf-httpapi-ratelimit-headers): so a client sees which limit it hit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// `caller`, `address`, or the route's path.
    pub name: String,
    pub limit: Limit,
}

impl Policy {
    /// `"<name>";q=<requests>;w=<window>`, the name as a structured-field
    /// string (RFC 8941: printable ASCII, `"` and `\` escaped; anything else
    /// percent-encoded, since a header carries no other bytes).
    pub fn to_header_item(&self) -> String {
        let mut name = String::with_capacity(self.name.len());
        for byte in self.name.bytes() {
            match byte {
                b'"' | b'\\' => {
                    name.push('\\');
                    name.push(char::from(byte));
                }
                0x20..=0x7e => name.push(char::from(byte)),
                _ => name.push_str(&format!("%{byte:02X}")),
            }
        }
        format!(
            "\"{name}\";q={};w={}",
            self.limit.requests, self.limit.window_seconds
        )
    }
}

/// A refused request: 429 with `Retry-After` and `RateLimit-Policy`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The longest window among the limits that refused: the binding says
    /// only whether a request is within the limit, not when its window
    /// ends, so a client waiting this long is within every one of them again.
    pub retry_after_seconds: u32,
    /// Every limit that refused the request, in the order they were checked. Never empty.
    pub policies: Vec<Policy>,
}

impl Refusal {
    /// The status of every refusal.
    pub const STATUS: u16 = 429;

    /// The header naming the limits that refused.
    pub const POLICY_HEADER: &'static str = "RateLimit-Policy";

    /// The refusal by the limits in `policies`; `None` when nothing refused.
    pub fn by(policies: Vec<Policy>) -> Option<Refusal> {
        let retry_after_seconds = policies.iter().map(|p| p.limit.window_seconds).max()?;
        Some(Refusal {
            retry_after_seconds,
            policies,
        })
    }

    /// The `RateLimit-Policy` header's value: one list item per refusing limit.
    pub fn rate_limit_policy(&self) -> String {
        let items: Vec<String> = self.policies.iter().map(Policy::to_header_item).collect();
        items.join(", ")
    }

    /// The short JSON body sent with the 429.
    pub fn body(&self) -> String {
        serde_json::json!({
            "error": "rate_limited",
            "retry_after": self.retry_after_seconds,
        })
        .to_string()
    }
}

/// What [`Limiter::conclude`] decided for one request.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "a decision carries the refusal to send and the log lines to write"]
pub struct Decision {
    /// The 429 to send, or `None` to let the request through.
    pub refusal: Option<Refusal>,
    /// The `rate_limits.fallback` lines to write now: the first fallback of
    /// each binding in this isolate.
    pub logs: Vec<FallbackLog>,
}

/// The request-time state of one deployable in one isolate (or process).
///
/// Inputs and outputs, in order, for each request: [`Limiter::checks`],
/// [`Limiter::asks`], then (after asking the bindings) [`Limiter::conclude`].
/// Requests may interleave between them: each call is self-contained.
pub struct Limiter {
    counting: Counting,
    plan: BindingPlan,
    /// Each route's own limit, once per (path, limit) however often the description lists it.
    routes: Vec<(String, Limit)>,
    memory: WindowCounter,
    logged: BTreeSet<String>,
    /// The cool-off state of each binding asked so far, by name.
    breakers: BTreeMap<String, Breaker>,
    tally: Tally,
}

/// What a deployable counts beside its health checks, reported by its health route.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Tally {
    pub health_checks: u64,
    pub refused: u64,
}

/// The error for a deployable that is not in the application.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the application has no deployable named `{0}`")]
pub struct UnknownDeployable(pub String);

/// Why a gate (the Workers one or the native one) could not be built from
/// the application description.
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    /// The application description did not validate.
    #[error(transparent)]
    Invalid(#[from] crate::config::Diagnostics),
    /// The application has no deployable of that name.
    #[error(transparent)]
    UnknownDeployable(#[from] UnknownDeployable),
}

impl Limiter {
    /// The limiter for `deployable` of `app`. `seed` keys the in-memory
    /// counter's digest and should be random per isolate.
    pub fn new(
        app: &Application,
        deployable: &str,
        seed: u128,
    ) -> Result<Limiter, UnknownDeployable> {
        let deployable: &Deployable = app
            .deployable(deployable)
            .ok_or_else(|| UnknownDeployable(deployable.to_owned()))?;
        let counting = app.counting(deployable);
        let plan = BindingPlan::for_deployable(app, deployable);
        // A route listed twice (`rate_limits.route_duplicate` in a checked
        // description) must not count one request twice under one key.
        let mut routes: Vec<(String, Limit)> = Vec::new();
        for route in &app.routes {
            if let Some(limit) = route.rate_limit {
                let entry = (route.path.clone(), limit);
                if !routes.contains(&entry) {
                    routes.push(entry);
                }
            }
        }
        let route_limits: Vec<Limit> = routes.iter().map(|(_, limit)| *limit).collect();
        Ok(Limiter {
            counting,
            plan,
            routes,
            memory: WindowCounter::new(DEFAULT_MAX_KEYS, &route_limits, seed),
            logged: BTreeSet::new(),
            breakers: BTreeMap::new(),
            tally: Tally::default(),
        })
    }

    /// How this deployable counts.
    pub fn counting(&self) -> &Counting {
        &self.counting
    }

    /// The bindings this deployable asks.
    pub fn plan(&self) -> &BindingPlan {
        &self.plan
    }

    /// The limits that count a request from `subject` to `path`, in the order
    /// to check them: the subject's built-in limit, then the route's own.
    /// A deployable that serves no API limits nothing. No two checks share
    /// both limit and key, so no request is counted twice under one key.
    pub fn checks(&self, subject: &Subject, path: &str) -> Vec<Check> {
        if self.counting == Counting::NoApi {
            return Vec::new();
        }
        let subject_key = subject.key();
        // A Redis store is asked about every limit, under the connection's name.
        let redis = match &self.counting {
            Counting::Redis { connection, .. } => Some(connection),
            Counting::Binding { .. } | Counting::InMemory | Counting::NoApi => None,
        };
        let check = |limit: Limit, key: String, policy: String| Check {
            binding: self
                .plan
                .binding_for(limit)
                .map(|b| b.name.clone())
                .or_else(|| redis.cloned()),
            limit,
            key,
            policy,
        };
        let routes = self.routes.iter().filter(|(route, _)| route == path);
        let mut checks = Vec::with_capacity(1 + routes.clone().count());
        // The subject's check first; its key is moved in once the route keys
        // that contain it are built (no copy of it per request).
        checks.push(check(
            subject.limit(),
            String::new(),
            subject.policy().to_owned(),
        ));
        for (route, limit) in routes {
            let mut key = String::with_capacity(route.len() + 1 + subject_key.len());
            key.push_str(route);
            key.push('|');
            key.push_str(&subject_key);
            checks.push(check(*limit, key, route.clone()));
        }
        checks[0].key = subject_key;
        checks
    }

    /// Which checks' bindings to ask now, one flag per check: false for a
    /// check without a binding, and for a binding cooling off after it timed
    /// out or failed (the request is then counted in memory at once, with no
    /// wait and no log line). After the cool-off one request is told to ask
    /// (the probe) while the others keep counting in memory. A missing
    /// binding is never cooled off: it is looked up on every request, so a
    /// restored Wrangler entry is used at once.
    ///
    /// `now_ms` as for [`Limiter::conclude`].
    pub fn asks(&mut self, checks: &[Check], now_ms: u64) -> Vec<bool> {
        checks
            .iter()
            .map(|check| match &check.binding {
                None => false,
                Some(name) => match self.breakers.get_mut(name) {
                    None => true,
                    Some(breaker) => match breaker.route(now_ms) {
                        Route::Ask | Route::Probe => true,
                        Route::CoolingOff => false,
                    },
                },
            })
            .collect()
    }

    /// Settles every check of one request and decides it.
    ///
    /// `answers[i]` is what the binding of `checks[i]` said, or `None` when
    /// it was not asked: the check has no binding, or [`Limiter::asks`] left
    /// it alone (a missing answer counts as `None`). An answer in time, or a
    /// failure or timeout, is news of the binding's health and moves its
    /// cool-off; `missing` and [`BindingAnswer::Remembered`] do not.
    /// Every check is settled, in binding mode and in memory mode alike: a
    /// binding that can't be asked counts the request in memory and is logged
    /// (once per isolate) even when another limit refuses it. The request is
    /// refused if any limit refuses it, with `Retry-After` the longest window
    /// among those that refused; a refusal is added to the tally.
    ///
    /// `now_ms` is milliseconds since the Unix epoch, from one clock for the
    /// isolate's life: windows are aligned to it (`floor(now / window)`), as
    /// the binding aligns them. It should not go backwards; if it does, no
    /// count is reset, but a window may end later than it should.
    pub fn conclude(
        &mut self,
        checks: &[Check],
        answers: Vec<Option<BindingAnswer>>,
        now_ms: u64,
    ) -> Decision {
        debug_assert!(answers.len() <= checks.len(), "one answer per check");
        let mut answers = answers.into_iter();
        let mut refused_by = Vec::new();
        let mut logs = Vec::new();
        for check in checks {
            let (verdict, log) = self.settle(check, answers.next().flatten(), now_ms);
            logs.extend(log);
            match verdict {
                Verdict::Within => {}
                Verdict::Exceeded => refused_by.push(Policy {
                    name: check.policy.clone(),
                    limit: check.limit,
                }),
            }
        }
        let refusal = Refusal::by(refused_by);
        if refusal.is_some() {
            self.record_refused();
        }
        Decision { refusal, logs }
    }

    /// Settles one check with the binding's answer (`None` when there is no
    /// binding to ask), counting in memory when the binding can't be asked.
    fn settle(
        &mut self,
        check: &Check,
        answer: Option<BindingAnswer>,
        now_ms: u64,
    ) -> (Verdict, Option<FallbackLog>) {
        match answer {
            Some(BindingAnswer::Answered { success }) => {
                self.record_health(check, Outcome::Answered, now_ms);
                let verdict = if success {
                    Verdict::Within
                } else {
                    Verdict::Exceeded
                };
                (verdict, None)
            }
            // Nothing was asked: a probe that ends here leaves the breaker
            // probing, and its lease hands the probe on.
            Some(BindingAnswer::Remembered) => (Verdict::Exceeded, None),
            Some(BindingAnswer::Unavailable(reason)) => {
                match reason {
                    FallbackReason::Missing => {}
                    FallbackReason::Failed | FallbackReason::TimedOut => {
                        self.record_health(check, Outcome::Troubled, now_ms);
                    }
                }
                let binding = check.binding.clone().unwrap_or_default();
                let log = self
                    .logged
                    .insert(binding.clone())
                    .then_some(FallbackLog { binding, reason });
                (self.memory.hit(check.limit, &check.key, now_ms), log)
            }
            None => (self.memory.hit(check.limit, &check.key, now_ms), None),
        }
    }

    /// Tells the cool-off of `check`'s binding how it did.
    fn record_health(&mut self, check: &Check, outcome: Outcome, now_ms: u64) {
        let Some(name) = &check.binding else { return };
        match self.breakers.get_mut(name) {
            Some(breaker) => breaker.record(outcome, now_ms),
            // A healthy binding never seen in trouble needs no state.
            None if outcome == Outcome::Answered => {}
            None => {
                let mut breaker = Breaker::new();
                breaker.record(outcome, now_ms);
                self.breakers.insert(name.clone(), breaker);
            }
        }
    }

    /// Records a request this deployable refused (a 429, or an API request to
    /// a deployable that serves none).
    pub fn record_refused(&mut self) {
        self.tally.refused += 1;
    }

    /// Records a health check and returns the tally to report.
    pub fn record_health_check(&mut self) -> Tally {
        self.tally.health_checks += 1;
        self.tally
    }
}

impl fmt::Debug for Limiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Limiter")
            .field("counting", &self.counting)
            .field("plan", &self.plan)
            .field("tracked_keys", &self.memory.tracked_keys())
            .field("tally", &self.tally)
            .finish()
    }
}
