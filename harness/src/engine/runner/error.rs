//! Why a scenario could not be run to the end, and the harness's requests
//! to its own processes that can fail.

use crate::world::native::NativeError;
use crate::world::native::launch::LaunchError;
use crate::world::process::LogUnfinished;
use crate::world::scenario_redis::ScenarioRedisError;
use crate::world::workerd::count_server::CountServerError;
use crate::world::workerd::process::ProcessError;

/// Why a scenario could not be run to the end.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The run's directory or a workerd config could not be written.
    #[error("could not write the workerd config: {0}")]
    Config(std::io::Error),
    /// The reference core's store process did not start.
    #[error("the count server: {0}")]
    StoreStart(ProcessError),
    /// The run's count server (the harness's core) did not start or exited.
    #[error(transparent)]
    CountServer(#[from] CountServerError),
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
/// `assets/count-server.js`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlRequest {
    /// `POST /bindings` to an isolate.
    ChangeBindings,
    /// `GET /bindings` from an isolate.
    ReadBindings,
    /// `POST /clock` to an isolate or the count server.
    SetClock,
    /// `POST /forget` to the run's count server: the scenario's scope ends.
    ForgetScope,
    /// `POST /limit` to an isolate: one raw `limit()` call.
    CallLimit,
    /// `GET /metrics` from a native instance.
    ReadMetrics,
    /// `GET /data_points` from an isolate: what its dataset binding received.
    ReadDataPoints,
}

impl std::fmt::Display for ControlRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ControlRequest::ChangeBindings => "changing bindings",
            ControlRequest::ReadBindings => "reading bindings",
            ControlRequest::SetClock => "setting the scenario clock",
            ControlRequest::ForgetScope => "dropping the scenario's counts in the count server",
            ControlRequest::CallLimit => "calling limit()",
            ControlRequest::ReadMetrics => "reading a native instance's metrics",
            ControlRequest::ReadDataPoints => "reading an isolate's data points",
        })
    }
}
