//! How a scenario is checked on Cloudflare itself (`harness cloudflare`),
//! where the binding is the real one: counted per location, cached on the
//! machine running the Worker and synced in the background ("permissive,
//! eventually consistent", Cloudflare's binding page), so a count can run
//! past its limit before the first refusal.
//!
//! A scenario runs there only when it says how (`on_cloudflare`), and each
//! expectation of a `send` may say it again (`on_cloudflare = { statuses =
//! ... }`). The marks are plain values; which expectation gets which by
//! default is [`crate::language::cloudflare_plan`]'s.

use std::borrow::Cow;
use std::fmt;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};

/// How one expectation is checked on Cloudflare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloudflareCheck {
    /// As written, as in the local run.
    Exact,
    /// Refusals start no earlier than the limit (the passes the expectation
    /// states before its first 429), and the first arrives by `refusal_by`
    /// times it: the traffic goes on until the first refusal or that many
    /// passes.
    Bounded {
        /// The multiple of the limit by which the first refusal must arrive.
        refusal_by: u32,
    },
    /// Not checked there (its result is not the limiter's on the edge).
    NotChecked,
}

impl CloudflareCheck {
    const NAMES: [&'static str; 2] = ["exact", "not_checked"];

    /// How the report's column names it: `exact`, `bounded x3`, `not checked`.
    pub fn label(self) -> String {
        match self {
            CloudflareCheck::Exact => "exact".to_owned(),
            CloudflareCheck::Bounded { refusal_by } => format!("bounded x{refusal_by}"),
            CloudflareCheck::NotChecked => "not checked".to_owned(),
        }
    }
}

impl fmt::Display for CloudflareCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label())
    }
}

impl<'de> Deserialize<'de> for CloudflareCheck {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct CheckVisitor;
        impl<'de> Visitor<'de> for CheckVisitor {
            type Value = CloudflareCheck;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("\"exact\", \"not_checked\", or { refusal_by = N }")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<CloudflareCheck, E> {
                match v {
                    "exact" => Ok(CloudflareCheck::Exact),
                    "not_checked" => Ok(CloudflareCheck::NotChecked),
                    _ => Err(E::unknown_variant(v, &CloudflareCheck::NAMES)),
                }
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<CloudflareCheck, A::Error> {
                let mut refusal_by = None;
                while let Some(key) = map.next_key::<String>()? {
                    if key != "refusal_by" {
                        return Err(de::Error::unknown_field(&key, &["refusal_by"]));
                    }
                    refusal_by = Some(map.next_value::<u32>()?);
                }
                match refusal_by {
                    Some(0) => Err(de::Error::custom(
                        "`refusal_by` is a multiple of the limit: at least 1",
                    )),
                    Some(refusal_by) => Ok(CloudflareCheck::Bounded { refusal_by }),
                    None => Err(de::Error::missing_field("refusal_by")),
                }
            }
        }
        deserializer.deserialize_any(CheckVisitor)
    }
}

impl JsonSchema for CloudflareCheck {
    fn schema_name() -> Cow<'static, str> {
        "CloudflareCheck".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "How an expectation is checked on Cloudflare: exact (as written), not_checked, or { refusal_by = N }: bounded, the first refusal no earlier than the limit and by N times it.",
            "oneOf": [
                { "type": "string", "enum": CloudflareCheck::NAMES },
                {
                    "type": "object",
                    "properties": { "refusal_by": { "type": "integer", "minimum": 1 } },
                    "required": ["refusal_by"],
                    "additionalProperties": false
                }
            ]
        })
    }
}

/// Per expectation of one `send`: how each is checked on Cloudflare,
/// overriding the scenario's mark. Unnamed ones keep their default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SendChecksOnCloudflare {
    /// The status sequence.
    #[serde(default)]
    pub statuses: Option<CloudflareCheck>,
    /// The status counts.
    #[serde(default)]
    pub counts: Option<CloudflareCheck>,
    /// `Retry-After` of every 429 (exact by default).
    #[serde(default)]
    pub retry_after: Option<CloudflareCheck>,
    /// The headers of every response (exact by default).
    #[serde(default)]
    pub headers: Option<CloudflareCheck>,
    /// The body fields of every response (exact by default).
    #[serde(default)]
    pub body: Option<CloudflareCheck>,
    /// The latency bounds (not checked by default: the edge's latency is the network's).
    #[serde(default)]
    pub latency: Option<CloudflareCheck>,
}
