//! The I/O half for native servers (the `native` feature; not for wasm32):
//! the same decisions as the Workers gate, through the sans-IO [`Limiter`],
//! counting in the process's memory, or in Redis when the deployable's store
//! is Redis (the `redis` feature: `redis`), with a
//! [`tower`](RateLimitLayer) layer so a hyper or axum service is limited in
//! one line.
//!
//! The address of a native request comes from where the deployable's
//! `client_address` says ([`AddressSource`]): the socket's peer by default
//! (on a native server any client can write `CF-Connecting-IP` or
//! `X-Forwarded-For`), `CF-Connecting-IP` from Cloudflare's own addresses
//! (and the deployable's tunnel or load balancer in front of it), or the
//! client the deployable's trusted proxies name in
//! `X-Forwarded-For`. A request whose address cannot be known is counted
//! under one key all such requests share, and logged once per process as
//! `rate_limits.address_unknown` (never with an address); one the server
//! handed no peer is a wiring mistake, answered 500 ([`RateLimitLayer`]).
//!
//! With the `axum` feature, the layer reads axum's `ConnectInfo` as the
//! peer and matches routes on axum's `OriginalUri` (the path before
//! `Router::nest` stripped its prefix).

#[cfg(feature = "metrics")]
pub mod metrics;
#[cfg(feature = "redis")]
pub(crate) mod redis;
#[cfg(feature = "redis")]
pub(crate) mod refused;
#[cfg(feature = "redis")]
pub(crate) mod scripts;

use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::net::SocketAddr;
use std::panic::Location;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

#[cfg(feature = "redis")]
use self::redis::RedisStore;
use crate::address::{
    AddressHeaders, AddressSource, AddressUnknown, CLOUDFLARE_IPV6_HEADER, ClientAddress,
    FORWARDED_FOR_HEADER, Resolved,
};
use crate::clock::Clock;
use crate::config::{Application, Counting};
use crate::limiter::{
    ADDRESS_HEADER, Check, FallbackLog, Limiter, PathTooLong, Refusal, Rules, ShadowLog,
    UnknownDeployable,
};
use crate::subject::CallerId;
use crate::subject::Subject;

/// Why a native gate could not be built from the application description:
/// the description, the deployable's name, or a store this build cannot
/// reach. Nothing else fails it (a Redis down at startup is a fallback).
/// Its `Debug` is its `Display` (`CODE: FILE:line:col: message` lines for a
/// description read by [`NativeGate::from_file`]), so a `main` returning it
/// with `?` prints what to fix.
#[derive(thiserror::Error)]
pub enum NativeGateError {
    /// The application description did not validate.
    #[error(transparent)]
    Invalid(#[from] crate::config::Diagnostics),
    /// The application description's file could not be read, or did not
    /// validate: its errors name the file.
    #[error(transparent)]
    File(#[from] crate::config::FileError),
    /// The application has no deployable of that name.
    #[error(transparent)]
    UnknownDeployable(#[from] UnknownDeployable),
    /// The deployable counts in Redis, and this build of `runtime` has no
    /// Redis store: enable its `redis` feature.
    #[error(
        "the deployable counts in Redis (connection `{connection}`), and runtime was built \
         without its `redis` feature"
    )]
    RedisNotBuilt {
        /// The Redis connection the deployable's store names.
        connection: String,
    },
}

impl std::fmt::Debug for NativeGateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

/// The deployable's Redis store could not be reached by
/// [`NativeGate::connect`]: the server may say so at startup; requests are
/// counted in memory until it answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "the rate limits' Redis store could not be reached ({reason}); counting in memory until it answers"
)]
pub struct StoreUnreachable {
    /// Why, as the `rate_limits.fallback` line would say: `missing`,
    /// `failed` or `timed_out`.
    pub reason: &'static str,
}

/// A request the server handed no socket peer, on a deployable whose client
/// address needs one: a wiring mistake only the server's code can fix. Its
/// `Display` says what to change; the layer's 500 says it too (`fix`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "the server hands the rate limit layer no peer address: serve the router with \
     into_make_service_with_connect_info::<SocketAddr>() (axum, runtime's `axum` feature), \
     or insert runtime::native::PeerAddr into each request"
)]
pub struct NoPeerAddress;

