//! The limiter inside the pinned workerd: throughput and latency with
//! limiting on and off and against a bare Worker, what writing the data
//! points costs, the 500 ms deadline under a hanging binding, and how long
//! workerd takes to start. BENCHMARKS.md records the figures; `tools/bench`
//! runs this with everything else.
//!
//! Run: `cargo bench -p harness --bench workerd [-- SECTION...]`, SECTION
//! one of `throughput`, `data_points`, `deadline`, `starts` (all of them
//! when none is named).
//! Prints Markdown tables on stdout and progress on stderr.
//!
//! - `throughput`: `GET /api/items` (one check: the address limit, 120 a
//!   minute; each request from the next of 50,000 addresses in turn, so none
//!   is refused) against five workerd processes started side by side:
//!   - `bare`: a JavaScript Worker that only answers 200 (`bare-worker.js`);
//!   - `off`: the deployable with limiting switched off (the text binding
//!     `LIMITING = "off"`, see `harness/workers/wasm-bindgen`), otherwise the config of
//!     `on, store`;
//!   - `on, store`: healthy emulated bindings counting in the binding store,
//!     a workerd process of its own, as every scenario runs them;
//!   - `on, in-isolate binding`: healthy emulated bindings counting in the
//!     binding module inside the deployable's isolate (no store process);
//!   - `on, memory`: the bindings missing, so the limiter counts in the
//!     isolate's memory (`WindowCounter`) and asks nobody;
//!   - `bare, binding once`: the config of `on, in-isolate binding` with
//!     its entry module replaced by `bare-binding-worker.js`, whose fetch
//!     calls the binding once and answers: the floor of the binding path
//!     (issue 44), no gate logic;
//!   - `JS gate, in-isolate binding`: the config of `on, in-isolate binding`
//!     with its entry module replaced by `js-gate-worker.js`, a plain
//!     JavaScript Worker asking the same binding with its own 500 ms race:
//!     what asking the binding costs JavaScript, beside the Rust gate;
//!   - `workers-rs off`, `workers-rs on, in-isolate binding`, `workers-rs on,
//!     memory`: the same three for the Worker written with workers-rs
//!     (`harness/workers/workers-rs`); `axum off`, `axum on, in-isolate
//!     binding`: for the axum one (`harness/workers/axum`).
//!
//!   The load generator is the same for all: closed loop, `CONCURRENCY`
//!   keep-alive HTTP/1.1 connections with one request in flight each
//!   (hyper, on this one thread), a warm-up then a fixed duration per target
//!   and round, several rounds with the targets' order rotated each round.
//!   Every ratio is taken within a round and summarised by its median.
//!   The plan of every target of the other sections leaves out the
//!   application's `data_points`, so they write no data point.
//! - `data_points`: what the Workers Analytics Engine data points cost the
//!   gate, with the throughput section's load, rounds and ratios (`GET
//!   /api/items`, the bindings counting in the isolate), each target with
//!   its plan's `data_points` line and the emulated dataset recording
//!   (`with`) beside the same without either (`without`), for three
//!   traffics: `refused` (one hot address over its limit: every request but
//!   its first 120 a minute refused, each writing a point), `missing` (every
//!   binding missing, distinct addresses: every request counted in memory
//!   because its binding could not be asked, each writing a point), and
//!   `passing` (distinct addresses, healthy bindings: no point written);
//!   `refused` and `missing` also `with stub`, the dataset's module replaced
//!   by `data-points-stub.js`, whose `writeDataPoint` only counts its calls
//!   (the emulation keys each point by its JSON in the same isolate, where
//!   Cloudflare's write queues it outside); and `refused` for the workers-rs
//!   Worker. Judged by with ÷ without per round, median of the rounds, ≥
//!   0.95. Afterwards each target's dataset is read (`GET /data_points`):
//!   the section fails unless every `with` target wrote one point for each
//!   request its traffic should (all labelled alike) and every `without`
//!   target none.
//! - `deadline`: every binding hanging, in one isolate (built first by a
//!   `/health` request, which asks no binding). A burst of
//!   `BENCH_DEADLINE_REQUESTS` requests at concurrency 8: the first ones,
//!   in flight together, wait for the 500 ms deadline, and the binding's
//!   cool-off spares the rest. Then a paced run, one request every 100 ms
//!   for `BENCH_DEADLINE_PACED_SECONDS`, so cool-offs end and probes wait
//!   too. Each run reports the requests that waited (>= 400 ms: firsts and
//!   probes) and the others apart.
//! - `starts`: workerd's spawn to listen (`WorkerdProcess::start_to_listen`)
//!   and spawn to the first 200 (cold start) through the gate (`GET
//!   /api/items`, healthy bindings counting in the isolate), for the three
//!   Rust Workers (each with limiting on and off), the wasm-bindgen one with
//!   its bindings missing, the JS gate, and two baselines: the bare Worker,
//!   and the bare Worker in the deployable's config (its bindings, the
//!   emulated binding's module, no other module), which is what a Worker
//!   starts with before any gate. Started in turn round after round, one
//!   process at a time; then how long the first request took (on a
//!   connection made before it, as the warm ones are), ÷ each bare
//!   Worker's first request in the same round (issue 44's floor of the
//!   first request), beside the next [`WARM_REQUESTS`] on the same
//!   connection; and the binding store's spawn to listen.
//!
//! Knobs (environment variables, defaults in brackets): `BENCH_ROUNDS` [6],
//! `BENCH_SECONDS` [5], `BENCH_WARMUP_SECONDS` [1], `BENCH_CONCURRENCY` [8],
//! `BENCH_DEADLINE_REQUESTS` [200], `BENCH_DEADLINE_PACED_SECONDS` [25],
//! `BENCH_STARTS` [30], `BENCH_TARGETS`
//! [all; else the throughput targets' names, separated by `;`; the
//! `data_points` section always runs all of its own].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use harness::engine::{CONTROL_HEADER, Environment};
use harness::judge::stats::{self, median};
use harness::language::scenario::{Behaviour, DataPointsBinding};
use harness::world::proc;
use harness::world::wasm::{WorkerBuild, WorkerChoice, build_worker};
use harness::world::workerd::config::{
    BindingCounter, IsolateConfig, write_config, write_count_server_config,
};
use harness::world::workerd::data_points::{EmulatedDataset, read_points};
use harness::world::workerd::reference::CoreChoice;
use harness::world::workerd::{EmulatedBinding, WorkerdChoice, WorkerdProcess};
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use runtime::bindings::Bindings;
use runtime::config::Application;
use runtime::limiter::ADDRESS_HEADER;
use tokio::net::TcpStream;

/// The application every deployable config runs, and its deployable.
const APPLICATION: &str = "scenarios/apps/cloudflare.toml";
const DEPLOYABLE: &str = "edge";
/// An API route with no limit of its own: one binding call a request.
const API_PATH: &str = "/api/items";
/// Addresses are used in turn from this many, far below 120 a minute each.
const ADDRESS_POOL: u64 = 50_000;
const BARE_JS: &str = include_str!("bare-worker.js");
const JS_GATE_JS: &str = include_str!("js-gate-worker.js");
/// The floor of the binding path: one `limit()` call and an answer.
const BARE_BINDING_JS: &str = include_str!("bare-binding-worker.js");
const DATA_POINTS_STUB_JS: &str = include_str!("data-points-stub.js");
/// The emulated dataset's module in a config, which the stub replaces.
const DATA_POINTS_MODULE_FILE: &str = "data-points-binding.js";
/// The control token of every deployable config (`GET /data_points` carries it).
const CONTROL_TOKEN: &str = "bench";
/// A request that took this long waited for the binding's deadline.
const WAITED_US: u32 = 400_000;

type Error = Box<dyn std::error::Error + Send + Sync>;

