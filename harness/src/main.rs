//! The harness's command line: `validate` and `wrangler` for an application
//! description, `run` for the conformance run with its report, `native`,
//! `edge-compat`. It parses the arguments and calls [`harness::commands`].

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use harness::commands::CommandError;
use harness::commands::application::{self, EntriesFormat, PlanOutput};
use harness::commands::cloudflare::{self, CloudflareError, CloudflareRequest};
use harness::commands::edge::TimingThreshold;
use harness::commands::edge_compat::{EdgeCompatRequest, edge_compat};
use harness::commands::run::{RunRequest, run};
use harness::commands::suite::DEFAULT_JOBS;
use harness::world::wasm::WorkerChoice;
use harness::world::workerd::WorkerdChoice;
use harness::world::workerd::reference::CoreChoice;

#[derive(Parser)]
#[command(
    name = "harness",
    about = "Rate limiting on Cloudflare Workers, proved against a real workerd."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Validate an application description: every diagnostic as `CODE: file:line:col: message`,
    /// or `ok` and, per deployable serving an API, the most memory its counting in
    /// memory takes within its budget.
    Validate {
        application: PathBuf,
        /// Also write the plan of a Workers deployable, which its Worker
        /// builds its gate from (`runtime::GatePlan::from_text`); repeatable.
        #[arg(long, value_name = "DEPLOYABLE=FILE")]
        plan: Vec<PlanOutput>,
    },
    /// Print the Wrangler `ratelimits` entries of an application description,
    /// or write them into a Wrangler file.
    Wrangler {
        application: PathBuf,
        #[arg(long, value_enum, default_value_t = EntriesFormat::Jsonc, conflicts_with = "write")]
        format: EntriesFormat,
        /// Replace the application's entries in this wrangler.jsonc, .json or
        /// .toml (created when absent), and its Worker's plan as `vars.PLAN`,
        /// keeping everything else and its comments.
        #[arg(long, value_name = "FILE")]
        write: Option<PathBuf>,
        /// The Workers deployable the file is for, whose plan goes in
        /// `vars.PLAN` (needed only when the application has several).
        #[arg(long, value_name = "NAME", requires = "write")]
        deployable: Option<String>,
    },
    /// Run the conformance scenarios and print the summary table (the main job).
    Run {
        /// Only scenarios whose name contains this.
        filter: Option<String>,
        /// The scenarios directory.
        #[arg(long)]
        scenarios: Option<PathBuf>,
        /// Also run the slow scenarios (those tagged `slow`).
        #[arg(long)]
        include_slow: bool,
        /// Write JUnit XML here.
        #[arg(long)]
        junit: Option<PathBuf>,
        /// Write the report page here: one self-contained HTML file, each
        /// scenario's timeline and latency histogram, filtered by name and result.
        #[arg(long)]
        html: Option<PathBuf>,
        /// How many scenarios run at once.
        #[arg(long, default_value_t = DEFAULT_JOBS)]
        jobs: usize,
        /// The counting core the emulated binding wraps: the harness's own
        /// store, or Cloudflare's simulator (also: HARNESS_BINDING).
        #[arg(long, value_enum)]
        binding: Option<CoreChoice>,
        /// The Worker the Workers scenarios run: `harness/workers/wasm-bindgen`
        /// (wasm-bindgen), `harness/workers/workers-rs` or
        /// `harness/workers/axum` (also: HARNESS_WORKER).
        #[arg(long, value_enum)]
        worker: Option<WorkerChoice>,
        #[command(flatten)]
        workerd: WorkerdArgs,
    },
    /// Run a native deployable's instances (`native-fixture`), and with
    /// `--redis` a fresh redis-server as its store, until Ctrl-C.
    Native {
        application: PathBuf,
        deployable: String,
        /// How many instances.
        #[arg(long, default_value_t = 1)]
        instances: usize,
        /// Start a redis-server and point the store connection's `url` at it.
        #[arg(long)]
        redis: bool,
    },
    /// Run every scenario on the pinned workerd and on another release (the
    /// newest by default), and write the drift report and JUnit XML.
    EdgeCompat {
        /// The npm release of @cloudflare/workerd-linux-64 to compare with the pin, or `latest`.
        #[arg(long, default_value = "latest")]
        version: String,
        /// The scenarios directory.
        #[arg(long)]
        scenarios: Option<PathBuf>,
        /// Where drift.md and junit.xml go.
        #[arg(long, default_value = "reports/edge-compat")]
        out: PathBuf,
        /// How many scenarios run at once.
        #[arg(long, default_value_t = DEFAULT_JOBS)]
        jobs: usize,
        /// Report a p99 change when it is at least this many percent...
        #[arg(long, default_value_t = 50)]
        p99_percent: u64,
        /// ...and at least this many ms.
        #[arg(long, default_value_t = 25)]
        p99_ms: u64,
        /// The `results.json` of the night's `harness cloudflare` run, shown
        /// beside the workerd columns (absent: the section says it did not run).
        #[arg(long, value_name = "FILE")]
        cloudflare: Option<PathBuf>,
    },
    /// Run the scenarios marked `on_cloudflare` on Cloudflare itself: deploy,
    /// traffic, tail, delete (needs CLOUDFLARE_API_TOKEN and CLOUDFLARE_ACCOUNT_ID).
    #[command(long_about = CLOUDFLARE_HELP, subcommand_negates_reqs = true, args_conflicts_with_subcommands = true)]
    Cloudflare {
        #[command(subcommand)]
        command: Option<CloudflareCommand>,
        #[command(flatten)]
        run: CloudflareArgs,
    },
}

