//! Scenario files: what QA write. A file holds shared defaults and a list of
//! `[[scenario]]`s; each names an application, the emulated bindings'
//! behaviour, how many isolates, a sequence of steps and what to expect.
//!
//! Parsing keeps spans, so every error (and every failed expectation) points
//! at `file:line:col`. The JSON Schema of this format is generated from these
//! types (see `scenarios/scenario.schema.json`).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::net::Ipv4Addr;
use std::ops::Range;
use std::path::{Path, PathBuf};

use runtime::config::Location;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use toml::Spanned;

use crate::language::cloudflare::{CloudflareCheck, SendChecksOnCloudflare};

/// The tag that marks a scenario as slow: skipped unless `--include-ignored`.
pub const SLOW_TAG: &str = "slow";

/// The key in `bindings` that stands for every planned binding.
pub const ALL_BINDINGS: &str = "*";

/// The file of a scenarios directory that lists the scenarios expected to
/// fail, each with its reason: not a scenario file.
pub const EXPECTATIONS_FILE: &str = "expectations.toml";

/// The file of a scenarios directory that lists where the two counting
/// cores differ by design, each with its reason: not a scenario file.
pub const DIFFERENTIAL_FILE: &str = "differential.toml";

/// A scenario file as written.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(
    title = "Rate-limit conformance scenarios",
    description = "Scenarios the conformance harness runs against a real workerd. See scenarios/README.md."
)]
pub struct ScenarioFile {
    /// Default application description for every scenario here: a TOML file, relative to this file.
    #[serde(default)]
    pub application: Option<String>,
    /// Default deployable (by name) the scenarios run.
    #[serde(default)]
    pub deployable: Option<String>,
    /// The scenarios.
    #[serde(default)]
    #[schemars(with = "Vec<Scenario>")]
    pub scenario: Vec<Spanned<Scenario>>,
}

/// One scenario: a named trial.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Its name; the trial is `FILE::NAME`.
    pub name: String,
    /// Tags; `slow` marks scenarios that wait for real time, skipped by default.
    #[serde(default)]
    pub tags: Vec<String>,
    /// Which clock the scenario's processes read: the scenario clock (the
    /// default, started at a minute's beginning and moved by the steps) or the
    /// wall clock (real windows: tag it slow).
    #[serde(default)]
    pub clock: ClockKind,
    /// The application description, a TOML file relative to this file (overrides the file's default).
    #[serde(default)]
    pub application: Option<String>,
    /// The application description written inline (instead of `application`).
    #[serde(default)]
    pub application_inline: Option<String>,
    /// The deployable to run (overrides the file's default).
    #[serde(default)]
    pub deployable: Option<String>,
    /// How many isolates (separate workerd processes) run the deployable. Traffic goes round-robin unless a step names one.
    #[serde(default = "one")]
    #[schemars(range(min = 1, max = 16))]
    pub isolates: usize,
    /// Each binding's behaviour at the start, by binding name or `*` for all; the rest are healthy.
    #[serde(default)]
    #[schemars(with = "Option<BTreeMap<String, Behaviour>>")]
    pub bindings: Option<Spanned<BTreeMap<String, Behaviour>>>,
    /// For a native deployable counting in Redis: one real `redis-server`
    /// (`server`, the default) or a real three-master Redis Cluster
    /// (`cluster`), started for the scenario and stopped with it.
    #[serde(default)]
    pub redis: RedisKind,
    /// For a native deployable counting in Redis: the store's behaviour at
    /// the start (`healthy` by default, `down`, `hanging`, `slow = { ms = N }`
    /// or `missing`).
    #[serde(default)]
    #[schemars(with = "Option<StoreBehaviour>")]
    pub store: Option<Spanned<StoreBehaviour>>,
    /// For an invalid application: the diagnostic codes `check` must report (and no steps).
    #[serde(default)]
    #[schemars(with = "Option<Vec<String>>")]
    pub expect_diagnostics: Option<Spanned<Vec<String>>>,
    /// The steps, in order.
    #[serde(default)]
    #[schemars(with = "Vec<Step>")]
    pub steps: Vec<Spanned<Step>>,
    /// What must hold once the steps are done.
    #[serde(default)]
    #[schemars(with = "Option<FinalExpectations>")]
    pub expect: Option<Spanned<FinalExpectations>>,
    /// Run on Cloudflare itself too (`harness cloudflare`), and how its
    /// status expectations are checked there: `"exact"`, or `{ refusal_by
    /// = N }` (bounded: the first refusal no earlier than the limit and by N
    /// times it). Without it the scenario runs only here.
    #[serde(default)]
    #[schemars(with = "Option<CloudflareCheck>")]
    pub on_cloudflare: Option<Spanned<CloudflareCheck>>,
}

fn one() -> usize {
    1
}

/// The clock a scenario's processes (each isolate's deployable and the
/// binding store) read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ClockKind {
    /// The wall clock plus an offset the harness sets: the scenario starts at
    /// the beginning of a minute, and `wait_for_window`, `wait_for_room` and
    /// `advance_clock` move it instead of sleeping.
    #[default]
    Scenario,
    /// The wall clock itself: windows end on real boundaries and the harness
    /// waits for them, so a fault in the clock plumbing cannot hide.
    Wall,
}