/// One process's limiter for one native deployable. Share it (`Arc`) among
/// the server's tasks for the process's life: its memory is the fallback
/// count and its Redis connection is the shared one.
///
/// Its one lock covers only the counting: a request's checks (its path
/// made canonical, the route it meets, its keys) are made from the
/// deployable's [`Rules`], outside the lock ([`NativeGate::checks`]).
#[derive(Debug)]
pub struct NativeGate {
    /// What the deployable limits: read by every request with no lock.
    rules: Arc<Rules>,
    /// The counts, cool-offs and fallback lines: what requests share.
    limiter: Mutex<Limiter>,
    #[cfg(feature = "redis")]
    store: Option<RedisStore>,
    addresses: AddressSource,
    clock: Clock,
    /// Whether `rate_limits.address_unknown` was written yet: once per process.
    address_unknown_logged: AtomicBool,
    /// Whether `rate_limits.peer_not_cloudflare` was written yet: once per process.
    peer_not_cloudflare_logged: AtomicBool,
    /// The deployable's name, as metrics label it.
    #[cfg(feature = "metrics")]
    deployable: String,
    /// The gate's series, registered on its first decision.
    #[cfg(feature = "metrics")]
    metrics: std::sync::OnceLock<self::metrics::GateMetrics>,
    /// A test's hook, run by [`NativeGate::decide`] between making a
    /// request's checks and locking the counts (`unstable_for_tools`).
    checks_made: std::sync::OnceLock<ChecksMade>,
}

/// A test's hook, given a request's path length: where
/// [`NativeGate::decide`] has made the request's checks and holds no lock.
struct ChecksMade(Box<dyn Fn(usize) + Send + Sync>);

impl std::fmt::Debug for ChecksMade {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ChecksMade(..)")
    }
}

impl NativeGate {
    /// The gate for `deployable` of `app`, taking client addresses from
    /// where the deployable's `client_address` says. Nothing connects yet:
    /// a server starts while Redis is down, and its first request connects
    /// (or [`NativeGate::connect`], called before serving).
    /// A deployable counting in Redis needs the `redis` feature
    /// ([`NativeGateError::RedisNotBuilt`] without it).
    pub fn new(app: &Application, deployable: &str) -> Result<NativeGate, NativeGateError> {
        let addresses = app
            .deployable(deployable)
            .ok_or_else(|| UnknownDeployable(deployable.to_owned()))?
            .client_address
            .clone();
        let random = std::collections::hash_map::RandomState::new();
        let seed = u128::from(random.build_hasher().finish()) << 64
            | u128::from(random.hash_one(std::process::id()));
        let limiter = Limiter::new(app, deployable, seed)?;
        #[cfg(feature = "redis")]
        let store = match limiter.counting() {
            // A validated description names the application where it counts
            // in Redis; one built by hand without a name counts under `rl::`.
            Counting::Redis { endpoint, .. } => Some(RedisStore::new(
                endpoint,
                app.name.as_deref().unwrap_or_default(),
            )),
            Counting::Binding { .. } | Counting::InMemory | Counting::NoApi => None,
        };
        #[cfg(not(feature = "redis"))]
        if let Counting::Redis { connection, .. } = limiter.counting() {
            return Err(NativeGateError::RedisNotBuilt {
                connection: connection.clone(),
            });
        }
        Ok(NativeGate {
            rules: limiter.rules().clone(),
            limiter: Mutex::new(limiter),
            #[cfg(feature = "redis")]
            store,
            addresses,
            clock: Clock::default(),
            address_unknown_logged: AtomicBool::new(false),
            peer_not_cloudflare_logged: AtomicBool::new(false),
            #[cfg(feature = "metrics")]
            deployable: deployable.to_owned(),
            #[cfg(feature = "metrics")]
            metrics: std::sync::OnceLock::new(),
            checks_made: std::sync::OnceLock::new(),
        })
    }

