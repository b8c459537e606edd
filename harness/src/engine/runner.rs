//! Runs one scenario: starts its workerd processes, sets their clock,
//! performs its steps, and records what it observed. Judging what was
//! observed is [`crate::judge::checks`]'s job; the clock's arithmetic is
//! [`crate::engine::clock`]'s; this module only does I/O.

mod native_steps;

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use runtime::GatePlan;
use runtime::config::Application;
use runtime::plan::BindingPlan;
use tokio::sync::Semaphore;
use toml::Spanned;

use super::clock::{self, ScenarioClock};
use super::limit_call::{control_body, read_outcome};
use super::load_probe::probe_while_waiting;
use super::observation::{CallRecord, InstanceKind, InstanceRecord, Observation, RequestRecord};
use crate::language::probe::LimitCall;
use crate::language::scenario::{
    ALL_BINDINGS, Action, Behaviour, ClockKind, Prepared, SendRequests, WaitForRoom, behaviour_of,
};
use crate::world::instance::Instance;
use crate::world::native::NativeError;
use crate::world::native::launch::{LaunchError, NativeLaunch};
use crate::world::process::LogUnfinished;
use crate::world::scenario_redis::{ScenarioRedis, ScenarioRedisError};
use crate::world::text::error_chain;
use crate::world::wasm::Deployable;
use crate::world::workerd::config::{Counting, IsolateConfig, write_config};
use crate::world::workerd::process::ProcessError;
use crate::world::workerd::reference::{CountingCore, STORE_FLAGS, fresh_storage};
use crate::world::workerd::store::{SharedStoreError, fresh_scope};
use crate::world::workerd::{EmulatedBinding, SharedStore, Workerd, WorkerdProcess};

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
/// (`harness-deployable`'s `CALLER_HEADER`).
pub const CALLER_HEADER: &str = "X-Test-Caller";

/// The header that carries the harness's control token (see `assets/entry.js`).
pub const CONTROL_HEADER: &str = "x-harness-control";

/// What every scenario of a run shares: the workerd binary, the built
/// deployable, the counting core its emulated bindings wrap and, for the
/// harness's core, the run's binding store (started on first use).
#[derive(Debug, Clone)]
pub struct Environment {
    /// The workerd every process of the run starts.
    pub workerd: Workerd,
    /// The Workers deployable, built once for the run.
    pub deployable: Deployable,
    /// The counting core the emulated bindings wrap.
    pub core: CountingCore,
    /// The run's binding store, shared by every scenario (a scope each).
    pub store: SharedStore,
}

