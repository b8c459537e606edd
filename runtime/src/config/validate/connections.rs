//! The connections and the store: what each connection is to rate limits
//! (its driver, a Cloudflare connection's namespace and binding names, a
//! Redis connection's endpoint), which one `rate_limits.store` names, and
//! whether a Cloudflare connection's bindings are numbered within what JSON
//! reads exactly.

use std::collections::BTreeMap;
use std::ops::Range;

use toml::Spanned;

use super::Report;
use crate::config::model::limits_of;
use crate::config::raw::{RawApplication, RawConnection};
use crate::config::{Code, MAX_NAMESPACE_ID, RedisEndpoint, Route, Store, StoreDriver};
use crate::limits::BUILT_IN_LIMITS;
use crate::names::{binding_name, binding_prefix};

pub(super) const CLOUDFLARE_DRIVER: &str = "cloudflare_rate_limits";
pub(super) const REDIS_DRIVER: &str = "redis";

/// What rate limits know of one connection: its driver, and for the two
/// they count with, what the model's [`StoreDriver`] is made of.
pub(super) enum Connection {
    /// Cloudflare's binding, with its namespace (and the namespace's place)
    /// when that is a whole number of at least 1: when it is not (reported),
    /// the rules that depend only on the driver still run.
    Cloudflare { namespace: Option<Spanned<u64>> },
    /// Redis, and where it is.
    Redis(RedisEndpoint),
    /// Another driver (`None`: no usable driver, already reported).
    Other(Option<String>),
}

impl Connection {
    /// The driver of a store on this connection, once its settings are valid.
    fn store_driver(&self) -> Option<StoreDriver> {
        match self {
            Connection::Cloudflare {
                namespace: Some(namespace),
            } => Some(StoreDriver::CloudflareRateLimits {
                namespace: *namespace.get_ref(),
            }),
            Connection::Redis(endpoint) => Some(StoreDriver::Redis(endpoint.clone())),
            Connection::Cloudflare { namespace: None } | Connection::Other(_) => None,
        }
    }
}

/// What `rate_limits.store` names, as the rules after it need it.
pub(super) enum NamedStore<'a> {
    /// No `rate_limits.store`.
    Absent,
    /// No connection of Cloudflare's binding or of Redis (already reported).
    Invalid,
    /// The connection of that name, Cloudflare's binding or Redis (never
    /// [`Connection::Other`]); a Cloudflare one's namespace may still be invalid.
    Named {
        name: &'a str,
        connection: &'a Connection,
    },
}

impl NamedStore<'_> {
    /// Whether the store is Cloudflare's binding, its namespace valid or not.
    pub(super) fn is_binding(&self) -> bool {
        matches!(
            self,
            NamedStore::Named {
                connection: Connection::Cloudflare { .. },
                ..
            }
        )
    }

    /// The model's store, once its connection's settings are valid.
    pub(super) fn to_store(&self) -> Option<Store> {
        match self {
            NamedStore::Named { name, connection } => {
                connection.store_driver().map(|driver| Store {
                    connection: (*name).to_owned(),
                    driver,
                })
            }
            NamedStore::Absent | NamedStore::Invalid => None,
        }
    }
}

