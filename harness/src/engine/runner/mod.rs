//! Runs one scenario: starts its workerd processes, sets their clock,
//! performs its steps, and records what it observed. Judging what was
//! observed is [`crate::judge::scenario`]'s job; the clock's arithmetic is
//! [`crate::engine::clock`]'s; this module only does I/O.
//!
//! A [`Runner`] holds one scenario's processes, clock and record; its
//! methods are spread by what they do: [`isolates`] (starting, restarting
//! and retiring the scenario's processes), [`clock_steps`] (starting and
//! moving the clock every process reads), [`send`] (firing a `send`'s
//! requests), [`bindings`] (the emulated bindings: planned, changed, read,
//! called raw), [`native_steps`] (a native scenario's instances and its
//! Redis) and [`metrics`] (the limiter's metrics, read around steps and at
//! the end); [`error`] is why a run stops.

mod bindings;
mod clock_steps;
mod error;
mod isolates;
mod metrics;
mod native_steps;
mod send;

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use runtime::GatePlan;
use toml::Spanned;

pub use bindings::emulated_bindings;
pub use error::{ControlRequest, EngineError};
pub(super) use send::answer;

use super::clock::ScenarioClock;
use super::observation::{Observation, StepRecord};
use crate::language::scenario::{Action, ClockKind, Prepared};
use crate::world::instance::Instance;
use crate::world::metrics::MetricReading;
use crate::world::native::launch::NativeLaunch;
use crate::world::scenario_redis::ScenarioRedis;
use crate::world::text::error_chain;
use crate::world::wasm::WorkerBuild;
use crate::world::workerd::count_server::fresh_scope;
use crate::world::workerd::data_points::EmulatedDataset;
use crate::world::workerd::reference::CountingCore;
use crate::world::workerd::{CountServer, Workerd, WorkerdProcess};

/// How long one request may take before it counts as lost.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

/// Wall-clock scenarios start with at least this long left in the current
/// minute, so their 60-second counts never straddle a real window boundary.
/// (Scenario-clock scenarios start at a minute's beginning and never wait.)
pub const MINUTE_ROOM: Duration = Duration::from_secs(20);

/// How far past a real window boundary a wall-clock scenario sleeps, so every
/// process has surely crossed it.
pub const WALL_MARGIN: Duration = Duration::from_millis(50);

/// The header the test deployable reads the signed-in caller from
/// (`harness-worker-wasm-bindgen`'s `CALLER_HEADER`).
pub const CALLER_HEADER: &str = "X-Test-Caller";

/// The header that carries the harness's control token (see `assets/entry.js`).
pub const CONTROL_HEADER: &str = "x-harness-control";

/// What every scenario of a run shares: the workerd binary, the built
/// deployable, the counting core its emulated bindings wrap and, for the
/// harness's core, the run's count server (started on first use).
#[derive(Debug, Clone)]
pub struct Environment {
    /// The workerd every process of the run starts.
    pub workerd: Workerd,
    /// The Workers deployable, built once for the run.
    pub deployable: WorkerBuild,
    /// The counting core the emulated bindings wrap.
    pub core: CountingCore,
    /// The run's count server, shared by every scenario (a scope each).
    pub count_server: CountServer,
}

/// A failed run, with what was observed up to the failure (for the log tail).
#[derive(Debug)]
pub struct Aborted {
    /// Why it stopped.
    pub error: EngineError,
    /// What was recorded until then.
    pub observation: Observation,
}

/// Runs one scenario on its own single-threaded runtime (so each workerd's
/// parent-death signal is tied to this thread, which lives for the run).
pub fn run(env: &Environment, prepared: &Prepared) -> Result<Observation, Box<Aborted>> {
    let aborted = |error| {
        Box::new(Aborted {
            error,
            observation: Observation::default(),
        })
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| aborted(EngineError::Runtime(e)))?;
    let client = http_client(None).map_err(|e| aborted(EngineError::HttpClient(e)))?;
    runtime.block_on(Runner::new(env, prepared, client).execute())
}