    /// The gate from an application description's text: every diagnostic
    /// of the description (a bad trusted proxy's network among them, with
    /// its place) is a [`NativeGateError::Invalid`] at startup.
    pub fn from_toml(
        application_toml: &str,
        deployable: &str,
    ) -> Result<NativeGate, NativeGateError> {
        let app = Application::from_toml(application_toml)?;
        NativeGate::new(&app, deployable)
    }

    /// The gate from the application description in `file` (a path):
    /// every diagnostic is a [`NativeGateError::File`] naming the file, one
    /// `CODE: FILE:line:col: message` line each.
    pub fn from_file(
        file: impl AsRef<std::path::Path>,
        deployable: &str,
    ) -> Result<NativeGate, NativeGateError> {
        let app = Application::from_file(file)?;
        NativeGate::new(&app, deployable)
    }

    fn limiter(&self) -> MutexGuard<'_, Limiter> {
        // Every update of the limiter completes under the lock; a panic cannot tear one.
        self.limiter.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The gate's series, registered with the recorder installed now on
    /// first use (`limiter` is the gate's, locked by the caller).
    #[cfg(feature = "metrics")]
    fn metrics(&self, limiter: &Limiter) -> &self::metrics::GateMetrics {
        self.metrics
            .get_or_init(|| self::metrics::GateMetrics::register(limiter, &self.deployable))
    }

    /// The same where the caller holds no lock: the limiter is locked only
    /// to register the series, the first time.
    #[cfg(feature = "metrics")]
    fn metrics_unlocked(&self) -> &self::metrics::GateMetrics {
        match self.metrics.get() {
            Some(metrics) => metrics,
            None => self.metrics(&self.limiter()),
        }
    }

    /// The clock this gate counts windows on.
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// The subject of a request: the signed-in caller, else the client's
    /// address from where the deployable's `client_address` says
    /// ([`AddressSource`]), given the socket's `peer` and the request's
    /// `headers`. An address that cannot be known (a proxy that sent no
    /// `X-Forwarded-For`, a missing `CF-Connecting-IP`) is counted under the
    /// one key such requests share, and logged once per process as
    /// `rate_limits.address_unknown`; a request without the peer its source
    /// needs is [`NoPeerAddress`] (logged likewise), for the server to answer 500.
    pub fn subject(
        &self,
        caller_id: Option<&str>,
        peer: Option<SocketAddr>,
        headers: &http::HeaderMap,
    ) -> Result<Subject, NoPeerAddress> {
        self.subject_from(caller_id, peer, headers, None)
    }

    /// [`NativeGate::subject`], naming in its log line where the layer that
    /// asked was built.
    fn subject_from(
        &self,
        caller_id: Option<&str>,
        peer: Option<SocketAddr>,
        headers: &http::HeaderMap,
        layer: Option<&'static Location<'static>>,
    ) -> Result<Subject, NoPeerAddress> {
        if let Some(caller) = Subject::signed_in(caller_id) {
            return Ok(caller);
        }
        let header = |name: &str| headers.get(name).map(http::HeaderValue::as_bytes);
        let forwarded_for: Vec<&[u8]> = match self.addresses {
            AddressSource::TrustedProxies(_) => headers
                .get_all(FORWARDED_FOR_HEADER)
                .iter()
                .map(http::HeaderValue::as_bytes)
                .collect(),
            AddressSource::Peer | AddressSource::CloudflareHeader(_) => Vec::new(),
        };
        let read = AddressHeaders {
            cf_connecting_ip: header(ADDRESS_HEADER),
            cf_connecting_ipv6: header(CLOUDFLARE_IPV6_HEADER),
            forwarded_for: &forwarded_for,
        };
        let peer = peer.map(|p| p.ip());
        match self.addresses.resolve(peer, &read) {
            Ok(Resolved::Address(address)) => Ok(Subject::Address(address)),
            Ok(Resolved::PeerNotCloudflare(address)) => {
                self.log_once(
                    &self.peer_not_cloudflare_logged,
                    Resolved::PEER_NOT_CLOUDFLARE,
                    "peer_not_cloudflare",
                    layer,
                );
                Ok(Subject::Address(address))
            }
            Err(reason) => {
                #[cfg(feature = "metrics")]
                self.metrics_unlocked().address_unknown(reason);
                self.log_once(
                    &self.address_unknown_logged,
                    AddressUnknown::EVENT,
                    reason.as_str(),
                    layer,
                );
                match reason {
                    AddressUnknown::NoPeer => Err(NoPeerAddress),
                    AddressUnknown::NoForwardedFor
                    | AddressUnknown::ForwardedForInvalid
                    | AddressUnknown::NoCloudflareHeader => {
                        Ok(Subject::Address(ClientAddress::Unknown))
                    }
                }
            }
        }
    }