const CLOUDFLARE_HELP: &str = "\
Run the scenarios marked `on_cloudflare` on Cloudflare itself. For each, it uploads the deployable \
(the same wasm, glue and snippets as the local run) as a Worker of its own, with the bindings \
`harness wrangler` plans, turns on its workers.dev URL, opens its tail, sends its traffic on the real \
clock, checks it as the scenario's marks say (exact, or bounded), and deletes the tail and the \
script: after success, failure, a panic and Ctrl-C alike. The table and JUnit are `run`'s, with \
how each was checked and how many requests passed before the first 429.

Credentials: CLOUDFLARE_API_TOKEN, a token with the permission \"Workers Scripts: Edit\", and \
CLOUDFLARE_ACCOUNT_ID. The token is never printed, logged or written. CLOUDFLARE_API_BASE_URL points \
the API elsewhere (a proxy, a staging API), as for wrangler.

Isolation: every run names its scripts PREFIX-RANDOM-N and numbers its bindings' namespace ids from \
--namespace-base, because bindings that share a namespace_id share their counters with every Worker \
of the account, your own included: give a range none of your Workers uses (the run takes a few ids \
per scenario; --dry-run prints the range).

Time: Cloudflare has no scenario clock, so window steps wait real time, and each Worker takes \
seconds to deploy and answer: the repository's marked scenarios take about 2 minutes with 4 at once \
(at most ~3; the plan prints its estimate).

--dry-run writes the exact upload bodies, the bindings and the traffic plan into --out, with no \
network and no credentials.";

#[derive(Subcommand)]
enum CloudflareCommand {
    /// Delete the scripts killed runs left: those named PREFIX-xxxxxx-N whose
    /// HARNESS_RUN binding, read back, is the run's marker. Any other is kept
    /// and listed; exit 1 when one could not be read.
    Clean {
        /// The prefix the runs had.
        #[arg(long)]
        prefix: String,
    },
}

#[derive(clap::Args)]
struct CloudflareArgs {
    /// Only scenarios whose name contains this.
    filter: Option<String>,
    /// The scenarios directory.
    #[arg(long)]
    scenarios: Option<PathBuf>,
    /// The first namespace id the run may use (it takes a few per scenario):
    /// a range none of the account's Workers uses.
    #[arg(long, required = true)]
    namespace_base: Option<u64>,
    /// The start of every script's name.
    #[arg(long, default_value = harness::commands::cloudflare::DEFAULT_PREFIX)]
    prefix: String,
    /// Where the reports go (with --dry-run: the plan and the uploads).
    #[arg(long, default_value = "reports/cloudflare")]
    out: PathBuf,
    /// How many scenarios run on Cloudflare at once.
    #[arg(long, default_value_t = DEFAULT_JOBS)]
    jobs: usize,
    /// Write the upload bodies, the bindings and the traffic plan; no network.
    #[arg(long)]
    dry_run: bool,
}

