//! The harness's command line: `check` and `wrangler` for an application
//! description, `run` for the conformance run with its report.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use harness::commands::cloudflare::{self, CloudflareError, CloudflareRequest};
use harness::commands::edge::{self, Side, TimingThreshold};
use harness::commands::preflight;
use harness::commands::report::{self, Counts};
use harness::commands::suite::DEFAULT_JOBS;
use harness::commands::suite::{self, Suite};
use harness::commands::wrangler_file;
use harness::engine::Environment;
use harness::judge::expectations::Verdict;
use harness::world::workerd::WorkerdChoice;
use harness::world::workerd::find::{
    binary_in, install_version, newest_npm_version, pinned_npm_version,
};
use harness::world::workerd::reference::{CoreChoice, CountingCore};
use runtime::config::{Application, StoreDriver};
use runtime::plan::BindingPlan;

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
    /// Validate an application description: every diagnostic as `CODE: file:line:col: message`, or `ok`.
    Check { application: PathBuf },
    /// Print the Wrangler `ratelimits` entries of an application description,
    /// or write them into a Wrangler file.
    Wrangler {
        application: PathBuf,
        #[arg(long, value_enum, default_value_t = Format::Jsonc, conflicts_with = "write")]
        format: Format,
        /// Replace the application's entries in this wrangler.jsonc, .json or
        /// .toml (created when absent), keeping everything else and its comments.
        #[arg(long, value_name = "FILE")]
        write: Option<PathBuf>,
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
        /// How many scenarios run at once.
        #[arg(long, default_value_t = DEFAULT_JOBS)]
        jobs: usize,
        /// The counting core the emulated binding wraps: the harness's own
        /// store, or Cloudflare's simulator (also: HARNESS_BINDING).
        #[arg(long, value_enum)]
        binding: Option<CoreChoice>,
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
seconds to deploy and answer: the repository's marked scenarios take about 1.5 minutes with 4 at \
once (the plan prints its estimate; a Worker slow to answer adds up to 3 minutes).

--dry-run writes the exact upload bodies, the bindings and the traffic plan into --out, with no \
network and no credentials.";

#[derive(Subcommand)]
enum CloudflareCommand {
    /// Delete the scripts killed runs left: those named PREFIX-xxxxxx-N, and no other.
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

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Jsonc,
    Toml,
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Check { application } => check(&application),
        Command::Wrangler {
            application,
            format,
            write: None,
        } => wrangler(&application, format),
        Command::Wrangler {
            application,
            write: Some(file),
            ..
        } => write_wrangler_file(&application, &file),
        Command::Run {
            filter,
            scenarios,
            include_slow,
            junit,
            jobs,
            binding,
            workerd,
        } => match binding.map_or_else(CoreChoice::from_env, Ok) {
            Ok(core) => run(
                filter.as_deref(),
                scenarios,
                include_slow,
                junit,
                jobs,
                &workerd.choice(),
                core,
            ),
            Err(e) => {
                eprintln!("harness: {e}");
                ExitCode::from(2)
            }
        },
        Command::Native {
            application,
            deployable,
            instances,
            redis,
        } => native(&application, &deployable, instances, redis),
        Command::EdgeCompat {
            version,
            scenarios,
            out,
            jobs,
            p99_percent,
            p99_ms,
            cloudflare,
        } => edge_compat(
            &version,
            scenarios,
            &out,
            jobs,
            TimingThreshold {
                percent: p99_percent,
                ms: p99_ms,
            },
            cloudflare.as_deref(),
        ),
        Command::Cloudflare {
            command: Some(CloudflareCommand::Clean { prefix }),
            ..
        } => cloudflare_exit(cloudflare::clean(&prefix).map(|_| true)),
        Command::Cloudflare { command: None, run } => {
            cloudflare_exit(cloudflare::run(&CloudflareRequest {
                filter: run.filter,
                scenarios: run.scenarios,
                namespace_base: run.namespace_base.unwrap_or_default(),
                prefix: run.prefix,
                out: run.out,
                jobs: run.jobs,
                dry_run: run.dry_run,
            }))
        }
    }
}

/// 0 when every scenario held, 1 when one did not, 130 when interrupted,
/// 2 (with one line) when the run could not be done.
fn cloudflare_exit(done: Result<bool, CloudflareError>) -> ExitCode {
    match done {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e @ CloudflareError::Interrupted { .. }) => {
            eprintln!("harness: {e}");
            ExitCode::from(130)
        }
        Err(e) => {
            eprintln!("harness: {e}");
            ExitCode::from(2)
        }
    }
}