    /// Writes one of the process's address events (`rate_limits.address_unknown`,
    /// `rate_limits.peer_not_cloudflare`) the first time it happens: the
    /// source, the reason and where the layer was built, never an address.
    /// A server handing no peer is a wiring mistake, logged as an error
    /// with what to change (`fix`).
    fn log_once(
        &self,
        logged: &AtomicBool,
        event: &'static str,
        reason: &'static str,
        layer: Option<&'static Location<'static>>,
    ) {
        if logged.swap(true, Ordering::Relaxed) {
            return;
        }
        let source = self.addresses.name();
        let layer = layer.map(tracing::field::display);
        if reason == AddressUnknown::NoPeer.as_str() {
            tracing::error!(event, source, reason, layer, fix = %NoPeerAddress, "{event}");
        } else {
            tracing::warn!(event, source, reason, layer, "{event}");
        }
    }

    /// Decides one request to `path` with `method` (as the server read it,
    /// `request.method().as_str()`: a route's limit may count some methods
    /// only): `Ok` to pass, `Err` with the 429 to
    /// send (or the 414 of a path longer than
    /// [`crate::limiter::MAX_PATH_BYTES`], counted nowhere). Never fails for
    /// the store's sake: Redis trouble counts in memory.
    ///
    /// The request's checks are made first, with no lock held
    /// ([`NativeGate::checks`]); the lock is taken only to count them.
    pub async fn decide(&self, subject: &Subject, method: &str, path: &str) -> Result<(), Refusal> {
        let Ok(checks) = self.checks(subject, method, path) else {
            #[cfg(feature = "metrics")]
            self.metrics_unlocked().path_too_long();
            return Err(Refusal::path_too_long());
        };
        if let Some(hook) = self.checks_made.get() {
            (hook.0)(path.len());
        }
        self.decide_checks(checks).await
    }

    /// The checks of a request from `subject` to `path` with `method` ([`Rules::checks`]):
    /// its path made canonical, the route it meets and its keys, made from
    /// the deployable's rules alone, so with no lock held and nothing
    /// counted. A path longer than [`crate::limiter::MAX_PATH_BYTES`] is
    /// refused unread.
    pub fn checks(
        &self,
        subject: &Subject,
        method: &str,
        path: &str,
    ) -> Result<Vec<Check>, PathTooLong> {
        self.rules.checks(subject, method, path)
    }

    /// Decides a request by its `checks` ([`NativeGate::checks`]): the
    /// limiter is locked to say which to ask (when any has a backend) and,
    /// once Redis answered, to count them; nothing of the request is read under the lock but its
    /// keys.
    pub async fn decide_checks(&self, checks: Vec<Check>) -> Result<(), Refusal> {
        let reading = self.clock.read();
        let now = self.clock.now_of(reading);
        // The limiter's cool-off says which to ask: a troubled Redis costs
        // one wait. Checks with no backend ask nobody, and take no lock to
        // learn it: a request counted in memory locks the counts once.
        let pending = if checks.iter().any(|check| check.backend().is_some()) {
            self.limiter().asks(checks, now)
        } else {
            crate::limiter::Pending::unasked(checks)
        };
        #[cfg(feature = "redis")]
        let (pending, now) = self.ask_redis(pending, reading, now).await;
        let decision = {
            let mut limiter = self.limiter();
            let decision = limiter.conclude(pending, now);
            #[cfg(feature = "metrics")]
            self.metrics(&limiter).record(&limiter, &decision);
            decision
        };
        for log in &decision.logs {
            log_fallback(log);
        }
        for log in &decision.shadow_logs {
            log_shadow_refusal(log);
        }
        match decision.refusal {
            Some(refusal) => Err(refusal),
            None => Ok(()),
        }
    }

