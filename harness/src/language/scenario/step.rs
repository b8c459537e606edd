//! A scenario's steps: what each may write, the one [`Action`] a step does,
//! and the requests a `send` fires.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use schemars::JsonSchema;
use serde::Deserialize;
use toml::Spanned;

use super::behaviour::{Behaviour, RedisBehaviour};
use super::bounds::one;
use super::expect::SendExpectations;

/// One step. Exactly one action: `send`, `set_bindings`, `set_redis`,
/// `wait_for_window`, `wait_for_room`, `advance_clock`, `step_wall_clock`,
/// `restart_isolate`, `sleep_ms` or `limit`.
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
    /// `slow = { ms = N }`, `restarted` or `scripts_flushed`; for a cluster
    /// also `failed_over`, `migrating` or `resharded`.
    #[serde(default)]
    pub set_redis: Option<RedisBehaviour>,
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
    /// Step one native instance's wall clock alone, as NTP or a resumed VM
    /// steps it (the scenario clock, and Redis's, stay where they are).
    #[serde(default)]
    pub step_wall_clock: Option<StepWallClock>,
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

/// A step of one native instance's wall clock.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StepWallClock {
    /// The native instance (0-based).
    #[serde(default)]
    pub isolate: usize,
    /// Milliseconds to step it by: negative steps it back.
    pub ms: i64,
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
    SetRedis(RedisBehaviour),
    /// Move to the next boundary of a window of this many seconds.
    WaitForWindow(u32),
    /// Move to the next boundary when too little is left of the window.
    WaitForRoom(WaitForRoom),
    /// Move the scenario clock forward by this many seconds.
    AdvanceClock(u32),
    /// Step one native instance's wall clock alone.
    StepWallClock(StepWallClock),
    /// Restart this isolate.
    RestartIsolate(usize),
    /// Pause this many ms of real time.
    SleepMs(u64),
    /// One raw `limit()` call on a binding, and what it must give.
    Limit(&'a crate::language::probe::LimitCall),
}

impl Action<'_> {
    /// The step's key that writes this action, for pointing at it.
    pub fn key(&self) -> &'static str {
        match self {
            Action::Send { .. } => "send",
            Action::SetBindings(_) => "set_bindings",
            Action::SetRedis(_) => "set_redis",
            Action::WaitForWindow(_) => "wait_for_window",
            Action::WaitForRoom(_) => "wait_for_room",
            Action::AdvanceClock(_) => "advance_clock",
            Action::RestartIsolate(_) => "restart_isolate",
            Action::SleepMs(_) => "sleep_ms",
            Action::Limit(_) => "limit",
            Action::StepWallClock(_) => "step_wall_clock",
        }
    }

    /// The window whose end the action waits for, if it waits for one.
    pub fn window(&self) -> Option<u32> {
        match self {
            Action::WaitForWindow(window) => Some(*window),
            Action::WaitForRoom(room) => Some(room.window),
            Action::Send { .. }
            | Action::SetBindings(_)
            | Action::SetRedis(_)
            | Action::AdvanceClock(_)
            | Action::RestartIsolate(_)
            | Action::SleepMs(_)
            | Action::Limit(_)
            | Action::StepWallClock(_) => None,
        }
    }
}

impl Step {
    /// The one action this step does, or why it is not a step.
    pub fn action(&self) -> Result<Action<'_>, &'static str> {
        let Step {
            send,
            set_bindings,
            set_redis,
            wait_for_window,
            wait_for_room,
            advance_clock,
            step_wall_clock,
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
            set_redis.map(Action::SetRedis),
            wait_for_window.map(Action::WaitForWindow),
            wait_for_room.map(Action::WaitForRoom),
            advance_clock.map(|a| Action::AdvanceClock(a.seconds)),
            step_wall_clock.map(Action::StepWallClock),
            restart_isolate.map(Action::RestartIsolate),
            sleep_ms.map(Action::SleepMs),
            limit.as_ref().map(Action::Limit),
        ]
        .into_iter()
        .flatten();
        let (Some(action), None) = (actions.next(), actions.next()) else {
            return Err(
                "a step does exactly one of: send, set_bindings, set_redis, wait_for_window, wait_for_room, advance_clock, step_wall_clock, restart_isolate, sleep_ms, limit",
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
    /// The HTTP method, `GET` by default (`POST`, `HEAD`, ...): a route's
    /// limit may count some methods only.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub method: Option<Spanned<String>>,
    /// As this signed-in caller (sent in `X-Test-Caller`); with `address` or
    /// `distinct_addresses`, a caller from that address.
    #[serde(default)]
    pub caller: Option<String>,
    /// From this address (sent in `CF-Connecting-IP`).
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub address: Option<Spanned<String>>,
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
    #[schemars(with = "Vec<String>")]
    pub forwarded_for: Option<Spanned<Vec<String>>>,
    /// The step sends, on purpose, an `address`, `forwarded_for` or `peer`
    /// its deployable does not read (a forged header it must not believe).
    /// Without it such a step is refused: it would count another client than
    /// it names, and pass or fail by accident.
    #[serde(default)]
    #[schemars(with = "bool")]
    pub spoofed: Option<Spanned<bool>>,
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
    /// The `X-Forwarded-For` entries, left to right (none when not written).
    pub fn chain(&self) -> &[String] {
        self.forwarded_for.as_ref().map_or(&[], |c| c.get_ref())
    }

    /// Whether the step says it sends an address the deployable must not believe.
    pub fn spoofs(&self) -> bool {
        self.spoofed.as_ref().is_some_and(|s| *s.get_ref())
    }

    /// The method to send: `GET` unless the step names another, which must
    /// be an HTTP method (a token, RFC 9110) the harness can send to a path.
    pub fn http_method(&self) -> Result<http::Method, String> {
        let Some(method) = &self.method else {
            return Ok(http::Method::GET);
        };
        match http::Method::from_bytes(method.get_ref().as_bytes()) {
            Ok(http::Method::CONNECT) => Err(
                "`method` is `CONNECT`, which asks a proxy for a tunnel, not a path of the \
                 deployable: send another method"
                    .to_owned(),
            ),
            Ok(parsed) => Ok(parsed),
            Err(_) => Err(format!(
                "`method` is `{}`, which is no HTTP method: a method is a token of letters, \
                 digits and `!#$%&'*+-.^_`|~`, such as `POST`",
                method.get_ref().escape_debug()
            )),
        }
    }

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