fn knob(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// When a load run ends.
#[derive(Debug, Clone, Copy)]
enum Stop {
    /// No request is started after this instant.
    At(Instant),
    /// This many requests in all.
    After(u64),
}

/// What one load run saw.
#[derive(Debug, Default)]
struct Load {
    /// Per answered request, in microseconds.
    latencies_us: Vec<u32>,
    statuses: BTreeMap<u16, u64>,
    errors: u64,
    elapsed: Duration,
    /// CPU time the target's workerd spent meanwhile, in ns (0 when not
    /// taken: [`measure`] takes it).
    target_cpu_ns: u64,
}

impl Load {
    fn answered(&self) -> usize {
        self.latencies_us.len()
    }
    /// The target's CPU per answered request, in microseconds.
    fn cpu_us(&self) -> f64 {
        self.target_cpu_ns as f64 / 1000.0 / self.answered().max(1) as f64
    }
    fn rps(&self) -> f64 {
        self.answered() as f64 / self.elapsed.as_secs_f64()
    }
    fn not_200(&self) -> u64 {
        self.statuses
            .iter()
            .filter(|(s, _)| **s != 200)
            .map(|(_, n)| n)
            .sum()
    }
    fn absorb(&mut self, other: Load) {
        self.latencies_us.extend(other.latencies_us);
        for (status, n) in other.statuses {
            *self.statuses.entry(status).or_default() += n;
        }
        self.errors += other.errors;
        self.elapsed += other.elapsed;
        self.target_cpu_ns += other.target_cpu_ns;
    }
    /// The `percent`-th percentile ([`stats::percentile`]) in milliseconds.
    fn percentile_ms(&mut self, percent: u32) -> f64 {
        self.latencies_us.sort_unstable();
        stats::percentile(&self.latencies_us, percent).map_or(f64::NAN, |us| f64::from(us) / 1000.0)
    }
}

fn address(i: u64) -> String {
    let i = i % ADDRESS_POOL;
    format!("10.{}.{}.{}", (i >> 16) & 255, (i >> 8) & 255, i & 255)
}

/// The addresses a target's requests come from, in turn: from
/// [`ADDRESS_POOL`] (none refused), or one hot address (over its limit
/// after its first 120 requests a minute).
#[derive(Debug)]
struct Addresses {
    next: AtomicU64,
    pool: u64,
}

impl Addresses {
    fn distinct() -> Arc<Addresses> {
        Arc::new(Addresses {
            next: AtomicU64::new(0),
            pool: ADDRESS_POOL,
        })
    }

    fn one_hot() -> Arc<Addresses> {
        Arc::new(Addresses {
            next: AtomicU64::new(0),
            pool: 1,
        })
    }

    fn next(&self) -> String {
        address(self.next.fetch_add(1, Relaxed) % self.pool)
    }
}

async fn connect(port: u16) -> Result<SendRequest<Empty<Bytes>>, Error> {
    let stream = TcpStream::connect(("127.0.0.1", port)).await?;
    stream.set_nodelay(true)?;
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(sender)
}

/// One `GET path` on `sender`, the body read to the end; its status.
async fn get(
    sender: &mut SendRequest<Empty<Bytes>>,
    path: &str,
    address: Option<String>,
) -> Result<u16, Error> {
    let mut request = hyper::Request::get(path).header("host", "127.0.0.1");
    if let Some(address) = address {
        request = request.header(ADDRESS_HEADER, address);
    }
    let request = request.body(Empty::<Bytes>::new())?;
    sender.ready().await?;
    let response = sender.send_request(request).await?;
    let status = response.status().as_u16();
    response.into_body().collect().await?;
    Ok(status)
}

/// One connection of the closed loop: a request, its answer, the next.
async fn connection(
    port: u16,
    path: &'static str,
    stop: Stop,
    issued: Arc<AtomicU64>,
    addresses: Arc<Addresses>,
) -> Load {
    let mut load = Load::default();
    let mut sender = None;
    loop {
        let go = match stop {
            Stop::At(at) => Instant::now() < at,
            Stop::After(n) => issued.fetch_add(1, Relaxed) < n,
        };
        if !go {
            break;
        }
        if sender.is_none() {
            match connect(port).await {
                Ok(s) => sender = Some(s),
                Err(_) => {
                    load.errors += 1;
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            }
        }
        let Some(s) = sender.as_mut() else { continue };
        let address = addresses.next();
        let started = Instant::now();
        match get(s, path, Some(address)).await {
            Ok(status) => {
                load.latencies_us
                    .push(u32::try_from(started.elapsed().as_micros()).unwrap_or(u32::MAX));
                *load.statuses.entry(status).or_default() += 1;
            }
            Err(_) => {
                load.errors += 1;
                sender = None;
            }
        }
    }
    load
}

/// Runs the closed loop against `port` until `stop`.
async fn generate(
    port: u16,
    path: &'static str,
    concurrency: usize,
    stop: Stop,
    addresses: &Arc<Addresses>,
) -> Load {
    let started = Instant::now();
    let issued = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..concurrency)
        .map(|_| {
            tokio::spawn(connection(
                port,
                path,
                stop,
                issued.clone(),
                addresses.clone(),
            ))
        })
        .collect();
    let mut load = Load::default();
    for task in tasks {
        if let Ok(part) = task.await {
            load.absorb(part);
        }
    }
    load.elapsed = started.elapsed();
    load
}

/// The emulated bindings of the deployable's plan, all starting as `initial`.
fn bindings(app: &Application, initial: &Behaviour) -> Vec<EmulatedBinding> {
    let deployable = app
        .deployable(DEPLOYABLE)
        .expect("the application has the deployable");
    Bindings::for_deployable(app, deployable)
        .bindings
        .iter()
        .map(|b| EmulatedBinding {
            name: b.name.clone(),
            namespace_id: b.namespace_id,
            limit: b.limit.requests,
            period: b.limit.window_seconds,
            initial: initial.clone(),
            in_config: *initial != Behaviour::Missing,
        })
        .collect()
}

/// What a deployable's config binds for its data points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dataset {
    /// No dataset: the plan without the application's `data_points`, so it
    /// has no `data_points` line and the gate writes no point.
    Unbound,
    /// The plan's `data_points` line, and the emulated dataset recording
    /// every point (`harness/assets/data-points-binding.js`).
    Recording,
    /// The same with that module replaced by `data-points-stub.js`, whose
    /// `writeDataPoint` only counts its calls.
    Stub,
}

/// Everything a benchmark needs to start its processes.
struct Bench {
    /// workerd, and the wasm-bindgen Worker (`harness/workers/wasm-bindgen`).
    env: Environment,
    /// The other Workers (`harness/workers/workers-rs`, `harness/workers/axum`).
    others: Vec<WorkerBuild>,
    /// The deployable's plan, as its build step writes it, without the
    /// application's `data_points` (see [`Bench::new`]).
    plan: String,
    /// The same with them: its `data_points` line names `dataset`'s binding.
    plan_with_points: String,
    /// The dataset the application names, recording, under the plan's binding.
    dataset: EmulatedDataset,
    app: Application,
    dir: tempfile::TempDir,
    configs: usize,
}