/// Which Redis a native scenario counts in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RedisKind {
    /// One `redis-server`.
    #[default]
    Server,
    /// Three `redis-server --cluster-enabled yes` joined into one cluster.
    Cluster,
}

/// How a native scenario's real Redis behaves (`store` at the start,
/// `set_store` mid-run). Each is done to the real server(s).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum StoreBehaviour {
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
    /// Nothing ever listens at the store's URL (at the start only).
    Missing,
}

impl fmt::Display for StoreBehaviour {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreBehaviour::Healthy => f.write_str("healthy"),
            StoreBehaviour::Down => f.write_str("down"),
            StoreBehaviour::Hanging => f.write_str("hanging"),
            StoreBehaviour::Slow { ms } => write!(f, "slow = {{ ms = {ms} }}"),
            StoreBehaviour::Restarted => f.write_str("restarted"),
            StoreBehaviour::ScriptsFlushed => f.write_str("scripts_flushed"),
            StoreBehaviour::Missing => f.write_str("missing"),
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

/// One step. Exactly one action: `send`, `set_bindings`, `set_store`,
/// `wait_for_window`, `wait_for_room`, `advance_clock`, `restart_isolate`,
/// `sleep_ms` or `limit`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// Fire requests.
    #[serde(default)]
    pub send: Option<SendRequests>,
    /// Change bindings' behaviour (by name, or `*`) in every isolate, without restarting workerd.
    #[serde(default)]
    #[schemars(with = "Option<BTreeMap<String, Behaviour>>")]
    pub set_bindings: Option<Spanned<BTreeMap<String, Behaviour>>>,
    /// Change a native scenario's Redis: `healthy`, `down`, `hanging`,
    /// `slow = { ms = N }`, `restarted` or `scripts_flushed`.
    #[serde(default)]
    pub set_store: Option<StoreBehaviour>,
    /// Move to the next boundary of a window this many seconds long (10 or
    /// 60): the scenario clock jumps there, the wall clock is waited for.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub wait_for_window: Option<u32>,
    /// Move to the next window boundary only if less than `seconds` are left
    /// in the current window: the next sends then fit in one window.
    #[serde(default)]
    pub wait_for_room: Option<WaitForRoom>,
    /// Move the scenario clock forward, at once (not with `clock = "wall"`).
    #[serde(default)]
    pub advance_clock: Option<AdvanceClock>,
    /// Restart this isolate (0-based): a new workerd process, with empty memory.
    #[serde(default)]
    pub restart_isolate: Option<usize>,
    /// Pause.
    #[serde(default)]
    pub sleep_ms: Option<u64>,
    /// Call one binding's `limit()` directly, with raw options, and say what it must give.
    #[serde(default)]
    pub limit: Option<crate::language::probe::LimitCall>,
    /// What the responses of a `send` must show.
    #[serde(default)]
    #[schemars(with = "Option<SendExpectations>")]
    pub expect: Option<Spanned<SendExpectations>>,
}

/// How far to move the scenario clock.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AdvanceClock {
    /// Seconds to add to the scenario clock.
    #[schemars(range(min = 1))]
    pub seconds: u32,
}

/// What one validated step does: exactly one action, matched exhaustively by
/// the engine, so a new kind of step cannot be forgotten there.
#[derive(Debug, Clone, Copy)]
pub enum Action<'a> {
    /// Fire requests, then judge them against `expect`.
    Send {
        /// The requests.
        send: &'a SendRequests,
        /// What their responses must show, if written.
        expect: Option<&'a Spanned<SendExpectations>>,
    },
    /// Change bindings' behaviour in every isolate.
    SetBindings(&'a BTreeMap<String, Behaviour>),
    /// Do this to a native scenario's Redis.
    SetStore(StoreBehaviour),
    /// Move to the next boundary of a window of this many seconds.
    WaitForWindow(u32),
    /// Move to the next boundary when too little is left of the window.
    WaitForRoom(WaitForRoom),
    /// Move the scenario clock forward by this many seconds.
    AdvanceClock(u32),
    /// Restart this isolate.
    RestartIsolate(usize),
    /// Pause this many ms of real time.
    SleepMs(u64),
    /// One raw `limit()` call on a binding, and what it must give.
    Limit(&'a crate::language::probe::LimitCall),
}

impl Step {
    /// The one action this step does, or why it is not a step.
    pub fn action(&self) -> Result<Action<'_>, &'static str> {
        let Step {
            send,
            set_bindings,
            set_store,
            wait_for_window,
            wait_for_room,
            advance_clock,
            restart_isolate,
            sleep_ms,
            limit,
            expect,
        } = self;
        let mut actions = [
            send.as_ref().map(|send| Action::Send {
                send,
                expect: expect.as_ref(),
            }),
            set_bindings
                .as_ref()
                .map(|b| Action::SetBindings(b.get_ref())),
            set_store.map(Action::SetStore),
            wait_for_window.map(Action::WaitForWindow),
            wait_for_room.map(Action::WaitForRoom),
            advance_clock.map(|a| Action::AdvanceClock(a.seconds)),
            restart_isolate.map(Action::RestartIsolate),
            sleep_ms.map(Action::SleepMs),
            limit.as_ref().map(Action::Limit),
        ]
        .into_iter()
        .flatten();
        let (Some(action), None) = (actions.next(), actions.next()) else {
            return Err(
                "a step does exactly one of: send, set_bindings, set_store, wait_for_window, wait_for_room, advance_clock, restart_isolate, sleep_ms, limit",
            );
        };
        if expect.is_some() && send.is_none() {
            return Err("`expect` belongs to a `send` step");
        }
        Ok(action)
    }
}

/// Room needed in a clock-aligned window.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WaitForRoom {
    /// The window's length in seconds (10 or 60).
    #[schemars(range(min = 1))]
    pub window: u32,
    /// The seconds that must be left in it.
    pub seconds: u32,
}

