//! The validated description, as [`Application::from_toml`] returns it: an
//! [`Application`] of deployables, routes and the store, and how each
//! deployable counts ([`Counting`]). It holds valid settings only; the rules
//! that make it are in `validate/`.

use std::collections::BTreeSet;
use std::fmt;

use serde::Deserialize;

use crate::address::AddressSource;
use crate::limits::{BUILT_IN_LIMITS, Limit, Methods};

use super::Code;

/// The windows Cloudflare's binding can count, in seconds.
#[doc(hidden)]
pub const BINDING_WINDOWS: [u32; 2] = [10, 60];

/// The largest namespace id the plan may write: 2^53 - 1, the largest whole
/// number every JSON tool (JavaScript's numbers included) reads exactly.
pub const MAX_NAMESPACE_ID: u64 = (1 << 53) - 1;

/// Where a deployable runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Target {
    /// Cloudflare Workers: counts through the binding, or in each isolate's memory.
    Workers,
    /// A native server: counts in Redis, or in the process's memory.
    Native,
}

/// The store's driver, as far as rate limits are concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreDriver {
    /// Cloudflare's Rate Limiting binding; bindings are numbered from `namespace`.
    CloudflareRateLimits {
        /// The first binding's `namespace_id`; the others follow it.
        namespace: u64,
    },
    /// Redis: a native deployable counts in it ([`Counting::Redis`]); a
    /// Workers one holds no connection pool and counts in memory.
    Redis(RedisEndpoint),
}

/// Where a Redis connection reaches its server(s). Its URLs may hold a
/// password, so its `Debug` shows them [redacted](redacted_url).
#[derive(Clone, PartialEq, Eq)]
pub enum RedisEndpoint {
    /// One server at `url` (`redis://host:port`); `None` when the connection
    /// names none, so every request falls back to memory as `missing`.
    Single {
        /// The server's URL, as the `redis` crate opens it.
        url: Option<String>,
    },
    /// A Redis Cluster, by the URLs of some of its nodes (the connection's
    /// `nodes = [...]` field, instead of `url`).
    Cluster {
        /// The URLs of the nodes to reach the cluster through (not necessarily all of them).
        nodes: Vec<String>,
    },
}

impl fmt::Debug for RedisEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        /// A URL shown redacted, quoted as `Debug` quotes a string.
        struct Shown<'a>(&'a str);
        impl fmt::Debug for Shown<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&redacted_url(self.0), f)
            }
        }
        match self {
            RedisEndpoint::Single { url } => f
                .debug_struct("Single")
                .field("url", &url.as_deref().map(Shown))
                .finish(),
            RedisEndpoint::Cluster { nodes } => {
                let nodes: Vec<Shown<'_>> = nodes.iter().map(|n| Shown(n)).collect();
                f.debug_struct("Cluster").field("nodes", &nodes).finish()
            }
        }
    }
}

/// A Redis URL as it may be shown (in a `Debug`, a message): its scheme,
/// host, port and path, with everything up to the last `@` (a user name and
/// password, however written) and any query (`redis+unix://` takes `pass=`
/// there) replaced by `***`; a text that is no URL at all is all `***`.
#[doc(hidden)]
pub fn redacted_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return "***".to_owned();
    };
    let (hidden_user, rest) = match rest.rfind('@') {
        Some(at) => ("***@", &rest[at + 1..]),
        None => ("", rest),
    };
    let (rest, hidden_query) = match rest.split_once(['?', '#']) {
        Some((before, _)) => (before, "?***"),
        None => (rest, ""),
    };
    format!("{scheme}://{hidden_user}{rest}{hidden_query}")
}

/// The connection `rate_limits.store` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Store {
    /// The connection's name: binding names are made from it (and Redis fallbacks log it).
    pub connection: String,
    /// What the connection is, as far as rate limits are concerned.
    pub driver: StoreDriver,
}

/// One deployable of the application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deployable {
    /// Its name: a gate is built for one deployable of the application.
    pub name: String,
    /// Where it runs, which decides how it can count.
    pub target: Target,
    /// Whether it serves the API: one that does not limits nothing.
    pub serves_api: bool,
    /// The declinable diagnostics it accepts (such as counting in memory).
    pub declines: Vec<Code>,
    /// Where a request's client address comes from (`client_address`): the
    /// peer by default on a native server; always `CF-Connecting-IP` on Workers.
    pub client_address: AddressSource,
    /// The most its in-memory counting holds, in bytes (`memory_budget_mib`;
    /// [`crate::counter::DEFAULT_MEMORY_BUDGET`] unless set): the routes'
    /// sketches share it ([`crate::counter::MemoryBound::within`]).
    pub memory_budget: usize,
}

