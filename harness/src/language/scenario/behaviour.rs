//! How a scenario's emulated bindings ([`Behaviour`]) and its real Redis
//! ([`RedisBehaviour`]) behave, at the start and after a step changes them.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};

/// The key in `bindings` that stands for every planned binding.
pub const ALL_BINDINGS: &str = "*";

/// How a native scenario's real Redis behaves (`redis_starts` at the start,
/// `set_redis` mid-run). Each is done to the real server(s).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum RedisBehaviour {
    /// Answers: after `hanging` it gets SIGCONT, after `slow` CLIENT UNPAUSE,
    /// after `down` a fresh server starts on the same port (empty counts).
    Healthy,
    /// Killed: nothing listens on its port.
    Down,
    /// Stopped with SIGSTOP: connections stay open and nothing answers.
    Hanging,
    /// `CLIENT PAUSE ms ALL`: it answers nothing for `ms` from now.
    Slow {
        /// How long it answers nothing, in ms.
        ms: u64,
    },
    /// Killed and started again on the same port: every count is gone (mid-run only).
    Restarted,
    /// `SCRIPT FLUSH`: the next EVALSHA is NOSCRIPT (mid-run only).
    ScriptsFlushed,
    /// Nothing ever listens at the Redis URL (at the start only).
    Missing,
    /// A cluster's busiest master killed (SIGKILL) once its replica has its
    /// writes; the replica is promoted after the node timeout (cluster,
    /// mid-run only). `healthy` then waits for the promotion and starts the
    /// killed node again, as the new master's replica.
    FailedOver,
    /// Every cluster slot holding keys half moved to another master, as a
    /// resharding leaves it: the keys moved, the slot still the old
    /// master's, so a client is sent on with ASK (cluster, mid-run only).
    Migrating,
    /// Those slots (or, without `migrating` first, every slot holding keys)
    /// moved for good: a client asking the old master is sent on with
    /// MOVED (cluster, mid-run only).
    Resharded,
}

impl fmt::Display for RedisBehaviour {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RedisBehaviour::Healthy => f.write_str("healthy"),
            RedisBehaviour::Down => f.write_str("down"),
            RedisBehaviour::Hanging => f.write_str("hanging"),
            RedisBehaviour::Slow { ms } => write!(f, "slow = {{ ms = {ms} }}"),
            RedisBehaviour::Restarted => f.write_str("restarted"),
            RedisBehaviour::ScriptsFlushed => f.write_str("scripts_flushed"),
            RedisBehaviour::Missing => f.write_str("missing"),
            RedisBehaviour::FailedOver => f.write_str("failed_over"),
            RedisBehaviour::Migrating => f.write_str("migrating"),
            RedisBehaviour::Resharded => f.write_str("resharded"),
        }
    }
}

/// How an emulated binding behaves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Behaviour {
    /// Counts like Cloudflare's simulator.
    Healthy,
    /// Not in the Worker's env.
    Missing,
    /// `limit()` throws synchronously.
    Throwing,
    /// `limit()` returns a rejected promise.
    Rejecting,
    /// `limit()` resolves to something that is not `{ success: boolean }`.
    Malformed,
    /// The healthy answer after this many ms.
    SlowMs(u64),
    /// `limit()` never settles.
    Hanging,
}

/// A binding's behaviour in a `bindings` or `set_bindings` table: by its
/// name, else by [`ALL_BINDINGS`]; `None` when neither is written.
pub fn behaviour_of<'a>(
    bindings: &'a BTreeMap<String, Behaviour>,
    name: &str,
) -> Option<&'a Behaviour> {
    bindings.get(name).or_else(|| bindings.get(ALL_BINDINGS))
}

impl Behaviour {
    const NAMES: [&'static str; 6] = [
        "healthy",
        "missing",
        "throwing",
        "rejecting",
        "malformed",
        "hanging",
    ];

    /// The JSON the emulated binding takes.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Behaviour::SlowMs(ms) => serde_json::json!({ "slow_ms": ms }),
            named => serde_json::Value::String(named.to_string()),
        }
    }
}

impl fmt::Display for Behaviour {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Behaviour::Healthy => f.write_str("healthy"),
            Behaviour::Missing => f.write_str("missing"),
            Behaviour::Throwing => f.write_str("throwing"),
            Behaviour::Rejecting => f.write_str("rejecting"),
            Behaviour::Malformed => f.write_str("malformed"),
            Behaviour::Hanging => f.write_str("hanging"),
            Behaviour::SlowMs(ms) => write!(f, "slow by {ms} ms"),
        }
    }
}

impl<'de> Deserialize<'de> for Behaviour {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct BehaviourVisitor;
        impl<'de> Visitor<'de> for BehaviourVisitor {
            type Value = Behaviour;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("one of \"healthy\", \"missing\", \"throwing\", \"rejecting\", \"malformed\", \"hanging\", or { slow_ms = N }")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Behaviour, E> {
                Ok(match v {
                    "healthy" => Behaviour::Healthy,
                    "missing" => Behaviour::Missing,
                    "throwing" => Behaviour::Throwing,
                    "rejecting" => Behaviour::Rejecting,
                    "malformed" => Behaviour::Malformed,
                    "hanging" => Behaviour::Hanging,
                    _ => return Err(E::unknown_variant(v, &Behaviour::NAMES)),
                })
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Behaviour, A::Error> {
                let mut slow = None;
                while let Some(key) = map.next_key::<String>()? {
                    if key != "slow_ms" {
                        return Err(de::Error::unknown_field(&key, &["slow_ms"]));
                    }
                    slow = Some(map.next_value::<u64>()?);
                }
                slow.map(Behaviour::SlowMs)
                    .ok_or_else(|| de::Error::missing_field("slow_ms"))
            }
        }
        deserializer.deserialize_any(BehaviourVisitor)
    }
}

impl JsonSchema for Behaviour {
    fn schema_name() -> Cow<'static, str> {
        "Behaviour".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "How an emulated binding behaves: healthy, missing (not in env), throwing (synchronously), rejecting, malformed (no boolean success), hanging (never settles), or { slow_ms = N }.",
            "oneOf": [
                { "type": "string", "enum": Behaviour::NAMES },
                {
                    "type": "object",
                    "properties": { "slow_ms": { "type": "integer", "minimum": 0 } },
                    "required": ["slow_ms"],
                    "additionalProperties": false
                }
            ]
        })
    }
}