/// What each connection is to rate limits, reporting what rate limits own:
/// the driver, and all of a Cloudflare or Redis connection (an unknown field
/// in either is a diagnostic, like Cloudflare's own configuration).
pub(super) fn validate_connections(
    report: &mut Report<'_>,
    connections: &BTreeMap<String, Spanned<RawConnection>>,
) -> BTreeMap<String, Connection> {
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
                Connection::Cloudflare {
                    namespace: namespace(report, name, span, setting("namespace").map(|(_, v)| v)),
                }
            }
            Some(REDIS_DRIVER) => {
                // A misspelled `url` would otherwise leave a connection with
                // no server, counting in each process's memory.
                for key in settings.keys() {
                    if !matches!(key.get_ref().as_str(), "driver" | "url" | "nodes") {
                        report.add(
                            Code::InvalidToml,
                            Some(key.span()),
                            format!(
                                "unknown field `{}` in connection `{name}`: a {REDIS_DRIVER} \
                                 connection has only `driver` and either `url` (one server) or \
                                 `nodes` (a cluster)",
                                key.get_ref()
                            ),
                        );
                    }
                }
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
                let endpoint = redis_endpoint(report, name, setting("url"), setting("nodes"));
                let at = match &endpoint {
                    RedisEndpoint::Single { .. } => setting("url"),
                    RedisEndpoint::Cluster { .. } => setting("nodes"),
                }
                .map_or(span.clone(), |(_, value)| value.span());
                check_redis_urls(report, name, &endpoint, at);
                Connection::Redis(endpoint)
            }
            other => Connection::Other(other.map(str::to_owned)),
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
) -> Option<Spanned<u64>> {
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
        toml::Value::Integer(n) if *n >= 1 => Some(Spanned::new(value.span(), n.unsigned_abs())),
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

/// The URL schemes a Redis connection can be dialled with: TCP, TCP over
/// TLS and a Unix socket, as the `redis` crate spells them (Valkey's too).
const REDIS_SCHEMES: [&str; 7] = [
    "redis",
    "rediss",
    "valkey",
    "valkeys",
    "redis+unix",
    "valkey+unix",
    "unix",
];

/// Every URL of `endpoint` is one this runtime can dial; the first that is
/// not is reported `at` its value ([`redis_url_problem`]).
fn check_redis_urls(
    report: &mut Report<'_>,
    name: &str,
    endpoint: &RedisEndpoint,
    at: Range<usize>,
) {
    let urls: Vec<&String> = match endpoint {
        RedisEndpoint::Single { url } => url.iter().collect(),
        RedisEndpoint::Cluster { nodes } => nodes.iter().collect(),
    };
    if let Some(problem) = urls.iter().find_map(|url| redis_url_problem(url)) {
        report.add(
            Code::StoreInvalid,
            Some(at),
            format!("connection `{name}` has a {problem}"),
        );
    }
}

/// Why `url` is no Redis URL this runtime can dial, or `None`: at
/// validation, where a URL it cannot use would otherwise leave every
/// process counting in its own memory from the first request on. Never
/// the URL itself (it may hold a password), only its scheme when that is
/// a plain word.
fn redis_url_problem(url: &str) -> Option<String> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Some(
            "`url` that is no URL (it has no `scheme://`): write it as \
             \"redis://HOST:PORT\" (or \"redis+unix:///PATH\")"
                .to_owned(),
        );
    };
    let scheme = scheme.to_ascii_lowercase();
    let plain = !scheme.is_empty()
        && scheme.len() <= 16
        && scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'));
    if !REDIS_SCHEMES.contains(&scheme.as_str()) {
        let named = if plain {
            format!("`{scheme}://`")
        } else {
            "a scheme".to_owned()
        };
        return Some(format!(
            "`url` with {named}, which is no Redis scheme: write \"redis://HOST:PORT\" (or \
             \"redis+unix:///PATH\")"
        ));
    }
    let unix = scheme.ends_with("unix");
    // After any `user:password@`, a TCP URL names a host; a socket's, a path.
    let place = rest.rsplit_once('@').map_or(rest, |(_, place)| place);
    let empty = if unix {
        place.trim_start_matches('/').is_empty()
    } else {
        place.split(['/', '?']).next().is_none_or(str::is_empty)
    };
    empty.then(|| {
        format!(
            "`url` (`{scheme}://`) that names no {}: write \"{}\"",
            if unix { "socket path" } else { "host" },
            if unix {
                "redis+unix:///PATH"
            } else {
                "redis://HOST:PORT"
            }
        )
    })
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

/// The connection `rate_limits.store` names, which must be one of
/// Cloudflare's binding or of Redis.
pub(super) fn validate_store<'a>(
    report: &mut Report<'_>,
    raw: &'a RawApplication,
    connections: &'a BTreeMap<String, Connection>,
) -> NamedStore<'a> {
    let Some(store) = raw.rate_limits.as_ref().and_then(|r| r.store.as_ref()) else {
        return NamedStore::Absent;
    };
    let known: Vec<&str> = connections
        .iter()
        .filter(|(_, connection)| !matches!(connection, Connection::Other(_)))
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
        return NamedStore::Invalid;
    };
    let Some(connection) = connections.get(name) else {
        report.add(
            Code::StoreInvalid,
            Some(store.span()),
            format!("`rate_limits.store` names `{name}`, which is no connection; {hint}"),
        );
        return NamedStore::Invalid;
    };
    match connection {
        Connection::Cloudflare { .. } | Connection::Redis(_) => {
            NamedStore::Named { name, connection }
        }
        // Its driver's problem is already reported.
        Connection::Other(None) => NamedStore::Invalid,
        Connection::Other(Some(other)) => {
            report.add(
                Code::StoreInvalid,
                Some(store.span()),
                format!(
                    "`rate_limits.store` names `{name}`, whose driver is {other}; a store's driver \
                     is {REDIS_DRIVER} or {CLOUDFLARE_DRIVER}"
                ),
            );
            NamedStore::Invalid
        }
    }
}

/// The largest id a Cloudflare connection's plan writes (namespace + bindings - 1)
/// must be at most [`MAX_NAMESPACE_ID`].
pub(super) fn validate_namespace_ids(
    report: &mut Report<'_>,
    connections: &BTreeMap<String, Connection>,
    routes: &[Route],
) {
    let bindings = limits_of(routes);
    let more = bindings.len() as u64 - 1;
    for (name, connection) in connections {
        let Connection::Cloudflare {
            namespace: Some(namespace),
        } = connection
        else {
            continue;
        };
        let (namespace, span) = (*namespace.get_ref(), namespace.span());
        let last = namespace.saturating_add(more);
        if last > MAX_NAMESPACE_ID {
            report.add(
                Code::NamespaceInvalid,
                Some(span),
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
