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
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use toml::Spanned;

use crate::address::{AddressSource, TrustedProxies};
use crate::limits::{BUILT_IN_LIMITS, Limit};
use crate::names::{binding_name, binding_prefix};

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
    /// Two routes share a path.
    RouteDuplicate,
    /// A Cloudflare connection's name gives binding names that are no JavaScript identifiers.
    BindingNameInvalid,
    /// A deployable's `client_address` is no source, names a network that is
    /// not one, or is not Cloudflare's header on Workers.
    ClientAddressInvalid,
    /// A route's path does not start with `/`, or holds a character no
    /// request's path holds or the keys reserve (`|`).
    RoutePathInvalid,
}

impl Code {
    /// Every code, for listing and for parsing scenario expectations.
    pub const ALL: [Code; 14] = [
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
        Code::RouteDuplicate,
        Code::BindingNameInvalid,
        Code::ClientAddressInvalid,
        Code::RoutePathInvalid,
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
            Code::RouteDuplicate => "rate_limits.route_duplicate",
            Code::BindingNameInvalid => "rate_limits.binding_name_invalid",
            Code::ClientAddressInvalid => "rate_limits.client_address_invalid",
            Code::RoutePathInvalid => "rate_limits.route_path_invalid",
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
    /// The line, from 1.
    pub line: usize,
    /// The column in characters (not bytes), from 1, as editors count it.
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
    /// The stable code, which tools match on and deployables may decline.
    pub code: Code,
    /// What is wrong and how to fix it, in the description's own words.
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
}

/// A route with its own rate limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The request path it applies to, exactly (no patterns).
    pub path: String,
    /// Its own limit, counted beside the subject's built-in one.
    pub rate_limit: Option<Limit>,
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
    /// The connection `rate_limits.store` names; `None` counts in memory.
    pub store: Option<Store>,
    /// Every deployable, in the description's order.
    pub deployables: Vec<Deployable>,
    /// The routes with a limit of their own.
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

/// The largest namespace id the plan may write: 2^53 - 1, the largest whole
/// number every JSON tool (JavaScript's numbers included) reads exactly.
pub const MAX_NAMESPACE_ID: u64 = (1 << 53) - 1;

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

/// A connection's settings as written, each with its place. Rate limits own
/// only `driver`, a Cloudflare connection's `namespace` and a Redis
/// connection's `url`; every other setting belongs to its driver.
type RawConnection = BTreeMap<Spanned<String>, Spanned<toml::Value>>;

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
    #[serde(default)]
    client_address: Option<Spanned<RawClientAddress>>,
}

/// A deployable's `client_address` as written: a source's name, a table of
/// trusted proxies (each entry with its place), or anything else, reported
/// as a diagnostic with its place instead of a parse error that hides the rest.
enum RawClientAddress {
    Named(String),
    TrustedProxies(RawList),
    /// Another shape, described for the message (`an integer`, `a table with `x``).
    Other(String),
}

/// A list whose entries keep their places, or what was written instead.
enum RawList {
    Items(Vec<Spanned<toml::Value>>),
    Other(&'static str),
}

/// Describes a value that is neither of the shapes a visitor wants.
macro_rules! describe_others {
    ($wrap:expr) => {
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok($wrap("a boolean"))
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok($wrap("an integer"))
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok($wrap("an integer"))
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok($wrap("a float"))
        }
    };
}