impl Bench {
    fn new() -> Result<Bench, Error> {
        let env = harness::commands::suite::prepare_environment_with(
            &WorkerdChoice::from_env(),
            CoreChoice::Harness,
            WorkerChoice::WasmBindgen,
        )?;
        let others = WorkerChoice::ALL
            .into_iter()
            .filter(|w| *w != WorkerChoice::WasmBindgen)
            .map(build_worker)
            .collect::<Result<_, _>>()?;
        let application_toml =
            std::fs::read_to_string(harness::world::paths::repo_root().join(APPLICATION))?;
        let mut app = Application::from_toml(&application_toml)
            .map_err(|d| d.render(APPLICATION).to_string())?;
        let with_points = runtime::GatePlan::new(&app, DEPLOYABLE)?;
        let dataset = EmulatedDataset {
            binding: with_points
                .data_points()
                .ok_or(format!("{APPLICATION} names no data_points"))?
                .to_owned(),
            dataset: app.data_points.clone().unwrap_or_default(),
            behaviour: DataPointsBinding::Recording,
        };
        let plan_with_points = with_points.to_text()?;
        // Without the scenarios' data points: the figures stay the gate's
        // alone, comparable with the rounds measured before it wrote any
        // (the section `data_points` measures them beside it).
        app.data_points = None;
        let plan = runtime::GatePlan::new(&app, DEPLOYABLE)?.to_text()?;
        let line = format!("data_points {}", dataset.binding);
        if plan.contains(&line) || !plan_with_points.contains(&line) {
            return Err(format!(
                "only the second plan should have `{line}`:\n{plan}\n{plan_with_points}"
            )
            .into());
        }
        let dir = tempfile::Builder::new()
            .prefix("harness-bench-")
            .tempdir()?;
        Ok(Bench {
            env,
            others,
            plan,
            plan_with_points,
            dataset,
            app,
            dir,
            configs: 0,
        })
    }

    fn fresh_dir(&mut self) -> Result<PathBuf, Error> {
        self.configs += 1;
        let dir = self.dir.path().join(format!("config-{}", self.configs));
        std::fs::create_dir_all(&dir)?;
        Ok(dir)
    }

    /// Writes a config of `worker`, binding no dataset; returns its path.
    fn deployable_config(
        &mut self,
        worker: WorkerChoice,
        initial: &Behaviour,
        store_port: Option<u16>,
        limiting_off: bool,
    ) -> Result<PathBuf, Error> {
        self.deployable_config_with(worker, initial, store_port, limiting_off, Dataset::Unbound)
    }

    /// Writes a config of `worker`, its data points as `dataset` says; returns its path.
    fn deployable_config_with(
        &mut self,
        worker: WorkerChoice,
        initial: &Behaviour,
        store_port: Option<u16>,
        limiting_off: bool,
        dataset: Dataset,
    ) -> Result<PathBuf, Error> {
        let dir = self.fresh_dir()?;
        let bindings = bindings(&self.app, initial);
        let config = IsolateConfig {
            plan: if dataset == Dataset::Unbound {
                &self.plan
            } else {
                &self.plan_with_points
            },
            bindings: &bindings,
            compatibility_date: &self.env.workerd.version,
            control_token: CONTROL_TOKEN,
            counter: store_port.map_or(BindingCounter::InIsolate, |port| {
                BindingCounter::CountServer {
                    port,
                    scope: "bench",
                }
            }),
            data_points: (dataset != Dataset::Unbound).then_some(&self.dataset),
            limiting_off,
        };
        let deployable = std::iter::once(&self.env.deployable)
            .chain(&self.others)
            .find(|d| d.worker == worker)
            .ok_or("every Worker is built")?;
        let path = write_config(&dir, &config, deployable)?;
        if dataset == Dataset::Stub {
            let module = dir.join(DATA_POINTS_MODULE_FILE);
            if !module.is_file() {
                return Err(
                    format!("the config embeds no {DATA_POINTS_MODULE_FILE} to replace").into(),
                );
            }
            std::fs::write(module, DATA_POINTS_STUB_JS)?;
        }
        Ok(path)
    }

    fn store_config(&mut self) -> Result<PathBuf, Error> {
        let dir = self.fresh_dir()?;
        Ok(write_count_server_config(&dir, &self.env.workerd.version)?)
    }

    /// The bare Worker's config, shaped like the deployable's.
    fn bare_config(&mut self) -> Result<PathBuf, Error> {
        let dir = self.fresh_dir()?;
        std::fs::write(dir.join("bare-worker.js"), BARE_JS)?;
        let path = dir.join("bare.capnp");
        std::fs::write(
            &path,
            format!(
                r#"using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [ (name = "bare", worker = (
    modules = [ (name = "bare-worker.js", esModule = embed "bare-worker.js") ],
    compatibilityDate = "{date}",
  )) ],
  sockets = [ (name = "http", address = "127.0.0.1:0", http = (), service = "bare") ],
  logging = (structuredLogging = true),
);
"#,
                date = self.env.workerd.version
            ),
        )?;
        Ok(path)
    }

    /// The bare Worker in the deployable's config: the same bindings (the
    /// emulated binding module and its three bindings, the text bindings),
    /// `bare-worker.js` its only module. What a Worker costs to start in
    /// this config before any gate is added: the baseline the gate's cold
    /// start is judged against (the emulated binding is a JavaScript module
    /// workerd evaluates, where Cloudflare's binding is its own).
    fn bare_with_bindings_config(&mut self) -> Result<PathBuf, Error> {
        let config =
            self.deployable_config(WorkerChoice::WasmBindgen, &Behaviour::Healthy, None, false)?;
        let dir = config.parent().ok_or("a config has a directory")?;
        std::fs::write(dir.join("entry.js"), BARE_JS)?;
        let text = std::fs::read_to_string(&config)?;
        // The deployable's other modules go: a listed wasm module is compiled
        // when workerd loads the config, imported or not.
        let bare: String = text
            .lines()
            .filter(|line| {
                !(line.contains("esModule = embed") || line.contains("wasm = embed"))
                    || line.contains("\"entry.js\"")
                    || line.contains("internal = true")
            })
            .map(|line| format!("{line}\n"))
            .collect();
        if bare.matches("embed").count() >= text.matches("embed").count() {
            return Err("the deployable's config lists no module to leave out".into());
        }
        std::fs::write(&config, bare)?;
        Ok(config)
    }

    /// The in-isolate deployable config with `js-gate-worker.js` as its entry module.
    fn js_gate_config(&mut self) -> Result<PathBuf, Error> {
        let config =
            self.deployable_config(WorkerChoice::WasmBindgen, &Behaviour::Healthy, None, false)?;
        let dir = config.parent().ok_or("a config has a directory")?;
        std::fs::write(dir.join("entry.js"), JS_GATE_JS)?;
        Ok(config)
    }

    /// The in-isolate deployable config with `bare-binding-worker.js` as
    /// its entry module: the binding called once, no gate.
    fn bare_binding_config(&mut self) -> Result<PathBuf, Error> {
        let config =
            self.deployable_config(WorkerChoice::WasmBindgen, &Behaviour::Healthy, None, false)?;
        let dir = config.parent().ok_or("a config has a directory")?;
        std::fs::write(dir.join("entry.js"), BARE_BINDING_JS)?;
        Ok(config)
    }

    async fn start(&self, config: &Path) -> Result<WorkerdProcess, Error> {
        Ok(WorkerdProcess::start(&self.env.workerd.path, config, Instant::now()).await?)
    }
}

fn min_max(values: &[f64]) -> (f64, f64) {
    values
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(*v), hi.max(*v))
        })
}

/// CPU time on every thread of a process so far, in ns, by thread id
/// (`/proc/PID/task/TID/schedstat`).
#[derive(Debug, Clone, Default)]
struct Cpu(BTreeMap<u32, u64>);

impl Cpu {
    fn of(pid: u32) -> Cpu {
        Cpu(proc::thread_cpu_ns(pid))
    }

    /// CPU ns since `before`: in all, and on the busiest thread.
    fn since(&self, before: &Cpu) -> (u64, u64) {
        let deltas = self
            .0
            .iter()
            .map(|(tid, ns)| ns.saturating_sub(before.0.get(tid).copied().unwrap_or(0)));
        deltas.fold((0, 0), |(sum, max), d| (sum + d, max.max(d)))
    }
}

/// The pid of the workerd serving `config` (its command line names it).
fn pid_of(config: &Path) -> Option<u32> {
    let needle = config.display().to_string();
    proc::pids().into_iter().find(|pid| {
        proc::name(*pid).is_some_and(|name| name == "workerd")
            && proc::arguments(*pid).iter().any(|a| a.contains(&needle))
    })
}

