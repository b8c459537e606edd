//! From an application's limits to Cloudflare bindings and their Wrangler entries.
//!
//! A binding counts one limit over one window, so each distinct limit is a
//! binding of its own, named for the connection and the limit and numbered
//! from the connection's namespace in order of window and then of requests.

use serde::Serialize;

use crate::config::{Application, Counting, Deployable};
use crate::limits::Limit;
use crate::names::binding_name;

/// The binding a Worker writes its data points through, when the
/// application names a Workers Analytics Engine dataset
/// (`rate_limits.data_points`): its Wrangler entry is
/// [`DatasetEntry::of`]'s, and the Worker's plan names it.
pub const DATA_POINTS_BINDING: &str = "RATE_LIMIT_DATA_POINTS";

/// The event a Worker logs, once per isolate, when its data points' dataset
/// is missing or throws (with the binding and `missing` or `failed`): the
/// request is unaffected.
pub const DATA_POINTS_EVENT: &str = "rate_limits.data_points";

/// One `analytics_engine_datasets` entry of a Wrangler file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DatasetEntry {
    /// The binding's name, as the Worker sees it in `env`.
    pub binding: String,
    /// The dataset the points go to.
    pub dataset: String,
}

impl DatasetEntry {
    /// The entry of the application's dataset, if it names one.
    pub fn of(app: &Application) -> Option<DatasetEntry> {
        Some(DatasetEntry {
            binding: DATA_POINTS_BINDING.to_owned(),
            dataset: app.data_points.clone()?,
        })
    }
}

/// One binding the Worker needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Binding {
    /// The name the Worker sees it under, such as `LIMITS_120_PER_60S`.
    pub name: String,
    /// Its namespace: bindings sharing one share their counts, even across Workers.
    pub namespace_id: u64,
    /// The one limit it counts.
    pub limit: Limit,
}

/// The bindings of one application, in namespace order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Bindings {
    /// One per distinct limit; their order is [`crate::backend::BackendId`]'s.
    pub bindings: Vec<Binding>,
}

impl Bindings {
    /// The bindings an application's store needs; empty unless the store is Cloudflare's binding.
    pub fn for_application(app: &Application) -> Bindings {
        app.deployables
            .iter()
            .map(|d| Bindings::for_deployable(app, d))
            .find(|plan| !plan.bindings.is_empty())
            .unwrap_or_default()
    }

    /// The bindings one deployable asks: none unless it counts through Cloudflare's binding.
    pub fn for_deployable(app: &Application, deployable: &Deployable) -> Bindings {
        match app.counting(deployable) {
            Counting::Binding {
                connection,
                namespace,
            } => Bindings::new(&connection, namespace, &app.limits()),
            Counting::InMemory | Counting::Redis { .. } | Counting::NoApi => Bindings::default(),
        }
    }

    /// Plans one binding per distinct limit, numbered from `namespace`.
    #[doc(hidden)]
    pub fn new(connection: &str, namespace: u64, limits: &[Limit]) -> Bindings {
        let mut limits = limits.to_vec();
        limits.sort();
        limits.dedup();
        let bindings = limits
            .into_iter()
            .zip(namespace..)
            .map(|(limit, namespace_id)| Binding {
                name: binding_name(connection, limit),
                namespace_id,
                limit,
            })
            .collect();
        Bindings { bindings }
    }

    /// The `ratelimits` entries of a wrangler.jsonc, as a JSON object.
    pub fn wrangler_jsonc(&self) -> String {
        let file = WranglerFile {
            ratelimits: self.wrangler_entries(),
        };
        // Serialising plain strings and numbers cannot fail.
        serde_json::to_string_pretty(&file).unwrap_or_default() + "\n"
    }

    /// The `[[ratelimits]]` tables of a wrangler.toml.
    pub fn wrangler_toml(&self) -> String {
        let file = WranglerFile {
            ratelimits: self.wrangler_entries(),
        };
        toml::to_string(&file).unwrap_or_default()
    }

    /// The `ratelimits` entries of the Wrangler file, in namespace order.
    #[doc(hidden)]
    pub fn wrangler_entries(&self) -> Vec<WranglerEntry> {
        self.bindings
            .iter()
            .map(|b| WranglerEntry {
                name: b.name.clone(),
                namespace_id: b.namespace_id.to_string(),
                simple: Simple {
                    limit: b.limit.requests,
                    period: b.limit.window_seconds,
                },
            })
            .collect()
    }
}

#[derive(Serialize)]
struct WranglerFile {
    ratelimits: Vec<WranglerEntry>,
}

/// One `ratelimits` entry of a Wrangler file, as Wrangler's schema has it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WranglerEntry {
    /// The binding's name, as the Worker sees it in `env`.
    pub name: String,
    /// A string holding a positive integer.
    pub namespace_id: String,
    /// The limit it counts.
    pub simple: Simple,
}

/// A binding's limit: `limit` requests per `period` seconds (10 or 60).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Simple {
    /// Requests per period.
    pub limit: u32,
    /// The period in seconds: 10 or 60, all Cloudflare counts.
    pub period: u32,
}