impl<'de> Deserialize<'de> for RawClientAddress {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct RawVisitor;
        impl<'de> Visitor<'de> for RawVisitor {
            type Value = RawClientAddress;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("\"peer\", \"cloudflare\" or { trusted_proxies = [...] }")
            }
            describe_others!(|what: &str| RawClientAddress::Other(what.to_owned()));
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RawClientAddress, E> {
                Ok(RawClientAddress::Named(v.to_owned()))
            }
            fn visit_seq<A: SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<RawClientAddress, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(RawClientAddress::Other("an array".to_owned()))
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<RawClientAddress, A::Error> {
                let mut proxies = None;
                let mut other = None;
                while let Some(key) = map.next_key::<String>()? {
                    if key == "trusted_proxies" {
                        proxies = Some(map.next_value::<RawList>()?);
                    } else {
                        map.next_value::<IgnoredAny>()?;
                        other.get_or_insert(key);
                    }
                }
                Ok(match (other, proxies) {
                    (Some(key), _) if key.starts_with("$__toml") => {
                        RawClientAddress::Other("a date".to_owned())
                    }
                    (Some(key), _) => RawClientAddress::Other(format!("a table with `{key}`")),
                    (None, Some(list)) => RawClientAddress::TrustedProxies(list),
                    (None, None) => RawClientAddress::Other("an empty table".to_owned()),
                })
            }
        }
        deserializer.deserialize_any(RawVisitor)
    }
}

