//! The description as written: serde's shapes, each value with its place
//! (`Spanned`), loose enough that a wrong value is a diagnostic at its place
//! from the rules instead of a parse error that hides every other problem.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use toml::Spanned;

use super::Target;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawApplication {
    /// The application's name: what its Redis keys are named by.
    #[serde(default)]
    pub(super) name: Option<Spanned<toml::Value>>,
    #[serde(default)]
    pub(super) connections: BTreeMap<String, Spanned<RawConnection>>,
    #[serde(default)]
    pub(super) rate_limits: Option<RawRateLimits>,
    #[serde(default)]
    pub(super) deployables: Vec<Spanned<RawDeployable>>,
    #[serde(default)]
    pub(super) routes: Vec<Spanned<RawRoute>>,
}

/// A connection's settings as written, each with its place. Rate limits own
/// only `driver`, a Cloudflare connection's `namespace` and a Redis
/// connection's `url`; every other setting belongs to its driver.
pub(super) type RawConnection = BTreeMap<Spanned<String>, Spanned<toml::Value>>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRateLimits {
    #[serde(default)]
    pub(super) store: Option<Spanned<toml::Value>>,
    /// The Workers Analytics Engine dataset a Worker writes its data points to.
    #[serde(default)]
    pub(super) data_points: Option<Spanned<toml::Value>>,
    /// The built-in limits that only record what they would refuse, each
    /// entry with its place.
    #[serde(default)]
    pub(super) shadow: Option<Spanned<RawList>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDeployable {
    pub(super) name: String,
    pub(super) target: Target,
    pub(super) serves_api: bool,
    #[serde(default)]
    pub(super) declines: Vec<Spanned<String>>,
    #[serde(default)]
    pub(super) client_address: Option<Spanned<RawClientAddress>>,
    /// The most its in-memory counting may hold, in MiB (a value, so a
    /// wrong type is a diagnostic at its place).
    #[serde(default)]
    pub(super) memory_budget_mib: Option<Spanned<toml::Value>>,
}

/// A deployable's `client_address` as written: a source's name, a table of
/// trusted proxies (each entry with its place), or anything else, reported
/// as a diagnostic with its place instead of a parse error that hides the rest.
pub(super) enum RawClientAddress {
    Named(String),
    TrustedProxies(RawList),
    /// `{ cloudflare_via = [...] }`: Cloudflare's header, also from these relays.
    CloudflareVia(RawList),
    /// Another shape, described for the message (`an integer`, `a table with `x``).
    Other(String),
}

/// A list whose entries keep their places, or what was written instead.
pub(super) enum RawList {
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
                f.write_str(
                    "\"peer\", \"cloudflare\", { cloudflare_via = [...] } or { trusted_proxies = [...] }",
                )
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
                let mut via = None;
                let mut other = None;
                while let Some(key) = map.next_key::<String>()? {
                    if key == "trusted_proxies" {
                        proxies = Some(map.next_value::<RawList>()?);
                    } else if key == "cloudflare_via" {
                        via = Some(map.next_value::<RawList>()?);
                    } else {
                        map.next_value::<IgnoredAny>()?;
                        other.get_or_insert(key);
                    }
                }
                Ok(match (other, proxies, via) {
                    (Some(key), _, _) if key.starts_with("$__toml") => {
                        RawClientAddress::Other("a date".to_owned())
                    }
                    (Some(key), _, _) => RawClientAddress::Other(format!("a table with `{key}`")),
                    (None, Some(_), Some(_)) => RawClientAddress::Other(
                        "a table with both `trusted_proxies` and `cloudflare_via`".to_owned(),
                    ),
                    (None, Some(list), None) => RawClientAddress::TrustedProxies(list),
                    (None, None, Some(list)) => RawClientAddress::CloudflareVia(list),
                    (None, None, None) => RawClientAddress::Other("an empty table".to_owned()),
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
pub(super) struct RawRoute {
    pub(super) path: Spanned<String>,
    #[serde(default)]
    pub(super) rate_limit: Option<Spanned<RawRouteLimit>>,
}

/// Values, not numbers, so a wrong type is a diagnostic with its place
/// that hides nothing else.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRouteLimit {
    #[serde(default)]
    pub(super) requests: Option<Spanned<toml::Value>>,
    #[serde(default)]
    pub(super) window: Option<Spanned<toml::Value>>,
    /// The HTTP methods it counts (every method when absent).
    #[serde(default)]
    pub(super) methods: Option<Spanned<toml::Value>>,
    /// Whether the limit only records what it would refuse.
    #[serde(default)]
    pub(super) shadow: Option<Spanned<toml::Value>>,
}
