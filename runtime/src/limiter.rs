//! The decision for each request, with no I/O inside: the caller asks the
//! backends (Cloudflare's bindings, or Redis) and passes in their answers and
//! the time, so the same code runs in native unit tests, in wasm inside
//! workerd, and behind a native server.
//!
//! A request goes through three steps, each consuming what the last made:
//! 1. [`Rules::checks`] says which limits count it, under which key
//!    ([`crate::keys`]), and which backend (if any) to ask for each. It
//!    reads only the deployable's [`Rules`], fixed when the limiter is
//!    built and shared (`Arc`), so everything that depends on what a client
//!    sent (the path made canonical, the route matched, the keys built) is
//!    done before an embedding locks the limiter's counts, and a long path
//!    holds no other request. A path longer than [`MAX_PATH_BYTES`] is
//!    refused unread ([`PathTooLong`]).
//! 2. [`Limiter::asks`] takes those checks and says which backends to ask
//!    now: a backend that timed out or failed is left alone for a cool-off
//!    ([`crate::breaker::COOL_OFF_MS`]), then probed by one request at a
//!    time ([`crate::breaker`]), so a troubled backend costs one wait, not one
//!    per request. It returns the request as a [`Pending`].
//! 3. The I/O layer asks the backends of the pending request's [`Ask`]s (all
//!    at once, so one deadline bounds the request), answers each ask in
//!    place, and hands the [`Pending`] to [`Limiter::conclude`], which
//!    settles every check (falling back to the isolate's memory for a backend
//!    that can't be or isn't asked), records how each asked backend did, and
//!    returns the [`Decision`]: the refusal, if any limit refused, and the
//!    fallback log lines to write.
//!
//! An answer travels inside the ask it answers, so it cannot reach another
//! check. Every I/O layer (Workers, the native gate, its Redis backend) calls
//! these three and nothing else, so the decision exists once.
//!
//! Time comes in as two clocks ([`Now`]), as quinn-proto passes an `Instant`
//! for its timers beside the wall time: the wall clock aligns the in-memory
//! count's windows (`floor(now / window)`, as the binding aligns them; in
//! Redis, Redis's own clock aligns them inside the script), and a
//! monotonic clock runs the cool-offs and probe leases, so a wall clock
//! stepped back (NTP, a VM resumed) cannot stretch a cool-off.

use std::fmt;
use std::sync::Arc;

/// What the I/O layer answers each ask with, and why a check fell back.
pub use crate::backend::{BackendAnswer, BackendId, FallbackReason};
use crate::breaker::{BackendState, Breaker, Outcome, Route};
use crate::config::{Application, Counting};
use crate::counter::{DEFAULT_MAX_KEYS, Verdict, WindowCounter};
pub use crate::gate_plan::UnknownDeployable;
use crate::gate_plan::{GatePlan, RouteLimit};
use crate::keys;
use crate::limits::Limit;
use crate::routes::RouteTable;
use crate::subject::Subject;

/// The header the address is taken from on Workers (and on a native server
/// configured as behind Cloudflare). Never `X-Forwarded-For` on Workers,
/// where any client can write it.
pub const ADDRESS_HEADER: &str = "CF-Connecting-IP";

/// The time a request is decided at, on both of the I/O layer's clocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Now {
    /// Milliseconds since the Unix epoch: windows are aligned to it
    /// (`floor(now / window)`). If it goes backwards, no count is reset, but
    /// a window may end later than it should.
    pub wall_ms: u64,
    /// Milliseconds since any fixed origin, never going backwards (a native
    /// server's `Instant`): cool-offs and probe leases run on it
    /// ([`crate::breaker`]). A Worker, which has one clock, passes its wall
    /// time here too.
    pub monotonic_ms: u64,
}

impl Now {
    /// Both clocks at `ms`: for an embedding with one clock (a Worker's
    /// `Date.now()`), and for tests that move time by hand.
    pub const fn one_clock(ms: u64) -> Now {
        Now {
            wall_ms: ms,
            monotonic_ms: ms,
        }
    }
}

/// The path of an absolute URL as the WHATWG URL parser serialises it (a
/// Worker's `request.url`): what `new URL(url).pathname` gives, read off the
/// string instead of parsed again (the authority of a serialised URL holds no
/// `/`, `?` or `#`). Without one, the path is `/`. It scans bytes (every
/// delimiter is ASCII, so each cut is on a character boundary): a
/// substring search would link a searcher that the Worker's first request
/// has V8 compile. Only a Worker's request has a URL to read.
#[cfg(any(target_arch = "wasm32", test))]
pub(crate) fn url_path(url: &str) -> &str {
    let bytes = url.as_bytes();
    let after_scheme = bytes
        .windows(3)
        .position(|w| w == b"://")
        .map_or(0, |i| i + 3);
    let rest = &bytes[after_scheme..];
    let Some(start) = rest.iter().position(|b| matches!(b, b'/' | b'?' | b'#')) else {
        return "/";
    };
    let path = &rest[start..];
    let end = path
        .iter()
        .position(|b| matches!(b, b'?' | b'#'))
        .unwrap_or(path.len());
    let start = after_scheme + start;
    match &url[start..start + end] {
        "" => "/",
        path => path,
    }
}