/// Requests to fire.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SendRequests {
    /// How many requests.
    #[schemars(range(min = 1))]
    pub requests: usize,
    /// The path, `/api/items` by default.
    #[serde(default = "default_path")]
    pub path: String,
    /// As this signed-in caller (sent in `X-Test-Caller`); with `address` or
    /// `distinct_addresses`, a caller from that address.
    #[serde(default)]
    pub caller: Option<String>,
    /// From this address (sent in `CF-Connecting-IP`).
    #[serde(default)]
    pub address: Option<String>,
    /// From a new address for every request (not with `address`).
    #[serde(default)]
    pub distinct_addresses: bool,
    /// From this loopback address (`127.x.y.z`), the socket peer a native
    /// instance sees: the harness connects from it (127.0.0.1 by default).
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub peer: Option<Spanned<String>>,
    /// An `X-Forwarded-For` chain, sent as one header: its entries left to
    /// right, as proxies append them (the client first, the last proxy's own
    /// peer last).
    #[serde(default)]
    pub forwarded_for: Vec<String>,
    /// Extra request headers.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// How many requests in flight at once; 1 (sequential) by default.
    #[serde(default = "one")]
    #[schemars(range(min = 1))]
    pub concurrency: usize,
    /// Pause between the starts of consecutive requests.
    #[serde(default)]
    pub spacing_ms: u64,
    /// Send only to this isolate (0-based); by default round-robin over all.
    #[serde(default)]
    pub isolate: Option<usize>,
}

fn default_path() -> String {
    "/api/items".to_owned()
}

impl SendRequests {
    /// The loopback address to connect from, if the step names one.
    pub fn peer_address(&self) -> Result<Option<Ipv4Addr>, String> {
        let Some(peer) = &self.peer else {
            return Ok(None);
        };
        match peer.get_ref().parse::<Ipv4Addr>() {
            Ok(ip) if ip.is_loopback() => Ok(Some(ip)),
            _ => Err(format!(
                "`peer` is `{}`: the harness connects from a loopback address, 127.x.y.z \
                 (Linux routes all of 127.0.0.0/8 to this machine)",
                peer.get_ref()
            )),
        }
    }
}

/// What the responses of one `send` must show. Every field is optional.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SendExpectations {
    /// The statuses in request order, such as `"120 x 200 then 429"` or
    /// `"200 then * x 429"` (`*` is the rest).
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub statuses: Option<Spanned<String>>,
    /// How many responses had each status, such as `{ 200 = 120, 429 = 1 }`.
    #[serde(default)]
    #[schemars(with = "Option<BTreeMap<String, usize>>")]
    pub counts: Option<Spanned<BTreeMap<String, usize>>>,
    /// No response may be a 5xx (or fail to arrive). True unless set to false.
    #[serde(default = "yes")]
    pub no_5xx: bool,
    /// `Retry-After` of every 429, in seconds.
    #[serde(default)]
    #[schemars(with = "Option<u32>")]
    pub retry_after: Option<Spanned<u32>>,
    /// Headers every response must have, with these values (names are case-insensitive).
    #[serde(default)]
    #[schemars(with = "Option<BTreeMap<String, String>>")]
    pub headers: Option<Spanned<BTreeMap<String, String>>>,
    /// JSON fields every response body must have, with these values.
    #[serde(default)]
    #[schemars(with = "Option<BTreeMap<String, serde_json::Value>>")]
    pub body: Option<Spanned<BTreeMap<String, toml::Value>>>,
    /// Latency bounds over this step's requests.
    #[serde(default)]
    #[schemars(with = "Option<Latency>")]
    pub latency: Option<Spanned<Latency>>,
    /// Round trips the native scenario's Redis served during this step,
    /// from its `INFO commandstats` read before and after (summed over a
    /// cluster's nodes).
    #[serde(default)]
    #[schemars(with = "Option<RedisCalls>")]
    pub redis_calls: Option<Spanned<RedisCalls>>,
    /// How these expectations are checked on Cloudflare, where it differs
    /// from the scenario's `on_cloudflare` (by expectation name).
    #[serde(default)]
    #[schemars(with = "Option<SendChecksOnCloudflare>")]
    pub on_cloudflare: Option<Spanned<SendChecksOnCloudflare>>,
}

/// How many script commands Redis ran during one step. Every field is optional.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RedisCalls {
    /// `EVALSHA` calls: one per limit of a counted request (pipelined in one round trip).
    #[serde(default)]
    pub evalsha: Option<u64>,
    /// `EVAL` calls: sent after Redis answered NOSCRIPT (restarted or flushed).
    #[serde(default)]
    pub eval: Option<u64>,
}

fn yes() -> bool {
    true
}