/// Why a scenario could not be run to the end.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The run's directory or a workerd config could not be written.
    #[error("could not write the workerd config: {0}")]
    Config(std::io::Error),
    /// The reference core's store process did not start.
    #[error("the binding store: {0}")]
    StoreStart(ProcessError),
    /// The run's binding store (the harness's core) did not start or exited.
    #[error(transparent)]
    SharedStore(#[from] SharedStoreError),
    /// An isolate's workerd did not start.
    #[error("isolate {isolate}: {source}")]
    Start {
        /// Which isolate (0-based).
        isolate: usize,
        /// Why.
        source: ProcessError,
    },
    /// An isolate's process (workerd or native instance) exited while the scenario ran.
    #[error(
        "isolate {isolate}'s process exited mid-scenario ({status}) during step {step}; its stderr:\n{stderr}"
    )]
    Crashed {
        /// Which isolate (0-based).
        isolate: usize,
        /// The step (0-based) during which it was found gone.
        step: usize,
        /// Its exit status.
        status: String,
        /// What it wrote on stderr: a crash's reason.
        stderr: String,
    },
    /// A native instance did not start.
    #[error("native instance {isolate}: {source}")]
    NativeStart {
        /// Which isolate (0-based).
        isolate: usize,
        /// Why.
        source: NativeError,
    },
    /// A native scenario's instances could not be prepared.
    #[error("the native instances: {0}")]
    NativeLaunch(#[from] LaunchError),
    /// The scenario's Redis could not be started or changed.
    #[error("the scenario's Redis: {0}")]
    Store(#[from] ScenarioRedisError),
    /// A Redis step or expectation in a scenario without a Redis (load_file refuses these first).
    #[error("step {step}: the scenario's deployable does not count in Redis")]
    NoRedis {
        /// The step (1-based).
        step: usize,
    },
    /// The application description does not validate.
    #[error("the application description is invalid:\n{0}")]
    InvalidApplication(String),
    /// The scenario names a deployable the application lacks.
    #[error("the application has no deployable `{0}`")]
    UnknownDeployable(String),
    /// The deployable's plan has no text form for a Worker.
    #[error("the deployable's plan: {0}")]
    Plan(runtime::gate_plan::PlanError),
    /// The scenario names a binding the plan does not have.
    #[error("the scenario names binding `{name}`, which the plan does not have; it has: [{known}]")]
    UnknownBinding {
        /// The name the scenario gives.
        name: String,
        /// The plan's bindings, for the message.
        known: String,
    },
    /// A step is not a step (load_file refuses these first).
    #[error("step {step}: {message}")]
    InvalidStep {
        /// The step (1-based).
        step: usize,
        /// What is wrong with it.
        message: &'static str,
    },
    /// A control request to an isolate or the store failed.
    #[error("{request}: {detail}")]
    Control {
        /// Which request.
        request: ControlRequest,
        /// What went wrong: the transport's error, or the answer's status and body.
        detail: String,
    },
    /// An isolate's output did not end after it was killed: its log may lack
    /// its last lines, so the scenario cannot be judged on it.
    #[error("isolate {isolate} (generation {generation}): {source}")]
    LogUnfinished {
        /// Which isolate (0-based).
        isolate: usize,
        /// Which of its processes (0 for the first, 1 after a restart, ...).
        generation: usize,
        /// What was read of it.
        source: LogUnfinished,
    },
    /// The scenario's tokio runtime could not be built.
    #[error("could not build the scenario's runtime: {0}")]
    Runtime(std::io::Error),
    /// The HTTP client could not be built.
    #[error("could not build the HTTP client: {0}")]
    HttpClient(reqwest::Error),
}

/// The harness's requests to its own processes (see `assets/entry.js` and
/// `assets/binding-store.js`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlRequest {
    /// `POST /bindings` to an isolate.
    ChangeBindings,
    /// `GET /bindings` from an isolate.
    ReadBindings,
    /// `POST /clock` to an isolate or the binding store.
    SetClock,
    /// `POST /forget` to the run's binding store: the scenario's scope ends.
    ForgetScope,
    /// `POST /limit` to an isolate: one raw `limit()` call.
    CallLimit,
}

impl std::fmt::Display for ControlRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ControlRequest::ChangeBindings => "changing bindings",
            ControlRequest::ReadBindings => "reading bindings",
            ControlRequest::SetClock => "setting the scenario clock",
            ControlRequest::ForgetScope => "dropping the scenario's counts in the binding store",
            ControlRequest::CallLimit => "calling limit()",
        })
    }
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

