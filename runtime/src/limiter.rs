//! The decision for each request, with no I/O inside: the caller asks the
//! store (Cloudflare's binding) and passes in its answer and the time, so the
//! same code runs in native unit tests and in wasm inside workerd.
//!
//! A request goes through two steps:
//! 1. [`Limiter::checks`] says which limits count it, under which key, and
//!    which binding (if any) to ask for each.
//! 2. The I/O layer asks the bindings (all at once, so one deadline bounds
//!    the request) and hands each answer, in order, to [`Limiter::settle`],
//!    which falls back to the isolate's memory when the binding can't be
//!    asked. The first refusal ends the request.

use std::collections::BTreeSet;
use std::fmt;

use crate::config::{Application, Counting, Deployable};
use crate::counter::{DEFAULT_MAX_KEYS, Verdict, WindowCounter};
use crate::limits::{ADDRESS_LIMIT, CALLER_LIMIT, Limit};
use crate::plan::BindingPlan;

/// How long a binding is waited for before the request is counted in memory.
pub const BINDING_DEADLINE_MS: u32 = 500;

/// The header the address is taken from. Never `X-Forwarded-For`, which any
/// client can write.
pub const ADDRESS_HEADER: &str = "CF-Connecting-IP";

/// Who a request is counted for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    /// A signed-in caller, by the id the application's sign-in gave.
    Caller(String),
    /// Anyone else, by the address in [`ADDRESS_HEADER`]. A request without
    /// one is counted under the empty address, shared by all such requests.
    Address(String),
}

impl Subject {
    /// The subject of a request: the caller if signed in, else the address.
    pub fn of_request(caller_id: Option<&str>, connecting_ip: Option<&str>) -> Subject {
        match caller_id {
            Some(id) if !id.is_empty() => Subject::Caller(id.to_owned()),
            _ => Subject::Address(connecting_ip.unwrap_or_default().trim().to_owned()),
        }
    }

    /// The built-in limit for this kind of subject.
    pub fn limit(&self) -> Limit {
        match self {
            Subject::Caller(_) => CALLER_LIMIT,
            Subject::Address(_) => ADDRESS_LIMIT,
        }
    }

    fn key(&self) -> String {
        match self {
            Subject::Caller(id) => format!("caller:{id}"),
            Subject::Address(address) => format!("address:{address}"),
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
    /// The binding to ask, when the store is Cloudflare's binding.
    pub binding: Option<String>,
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

/// The outcome of one check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settled {
    pub verdict: Verdict,
    /// A line to log now: the first fallback of this binding in this isolate.
    pub log: Option<FallbackLog>,
}

/// A refused request: 429 with `Retry-After`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    /// The window's whole length: the binding says only whether a request is
    /// within the limit, not when its window ends.
    pub retry_after_seconds: u32,
}

impl Refusal {
    pub const STATUS: u16 = 429;

    /// The refusal for a request over `limit`.
    pub fn for_limit(limit: Limit) -> Refusal {
        Refusal {
            retry_after_seconds: limit.window_seconds,
        }
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

/// The request-time state of one deployable in one isolate (or process).
pub struct Limiter {
    counting: Counting,
    plan: BindingPlan,
    routes: Vec<(String, Limit)>,
    memory: WindowCounter,
    logged: BTreeSet<String>,
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
        let routes = app
            .routes
            .iter()
            .filter_map(|r| Some((r.path.clone(), r.rate_limit?)))
            .collect();
        Ok(Limiter {
            counting,
            plan,
            routes,
            memory: WindowCounter::new(DEFAULT_MAX_KEYS, seed),
            logged: BTreeSet::new(),
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
    /// A deployable that serves no API limits nothing.
    pub fn checks(&self, subject: &Subject, path: &str) -> Vec<Check> {
        if self.counting == Counting::NoApi {
            return Vec::new();
        }
        let subject_key = subject.key();
        let route = self
            .routes
            .iter()
            .filter(|(route, _)| route == path)
            .map(|(route, limit)| (*limit, format!("{route}|{subject_key}")));
        std::iter::once((subject.limit(), subject_key.clone()))
            .chain(route)
            .map(|(limit, key)| Check {
                binding: self.plan.binding_for(limit).map(|b| b.name.clone()),
                limit,
                key,
            })
            .collect()
    }

    /// Settles one check with the binding's answer (`None` when there is no
    /// binding to ask), counting in memory when the binding can't be asked.
    pub fn settle(&mut self, check: &Check, answer: Option<BindingAnswer>, now_ms: u64) -> Settled {
        match answer {
            Some(BindingAnswer::Answered { success }) => Settled {
                verdict: if success {
                    Verdict::Within
                } else {
                    Verdict::Exceeded
                },
                log: None,
            },
            Some(BindingAnswer::Unavailable(reason)) => {
                let binding = check.binding.clone().unwrap_or_default();
                let log = self
                    .logged
                    .insert(binding.clone())
                    .then_some(FallbackLog { binding, reason });
                Settled {
                    verdict: self.memory.hit(check.limit, &check.key, now_ms),
                    log,
                }
            }
            None => Settled {
                verdict: self.memory.hit(check.limit, &check.key, now_ms),
                log: None,
            },
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
