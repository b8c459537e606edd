//! The Workers gate in a Worker written with workers-rs (the `worker`
//! crate; the `workers-rs` feature, wasm32 only), re-exported from
//! [`crate::workers`]: [`WorkersGate::decide_async`] from an
//! `#[event(fetch)]` handler, with a `worker::Request` or (workers-rs's
//! `http` feature) an `http::Request`, and [`RateLimitLayer`], a tower layer
//! for axum on Workers.
//!
//! It is the one [`WorkersGate`]: the same decision, the same
//! fallback and 500 ms deadline, the same one log line per binding, the same
//! 429. The bindings are still asked from JavaScript (`ask-bindings.js`, the
//! fast path), not through `worker::RateLimiter`, whose every call goes
//! through `serde_wasm_bindgen` and a Rust future per binding; the handler's
//! future waits only when a binding has to be waited for. The deadline is
//! the isolate's own `setTimeout`, so no tokio timer is needed (tokio's panic
//! on wasm32) and the layer works under axum.
//!
//! `harness/workers/workers-rs` (the fetch handler) and
//! `harness/workers/axum` (the layer) are such Workers; docs/workers.md
//! shows both, and the scenario corpus runs against both.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use js_sys::futures::JsFuture;
use wasm_bindgen::{JsCast, JsValue};
use worker::send::{SendFuture, SendWrapper};

use crate::address::{CLOUDFLARE_IPV6_HEADER, ClientAddress};
use crate::limiter::{ADDRESS_HEADER, Refusal};
use crate::subject::{CallerId, Subject};
use crate::workers::{WorkersGate, subject_of};

/// A request the gate can limit: the path it is limited under, its method,
/// and its subject.
pub trait Limited {
    /// The path it is limited under: its URL's path.
    fn limited_path(&self) -> String;

    /// Its method, as the route limits that name methods read it.
    fn limited_method(&self) -> String;

    /// Who it is counted for: `caller_id` (the caller the application signed
    /// in), else the address in `CF-Connecting-IP`.
    fn subject(&self, caller_id: Option<&str>) -> Subject;
}

impl Limited for worker::Request {
    /// workers-rs read it from the URL when it made the request.
    fn limited_path(&self) -> String {
        self.path()
    }

    fn limited_method(&self) -> String {
        self.inner().method()
    }

    fn subject(&self, caller_id: Option<&str>) -> Subject {
        subject_of(&self.headers().0, caller_id)
    }
}

impl<B> Limited for http::Request<B> {
    fn limited_path(&self) -> String {
        self.uri().path().to_owned()
    }

    fn limited_method(&self) -> String {
        self.method().as_str().to_owned()
    }

    fn subject(&self, caller_id: Option<&str>) -> Subject {
        if let Some(caller) = Subject::signed_in(caller_id) {
            return caller;
        }
        let header = |name: &str| self.headers().get(name).and_then(|v| v.to_str().ok());
        Subject::Address(ClientAddress::from_cloudflare_header_then(
            header(ADDRESS_HEADER),
            || header(CLOUDFLARE_IPV6_HEADER).map(str::to_owned),
        ))
    }
}

/// A workers-rs Worker's error: the message.
impl From<crate::workers::WorkersGateError> for worker::Error {
    fn from(error: crate::workers::WorkersGateError) -> worker::Error {
        worker::Error::RustError(error.to_string())
    }
}

/// What [`crate::workers::start`] adds for a workers-rs Worker: the
/// adapter's own path run once on the throw-away gate, a `worker::Request`
/// made from a request (workers-rs parses its URL then) and
/// [`WorkersGate::decide_async`] on it, its binding missing from `env`, so
/// V8 compiles them there too and not on the first request. Ready at its
/// first poll, so no waker is needed.
pub(crate) fn warm_up_decide(gate: &WorkersGate) {
    let Ok(request) = web_sys::Request::new_with_str("https://warm-up.invalid/warm-up") else {
        return;
    };
    let request = worker::Request::from(request);
    let env: worker::Env = js_sys::Object::new().unchecked_into();
    let subject = request.subject(None);
    let path = request.limited_path();
    let method = request.limited_method();
    let decision = std::pin::pin!(gate.decide_async(&env, &subject, &method, &path));
    let _ = decision.poll(&mut Context::from_waker(Waker::noop()));
}