/// The bindings a scenario's deployable needs, with their starting behaviour.
pub fn emulated_bindings(
    app: &Application,
    deployable: &str,
    prepared: &Prepared,
) -> Result<Vec<EmulatedBinding>, EngineError> {
    let d = app
        .deployable(deployable)
        .ok_or_else(|| EngineError::UnknownDeployable(deployable.to_owned()))?;
    let plan = BindingPlan::for_deployable(app, d);
    let scenario = prepared.scenario.scenario.get_ref();
    let initial = scenario
        .bindings
        .as_ref()
        .map(|b| b.get_ref().clone())
        .unwrap_or_default();
    let changes: Vec<&BTreeMap<String, Behaviour>> = scenario
        .steps
        .iter()
        .filter_map(|s| match s.get_ref().action() {
            Ok(Action::SetBindings(changes)) => Some(changes),
            _ => None,
        })
        .collect();
    let known: BTreeSet<&str> = plan.bindings.iter().map(|b| b.name.as_str()).collect();
    for name in initial.keys().chain(changes.iter().flat_map(|c| c.keys())) {
        if name != ALL_BINDINGS && !known.contains(name.as_str()) {
            let listed: Vec<&str> = known.iter().copied().collect();
            return Err(EngineError::UnknownBinding {
                name: name.clone(),
                known: listed.join(", "),
            });
        }
    }
    Ok(plan
        .bindings
        .iter()
        .map(|b| {
            let start = behaviour_of(&initial, &b.name)
                .cloned()
                .unwrap_or(Behaviour::Healthy);
            let changed_later = changes
                .iter()
                .any(|c| behaviour_of(c, &b.name).is_some_and(|x| *x != Behaviour::Missing));
            EmulatedBinding {
                name: b.name.clone(),
                namespace_id: b.namespace_id,
                limit: b.limit.requests,
                period: b.limit.window_seconds,
                in_config: start != Behaviour::Missing || changed_later,
                initial: start,
            }
        })
        .collect())
}

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
    token: String,
    observation: Observation,
    isolates: Vec<Isolate>,
    /// One HTTP client for the traffic and the control requests.
    client: reqwest::Client,
    /// A client per loopback address a `send` connects from (its `peer`).
    peer_clients: BTreeMap<Ipv4Addr, reqwest::Client>,
    /// The bindings in the config: those a step can change.
    configured: Vec<String>,
    /// Where the scenario's isolates keep the count they share.
    shared_count: SharedCount,
    /// A native scenario's way to start its instances.
    native: Option<NativeLaunch>,
    /// The scenario's scope in the run's binding store.
    scope: String,
    /// Which clock the processes read.
    clock_kind: ClockKind,
    /// The scenario clock's offset (zero for the wall clock).
    clock: ScenarioClock,
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
    /// The run's binding store, on this port, in the scenario's scope.
    RunStore { port: u16 },
    /// The reference core's process (Cloudflare's simulator), the scenario's own.
    Reference(WorkerdProcess),
    /// A native scenario's real Redis.
    Redis(ScenarioRedis),
}

