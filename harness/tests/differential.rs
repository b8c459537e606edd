//! `cargo test -p harness --test differential`: every scenario of
//! `scenarios/` with a Workers deployable runs on both counting cores, the harness's own and
//! Cloudflare's simulator (miniflare, pinned beside workerd), and the two
//! must agree on every status sequence, count, raw `limit()` outcome and key
//! that reached a binding ([`harness::judge::differential`]). Differences by design
//! are listed in `scenarios/differential.toml` with a reason; a listed
//! scenario whose cores agree fails. Slow scenarios are ignored unless
//! `--include-ignored`, as in the scenarios target.

use std::process::ExitCode;
use std::sync::{Arc, OnceLock};

use harness::commands::suite::{self, Trial};
use harness::engine::{self, Environment, Observation};
use harness::judge::differential::{self, ListedDifferences};
use harness::language::scenario::Prepared;
use harness::world::paths::{SCENARIOS_SHOWN_AS, pinned_workerd_dir, scenarios_dir};
use harness::world::wasm::WorkerChoice;
use harness::world::workerd::WorkerdChoice;
use harness::world::workerd::reference::{CoreChoice, CountingCore};
use libtest_mimic::{Arguments, Failed};

/// The same workerd and deployable, once with each core.
struct Cores {
    harness: Environment,
    reference: Environment,
}

fn cores() -> Result<Cores, String> {
    let harness = suite::prepare_environment_with(
        &WorkerdChoice::from_env(),
        CoreChoice::Harness,
        WorkerChoice::default(),
    )
    .map_err(|e| e.to_string())?;
    let core = CountingCore::prepare(CoreChoice::Reference, &pinned_workerd_dir())
        .map_err(|e| e.to_string())?;
    let reference = Environment {
        core,
        ..harness.clone()
    };
    Ok(Cores { harness, reference })
}

fn main() -> ExitCode {
    let args = Arguments::from_args();
    let dir = scenarios_dir();
    let suite = match suite::discover(&dir, std::path::Path::new(SCENARIOS_SHOWN_AS)) {
        Ok(suite) => suite,
        Err(e) => {
            eprintln!("cannot read {}: {e}", dir.display());
            return ExitCode::FAILURE;
        }
    };
    let names: Vec<&str> = suite.trials.iter().map(Trial::name).collect();
    let listed = match ListedDifferences::load(&dir, &names) {
        Ok(listed) => Arc::new(listed),
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    // Prepared on the first trial that runs, so `--list` stays instant.
    static CORES: OnceLock<Result<Cores, String>> = OnceLock::new();
    let tests = suite
        .trials
        .iter()
        .filter_map(|trial| match trial {
            // A native deployable asks no binding: neither core plays a part.
            Trial::Scenario(prepared) if prepared.runs_natively() => None,
            Trial::Scenario(prepared) => Some(prepared.clone()),
            // The scenarios target reports a malformed file.
            Trial::Malformed { .. } => None,
        })
        .map(|prepared| {
            let listed = listed.clone();
            let ignored = prepared.ignored;
            libtest_mimic::Trial::test(prepared.trial_name.clone(), move || {
                let cores = CORES
                    .get_or_init(cores)
                    .as_ref()
                    .map_err(|e| Failed::from(format!("the harness could not start: {e}")))?;
                differ(&listed, &prepared, cores)
            })
            .with_ignored_flag(ignored)
        })
        .collect();
    // Not `Conclusion::exit()`: destructors (which kill workerd) must run.
    libtest_mimic::run(&args, tests).exit_code()
}

fn observe(env: &Environment, prepared: &Prepared, core: &str) -> Result<Observation, Failed> {
    engine::run(env, prepared).map_err(|aborted| {
        Failed::from(format!(
            "the run on {core} could not finish: {}",
            aborted.error
        ))
    })
}

fn differ(listed: &ListedDifferences, prepared: &Prepared, cores: &Cores) -> Result<(), Failed> {
    let harness = observe(&cores.harness, prepared, "the harness's core")?;
    let reference = observe(&cores.reference, prepared, "Cloudflare's simulator")?;
    let agreement = listed.verdict(
        &prepared.trial_name,
        differential::compare(prepared, &harness, &reference),
    );
    if agreement.is_ok() {
        if !matches!(agreement, differential::Agreement::Agree) {
            eprintln!("{}: {agreement}", prepared.trial_name);
        }
        Ok(())
    } else {
        Err(agreement.to_string().into())
    }
}
