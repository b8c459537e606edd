//! The application description (TOML, in the spec's vocabulary) and its
//! validation into an [`Application`], with every diagnostic at once.
//!
//! Parsing keeps byte spans so each diagnostic can point at `line:col`;
//! the rules themselves are plain functions over the parsed description.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::ops::Range;
use std::str::FromStr;

use serde::Deserialize;
use toml::Spanned;

use crate::limits::{BUILT_IN_LIMITS, Limit};

/// The windows Cloudflare's binding can count, in seconds.
pub const BINDING_WINDOWS: [u32; 2] = [10, 60];

/// A stable diagnostic code. The strings are part of the framework's
/// interface: scripts and scenario files match on them, so they never change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Code {
    /// The description is not valid TOML or does not have the expected shape.
    InvalidToml,
    /// `rate_limits.store` is not the name of one redis or cloudflare_rate_limits connection.
    StoreInvalid,
    /// A Workers deployable serves an API and there is no store.
    StoreRequired,
    /// A native deployable serves an API with Cloudflare's binding as its store.
    TargetUnsupported,
    /// A cloudflare_rate_limits connection's namespace is missing, not whole, or below 1.
    NamespaceInvalid,
    /// A Workers deployable serves an API with a Redis store and has not declined this.
    CountedInMemory,
    /// A route's window is one Cloudflare's binding cannot count.
    WindowUnsupported,
    /// A route's rate_limit has a request count or window below 1.
    LimitInvalid,
    /// A deployable declines something that is not a declinable judgement call.
    DeclineUnknown,
    /// Two deployables share a name.
    DeployableDuplicate,
}

impl Code {
    /// Every code, for listing and for parsing scenario expectations.
    pub const ALL: [Code; 10] = [
        Code::InvalidToml,
        Code::StoreInvalid,
        Code::StoreRequired,
        Code::TargetUnsupported,
        Code::NamespaceInvalid,
        Code::CountedInMemory,
        Code::WindowUnsupported,
        Code::LimitInvalid,
        Code::DeclineUnknown,
        Code::DeployableDuplicate,
    ];

    /// The stable string form, such as `rate_limits.store_invalid`.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::InvalidToml => "application.invalid_toml",
            Code::StoreInvalid => "rate_limits.store_invalid",
            Code::StoreRequired => "rate_limits.store_required",
            Code::TargetUnsupported => "deployable.target_unsupported",
            Code::NamespaceInvalid => "rate_limits.namespace_invalid",
            Code::CountedInMemory => "rate_limits.counted_in_memory",
            Code::WindowUnsupported => "rate_limits.window_unsupported",
            Code::LimitInvalid => "rate_limits.limit_invalid",
            Code::DeclineUnknown => "deployable.decline_unknown",
            Code::DeployableDuplicate => "deployable.duplicate",
        }
    }

    /// Judgement calls a deployable may decline with a decline line.
    pub fn is_declinable(self) -> bool {
        matches!(self, Code::CountedInMemory)
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error for a string that is no diagnostic code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a diagnostic code")]
pub struct UnknownCode(pub String);

impl FromStr for Code {
    type Err = UnknownCode;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Code::ALL
            .into_iter()
            .find(|code| code.as_str() == s)
            .ok_or_else(|| UnknownCode(s.to_owned()))
    }
}

/// A 1-based position in the description's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location {
    pub line: usize,
    pub column: usize,
}

impl Location {
    /// The line and column of a byte offset in `source`.
    pub fn of_offset(source: &str, offset: usize) -> Location {
        let offset = offset.min(source.len());
        let before = source.get(..offset).unwrap_or(source);
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = before[line_start..].chars().count() + 1;
        Location { line, column }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// One problem with an application description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub code: Code,
    pub message: String,
    /// Where in the description, when the problem has a place.
    pub location: Option<Location>,
}

/// Every diagnostic of a description that did not validate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the application description has {} problem(s): {}", .0.len(), codes(.0))]
pub struct Diagnostics(pub Vec<Diagnostic>);

fn codes(diagnostics: &[Diagnostic]) -> String {
    let list: Vec<&str> = diagnostics.iter().map(|d| d.code.as_str()).collect();
    list.join(", ")
}

impl Diagnostics {
    /// The codes, in the order reported.
    pub fn codes(&self) -> Vec<Code> {
        self.0.iter().map(|d| d.code).collect()
    }