impl<'a> Runner<'a> {
    fn new(env: &'a Environment, prepared: &'a Prepared, client: reqwest::Client) -> Runner<'a> {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        Runner {
            env,
            prepared,
            epoch: Instant::now(),
            token: format!("{:x}{:x}", nanos, std::process::id()),
            observation: Observation::default(),
            isolates: Vec::new(),
            client,
            peer_clients: BTreeMap::new(),
            configured: Vec::new(),
            shared_count: SharedCount::None,
            native: None,
            scope: fresh_scope(),
            clock_kind: prepared.scenario.scenario.get_ref().clock,
            clock: ScenarioClock::default(),
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
            let retired = self.retire(index, isolate).await;
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
            SharedCount::Reference(store) => drop(store.stop().await),
            SharedCount::Redis(redis) => redis.stop().await,
        }
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
        let scenario = self.prepared.scenario.scenario.get_ref();
        let app = match Application::from_toml(&self.prepared.application_toml) {
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
        let native = app
            .deployable(&self.prepared.deployable)
            .is_some_and(|d| d.target == runtime::config::Target::Native);
        if native {
            self.start_native(&app, scenario.isolates).await?;
        } else {
            let bindings = emulated_bindings(&app, &self.prepared.deployable, self.prepared)?;
            // What the framework's build step would write for the deployable.
            let plan = GatePlan::new(&app, &self.prepared.deployable)
                .map_err(|e| EngineError::UnknownDeployable(e.0))?
                .to_text()
                .map_err(EngineError::Plan)?;
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
            let done = self.act(index, action).await;
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
                self.send_counting_redis_calls(index, send, count_calls, waiting)
                    .await
            }
            Action::SetBindings(changes) => self.set_bindings(changes).await,
            Action::SetStore(behaviour) => self.set_store(index, behaviour).await,
            Action::WaitForWindow(seconds) => self.wait_for_window(seconds).await,
            Action::WaitForRoom(room) => self.wait_for_room(room).await,
            Action::AdvanceClock(seconds) => self.advance_clock(seconds).await,
            Action::RestartIsolate(isolate) => self.restart(isolate).await,
            Action::SleepMs(ms) => {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                Ok(())
            }
            Action::Limit(call) => self.limit_call(index, call).await,
        }
    }

    /// Starts the clock: the scenario clock at the beginning of the next
    /// minute, or (for the wall clock) waits for 20 s of room in this one.
    async fn start_clock(&mut self) -> Result<(), EngineError> {
        match self.clock_kind {
            ClockKind::Scenario => {
                self.clock = ScenarioClock::starting_at(wall_ms());
                self.push_clock().await
            }
            ClockKind::Wall => {
                let minute_room = MINUTE_ROOM.as_millis() as u64;
                self.move_clock(clock::to_room(wall_ms(), clock::MINUTE_MS, minute_room))
                    .await
            }
        }
    }

    /// The time every process of the scenario reads now, in ms since the epoch.
    fn now_ms(&self) -> u64 {
        self.clock.now_ms(wall_ms())
    }

    /// Moves the scenario's time forward by `by_ms`: at once on the scenario
    /// clock, by sleeping (past the boundary, by [`WALL_MARGIN`]) on the wall clock.
    async fn move_clock(&mut self, by_ms: u64) -> Result<(), EngineError> {
        if by_ms == 0 {
            return Ok(());
        }
        match self.clock_kind {
            ClockKind::Scenario => {
                self.clock = self.clock.advanced(by_ms);
                self.push_clock().await
            }
            ClockKind::Wall => {
                tokio::time::sleep(Duration::from_millis(by_ms) + WALL_MARGIN).await;
                Ok(())
            }
        }
    }

    /// `wait_for_window`: to the next boundary of a window of `seconds`.
    async fn wait_for_window(&mut self, seconds: u32) -> Result<(), EngineError> {
        let by = clock::to_next_boundary(self.now_ms(), u64::from(seconds) * 1000);
        self.move_clock(by).await
    }

    /// `wait_for_room`: to the next boundary only if too little is left of the window.
    async fn wait_for_room(&mut self, room: WaitForRoom) -> Result<(), EngineError> {
        let by = clock::to_room(
            self.now_ms(),
            u64::from(room.window) * 1000,
            u64::from(room.seconds) * 1000,
        );
        self.move_clock(by).await
    }

    /// `advance_clock`: the scenario clock jumps `seconds` ahead.
    async fn advance_clock(&mut self, seconds: u32) -> Result<(), EngineError> {
        self.move_clock(u64::from(seconds) * 1000).await
    }

    /// Tells every isolate and the binding store the scenario clock's offset
    /// (`POST /clock`; the run's store, for the scenario's scope); a
    /// wall-clock scenario never calls it, so its processes read the real
    /// clock through the production path.
    async fn push_clock(&self) -> Result<(), EngineError> {
        let body = serde_json::json!({ "offset_ms": self.clock.offset_ms });
        let reference = match &self.shared_count {
            SharedCount::Reference(store) => Some(store.url()),
            _ => None,
        };
        let urls = self
            .isolates
            .iter()
            .map(|i| i.process.url())
            .chain(reference);
        for url in urls {
            self.control(
                ControlRequest::SetClock,
                self.client.post(format!("{url}/clock")).json(&body),
            )
            .await?;
        }
        if let SharedCount::RunStore { port } = self.shared_count {
            let scoped =
                serde_json::json!({ "scope": self.scope, "offset_ms": self.clock.offset_ms });
            self.control(
                ControlRequest::SetClock,
                self.client
                    .post(format!("http://127.0.0.1:{port}/clock"))
                    .json(&scoped),
            )
            .await?;
        }
        Ok(())
    }

    /// Drops the scenario's counts and clock from the run's binding store on `port`.
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
        serde_json::from_str(&text).map_err(|e| failed(format!("{e} in {text}")))
    }

    /// `limit`: one raw call through the isolate's control endpoint
    /// (`assets/entry.js`), its outcome recorded.
    async fn limit_call(&mut self, step: usize, call: &LimitCall) -> Result<(), EngineError> {
        let failed = |detail: String| EngineError::Control {
            request: ControlRequest::CallLimit,
            detail,
        };
        let url = match self.isolates.get(call.isolate) {
            Some(isolate) => format!("{}/limit", isolate.process.url()),
            None => return Err(failed(format!("isolate {} does not exist", call.isolate))),
        };
        let body = control_body(call);
        let answer = self
            .control(ControlRequest::CallLimit, self.client.post(url).json(&body))
            .await?;
        let outcome = read_outcome(&answer).map_err(|e| failed(e.to_string()))?;
        self.observation.calls.push(CallRecord {
            step,
            isolate: call.isolate,
            outcome,
        });
        Ok(())
    }

    async fn start_isolates(
        &mut self,
        plan: &str,
        bindings: &[EmulatedBinding],
        count: usize,
    ) -> Result<(), EngineError> {
        self.configured = bindings
            .iter()
            .filter(|b| b.in_config)
            .map(|b| b.name.clone())
            .collect();
        let dir = tempfile::Builder::new()
            .prefix("harness-")
            .tempdir()
            .map_err(EngineError::Config)?;
        let date = self.env.workerd.version.clone();
        // A store only when some binding is in the config (one missing from
        // start to end never asks it) and the count is shared: by two
        // isolates or more, or with the next process of a restarted isolate.
        // One isolate never restarted has no one to share its count with, so
        // the harness's core counts in its own process (where Cloudflare's
        // binding counts too: "a count kept where the Worker runs"); a shared
        // count is kept in the run's store, in the scenario's scope. The
        // reference core always counts in a process of the scenario's own,
        // on fresh storage.
        let counting = match &self.env.core {
            _ if self.configured.is_empty() => Counting::InIsolate,
            CountingCore::Harness if !shares_count(self.prepared, count) => Counting::InIsolate,
            CountingCore::Harness => {
                let port = self.env.store.port(&self.env.workerd.path, &date)?;
                self.shared_count = SharedCount::RunStore { port };
                Counting::HarnessStore {
                    port,
                    scope: &self.scope,
                }
            }
            CountingCore::Reference(simulator) => {
                let storage = fresh_storage().map_err(EngineError::Config)?;
                let store_config = simulator
                    .write_store_config(dir.path(), storage.path())
                    .map_err(EngineError::Config)?;
                self._reference_storage = Some(storage);
                let store = WorkerdProcess::start_with_flags(
                    &self.env.workerd.path,
                    &store_config,
                    STORE_FLAGS,
                    self.epoch,
                )
                .await
                .map_err(EngineError::StoreStart)?;
                let port = store.port;
                self.shared_count = SharedCount::Reference(store);
                Counting::Reference { port, simulator }
            }
        };
        let config = IsolateConfig {
            plan,
            bindings,
            compatibility_date: &date,
            control_token: &self.token,
            counting,
            limiting_off: false,
        };
        let path =
            write_config(dir.path(), &config, &self.env.deployable).map_err(EngineError::Config)?;
        self._dir = Some(dir);
        self.start_all(count, path).await
    }

    /// Starts the scenario's `count` isolates at once, each a first generation.
    async fn start_all(
        &mut self,
        count: usize,
        config: std::path::PathBuf,
    ) -> Result<(), EngineError> {
        let starts = (0..count).map(|isolate| self.start_instance(isolate, &config));
        let started = futures::future::join_all(starts).await;
        for process in started {
            self.isolates.push(Isolate {
                process: process?,
                generation: 0,
                served: false,
                config: config.clone(),
            });
        }
        Ok(())
    }

    /// Starts one process for `isolate`: a native instance when the scenario's
    /// deployable is native, else a workerd on `config`.
    async fn start_instance(
        &self,
        isolate: usize,
        config: &std::path::Path,
    ) -> Result<Instance, EngineError> {
        Ok(match &self.native {
            Some(native) => Instance::Native(
                native
                    .start(self.epoch)
                    .await
                    .map_err(|source| EngineError::NativeStart { isolate, source })?,
            ),
            None => Instance::Workerd(
                WorkerdProcess::start(&self.env.workerd.path, config, self.epoch)
                    .await
                    .map_err(|source| EngineError::Start { isolate, source })?,
            ),
        })
    }

    /// The client connecting from `peer`, made the first time it is asked for.
    fn client_from(&mut self, peer: Option<Ipv4Addr>) -> Result<reqwest::Client, EngineError> {
        let Some(peer) = peer else {
            return Ok(self.client.clone());
        };
        if let Some(client) = self.peer_clients.get(&peer) {
            return Ok(client.clone());
        }
        let client = http_client(Some(peer)).map_err(EngineError::HttpClient)?;
        self.peer_clients.insert(peer, client.clone());
        Ok(client)
    }

    /// `send`: fires the requests (round-robin over the isolates unless one is
    /// named), from its `peer`, `concurrency` at a time, and records every
    /// answer. While the first `waiting` wait (for a `deadline`), their
    /// isolate is probed.
    async fn send(
        &mut self,
        step: usize,
        send: &SendRequests,
        waiting: usize,
    ) -> Result<(), EngineError> {
        let peer = send.peer_address().map_err(|_| EngineError::InvalidStep {
            step: step + 1,
            message: "`peer` is not a loopback address",
        })?;
        let client = self.client_from(peer)?;
        if let Some(peer) = peer {
            self.observation.sent_subjects.insert(peer.to_string());
        }
        // The chain's addresses are keys the instance may count: none may be logged.
        let chain = send.forwarded_for.join(", ");
        self.observation.sent_subjects.extend(
            send.forwarded_for
                .iter()
                .filter(|entry| entry.trim().parse::<IpAddr>().is_ok())
                .map(|entry| entry.trim().to_owned()),
        );
        let semaphore = Arc::new(Semaphore::new(send.concurrency));
        let waiting_left = Arc::new(AtomicUsize::new(waiting));
        let probing = self
            .isolates
            .get(send.isolate.unwrap_or(0))
            .filter(|_| waiting > 0)
            .map(|isolate| {
                tokio::spawn(probe_while_waiting(
                    self.client.clone(),
                    isolate.process.url(),
                    waiting_left.clone(),
                ))
            });
        let mut tasks = Vec::with_capacity(send.requests);
        for number in 1..=send.requests {
            let isolate = send.isolate.unwrap_or((number - 1) % self.isolates.len());
            let Some(target) = self.isolates.get_mut(isolate) else {
                continue;
            };
            target.served = true;
            let mut request = client.get(format!("{}{}", target.process.url(), send.path));
            if !chain.is_empty() {
                request = request.header(runtime::address::FORWARDED_FOR_HEADER, &chain);
            }
            if let Some(caller) = &send.caller {
                request = request.header(CALLER_HEADER, caller);
                self.observation.sent_subjects.insert(caller.clone());
            }
            let address = match (&send.address, send.distinct_addresses) {
                (Some(address), _) => Some(address.clone()),
                (None, true) => Some(self.fresh_address()),
                (None, false) => None,
            };
            if let Some(address) = address {
                request = request.header(runtime::limiter::ADDRESS_HEADER, &address);
                self.observation.sent_subjects.insert(address);
            }
            for (name, value) in &send.headers {
                request = request.header(name, value);
            }
            let Ok(permit) = semaphore.clone().acquire_owned().await else {
                break;
            };
            let left = waiting_left.clone();
            tasks.push(tokio::spawn(async move {
                let started = Instant::now();
                let record = answer(request.send().await).await;
                let latency = started.elapsed();
                if number <= waiting {
                    left.fetch_sub(1, Ordering::SeqCst);
                }
                drop(permit);
                (number, isolate, record, latency)
            }));
            if send.spacing_ms > 0 && number < send.requests {
                tokio::time::sleep(Duration::from_millis(send.spacing_ms)).await;
            }
        }
        for task in tasks {
            if let Ok((number, isolate, (outcome, headers, body), latency)) = task.await {
                self.observation.requests.push(RequestRecord {
                    step,
                    number,
                    isolate,
                    outcome,
                    headers,
                    body,
                    latency,
                });
            }
        }
        if let Some(probing) = probing {
            // Every request is answered: the probes stop even if one was never sent.
            waiting_left.store(0, Ordering::SeqCst);
            if let Ok(probes) = probing.await {
                self.observation.load_probes.insert(step, probes);
            }
        }
        Ok(())
    }

    fn fresh_address(&mut self) -> String {
        let n = self.next_address;
        self.next_address += 1;
        format!("10.{}.{}.{}", (n >> 16) & 255, (n >> 8) & 255, n & 255)
    }

    fn check_alive(&mut self, step: usize) -> Result<(), EngineError> {
        if let SharedCount::RunStore { .. } = self.shared_count {
            self.env.store.alive()?;
        }
        for (isolate, i) in self.isolates.iter_mut().enumerate() {
            if let Some(status) = i.process.exited() {
                return Err(EngineError::Crashed {
                    isolate,
                    step,
                    status: status.to_string(),
                    stderr: i.process.stderr(),
                });
            }
        }
        Ok(())
    }

    /// `set_bindings`: changes the named bindings' behaviour in every isolate.
    async fn set_bindings(
        &mut self,
        changes: &BTreeMap<String, Behaviour>,
    ) -> Result<(), EngineError> {
        let mut body = serde_json::Map::new();
        for name in &self.configured {
            if let Some(b) = changes.get(name).or_else(|| changes.get(ALL_BINDINGS)) {
                body.insert(name.clone(), b.to_json());
            }
        }
        for isolate in &self.isolates {
            let url = format!("{}/bindings", isolate.process.url());
            self.control(
                ControlRequest::ChangeBindings,
                self.client.post(url).json(&body),
            )
            .await?;
        }
        Ok(())
    }

    /// `restart_isolate`: a new workerd process for the isolate, with empty
    /// memory, reading the same clock.
    async fn restart(&mut self, index: usize) -> Result<(), EngineError> {
        let old = self.isolates.remove(index);
        let config = old.config.clone();
        let generation = old.generation + 1;
        self.retire(index, old).await?;
        let process = self.start_instance(index, &config).await?;
        self.isolates.insert(
            index,
            Isolate {
                process,
                generation,
                served: false,
                config,
            },
        );
        match self.clock_kind {
            ClockKind::Scenario => self.push_clock().await,
            ClockKind::Wall => Ok(()),
        }
    }

    /// Each configured binding's stats in one isolate (`GET /bindings`, see `assets/entry.js`).
    async fn binding_stats(
        &self,
        base: &str,
    ) -> Result<serde_json::Map<String, serde_json::Value>, EngineError> {
        let value = self
            .control(
                ControlRequest::ReadBindings,
                self.client.get(format!("{base}/bindings")),
            )
            .await?;
        Ok(value.as_object().cloned().unwrap_or_default())
    }

    /// Reads what reached its bindings, stops it, and keeps every line it
    /// wrote: its log is read to the end after the kill (every line counts
    /// for the fallback and no-key checks), or the run fails saying it was not.
    async fn retire(&mut self, index: usize, mut isolate: Isolate) -> Result<(), EngineError> {
        // What reached the bindings is judged (`binding_keys`): a live
        // process whose stats cannot be read fails the run. One that exited
        // has been reported as a crash.
        let mut stats_read = Ok(());
        if isolate.process.exited().is_none() && isolate.process.has_bindings() {
            match self.binding_stats(&isolate.process.url()).await {
                Ok(stats) => self.record_binding_keys(stats),
                Err(e) => stats_read = Err(e),
            }
        }
        let kind = match &isolate.process {
            Instance::Workerd(_) => InstanceKind::Workerd,
            Instance::Native(_) => InstanceKind::Native,
        };
        let (lines, unfinished) = match isolate.process.stop().await {
            Ok(lines) => (lines, None),
            Err(mut unfinished) => {
                let lines = std::mem::take(&mut unfinished.lines);
                (lines, Some(unfinished))
            }
        };
        self.observation.instances.push(InstanceRecord {
            kind,
            isolate: index,
            generation: isolate.generation,
            lines,
            served: isolate.served,
        });
        stats_read?;
        match unfinished {
            None => Ok(()),
            Some(source) => Err(EngineError::LogUnfinished {
                isolate: index,
                generation: isolate.generation,
                source,
            }),
        }
    }

    /// Adds the keys in one process's binding stats to the record.
    fn record_binding_keys(&mut self, stats: serde_json::Map<String, serde_json::Value>) {
        for (binding, stat) in stats {
            let keys = stat["keys"]
                .as_object()
                .map(|k| k.keys().cloned().collect::<Vec<_>>())
                .unwrap_or_default();
            self.observation
                .binding_keys
                .entry(binding)
                .or_default()
                .extend(keys);
        }
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

/// A response's status, headers (names in lower case) and body, or why none came.
pub(super) async fn answer(
    result: Result<reqwest::Response, reqwest::Error>,
) -> (Result<u16, String>, BTreeMap<String, String>, String) {
    match result {
        Ok(response) => {
            let status = response.status().as_u16();
            let headers = response
                .headers()
                .iter()
                .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
                .collect();
            let body = response.text().await.unwrap_or_default();
            (Ok(status), headers, body)
        }
        Err(e) => (Err(error_chain(&e)), BTreeMap::new(), String::new()),
    }
}

/// The wall clock, in ms since the Unix epoch.
pub(super) fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