/// One limit that counts a request, the key it is counted under, the backend
/// to ask, (once [`Limiter::asks`] has seen it) whether to ask it and what it
/// answered, and (once [`Limiter::conclude`] has) how it was settled. Only
/// [`Limiter::checks`] makes one. Its `Debug` leaves the key out.
#[derive(Clone, PartialEq, Eq)]
pub struct Check {
    limit: Limit,
    key: String,
    backend: Option<BackendId>,
    policy: PolicyId,
    /// Whether its limit records what it would refuse instead of refusing it.
    shadow: bool,
    slot: Slot,
    settled: Option<(Verdict, Counted)>,
}

impl fmt::Debug for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Check")
            .field("limit", &self.limit)
            .field("key", &format_args!(".."))
            .field("backend", &self.backend)
            .field("policy", &self.policy)
            .field("shadow", &self.shadow)
            .field("slot", &self.slot)
            .field("settled", &self.settled)
            .finish()
    }
}

/// A limit of one limiter by its policy name's place ([`Limiter::policy_name`]):
/// 0 a signed-in caller's, 1 an address's, then each route's own limit in
/// the limiter's order. A number the hot path copies; the name, the one the
/// 429's `RateLimit-Policy` header gives, is made a string only when needed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[doc(hidden)]
pub struct PolicyId(u32);

impl PolicyId {
    /// The built-in limits' policies: a caller's, an address's.
    const SUBJECTS: [&'static str; 2] = Subject::POLICIES;

    fn route(index: usize) -> PolicyId {
        PolicyId(u32::try_from(index + Self::SUBJECTS.len()).unwrap_or(u32::MAX))
    }

    /// Its place among [`Limiter::policy_names`]: a table index for an
    /// embedding that keeps something per limit (a native gate's metrics).
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Where a check was counted, once [`Limiter::conclude`] settled it: what
/// an I/O layer tells operators (metrics, data points).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[doc(hidden)]
pub enum Counted {
    /// Its backend counted it and answered in time.
    Backend,
    /// Its backend's cache of keys it refused earlier answered: no round trip.
    Remembered,
    /// The isolate's (or process's) memory counted it, for this reason.
    InMemory(InMemory),
}

/// Why a check was counted in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[doc(hidden)]
pub enum InMemory {
    /// The deployable has no backend for this limit: it counts in memory by design.
    NoBackend,
    /// Its backend is cooling off, or another request is probing it.
    CoolingOff,
    /// Its backend was asked and could not answer.
    Unavailable(FallbackReason),
    /// The I/O layer did not ask its backend ([`Limiter::asks_none`]), or
    /// left its ask unanswered.
    NotAsked,
}

impl InMemory {
    /// The reason as a label: `no_backend`, `cooling_off`, `not_asked`, or
    /// the fallback's (`missing`, `failed`, `timed_out`).
    pub fn as_str(self) -> &'static str {
        match self {
            InMemory::NoBackend => "no_backend",
            InMemory::CoolingOff => "cooling_off",
            InMemory::Unavailable(reason) => reason.as_str(),
            InMemory::NotAsked => "not_asked",
        }
    }
}

/// Where a check stands between [`Limiter::asks`] and [`Limiter::conclude`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    /// Counted in memory: no backend, or the I/O layer asks none.
    NotAsked,
    /// Counted in memory: its backend is cooling off (or being probed by another request).
    CoolingOff,
    /// Its backend is to be asked, and has not answered (yet): counted in
    /// memory if it never does.
    Asked,
    /// Its backend was asked and answered this.
    Answered(BackendAnswer),
}

impl Check {
    /// The limit that counts the request.
    pub fn limit(&self) -> Limit {
        self.limit
    }

    /// The key it is counted under ([`crate::keys`]). Never logged.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The backend to ask: one of Cloudflare's bindings, or the Redis
    /// connection; `None` when the request is counted in memory.
    pub fn backend(&self) -> Option<BackendId> {
        self.backend
    }

    /// Whether the I/O layer is to ask this check's backend (see [`Pending::asks`]).
    #[doc(hidden)]
    pub fn is_asked(&self) -> bool {
        matches!(self.slot, Slot::Asked | Slot::Answered(_))
    }

    /// The limit's policy, whose name is [`Limiter::policy_name`].
    #[doc(hidden)]
    pub fn policy(&self) -> PolicyId {
        self.policy
    }

    /// Whether its limit is a shadow one: counted as an enforced one, but
    /// a request over it is recorded ([`Decision::shadow_refusals`]), not refused.
    #[doc(hidden)]
    pub fn is_shadow(&self) -> bool {
        self.shadow
    }

