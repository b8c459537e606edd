//! `harness edge-compat` (the nightly job, `tools/edge-compat`): every
//! scenario, the slow ones included, on the pinned workerd and on a newer
//! release installed into a temporary place, then on that release with
//! Cloudflare's simulator as the counting core; the drift between them
//! ([`crate::commands::edge`]) written as `drift.md`, the same as one
//! self-contained page `drift.html` ([`html_report::drift_page`]), and
//! `junit.xml`.

use std::path::{Path, PathBuf};

use crate::commands::cloudflare::report::CloudflareResults;
use crate::commands::edge::{self, Side, TimingThreshold};
use crate::commands::error::CommandError;
use crate::commands::html_report;
use crate::commands::preflight;
use crate::commands::report::{self, Counts};
use crate::commands::run::{discover, environment};
use crate::engine::Environment;
use crate::world::paths::pinned_workerd_dir;
use crate::world::wasm::WorkerChoice;
use crate::world::workerd::WorkerdChoice;
use crate::world::workerd::find::{
    binary_in, install_version, newest_npm_version, pinned_npm_version,
};
use crate::world::workerd::reference::{CoreChoice, CountingCore};

/// What the job is asked to do.
#[derive(Debug, Clone)]
pub struct EdgeCompatRequest {
    /// The npm release of `@cloudflare/workerd-linux-64` to compare with the pin, or `latest`.
    pub version: String,
    /// The scenarios directory; the repository's when `None`.
    pub scenarios: Option<PathBuf>,
    /// Where `drift.md`, `drift.html` and `junit.xml` go.
    pub out: PathBuf,
    /// How many scenarios run at once.
    pub jobs: usize,
    /// When a p99 change is worth reporting.
    pub threshold: TimingThreshold,
    /// The night's `harness cloudflare` results (`results.json`), shown
    /// beside the workerd columns; absent or unreadable, the report says so.
    pub cloudflare: Option<PathBuf>,
}

/// Runs the job, writes and prints the drift report; whether the newer
/// workerd passed everything the expectations say it should.
pub fn edge_compat(request: &EdgeCompatRequest) -> Result<bool, CommandError> {
    let suite = discover(request.scenarios.clone())?;
    preflight::prepare_machine(&suite.select(None, true).0)?;
    let pinned_npm = pinned_npm_version(&pinned_workerd_dir())?;
    let npm_version = if request.version == "latest" {
        newest_npm_version()?
    } else {
        request.version.clone()
    };
    // The newer workerd goes into a temporary place, gone when the run ends.
    let place = tempfile::Builder::new()
        .prefix("edge-workerd-")
        .tempdir()
        .map_err(|_| CommandError::TempDir)?;
    install_version(place.path(), &npm_version)?;
    let newest_choice = WorkerdChoice {
        path: Some(binary_in(place.path())),
        npm_version: None,
        edge: true,
    };
    let pinned_env = environment(
        &WorkerdChoice::default(),
        CoreChoice::Harness,
        WorkerChoice::default(),
    );
    let newest_env = environment(&newest_choice, CoreChoice::Harness, WorkerChoice::default());
    let (pinned_env, newest_env) = (pinned_env?, newest_env?);

    eprintln!(
        "harness: every scenario on the pinned workerd {}",
        pinned_env.workerd.version
    );
    let pinned = suite.run_all(&pinned_env, None, true, request.jobs);
    eprintln!(
        "harness: every scenario on workerd {} (npm {npm_version})",
        newest_env.workerd.version
    );
    let newest = suite.run_all(&newest_env, None, true, request.jobs);
    eprintln!(
        "harness: every scenario on workerd {} with Cloudflare's simulator as the counting core",
        newest_env.workerd.version
    );
    let reference_env = Environment {
        core: CountingCore::prepare(CoreChoice::Reference, &pinned_workerd_dir())?,
        ..newest_env.clone()
    };
    let reference = suite.run_all(&reference_env, None, true, request.jobs);

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
    let markdown = edge::markdown(&pinned, &newest, request.threshold)
        + "\n"
        + &edge::reference_markdown(&emulation, &reference)
        + "\n"
        + &cloudflare_section(&pinned, &newest, request.cloudflare.as_deref());
    write_reports(&request.out, &markdown, [&pinned, &newest, &reference]).map_err(|source| {
        CommandError::Reports {
            dir: request.out.clone(),
            source,
        }
    })?;
    print!("{markdown}");
    println!(
        "Drift report: {} (and {})\nJUnit XML: {}",
        request.out.join("drift.md").display(),
        request.out.join("drift.html").display(),
        request.out.join("junit.xml").display()
    );
    let counts = Counts::of(&newest.outcomes);
    println!(
        "{} passed, {} failed",
        counts.passed + counts.expected_failures,
        counts.failed + counts.unexpected_passes
    );
    Ok(counts.is_ok())
}

/// The drift report's section on Cloudflare itself, from `results` when
/// given and readable.
fn cloudflare_section(pinned: &Side, newest: &Side, results: Option<&Path>) -> String {
    let read = results.map(|path| {
        CloudflareResults::read(path).map_err(|e| format!("no results in {} ({e})", path.display()))
    });
    match &read {
        Some(Ok(results)) => edge::cloudflare_markdown(pinned, newest, Ok(results)),
        Some(Err(why)) => edge::cloudflare_markdown(pinned, newest, Err(why)),
        None => edge::cloudflare_markdown(pinned, newest, Err("no --cloudflare results given")),
    }
}

/// `side` as the drift page shows it.
fn drift_side(side: &Side) -> html_report::DriftSide<'_> {
    html_report::DriftSide {
        label: &side.label,
        workerd_version: &side.workerd_version,
        npm_version: &side.npm_version,
        outcomes: &side.outcomes,
    }
}

/// `drift.md`, `drift.html`, and `junit.xml` with one suite per side.
fn write_reports(
    out: &Path,
    markdown: &str,
    [pinned, newest, reference]: [&Side; 3],
) -> std::io::Result<()> {
    std::fs::create_dir_all(out)?;
    std::fs::write(out.join("drift.md"), markdown)?;
    let page = html_report::drift_page([
        drift_side(pinned),
        drift_side(newest),
        drift_side(reference),
    ])
    .map_err(std::io::Error::other)?;
    std::fs::write(out.join("drift.html"), page)?;
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
}