/// Latency bounds in ms. Set them with room for a loaded 2-core machine.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Latency {
    /// No request faster than this.
    #[serde(default)]
    pub min_ms: Option<u64>,
    /// No request slower than this.
    #[serde(default)]
    pub max_ms: Option<u64>,
    /// The median at most this.
    #[serde(default)]
    pub p50_ms: Option<u64>,
    /// The 99th percentile at most this.
    #[serde(default)]
    pub p99_ms: Option<u64>,
}

/// What must hold once the steps are done.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FinalExpectations {
    /// The `rate_limits.fallback` lines each isolate must have logged. Any
    /// fallback line not listed here is a failure; with no list, none may appear.
    #[serde(default)]
    pub fallback: Vec<FallbackExpectation>,
    /// The keys that reached each binding, by binding name (exactly these, in any order).
    #[serde(default)]
    #[schemars(with = "Option<BTreeMap<String, Vec<String>>>")]
    pub binding_keys: Option<Spanned<BTreeMap<String, Vec<String>>>>,
}

/// One kind of fallback line, and how often each isolate logs it.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FallbackExpectation {
    /// The binding named in the line.
    pub binding: String,
    /// `missing`, `failed` or `timed_out`.
    pub reason: FallbackReasonName,
    /// Lines per isolate (per workerd process, so a restarted isolate counts anew). 1 by default.
    #[serde(default = "one")]
    pub per_isolate: usize,
}

/// The reasons a fallback line gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[allow(
    missing_docs,
    reason = "each variant is the reason of the same name in runtime::limiter, and a doc comment here would change the committed JSON Schema"
)]
pub enum FallbackReasonName {
    Missing,
    Failed,
    TimedOut,
}

impl FallbackReasonName {
    /// As a fallback line spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            FallbackReasonName::Missing => "missing",
            FallbackReasonName::Failed => "failed",
            FallbackReasonName::TimedOut => "timed_out",
        }
    }
}

/// A place in a scenario file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// The file, as the user named it (or `scenarios/...`).
    pub file: PathBuf,
    /// Line and column (1-based), as editors count them.
    pub location: Location,
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file.display(), self.location)
    }
}

/// A scenario file that could not be read or does not make sense, pointing at where.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{place}: {message}")]
pub struct ScenarioError {
    /// Where in the file.
    pub place: Place,
    /// What is wrong there.
    pub message: String,
}

/// A status sequence item: `count x status`, where `None` is "the rest".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    /// How many requests; `None` for every request left.
    pub count: Option<usize>,
    /// Their status.
    pub status: u16,
}

/// Parses `"120 x 200 then 429"` into runs.
pub fn parse_statuses(text: &str) -> Result<Vec<Run>, String> {
    let mut runs = Vec::new();
    let parts: Vec<&str> = text.split("then").map(str::trim).collect();
    for (i, part) in parts.iter().enumerate() {
        let (count, status) = match part.split_once('x') {
            Some((count, status)) => {
                let count = count.trim();
                let count = if count == "*" {
                    if i + 1 != parts.len() {
                        return Err(format!(
                            "`* x` (the rest) may only end the sequence, not `{part}`"
                        ));
                    }
                    None
                } else {
                    Some(
                        count
                            .parse::<usize>()
                            .map_err(|_| format!("`{count}` is not a count in `{part}`"))?,
                    )
                };
                (count, status.trim())
            }
            None => (Some(1), *part),
        };
        let status = status
            .parse::<u16>()
            .ok()
            .filter(|s| (100..=599).contains(s))
            .ok_or_else(|| {
                format!(
                    "`{status}` is not an HTTP status in `{part}`; write e.g. `120 x 200 then 429`"
                )
            })?;
        runs.push(Run { count, status });
    }
    Ok(runs)
}

/// Expands runs to one status per request, checking they add up to `requests`.
pub fn expand_statuses(runs: &[Run], requests: usize) -> Result<Vec<u16>, String> {
    let fixed: usize = runs.iter().filter_map(|r| r.count).sum();
    let rest = runs.iter().any(|r| r.count.is_none());
    if fixed > requests || (!rest && fixed != requests) {
        return Err(format!(
            "the sequence counts {fixed} responses but the step sends {requests} requests"
        ));
    }
    Ok(runs
        .iter()
        .flat_map(|r| std::iter::repeat_n(r.status, r.count.unwrap_or(requests - fixed)))
        .collect())
}

/// A scenario ready to run: defaults applied, references resolved, checked for sense.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// `FILE::NAME`, the trial's name.
    pub trial_name: String,
    /// Tagged slow: run only when asked for.
    pub ignored: bool,
    /// The application description, read from its file or inline.
    pub application_toml: String,
    /// The deployable the scenario runs.
    pub deployable: String,
    /// The scenario and its file, shared by trials so failures can point into it.
    pub scenario: std::sync::Arc<ScenarioSource>,
}

impl Prepared {
    /// Whether its deployable is native: it runs as `native-fixture`
    /// processes and asks no Cloudflare binding, so no counting core plays
    /// a part (the differential check leaves it out).
    pub fn runs_natively(&self) -> bool {
        runtime::config::Application::from_toml(&self.application_toml).is_ok_and(|app| {
            app.deployable(&self.deployable)
                .is_some_and(|d| d.target == runtime::config::Target::Native)
        })
    }

