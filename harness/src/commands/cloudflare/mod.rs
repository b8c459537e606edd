//! `harness cloudflare`: the scenarios marked `on_cloudflare`, proved on
//! Cloudflare itself. Each gets a Worker of its own (the deployable, its
//! bindings from the same plan as `harness wrangler`, its own namespace
//! ids), a tail, its traffic on the real clock, and its checks as its marks
//! say; then its tail and script are deleted. Whatever ends the run (done,
//! failed, a panic, Ctrl-C), what it created is deleted; `clean --prefix`
//! deletes what a killed run left.

pub mod dry_run;
mod lifecycle;
pub mod report;
pub mod run;

use std::path::PathBuf;
use std::time::Instant;

use futures::future::BoxFuture;

use lifecycle::{Context, ScenarioRun};
pub use lifecycle::{Judge, Timing};
use report::CloudflareOutcome;
use run::{CloudflareRun, CloudflareRunError, CloudflareRunOptions};

use crate::commands::suite;
use crate::engine::REQUEST_TIMEOUT;
use crate::world::cloudflare::api::{Api, ApiError};
use crate::world::cloudflare::credentials::{self, Credentials, CredentialsError};
use crate::world::cloudflare::retry::RetryPolicy;
use crate::world::cloudflare::{Created, worker_url_template_from_env};
use crate::world::paths;
use crate::world::wasm::{self, BuildError, WorkerChoice};
use crate::world::workerd::find::{FindError, pinned_version};

/// The default start of every script's name.
pub const DEFAULT_PREFIX: &str = "harness-ratelimits";

/// The Worker every scenario's script runs: built as the local run builds it.
pub const WORKER: WorkerChoice = WorkerChoice::WasmBindgen;

/// What `harness cloudflare` is asked to do.
#[derive(Debug, Clone)]
pub struct CloudflareRequest {
    /// Only scenarios whose name contains this.
    pub filter: Option<String>,
    /// The scenarios directory; the repository's when `None`.
    pub scenarios: Option<PathBuf>,
    /// The first namespace id the run may use.
    pub namespace_base: u64,
    /// The start of every script's name.
    pub prefix: String,
    /// Where the reports (or, with `dry_run`, the plan and uploads) go.
    pub out: PathBuf,
    /// Scenarios on Cloudflare at once.
    pub jobs: usize,
    /// Write the plan and the uploads; touch no network.
    pub dry_run: bool,
}

/// Where a run reaches Cloudflare, and how it judges: from the environment
/// for the command line, given by tests.
#[derive(Debug, Clone)]
pub struct Reach {
    /// `None`: read from the environment when needed (not for a dry run).
    pub credentials: Option<Credentials>,
    /// The API's base URL.
    pub base_url: String,
    /// Where a script's workers.dev URL is (`{script}`, `{subdomain}`).
    pub url_template: String,
    /// How hard each API request is tried.
    pub retry: RetryPolicy,
    /// How long the run waits for Cloudflare.
    pub timing: Timing,
    /// What judges each scenario's observation.
    pub judge: Judge,
    /// What interrupts the run: Ctrl-C or SIGTERM ([`interrupted_by_a_signal`]).
    pub interrupted: Interruption,
}

/// Resolves when the run is to stop, naming why. A tokio signal listener
/// replaces the signal's default action for the rest of the process, so a
/// test running the command inside its own process gives one that never
/// resolves, and the process's Ctrl-C still ends it.
pub type Interruption = fn() -> BoxFuture<'static, &'static str>;

impl Reach {
    /// As the command line has it: [`credentials::BASE_URL_VARIABLE`] and
    /// [`crate::world::cloudflare::WORKER_URL_VARIABLE`] honoured.
    pub fn from_env() -> Reach {
        Reach {
            credentials: None,
            base_url: credentials::base_url_from_env(),
            url_template: worker_url_template_from_env(),
            retry: RetryPolicy::default(),
            timing: Timing::default(),
            judge: crate::judge::cloudflare::check,
            interrupted: interrupted_by_a_signal,
        }
    }
}