    /// Once [`Limiter::conclude`] settled it: whether it was within its
    /// limit (a shadow limit's `Exceeded` refused nothing), and where it was counted.
    #[doc(hidden)]
    pub fn settled(&self) -> Option<(Verdict, Counted)> {
        self.settled
    }

    /// What its backend answered, if it was asked and answered.
    #[cfg(test)]
    pub(crate) fn answer(&self) -> Option<BackendAnswer> {
        match self.slot {
            Slot::Answered(answer) => Some(answer),
            Slot::NotAsked | Slot::CoolingOff | Slot::Asked => None,
        }
    }
}

/// One request between [`Limiter::asks`] and [`Limiter::conclude`]: its
/// checks, each carrying the answer of its backend once the I/O layer has it.
#[derive(Debug)]
#[must_use = "a pending request is concluded; an unanswered probe holds its backend's cool-off until its lease ends"]
pub struct Pending {
    checks: Vec<Check>,
}

impl Pending {
    /// A request's checks, none of whose backends is asked: each is counted
    /// in memory, as [`Limiter::asks_none`] leaves them. For checks that have
    /// no backend (a deployable counting in memory) this is what
    /// [`Limiter::asks`] gives, without the limiter: an embedding that
    /// shares its limiter behind a lock need not take it to learn nothing.
    #[cfg(feature = "native")]
    pub(crate) fn unasked(checks: Vec<Check>) -> Pending {
        Pending { checks }
    }

    /// Every check of the request, asked or not, in order.
    pub fn checks(&self) -> &[Check] {
        &self.checks
    }

    /// The checks whose backend to ask now, in the checks' order (the same
    /// order every time, answered or not). An ask left unanswered is counted
    /// in memory, as if it had not been asked.
    pub fn asks(&mut self) -> impl Iterator<Item = Ask<'_>> {
        self.checks.iter_mut().filter_map(|check| match check.slot {
            Slot::NotAsked | Slot::CoolingOff => None,
            Slot::Asked | Slot::Answered(_) => Some(Ask {
                backend: check.backend?,
                check,
            }),
        })
    }
}

/// One backend to ask for one check of a [`Pending`] request: what to ask it,
/// and where its answer goes.
#[derive(Debug)]
pub struct Ask<'a> {
    backend: BackendId,
    check: &'a mut Check,
}

impl Ask<'_> {
    /// The backend to ask.
    pub fn backend(&self) -> BackendId {
        self.backend
    }

    /// The key to ask it about ([`crate::keys`]). Never logged.
    pub fn key(&self) -> &str {
        &self.check.key
    }

    /// The limit to count the key against.
    pub fn limit(&self) -> Limit {
        self.check.limit
    }

    /// What the backend said, for [`Limiter::conclude`].
    pub fn answer(self, answer: BackendAnswer) {
        self.check.slot = Slot::Answered(answer);
    }
}

/// The `rate_limits.fallback` log line, emitted once per backend per isolate
/// (or process).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FallbackLog {
    /// The backend's name: the binding's, or the Redis connection's.
    pub backend: String,
    /// Why it could not be asked.
    pub reason: FallbackReason,
}

impl FallbackLog {
    /// The event's name, which operators search for.
    pub const EVENT: &'static str = "rate_limits.fallback";

    /// One JSON line, event first, as a Worker writes it: it names the
    /// binding and the reason, never a key.
    pub fn to_json_line(&self) -> String {
        #[derive(serde::Serialize)]
        struct Line<'a> {
            event: &'static str,
            binding: &'a str,
            reason: &'static str,
        }
        let line = Line {
            event: Self::EVENT,
            binding: &self.backend,
            reason: self.reason.as_str(),
        };
        serde_json::to_string(&line).unwrap_or_default()
    }
}

/// The `rate_limits.shadow_refusal` log line, emitted once per shadow limit
/// per isolate (or process): the first request it would have refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShadowLog {
    /// The limit's policy name (`caller`, `address`, or the route's
    /// template): never a key.
    pub limit: String,
}

impl ShadowLog {
    /// The event's name, which operators search for.
    pub const EVENT: &'static str = "rate_limits.shadow_refusal";

    /// One JSON line, event first, as a Worker writes it.
    pub fn to_json_line(&self) -> String {
        #[derive(serde::Serialize)]
        struct Line<'a> {
            event: &'static str,
            limit: &'a str,
        }
        let line = Line {
            event: Self::EVENT,
            limit: &self.limit,
        };
        serde_json::to_string(&line).unwrap_or_default()
    }
}