    /// Whether it runs natively and counts in Redis: the harness starts a
    /// real `redis-server` (or a cluster of them) for it.
    pub fn counts_in_redis(&self) -> bool {
        runtime::config::Application::from_toml(&self.application_toml).is_ok_and(|app| {
            app.deployable(&self.deployable).is_some_and(|d| {
                d.target == runtime::config::Target::Native
                    && matches!(app.counting(d), runtime::config::Counting::Redis { .. })
            })
        })
    }
}

/// The parsed scenario with its file's text, for pointing at places later.
#[derive(Debug)]
pub struct ScenarioSource {
    /// The file, as the user named it.
    pub file: PathBuf,
    /// Its text: spans are offsets into it.
    pub text: String,
    /// The scenario, every value with its span.
    pub scenario: Spanned<Scenario>,
}

impl ScenarioSource {
    /// The place of a span in this scenario's file.
    pub fn place(&self, span: Range<usize>) -> Place {
        Place {
            file: self.file.clone(),
            location: Location::of_offset(&self.text, span.start),
        }
    }

    /// An error at a span of this scenario's file.
    pub fn error(&self, span: Range<usize>, message: impl Into<String>) -> ScenarioError {
        ScenarioError {
            place: self.place(span),
            message: message.into(),
        }
    }
}

/// Reads every scenario of one file. `display_path` is how the file is named
/// in trial names and errors (relative to the scenarios directory's parent).
pub fn load_file(path: &Path, display_path: &Path) -> Result<Vec<Prepared>, ScenarioError> {
    let at_start = |message: String| ScenarioError {
        place: Place {
            file: display_path.to_owned(),
            location: Location { line: 1, column: 1 },
        },
        message,
    };
    let text = std::fs::read_to_string(path).map_err(|e| at_start(format!("cannot read: {e}")))?;
    let file: ScenarioFile = toml::from_str(&text).map_err(|e| ScenarioError {
        place: Place {
            file: display_path.to_owned(),
            location: e.span().map_or(Location { line: 1, column: 1 }, |s| {
                Location::of_offset(&text, s.start)
            }),
        },
        message: e.message().trim().to_owned(),
    })?;
    if file.scenario.is_empty() {
        return Err(at_start("the file has no [[scenario]]".to_owned()));
    }
    let base = path.parent().unwrap_or(Path::new("."));
    let mut names = std::collections::BTreeSet::new();
    let mut prepared = Vec::new();
    let (default_app, default_deployable) = (file.application.clone(), file.deployable.clone());
    for scenario in file.scenario {
        let source = std::sync::Arc::new(ScenarioSource {
            file: display_path.to_owned(),
            text: text.clone(),
            scenario,
        });
        let span = source.scenario.span();
        let s = source.scenario.get_ref();
        if !names.insert(s.name.clone()) {
            return Err(source.error(span, format!("two scenarios are named `{}`", s.name)));
        }
        let application_toml = match (
            &s.application_inline,
            s.application.as_ref().or(default_app.as_ref()),
        ) {
            (Some(inline), _) => inline.clone(),
            (None, Some(app_path)) => {
                std::fs::read_to_string(base.join(app_path)).map_err(|e| {
                    source.error(
                        span.clone(),
                        format!("cannot read application `{app_path}`: {e}"),
                    )
                })?
            }
            (None, None) => {
                return Err(source.error(
                    span,
                    "no application: set `application` (a file) or `application_inline`",
                ));
            }
        };
        let deployable = s
            .deployable
            .clone()
            .or_else(|| default_deployable.clone())
            .unwrap_or_else(|| "edge".to_owned());
        check_sense(&source)?;
        check_deployable_sense(&source, &application_toml, &deployable)?;
        check_cloudflare_sense(&source, &application_toml, &deployable)?;
        prepared.push(Prepared {
            trial_name: format!("{}::{}", display_path.display(), s.name),
            ignored: s.tags.iter().any(|t| t == SLOW_TAG),
            application_toml,
            deployable,
            scenario: source.clone(),
        });
    }
    Ok(prepared)
}

/// The checks that need no application: each step does one thing, sequences parse and add up.
fn check_sense(source: &ScenarioSource) -> Result<(), ScenarioError> {
    let s = source.scenario.get_ref();
    if s.isolates == 0 {
        return Err(source.error(source.scenario.span(), "`isolates` must be at least 1"));
    }
    if let Some(codes) = &s.expect_diagnostics {
        if !s.steps.is_empty() {
            return Err(source.error(
                codes.span(),
                "a scenario that expects diagnostics has no steps",
            ));
        }
        for code in codes.get_ref() {
            code.parse::<runtime::Code>()
                .map_err(|e| source.error(codes.span(), e.to_string()))?;
        }
    }
    if let Some(store) = &s.store {
        check_store_at_start(s, *store.get_ref()).map_err(|m| source.error(store.span(), m))?;
    }
    for step in &s.steps {
        let action = step
            .get_ref()
            .action()
            .map_err(|m| source.error(step.span(), m))?;
        check_action(s, action)
            .map_err(|(span, m)| source.error(span.unwrap_or_else(|| step.span()), m))?;
    }
    Ok(())
}