impl<'de> Deserialize<'de> for RawList {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ListVisitor;
        impl<'de> Visitor<'de> for ListVisitor {
            type Value = RawList;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list")
            }
            describe_others!(RawList::Other);
            fn visit_str<E: de::Error>(self, _: &str) -> Result<RawList, E> {
                Ok(RawList::Other("a string"))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<RawList, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element::<Spanned<toml::Value>>()? {
                    items.push(item);
                }
                Ok(RawList::Items(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawList, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(RawList::Other("a table"))
            }
        }
        deserializer.deserialize_any(ListVisitor)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRoute {
    path: Spanned<String>,
    #[serde(default)]
    rate_limit: Option<Spanned<RawRouteLimit>>,
}

/// Values, not numbers, so a wrong type is a diagnostic with its place
/// that hides nothing else.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRouteLimit {
    #[serde(default)]
    requests: Option<Spanned<toml::Value>>,
    #[serde(default)]
    window: Option<Spanned<toml::Value>>,
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

/// What rate limits know of one connection.
enum ConnectionKind {
    /// Cloudflare's binding, with its namespace (and the namespace's place)
    /// when that is a whole number of at least 1.
    Cloudflare {
        namespace: Option<(u64, Range<usize>)>,
    },
    /// Redis, and where it is.
    Redis(RedisEndpoint),
    /// Another driver (`None`: no usable driver, already reported).
    Other(Option<String>),
}

/// The store `rate_limits.store` names, as far as it could be checked.
enum StoreCheck {
    /// No `rate_limits.store`.
    Absent,
    /// A store that is no usable connection (already reported).
    Invalid,
    /// A store whose driver is known; a Cloudflare one's namespace may still be invalid.
    Known {
        connection: String,
        driver: KnownDriver,
    },
}

/// A store's driver, known even when its settings are not valid, so the
/// rules that depend only on the driver still run.
#[derive(Clone, Copy, PartialEq, Eq)]
enum KnownDriver {
    Cloudflare { namespace: Option<u64> },
    Redis,
}

fn validate(source: &str, raw: RawApplication) -> Result<Application, Diagnostics> {
    let mut report = Report {
        source,
        diagnostics: Vec::new(),
    };

    let connections = validate_connections(&mut report, &raw.connections);
    let store = validate_store(&mut report, &raw, &connections);
    let deployables = validate_deployables(&mut report, &raw.deployables, &store);
    let binding_store = matches!(
        store,
        StoreCheck::Known {
            driver: KnownDriver::Cloudflare { .. },
            ..
        }
    );
    let routes = validate_routes(&mut report, &raw.routes, binding_store);
    validate_namespace_ids(&mut report, &connections, &routes);

    if !report.diagnostics.is_empty() {
        return Err(Diagnostics(report.diagnostics));
    }
    let store = match store {
        StoreCheck::Known {
            connection,
            driver:
                KnownDriver::Cloudflare {
                    namespace: Some(namespace),
                },
        } => Some(Store {
            connection,
            driver: StoreDriver::CloudflareRateLimits { namespace },
        }),
        StoreCheck::Known {
            connection,
            driver: KnownDriver::Redis,
        } => {
            let endpoint = match connections.get(&connection) {
                Some(ConnectionKind::Redis(endpoint)) => endpoint.clone(),
                _ => RedisEndpoint::Single { url: None },
            };
            Some(Store {
                connection,
                driver: StoreDriver::Redis(endpoint),
            })
        }
        // A store without a valid namespace, or invalid, was reported.
        StoreCheck::Known {
            driver: KnownDriver::Cloudflare { namespace: None },
            ..
        }
        | StoreCheck::Absent
        | StoreCheck::Invalid => None,
    };
    Ok(Application {
        store,
        deployables,
        routes,
    })
}

/// What each connection is to rate limits, reporting what rate limits own:
/// the driver, a Cloudflare connection (all of it) and a Redis connection's `url`.
fn validate_connections(
    report: &mut Report<'_>,
    connections: &BTreeMap<String, Spanned<RawConnection>>,
) -> BTreeMap<String, ConnectionKind> {
    let mut kinds = BTreeMap::new();
    for (name, connection) in connections {
        let span = connection.span();
        let settings = connection.get_ref();
        let setting = |key: &str| settings.iter().find(|(k, _)| k.get_ref() == key);
        let driver = match setting("driver") {
            Some((_, value)) => match value.get_ref() {
                toml::Value::String(driver) => Some(driver.as_str()),
                other => {
                    report.add(
                        Code::InvalidToml,
                        Some(value.span()),
                        format!(
                            "connection `{name}` has driver {other}, a {}; a driver is a string \
                             such as \"{CLOUDFLARE_DRIVER}\" or \"{REDIS_DRIVER}\"",
                            other.type_str()
                        ),
                    );
                    None
                }
            },
            None => {
                report.add(
                    Code::InvalidToml,
                    Some(span.clone()),
                    format!("connection `{name}` has no `driver`"),
                );
                None
            }
        };
        let kind = match driver {
            Some(CLOUDFLARE_DRIVER) => {
                for key in settings.keys() {
                    if !matches!(key.get_ref().as_str(), "driver" | "namespace") {
                        report.add(
                            Code::InvalidToml,
                            Some(key.span()),
                            format!(
                                "unknown field `{}` in connection `{name}`: a {CLOUDFLARE_DRIVER} \
                                 connection has only `driver` and `namespace`",
                                key.get_ref()
                            ),
                        );
                    }
                }
                check_binding_name(report, name, span.clone());
                ConnectionKind::Cloudflare {
                    namespace: namespace(report, name, span, setting("namespace").map(|(_, v)| v)),
                }
            }
            Some(REDIS_DRIVER) => {
                // Never the value itself: a URL may hold a password.
                if let Some((_, url)) = setting("url")
                    && !url.get_ref().is_str()
                {
                    report.add(
                        Code::InvalidToml,
                        Some(url.span()),
                        format!(
                            "connection `{name}` has a `url` that is a {}; a Redis url is a \
                             string such as \"redis://127.0.0.1:6379\"",
                            url.get_ref().type_str()
                        ),
                    );
                }
                ConnectionKind::Redis(redis_endpoint(
                    report,
                    name,
                    setting("url"),
                    setting("nodes"),
                ))
            }
            other => ConnectionKind::Other(other.map(str::to_owned)),
        };
        kinds.insert(name.clone(), kind);
    }
    kinds
}

/// A Cloudflare connection's namespace when it is a whole number of at least 1.
fn namespace(
    report: &mut Report<'_>,
    name: &str,
    connection_span: Range<usize>,
    value: Option<&Spanned<toml::Value>>,
) -> Option<(u64, Range<usize>)> {
    let Some(value) = value else {
        report.add(
            Code::NamespaceInvalid,
            Some(connection_span),
            format!(
                "connection `{name}` uses {CLOUDFLARE_DRIVER} and has no `namespace`: \
                 give it a whole number of at least 1, such as `namespace = 1001`"
            ),
        );
        return None;
    };
    match value.get_ref() {
        toml::Value::Integer(n) if *n >= 1 => Some((n.unsigned_abs(), value.span())),
        other => {
            report.add(
                Code::NamespaceInvalid,
                Some(value.span()),
                format!(
                    "connection `{name}` has namespace {other}, which is not a whole number \
                     of at least 1"
                ),
            );
            None
        }
    }
}

/// A Cloudflare connection's name must give binding names that are
/// JavaScript identifiers, or the Worker cannot reach `env.NAME`.
fn check_binding_name(report: &mut Report<'_>, name: &str, span: Range<usize>) {
    let prefix = binding_prefix(name);
    let starts_with_digit = prefix.starts_with(|c: char| c.is_ascii_digit());
    let no_letter_or_digit = !prefix.contains(|c: char| c.is_ascii_alphanumeric());
    if starts_with_digit || no_letter_or_digit {
        let example = binding_name(name, BUILT_IN_LIMITS[1]);
        let why = if starts_with_digit {
            "starts with a digit, so it is no JavaScript identifier"
        } else {
            "has no letter or digit of the connection's name in it"
        };
        report.add(
            Code::BindingNameInvalid,
            Some(span),
            format!(
                "connection `{name}` gives binding names such as `{example}`, which {why}; \
                 name the connection with a letter first, such as `limits`"
            ),
        );
    }
}

/// A Redis connection's endpoint: `url` for one server, or `nodes` (a
/// non-empty list of URLs) for a cluster; both, or an empty list, is
/// `rate_limits.store_invalid` at `nodes`, described without its URLs (they
/// may hold passwords).
fn redis_endpoint(
    report: &mut Report<'_>,
    name: &str,
    url: Option<(&Spanned<String>, &Spanned<toml::Value>)>,
    nodes: Option<(&Spanned<String>, &Spanned<toml::Value>)>,
) -> RedisEndpoint {
    let url = url.and_then(|(_, v)| v.get_ref().as_str().map(str::to_owned));
    let Some((_, nodes)) = nodes else {
        return RedisEndpoint::Single { url };
    };
    let list: Option<Vec<String>> = nodes.get_ref().as_array().and_then(|items| {
        items
            .iter()
            .map(|item| item.as_str().map(str::to_owned))
            .collect()
    });
    match list {
        Some(list) if !list.is_empty() && url.is_none() => RedisEndpoint::Cluster { nodes: list },
        _ => {
            let what = match (nodes.get_ref(), &list) {
                (_, Some(list)) if !list.is_empty() => format!(
                    "`nodes` (a list of {} URL{}) beside `url`",
                    list.len(),
                    if list.len() == 1 { "" } else { "s" }
                ),
                (_, Some(_)) => "`nodes` that is an empty list".to_owned(),
                (toml::Value::Array(_), None) => {
                    "`nodes` that holds something other than strings".to_owned()
                }
                (other, None) => format!("`nodes` that is a {}", other.type_str()),
            };
            report.add(
                Code::StoreInvalid,
                Some(nodes.span()),
                format!(
                    "connection `{name}` has {what}; a Redis connection has either `url` (one \
                     server) or `nodes`, a non-empty list of its cluster's node URLs"
                ),
            );
            RedisEndpoint::Single { url }
        }
    }
}

fn validate_store(
    report: &mut Report<'_>,
    raw: &RawApplication,
    connections: &BTreeMap<String, ConnectionKind>,
) -> StoreCheck {
    let Some(store) = raw.rate_limits.as_ref().and_then(|r| r.store.as_ref()) else {
        return StoreCheck::Absent;
    };
    let known: Vec<&str> = connections
        .iter()
        .filter(|(_, kind)| !matches!(kind, ConnectionKind::Other(_)))
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
    let Some(kind) = connections.get(name) else {
        report.add(
            Code::StoreInvalid,
            Some(store.span()),
            format!("`rate_limits.store` names `{name}`, which is no connection; {hint}"),
        );
        return StoreCheck::Invalid;
    };
    let driver = match kind {
        ConnectionKind::Cloudflare { namespace } => KnownDriver::Cloudflare {
            namespace: namespace.as_ref().map(|(n, _)| *n),
        },
        ConnectionKind::Redis(_) => KnownDriver::Redis,
        // Its driver's problem is already reported.
        ConnectionKind::Other(None) => return StoreCheck::Invalid,
        ConnectionKind::Other(Some(other)) => {
            report.add(
                Code::StoreInvalid,
                Some(store.span()),
                format!(
                    "`rate_limits.store` names `{name}`, whose driver is {other}; a store's driver \
                     is {REDIS_DRIVER} or {CLOUDFLARE_DRIVER}"
                ),
            );
            return StoreCheck::Invalid;
        }
    };
    StoreCheck::Known {
        connection: name.clone(),
        driver,
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
            check_api_store(report, name, d.target, &declines, store, span);
        }
        let client_address = client_address(report, name, d.target, d.client_address.as_ref());
        deployables.push(Deployable {
            name: name.clone(),
            target: d.target,
            serves_api: d.serves_api,
            declines,
            client_address,
        });
    }
    deployables
}

/// A deployable's `client_address`: `"peer"` (a native deployable's default),
/// `"cloudflare"` (a Worker's only source), or `{ trusted_proxies = [...] }`,
/// each entry an address or a network (`10.0.0.0/8`, `2001:db8::/32`).
fn client_address(
    report: &mut Report<'_>,
    name: &str,
    target: Target,
    raw: Option<&Spanned<RawClientAddress>>,
) -> AddressSource {
    let usage = "write \"peer\" (the socket's peer), \"cloudflare\" (`CF-Connecting-IP`, for a \
                 server reached only through Cloudflare) or `{ trusted_proxies = [\"10.0.0.0/8\"] }` \
                 (the client your proxies name in `X-Forwarded-For`)";
    let default = match target {
        Target::Native => AddressSource::Peer,
        Target::Workers => AddressSource::CloudflareHeader,
    };
    let Some(raw) = raw else {
        return default;
    };
    let source = match raw.get_ref() {
        RawClientAddress::Named(named) if named == "peer" => Some(AddressSource::Peer),
        RawClientAddress::Named(named) if named == "cloudflare" => {
            Some(AddressSource::CloudflareHeader)
        }
        RawClientAddress::Named(other) => {
            let message = format!("deployable `{name}` has client_address \"{other}\"; {usage}");
            report.add(Code::ClientAddressInvalid, Some(raw.span()), message);
            None
        }
        RawClientAddress::Other(what) => {
            let message =
                format!("deployable `{name}` has a client_address that is {what}; {usage}");
            report.add(Code::ClientAddressInvalid, Some(raw.span()), message);
            None
        }
        RawClientAddress::TrustedProxies(RawList::Other(what)) => {
            let message = format!(
                "deployable `{name}` has trusted_proxies that is {what}; it is a list of \
                 addresses and networks, such as [\"10.0.0.0/8\", \"192.0.2.7\"]"
            );
            report.add(Code::ClientAddressInvalid, Some(raw.span()), message);
            None
        }
        RawClientAddress::TrustedProxies(RawList::Items(items)) => {
            trusted_proxies(report, name, items, raw.span())
        }
    };
    match (target, source) {
        (Target::Native, Some(source)) => source,
        (Target::Workers, Some(AddressSource::CloudflareHeader)) | (_, None) => default,
        (Target::Workers, Some(other)) => {
            report.add(
                Code::ClientAddressInvalid,
                Some(raw.span()),
                format!(
                    "deployable `{name}` is built for Workers, where every request comes through \
                     Cloudflare and its client is `CF-Connecting-IP`; client_address `{}` is for \
                     a native deployable: remove it",
                    other.name()
                ),
            );
            default
        }
    }
}

/// The networks of `trusted_proxies`, every entry checked (each diagnostic
/// at its entry); `None` when any is invalid or there is none.
fn trusted_proxies(
    report: &mut Report<'_>,
    name: &str,
    items: &[Spanned<toml::Value>],
    span: Range<usize>,
) -> Option<AddressSource> {
    if items.is_empty() {
        report.add(
            Code::ClientAddressInvalid,
            Some(span),
            format!(
                "deployable `{name}` has an empty trusted_proxies, which trusts no proxy: list \
                 your proxies' addresses or networks, or write client_address = \"peer\""
            ),
        );
        return None;
    }
    let mut networks = Vec::new();
    let mut valid = true;
    for item in items {
        let parsed = match item.get_ref() {
            toml::Value::String(text) => network(text)
                .map_err(|why| format!("lists `{text}` in trusted_proxies, which {why}")),
            other => Err(format!(
                "lists an entry of type {} in trusted_proxies, where each entry is a string: an \
                 address or a network such as \"10.0.0.0/8\"",
                other.type_str()
            )),
        };
        match parsed {
            Ok(network) => networks.push(network),
            Err(why) => {
                valid = false;
                report.add(
                    Code::ClientAddressInvalid,
                    Some(item.span()),
                    format!("deployable `{name}` {why}"),
                );
            }
        }
    }
    valid.then(|| AddressSource::TrustedProxies(TrustedProxies::new(networks)))
}

/// One trusted proxy: an address (its /32 or /128) or a network written
/// with no bits set past its prefix; a network of every address is refused,
/// since then any client could name itself in `X-Forwarded-For`. The error
/// says what is wrong with it.
fn network(text: &str) -> Result<ipnet::IpNet, String> {
    let example = "write an address such as 10.0.0.7 or a network such as 10.0.0.0/8";
    let network = if text.contains('/') {
        text.parse::<ipnet::IpNet>()
            .map_err(|_| format!("is not a network: {example}"))?
    } else {
        let ip = text
            .parse::<std::net::IpAddr>()
            .map_err(|_| format!("is not an address: {example}"))?;
        ipnet::IpNet::from(ip)
    };
    if network.prefix_len() == 0 {
        return Err("is every address: any client could then name itself in \
             X-Forwarded-For; list your proxies' own networks"
            .to_owned());
    }
    if network.trunc() != network {
        return Err(format!(
            "has bits set past its /{} prefix: write `{}`",
            network.prefix_len(),
            network.trunc()
        ));
    }
    Ok(network)
}

/// The store rules of a deployable that serves an API.
fn check_api_store(
    report: &mut Report<'_>,
    name: &str,
    target: Target,
    declines: &[Code],
    store: &StoreCheck,
    span: Range<usize>,
) {
    match (target, store) {
        (Target::Workers, StoreCheck::Absent) => report.add(
            Code::StoreRequired,
            Some(span),
            format!(
                "deployable `{name}` is built for Workers and serves an API, so its rate \
                 limits need a store every instance can reach: set `rate_limits.store` to a \
                 connection with driver {CLOUDFLARE_DRIVER} (or {REDIS_DRIVER})"
            ),
        ),
        (
            Target::Native,
            StoreCheck::Known {
                connection,
                driver: KnownDriver::Cloudflare { .. },
            },
        ) => report.add(
            Code::TargetUnsupported,
            Some(span),
            format!(
                "deployable `{name}` is native and serves an API, but the store \
                 `{connection}` is Cloudflare's binding, which runs only on Workers; \
                 use a Redis connection as the store for a native deployable"
            ),
        ),
        (
            Target::Workers,
            StoreCheck::Known {
                connection,
                driver: KnownDriver::Redis,
            },
        ) if !declines.contains(&Code::CountedInMemory) => report.add(
            Code::CountedInMemory,
            Some(span),
            format!(
                "deployable `{name}` is built for Workers and serves an API with the \
                 Redis store `{connection}`, which counts in each instance's own memory \
                 until Redis's driver comes with caches, and Workers' instances share no \
                 memory. Either make the store a connection with driver \
                 {CLOUDFLARE_DRIVER} (Cloudflare's binding), or keep Redis by adding \
                 the decline line `declines = [\"{}\"]` to this deployable",
                Code::CountedInMemory
            ),
        ),
        (Target::Workers, StoreCheck::Known { .. } | StoreCheck::Invalid)
        | (Target::Native, StoreCheck::Absent | StoreCheck::Invalid)
        | (
            Target::Native,
            StoreCheck::Known {
                driver: KnownDriver::Redis,
                ..
            },
        ) => {}
    }
}

fn validate_routes(
    report: &mut Report<'_>,
    raw: &[Spanned<RawRoute>],
    binding_store: bool,
) -> Vec<Route> {
    let mut first_entry: BTreeMap<&str, usize> = BTreeMap::new();
    let mut routes = Vec::new();
    for spanned in raw {
        let route = spanned.get_ref();
        check_route_path(report, &route.path);
        let path = route.path.get_ref();
        if let Some(&first) = first_entry.get(path.as_str()) {
            let first_line = Location::of_offset(report.source, first).line;
            report.add(
                Code::RouteDuplicate,
                Some(spanned.span()),
                format!(
                    "route `{path}` is listed again (first at line {first_line}); every entry \
                     of a path counts each of its requests, so keep one `[[routes]]` per path"
                ),
            );
        } else {
            first_entry.insert(path, spanned.span().start);
        }
        let rate_limit = route
            .rate_limit
            .as_ref()
            .and_then(|limit| route_limit(report, path, limit, binding_store));
        routes.push(Route {
            path: path.clone(),
            rate_limit,
        });
    }
    routes
}

/// A route's path is matched exactly against a request's path, and is the
/// first part of its keys (`PATH|caller:ID`): it starts with `/`, and holds
/// no `|` (the keys' separator: with it, `/a|caller:b` for caller `c` and
/// `/a` for caller `b|caller:c` would share one key), nor what a request's
/// path never holds (a query or fragment, spaces, anything not
/// percent-encoded), so that it can match.
fn check_route_path(report: &mut Report<'_>, path: &Spanned<String>) {
    let text = path.get_ref();
    let why = if !text.starts_with('/') {
        Some(format!(
            "does not start with `/`, so no request's path can match it: write `/{text}`"
        ))
    } else if text.contains('|') {
        Some(
            "holds `|`, which the rate-limit keys reserve (a route's key is `PATH|SUBJECT`): \
             a path with it could share a key with another route's subject"
                .to_owned(),
        )
    } else if let Some(c) = text.chars().find(|c| matches!(c, '?' | '#')) {
        Some(format!(
            "holds `{c}`, which starts a URL's query or fragment: a request's path never holds \
             it, so the route could never match"
        ))
    } else if text.chars().any(|c| !c.is_ascii_graphic()) {
        let mut encoded = String::with_capacity(text.len());
        for c in text.chars() {
            if c.is_ascii_graphic() {
                encoded.push(c);
            } else {
                for byte in c.encode_utf8(&mut [0; 4]).bytes() {
                    encoded.push_str(&format!("%{byte:02X}"));
                }
            }
        }
        Some(format!(
            "holds a space, a control character or a non-ASCII character, which a request's \
             path holds percent-encoded: write `{encoded}`"
        ))
    } else {
        None
    };
    if let Some(why) = why {
        report.add(
            Code::RoutePathInvalid,
            Some(path.span()),
            format!("route `{}` {why}", text.escape_debug()),
        );
    }
}

/// A route's own limit, each of its fields checked whatever the other's state.
fn route_limit(
    report: &mut Report<'_>,
    path: &str,
    limit: &Spanned<RawRouteLimit>,
    binding_store: bool,
) -> Option<Limit> {
    let RawRouteLimit { requests, window } = limit.get_ref();
    let requests = route_limit_field(report, path, "requests", requests, limit.span());
    let window = route_limit_field(report, path, "window", window, limit.span());
    if let (Some(window), Some(span)) = (window, window_span(limit))
        && binding_store
        && !BINDING_WINDOWS.contains(&window)
    {
        report.add(
            Code::WindowUnsupported,
            Some(span),
            format!(
                "route `{path}` has a rate_limit window of {window} s, but the store is \
                 Cloudflare's binding, which counts windows of 10 or 60 seconds only"
            ),
        );
        return None;
    }
    Some(Limit {
        requests: requests?,
        window_seconds: window?,
    })
}

fn window_span(limit: &Spanned<RawRouteLimit>) -> Option<Range<usize>> {
    limit.get_ref().window.as_ref().map(Spanned::span)
}

/// A route limit's field as a whole number from 1 to `u32::MAX`, or a
/// diagnostic: `rate_limits.limit_invalid`, or for a window that is no
/// whole number at all, `rate_limits.window_unsupported`.
fn route_limit_field(
    report: &mut Report<'_>,
    path: &str,
    field: &str,
    value: &Option<Spanned<toml::Value>>,
    limit_span: Range<usize>,
) -> Option<u32> {
    let Some(value) = value else {
        report.add(
            Code::LimitInvalid,
            Some(limit_span),
            format!("route `{path}` has a rate_limit without `{field}`"),
        );
        return None;
    };
    let range = format!("a whole number from 1 to {}", u32::MAX);
    match value.get_ref() {
        toml::Value::Integer(n) => match u32::try_from(*n) {
            Ok(n) if n >= 1 => Some(n),
            _ => {
                report.add(
                    Code::LimitInvalid,
                    Some(value.span()),
                    format!("route `{path}` has rate_limit {field} = {n}; it must be {range}"),
                );
                None
            }
        },
        other => {
            let code = if field == "window" {
                Code::WindowUnsupported
            } else {
                Code::LimitInvalid
            };
            let hint = whole_number_in(other)
                .map(|n| format!(": write `{field} = {n}`"))
                .unwrap_or_default();
            report.add(
                code,
                Some(value.span()),
                format!(
                    "route `{path}` has rate_limit {field} = {other}, a {}; it must be {range}{hint}",
                    other.type_str()
                ),
            );
            None
        }
    }
}

/// The whole number a float or string plainly means (`20.0`, `"60"`), for the hint.
fn whole_number_in(value: &toml::Value) -> Option<u32> {
    match value {
        toml::Value::Float(f) if f.fract() == 0.0 && *f >= 1.0 && *f <= f64::from(u32::MAX) => {
            Some(*f as u32)
        }
        toml::Value::String(s) => s.trim().parse().ok().filter(|n| *n >= 1),
        _ => None,
    }
}

/// The largest id a Cloudflare connection's plan writes (namespace + bindings - 1)
/// must be at most [`MAX_NAMESPACE_ID`].
fn validate_namespace_ids(
    report: &mut Report<'_>,
    connections: &BTreeMap<String, ConnectionKind>,
    routes: &[Route],
) {
    let bindings: BTreeSet<Limit> = BUILT_IN_LIMITS
        .into_iter()
        .chain(routes.iter().filter_map(|r| r.rate_limit))
        .collect();
    let more = bindings.len() as u64 - 1;
    for (name, kind) in connections {
        let ConnectionKind::Cloudflare {
            namespace: Some((namespace, span)),
        } = kind
        else {
            continue;
        };
        let last = namespace.saturating_add(more);
        if last > MAX_NAMESPACE_ID {
            report.add(
                Code::NamespaceInvalid,
                Some(span.clone()),
                format!(
                    "connection `{name}` has namespace {namespace}, so its {} bindings are \
                     numbered up to {last}, above 2^53 - 1 = {MAX_NAMESPACE_ID}, the largest id \
                     every JSON tool reads exactly; use a namespace of at most {}",
                    bindings.len(),
                    MAX_NAMESPACE_ID - more
                ),
            );
        }
    }
}