/// One limit that refused a request, as the `RateLimit-Policy` header names it
/// (draft-ietf-httpapi-ratelimit-headers): so a client sees which limit it hit.
#[derive(Debug, Clone, PartialEq, Eq)]
#[doc(hidden)]
pub struct Policy {
    /// `caller`, `address`, or the route's path.
    pub name: String,
    /// The limit, whose requests and window the header gives as `q` and `w`.
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

/// A refused request: 429 with `Retry-After` and `RateLimit-Policy`, or
/// 414 for a path longer than [`MAX_PATH_BYTES`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The longest window among the limits that refused: the binding says
    /// only whether a request is within the limit, not when its window
    /// ends, so a client waiting this long is within every one of them again.
    /// 0 for a path too long (waiting does not help).
    pub retry_after_seconds: u32,
    /// Every limit that refused the request, in the order they were checked.
    /// Never empty for [`Refused::Limited`]; empty for [`Refused::PathTooLong`].
    pub policies: Vec<Policy>,
    /// Why: its limits, or its path's length.
    pub reason: Refused,
}

/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// One or more of its limits refused it: 429.
    Limited,
    /// Its path is longer than [`MAX_PATH_BYTES`]: 414, counted nowhere
    /// and never served, so no route limit it could meet is bypassed.
    PathTooLong,
}

impl Refusal {
    /// The status of every refusal by a limit.
    pub const STATUS: u16 = 429;

    /// The status of a refusal of a path longer than [`MAX_PATH_BYTES`]
    /// (URI Too Long, as nginx and Cloudflare answer theirs).
    pub const PATH_TOO_LONG_STATUS: u16 = 414;

    /// The header naming the limits that refused.
    pub const POLICY_HEADER: &'static str = "RateLimit-Policy";

    /// The refusal by the limits in `policies`; `None` when nothing refused.
    #[doc(hidden)]
    pub fn by(policies: Vec<Policy>) -> Option<Refusal> {
        let retry_after_seconds = policies.iter().map(|p| p.limit.window_seconds).max()?;
        Some(Refusal {
            retry_after_seconds,
            policies,
            reason: Refused::Limited,
        })
    }

    /// The refusal of a request whose path is longer than [`MAX_PATH_BYTES`].
    pub fn path_too_long() -> Refusal {
        Refusal {
            retry_after_seconds: 0,
            policies: Vec::new(),
            reason: Refused::PathTooLong,
        }
    }

    /// The response's status: [`Refusal::STATUS`], or
    /// [`Refusal::PATH_TOO_LONG_STATUS`].
    pub fn status(&self) -> u16 {
        match self.reason {
            Refused::Limited => Refusal::STATUS,
            Refused::PathTooLong => Refusal::PATH_TOO_LONG_STATUS,
        }
    }

    /// The `RateLimit-Policy` header's value: one list item per refusing limit.
    pub fn rate_limit_policy(&self) -> String {
        let items: Vec<String> = self.policies.iter().map(Policy::to_header_item).collect();
        items.join(", ")
    }

    /// The short JSON body sent with the 429. Serialised from structs, not
    /// a `serde_json::Value`, whose serialiser would link float formatting
    /// into a Worker for numbers that are never floats.
    pub fn body(&self) -> String {
        #[derive(serde::Serialize)]
        struct Limited {
            error: &'static str,
            retry_after: u32,
        }
        #[derive(serde::Serialize)]
        struct TooLong {
            error: &'static str,
            max_path_bytes: usize,
        }
        match self.reason {
            Refused::Limited => serde_json::to_string(&Limited {
                error: "rate_limited",
                retry_after: self.retry_after_seconds,
            }),
            Refused::PathTooLong => serde_json::to_string(&TooLong {
                error: "path_too_long",
                max_path_bytes: MAX_PATH_BYTES,
            }),
        }
        .unwrap_or_default()
    }

    /// The response's headers, as every I/O layer sends them: for a 429
    /// `Retry-After` and `RateLimit-Policy`; for both the body's JSON
    /// content type.
    pub fn headers(&self) -> Vec<(&'static str, String)> {
        let json = ("Content-Type", "application/json".to_owned());
        match self.reason {
            Refused::Limited => vec![
                ("Retry-After", self.retry_after_seconds.to_string()),
                (Refusal::POLICY_HEADER, self.rate_limit_policy()),
                json,
            ],
            Refused::PathTooLong => vec![json],
        }
    }