/// The resident memory of a process, in KiB (`VmRSS`); 0 for none.
fn rss_kib(pid: Option<u32>) -> u64 {
    pid.and_then(proc::resident_kib).unwrap_or(0)
}

/// CPU per answered request, in microseconds, over the measured runs.
#[derive(Debug, Clone, Copy, Default)]
struct CpuShare {
    target_ns: u64,
    target_busiest_ns: u64,
    store_ns: u64,
    generator_ns: u64,
}

struct Target {
    name: &'static str,
    process: WorkerdProcess,
    pid: Option<u32>,
    /// Whether its bindings count in the binding store.
    uses_store: bool,
    addresses: Arc<Addresses>,
    cpu: CpuShare,
    /// Resident memory before the first round, and every request answered (warm-ups too).
    rss_before_kib: u64,
    answered_all: u64,
    /// Of those, the ones answered other than 200; and the requests that
    /// failed (warm-ups too).
    not_200_all: u64,
    errors_all: u64,
}

impl Target {
    async fn start(
        bench: &Bench,
        name: &'static str,
        config: &Path,
        addresses: Arc<Addresses>,
    ) -> Result<Target, Error> {
        Ok(Target {
            name,
            process: bench.start(config).await?,
            pid: pid_of(config),
            uses_store: name == "on, store",
            addresses,
            cpu: CpuShare::default(),
            rss_before_kib: 0,
            answered_all: 0,
            not_200_all: 0,
            errors_all: 0,
        })
    }
}

/// How long and how hard the throughput section loads each target.
#[derive(Debug, Clone, Copy)]
struct Plan {
    rounds: usize,
    seconds: u64,
    warmup: u64,
    concurrency: usize,
}

impl Plan {
    fn from_env() -> Plan {
        Plan {
            rounds: knob("BENCH_ROUNDS", 6) as usize,
            seconds: knob("BENCH_SECONDS", 5),
            warmup: knob("BENCH_WARMUP_SECONDS", 1),
            concurrency: knob("BENCH_CONCURRENCY", 8) as usize,
        }
    }
}

/// What one round measured of each target (`None`: not yet measured), by target.
type Round = Vec<Option<Load>>;

async fn throughput(bench: &mut Bench) -> Result<(), Error> {
    let plan = Plan::from_env();
    let store_config = bench.store_config()?;
    let store = bench.start(&store_config).await?;
    let mut targets = start_targets(bench, store.port).await?;
    let store_pid = pid_of(&store_config);
    let loads = run_rounds("throughput", plan, &mut targets, store_pid).await?;
    print_throughput(plan, &targets, loads);
    for target in targets {
        drop(target.process.stop().await);
    }
    drop(store.stop().await);
    Ok(())
}

/// Measures every target once a round, `plan.rounds` rounds, the targets'
/// order rotated each round (so none is always first); what each round
/// measured, by round.
async fn run_rounds(
    section: &str,
    plan: Plan,
    targets: &mut [Target],
    store_pid: Option<u32>,
) -> Result<Vec<Round>, Error> {
    eprintln!(
        "{section}: {} targets, {} rounds of {} s warm-up + {} s each, concurrency {}",
        targets.len(),
        plan.rounds,
        plan.warmup,
        plan.seconds,
        plan.concurrency
    );
    for target in targets.iter_mut() {
        target.rss_before_kib = rss_kib(target.pid);
    }
    // loads[round][target]
    let mut loads: Vec<Round> = Vec::new();
    for round in 0..plan.rounds {
        let mut this_round: Round = (0..targets.len()).map(|_| None).collect();
        for k in 0..targets.len() {
            let index = (round + k) % targets.len();
            let load = measure(plan, &mut targets[index], store_pid, round).await?;
            this_round[index] = Some(load);
        }
        loads.push(this_round);
    }
    Ok(loads)
}

/// Starts the targets `BENCH_TARGETS` names (all when unset), side by side.
async fn start_targets(bench: &mut Bench, store_port: u16) -> Result<Vec<Target>, Error> {
    use Behaviour::{Healthy, Missing};
    use WorkerChoice::{Axum, WasmBindgen, WorkersRs};
    let configs = [
        ("bare", bench.bare_config()?),
        (
            "off",
            bench.deployable_config(WasmBindgen, &Healthy, Some(store_port), true)?,
        ),
        (
            "on, store",
            bench.deployable_config(WasmBindgen, &Healthy, Some(store_port), false)?,
        ),
        (
            "on, in-isolate binding",
            bench.deployable_config(WasmBindgen, &Healthy, None, false)?,
        ),
        (
            "on, memory",
            bench.deployable_config(WasmBindgen, &Missing, None, false)?,
        ),
        ("JS gate, in-isolate binding", bench.js_gate_config()?),
        ("bare, binding once", bench.bare_binding_config()?),
        (
            "workers-rs off",
            bench.deployable_config(WorkersRs, &Healthy, None, true)?,
        ),
        (
            "workers-rs on, in-isolate binding",
            bench.deployable_config(WorkersRs, &Healthy, None, false)?,
        ),
        (
            "workers-rs on, memory",
            bench.deployable_config(WorkersRs, &Missing, None, false)?,
        ),
        (
            "axum off",
            bench.deployable_config(Axum, &Healthy, None, true)?,
        ),
        (
            "axum on, in-isolate binding",
            bench.deployable_config(Axum, &Healthy, None, false)?,
        ),
    ];
    let mut targets = Vec::new();
    let only = std::env::var("BENCH_TARGETS").unwrap_or_default();
    for (name, config) in &configs {
        if !only.is_empty() && !only.split(';').any(|o| o.trim() == *name) {
            continue;
        }
        targets.push(Target::start(bench, name, config, Addresses::distinct()).await?);
    }
    if targets.is_empty() {
        return Err(format!("BENCH_TARGETS={only:?} names none of the targets").into());
    }
    Ok(targets)
}

/// One target's turn in a round: a warm-up, then the measured run, with
/// the CPU each process spent during it added to the target's share.
async fn measure(
    plan: Plan,
    target: &mut Target,
    store_pid: Option<u32>,
    round: usize,
) -> Result<Load, Error> {
    if let Some(status) = target.process.exited() {
        return Err(format!("{} exited ({status})", target.name).into());
    }
    let port = target.process.port;
    let at = |s: u64| Stop::At(Instant::now() + Duration::from_secs(s));
    let warm = generate(
        port,
        API_PATH,
        plan.concurrency,
        at(plan.warmup),
        &target.addresses,
    )
    .await;
    target.answered_all += warm.answered() as u64;
    target.not_200_all += warm.not_200();
    target.errors_all += warm.errors;
    let snapshot = |pid: Option<u32>| pid.map(Cpu::of).unwrap_or_default();
    let before = (
        snapshot(target.pid),
        snapshot(store_pid),
        Cpu::of(std::process::id()),
    );
    let mut load = generate(
        port,
        API_PATH,
        plan.concurrency,
        at(plan.seconds),
        &target.addresses,
    )
    .await;
    let (target_ns, busiest_ns) = snapshot(target.pid).since(&before.0);
    load.target_cpu_ns = target_ns;
    target.cpu.target_ns += target_ns;
    target.cpu.target_busiest_ns += busiest_ns;
    target.cpu.store_ns += snapshot(store_pid).since(&before.1).0;
    target.cpu.generator_ns += Cpu::of(std::process::id()).since(&before.2).0;
    target.answered_all += load.answered() as u64;
    target.not_200_all += load.not_200();
    target.errors_all += load.errors;
    eprintln!(
        "  round {} {:<24} {:>8.0} req/s  ({} answered, {} not 200, {} errors; RSS {} MiB)",
        round + 1,
        target.name,
        load.rps(),
        load.answered(),
        load.not_200(),
        load.errors,
        rss_kib(target.pid) / 1024,
    );
    Ok(load)
}