/// Which workerd a run uses (the pinned one by default).
#[derive(clap::Args)]
struct WorkerdArgs {
    /// Use this workerd binary (also: WORKERD).
    #[arg(long)]
    workerd: Option<PathBuf>,
    /// Install and use this npm release of @cloudflare/workerd-linux-64, or `latest` (also: WORKERD_VERSION).
    #[arg(long)]
    workerd_version: Option<String>,
    /// An edge run: allow a workerd whose version differs from the pin (also: HARNESS_EDGE=1).
    #[arg(long)]
    edge: bool,
}

impl WorkerdArgs {
    fn choice(self) -> WorkerdChoice {
        let env = WorkerdChoice::from_env();
        WorkerdChoice {
            path: self.workerd.or(env.path),
            npm_version: self.workerd_version.or(env.npm_version),
            edge: self.edge || env.edge,
        }
    }
}

fn main() -> ExitCode {
    if let Err(error) = harness::world::process::stop_on_interrupt() {
        eprintln!("harness: could not restore Ctrl-C's default action: {error}");
    }
    let done = match Cli::parse().command {
        Command::Validate { application, plan } => application::validate(&application, &plan),
        Command::Wrangler {
            application,
            format,
            write: None,
            ..
        } => application::wrangler(&application, format),
        Command::Wrangler {
            application,
            write: Some(file),
            deployable,
            ..
        } => application::write_wrangler_file(&application, &file, deployable.as_deref()),
        Command::Run {
            filter,
            scenarios,
            include_slow,
            junit,
            html,
            jobs,
            binding,
            worker,
            workerd,
        } => {
            let core = binding.map_or_else(CoreChoice::from_env, Ok);
            let worker = worker.map_or_else(WorkerChoice::from_env, Ok);
            match (core, worker) {
                (Ok(core), Ok(worker)) => run(RunRequest {
                    filter,
                    scenarios,
                    include_slow,
                    junit,
                    html,
                    jobs,
                    workerd: workerd.choice(),
                    core,
                    worker,
                }),
                (Err(e), _) => {
                    eprintln!("harness: {e}");
                    return ExitCode::from(2);
                }
                (_, Err(e)) => {
                    eprintln!("harness: {e}");
                    return ExitCode::from(2);
                }
            }
        }
        Command::Native {
            application,
            deployable,
            instances,
            redis,
        } => return native(&application, &deployable, instances, redis),
        Command::EdgeCompat {
            version,
            scenarios,
            out,
            jobs,
            p99_percent,
            p99_ms,
            cloudflare,
        } => edge_compat(&EdgeCompatRequest {
            version,
            scenarios,
            out,
            jobs,
            threshold: TimingThreshold {
                percent: p99_percent,
                ms: p99_ms,
            },
            cloudflare,
        }),
        Command::Cloudflare {
            command: Some(CloudflareCommand::Clean { prefix }),
            ..
        } => cloudflare::clean(&prefix)
            .map(|cleaned| cleaned.is_complete())
            .map_err(CommandError::from),
        Command::Cloudflare { command: None, run } => cloudflare::run(&CloudflareRequest {
            filter: run.filter,
            scenarios: run.scenarios,
            namespace_base: run.namespace_base.unwrap_or_default(),
            prefix: run.prefix,
            out: run.out,
            jobs: run.jobs,
            dry_run: run.dry_run,
        })
        .map_err(CommandError::from),
    };
    exit_code(done)
}

/// 0 when everything held, 1 when a command found what it exists to find
/// (a failed scenario, an invalid application), 2 when it could not do its
/// work, 130 when Ctrl-C (or SIGTERM) stopped a run on Cloudflare.
fn exit_code(done: Result<bool, CommandError>) -> ExitCode {
    match done {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e @ CommandError::Cloudflare(CloudflareError::Interrupted { .. })) => {
            eprintln!("{e}");
            ExitCode::from(130)
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(2)
        }
    }
}

fn native(
    application: &std::path::Path,
    deployable: &str,
    instances: usize,
    redis: bool,
) -> ExitCode {
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("harness: cannot start a runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(harness::world::native::serve::serve(
        application,
        deployable,
        instances,
        redis,
    )) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("harness: {e}");
            ExitCode::FAILURE
        }
    }
}
