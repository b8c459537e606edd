//! The record of one scenario run: every request and its answer, every
//! process's output, the keys that reached the bindings, the raw calls. The
//! engine writes it; the judge and the report read it.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::language::probe::CallOutcome;
use crate::language::scenario::RedisCalls;
use crate::world::metrics::SeriesKey;
use crate::world::process::LogLine;

/// One request and its answer.
#[derive(Debug, Clone)]
pub struct RequestRecord {
    /// The step's index (0-based) and the request's number in it (1-based).
    pub step: usize,
    /// The request's number in its step (1-based), as failures name it.
    pub number: usize,
    /// The isolate (0-based) it was sent to.
    pub isolate: usize,
    /// The status, or why no response arrived.
    pub outcome: Result<u16, String>,
    /// Response headers, names in lower case.
    pub headers: BTreeMap<String, String>,
    /// The response body (a JSON body's fields can be expected).
    pub body: String,
    /// From sending to the whole body read.
    pub latency: Duration,
    /// When it was sent, since the scenario started: the report page draws
    /// each request at its time.
    pub sent: Duration,
}

/// When one step ran, on the harness's clock and on the scenario clock: the
/// report page places the requests and log lines of a scenario on its
/// scenario clock with these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepRecord {
    /// The step's index (0-based).
    pub index: usize,
    /// When it began, since the scenario started.
    pub started: Duration,
    /// When it ended, since the scenario started.
    pub ended: Duration,
    /// The scenario clock when it began, in ms since the beginning of the
    /// minute the scenario started in (where 10 s and 60 s windows begin).
    pub clock_started_ms: u64,
    /// The scenario clock when it ended, on the same scale: more than
    /// `clock_started_ms` plus the step's real time when it moved the clock.
    pub clock_ended_ms: u64,
}

/// Everything one workerd process wrote, and which isolate it was.
#[derive(Debug, Clone)]
pub struct InstanceRecord {
    /// What ran: a workerd isolate or a native instance.
    pub kind: InstanceKind,
    /// The isolate (0-based) it was.
    pub isolate: usize,
    /// 0 for the first process of an isolate, 1 after its first restart, and so on.
    pub generation: usize,
    /// Everything it wrote, in order: fallback lines are read from it, and
    /// no key may appear in it.
    pub lines: Vec<LogLine>,
    /// Whether it served at least one request.
    pub served: bool,
}

/// What process an [`InstanceRecord`] is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstanceKind {
    /// A workerd process running the Workers deployable (an isolate).
    Workerd,
    /// A `native-fixture` process running a native deployable.
    Native,
    /// The tail of the Worker on Cloudflare (`harness cloudflare`): every
    /// isolate's lines, which the tail does not tell apart.
    CloudflareTail,
}

impl InstanceKind {
    /// How failures name the instance: `isolate 0`, `native instance 0`.
    pub fn name(self, index: usize) -> String {
        match self {
            InstanceKind::Workerd => format!("isolate {index}"),
            InstanceKind::Native => format!("native instance {index}"),
            InstanceKind::CloudflareTail => "the Worker on Cloudflare".to_owned(),
        }
    }

    /// How a failure report heads its log: `workerd log of isolate 0`,
    /// `native-fixture log of native instance 0`.
    pub fn log_label(self, index: usize) -> String {
        let program = match self {
            InstanceKind::Workerd => "workerd",
            InstanceKind::Native => "native-fixture",
            InstanceKind::CloudflareTail => "tail",
        };
        format!("{program} log of {}", self.name(index))
    }
}

/// What a scenario run observed.
#[derive(Debug, Clone, Default)]
pub struct Observation {
    /// Every request of every `send` step, in the order their answers were collected.
    pub requests: Vec<RequestRecord>,
    /// Every process of every isolate, sorted by isolate then generation.
    pub instances: Vec<InstanceRecord>,
    /// Distinct keys that reached each emulated binding, over every process.
    pub binding_keys: BTreeMap<String, BTreeSet<String>>,
    /// The raw `limit()` calls of `limit` steps, in order.
    pub calls: Vec<CallRecord>,
    /// Every caller id and address the scenario sent: none may appear in a log.
    pub sent_subjects: BTreeSet<String>,
    /// The diagnostics validation reported, for an invalid application.
    pub diagnostics: Option<Vec<String>>,
    /// The script calls a native scenario's Redis ran during each `send`
    /// step (by index) whose expectations count them.
    pub redis_calls: BTreeMap<usize, RedisCalls>,
    /// For each `send` step (by index) with a `deadline`: the load probes
    /// sent to its isolate while its first requests waited.
    pub load_probes: BTreeMap<usize, Vec<LoadProbe>>,
    /// For each `send` step (by index) whose expectations name `metrics`:
    /// how each series of the limiter's metrics changed during it, summed
    /// over the scenario's processes (read before and after the step).
    pub metrics_steps: BTreeMap<usize, BTreeMap<SeriesKey, f64>>,
    /// The limiter's metrics at the end, series by series, summed over
    /// every process: each one's last reading (one `restart_isolate` retired
    /// adds its counts, not its gauges, which it no longer has). `None` when
    /// the deployable has none (a Worker whose application names no dataset).
    pub metrics_final: Option<BTreeMap<SeriesKey, f64>>,
    /// Every metrics text a native instance served and every data points
    /// answer an isolate gave, as read: no key may appear in them.
    pub metrics_texts: Vec<MetricsText>,
    /// The dataset binding a Worker's plan named, when its application
    /// names a dataset: the `rate_limits.data_points` lines name it.
    pub data_points_binding: Option<String>,
    /// Data points an isolate's dataset received whose shape is not the
    /// interface's, each described.
    pub malformed_points: Vec<MetricsText>,
    /// Every step that ran, in order.
    pub steps: Vec<StepRecord>,
    /// Every `limit()` call the deployable made on an emulated binding, as
    /// each binding logged it in each process, read when the process
    /// stopped (none for native instances or on Cloudflare).
    pub binding_calls: Vec<BindingCall>,
    /// The whole run, processes' start and stop included.
    pub duration: Duration,
}