/// The section's four tables: throughput and latency, req/s per round,
/// where the CPU went, and resident memory.
fn print_throughput(plan: Plan, targets: &[Target], loads: Vec<Round>) {
    let (rps, mut pooled) = by_target(targets.len(), loads);
    print_latency_table(plan, targets, &rps, &mut pooled);
    print_rounds_table(plan, targets, &rps, "round");
    print_cpu_table(plan, targets, &pooled, true);
    print_memory_table(targets);
}

/// Each target's req/s round by round (`rps[target][round]`), and its
/// answers pooled over the rounds.
fn by_target(targets: usize, loads: Vec<Round>) -> (Vec<Vec<f64>>, Vec<Load>) {
    let rps = per_target(targets, &loads, Load::rps);
    let mut pooled: Vec<Load> = (0..targets).map(|_| Load::default()).collect();
    for round in loads {
        for (t, load) in round.into_iter().enumerate() {
            if let Some(load) = load {
                pooled[t].absorb(load);
            }
        }
    }
    (rps, pooled)
}

/// `of(load)` of each target round by round (`[target][round]`).
fn per_target(targets: usize, loads: &[Round], of: fn(&Load) -> f64) -> Vec<Vec<f64>> {
    (0..targets)
        .map(|t| loads.iter().filter_map(|r| r[t].as_ref().map(of)).collect())
        .collect()
}

/// `a ÷ b` round by round: the ratio every pair of targets is judged by.
fn per_round(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter().zip(b).map(|(a, b)| a / b).collect()
}

fn print_latency_table(plan: Plan, targets: &[Target], rps: &[Vec<f64>], pooled: &mut [Load]) {
    let off = targets.iter().position(|t| t.name == "off").unwrap_or(0);
    if targets.iter().all(|t| t.name != "off") {
        eprintln!(
            "(no `off` target: ratios are against {})",
            targets[off].name
        );
    }
    println!(
        "### Throughput and latency (`GET {API_PATH}`, concurrency {}, {} rounds of {} s warm-up + {} s per target)\n",
        plan.concurrency, plan.rounds, plan.warmup, plan.seconds
    );
    println!(
        "| target | req/s, median of rounds | req/s, min-max | p50, ms | p99, ms | answered | not 200 | errors | req/s / off, median of rounds | min-max |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (t, target) in targets.iter().enumerate() {
        let (lo, hi) = min_max(&rps[t]);
        let relative = per_round(&rps[t], &rps[off]);
        let (rlo, rhi) = min_max(&relative);
        let load = &mut pooled[t];
        println!(
            "| {} | {:.0} | {lo:.0}-{hi:.0} | {:.3} | {:.3} | {} | {} | {} | **{:.3}** | {rlo:.3}-{rhi:.3} |",
            target.name,
            median(&rps[t]),
            load.percentile_ms(50),
            load.percentile_ms(99),
            load.answered(),
            load.not_200(),
            load.errors,
            median(&relative),
        );
    }
    println!();
}

/// Each target's req/s round by round; the first column's header is
/// `round` only for the throughput section's table, which
/// `tools/workerd-pairs.awk` reads out of the whole bench's output.
fn print_rounds_table(plan: Plan, targets: &[Target], rps: &[Vec<f64>], round_header: &str) {
    println!("Per round, req/s (the targets' order rotated each round):\n");
    let columns: Vec<&str> = targets.iter().map(|t| t.name).collect();
    let cells: Vec<Vec<String>> = rps
        .iter()
        .map(|r| r.iter().map(|v| format!("{v:.0}")).collect())
        .collect();
    print_round_rows(round_header, &columns, plan.rounds, &cells);
}

/// A Markdown table with a row per round (`header` names the first column)
/// and a column per `columns`, `cells[column][round]` (`-` where missing).
fn print_round_rows<C: std::fmt::Display>(
    header: &str,
    columns: &[C],
    rounds: usize,
    cells: &[Vec<String>],
) {
    let names: Vec<String> = columns.iter().map(ToString::to_string).collect();
    println!("| {header} | {} |", names.join(" | "));
    println!("|---:|{}", "---:|".repeat(columns.len()));
    for round in 0..rounds {
        let row: Vec<&str> = cells
            .iter()
            .map(|c| c.get(round).map_or("-", String::as_str))
            .collect();
        println!("| {} | {} |", round + 1, row.join(" | "));
    }
    println!();
}

/// `store`: whether a binding store ran beside the targets (its column is
/// `-` when none did).
fn print_cpu_table(plan: Plan, targets: &[Target], pooled: &[Load], store: bool) {
    let wall: f64 = (plan.rounds as u64 * plan.seconds) as f64;
    println!(
        "Where the CPU went, in microseconds per answered request (measured runs only; `/proc/PID/task/*/schedstat`), and the cores in use (CPU time / wall time):\n"
    );
    println!(
        "| target | workerd serving it | of which its busiest thread | binding store | load generator | sum | cores in use |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for (t, target) in targets.iter().enumerate() {
        let n = pooled[t].answered().max(1) as f64;
        let us = |ns: u64| ns as f64 / 1000.0 / n;
        let c = target.cpu;
        // The store counts only for the target whose bindings ask it.
        let store_ns = if target.uses_store { c.store_ns } else { 0 };
        let sum = c.target_ns + store_ns + c.generator_ns;
        println!(
            "| {} | {:.1} | {:.1} | {} | {:.1} | {:.1} | {:.2} |",
            target.name,
            us(c.target_ns),
            us(c.target_busiest_ns),
            if !store {
                "-".to_owned()
            } else if target.uses_store {
                format!("{:.1}", us(store_ns))
            } else {
                format!("({:.1}, idle)", us(c.store_ns))
            },
            us(c.generator_ns),
            us(sum),
            sum as f64 / 1e9 / wall,
        );
    }
    println!();
}

fn print_memory_table(targets: &[Target]) {
    println!(
        "Resident memory of each target's workerd (`VmRSS`) before the first round and after the last, over every request it answered (warm-ups included):\n"
    );
    println!(
        "| target | RSS before, MiB | RSS after, MiB | requests | growth, bytes per request |"
    );
    println!("|---|---:|---:|---:|---:|");
    for target in targets {
        let after = rss_kib(target.pid);
        println!(
            "| {} | {:.1} | {:.1} | {} | {:.0} |",
            target.name,
            target.rss_before_kib as f64 / 1024.0,
            after as f64 / 1024.0,
            target.answered_all,
            (after as f64 - target.rss_before_kib as f64) * 1024.0
                / target.answered_all.max(1) as f64,
        );
    }
    println!();
}

/// The traffic of a `data_points` target, and so the points its gate
/// writes when its plan names a dataset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Traffic {
    /// One hot address over its limit (120 a minute), the bindings healthy:
    /// every request past its first 120 a minute refused by the binding,
    /// each writing a point (`address`, `refused`, `none`).
    Refused,
    /// Distinct addresses, every binding missing: each request counted in
    /// memory because its binding could not be asked, and passed, each
    /// writing a point (`address`, `passed`, `missing`).
    Missing,
    /// Distinct addresses, the bindings healthy: every request passes
    /// through its binding and writes no point.
    Passing,
}

impl Traffic {
    fn describe(self) -> &'static str {
        match self {
            Traffic::Refused => "refused: one hot address over its limit",
            Traffic::Missing => "counted in memory: every binding missing",
            Traffic::Passing => "passing: distinct addresses",
        }
    }

    fn bindings(self) -> Behaviour {
        match self {
            Traffic::Missing => Behaviour::Missing,
            Traffic::Refused | Traffic::Passing => Behaviour::Healthy,
        }
    }

    fn addresses(self) -> Arc<Addresses> {
        match self {
            Traffic::Refused => Addresses::one_hot(),
            Traffic::Missing | Traffic::Passing => Addresses::distinct(),
        }
    }

    /// Of a target's requests, how many should have written a point, and
    /// the `(outcome, reason)` each carries (on the address limit); or why
    /// the traffic was not what this section measures.
    fn points(self, target: &Target) -> Result<(u64, Option<OutcomeReason>), String> {
        let (answered, not_200) = (target.answered_all, target.not_200_all);
        match self {
            // The first 120 a minute pass, every other is refused.
            Traffic::Refused if not_200 * 10 < answered * 9 => Err(format!(
                "only {not_200} of {answered} answers were refusals"
            )),
            Traffic::Refused => Ok((not_200, Some(("refused", "none")))),
            Traffic::Missing | Traffic::Passing if not_200 > 0 => {
                Err(format!("{not_200} of {answered} answers were not 200"))
            }
            Traffic::Missing => Ok((answered, Some(("passed", "missing")))),
            Traffic::Passing => Ok((0, None)),
        }
    }
}