fn native(application: &Path, deployable: &str, instances: usize, redis: bool) -> ExitCode {
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

/// Reads and validates a description, printing the diagnostics when it is invalid.
fn load(path: &PathBuf) -> Result<Application, ExitCode> {
    let source = std::fs::read_to_string(path).map_err(|e| {
        eprintln!("{}: cannot read: {e}", path.display());
        ExitCode::from(2)
    })?;
    Application::from_toml(&source).map_err(|diagnostics| {
        print!("{}", diagnostics.render(&path.display().to_string()));
        ExitCode::FAILURE
    })
}

fn check(path: &PathBuf) -> ExitCode {
    match load(path) {
        Ok(_) => {
            println!("ok");
            ExitCode::SUCCESS
        }
        Err(code) => code,
    }
}

fn wrangler(path: &PathBuf, format: Format) -> ExitCode {
    match load(path) {
        Ok(app) => {
            let plan = BindingPlan::for_application(&app);
            match format {
                Format::Jsonc => print!("{}", plan.wrangler_jsonc()),
                Format::Toml => print!("{}", plan.wrangler_toml()),
            }
            ExitCode::SUCCESS
        }
        Err(code) => code,
    }
}

/// `wrangler --write FILE`: nothing is written for an invalid description.
fn write_wrangler_file(path: &PathBuf, file: &Path) -> ExitCode {
    let app = match load(path) {
        Ok(app) => app,
        Err(code) => return code,
    };
    let Some(connection) = app.store.as_ref().and_then(|store| match store.driver {
        StoreDriver::CloudflareRateLimits { .. } => Some(store.connection.as_str()),
        StoreDriver::Redis(_) => None,
    }) else {
        println!(
            "{}: left as it was: the application counts through no Cloudflare binding",
            file.display()
        );
        return ExitCode::SUCCESS;
    };
    let entries = BindingPlan::for_application(&app).wrangler_entries();
    match wrangler_file::write(file, connection, &entries) {
        Ok(written) => {
            let what = match written {
                wrangler_file::Written::Created => "created",
                wrangler_file::Written::Changed => "updated",
                wrangler_file::Written::Unchanged => "unchanged",
            };
            println!(
                "{}: {what} ({} ratelimits entries of connection `{connection}`)",
                file.display(),
                entries.len()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("harness: {e}");
            ExitCode::from(2)
        }
    }
}

/// The suite of `--scenarios DIR`, its trials named by the path as given, or
/// of the repository's scenarios, named `scenarios/...`.
fn discover(scenarios: Option<PathBuf>) -> Result<Suite, ExitCode> {
    let (dir, shown_as) = match scenarios {
        Some(dir) => (dir.clone(), dir),
        None => (
            harness::world::paths::scenarios_dir(),
            PathBuf::from(harness::world::paths::SCENARIOS_SHOWN_AS),
        ),
    };
    suite::discover(&dir, &shown_as).map_err(|e| {
        eprintln!("cannot read scenarios in {}: {e}", dir.display());
        ExitCode::from(2)
    })
}

/// What the selected scenarios need of the machine (native-fixture,
/// redis-server), or one line saying what to run, before any starts.
fn prepare_machine(trials: &[&suite::Trial]) -> Result<(), ExitCode> {
    preflight::prepare_machine(trials).map_err(|e| {
        eprintln!("harness: cannot start: {e}");
        ExitCode::from(2)
    })
}

fn environment(choice: &WorkerdChoice, core: CoreChoice) -> Result<Environment, ExitCode> {
    suite::prepare_environment_with(choice, core).map_err(|e| {
        eprintln!("harness: cannot start: {e}");
        ExitCode::from(2)
    })
}

fn run(
    filter: Option<&str>,
    scenarios: Option<PathBuf>,
    include_slow: bool,
    junit: Option<PathBuf>,
    jobs: usize,
    choice: &WorkerdChoice,
    core: CoreChoice,
) -> ExitCode {
    let suite = match discover(scenarios) {
        Ok(suite) => suite,
        Err(code) => return code,
    };
    if let Err(code) = prepare_machine(&suite.select(filter, include_slow).0) {
        return code;
    }
    let env = match environment(choice, core) {
        Ok(env) => env,
        Err(code) => return code,
    };
    let result = suite.run_all(&env, filter, include_slow, jobs);
    for outcome in result.outcomes.iter().filter(|o| !o.verdict.is_ok()) {
        let note = match &outcome.verdict {
            Verdict::UnexpectedPass { reason } => format!(
                "unexpected pass: listed in expectations.toml as failing ({reason}), but it passed; remove the entry"
            ),
            _ => outcome.message.clone(),
        };
        println!("---- {} ----\n{note}\n", outcome.name);
    }
    println!("{}", report::summary_table(&result.outcomes));
    let counts = Counts::of(&result.outcomes);
    println!(
        "{} passed, {} failed, {} skipped",
        counts.passed + counts.expected_failures,
        counts.failed + counts.unexpected_passes,
        result.skipped
    );
    println!(
        "(workerd {}, counting core {}; {} expected failures, {} unexpected passes{})",
        env.workerd.version,
        core.name(),
        counts.expected_failures,
        counts.unexpected_passes,
        if result.skipped > 0 {
            "; skipped: the slow scenarios, run them with --include-slow"
        } else {
            ""
        }
    );
    if let Some(path) = junit {
        if let Err(e) = report::write_junit(&path, &[("conformance", &result.outcomes)]) {
            eprintln!("cannot write {}: {e}", path.display());
            return ExitCode::from(2);
        }
        println!("JUnit XML: {}", path.display());
    }
    if counts.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn edge_compat(
    version: &str,
    scenarios: Option<PathBuf>,
    out: &Path,
    jobs: usize,
    threshold: TimingThreshold,
    cloudflare: Option<&Path>,
) -> ExitCode {
    let suite = match discover(scenarios) {
        Ok(suite) => suite,
        Err(code) => return code,
    };
    if let Err(code) = prepare_machine(&suite.select(None, true).0) {
        return code;
    }
    let pinned_npm = match pinned_npm_version(&harness::world::paths::pinned_workerd_dir()) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("harness: {e}");
            return ExitCode::from(2);
        }
    };
    let npm_version = if version == "latest" {
        match newest_npm_version() {
            Ok(v) => v,
            Err(e) => {
                eprintln!("harness: {e}");
                return ExitCode::from(2);
            }
        }
    } else {
        version.to_owned()
    };
    // The newest workerd goes into a temporary place, gone when the run ends.
    let Ok(place) = tempfile::Builder::new().prefix("edge-workerd-").tempdir() else {
        eprintln!("harness: cannot make a temporary directory");
        return ExitCode::from(2);
    };
    if let Err(e) = install_version(place.path(), &npm_version) {
        eprintln!("harness: {e}");
        return ExitCode::from(2);
    }
    let newest_choice = WorkerdChoice {
        path: Some(binary_in(place.path())),
        npm_version: None,
        edge: true,
    };
    let (pinned_env, newest_env) = match (
        environment(&WorkerdChoice::default(), CoreChoice::Harness),
        environment(&newest_choice, CoreChoice::Harness),
    ) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(code), _) | (_, Err(code)) => return code,
    };

    eprintln!(
        "harness: every scenario on the pinned workerd {}",
        pinned_env.workerd.version
    );
    let pinned = suite.run_all(&pinned_env, None, true, jobs);
    eprintln!(
        "harness: every scenario on workerd {} (npm {npm_version})",
        newest_env.workerd.version
    );
    let newest = suite.run_all(&newest_env, None, true, jobs);
    eprintln!(
        "harness: every scenario on workerd {} with Cloudflare's simulator as the counting core",
        newest_env.workerd.version
    );
    let reference_env = match CountingCore::prepare(
        CoreChoice::Reference,
        &harness::world::paths::pinned_workerd_dir(),
    ) {
        Ok(core) => Environment {
            core,
            ..newest_env.clone()
        },
        Err(e) => {
            eprintln!("harness: {e}");
            return ExitCode::from(2);
        }
    };
    let reference = suite.run_all(&reference_env, None, true, jobs);

    let pinned = Side {
        label: "pinned".into(),
        workerd_version: pinned_env.workerd.version.clone(),
        npm_version: pinned_npm,
        outcomes: pinned.outcomes,
    };
    let newest = Side {
        label: "newest".into(),
        workerd_version: newest_env.workerd.version.clone(),
        npm_version,
        outcomes: newest.outcomes,
    };
    let reference = Side {
        label: "reference".into(),
        workerd_version: newest.workerd_version.clone(),
        npm_version: newest.npm_version.clone(),
        outcomes: reference.outcomes,
    };
    let emulation = Side {
        label: "emulation".into(),
        ..newest.clone()
    };
    let cloudflare_results = cloudflare.map(|path| {
        cloudflare::report::CloudflareResults::read(path)
            .map_err(|e| format!("no results in {} ({e})", path.display()))
    });
    let cloudflare_results = match &cloudflare_results {
        Some(Ok(results)) => Ok(results),
        Some(Err(why)) => Err(why.as_str()),
        None => Err("no --cloudflare results given"),
    };
    let markdown = edge::markdown(&pinned, &newest, threshold)
        + "\n"
        + &edge::reference_markdown(&emulation, &reference)
        + "\n"
        + &edge::cloudflare_markdown(&pinned, &newest, cloudflare_results);
    let written = std::fs::create_dir_all(out)
        .and_then(|()| std::fs::write(out.join("drift.md"), &markdown))
        .and_then(|()| {
            report::write_junit(
                &out.join("junit.xml"),
                &[
                    (
                        &format!("pinned workerd {}", pinned.workerd_version),
                        &pinned.outcomes,
                    ),
                    (
                        &format!("newest workerd {}", newest.workerd_version),
                        &newest.outcomes,
                    ),
                    (
                        &format!(
                            "newest workerd {}, Cloudflare's simulator as the core",
                            reference.workerd_version
                        ),
                        &reference.outcomes,
                    ),
                ],
            )
        });
    if let Err(e) = written {
        eprintln!("cannot write the reports into {}: {e}", out.display());
        return ExitCode::from(2);
    }
    print!("{markdown}");
    println!(
        "Drift report: {}\nJUnit XML: {}",
        out.join("drift.md").display(),
        out.join("junit.xml").display()
    );
    let counts = Counts::of(&newest.outcomes);
    println!(
        "{} passed, {} failed",
        counts.passed + counts.expected_failures,
        counts.failed + counts.unexpected_passes
    );
    if counts.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