/// A text a process gave of its metrics, and which process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsText {
    /// The process, as failures name it (`native instance 0`, `isolate 1 after restart 1`).
    pub process: String,
    /// The text.
    pub text: String,
}

/// One request that cannot wait, sent while a step's requests waited for a
/// deadline ([`crate::engine::load_probe`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadProbe {
    /// When it was due, since the step began.
    pub due: Duration,
    /// From when it was due to its answer: how late the machine answered then.
    pub delay: Duration,
}

/// One raw `limit()` call a scenario made.
#[derive(Debug, Clone, PartialEq)]
pub struct CallRecord {
    /// The step's index (0-based).
    pub step: usize,
    /// The isolate (0-based) whose binding was called.
    pub isolate: usize,
    /// What the call gave.
    pub outcome: CallOutcome,
}

/// One `limit()` call a Workers deployable made on an emulated binding, as
/// the binding logged it (`assets/ratelimit-binding.js`): when, and how it
/// went, never its key. The report page draws each binding's cool-off and
/// probe from these, as the run observed them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindingCall {
    /// The isolate (0-based) whose deployable called it.
    pub isolate: usize,
    /// The isolate's process: 0, then 1 after its first restart (a new
    /// process has a new breaker).
    pub generation: usize,
    /// The binding's name.
    pub binding: String,
    /// When it was called, since the scenario started (the isolate's
    /// `Date.now()`, which workerd advances at each I/O, to the ms).
    pub at: Duration,
    /// How it went.
    pub outcome: BindingOutcome,
}

/// How one [`BindingCall`] went, as the binding saw it settle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindingOutcome {
    /// It resolved with a boolean `success` this long after the call.
    Answered(Duration),
    /// It resolved without a boolean `success` this long after the call.
    Malformed(Duration),
    /// Its promise rejected this long after the call.
    Rejected(Duration),
    /// It threw at once.
    Threw,
    /// It had not settled when the binding was read (a hanging binding's).
    Pending,
}

/// Why a [`BindingCall`] troubled the deployable's gate (which then leaves
/// the binding alone for a cool-off, `runtime::unstable_for_tools::breaker`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trouble {
    /// It threw.
    Threw,
    /// Its promise rejected in time.
    Rejected,
    /// It answered in time without a boolean `success`.
    Malformed,
    /// It did not settle within the gate's deadline.
    NoAnswerInTime,
}

impl Trouble {
    /// How the page says it.
    pub fn label(self) -> &'static str {
        match self {
            Trouble::Threw => "threw",
            Trouble::Rejected => "rejected",
            Trouble::Malformed => "answered malformed",
            Trouble::NoAnswerInTime => "no answer in time",
        }
    }
}

impl BindingOutcome {
    /// Why the deployable's gate found the binding troubled by this call:
    /// it threw, rejected, answered malformed, or did not answer within the
    /// gate's deadline ([`runtime::unstable_for_tools::backend::DEADLINE_MS`]); `None` for an
    /// answer in time.
    pub fn trouble(self) -> Option<Trouble> {
        let deadline =
            Duration::from_millis(u64::from(runtime::unstable_for_tools::backend::DEADLINE_MS));
        match self {
            BindingOutcome::Answered(after) if after < deadline => None,
            BindingOutcome::Malformed(after) if after < deadline => Some(Trouble::Malformed),
            BindingOutcome::Rejected(after) if after < deadline => Some(Trouble::Rejected),
            BindingOutcome::Threw => Some(Trouble::Threw),
            BindingOutcome::Answered(_)
            | BindingOutcome::Malformed(_)
            | BindingOutcome::Rejected(_)
            | BindingOutcome::Pending => Some(Trouble::NoAnswerInTime),
        }
    }

    /// How long after the call it settled, if it did.
    pub fn settled_after(self) -> Option<Duration> {
        match self {
            BindingOutcome::Answered(after)
            | BindingOutcome::Malformed(after)
            | BindingOutcome::Rejected(after) => Some(after),
            BindingOutcome::Threw => Some(Duration::ZERO),
            BindingOutcome::Pending => None,
        }
    }
}