/// A data point's outcome and reason (`blob2`, `blob3`).
type OutcomeReason = (&'static str, &'static str);

/// The targets of the section `data_points`, in the order they are
/// started and measured (rotated each round): each Worker and traffic with
/// its dataset unbound, recording, and stubbed, side by side.
const POINTS_TARGETS: [(&str, WorkerChoice, Traffic, Dataset); 11] = {
    use Dataset::{Recording, Stub, Unbound};
    use Traffic::{Missing, Passing, Refused};
    use WorkerChoice::{WasmBindgen, WorkersRs};
    [
        ("refused, without", WasmBindgen, Refused, Unbound),
        ("refused, with", WasmBindgen, Refused, Recording),
        ("refused, with stub", WasmBindgen, Refused, Stub),
        ("missing, without", WasmBindgen, Missing, Unbound),
        ("missing, with", WasmBindgen, Missing, Recording),
        ("missing, with stub", WasmBindgen, Missing, Stub),
        ("passing, without", WasmBindgen, Passing, Unbound),
        ("passing, with", WasmBindgen, Passing, Recording),
        ("workers-rs refused, without", WorkersRs, Refused, Unbound),
        ("workers-rs refused, with", WorkersRs, Refused, Recording),
        ("workers-rs refused, with stub", WorkersRs, Refused, Stub),
    ]
};

/// The section `data_points`: what writing the data points costs the gate
/// (see the module's documentation).
async fn data_points(bench: &mut Bench) -> Result<(), Error> {
    let plan = Plan::from_env();
    let mut targets = Vec::with_capacity(POINTS_TARGETS.len());
    for (name, worker, traffic, dataset) in POINTS_TARGETS {
        let config =
            bench.deployable_config_with(worker, &traffic.bindings(), None, false, dataset)?;
        targets.push(Target::start(bench, name, &config, traffic.addresses()).await?);
    }
    let loads = run_rounds("data_points", plan, &mut targets, None).await?;
    let mut received = Vec::with_capacity(targets.len());
    for target in &targets {
        received.push(points_received(target.process.port).await?);
    }
    let cpu = per_target(targets.len(), &loads, Load::cpu_us);
    let (rps, pooled) = by_target(targets.len(), loads);
    print_points_cost(plan, &rps, &cpu, &pooled);
    print_points_rounds(plan, &targets, &rps);
    print_rounds_table(plan, &targets, &rps, "round (data points)");
    print_cpu_table(plan, &targets, &pooled, false);
    let checked = check_points(&targets, &received);
    for target in targets {
        drop(target.process.stop().await);
    }
    checked
}

/// The index of the target `t` is compared with (its Worker and traffic,
/// no dataset), unless it is one itself.
fn without_of(t: usize) -> Option<usize> {
    let (_, worker, traffic, dataset) = POINTS_TARGETS[t];
    (dataset != Dataset::Unbound).then(|| {
        POINTS_TARGETS
            .iter()
            .position(|(_, w, tr, d)| *w == worker && *tr == traffic && *d == Dataset::Unbound)
            .expect("every Worker and traffic has a target without a dataset")
    })
}

/// The requirement: writing the points costs at most 5 % of the req/s.
const POINTS_COST_AT_LEAST: f64 = 0.95;

/// The section's table: each of [`POINTS_TARGETS`]' req/s and CPU per
/// request, and with ÷ without of both per round (`rps`, `cpu`:
/// `[target][round]`).
fn print_points_cost(plan: Plan, rps: &[Vec<f64>], cpu: &[Vec<f64>], pooled: &[Load]) {
    println!(
        "### What the data points cost (`GET {API_PATH}`, concurrency {}, {} rounds of {} s warm-up + {} s per target; the bindings and the dataset in the isolate)\n",
        plan.concurrency, plan.rounds, plan.warmup, plan.seconds
    );
    println!(
        "| traffic | Worker | dataset | req/s, median of rounds | min-max | with ÷ without, per round: median | min-max | ≥ {POINTS_COST_AT_LEAST}? | workerd CPU per request, µs | its with ÷ without, per round: median (min-max) |"
    );
    println!("|---|---|---|---:|---:|---:|---:|---|---:|---:|");
    for (t, &(_, worker, traffic, dataset)) in POINTS_TARGETS.iter().enumerate() {
        let (lo, hi) = min_max(&rps[t]);
        let cpu_us = pooled[t].cpu_us();
        let cpu_ratio = without_of(t).map_or_else(
            || "-".to_owned(),
            |base| {
                let ratios = per_round(&cpu[t], &cpu[base]);
                let (rlo, rhi) = min_max(&ratios);
                format!("{:.3} ({rlo:.3}-{rhi:.3})", median(&ratios))
            },
        );
        let ratio = without_of(t).map_or_else(
            || "- | - | -".to_owned(),
            |base| {
                let ratios = per_round(&rps[t], &rps[base]);
                let (rlo, rhi) = min_max(&ratios);
                let m = median(&ratios);
                let met = if m >= POINTS_COST_AT_LEAST {
                    "met"
                } else {
                    "missed"
                };
                format!("**{m:.3}** | {rlo:.3}-{rhi:.3} | {met}")
            },
        );
        println!(
            "| {} | {} | {} | {:.0} | {lo:.0}-{hi:.0} | {ratio} | {cpu_us:.1} | {cpu_ratio} |",
            traffic.describe(),
            match worker {
                WorkerChoice::WasmBindgen => "wasm-bindgen",
                WorkerChoice::WorkersRs => "workers-rs",
                WorkerChoice::Axum => "axum",
            },
            match dataset {
                Dataset::Unbound => "none (no `data_points`)",
                Dataset::Recording => "emulated, recording",
                Dataset::Stub => "stub (`writeDataPoint` only counts)",
            },
            median(&rps[t]),
        );
    }
    println!();
}

/// With ÷ without, round by round, for every target with a dataset.
fn print_points_rounds(plan: Plan, targets: &[Target], rps: &[Vec<f64>]) {
    let pairs: Vec<(usize, usize)> = (0..targets.len())
        .filter_map(|t| without_of(t).map(|base| (t, base)))
        .collect();
    println!("With ÷ without, per round:\n");
    let columns: Vec<String> = pairs
        .iter()
        .map(|(t, base)| format!("{} ÷ {}", targets[*t].name, targets[*base].name))
        .collect();
    let cells: Vec<Vec<String>> = pairs
        .iter()
        .map(|(t, base)| {
            per_round(&rps[*t], &rps[*base])
                .iter()
                .map(|r| format!("{r:.3}"))
                .collect()
        })
        .collect();
    print_round_rows("round", &columns, plan.rounds, &cells);
}

/// What a target's dataset received: `GET /data_points` with the harness's
/// control token (`harness/assets/entry.js`).
async fn points_received(port: u16) -> Result<serde_json::Value, Error> {
    let mut sender = connect(port).await?;
    let request = hyper::Request::get("/data_points")
        .header("host", "127.0.0.1")
        .header(CONTROL_HEADER, CONTROL_TOKEN)
        .body(Empty::<Bytes>::new())?;
    sender.ready().await?;
    let response = sender.send_request(request).await?;
    let status = response.status();
    let body = response.into_body().collect().await?.to_bytes();
    if !status.is_success() {
        return Err(format!("GET /data_points answered {status}").into());
    }
    Ok(serde_json::from_slice(&body)?)
}

