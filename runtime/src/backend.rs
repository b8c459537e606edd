//! The backends a limiter asks (Cloudflare's bindings, or a Redis connection),
//! as the sans-IO [`crate::limiter`] and the I/O layers that ask them
//! ([`crate::breaker`] included) speak of them: a backend by its [`BackendId`],
//! the deadline it is given, and what it answered.

/// How long a backend is waited for before the request is counted in memory:
/// Cloudflare's binding on Workers, the whole Redis round trip (connecting
/// included) on a native server.
pub const DEADLINE_MS: u32 = 500;

/// A backend of one limiter, by its place in the limiter's table of backends
/// (Cloudflare's bindings in namespace order, or the one Redis connection):
/// a number the hot path copies where it would clone a name, and the index
/// of the backend's cool-off. Its name is [`crate::Limiter::backend_name`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BackendId(u32);

impl BackendId {
    /// The id of the backend at `index` in a limiter's table (only the limiter
    /// makes ids, so an id always names a backend of its limiter).
    pub(crate) fn new(index: usize) -> BackendId {
        BackendId(u32::try_from(index).unwrap_or(u32::MAX))
    }

    /// The backend's place in its limiter's table, as the Workers gate sends
    /// it to `ask-bindings.js` (an index into the binding names).
    #[doc(hidden)]
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Why a backend could not be asked, as logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FallbackReason {
    /// The Worker has no binding of that name, or Redis was never reached.
    Missing,
    /// The binding threw, rejected, or answered something other than `{ success: boolean }`;
    /// or Redis answered with an error.
    Failed,
    /// The backend did not answer within [`DEADLINE_MS`].
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

/// What the backend said for one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendAnswer {
    /// `{ success }` in time.
    Answered {
        /// Whether the request is within the limit.
        success: bool,
    },
    /// No usable answer: the request is counted in memory instead.
    Unavailable(FallbackReason),
    /// Refused from the backend's own cache of keys it refused earlier in
    /// their window: no round trip was made, so it is no news of the backend's
    /// health and moves no cool-off (a probe answered so is not a probe).
    Remembered,
}