/// One step's own sense; the error's span is `None` for the whole step.
fn check_action(s: &Scenario, action: Action<'_>) -> Result<(), (Option<Range<usize>>, String)> {
    let whole = |m: &str| Err((None, m.to_owned()));
    let isolate_exists = |isolate: usize| {
        if isolate < s.isolates {
            Ok(())
        } else {
            Err((
                None,
                format!(
                    "isolate {isolate} does not exist: the scenario has {} (numbered from 0)",
                    s.isolates
                ),
            ))
        }
    };
    match action {
        Action::WaitForWindow(0) => whole("a window is a length in seconds, at least 1"),
        Action::WaitForRoom(room) if room.window == 0 => {
            whole("a window is a length in seconds, at least 1")
        }
        Action::WaitForRoom(room) if room.seconds > room.window => {
            whole("`wait_for_room` cannot need more seconds than the window has")
        }
        Action::AdvanceClock(_) if s.clock == ClockKind::Wall => whole(
            "`advance_clock` moves the scenario clock; a `clock = \"wall\"` scenario waits for real time (use `wait_for_window` or `sleep_ms`)",
        ),
        Action::AdvanceClock(0) => whole("`advance_clock` needs at least 1 second"),
        Action::RestartIsolate(isolate) => isolate_exists(isolate),
        Action::SetStore(behaviour) => check_store_change(s, behaviour).map_err(|m| (None, m)),
        Action::Limit(call) => isolate_exists(call.isolate),
        Action::Send { send, expect } => {
            if let Some(isolate) = send.isolate {
                isolate_exists(isolate)?;
            }
            check_send(send, expect)
        }
        Action::SetBindings(_)
        | Action::WaitForWindow(_)
        | Action::WaitForRoom(_)
        | Action::AdvanceClock(_)
        | Action::SleepMs(_) => Ok(()),
    }
}

/// The checks that need the application: Redis steps and expectations
/// belong to a native deployable counting in Redis, and Cloudflare bindings
/// to a Workers one. An application that does not validate, or lacks the
/// deployable, is reported when the scenario runs.
fn check_deployable_sense(
    source: &ScenarioSource,
    application_toml: &str,
    deployable: &str,
) -> Result<(), ScenarioError> {
    let Ok(app) = runtime::config::Application::from_toml(application_toml) else {
        return Ok(());
    };
    let Some(d) = app.deployable(deployable) else {
        return Ok(());
    };
    let s = source.scenario.get_ref();
    let native = d.target == runtime::config::Target::Native;
    let redis = matches!(app.counting(d), runtime::config::Counting::Redis { .. });
    let no_redis = format!(
        "is for a native deployable counting in Redis, and `{deployable}` {}",
        if native {
            "does not count in Redis (its store is not a Redis connection, or it serves no API)"
        } else {
            "is a Workers deployable"
        }
    );
    let no_bindings = format!(
        "is for a Workers deployable's Cloudflare bindings; `{deployable}` is native (its store is Redis: use `store`, `set_store`, `redis_calls`)"
    );
    let whole = source.scenario.span();
    if !redis {
        if let Some(store) = &s.store {
            return Err(source.error(store.span(), format!("`store` {no_redis}")));
        }
        if s.redis != RedisKind::Server {
            return Err(source.error(whole, format!("`redis` {no_redis}")));
        }
    }
    if native && let Some(bindings) = &s.bindings {
        return Err(source.error(bindings.span(), format!("`bindings` {no_bindings}")));
    }
    if native
        && let Some(keys) = s
            .expect
            .as_ref()
            .and_then(|e| e.get_ref().binding_keys.as_ref())
    {
        return Err(source.error(keys.span(), format!("`binding_keys` {no_bindings}")));
    }
    for step in &s.steps {
        let what = match step.get_ref().action() {
            Ok(Action::Send { send, .. }) if !native && send.peer.is_some() => Some(format!(
                "`peer` is the socket peer a native instance sees; `{deployable}` is a Workers \
                 deployable, whose peer is Cloudflare's edge and whose client is \
                 `CF-Connecting-IP` (`address`)"
            )),
            Ok(Action::SetStore(_)) if !redis => Some(format!("`set_store` {no_redis}")),
            Ok(Action::SetBindings(_)) if native => Some(format!("`set_bindings` {no_bindings}")),
            Ok(Action::Limit(_)) if native => Some(format!("`limit` {no_bindings}")),
            Ok(Action::Send {
                expect: Some(expect),
                ..
            }) if !redis => {
                if let Some(calls) = &expect.get_ref().redis_calls {
                    return Err(source.error(calls.span(), format!("`redis_calls` {no_redis}")));
                }
                None
            }
            _ => None,
        };
        if let Some(message) = what {
            return Err(source.error(step.span(), message));
        }
    }
    Ok(())
}

/// Whether `deployable` of the description is native (false when the
/// description is invalid or lacks it: running the scenario reports that).
fn is_native(application_toml: &str, deployable: &str) -> bool {
    runtime::config::Application::from_toml(application_toml).is_ok_and(|app| {
        app.deployable(deployable)
            .is_some_and(|d| d.target == runtime::config::Target::Native)
    })
}

