//! The I/O half for native servers (the `native` feature; not for wasm32):
//! the same decisions as the Workers gate, through the sans-IO [`Limiter`],
//! counting in the process's memory, or in Redis when the deployable's store
//! is Redis (the `redis` feature: `redis`), with a
//! [`tower`](RateLimitLayer) layer so a hyper or axum service is limited in
//! one line.
//!
//! The address of a native request is the socket's peer
//! ([`AddressSource::Peer`]): on a native server any client can write
//! `CF-Connecting-IP`, so that header is read only when the deployable is
//! configured as behind Cloudflare ([`AddressSource::CloudflareHeader`]).

#[cfg(feature = "redis")]
pub mod redis;
#[cfg(feature = "redis")]
pub mod refused;
#[cfg(feature = "redis")]
pub mod scripts;

use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{SystemTime, UNIX_EPOCH};

#[cfg(feature = "redis")]
use self::redis::RedisStore;
use crate::config::{Application, Counting};
pub use crate::limiter::GateError;
use crate::limiter::{ADDRESS_HEADER, FallbackLog, Limiter, Refusal, Tally};
use crate::subject::Subject;

/// Where a native request's address comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressSource {
    /// The socket's peer: the only source a client cannot forge on a server it reaches directly.
    Peer,
    /// `CF-Connecting-IP`: only for a server every request reaches through
    /// Cloudflare (anyone reaching it directly could write the header).
    CloudflareHeader,
}

/// The instance's clock: wall time plus an offset (zero in production; the
/// harness's scenario clock shifts it, with the `testing` feature). Windows,
/// the Redis keys and the fallback counter all read it, so they agree on
/// which window is running.
#[derive(Debug, Default)]
pub struct Clock {
    offset_ms: AtomicI64,
}

impl Clock {
    /// Milliseconds since the Unix epoch, shifted by the offset.
    pub fn now_ms(&self) -> u64 {
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        wall.saturating_add_signed(self.offset_ms.load(Ordering::Relaxed))
    }

    /// Shifts the clock by `offset_ms` from wall time: a test hook (the
    /// harness's scenario clock), so only with the `testing` feature.
    #[cfg(any(test, feature = "testing"))]
    pub fn set_offset_ms(&self, offset_ms: i64) {
        self.offset_ms.store(offset_ms, Ordering::Relaxed);
    }
}

/// One process's limiter for one native deployable. Share it (`Arc`) among
/// the server's tasks for the process's life: its memory is the fallback
/// count and its Redis connection is the shared one.
#[derive(Debug)]
pub struct NativeGate {
    limiter: Mutex<Limiter>,
    #[cfg(feature = "redis")]
    store: Option<RedisStore>,
    addresses: AddressSource,
    clock: Clock,
}

impl NativeGate {
    /// The gate for `deployable` of `app`. Nothing connects yet: a server
    /// starts while Redis is down, and its first request connects. A
    /// deployable counting in Redis needs the `redis` feature
    /// ([`GateError::RedisNotBuilt`] without it).
    pub fn new(
        app: &Application,
        deployable: &str,
        addresses: AddressSource,
    ) -> Result<NativeGate, GateError> {
        let random = std::collections::hash_map::RandomState::new();
        let seed = u128::from(random.build_hasher().finish()) << 64
            | u128::from(random.hash_one(std::process::id()));
        let limiter = Limiter::new(app, deployable, seed)?;
        #[cfg(feature = "redis")]
        let store = match limiter.counting() {
            Counting::Redis { endpoint, .. } => Some(RedisStore::new(endpoint)),
            Counting::Binding { .. } | Counting::InMemory | Counting::NoApi => None,
        };
        #[cfg(not(feature = "redis"))]
        if let Counting::Redis { connection, .. } = limiter.counting() {
            return Err(GateError::RedisNotBuilt {
                connection: connection.clone(),
            });
        }
        Ok(NativeGate {
            limiter: Mutex::new(limiter),
            #[cfg(feature = "redis")]
            store,
            addresses,
            clock: Clock::default(),
        })
    }

    /// The gate from an application description's text.
    pub fn from_toml(
        application_toml: &str,
        deployable: &str,
        addresses: AddressSource,
    ) -> Result<NativeGate, GateError> {
        let app = Application::from_toml(application_toml)?;
        NativeGate::new(&app, deployable, addresses)
    }