/// Prints what each target's dataset received against what its traffic
/// should have written, and fails unless every target with a dataset wrote
/// one point for each request that should (a request that failed may or
/// may not have), with the labels its traffic gives, and every target
/// without one wrote none: so the pairs cannot compare two configs alike.
fn check_points(targets: &[Target], received: &[serde_json::Value]) -> Result<(), Error> {
    println!(
        "The points each target's dataset received over the whole run (warm-ups included), read from it afterwards (`GET /data_points`):\n"
    );
    println!(
        "| target | answered | not 200 | errors | points expected | points written | by (limit, outcome, reason) |"
    );
    println!("|---|---:|---:|---:|---:|---:|---|");
    let mut wrong = Vec::new();
    for (t, target) in targets.iter().enumerate() {
        let (_, _, traffic, dataset) = POINTS_TARGETS[t];
        let answer = &received[t];
        let written = answer["written"].as_u64().unwrap_or(0);
        let read = read_points(answer, DEPLOYABLE)?;
        let labels: Vec<String> = read
            .reading
            .series
            .iter()
            .map(|((_, labels), value)| {
                let label = |name: &str| labels.get(name).map_or("?", String::as_str);
                format!(
                    "{} x ({}, {}, {})",
                    value.value,
                    label("limit"),
                    label("outcome"),
                    label("reason")
                )
            })
            .chain(read.malformed.iter().map(|m| format!("malformed: {m}")))
            .collect();
        let expected = match traffic.points(target) {
            Ok((n, labels)) if dataset != Dataset::Unbound => Ok((n, labels)),
            Ok(_) => Ok((0, None)),
            Err(why) => Err(why),
        };
        println!(
            "| {} | {} | {} | {} | {} | {written} | {} |",
            target.name,
            target.answered_all,
            target.not_200_all,
            target.errors_all,
            expected
                .as_ref()
                .map_or("-".to_owned(), |(n, _)| n.to_string()),
            if labels.is_empty() {
                "-".to_owned()
            } else {
                labels.join("; ")
            },
        );
        let (n, want) = match expected {
            Ok(expected) => expected,
            Err(why) => {
                wrong.push(format!("{}: {why}", target.name));
                continue;
            }
        };
        if written.abs_diff(n) > target.errors_all {
            wrong.push(format!(
                "{}: {written} points written, {n} expected",
                target.name
            ));
        }
        if dataset == Dataset::Unbound && !answer["binding"].is_null() {
            wrong.push(format!("{}: a dataset is bound: {answer}", target.name));
        }
        // The stub keeps no point; the emulation keeps each, by its labels.
        if dataset == Dataset::Recording {
            let kept: f64 = read.reading.series.values().map(|v| v.value).sum();
            let alike = read.reading.series.keys().all(|(_, labels)| {
                want.is_some_and(|(outcome, reason)| {
                    labels.get("limit").map(String::as_str) == Some("address")
                        && labels.get("outcome").map(String::as_str) == Some(outcome)
                        && labels.get("reason").map(String::as_str) == Some(reason)
                })
            });
            if kept != written as f64 || !alike || !read.malformed.is_empty() {
                wrong.push(format!(
                    "{}: the points kept are {}, not {written} x {want:?} on `address`",
                    target.name,
                    labels.join("; ")
                ));
            }
        }
    }
    println!();
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the data points are not what the traffic writes:\n{}",
            wrong.join("\n")
        )
        .into())
    }
}

async fn deadline(bench: &mut Bench) -> Result<(), Error> {
    let requests = knob("BENCH_DEADLINE_REQUESTS", 200);
    let paced_seconds = knob("BENCH_DEADLINE_PACED_SECONDS", 25);
    let concurrency = 8;
    let config =
        bench.deployable_config(WorkerChoice::WasmBindgen, &Behaviour::Hanging, None, false)?;
    let process = bench.start(&config).await?;
    let next = Addresses::distinct();
    eprintln!(
        "deadline: {requests} requests at concurrency {concurrency}, then one every 100 ms for {paced_seconds} s, every binding hanging"
    );
    // The isolate is built first by a route that asks no binding.
    generate(process.port, "/health", 1, Stop::After(1), &next).await;
    let burst = generate(
        process.port,
        API_PATH,
        concurrency,
        Stop::After(requests),
        &next,
    )
    .await;
    let paced = paced(
        process.port,
        Duration::from_millis(100),
        Duration::from_secs(paced_seconds),
        &next,
    )
    .await;
    println!(
        "### A hanging binding (every binding hanging, `GET {API_PATH}`, one isolate; cool-off {} s)\n",
        runtime::unstable_for_tools::breaker::COOL_OFF_MS / 1000
    );
    println!(
        "| run | answered | statuses | errors | p50, ms | waited (>= 400 ms) | their min-max, ms | the others: p99, ms | their max, ms | wall, s |"
    );
    println!("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|");
    for (name, mut load) in [
        (
            format!("burst of {requests}, concurrency {concurrency}"),
            burst,
        ),
        (format!("one every 100 ms for {paced_seconds} s"), paced),
    ] {
        let p50 = load.percentile_ms(50);
        let (waited, others): (Vec<u32>, Vec<u32>) =
            load.latencies_us.iter().partition(|&&us| us >= WAITED_US);
        let ms = |us: Option<&u32>| us.map_or(f64::NAN, |&us| f64::from(us) / 1000.0);
        let others_p99 = if others.is_empty() {
            f64::NAN
        } else {
            ms(others
                .get(((0.99 * others.len() as f64).ceil() as usize).clamp(1, others.len()) - 1))
        };
        println!(
            "| {name} | {} | {} | {} | {p50:.1} | {} | {:.1}-{:.1} | {others_p99:.1} | {:.1} | {:.1} |",
            load.answered(),
            load.statuses
                .iter()
                .map(|(s, n)| format!("{n} x {s}"))
                .collect::<Vec<_>>()
                .join(", "),
            load.errors,
            waited.len(),
            ms(waited.first()),
            ms(waited.last()),
            ms(others.last()),
            load.elapsed.as_secs_f64(),
        );
    }
    println!();
    drop(process.stop().await);
    Ok(())
}

/// One request every `every` for `duration`, each on its own connection so a
/// request that waits does not hold up the next.
async fn paced(port: u16, every: Duration, duration: Duration, addresses: &Arc<Addresses>) -> Load {
    let started = Instant::now();
    let mut ticks = tokio::time::interval(every);
    let mut tasks = Vec::new();
    while started.elapsed() < duration {
        ticks.tick().await;
        let address = addresses.next();
        tasks.push(tokio::spawn(async move {
            let began = Instant::now();
            let mut sender = connect(port).await?;
            let status = get(&mut sender, API_PATH, Some(address)).await?;
            Ok::<_, Error>((status, began.elapsed()))
        }));
    }
    let mut load = Load::default();
    for task in tasks {
        match task.await {
            Ok(Ok((status, took))) => {
                load.latencies_us
                    .push(u32::try_from(took.as_micros()).unwrap_or(u32::MAX));
                *load.statuses.entry(status).or_default() += 1;
            }
            _ => load.errors += 1,
        }
    }
    load.elapsed = started.elapsed();
    load
}

/// One start of a workerd: spawn to listen, spawn to the first `200`, and
/// how long the first request took beside the warm ones after it.
#[derive(Debug, Clone, Copy)]
struct Start {
    listen: Duration,
    first_200: Duration,
    /// The request that got the first `200`, from being sent to its answer.
    first_request: Duration,
    /// The median of the [`WARM_REQUESTS`] requests after it.
    warm_request: Duration,
}

/// Requests timed after the first, on the same connection, for the warm figure.
const WARM_REQUESTS: u64 = 20;