impl WorkersGate {
    /// Decides one request to `path` with `method` for `subject` (see
    /// [`Limited`] for a request's), asking the bindings of `env`, as [`WorkersGate::decide`]
    /// does with a future instead of a callback: `Ok` to pass it on, `Err`
    /// with the refusal to answer ([`crate::workers::refusal_response`], or
    /// [`Refusal::to_http`]). Never fails for the binding's sake: every
    /// binding problem falls back to memory. The future is ready at once
    /// unless a binding has to be waited for (at most the 500 ms deadline).
    /// The time is the gate's clock.
    pub async fn decide_async(
        &self,
        env: &worker::Env,
        subject: &Subject,
        method: &str,
        path: &str,
    ) -> Result<(), Refusal> {
        let verdict = Rc::new(Cell::new(None));
        let decided = verdict.clone();
        let outcome = self.decide(env.as_ref(), subject, method, path, move |result| {
            decided.set(Some(result));
            Ok(JsValue::UNDEFINED)
        });
        if let Ok(promise) = outcome
            && !promise.is_undefined()
        {
            // Settles once every asked binding answered or the deadline passed.
            let _ = JsFuture::from(promise.unchecked_into::<js_sys::Promise>()).await;
        }
        match verdict.take() {
            Some(verdict) => verdict,
            // No verdict: the gate could not even count in memory (no
            // randomness for its seed). As the wasm-bindgen gate's Worker
            // would see its error, the request is decided by the limits
            // alone in memory, never let through unchecked.
            None => self.decide_in_memory(env.as_ref(), subject, method, path),
        }
    }
}

/// A tower layer limiting every request of the service it wraps, for axum
/// on Workers: `router.layer(RateLimitLayer::new(gate, env))`, the router
/// built per request as workers-rs's axum support has it (the `env` is the
/// request's). Wrap the API routes only. A refused request gets the 429 and
/// never reaches the inner service.
#[derive(Clone)]
pub struct RateLimitLayer {
    gate: SendWrapper<Rc<WorkersGate>>,
    env: worker::Env,
}

impl RateLimitLayer {
    /// The layer deciding through `gate` (the isolate's), asking the bindings of `env`.
    pub fn new(gate: Rc<WorkersGate>, env: worker::Env) -> RateLimitLayer {
        RateLimitLayer {
            gate: SendWrapper::new(gate),
            env,
        }
    }
}

impl<S> tower_layer::Layer<S> for RateLimitLayer {
    type Service = RateLimited<S>;

    fn layer(&self, inner: S) -> RateLimited<S> {
        RateLimited {
            layer: self.clone(),
            inner,
        }
    }
}

/// A service limited by [`RateLimitLayer`].
#[derive(Clone)]
pub struct RateLimited<S> {
    layer: RateLimitLayer,
    inner: S,
}

/// The future of a [`RateLimited`] service: `Send`, as axum asks, since a
/// Worker runs on one thread.
pub type Limiting<R, E> = SendFuture<Pin<Box<dyn Future<Output = Result<R, E>>>>>;

impl<S, B, R> tower_service::Service<http::Request<B>> for RateLimited<S>
where
    S: tower_service::Service<http::Request<B>, Response = http::Response<R>> + Clone + 'static,
    B: 'static,
    R: From<String> + 'static,
{
    type Response = http::Response<R>;
    type Error = S::Error;
    type Future = Limiting<http::Response<R>, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        // The inner service that was polled ready is the one that is called.
        let ready = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, ready);
        let layer = self.layer.clone();
        SendFuture::new(Box::pin(async move {
            let caller = request.extensions().get::<CallerId>().map(|c| c.0.as_str());
            let subject = request.subject(caller);
            let verdict = layer
                .gate
                .0
                .decide_async(
                    &layer.env,
                    &subject,
                    &request.limited_method(),
                    &request.limited_path(),
                )
                .await;
            match verdict {
                Ok(()) => inner.call(request).await,
                Err(refusal) => Ok(refusal.to_http()),
            }
        }))
    }
}