/// A route with its own rate limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The paths it applies to: a template in its canonical form
    /// ([`crate::routes::canonical_template`]; `{id}` one segment, a final
    /// `{*rest}` the rest), as validation leaves it.
    pub path: String,
    /// Its own limit, counted beside the subject's built-in one.
    pub rate_limit: Option<Limit>,
    /// The methods its limit counts (its `methods`; [`Methods::ALL`] unless
    /// it names some): another entry of the path may limit the others.
    pub methods: Methods,
    /// Whether its limit is a shadow one (`shadow = true`): counted as an
    /// enforced one (the same binding and keys, so turning it to enforcing
    /// keeps its counts), but a request over it is recorded, not refused.
    pub shadow: bool,
}

impl Route {
    /// Its limit's name ([`Methods::limit_name`]): what `RateLimit-Policy`
    /// and the metrics call it, `/login` or `POST /login`.
    pub fn limit_name(&self) -> String {
        self.methods.limit_name(&self.path)
    }
}

/// How a deployable counts requests at request time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Counting {
    /// Through Cloudflare's binding, falling back to memory when it can't be asked.
    Binding {
        /// The connection the bindings are named after.
        connection: String,
        /// The first binding's `namespace_id`.
        namespace: u64,
    },
    /// In the isolate's (or process's) own memory: a Workers deployable with
    /// a Redis store, or a native one without a store.
    InMemory,
    /// In Redis, shared by every instance of a native deployable, falling
    /// back to the process's memory when Redis can't be asked.
    Redis {
        /// The connection's name, as its fallback is logged.
        connection: String,
        /// Where its server (or cluster) is.
        endpoint: RedisEndpoint,
    },
    /// No API: nothing is limited; the requests it refuses are counted beside its health checks.
    NoApi,
}

impl Counting {
    /// The mode's name as health routes report it: `binding`, `in_memory`,
    /// `redis` or `no_api`. One table, so every fixture reports a new mode.
    pub fn name(&self) -> &'static str {
        match self {
            Counting::Binding { .. } => "binding",
            Counting::InMemory => "in_memory",
            Counting::Redis { .. } => "redis",
            Counting::NoApi => "no_api",
        }
    }
}

/// A validated application description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Application {
    /// The application's name (the description's top-level `name`): its
    /// Redis keys are named by it, so two applications sharing a Redis count
    /// apart and one application's instances together. Required when a
    /// deployable counts in Redis; `None` only when none does.
    pub name: Option<String>,
    /// The connection `rate_limits.store` names; `None` counts in memory.
    pub store: Option<Store>,
    /// Every deployable, in the description's order.
    pub deployables: Vec<Deployable>,
    /// The routes with a limit of their own.
    pub routes: Vec<Route>,
    /// The Workers Analytics Engine dataset each Worker writes a data point
    /// to for every refusal and every request counted in memory because its
    /// binding could not be asked (`rate_limits.data_points`); `None` writes none.
    pub data_points: Option<String>,
    /// Which built-in limits are shadow ones (`rate_limits.shadow`): a
    /// signed-in caller's, then an address's, as [`crate::Subject`]'s
    /// policies are ordered. Counted as enforced, recorded instead of refused.
    pub built_in_shadow: [bool; 2],
}

impl Application {
    /// The deployable of that name.
    pub fn deployable(&self, name: &str) -> Option<&Deployable> {
        self.deployables.iter().find(|d| d.name == name)
    }

    /// Every distinct limit the application counts, ordered by window and then by requests.
    pub fn limits(&self) -> Vec<Limit> {
        limits_of(&self.routes)
    }

    /// How a deployable of this application counts its requests.
    pub fn counting(&self, deployable: &Deployable) -> Counting {
        if !deployable.serves_api {
            return Counting::NoApi;
        }
        match &self.store {
            Some(Store {
                connection,
                driver: StoreDriver::CloudflareRateLimits { namespace },
            }) => Counting::Binding {
                connection: connection.clone(),
                namespace: *namespace,
            },
            Some(Store {
                connection,
                driver: StoreDriver::Redis(endpoint),
            }) if deployable.target == Target::Native => Counting::Redis {
                connection: connection.clone(),
                endpoint: endpoint.clone(),
            },
            // A Worker holds no Redis connection pool, so it counts in its
            // own memory; a native deployable without a store does too.
            Some(Store {
                driver: StoreDriver::Redis(_),
                ..
            })
            | None => Counting::InMemory,
        }
    }
}

/// The built-in limits and the routes' own, each once, ordered by window and
/// then by requests: a Cloudflare connection's bindings, one a limit.
pub(super) fn limits_of(routes: &[Route]) -> Vec<Limit> {
    let set: BTreeSet<Limit> = BUILT_IN_LIMITS
        .into_iter()
        .chain(routes.iter().filter_map(|r| r.rate_limit))
        .collect();
    set.into_iter().collect()
}