    /// The refusal as an `http` response, [`Refusal::status`],
    /// [`Refusal::headers`] and [`Refusal::body`]:
    /// what a tower layer answers (natively, and on Workers under axum).
    #[cfg(any(feature = "native", feature = "workers-rs"))]
    pub fn to_http<B: From<String>>(&self) -> http::Response<B> {
        let mut response = http::Response::new(B::from(self.body()));
        *response.status_mut() = http::StatusCode::from_u16(self.status())
            .unwrap_or(http::StatusCode::TOO_MANY_REQUESTS);
        for (name, value) in self.headers() {
            // The policy's names are escaped to printable ASCII: always a valid value.
            if let Ok(value) = http::HeaderValue::try_from(value) {
                response.headers_mut().insert(name, value);
            }
        }
        response
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
    /// The shadow limits the request was over: each would have refused it,
    /// and none did (`RateLimit-Policy` never names one). For the I/O
    /// layer's metric and data point.
    pub shadow_refusals: Vec<Policy>,
    /// The `rate_limits.shadow_refusal` lines to write now: the first
    /// request each shadow limit would have refused in this isolate.
    pub shadow_logs: Vec<ShadowLog>,
    /// The request's checks, each settled ([`Check::settled`]): what the
    /// I/O layer tells operators of (the request's own vector, moved here).
    pub checks: Vec<Check>,
}

/// The longest path a gate matches routes on, in bytes: 8 KiB, the request
/// line nginx (`large_client_header_buffers`), Apache (`LimitRequestLine`)
/// and Fastly accept. hyper takes a URI of up to 65,534 bytes and
/// Cloudflare one of 32 KB, so a gate sees longer ones: each is refused
/// ([`PathTooLong`], a 414) from its length alone, never read, so no
/// decision walks more than this (BENCHMARKS.md, "Hostile inputs"). Refused,
/// not counted elsewhere: its dot segments could make it any route's path,
/// so no shorter prefix says which route limits it would meet.
pub const MAX_PATH_BYTES: usize = 8 * 1024;

/// A request's path is longer than [`MAX_PATH_BYTES`]: it is refused
/// ([`Refusal::path_too_long`]) without being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the request's path is {bytes} bytes, longer than the {MAX_PATH_BYTES} a gate reads")]
pub struct PathTooLong {
    /// The path's length, in bytes.
    pub bytes: usize,
}

/// What a deployable limits, fixed when its [`Limiter`] is built: how it
/// counts, its routes' limits and their table. Immutable and shared
/// ([`Limiter::rules`], an `Arc`), so a request's checks are made from it
/// with no lock held: the work that depends on what a client sent is done
/// before the counts are locked, and the lock covers only the counting.
#[derive(Debug)]
#[doc(hidden)]
pub struct Rules {
    counting: Counting,
    /// The backends of the built-in limits: a caller's, then an address's.
    subject_backends: [Option<BackendId>; 2],
    /// Whether the built-in limits are shadow ones: a caller's, then an address's.
    subject_shadow: [bool; 2],
    /// Each route's own limit, once per (path, limit) however often the description lists it.
    routes: Vec<RouteLimit>,
    /// Which of `routes` a request's canonical path meets.
    route_table: RouteTable,
}

/// The request-time state of one deployable in one isolate (or process).
///
/// Inputs and outputs, in order, for each request: [`Rules::checks`] (also
/// [`Limiter::checks`]), [`Limiter::asks`], then (after asking the
/// backends) [`Limiter::conclude`]. Requests may interleave between them:
/// each call is self-contained.
pub struct Limiter {
    rules: Arc<Rules>,
    /// The backends this deployable asks, by [`BackendId`]: the plan's bindings
    /// in namespace order, or the one Redis connection.
    backends: Vec<BackendEntry>,
    memory: WindowCounter,
    /// By [`PolicyId`]: whether the shadow limit's first would-be refusal was logged.
    shadow_logged: Vec<bool>,
}

/// One backend of a limiter: its name (for logs and binding lookups), its
/// cool-off, and whether its fallback was logged yet.
#[derive(Debug)]
struct BackendEntry {
    name: String,
    breaker: Breaker,
    logged: bool,
    /// Whether finding it `missing` cost a dial, so it cools off like a
    /// failure: a Redis never reached is dialled once per cool-off, while a
    /// missing binding (a free look-up in `env`) is looked up on every
    /// request, so a restored Wrangler entry is used at once.
    missing_cools_off: bool,
}

impl Limiter {
    /// The limiter for `deployable` of `app`. `seed` keys the in-memory
    /// counter's digest and should be random per isolate.
    pub fn new(
        app: &Application,
        deployable: &str,
        seed: u128,
    ) -> Result<Limiter, UnknownDeployable> {
        Ok(Limiter::from_plan(GatePlan::new(app, deployable)?, seed))
    }

    /// The limiter of a deployable's plan (made at build time, or from the
    /// application description by [`Limiter::new`]). `seed` as there.
    pub fn from_plan(plan: GatePlan, seed: u128) -> Limiter {
        let missing_cools_off = matches!(plan.counting, Counting::Redis { .. });
        let route_limits: Vec<Limit> = plan.routes.iter().map(|r| r.limit).collect();
        let backends = plan
            .backends
            .into_iter()
            .map(|name| BackendEntry {
                name,
                breaker: Breaker::new(),
                logged: false,
                missing_cools_off,
            })
            .collect();
        // A plan's templates are valid (validated, or read back by
        // `GatePlan::from_text`), so the router refuses none of them.
        let (route_table, _) = RouteTable::new(
            plan.routes
                .iter()
                .enumerate()
                .map(|(index, route)| (index, route.path.as_str())),
        );
        let policies = PolicyId::SUBJECTS.len() + plan.routes.len();
        Limiter {
            rules: Arc::new(Rules {
                counting: plan.counting,
                subject_backends: plan.subject_backends,
                subject_shadow: plan.subject_shadow,
                routes: plan.routes,
                route_table,
            }),
            shadow_logged: vec![false; policies],
            backends,
            memory: WindowCounter::with_budget(
                DEFAULT_MAX_KEYS,
                &route_limits,
                plan.memory_budget,
                seed,
            ),
        }
    }