/// `on_cloudflare`: only on a scenario Cloudflare can run, `exact` or
/// bounded; an expectation's own mark only in such a scenario.
fn check_cloudflare_sense(
    source: &ScenarioSource,
    application_toml: &str,
    deployable: &str,
) -> Result<(), ScenarioError> {
    let s = source.scenario.get_ref();
    let marked_expectation = s.steps.iter().find_map(|step| {
        step.get_ref()
            .expect
            .as_ref()
            .and_then(|e| e.get_ref().on_cloudflare.as_ref())
    });
    let Some(mark) = &s.on_cloudflare else {
        return match marked_expectation {
            Some(marked) => Err(source.error(
                marked.span(),
                "an expectation's `on_cloudflare` needs the scenario's: set `on_cloudflare` on the scenario to run it on Cloudflare",
            )),
            None => Ok(()),
        };
    };
    if *mark.get_ref() == CloudflareCheck::NotChecked {
        return Err(source.error(
            mark.span(),
            "a scenario is `exact` or `{ refusal_by = N }` on Cloudflare; to keep it off Cloudflare, leave `on_cloudflare` out",
        ));
    }
    match cloudflare_obstacle(s, is_native(application_toml, deployable)) {
        Some((span, why)) => Err(source.error(
            span.unwrap_or_else(|| mark.span()),
            format!("`on_cloudflare`, but Cloudflare cannot run this scenario: {why}"),
        )),
        None => Ok(()),
    }
}

/// Why Cloudflare itself cannot run a scenario, if it cannot: the first
/// thing in it the edge cannot do, and where (`None`: the whole scenario).
/// There the binding is the real one (only an upload without it can fault
/// it), the isolates and the clock are Cloudflare's, and the edge sets
/// `CF-Connecting-IP` (a run has one address: the runner's own).
pub fn cloudflare_obstacle(s: &Scenario, native: bool) -> Option<(Option<Range<usize>>, String)> {
    if s.expect_diagnostics.is_some() {
        return Some((
            None,
            "it expects diagnostics: it sends no traffic".to_owned(),
        ));
    }
    if native {
        return Some((
            None,
            "its deployable is native, and Cloudflare runs Workers".to_owned(),
        ));
    }
    if let Some(bindings) = &s.bindings
        && let Some(behaviour) = bindings
            .get_ref()
            .values()
            .find(|b| !matches!(b, Behaviour::Healthy | Behaviour::Missing))
    {
        return Some((
            Some(bindings.span()),
            format!(
                "Cloudflare's binding cannot be made {behaviour}: only `missing` (an upload without the binding) can be done there"
            ),
        ));
    }
    for step in &s.steps {
        let why = match step.get_ref().action() {
            Ok(Action::SetBindings(_)) => {
                "`set_bindings`: a binding on Cloudflare cannot change mid-run"
            }
            Ok(Action::SetStore(_)) => "`set_store`: Cloudflare runs no Redis of the harness's",
            Ok(Action::AdvanceClock(_)) => {
                "`advance_clock`: Cloudflare has no scenario clock (window steps wait real time there)"
            }
            Ok(Action::RestartIsolate(_)) => "`restart_isolate`: Cloudflare's isolates are its own",
            Ok(Action::Limit(_)) => "`limit`: the Worker on Cloudflare has no control endpoint",
            Ok(Action::Send { send, .. }) if send.isolate.is_some() => {
                "a `send` to one isolate: Cloudflare's isolates are its own"
            }
            Ok(Action::Send { send, .. })
                if send.distinct_addresses
                    || send
                        .headers
                        .keys()
                        .any(|h| h.eq_ignore_ascii_case(runtime::limiter::ADDRESS_HEADER)) =>
            {
                "Cloudflare sets CF-Connecting-IP itself, so a run sends from one address, the runner's own"
            }
            _ => continue,
        };
        return Some((Some(step.span()), why.to_owned()));
    }
    None
}

/// `store`: what a Redis can be from the start.
fn check_store_at_start(s: &Scenario, behaviour: StoreBehaviour) -> Result<(), String> {
    match behaviour {
        StoreBehaviour::Restarted | StoreBehaviour::ScriptsFlushed => Err(format!(
            "`{behaviour}` happens mid-run (`set_store`); at the start write healthy, down, hanging, slow = {{ ms = N }} or missing"
        )),
        StoreBehaviour::Missing if s.redis == RedisKind::Cluster => {
            Err("a `missing` store has no servers: it is not a cluster".to_owned())
        }
        StoreBehaviour::Healthy
        | StoreBehaviour::Down
        | StoreBehaviour::Hanging
        | StoreBehaviour::Slow { .. }
        | StoreBehaviour::Missing => Ok(()),
    }
}

/// `set_store`: what can be done to a Redis mid-run.
fn check_store_change(s: &Scenario, behaviour: StoreBehaviour) -> Result<(), String> {
    let missing_from_start = s
        .store
        .as_ref()
        .is_some_and(|b| *b.get_ref() == StoreBehaviour::Missing);
    match behaviour {
        _ if missing_from_start => Err(
            "the store is `missing` (nothing listens at its URL), so nothing can be done to it"
                .to_owned(),
        ),
        StoreBehaviour::Missing => Err(
            "`missing` means nothing listens from the start (`store = \"missing\"`); mid-run, `down` kills the server".to_owned(),
        ),
        StoreBehaviour::Restarted if s.redis == RedisKind::Cluster => Err(
            "a cluster is not restarted (its slots would need assigning again); use a single server"
                .to_owned(),
        ),
        StoreBehaviour::Healthy
        | StoreBehaviour::Down
        | StoreBehaviour::Hanging
        | StoreBehaviour::Slow { .. }
        | StoreBehaviour::Restarted
        | StoreBehaviour::ScriptsFlushed => Ok(()),
    }
}