    fn limiter(&self) -> MutexGuard<'_, Limiter> {
        // Every update of the limiter completes under the lock; a panic cannot tear one.
        self.limiter.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The clock this gate counts windows on.
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// The subject of a request: the signed-in caller, else the address
    /// (the peer's, or `CF-Connecting-IP` behind Cloudflare; see [`AddressSource`]).
    pub fn subject(
        &self,
        caller_id: Option<&str>,
        peer: Option<SocketAddr>,
        headers: &http::HeaderMap,
    ) -> Subject {
        match self.addresses {
            AddressSource::Peer => {
                let peer = peer.map(|p| p.ip().to_string());
                Subject::of_request(caller_id, peer.as_deref())
            }
            AddressSource::CloudflareHeader => {
                let header = headers.get(ADDRESS_HEADER).and_then(|v| v.to_str().ok());
                Subject::of_request(caller_id, header)
            }
        }
    }

    /// Decides one request to `path`: `Ok` to pass, `Err` with the 429 to
    /// send. Never fails for the store's sake: Redis trouble counts in memory.
    pub async fn decide(&self, subject: &Subject, path: &str) -> Result<(), Refusal> {
        let now_ms = self.clock.now_ms();
        let pending = {
            let mut limiter = self.limiter();
            let checks = limiter.checks(subject, path);
            // The limiter's cool-off says which to ask: a troubled Redis costs one wait.
            limiter.asks(checks, now_ms)
        };
        #[cfg(feature = "redis")]
        let (pending, now_ms) = self.ask_redis(pending, now_ms).await;
        let decision = self.limiter().conclude(pending, now_ms);
        for log in &decision.logs {
            log_fallback(log);
        }
        match decision.refusal {
            Some(refusal) => Err(refusal),
            None => Ok(()),
        }
    }

    /// Asks Redis what `pending` asks (nothing without a Redis store), and
    /// the time after it answered.
    #[cfg(feature = "redis")]
    async fn ask_redis(
        &self,
        mut pending: crate::limiter::Pending,
        now_ms: u64,
    ) -> (crate::limiter::Pending, u64) {
        match &self.store {
            Some(store) => {
                store.ask(&mut pending, &self.clock).await;
                (pending, self.clock.now_ms())
            }
            None => (pending, now_ms),
        }
    }

    /// How this deployable counts.
    pub fn counting(&self) -> Counting {
        self.limiter().counting().clone()
    }

    /// Whether this deployable serves an API.
    pub fn serves_api(&self) -> bool {
        *self.limiter().counting() != Counting::NoApi
    }

    /// Records a request refused for another reason (an API request to a deployable without one).
    pub fn record_refused(&self) {
        self.limiter().record_refused();
    }

    /// Records a health check and returns the tally its response reports.
    pub fn record_health_check(&self) -> Tally {
        self.limiter().record_health_check()
    }
}

/// Writes one `rate_limits.fallback` event through `tracing`: the connection
/// and the reason, never a key.
fn log_fallback(log: &FallbackLog) {
    tracing::warn!(
        event = FallbackLog::EVENT,
        connection = %log.store,
        reason = log.reason.as_str(),
        "{}",
        FallbackLog::EVENT
    );
}

/// The 429 response for a refusal, with `Retry-After` and `RateLimit-Policy`.
pub fn refusal_response<B: From<String>>(refusal: &Refusal) -> http::Response<B> {
    refusal.to_http()
}

/// The socket peer of a request, as a request extension: the server inserts
/// it per connection (axum: from `ConnectInfo`), and [`RateLimitLayer`] reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerAddr(pub SocketAddr);

/// The signed-in caller of a request, as a request extension inserted by the
/// application's sign-in before [`RateLimitLayer`] runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallerId(pub String);

/// A `tower` layer limiting every request of the service it wraps:
/// `router.layer(RateLimitLayer::new(gate))`. Wrap the API routes only
/// (health checks are not limited). A request without [`PeerAddr`] has no
/// address of its own and shares one count with every such request.
#[derive(Debug, Clone)]
pub struct RateLimitLayer {
    gate: Arc<NativeGate>,
}

impl RateLimitLayer {
    /// The layer deciding through `gate`.
    pub fn new(gate: Arc<NativeGate>) -> RateLimitLayer {
        RateLimitLayer { gate }
    }
}

impl<S> tower_layer::Layer<S> for RateLimitLayer {
    type Service = RateLimited<S>;

    fn layer(&self, inner: S) -> RateLimited<S> {
        RateLimited {
            gate: self.gate.clone(),
            inner,
        }
    }
}

/// A service limited by [`RateLimitLayer`]: a refused request gets the 429
/// and never reaches the inner service.
#[derive(Debug, Clone)]
pub struct RateLimited<S> {
    gate: Arc<NativeGate>,
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
        Box::pin(async move {
            let caller = request.extensions().get::<CallerId>().map(|c| c.0.clone());
            let peer = request.extensions().get::<PeerAddr>().map(|p| p.0);
            let subject = gate.subject(caller.as_deref(), peer, request.headers());
            match gate.decide(&subject, request.uri().path()).await {
                Ok(()) => inner.call(request).await,
                Err(refusal) => Ok(refusal_response(&refusal)),
            }
        })
    }
}