    /// What this deployable limits: shared, for an embedding to make a
    /// request's checks ([`Rules::checks`]) before it locks this limiter.
    #[doc(hidden)]
    pub fn rules(&self) -> &Arc<Rules> {
        &self.rules
    }

    /// Keys the in-memory counter's digest with `seed`, forgetting what it
    /// counted (see [`WindowCounter::reseed`]): for a limiter built before
    /// its seed could be drawn.
    #[doc(hidden)]
    pub fn reseed(&mut self, seed: u128) {
        self.memory.reseed(seed);
    }

    /// How this deployable counts.
    pub fn counting(&self) -> &Counting {
        self.rules.counting()
    }

    /// The names of the backends this deployable asks, in [`BackendId`] order:
    /// the bindings' names as the Worker sees them in `env`, or the Redis
    /// connection's.
    pub fn backend_names(&self) -> impl Iterator<Item = &str> {
        self.backends.iter().map(|s| s.name.as_str())
    }

    /// The name of `store`, as [`FallbackLog`] names it (empty for an id of
    /// another limiter).
    pub fn backend_name(&self, backend: BackendId) -> &str {
        self.backends.get(backend.index()).map_or("", |s| &s.name)
    }

    /// Where `backend` stands: asked, cooling off, or probed (as the last
    /// request left it); `Asked` for an id of another limiter.
    #[doc(hidden)]
    pub fn backend_state(&self, backend: BackendId) -> BackendState {
        self.backends
            .get(backend.index())
            .map_or(BackendState::Asked, |s| s.breaker.state())
    }

    /// How many times `backend`'s state changed ([`Breaker::changes`]): a
    /// gauge of [`Self::backend_state`] is set again only when this moves,
    /// so requests that end late change nothing a reader sees.
    #[doc(hidden)]
    pub fn backend_state_changes(&self, backend: BackendId) -> u64 {
        self.backends
            .get(backend.index())
            .map_or(0, |s| s.breaker.changes())
    }

    /// Every limit's policy name, in [`PolicyId`] order: `caller`, `address`,
    /// then each route's limit's name (its template, never a request's
    /// path, after the methods it counts if not all: `POST /login`).
    pub fn policy_names(&self) -> impl Iterator<Item = &str> {
        self.rules.policy_names()
    }

    /// The policy name of `policy`, as the 429's `RateLimit-Policy` gives
    /// it (empty for an id of another limiter).
    pub fn policy_name(&self, policy: PolicyId) -> &str {
        self.rules.policy_name(policy)
    }

    /// The bytes the in-memory counter holds on the heap now.
    #[doc(hidden)]
    pub fn memory_bytes(&self) -> usize {
        self.memory.heap_bytes()
    }

    /// The most the in-memory counter can hold (its stated bound).
    #[doc(hidden)]
    pub fn memory_bound_bytes(&self) -> usize {
        self.memory.bound().total()
    }

    /// [`Rules::checks`] of this limiter's rules.
    pub fn checks(
        &self,
        subject: &Subject,
        method: &str,
        path: &str,
    ) -> Result<Vec<Check>, PathTooLong> {
        self.rules.checks(subject, method, path)
    }

    /// Takes a request's checks and says which backends to ask now: none for
    /// a check without a backend, nor for a backend cooling off after it timed
    /// out or failed (the request is then counted in memory at once, with no
    /// wait and no log line). After the cool-off one request is told to ask
    /// (the probe) while the others keep counting in memory. A missing
    /// binding is never cooled off: it is looked up on every request, so a
    /// restored Wrangler entry is used at once; a Redis never reached is,
    /// since each look costs a dial.
    ///
    /// The cool-offs run on `now.monotonic_ms`.
    pub fn asks(&mut self, mut checks: Vec<Check>, now: Now) -> Pending {
        for check in &mut checks {
            let backend = check
                .backend
                .and_then(|id| self.backends.get_mut(id.index()));
            check.slot = match backend.map(|s| s.breaker.route(now.monotonic_ms)) {
                Some(Route::Ask | Route::Probe) => Slot::Asked,
                Some(Route::CoolingOff) => Slot::CoolingOff,
                None => Slot::NotAsked,
            };
        }
        Pending { checks }
    }

    /// Takes a request's checks and asks no backend: every one is counted
    /// in memory with no cool-off moved and no line written, as a check
    /// whose backend cools off is. For an embedding that could not ask
    /// (the workers-rs gate when the gate's own call failed), so the request
    /// is still decided by its limits.
    #[doc(hidden)]
    pub fn asks_none(&self, checks: Vec<Check>) -> Pending {
        Pending { checks }
    }