    /// One `CODE: file:line:col: message` line for each diagnostic, as `check` prints them.
    pub fn render(&self, file_name: &str) -> String {
        let mut out = String::new();
        for d in &self.0 {
            match d.location {
                Some(at) => out.push_str(&format!("{}: {file_name}:{at}: {}\n", d.code, d.message)),
                None => out.push_str(&format!("{}: {file_name}: {}\n", d.code, d.message)),
            }
        }
        out
    }
}

/// Where a deployable runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Target {
    Workers,
    Native,
}

/// The store's driver, as far as rate limits are concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreDriver {
    /// Cloudflare's Rate Limiting binding; bindings are numbered from `namespace`.
    CloudflareRateLimits { namespace: u64 },
    /// Redis: a native deployable counts in it ([`Counting::Redis`]); a
    /// Workers one holds no connection pool and counts in memory.
    Redis(RedisEndpoint),
}

/// Where a Redis connection reaches its server(s).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RedisEndpoint {
    /// One server at `url` (`redis://host:port`); `None` when the connection
    /// names none, so every request falls back to memory as `missing`.
    Single { url: Option<String> },
    /// A Redis Cluster, by the URLs of some of its nodes (the connection's
    /// `nodes = [...]` field, instead of `url`).
    Cluster { nodes: Vec<String> },
}

/// The connection `rate_limits.store` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Store {
    pub connection: String,
    pub driver: StoreDriver,
}

/// One deployable of the application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deployable {
    pub name: String,
    pub target: Target,
    pub serves_api: bool,
    pub declines: Vec<Code>,
}

/// A route with its own rate limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub path: String,
    pub rate_limit: Option<Limit>,
}

/// How a deployable counts requests at request time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Counting {
    /// Through Cloudflare's binding, falling back to memory when it can't be asked.
    Binding { connection: String, namespace: u64 },
    /// In the isolate's (or process's) own memory: a Workers deployable with
    /// a Redis store, or a native one without a store.
    InMemory,
    /// In Redis, shared by every instance of a native deployable, falling
    /// back to the process's memory when Redis can't be asked.
    Redis {
        connection: String,
        endpoint: RedisEndpoint,
    },
    /// No API: nothing is limited; the requests it refuses are counted beside its health checks.
    NoApi,
}

/// A validated application description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Application {
    pub store: Option<Store>,
    pub deployables: Vec<Deployable>,
    pub routes: Vec<Route>,
}

impl Application {
    /// Parses and validates a description, returning every diagnostic if it is invalid.
    pub fn from_toml(source: &str) -> Result<Application, Diagnostics> {
        let raw: RawApplication = toml::from_str(source).map_err(|error| {
            let location = error
                .span()
                .map(|span| Location::of_offset(source, span.start));
            Diagnostics(vec![Diagnostic {
                code: Code::InvalidToml,
                message: error.message().trim().to_owned(),
                location,
            }])
        })?;
        validate(source, raw)
    }

    /// The deployable of that name.
    pub fn deployable(&self, name: &str) -> Option<&Deployable> {
        self.deployables.iter().find(|d| d.name == name)
    }