    /// Runs `hook` in every [`NativeGate::decide`] once the request's checks
    /// are made, before the counts are locked, with the path's length: for
    /// tests that hold a request there. Set once; a second hook is dropped.
    pub(crate) fn on_checks_made(&self, hook: impl Fn(usize) + Send + Sync + 'static) {
        let _ = self.checks_made.set(ChecksMade(Box::new(hook)));
    }

    /// Locks the gate's counts until the guard is dropped: for tests that
    /// prove what runs without the lock.
    pub(crate) fn lock_counts(&self) -> impl Drop + '_ {
        self.limiter()
    }

    /// Asks Redis what `pending` asks (nothing without a Redis store), and
    /// the time after it answered (`now`, read at `reading`, when no round
    /// trip was made).
    #[cfg(feature = "redis")]
    async fn ask_redis(
        &self,
        mut pending: crate::limiter::Pending,
        reading: crate::clock::Reading,
        now: crate::limiter::Now,
    ) -> (crate::limiter::Pending, crate::limiter::Now) {
        match &self.store {
            Some(store) => {
                let asked = store.ask(&mut pending, &self.clock, reading).await;
                #[cfg(feature = "metrics")]
                if let Some(took) = asked.round_trip {
                    self.metrics_unlocked()
                        .round_trip(crate::backend::BackendId::new(0), took);
                }
                (pending, asked.now)
            }
            None => (pending, now),
        }
    }

    /// Connects the deployable's Redis store now, within the 500 ms
    /// deadline, so that the first request does not pay for the connection
    /// (a TLS handshake, a cluster's slot map): call it before serving.
    /// Without it the first request connects. A failure is the server's to
    /// report (it names no URL, no secret); the gate logs nothing for it,
    /// and the first request dials again and decides as usual.
    pub async fn connect(&self) -> Result<(), StoreUnreachable> {
        #[cfg(feature = "redis")]
        if let Some(store) = &self.store {
            return store.connect().await.map_err(|reason| StoreUnreachable {
                reason: reason.as_str(),
            });
        }
        Ok(())
    }

    /// How many times this gate dialled Redis (connections attempted, a
    /// cluster's counted once), for tests of the dial rate.
    pub(crate) fn redis_dials(&self) -> u64 {
        #[cfg(feature = "redis")]
        if let Some(store) = &self.store {
            return store.dials();
        }
        0
    }

    /// How this deployable counts.
    pub fn counting(&self) -> Counting {
        self.rules.counting().clone()
    }

    /// Whether this deployable serves an API.
    pub fn serves_api(&self) -> bool {
        *self.rules.counting() != Counting::NoApi
    }
}

/// Writes one `rate_limits.fallback` event through `tracing`: the connection
/// and the reason, never a key.
fn log_fallback(log: &FallbackLog) {
    tracing::warn!(
        event = FallbackLog::EVENT,
        connection = %log.backend,
        reason = log.reason.as_str(),
        "{}",
        FallbackLog::EVENT
    );
}

/// The first request a shadow limit would have refused in this process:
/// one line per limit, named by its policy name, never a key.
fn log_shadow_refusal(log: &ShadowLog) {
    tracing::warn!(
        event = ShadowLog::EVENT,
        limit = %log.limit,
        "{}",
        ShadowLog::EVENT
    );
}