/// A `send`'s own sense: who sends, how many, and whether its sequence adds up.
fn check_send(
    send: &SendRequests,
    expect: Option<&Spanned<SendExpectations>>,
) -> Result<(), (Option<Range<usize>>, String)> {
    if send.address.is_some() && send.distinct_addresses {
        return Err((
            None,
            "send from `address` or from `distinct_addresses`, not both".to_owned(),
        ));
    }
    if send.requests == 0 || send.concurrency == 0 {
        return Err((
            None,
            "`requests` and `concurrency` must be at least 1".to_owned(),
        ));
    }
    send.peer_address()
        .map_err(|m| (send.peer.as_ref().map(Spanned::span), m))?;
    if let Some(entry) = send.forwarded_for.iter().find(|e| e.contains(',')) {
        return Err((
            None,
            format!(
                "`forwarded_for` entry `{entry}` holds a comma: write each address as an entry of its own"
            ),
        ));
    }
    let forwarded_header = send
        .headers
        .keys()
        .any(|name| name.eq_ignore_ascii_case(runtime::address::FORWARDED_FOR_HEADER));
    if forwarded_header && !send.forwarded_for.is_empty() {
        return Err((
            None,
            "send an `X-Forwarded-For` chain with `forwarded_for` or in `headers`, not both"
                .to_owned(),
        ));
    }
    let Some(expect) = expect.map(Spanned::get_ref) else {
        return Ok(());
    };
    if let Some(statuses) = &expect.statuses {
        parse_statuses(statuses.get_ref())
            .and_then(|runs| expand_statuses(&runs, send.requests))
            .map_err(|m| (Some(statuses.span()), m))?;
    }
    if let Some(counts) = &expect.counts {
        for status in counts.get_ref().keys() {
            if status.parse::<u16>().is_err() {
                return Err((
                    Some(counts.span()),
                    format!("`{status}` is not an HTTP status"),
                ));
            }
        }
    }
    Ok(())
}

/// Every scenario file under `dir` (sorted), as `(path, shown as)`: the
/// name in trial names and errors is `shown_as` joined with the file's name
/// (the directory as the user gave it, or `scenarios` for the repository's).
pub fn scenario_files(dir: &Path, shown_as: &Path) -> std::io::Result<Vec<(PathBuf, PathBuf)>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let Some(name) = path.file_name() else {
            continue;
        };
        let is_expectations = name == EXPECTATIONS_FILE || name == DIFFERENTIAL_FILE;
        if path.extension().is_some_and(|e| e == "toml") && !is_expectations {
            let shown = shown_as.join(name);
            files.push((path, shown));
        }
    }
    files.sort();
    Ok(files)
}

/// TOML has no null: an optional field is one left out, never a `null`
/// branch. Without those branches (`anyOf [T, null]`) an editor's validator
/// (taplo) names the unknown field in a table instead of saying that nothing
/// in an `anyOf` matched.
#[derive(Debug, Clone, Copy)]
struct NoNullBranches;

impl schemars::transform::Transform for NoNullBranches {
    fn transform(&mut self, schema: &mut Schema) {
        schemars::transform::transform_subschemas(self, schema);
        let Some(object) = schema.as_object_mut() else {
            return;
        };
        let null = serde_json::json!({ "type": "null" });
        if object.get("default") == Some(&serde_json::Value::Null) {
            object.remove("default");
        }
        if let Some(serde_json::Value::Array(types)) = object.get_mut("type") {
            types.retain(|t| t != "null");
            if let [only] = types.as_slice() {
                let only = only.clone();
                object.insert("type".to_owned(), only);
            }
        }
        if let Some(serde_json::Value::Array(branches)) = object.get_mut("anyOf") {
            branches.retain(|b| *b != null);
            if let [serde_json::Value::Object(only)] = branches.as_slice() {
                let only = only.clone();
                object.remove("anyOf");
                for (key, value) in only {
                    object.entry(key).or_insert(value);
                }
            }
        }
    }
}

/// The JSON Schema (draft-07) of scenario files, as checked in.
pub fn json_schema() -> String {
    let generator = schemars::generate::SchemaSettings::draft07()
        .with(|settings| settings.transforms.insert(0, Box::new(NoNullBranches)))
        .into_generator();
    let schema = generator.into_root_schema_for::<ScenarioFile>();
    serde_json::to_string_pretty(&schema).unwrap_or_default() + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_parse_and_expand() {
        let runs = parse_statuses("120 x 200 then 429").expect("parses");
        assert_eq!(expand_statuses(&runs, 121).expect("adds up").len(), 121);
        assert!(expand_statuses(&runs, 122).is_err());
        let rest = parse_statuses("2 x 200 then * x 429").expect("parses");
        assert_eq!(
            expand_statuses(&rest, 5).expect("adds up"),
            [200, 200, 429, 429, 429]
        );
        assert!(parse_statuses("* x 200 then 429").is_err());
        assert!(parse_statuses("120 x ok").is_err());
    }
}