    /// Settles every check of one request and decides it.
    ///
    /// Each asked check carries what its backend answered ([`Ask::answer`]),
    /// or nothing (counted in memory, as a check not asked is). An answer in
    /// time, or a failure or timeout, is news of the backend's health and
    /// moves its cool-off, and so is a Redis found `missing` (a dial each
    /// time); a missing binding and [`BackendAnswer::Remembered`] do not.
    /// Every check is settled, in binding mode and in memory mode alike: a
    /// backend that can't be asked counts the request in memory and is logged
    /// (once per isolate) even when another limit refuses it. The request is
    /// refused if any enforced limit refuses it, with `Retry-After` the
    /// longest window among those that refused; a shadow limit over which it
    /// is refuses nothing and is named in [`Decision::shadow_refusals`]
    /// (and logged the first time, once per isolate).
    ///
    /// Windows are aligned to `now.wall_ms`, as the binding aligns them; a
    /// backend's cool-off is measured on `now.monotonic_ms` (see [`Now`]).
    pub fn conclude(&mut self, pending: Pending, now: Now) -> Decision {
        let mut refused_by = Vec::new();
        let mut shadow_refusals = Vec::new();
        let mut logs = Vec::new();
        let mut shadow_logs = Vec::new();
        let mut checks = pending.checks;
        for check in &mut checks {
            let (verdict, counted, log) = self.settle(check, now);
            check.settled = Some((verdict, counted));
            logs.extend(log);
            if verdict == Verdict::Within {
                continue;
            }
            let policy = Policy {
                name: self.policy_name(check.policy).to_owned(),
                limit: check.limit,
            };
            if !check.shadow {
                refused_by.push(policy);
                continue;
            }
            if let Some(logged) = self.shadow_logged.get_mut(check.policy.index())
                && !*logged
            {
                *logged = true;
                shadow_logs.push(ShadowLog {
                    limit: policy.name.clone(),
                });
            }
            shadow_refusals.push(policy);
        }
        Decision {
            refusal: Refusal::by(refused_by),
            logs,
            shadow_refusals,
            shadow_logs,
            checks,
        }
    }

    /// Settles one check with its backend's answer, counting in memory when
    /// the backend was not asked or can't be.
    fn settle(&mut self, check: &Check, now: Now) -> (Verdict, Counted, Option<FallbackLog>) {
        let in_memory = |why| Counted::InMemory(why);
        let answer = match (check.slot, check.backend) {
            (Slot::Answered(answer), _) => answer,
            (Slot::NotAsked, None) => {
                let verdict = self.memory.hit(check.limit, &check.key, now.wall_ms);
                return (verdict, in_memory(InMemory::NoBackend), None);
            }
            (Slot::CoolingOff, _) => {
                let verdict = self.memory.hit(check.limit, &check.key, now.wall_ms);
                return (verdict, in_memory(InMemory::CoolingOff), None);
            }
            (Slot::NotAsked | Slot::Asked, _) => {
                let verdict = self.memory.hit(check.limit, &check.key, now.wall_ms);
                return (verdict, in_memory(InMemory::NotAsked), None);
            }
        };
        let backend = check
            .backend
            .and_then(|id| self.backends.get_mut(id.index()));
        match (answer, backend) {
            (BackendAnswer::Answered { success }, backend) => {
                if let Some(backend) = backend {
                    backend.breaker.record(Outcome::Answered, now.monotonic_ms);
                }
                let verdict = if success {
                    Verdict::Within
                } else {
                    Verdict::Exceeded
                };
                (verdict, Counted::Backend, None)
            }
            // Nothing was asked: a probe that ends here leaves the breaker
            // probing, and its lease hands the probe on.
            (BackendAnswer::Remembered, _) => (Verdict::Exceeded, Counted::Remembered, None),
            (BackendAnswer::Unavailable(reason), Some(backend)) => {
                let troubled = match reason {
                    FallbackReason::Missing => backend.missing_cools_off,
                    FallbackReason::Failed | FallbackReason::TimedOut => true,
                };
                if troubled {
                    backend.breaker.record(Outcome::Troubled, now.monotonic_ms);
                }
                let log = (!backend.logged).then(|| FallbackLog {
                    backend: backend.name.clone(),
                    reason,
                });
                backend.logged = true;
                let verdict = self.memory.hit(check.limit, &check.key, now.wall_ms);
                (verdict, in_memory(InMemory::Unavailable(reason)), log)
            }
            // Only a check with a backend is asked, so only one is answered.
            (BackendAnswer::Unavailable(reason), None) => {
                let verdict = self.memory.hit(check.limit, &check.key, now.wall_ms);
                (verdict, in_memory(InMemory::Unavailable(reason)), None)
            }
        }
    }
}

impl Rules {
    /// How this deployable counts.
    pub fn counting(&self) -> &Counting {
        &self.counting
    }

    /// Every limit's policy name, in [`PolicyId`] order: `caller`, `address`,
    /// then each route's limit's name (its template, never a request's
    /// path, after the methods it counts if not all: `POST /login`).
    pub fn policy_names(&self) -> impl Iterator<Item = &str> {
        PolicyId::SUBJECTS
            .into_iter()
            .chain(self.routes.iter().map(|r| r.name.as_str()))
    }