/// The scenario's HTTP client, connecting from `peer` (a loopback address)
/// when given, else from wherever the system picks.
fn http_client(peer: Option<Ipv4Addr>) -> Result<reqwest::Client, reqwest::Error> {
    reqwest::Client::builder()
        .timeout(REQUEST_TIMEOUT)
        .pool_max_idle_per_host(64)
        .local_address(peer.map(IpAddr::V4))
        .build()
}

/// One of the scenario's isolates: its process now, and what its record needs.
struct Isolate {
    process: Instance,
    generation: usize,
    served: bool,
    config: std::path::PathBuf,
}

/// One scenario being run: its processes, its clock and what it observed.
struct Runner<'a> {
    env: &'a Environment,
    prepared: &'a Prepared,
    epoch: Instant,
    /// The wall clock at `epoch`, in ms since the Unix epoch: the emulated
    /// bindings' calls, timed by the isolates' `Date.now()`, are placed
    /// since the scenario started with it.
    epoch_wall_ms: u64,
    token: String,
    observation: Observation,
    isolates: Vec<Isolate>,
    /// One HTTP client for the traffic and the control requests.
    client: reqwest::Client,
    /// A client per loopback address a `send` connects from (its `peer`).
    peer_clients: BTreeMap<Ipv4Addr, reqwest::Client>,
    /// The bindings in the config: those a step can change.
    configured: Vec<String>,
    /// A Workers scenario's dataset binding, when its application names a
    /// dataset: its isolates' data points are read.
    dataset: Option<EmulatedDataset>,
    /// The metrics of every process retired so far (the totals at the end).
    metrics_total: Option<MetricReading>,
    /// Where the scenario's isolates keep the count they share.
    shared_count: SharedCount,
    /// A native scenario's way to start its instances.
    native: Option<NativeLaunch>,
    /// The scenario's scope in the run's count server.
    scope: String,
    /// Which clock the processes read.
    clock_kind: ClockKind,
    /// The scenario clock's offset (zero for the wall clock).
    clock: ScenarioClock,
    /// The beginning of the minute the scenario clock started in, in ms
    /// since the Unix epoch: the steps' clock readings are kept from there.
    clock_origin_ms: u64,
    _dir: Option<tempfile::TempDir>,
    /// The reference core's counters, new for the scenario.
    _reference_storage: Option<tempfile::TempDir>,
    next_address: u32,
}

/// Where a scenario's isolates keep the count they share, stopped or
/// dropped when the scenario ends.
enum SharedCount {
    /// Nowhere: each isolate counts on its own (one isolate, never
    /// restarted, or no binding in the config), or nothing counts.
    None,
    /// The run's count server, on this port, in the scenario's scope.
    RunStore { port: u16 },
    /// The reference core's process (Cloudflare's simulator), the scenario's own.
    /// Boxed: a process is far larger than the other variants.
    Reference(Box<WorkerdProcess>),
    /// A native scenario's real Redis.
    Redis(ScenarioRedis),
}

/// The secret the harness's control requests carry (the scenario clock of
/// the Workers and the native instances): 128 bits from the OS, so another
/// local user who sees the port cannot guess it. Without OS randomness
/// (never seen on Linux) it says so and falls back to the time and pid.
fn control_token() -> String {
    let mut bytes = [0u8; 16];
    match getrandom::fill(&mut bytes) {
        Ok(()) => bytes.iter().map(|b| format!("{b:02x}")).collect(),
        Err(error) => {
            eprintln!(
                "harness: no OS randomness ({error}): the control token is made from the time"
            );
            let nanos = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            format!("{:x}{:x}", nanos, std::process::id())
        }
    }
}