    /// Every distinct limit the application counts, ordered by window and then by requests.
    pub fn limits(&self) -> Vec<Limit> {
        let set: BTreeSet<Limit> = BUILT_IN_LIMITS
            .into_iter()
            .chain(self.routes.iter().filter_map(|r| r.rate_limit))
            .collect();
        set.into_iter().collect()
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

const CLOUDFLARE_DRIVER: &str = "cloudflare_rate_limits";
const REDIS_DRIVER: &str = "redis";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawApplication {
    #[serde(default)]
    connections: BTreeMap<String, Spanned<RawConnection>>,
    #[serde(default)]
    rate_limits: Option<RawRateLimits>,
    #[serde(default)]
    deployables: Vec<Spanned<RawDeployable>>,
    #[serde(default)]
    routes: Vec<Spanned<RawRoute>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConnection {
    driver: Spanned<String>,
    #[serde(default)]
    namespace: Option<Spanned<toml::Value>>,
    #[serde(default)]
    url: Option<String>,
    /// A Redis Cluster's node URLs, instead of `url`.
    #[serde(default)]
    nodes: Option<Spanned<Vec<String>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRateLimits {
    #[serde(default)]
    store: Option<Spanned<toml::Value>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDeployable {
    name: String,
    target: Target,
    serves_api: bool,
    #[serde(default)]
    declines: Vec<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRoute {
    path: String,
    #[serde(default)]
    rate_limit: Option<Spanned<RawRouteLimit>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRouteLimit {
    requests: Spanned<i64>,
    window: Spanned<i64>,
}

/// Collects diagnostics with their places while the rules run.
struct Report<'a> {
    source: &'a str,
    diagnostics: Vec<Diagnostic>,
}

impl Report<'_> {
    fn add(&mut self, code: Code, span: Option<Range<usize>>, message: String) {
        let location = span.map(|s| Location::of_offset(self.source, s.start));
        self.diagnostics.push(Diagnostic {
            code,
            message,
            location,
        });
    }
}

fn validate(source: &str, raw: RawApplication) -> Result<Application, Diagnostics> {
    let mut report = Report {
        source,
        diagnostics: Vec::new(),
    };

    let namespaces = validate_namespaces(&mut report, &raw.connections);
    let store = validate_store(&mut report, &raw, &namespaces);
    let deployables = validate_deployables(&mut report, &raw.deployables, &store);
    let routes = validate_routes(&mut report, &raw.routes, &store);

    if report.diagnostics.is_empty() {
        // A store that failed validation already produced a diagnostic.
        let store = match store {
            StoreCheck::Valid(store) => Some(store),
            StoreCheck::Absent | StoreCheck::Invalid => None,
        };
        Ok(Application {
            store,
            deployables,
            routes,
        })
    } else {
        Err(Diagnostics(report.diagnostics))
    }
}

/// Each cloudflare_rate_limits connection's namespace, for those that are valid.
fn validate_namespaces(
    report: &mut Report<'_>,
    connections: &BTreeMap<String, Spanned<RawConnection>>,
) -> BTreeMap<String, u64> {
    let mut namespaces = BTreeMap::new();
    for (name, connection) in connections {
        let span = connection.span();
        let connection = connection.get_ref();
        if connection.driver.get_ref() != CLOUDFLARE_DRIVER {
            continue;
        }
        let Some(namespace) = &connection.namespace else {
            report.add(
                Code::NamespaceInvalid,
                Some(span),
                format!(
                    "connection `{name}` uses {CLOUDFLARE_DRIVER} and has no `namespace`: \
                     give it a whole number of at least 1, such as `namespace = 1001`"
                ),
            );
            continue;
        };
        match namespace.get_ref() {
            toml::Value::Integer(n) if *n >= 1 => {
                namespaces.insert(name.clone(), *n as u64);
            }
            other => report.add(
                Code::NamespaceInvalid,
                Some(namespace.span()),
                format!(
                    "connection `{name}` has namespace {other}, which is not a whole number \
                     of at least 1"
                ),
            ),
        }
    }
    namespaces
}

enum StoreCheck {
    Absent,
    Invalid,
    Valid(Store),
}

fn validate_store(
    report: &mut Report<'_>,
    raw: &RawApplication,
    namespaces: &BTreeMap<String, u64>,
) -> StoreCheck {
    let Some(store) = raw.rate_limits.as_ref().and_then(|r| r.store.as_ref()) else {
        return StoreCheck::Absent;
    };
    let known: Vec<&str> = raw
        .connections
        .iter()
        .filter(|(_, c)| {
            let driver = c.get_ref().driver.get_ref();
            driver == REDIS_DRIVER || driver == CLOUDFLARE_DRIVER
        })
        .map(|(name, _)| name.as_str())
        .collect();
    let hint = if known.is_empty() {
        format!("there is no connection with driver {REDIS_DRIVER} or {CLOUDFLARE_DRIVER}")
    } else {
        format!("name one of: {}", known.join(", "))
    };
    let toml::Value::String(name) = store.get_ref() else {
        report.add(
            Code::StoreInvalid,
            Some(store.span()),
            format!(
                "`rate_limits.store` must name exactly one connection, not a {}; {hint}",
                store.get_ref().type_str()
            ),
        );
        return StoreCheck::Invalid;
    };
    let Some(connection) = raw.connections.get(name) else {
        report.add(
            Code::StoreInvalid,
            Some(store.span()),
            format!("`rate_limits.store` names `{name}`, which is no connection; {hint}"),
        );
        return StoreCheck::Invalid;
    };
    let driver = connection.get_ref().driver.get_ref();
    match driver.as_str() {
        REDIS_DRIVER => {
            let raw = connection.get_ref();
            let endpoint = match (&raw.url, &raw.nodes) {
                (None, Some(nodes)) if !nodes.get_ref().is_empty() => RedisEndpoint::Cluster {
                    nodes: nodes.get_ref().clone(),
                },
                (url, None) => RedisEndpoint::Single { url: url.clone() },
                (_, Some(nodes)) => {
                    report.add(
                        Code::StoreInvalid,
                        Some(nodes.span()),
                        format!(
                            "connection `{name}` gives `nodes` {}; a Redis connection has either \
                             `url` (one server) or a non-empty `nodes` list (a cluster's node URLs)",
                            if raw.url.is_some() { "beside `url`" } else { "empty" }
                        ),
                    );
                    return StoreCheck::Invalid;
                }
            };
            StoreCheck::Valid(Store {
                connection: name.clone(),
                driver: StoreDriver::Redis(endpoint),
            })
        }
        CLOUDFLARE_DRIVER => match namespaces.get(name) {
            Some(&namespace) => StoreCheck::Valid(Store {
                connection: name.clone(),
                driver: StoreDriver::CloudflareRateLimits { namespace },
            }),
            // Its namespace diagnostic is already reported.
            None => StoreCheck::Invalid,
        },
        other => {
            report.add(
                Code::StoreInvalid,
                Some(store.span()),
                format!(
                    "`rate_limits.store` names `{name}`, whose driver is {other}; a store's driver \
                     is {REDIS_DRIVER} or {CLOUDFLARE_DRIVER}"
                ),
            );
            StoreCheck::Invalid
        }
    }
}

fn validate_deployables(
    report: &mut Report<'_>,
    raw: &[Spanned<RawDeployable>],
    store: &StoreCheck,
) -> Vec<Deployable> {
    let mut seen = BTreeSet::new();
    let mut deployables = Vec::new();
    for spanned in raw {
        let span = spanned.span();
        let d = spanned.get_ref();
        let name = &d.name;
        if !seen.insert(name.clone()) {
            report.add(
                Code::DeployableDuplicate,
                Some(span.clone()),
                format!("two deployables are named `{name}`; names must be unique"),
            );
        }
        let mut declines = Vec::new();
        for decline in &d.declines {
            match decline.get_ref().parse::<Code>() {
                Ok(code) if code.is_declinable() => declines.push(code),
                _ => report.add(
                    Code::DeclineUnknown,
                    Some(decline.span()),
                    format!(
                        "deployable `{name}` declines `{}`, which is no judgement call; the only \
                         one a deployable can decline is {}",
                        decline.get_ref(),
                        Code::CountedInMemory
                    ),
                ),
            }
        }
        if d.serves_api {
            match (d.target, store) {
                (Target::Workers, StoreCheck::Absent) => report.add(
                    Code::StoreRequired,
                    Some(span.clone()),
                    format!(
                        "deployable `{name}` is built for Workers and serves an API, so its rate \
                         limits need a store every instance can reach: set `rate_limits.store` to a \
                         connection with driver {CLOUDFLARE_DRIVER} (or {REDIS_DRIVER})"
                    ),
                ),
                (Target::Native, StoreCheck::Valid(Store { connection, driver: StoreDriver::CloudflareRateLimits { .. } })) => {
                    report.add(
                        Code::TargetUnsupported,
                        Some(span.clone()),
                        format!(
                            "deployable `{name}` is native and serves an API, but the store \
                             `{connection}` is Cloudflare's binding, which runs only on Workers; \
                             use a Redis connection as the store for a native deployable"
                        ),
                    )
                }
                (Target::Workers, StoreCheck::Valid(Store { connection, driver: StoreDriver::Redis(_) }))
                    if !declines.contains(&Code::CountedInMemory) =>
                {
                    report.add(
                        Code::CountedInMemory,
                        Some(span.clone()),
                        format!(
                            "deployable `{name}` is built for Workers and serves an API with the \
                             Redis store `{connection}`, which counts in each instance's own memory \
                             until Redis's driver comes with caches, and Workers' instances share no \
                             memory. Either make the store a connection with driver \
                             {CLOUDFLARE_DRIVER} (Cloudflare's binding), or keep Redis by adding \
                             the decline line `declines = [\"{}\"]` to this deployable",
                            Code::CountedInMemory
                        ),
                    );
                }
                _ => {}
            }
        }
        deployables.push(Deployable {
            name: name.clone(),
            target: d.target,
            serves_api: d.serves_api,
            declines,
        });
    }
    deployables
}

fn validate_routes(
    report: &mut Report<'_>,
    raw: &[Spanned<RawRoute>],
    store: &StoreCheck,
) -> Vec<Route> {
    let binding_store = matches!(
        store,
        StoreCheck::Valid(Store {
            driver: StoreDriver::CloudflareRateLimits { .. },
            ..
        })
    );
    let mut routes = Vec::new();
    for spanned in raw {
        let route = spanned.get_ref();
        let path = &route.path;
        let rate_limit = route.rate_limit.as_ref().and_then(|limit| {
            let requests = positive(report, path, "requests", &limit.get_ref().requests);
            let window = positive(report, path, "window", &limit.get_ref().window);
            let (requests, window) = (requests?, window?);
            if binding_store && !BINDING_WINDOWS.contains(&window) {
                report.add(
                    Code::WindowUnsupported,
                    Some(limit.get_ref().window.span()),
                    format!(
                        "route `{path}` has a rate_limit window of {window} s, but the store is \
                         Cloudflare's binding, which counts windows of 10 or 60 seconds only"
                    ),
                );
                return None;
            }
            Some(Limit {
                requests,
                window_seconds: window,
            })
        });
        routes.push(Route {
            path: path.clone(),
            rate_limit,
        });
    }
    routes
}

/// A route limit's field as a whole number from 1 up, or a diagnostic.
fn positive(report: &mut Report<'_>, path: &str, field: &str, value: &Spanned<i64>) -> Option<u32> {
    match u32::try_from(*value.get_ref()) {
        Ok(n) if n >= 1 => Some(n),
        _ => {
            report.add(
                Code::LimitInvalid,
                Some(value.span()),
                format!(
                    "route `{path}` has rate_limit {field} = {}; it must be a whole number from 1 \
                     to {}",
                    value.get_ref(),
                    u32::MAX
                ),
            );
            None
        }
    }
}