/// The 500 for a request the server handed no peer ([`NoPeerAddress`]): its
/// body names the event logged and what to change in the server (`fix`),
/// where whoever tries the server first sees it, with or without a log
/// subscriber. It names no address and no key.
fn no_peer_response<B: From<String>>() -> http::Response<B> {
    let body = serde_json::json!({
        "error": AddressUnknown::EVENT,
        "reason": AddressUnknown::NoPeer.as_str(),
        "fix": NoPeerAddress.to_string(),
    })
    .to_string();
    let mut response = http::Response::new(B::from(body));
    *response.status_mut() = http::StatusCode::INTERNAL_SERVER_ERROR;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

/// The socket peer of a request, as a request extension: the server inserts
/// it per connection, and [`RateLimitLayer`] reads it (with the `axum`
/// feature, axum's `ConnectInfo<SocketAddr>` does as well). It is a key, so
/// its `Debug` leaves the address out.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct PeerAddr(pub SocketAddr);

impl std::fmt::Debug for PeerAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PeerAddr(..)")
    }
}

/// The socket peer of a request: [`PeerAddr`], or axum's `ConnectInfo`.
fn peer_of<B>(request: &http::Request<B>) -> Option<SocketAddr> {
    let extensions = request.extensions();
    let peer = extensions.get::<PeerAddr>().map(|p| p.0);
    #[cfg(feature = "axum")]
    let peer = peer.or_else(|| {
        extensions
            .get::<axum::extract::ConnectInfo<SocketAddr>>()
            .map(|c| c.0)
    });
    peer
}

/// The path a request is limited under: its path as the client sent it
/// (with the `axum` feature, axum's `OriginalUri`, so a route limit on
/// `/api/search` matches inside a router nested at `/api`), else the URI's.
fn limited_path<B>(request: &http::Request<B>) -> &str {
    #[cfg(feature = "axum")]
    if let Some(original) = request.extensions().get::<axum::extract::OriginalUri>() {
        return original.0.path();
    }
    request.uri().path()
}

/// A `tower` layer limiting every request of the service it wraps:
/// `router.layer(RateLimitLayer::new(gate))`. Wrap the API routes only
/// (health checks are not limited). The server hands each request its
/// socket peer ([`PeerAddr`]; axum's `ConnectInfo` with the `axum`
/// feature): a request without one, on a deployable whose client address
/// needs it, is answered 500 and logged once as `rate_limits.address_unknown`,
/// naming the file and line where this layer was built, rather than counted
/// with every other such request under one key.
#[derive(Debug, Clone)]
pub struct RateLimitLayer {
    gate: Arc<NativeGate>,
    built_at: &'static Location<'static>,
}

impl RateLimitLayer {
    /// The layer deciding through `gate` (its place in the code is kept for
    /// the log line of a request without a peer).
    #[track_caller]
    pub fn new(gate: Arc<NativeGate>) -> RateLimitLayer {
        RateLimitLayer {
            gate,
            built_at: Location::caller(),
        }
    }
}

impl<S> tower_layer::Layer<S> for RateLimitLayer {
    type Service = RateLimited<S>;

    fn layer(&self, inner: S) -> RateLimited<S> {
        RateLimited {
            gate: self.gate.clone(),
            built_at: self.built_at,
            inner,
        }
    }
}

/// A service limited by [`RateLimitLayer`]: a refused request gets the 429
/// and never reaches the inner service.
#[derive(Debug, Clone)]
pub struct RateLimited<S> {
    gate: Arc<NativeGate>,
    built_at: &'static Location<'static>,
    inner: S,
}

impl<S, B, R> tower_service::Service<http::Request<B>> for RateLimited<S>
where
    S: tower_service::Service<http::Request<B>, Response = http::Response<R>>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
    R: From<String> + 'static,
{
    type Response = http::Response<R>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<http::Response<R>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        // The inner service that was polled ready is the one that is called.
        let ready = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, ready);
        let gate = self.gate.clone();
        let built_at = self.built_at;
        Box::pin(async move {
            let caller = request.extensions().get::<CallerId>().map(|c| c.0.as_str());
            let subject =
                gate.subject_from(caller, peer_of(&request), request.headers(), Some(built_at));
            let Ok(subject) = subject else {
                return Ok(no_peer_response());
            };
            match gate
                .decide(&subject, request.method().as_str(), limited_path(&request))
                .await
            {
                Ok(()) => inner.call(request).await,
                Err(refusal) => Ok(refusal.to_http()),
            }
        })
    }
}
