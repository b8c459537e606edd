//! The harness's command line: `check` and `wrangler` for an application
//! description, `run` for the conformance run with its report.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Mutex;

use clap::{Parser, Subcommand, ValueEnum};
use harness::report::{self, TrialOutcome};
use harness::suite::{self, Trial};
use runtime::config::Application;
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
    /// Print the Wrangler `ratelimits` entries of an application description.
    Wrangler {
        application: PathBuf,
        #[arg(long, value_enum, default_value_t = Format::Jsonc)]
        format: Format,
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
        #[arg(long, default_value_t = 2)]
        jobs: usize,
    },
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
        } => wrangler(&application, format),
        Command::Run {
            filter,
            scenarios,
            include_slow,
            junit,
            jobs,
        } => run(filter.as_deref(), scenarios, include_slow, junit, jobs),
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

fn run(
    filter: Option<&str>,
    scenarios: Option<PathBuf>,
    include_slow: bool,
    junit: Option<PathBuf>,
    jobs: usize,
) -> ExitCode {
    let dir = scenarios.unwrap_or_else(harness::paths::scenarios_dir);
    let trials = match suite::discover(&dir) {
        Ok(trials) => trials,
        Err(e) => {
            eprintln!("cannot read scenarios in {}: {e}", dir.display());
            return ExitCode::from(2);
        }
    };
    let (selected, skipped): (Vec<Trial>, Vec<Trial>) = trials
        .into_iter()
        .filter(|t| filter.is_none_or(|f| t.name().contains(f)))
        .partition(|t| include_slow || !t.ignored());
    let env = match suite::prepare_environment() {
        Ok(env) => env,
        Err(e) => {
            eprintln!("harness: cannot start: {e}");
            return ExitCode::from(2);
        }
    };

    let queue = Mutex::new(selected.iter());
    let outcomes = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            scope.spawn(|| {
                while let Some(trial) = queue.lock().ok().and_then(|mut q| q.next()) {
                    let outcome = trial.run(&env);
                    eprintln!(
                        "{} {}",
                        if outcome.passed { "pass" } else { "FAIL" },
                        outcome.name
                    );
                    if let Ok(mut all) = outcomes.lock() {
                        all.push(outcome);
                    }
                }
            });
        }
    });
    let mut outcomes: Vec<TrialOutcome> = outcomes.into_inner().unwrap_or_default();
    outcomes.sort_by(|a, b| a.name.cmp(&b.name));

    for failed in outcomes.iter().filter(|o| !o.passed) {
        println!("---- {} ----\n{}\n", failed.name, failed.message);
    }
    println!("{}", report::summary_table(&outcomes));
    let passed = outcomes.iter().filter(|o| o.passed).count();
    let failed = outcomes.len() - passed;
    println!(
        "{passed} passed, {failed} failed, {} skipped",
        skipped.len()
    );
    if !skipped.is_empty() {
        println!("(skipped: the slow scenarios; run them with --include-slow)");
    }
    if let Some(path) = junit {
        if let Err(e) = report::write_junit(&path, "conformance", &outcomes) {
            eprintln!("cannot write {}: {e}", path.display());
            return ExitCode::from(2);
        }
        println!("JUnit XML: {}", path.display());
    }
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
