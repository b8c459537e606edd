#![doc = include_str!("../../docs/runtime.md")]
#![warn(unreachable_pub)]
//!
//! ## The modules
//!
//! Build time: [`config`] validates the application's rate-limit settings
//! (with stable diagnostic codes), [`bindings`] turns its limits into
//! Cloudflare bindings and Wrangler entries, and [`gate_plan`] writes what
//! one deployable's gate needs, so a Worker builds it without the
//! description's parser. Request time: [`limiter`] decides each request
//! without doing I/O, matching its path in [`routes`]. The I/O layers: on
//! wasm32, `workers` asks Cloudflare's bindings inside workerd (and, with
//! the `workers-rs` feature, gives the gate to workers-rs Workers and axum
//! on Workers); with the `native` feature, `native` limits a tokio server
//! (and with `redis`, counts in Redis). The items a framework names most
//! are re-exported here, grouped as the sections above present them. Each
//! module's own documentation says the rest.

#[cfg(all(feature = "native", target_arch = "wasm32"))]
compile_error!(
    "runtime's `native` and `redis` features are for native servers; a Worker (wasm32) needs \
     neither: its gate, `runtime::workers`, comes with the target"
);

#[cfg(all(feature = "workers-rs", not(target_arch = "wasm32")))]
compile_error!(
    "runtime's `workers-rs` feature is for a Worker (wasm32): enable it in the Worker's \
     `[target.'cfg(target_arch = \"wasm32\")'.dependencies]`"
);

// The product's modules: a framework engineer's API (docs/runtime.md lists
// every public item; `runtime/public-api.txt` is the checked list).
pub mod bindings;
pub mod config;
pub mod gate_plan;
pub mod limiter;
#[cfg(feature = "native")]
pub mod native;
pub mod routes;
#[cfg(target_arch = "wasm32")]
pub mod workers;

// How it is built: private, their few public items re-exported above or
// below, the rest reached by the harness through `unstable_for_tools`.
mod address;
mod backend;
mod breaker;
mod clock;
mod counter;
mod keys;
mod limits;
mod names;
#[cfg(any(target_arch = "wasm32", test))]
mod parked;
mod subject;
#[cfg(feature = "testing")]
mod testing;
#[cfg(any(target_arch = "wasm32", test))]
mod wire;
#[cfg(all(feature = "workers-rs", target_arch = "wasm32"))]
mod workers_rs;

// Validating an application description.
pub use config::{Application, Code, Diagnostic, Diagnostics, FileError, Location};
// The bindings, one per limit, and their Wrangler entries.
pub use bindings::{Binding, Bindings, DatasetEntry, WranglerEntry};
pub use limits::{Limit, Methods};
// A deployable's gate, planned at build time.
pub use gate_plan::{GatePlan, PlanError};
// Whom a request is counted for, and from where its address is read.
pub use address::{AddressSource, ClientAddress};
pub use subject::{CallerId, Subject};
// The decision, with no I/O inside, and the clock a gate reads.
pub use clock::Clock;
pub use limiter::{Decision, Limiter, Now, Refusal};
// The gates: the native gate and its tower layer, the Workers gate.
#[cfg(feature = "native")]
pub use native::{NativeGate, NativeGateError};
#[cfg(target_arch = "wasm32")]
pub use workers::{WorkersGate, WorkersGateError};

/// Not API: what the project's own tools (the conformance harness, the
/// benchmarks, the fuzz targets, `runtime`'s integration tests) reach
/// beyond the public API, to drive and measure the limiter's parts one by
/// one. Nothing here is stable; it changes with any release, and a
/// framework never needs it (docs/runtime.md lists what a framework does).
#[doc(hidden)]
pub mod unstable_for_tools {
    // Each item named: what a tool uses, nothing more (rustc's
    // `unreachable_pub` then finds every other `pub` left in the private
    // modules).

    /// The client's address, from the socket's peer or the proxies' headers.
    pub mod address {
        pub use crate::address::{
            AddressHeaders, AddressSource, AddressUnknown, CLOUDFLARE_IPV6_HEADER,
            CLOUDFLARE_RANGES_FILE, ClientAddress, CloudflarePeers, FORWARDED_FOR_HEADER,
            MAX_ADDRESS_BYTES, MAX_FORWARDED_HOPS, Resolved, TrustedProxies, cloudflare_ranges,
        };
    }
    /// The deadline and a backend's answer.
    pub mod backend {
        pub use crate::backend::{DEADLINE_MS, FallbackReason};
    }
    /// A backend's cool-off and probe.
    pub mod breaker {
        pub use crate::breaker::{
            BackendState, Breaker, COOL_OFF_MS, Outcome, PROBE_LEASE_MS, Route,
        };
    }
    /// The in-memory counter and its memory bound.
    pub mod counter {
        pub use crate::counter::{
            BUILT_IN_FLOOD_KEYS, DEFAULT_MAX_KEYS, DEFAULT_MEMORY_BUDGET, MIN_ROUTE_FLOOD_KEYS,
            MemoryBound, ROUTE_FLOOD_KEYS, Verdict, WORKERS_MEMORY_BUDGET, WindowCounter,
        };
    }
    /// The keys a request is counted under.
    pub mod keys {
        pub use crate::keys::{MAX_CALLER_ID_BYTES, subject};
        #[cfg(feature = "redis")]
        pub use crate::keys::{redis_key, redis_tag};
    }
    /// The built-in limits.
    pub mod limits {
        pub use crate::limits::{ADDRESS_LIMIT, CALLER_LIMIT, Limit};
    }
    /// The bindings' names.
    pub mod names {
        pub use crate::names::{binding_name, is_binding_name_of};
    }
    /// A native gate's hooks for the project's tests and benchmarks, which
    /// hold a request where its checks are made, lock the counts, and count
    /// the gate's dials to Redis.
    #[cfg(feature = "native")]
    pub mod native {
        use crate::NativeGate;

        /// Runs `hook` in every `NativeGate::decide` once the request's
        /// checks are made, before the counts are locked, with the path's
        /// length. Set once; a second hook is dropped.
        pub fn on_checks_made(gate: &NativeGate, hook: impl Fn(usize) + Send + Sync + 'static) {
            gate.on_checks_made(hook);
        }

        /// Locks `gate`'s counts until the guard is dropped.
        pub fn lock_counts(gate: &NativeGate) -> impl Drop + '_ {
            gate.lock_counts()
        }

        /// How many times `gate` dialled Redis (a cluster's dial counted once).
        pub fn redis_dials(gate: &NativeGate) -> u64 {
            gate.redis_dials()
        }
    }
    /// The Redis store and the refused-key cache.
    #[cfg(feature = "redis")]
    pub mod redis {
        pub use crate::native::redis::RedisStore;
        pub use crate::native::refused::RefusedCache;
        pub use crate::native::scripts::COUNT_ALL;
    }
    /// The harness's Worker fixtures' hooks (the `testing` feature).
    #[cfg(feature = "testing")]
    pub mod testing {
        pub use crate::testing::{HealthReport, health_report, tally_refused};
        #[cfg(target_arch = "wasm32")]
        pub use crate::testing::{limiting_off, set_clock_offset_ms};
    }
}