/// Why a run on Cloudflare stopped before its verdict: one line each.
#[derive(Debug, thiserror::Error)]
pub enum CloudflareError {
    /// The scenarios directory could not be listed.
    #[error("cannot read scenarios in {}: {source}", dir.display())]
    Scenarios {
        /// The directory.
        dir: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
    /// The run could not be planned.
    #[error("{0}")]
    Run(#[from] CloudflareRunError),
    /// The deployable could not be built.
    #[error("cannot build the deployable: {0}")]
    Build(#[from] BuildError),
    /// The pinned workerd's date could not be read.
    #[error("cannot tell the pinned workerd's compatibility date: {0}")]
    Pin(#[from] FindError),
    /// A variable is missing, or the token unusable.
    #[error("{0}")]
    Credentials(#[from] CredentialsError),
    /// Cloudflare's API refused, or could not be reached.
    #[error("{0}")]
    Api(#[from] ApiError),
    /// The reports or the dry run could not be written.
    #[error("cannot write into {}: {source}", dir.display())]
    Write {
        /// The directory.
        dir: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
    /// No async runtime.
    #[error("cannot start an async runtime: {0}")]
    Runtime(std::io::Error),
    /// Ctrl-C or SIGTERM: what the run created was deleted (or `left`
    /// things could not be, and `clean` is named).
    #[error("interrupted ({signal}){}", if *left == 0 { ": everything the run created on Cloudflare is deleted".to_owned() } else { format!(": {left} things it created on Cloudflare are left; run `harness cloudflare clean --prefix {prefix}`") })]
    Interrupted {
        /// `Ctrl-C` or `SIGTERM`.
        signal: &'static str,
        /// What could not be deleted.
        left: usize,
        /// The run's prefix, for `clean`.
        prefix: String,
    },
}

/// `harness cloudflare`, reaching Cloudflare as the environment says.
/// Whether every scenario held.
pub fn run(request: &CloudflareRequest) -> Result<bool, CloudflareError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(CloudflareError::Runtime)?
        .block_on(run_with(request, Reach::from_env()))
}

/// `harness cloudflare clean --prefix PREFIX`: deletes the scripts a run
/// with that prefix left, and no one else's: a script named as a run's
/// (`PREFIX-xxxxxx-N`) is deleted only when its settings, read back, carry
/// the run's marker ([`run::MARKER_BINDING`]); any other is kept.
pub fn clean(prefix: &str) -> Result<Cleaned, CloudflareError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(CloudflareError::Runtime)?
        .block_on(async {
            let reach = Reach::from_env();
            let credentials = Credentials::from_env()?;
            let api = Api::new(credentials, &reach.base_url, reach.retry)?;
            clean_with(&api, prefix).await
        })
}

/// What `clean` did: the scripts it deleted, and those named as a run's
/// that it kept, with why.
#[derive(Debug, Clone, Default)]
pub struct Cleaned {
    /// Deleted: each carried its run's marker.
    pub deleted: Vec<String>,
    /// Named as a run's, and kept.
    pub kept: Vec<KeptScript>,
}

impl Cleaned {
    /// Whether every script named as a run's was told apart: none was kept
    /// for want of an answer, so nothing a run left can be among the kept.
    pub fn is_complete(&self) -> bool {
        !self
            .kept
            .iter()
            .any(|k| matches!(k.why, Kept::Unverified(_)))
    }
}

/// A script named as a run's that `clean` did not delete.
#[derive(Debug, Clone)]
pub struct KeptScript {
    /// Its name.
    pub script: String,
    /// Why it was kept.
    pub why: Kept,
}

/// Why `clean` kept a script named as a run's.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Kept {
    /// Its settings have no marker: a user's script that only looks like a run's.
    #[error("not a run's (no {} binding)", run::MARKER_BINDING)]
    NoMarker,
    /// Its marker binding is not the harness's text for it.
    #[error(
        "not a run's (its {} binding is not the harness's marker for it)",
        run::MARKER_BINDING
    )]
    OtherMarker,
    /// Its settings could not be read: nothing is deleted unverified.
    #[error("could not verify ({0}); run `clean` again")]
    Unverified(ApiError),
}

/// Whether the bindings of `script`'s settings carry its run's marker.
fn marked(script: &str, settings: &serde_json::Value) -> Result<(), Kept> {
    let marker = settings["bindings"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|b| b["name"] == run::MARKER_BINDING)
        .ok_or(Kept::NoMarker)?;
    let expected = run::marker_text(script);
    if marker["type"] == "plain_text" && marker["text"].as_str() == Some(expected.as_str()) {
        Ok(())
    } else {
        Err(Kept::OtherMarker)
    }
}

/// [`clean`] with a given client.
pub async fn clean_with(api: &Api, prefix: &str) -> Result<Cleaned, CloudflareError> {
    run::check_prefix(prefix)?;
    let named: Vec<String> = api
        .list_scripts()
        .await?
        .into_iter()
        .filter(|name| run::is_run_script(prefix, name))
        .collect();
    let mut cleaned = Cleaned::default();
    for script in named {
        let verdict = match api.script_settings(&script).await {
            Ok(settings) => marked(&script, &settings),
            Err(error) => Err(Kept::Unverified(error)),
        };
        match verdict {
            Ok(()) => {
                api.delete_script(&script).await?;
                println!("deleted script {script}");
                cleaned.deleted.push(script);
            }
            Err(why) => {
                println!("kept script {script}: {why}");
                cleaned.kept.push(KeptScript { script, why });
            }
        }
    }
    println!(
        "{} scripts of runs with prefix `{prefix}` deleted, {} named like one kept",
        cleaned.deleted.len(),
        cleaned.kept.len()
    );
    Ok(cleaned)
}

/// The run, reaching Cloudflare as `reach` says.
pub async fn run_with(request: &CloudflareRequest, reach: Reach) -> Result<bool, CloudflareError> {
    // A missing variable is said before anything is built.
    let credentials = match (&reach.credentials, request.dry_run) {
        (_, true) => None,
        (Some(c), false) => Some(c.clone()),
        (None, false) => Some(Credentials::from_env()?),
    };
    let plan = prepare_run(request).await?;
    let Some(credentials) = credentials else {
        return dry_run(&plan, &request.out);
    };
    let api = Api::new(credentials, &reach.base_url, reach.retry)?;
    eprint!("harness: {}", plan.summary());
    let subdomain = api.account_subdomain().await?;
    let worker_client = reqwest::Client::builder()
        .timeout(REQUEST_TIMEOUT)
        .build()
        .map_err(|e| ApiError::Client(e.without_url().to_string()))?;
    let context = Context {
        api: api.clone(),
        created: Created::default(),
        worker_client,
        subdomain,
        url_template: reach.url_template.clone(),
        timing: reach.timing,
        judge: reach.judge,
    };
    let started = Instant::now();
    let finished = tokio::select! {
        runs = run_all(&context, &plan, request.jobs) => Ok(runs),
        signal = (reach.interrupted)() => Err(signal),
    };
    let runs = match finished {
        Ok(runs) => runs,
        Err(signal) => {
            eprintln!("harness: {signal}: deleting what the run created on Cloudflare");
            // A second signal stops the deleting, naming what is left.
            tokio::select! {
                _ = context.created.delete_all(&api) => {}
                _ = (reach.interrupted)() => {}
            }
            return Err(CloudflareError::Interrupted {
                signal,
                left: context.created.len(),
                prefix: request.prefix.clone(),
            });
        }
    };
    // Anything a panicked scenario left.
    let leftovers = context.created.delete_all(&api).await;
    for (resource, error) in &leftovers {
        eprintln!(
            "harness: could not delete {resource} ({error}): run `harness cloudflare clean --prefix {}`",
            request.prefix
        );
    }
    report_run(request, &plan, &runs, leftovers.len(), started.elapsed())
}

/// `--dry-run`: the plan and the uploads written into `out`.
fn dry_run(plan: &CloudflareRun, out: &std::path::Path) -> Result<bool, CloudflareError> {
    dry_run::write_dry_run(plan, out).map_err(|source| CloudflareError::Write {
        dir: out.to_owned(),
        source,
    })?;
    print!("{}", plan.summary());
    println!(
        "Dry run (no network): {}: traffic.json and traffic.md (the traffic), and for each scenario NN-SCRIPT/upload.multipart (the exact body), content-type.txt, metadata.json, bindings.json",
        out.display()
    );
    Ok(true)
}

/// Prints and writes how the run went; whether every scenario held. A
/// refused token is the run's one line instead.
fn report_run(
    request: &CloudflareRequest,
    plan: &CloudflareRun,
    runs: &[Ran],
    left: usize,
    took: std::time::Duration,
) -> Result<bool, CloudflareError> {
    let mut outcomes: Vec<CloudflareOutcome> = plan
        .malformed
        .iter()
        .map(|(name, error)| report::malformed(name, error))
        .collect();
    let mut refused = None;
    for (planned, run) in plan.scenarios.iter().zip(runs) {
        outcomes.push(match run {
            Ran::Done(run) => {
                refused = refused.or(run.refused.clone());
                report::outcome(planned, run)
            }
            Ran::Panicked(message) => report::panicked(planned, message),
            Ran::NotRun(why) => report::not_run(planned, why),
        });
    }
    if let Some(refused) = refused {
        return Err(refused.into());
    }
    outcomes.sort_by(|a, b| a.trial.name.cmp(&b.trial.name));
    for o in outcomes.iter().filter(|o| !o.trial.verdict.is_ok()) {
        println!("---- {} ----\n{}\n", o.trial.name, o.trial.message);
    }
    println!("{}", report::table(&outcomes));
    let (counts, all_held) = report::counts_line(&outcomes);
    let summary = format!(
        "{counts} on Cloudflare in {} (scripts {}N, all deleted{})",
        run::minutes(took),
        plan.script_stem,
        if left == 0 {
            String::new()
        } else {
            format!(" but {left}")
        }
    );
    println!("{summary}");
    let results = report::CloudflareResults::of(plan, &outcomes, took);
    report::write(&request.out, plan, &results, &outcomes, &summary).map_err(|source| {
        CloudflareError::Write {
            dir: request.out.clone(),
            source,
        }
    })?;
    println!(
        "Reports: {} (report.md, report.html, junit.xml, results.json)",
        request.out.display()
    );
    Ok(all_held)
}

/// The plan of `request`: its scenarios, the deployable built (as the
/// local run builds it), the pinned workerd's compatibility date.
async fn prepare_run(request: &CloudflareRequest) -> Result<CloudflareRun, CloudflareError> {
    let (dir, shown_as) = match &request.scenarios {
        Some(dir) => (dir.clone(), dir.clone()),
        None => (
            paths::scenarios_dir(),
            PathBuf::from(paths::SCENARIOS_SHOWN_AS),
        ),
    };
    let suite = suite::discover(&dir, &shown_as)
        .map_err(|source| CloudflareError::Scenarios { dir, source })?;
    let deployable = tokio::task::spawn_blocking(|| wasm::build_worker(WORKER))
        .await
        .map_err(|e| CloudflareError::Runtime(std::io::Error::other(e.to_string())))??;
    let modules = run::modules(&deployable)?;
    let compatibility_date = pinned_version(&paths::pinned_workerd_dir())?;
    Ok(run::prepare(
        &suite,
        &CloudflareRunOptions {
            filter: request.filter.as_deref(),
            prefix: &request.prefix,
            namespace_base: request.namespace_base,
            jobs: request.jobs,
            compatibility_date: &compatibility_date,
        },
        &modules,
    )?)
}

/// How one planned scenario's run ended.
enum Ran {
    Done(Box<ScenarioRun>),
    Panicked(String),
    NotRun(String),
}

/// Runs every planned scenario, `jobs` at once, in plan order; the results
/// in plan order. A panic ends its own scenario only; a refused token stops
/// the scenarios not yet started.
async fn run_all(context: &Context, plan: &CloudflareRun, jobs: usize) -> Vec<Ran> {
    let permits = std::sync::Arc::new(tokio::sync::Semaphore::new(jobs.max(1)));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut tasks = tokio::task::JoinSet::new();
    let mut ids = std::collections::HashMap::new();
    for (index, planned) in plan.scenarios.iter().enumerate() {
        let (context, planned) = (context.clone(), planned.clone());
        let (permits, stop) = (permits.clone(), stop.clone());
        let handle = tasks.spawn(async move {
            let _permit = permits.acquire_owned().await;
            if stop.load(std::sync::atomic::Ordering::SeqCst) {
                return Ran::NotRun("the token was refused".to_owned());
            }
            let run = lifecycle::run_scenario(&context, &planned).await;
            if run.refused.is_some() {
                stop.store(true, std::sync::atomic::Ordering::SeqCst);
            }
            eprintln!(
                "harness: {} on Cloudflare: {}{}",
                planned.prepared.trial_name,
                match (&run.error, &run.judgement) {
                    (Some(error), _) => format!("could not run to the end: {error}"),
                    (None, Some(j)) if j.failures.is_empty() => "pass".to_owned(),
                    (None, _) => "FAIL".to_owned(),
                },
                run.answered_after.map_or_else(String::new, |d| format!(
                    " (its URL took {:.1} s to answer)",
                    d.as_secs_f64()
                ))
            );
            Ran::Done(Box::new(run))
        });
        ids.insert(handle.id(), index);
    }
    let mut results: Vec<Option<Ran>> = (0..plan.scenarios.len()).map(|_| None).collect();
    while let Some(joined) = tasks.join_next_with_id().await {
        match joined {
            Ok((id, ran)) => {
                if let Some(&index) = ids.get(&id) {
                    results[index] = Some(ran);
                }
            }
            Err(error) => {
                if let Some(&index) = ids.get(&error.id()) {
                    let message = match error.try_into_panic() {
                        Ok(panic) => panic_message(panic.as_ref()),
                        Err(error) => error.to_string(),
                    };
                    results[index] = Some(Ran::Panicked(message));
                }
            }
        }
    }
    results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Ran::NotRun("never finished".to_owned())))
        .collect()
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".to_owned())
}

/// Resolves at Ctrl-C or SIGTERM (a CI job's cancel), naming which: the
/// command line's [`Interruption`].
pub fn interrupted_by_a_signal() -> BoxFuture<'static, &'static str> {
    Box::pin(async {
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        let terminated = async {
            match terminate.as_mut() {
                Some(signal) => signal.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => "Ctrl-C",
            _ = terminated => "SIGTERM",
        }
    })
}
