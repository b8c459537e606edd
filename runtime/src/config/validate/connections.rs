//! The connections and the store: what each connection is to rate limits
//! (its driver, a Cloudflare connection's namespace and binding names, a
//! Redis connection's endpoint), which one `rate_limits.store` names, and
//! whether a Cloudflare connection's bindings are numbered within what JSON
//! reads exactly.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

use toml::Spanned;

use super::Report;
use crate::config::raw::{RawApplication, RawConnection};
use crate::config::{Code, MAX_NAMESPACE_ID, RedisEndpoint, Route};
use crate::limits::{BUILT_IN_LIMITS, Limit};
use crate::names::{binding_name, binding_prefix};

pub(super) const CLOUDFLARE_DRIVER: &str = "cloudflare_rate_limits";
pub(super) const REDIS_DRIVER: &str = "redis";

/// What rate limits know of one connection.
pub(super) enum ConnectionKind {
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
pub(super) enum StoreCheck {
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
pub(super) enum KnownDriver {
    Cloudflare { namespace: Option<u64> },
    Redis,
}

/// What each connection is to rate limits, reporting what rate limits own:
/// the driver, a Cloudflare connection (all of it) and a Redis connection's `url`.
pub(super) fn validate_connections(
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

pub(super) fn validate_store(
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

/// The largest id a Cloudflare connection's plan writes (namespace + bindings - 1)
/// must be at most [`MAX_NAMESPACE_ID`].
pub(super) fn validate_namespace_ids(
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