/// Starts workerd on `config` and asks `path` as soon as it listens, each
/// request from a new address (through the gate, none refused): spawn to the
/// first `200`, then [`WARM_REQUESTS`] more.
async fn cold_start(bench: &Bench, config: &Path, path: &str) -> Result<Start, Error> {
    let spawned = Instant::now();
    let process = bench.start(config).await?;
    let listen = process.start_to_listen;
    let deadline = spawned + Duration::from_secs(30);
    let addresses = AtomicU64::new(1);
    let next = || Some(address(addresses.fetch_add(1, Relaxed)));
    // The connection is made first, so the first request is timed on an
    // open connection, as the warm ones are: what the Worker takes, not the
    // TCP and HTTP/1.1 handshakes.
    let mut sender = loop {
        if let Ok(sender) = connect(process.port).await {
            break sender;
        }
        if Instant::now() > deadline {
            drop(process.stop().await);
            return Err("no connection within 30 s".into());
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    };
    let sent = Instant::now();
    let status = get(&mut sender, path, next()).await?;
    let (first_request, first_200) = (sent.elapsed(), spawned.elapsed());
    if status != 200 {
        drop(process.stop().await);
        return Err(format!("the first request to {path} answered {status}").into());
    }
    let mut warm = Vec::with_capacity(WARM_REQUESTS as usize);
    for _ in 0..WARM_REQUESTS {
        let sent = Instant::now();
        let status = get(&mut sender, path, next()).await?;
        if status != 200 {
            return Err(format!("{path} answered {status} after the first 200").into());
        }
        warm.push(ms(sent.elapsed()));
    }
    drop(process.stop().await);
    Ok(Start {
        listen,
        first_200,
        first_request,
        warm_request: Duration::from_secs_f64(median(&warm) / 1000.0),
    })
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// `median (min-max)` of `values`, in ms.
fn spread(values: &[f64]) -> String {
    let (lo, hi) = min_max(values);
    format!("{:.1} ({lo:.1}-{hi:.1})", median(values))
}

/// The configs `starts` starts, with their names and the path asked: the
/// bindings healthy and counting in the isolate (the bare Workers have no
/// store to reach), so the first request is asked through the gate. The two
/// bare Workers come last, the one with the deployable's bindings first.
fn start_configs(bench: &mut Bench) -> Result<Vec<(&'static str, PathBuf, &'static str)>, Error> {
    use WorkerChoice::{Axum, WasmBindgen, WorkersRs};
    Ok(vec![
        (
            "wasm-bindgen Worker (`/api/items`)",
            bench.deployable_config(WasmBindgen, &Behaviour::Healthy, None, false)?,
            API_PATH,
        ),
        (
            "workers-rs Worker (`/api/items`)",
            bench.deployable_config(WorkersRs, &Behaviour::Healthy, None, false)?,
            API_PATH,
        ),
        (
            "axum Worker (`/api/items`)",
            bench.deployable_config(Axum, &Behaviour::Healthy, None, false)?,
            API_PATH,
        ),
        (
            "wasm-bindgen Worker, limiting off (`/api/items`)",
            bench.deployable_config(WasmBindgen, &Behaviour::Healthy, None, true)?,
            API_PATH,
        ),
        (
            "workers-rs Worker, limiting off (`/api/items`)",
            bench.deployable_config(WorkersRs, &Behaviour::Healthy, None, true)?,
            API_PATH,
        ),
        (
            "axum Worker, limiting off (`/api/items`)",
            bench.deployable_config(Axum, &Behaviour::Healthy, None, true)?,
            API_PATH,
        ),
        (
            "wasm-bindgen Worker, bindings missing (`/api/items`, counted in memory)",
            bench.deployable_config(WasmBindgen, &Behaviour::Missing, None, false)?,
            API_PATH,
        ),
        ("JS gate (`/api/items`)", bench.js_gate_config()?, API_PATH),
        (
            "bare Worker, the deployable's bindings (`/api/items`)",
            bench.bare_with_bindings_config()?,
            API_PATH,
        ),
        ("bare Worker (`/`)", bench.bare_config()?, "/"),
    ])
}

async fn starts(bench: &mut Bench) -> Result<(), Error> {
    let n = knob("BENCH_STARTS", 30) as usize;
    let configs = start_configs(bench)?;
    let store_config = bench.store_config()?;
    eprintln!("starts: {n} rounds, each starting every config once, one process at a time");
    // starts[config][round]
    let mut starts: Vec<Vec<Start>> = vec![Vec::with_capacity(n); configs.len()];
    let mut store_listen = Vec::with_capacity(n);
    for _ in 0..n {
        for (c, (_, config, path)) in configs.iter().enumerate() {
            starts[c].push(cold_start(bench, config, path).await?);
        }
        let store = bench.start(&store_config).await?;
        store_listen.push(ms(store.start_to_listen));
        drop(store.stop().await);
    }
    let bare = configs.len() - 1;
    let bare_with_bindings = configs.len() - 2;
    println!(
        "### workerd start and the first request ({n} rounds, each config started once a round, one process at a time; median (min-max) over the rounds)\n"
    );
    println!(
        "| config | spawn to listen, ms | spawn to first 200, ms | / bare, median of rounds (min-max) | / bare with the bindings, median of rounds (min-max) | first request, ms | first request / bare's, median of rounds (min-max) | first request / bare with the bindings', median of rounds (min-max) | warm request (median of the next {WARM_REQUESTS}), ms | first - warm, median of rounds, ms |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let field = |c: usize, f: fn(&Start) -> Duration| -> Vec<f64> {
        starts[c].iter().map(|s| ms(f(s))).collect()
    };
    for (c, (name, _, _)) in configs.iter().enumerate() {
        let first = field(c, |s| s.first_200);
        let ratio_to = |base: usize, f: fn(&Start) -> Duration| -> (f64, f64, f64) {
            let ratios: Vec<f64> = field(c, f)
                .iter()
                .zip(field(base, f))
                .map(|(a, b)| a / b)
                .collect();
            let (lo, hi) = min_max(&ratios);
            (median(&ratios), lo, hi)
        };
        let (to_bare, lo, hi) = ratio_to(bare, |s| s.first_200);
        let (to_bindings, blo, bhi) = ratio_to(bare_with_bindings, |s| s.first_200);
        let (request_to_bare, rlo, rhi) = ratio_to(bare, |s| s.first_request);
        let (request_to_bindings, rblo, rbhi) = ratio_to(bare_with_bindings, |s| s.first_request);
        let extra: Vec<f64> = field(c, |s| s.first_request)
            .iter()
            .zip(field(c, |s| s.warm_request))
            .map(|(first, warm)| first - warm)
            .collect();
        println!(
            "| {name} | {} | {} | **{to_bare:.3}** ({lo:.3}-{hi:.3}) | **{to_bindings:.3}** ({blo:.3}-{bhi:.3}) | {} | **{request_to_bare:.2}** ({rlo:.2}-{rhi:.2}) | **{request_to_bindings:.2}** ({rblo:.2}-{rbhi:.2}) | {} | **{:.2}** |",
            spread(&field(c, |s| s.listen)),
            spread(&first),
            spread(&field(c, |s| s.first_request)),
            spread(&field(c, |s| s.warm_request)),
            median(&extra),
        );
    }
    println!(
        "| binding store (listen only) | {} | - | - | - | - | - | - | - | - |",
        spread(&store_listen)
    );
    println!();
    Ok(())
}

fn main() -> Result<(), Error> {
    let wanted: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let run = |section: &str| wanted.is_empty() || wanted.iter().any(|w| w == section);
    let mut bench = Bench::new()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        if run("throughput") {
            throughput(&mut bench).await?;
        }
        if run("data_points") {
            data_points(&mut bench).await?;
        }
        if run("deadline") {
            deadline(&mut bench).await?;
        }
        if run("starts") {
            starts(&mut bench).await?;
        }
        Ok::<(), Error>(())
    })
}