impl<'a> Runner<'a> {
    fn new(env: &'a Environment, prepared: &'a Prepared, client: reqwest::Client) -> Runner<'a> {
        Runner {
            env,
            prepared,
            epoch: Instant::now(),
            epoch_wall_ms: wall_ms(),
            token: control_token(),
            observation: Observation::default(),
            isolates: Vec::new(),
            client,
            peer_clients: BTreeMap::new(),
            configured: Vec::new(),
            dataset: None,
            metrics_total: None,
            shared_count: SharedCount::None,
            native: None,
            scope: fresh_scope(),
            clock_kind: prepared.scenario.scenario.get_ref().clock,
            clock: ScenarioClock::default(),
            clock_origin_ms: 0,
            _dir: None,
            _reference_storage: None,
            next_address: 1,
        }
    }

    async fn execute(mut self) -> Result<Observation, Box<Aborted>> {
        let mut result = self.steps().await;
        // Keep what every process wrote, even when the run failed.
        let live: Vec<Isolate> = std::mem::take(&mut self.isolates);
        for (index, isolate) in live.into_iter().enumerate() {
            let retired = self.retire(index, isolate, true).await;
            if result.is_ok() {
                result = retired;
            }
        }
        match std::mem::replace(&mut self.shared_count, SharedCount::None) {
            SharedCount::None => {}
            SharedCount::RunStore { port } => {
                // Best effort: a store that is gone has nothing left to drop.
                let _ = self.forget_scope(port).await;
            }
            // Nothing judges the reference core's log.
            SharedCount::Reference(store) => drop((*store).stop().await),
            SharedCount::Redis(redis) => redis.stop().await,
        }
        self.observation.metrics_final = self.metrics_total.take().map(|m| m.values());
        self.observation
            .instances
            .sort_by_key(|i| (i.isolate, i.generation));
        self.observation.duration = self.epoch.elapsed();
        match result {
            Ok(()) => Ok(self.observation),
            Err(error) => Err(Box::new(Aborted {
                error,
                observation: self.observation,
            })),
        }
    }

    async fn steps(&mut self) -> Result<(), EngineError> {
        let prepared = self.prepared;
        let scenario = prepared.scenario.scenario.get_ref();
        let app = match &prepared.application {
            Ok(app) => app,
            Err(diagnostics) if scenario.expect_diagnostics.is_some() => {
                self.observation.diagnostics =
                    Some(diagnostics.codes().iter().map(|c| c.to_string()).collect());
                return Ok(());
            }
            Err(diagnostics) => {
                return Err(EngineError::InvalidApplication(
                    diagnostics.render("application"),
                ));
            }
        };
        if scenario.expect_diagnostics.is_some() {
            self.observation.diagnostics = Some(Vec::new());
            return Ok(());
        }
        if prepared.runs_natively() {
            self.start_native(scenario.isolates).await?;
        } else {
            let bindings = emulated_bindings(app, &prepared.deployable, prepared)?;
            // What the framework's build step would write for the deployable.
            let plan = GatePlan::new(app, &prepared.deployable)
                .map_err(|e| EngineError::UnknownDeployable(e.0))?;
            // The dataset binding the plan names (`data_points NAME`), as
            // `wrangler --write` writes it into `analytics_engine_datasets`.
            self.dataset = match (plan.data_points(), &app.data_points) {
                (Some(binding), Some(dataset)) => Some(EmulatedDataset {
                    binding: binding.to_owned(),
                    dataset: dataset.clone(),
                    behaviour: scenario
                        .data_points_binding
                        .as_ref()
                        .map_or_else(Default::default, |b| *b.get_ref()),
                }),
                _ => None,
            };
            self.observation.data_points_binding = self.dataset.as_ref().map(|d| d.binding.clone());
            let plan = plan.to_text().map_err(EngineError::Plan)?;
            self.start_isolates(&plan, &bindings, scenario.isolates)
                .await?;
        }
        self.start_clock().await?;
        for (index, step) in scenario.steps.iter().enumerate() {
            let action = step
                .get_ref()
                .action()
                .map_err(|message| EngineError::InvalidStep {
                    step: index + 1,
                    message,
                })?;
            let started = self.epoch.elapsed();
            let clock_started_ms = self.scenario_ms();
            let done = self.act(index, action).await;
            self.observation.steps.push(StepRecord {
                index,
                started,
                ended: self.epoch.elapsed(),
                clock_started_ms,
                clock_ended_ms: self.scenario_ms(),
            });
            // A step that failed because a workerd died is reported as that crash.
            self.check_alive(index)?;
            done?;
        }
        Ok(())
    }

    /// Does one step: each kind of step is one method below.
    async fn act(&mut self, index: usize, action: Action<'_>) -> Result<(), EngineError> {
        match action {
            Action::Send { send, expect } => {
                let expect = expect.map(Spanned::get_ref);
                let count_calls = expect.is_some_and(|e| e.redis_calls.is_some());
                let waiting = expect
                    .and_then(|e| e.deadline.as_ref())
                    .map_or(0, |d| d.get_ref().waiting);
                let read_metrics = expect.is_some_and(|e| e.metrics.is_some());
                let before = match read_metrics {
                    true => Some(self.read_all_metrics().await?),
                    false => None,
                };
                self.send_counting_redis_calls(index, send, count_calls, waiting)
                    .await?;
                if let Some(before) = before {
                    let after = self.read_all_metrics().await?;
                    self.observation
                        .metrics_steps
                        .insert(index, after.change_since(&before));
                }
                Ok(())
            }
            Action::SetBindings(changes) => self.set_bindings(changes).await,
            Action::SetRedis(behaviour) => self.set_redis(index, behaviour).await,
            Action::WaitForWindow(seconds) => self.wait_for_window(seconds).await,
            Action::WaitForRoom(room) => self.wait_for_room(room).await,
            Action::AdvanceClock(seconds) => self.advance_clock(seconds).await,
            Action::StepWallClock(step) => self.step_wall_clock(step).await,
            Action::RestartIsolate(isolate) => self.restart(isolate).await,
            Action::SleepMs(ms) => {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                Ok(())
            }
            Action::Limit(call) => self.limit_call(index, call).await,
        }
    }

    /// Drops the scenario's counts and clock from the run's count server on `port`.
    async fn forget_scope(&self, port: u16) -> Result<(), EngineError> {
        let body = serde_json::json!({ "scope": self.scope });
        self.control(
            ControlRequest::ForgetScope,
            self.client
                .post(format!("http://127.0.0.1:{port}/forget"))
                .json(&body),
        )
        .await
        .map(drop)
    }

    /// Sends one control request with the token and reads its JSON answer.
    async fn control(
        &self,
        request: ControlRequest,
        builder: reqwest::RequestBuilder,
    ) -> Result<serde_json::Value, EngineError> {
        let text = self.control_text(request, builder).await?;
        serde_json::from_str(&text).map_err(|e| EngineError::Control {
            request,
            detail: format!("{e} in {text}"),
        })
    }

    /// Sends one control request with the token and reads its answer's text.
    async fn control_text(
        &self,
        request: ControlRequest,
        builder: reqwest::RequestBuilder,
    ) -> Result<String, EngineError> {
        let failed = |detail: String| EngineError::Control { request, detail };
        let response = builder
            .header(CONTROL_HEADER, &self.token)
            .send()
            .await
            .map_err(|e| failed(error_chain(&e)))?;
        let status = response.status();
        let text = response.text().await.map_err(|e| failed(error_chain(&e)))?;
        if !status.is_success() {
            return Err(failed(format!("{status}: {text}")));
        }
        Ok(text)
    }
}

/// Whether a scenario's emulated count is shared beyond one process: it has
/// `isolates` > 1, or restarts an isolate (the new process goes on counting).
pub fn shares_count(prepared: &Prepared, isolates: usize) -> bool {
    isolates > 1
        || prepared
            .scenario
            .scenario
            .get_ref()
            .steps
            .iter()
            .any(|s| matches!(s.get_ref().action(), Ok(Action::RestartIsolate(_))))
}

/// The wall clock, in ms since the Unix epoch.
pub(super) fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