    /// Whether each limit is a shadow one, in [`PolicyId`] order (as
    /// [`Rules::policy_names`]).
    #[doc(hidden)]
    pub fn shadow_policies(&self) -> impl Iterator<Item = bool> + '_ {
        self.subject_shadow
            .into_iter()
            .chain(self.routes.iter().map(|r| r.shadow))
    }

    /// The policy name of `policy`, as the 429's `RateLimit-Policy` gives
    /// it (empty for an id of another limiter).
    pub fn policy_name(&self, policy: PolicyId) -> &str {
        match policy.index().checked_sub(PolicyId::SUBJECTS.len()) {
            None => PolicyId::SUBJECTS[policy.index()],
            Some(route) => self.routes.get(route).map_or("", |r| &r.name),
        }
    }

    /// The limits that count a request from `subject` to `path` with
    /// `method` (as the server read it: `GET`, `POST`, ...), in the order
    /// to check them: the subject's built-in limit, then the own limits of
    /// the routes `path` meets, as sent and however else it is spelt
    /// ([`crate::routes`]: the router's route and the canonical path's, the
    /// most specific template where several match), those that count its
    /// method ([`crate::Methods::counts`]; a path is matched first, as a
    /// router matches it, then its method). A deployable that
    /// serves no API limits nothing. No two checks share both limit and
    /// key, so no request is counted twice under one key.
    ///
    /// It reads only these rules, so it runs with no lock held; a path
    /// longer than [`MAX_PATH_BYTES`] is [`PathTooLong`] from its length
    /// alone (but for a deployable that limits nothing, which reads no path).
    pub fn checks(
        &self,
        subject: &Subject,
        method: &str,
        path: &str,
    ) -> Result<Vec<Check>, PathTooLong> {
        if matches!(self.counting, Counting::NoApi) {
            return Ok(Vec::new());
        }
        if path.len() > MAX_PATH_BYTES {
            return Err(PathTooLong { bytes: path.len() });
        }
        let subject_key = keys::subject(subject);
        let subject_index = match subject {
            Subject::Caller(_) => 0,
            Subject::Address(_) => 1,
        };
        let met = self.route_table.routes_met(path);
        let routes = met
            .iter()
            .filter_map(|&index| Some((index, self.routes.get(index)?)))
            .filter(|(_, route)| route.methods.counts(method));
        let mut checks = Vec::with_capacity(1 + met.len());
        // The subject's check first; its key is moved in once the route keys
        // that contain it are built (no copy of it per request).
        checks.push(Check {
            limit: subject.limit(),
            key: String::new(),
            backend: self.subject_backends[subject_index],
            policy: PolicyId(subject_index as u32),
            shadow: self.subject_shadow[subject_index],
            slot: Slot::NotAsked,
            settled: None,
        });
        for (index, route) in routes {
            checks.push(Check {
                limit: route.limit,
                key: keys::route(&route.name, &subject_key),
                backend: route.backend,
                policy: PolicyId::route(index),
                shadow: route.shadow,
                slot: Slot::NotAsked,
                settled: None,
            });
        }
        checks[0].key = subject_key;
        Ok(checks)
    }
}

impl fmt::Debug for Limiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Limiter")
            .field("counting", &self.rules.counting)
            .field("backends", &self.backends)
            .field("tracked_keys", &self.memory.tracked_keys())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_requests_path_is_read_off_its_url_as_url_pathname_gives_it() {
        for (url, path) in [
            ("http://127.0.0.1:8787/api/search", "/api/search"),
            ("https://example.com/api/search?q=1&r=/x", "/api/search"),
            ("https://example.com/api/items#frag/ment", "/api/items"),
            (
                "https://user:p%2Fw@example.com:443/api/a%20b/",
                "/api/a%20b/",
            ),
            ("https://example.com", "/"),
            ("https://example.com?q=/api/", "/"),
            ("https://example.com#/api/", "/"),
            ("http://[2001:db8::1]:8080/health", "/health"),
        ] {
            assert_eq!(url_path(url), path, "{url}");
        }
    }

    proptest::proptest! {
        /// The byte scan cuts where a search for the delimiters cuts, on any
        /// string (multi-byte characters included).
        #[test]
        fn a_urls_path_is_cut_where_a_search_for_its_delimiters_cuts(
            url in "(https?://[a-z.]{0,6})?[a:/?#é%]{0,24}"
        ) {
            let rest = url.find("://").map_or(url.as_str(), |i| &url[i + 3..]);
            let path = rest.find(['/', '?', '#']).map_or("", |i| &rest[i..]);
            let path = path.find(['?', '#']).map_or(path, |i| &path[..i]);
            let expected = if path.is_empty() { "/" } else { path };
            proptest::prop_assert_eq!(url_path(&url), expected);
        }
    }
}
