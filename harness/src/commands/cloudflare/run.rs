//! What a run on Cloudflare will do, decided before it touches the network:
//! which scenarios (those marked `on_cloudflare`, longest first), each one's
//! script name and namespace ids (its own, from `--namespace-base`), its
//! upload (the same wasm, glue and snippets as the local run, with the
//! bindings of the same plan as `harness wrangler`, less those the scenario
//! says are missing), its traffic and how long it should take. `--dry-run`
//! writes exactly this ([`super::dry_run`]).

use std::hash::{BuildHasher, Hasher};
use std::path::{Path, PathBuf};
use std::time::Duration;

use runtime::GatePlan;
use runtime::bindings::Bindings;
use runtime::config::{Application, Diagnostics, StoreDriver};

use crate::commands::suite::{Suite, Trial};
use crate::language::on_cloudflare;
use crate::language::scenario::{Action, Behaviour, Prepared, behaviour_of, cloudflare_obstacle};
use crate::world::cloudflare::upload::{Binding, Metadata, Module, ModuleKind, Simple, Upload};
use crate::world::wasm::{STEM, WorkerBuild};

/// The entry module on Cloudflare (the production entry: no scenario clock,
/// no control channel).
pub const ENTRY_MODULE: &str = "entry.js";
const ENTRY_JS: &str = include_str!("../../../assets/cloudflare-entry.js");

/// Time a scenario's Worker takes to be uploaded, routed, tailed and
/// answering, as the plan assumes it (a new Worker reaches its location in
/// seconds; the wait for it allows [`crate::commands::cloudflare::Timing`]'s).
pub const DEPLOY_ESTIMATE: Duration = Duration::from_secs(20);
/// One request's time from a runner to a workers.dev URL and back, as the
/// plan assumes it.
pub const REQUEST_ESTIMATE: Duration = Duration::from_millis(100);

/// Why the run cannot be planned.
#[derive(Debug, thiserror::Error)]
pub enum CloudflareRunError {
    #[error(
        "--prefix `{0}`: a script name starts with it, so it is 1 to 40 lowercase letters, digits and dashes, a letter first and no dash last"
    )]
    /// `--prefix` cannot start a script name.
    Prefix(String),
    /// `--namespace-base` is 0.
    #[error("--namespace-base must be at least 1 (a namespace id is a positive integer)")]
    NamespaceBase,
    #[error(
        "{trial}: its application, with namespace {namespace}, is invalid on Cloudflare:\n{diagnostics}"
    )]
    /// A scenario's application is invalid with its namespace ids.
    Application {
        /// The scenario.
        trial: String,
        /// The namespace it was given.
        namespace: u64,
        /// Every diagnostic, rendered.
        diagnostics: String,
    },
    /// A scenario names a deployable its application lacks.
    #[error("{trial}: the application has no deployable `{deployable}`")]
    Deployable {
        /// The scenario.
        trial: String,
        /// The deployable named.
        deployable: String,
    },
    /// A scenario's application could not be given its namespace, or
    /// planned as its Worker's gate.
    #[error("{trial}: {detail}")]
    Rebase {
        /// The scenario.
        trial: String,
        /// Why.
        detail: String,
    },
    /// A file of the built deployable could not be read.
    #[error("cannot read the deployable's {}: {source}", path.display())]
    Module {
        /// The file.
        path: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
    /// No scenario to run (the filter, when one is given).
    #[error("no scenario is marked `on_cloudflare`{0}")]
    Nothing(String),
}

/// One scenario as the run does it.
#[derive(Debug, Clone)]
pub struct ScenarioOnCloudflare {
    /// The scenario.
    pub prepared: Prepared,
    /// Its script's name: the run's prefix and suffix, and its number.
    pub script: String,
    /// Its namespace ids, first and last (none when it has no binding).
    pub namespaces: Option<(u64, u64)>,
    /// Its Worker's upload.
    pub upload: Upload,
    /// The planned bindings left out of the upload (the scenario's `missing` ones).
    pub omitted: Vec<String>,
    /// What its checks are on Cloudflare: `exact`, `bounded x3`...
    pub label: String,
    /// How long it should take, deploy included.
    pub estimate: Duration,
}

/// The whole run.
#[derive(Debug, Clone)]
pub struct CloudflareRun {
    /// The scripts' common start: `PREFIX-SUFFIX-`.
    pub script_stem: String,
    /// The first namespace id the run may use.
    pub namespace_base: u64,
    /// How many namespace ids the run uses, from `namespace_base`.
    pub namespace_count: u64,
    /// In run order: the longest first.
    pub scenarios: Vec<ScenarioOnCloudflare>,
    /// Scenarios not run on Cloudflare, and why.
    pub left_out: Vec<(String, String)>,
    /// Files that could not be read, as trials that failed.
    pub malformed: Vec<(String, String)>,
    /// Scenarios on Cloudflare at once.
    pub jobs: usize,
    /// How long the run should take with `jobs` scenarios at once.
    pub estimate: Duration,
    /// Every Worker's compatibility date: the pinned workerd's.
    pub compatibility_date: String,
}

/// What the run is asked.
#[derive(Debug, Clone)]
pub struct CloudflareRunOptions<'a> {
    /// Only scenarios whose name contains this.
    pub filter: Option<&'a str>,
    /// The start of every script's name.
    pub prefix: &'a str,
    /// The first namespace id the run may use.
    pub namespace_base: u64,
    /// Scenarios on Cloudflare at once.
    pub jobs: usize,
    /// The uploads' compatibility date (the pinned workerd's, as the local run has it).
    pub compatibility_date: &'a str,
}

/// A script name's random part: six lowercase letters and digits.
pub fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    hasher.write_u32(std::process::id());
    let mut n = hasher.finish();
    (0..6)
        .map(|_| {
            let c = ALPHABET[(n % 36) as usize];
            n /= 36;
            c as char
        })
        .collect()
}

/// Whether `prefix` can start a script name (and a workers.dev host name).
pub fn check_prefix(prefix: &str) -> Result<(), CloudflareRunError> {
    let ok = (1..=40).contains(&prefix.len())
        && prefix.starts_with(|c: char| c.is_ascii_lowercase())
        && !prefix.ends_with('-')
        && prefix
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if ok {
        Ok(())
    } else {
        Err(CloudflareRunError::Prefix(prefix.to_owned()))
    }
}

/// The text binding every run's script carries, so `clean` can tell a
/// run's script from a user's that only looks like one (`shop-abcdef-2`):
/// a name is anyone's to choose, the marker only the harness writes.
pub const MARKER_BINDING: &str = "HARNESS_RUN";

/// The marker's text for `script` (`PREFIX-xxxxxx-N`): it names the
/// harness and the run (`PREFIX-xxxxxx`), so it holds for that run's
/// scripts only.
pub fn marker_text(script: &str) -> String {
    let run = script
        .trim_end_matches(|c: char| c.is_ascii_digit())
        .trim_end_matches('-');
    format!("harness cloudflare run {run}")
}

/// Whether `script` is a name a run with `prefix` gave (`PREFIX-xxxxxx-N`):
/// the first test of `clean`, which then reads the script's
/// [`MARKER_BINDING`] back before deleting it.
pub fn is_run_script(prefix: &str, script: &str) -> bool {
    let Some(rest) = script
        .strip_prefix(prefix)
        .and_then(|r| r.strip_prefix('-'))
    else {
        return false;
    };
    let Some((suffix, number)) = rest.split_once('-') else {
        return false;
    };
    suffix.len() == 6
        && suffix
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && !number.is_empty()
        && number.chars().all(|c| c.is_ascii_digit())
}

/// The deployable's modules as Cloudflare takes them: the entry, the glue,
/// the wasm and the glue's snippets.
pub fn modules(build: &WorkerBuild) -> Result<Vec<Module>, CloudflareRunError> {
    let read = |path: &Path| {
        std::fs::read(path).map_err(|source| CloudflareRunError::Module {
            path: path.to_owned(),
            source,
        })
    };
    let mut modules = vec![
        Module {
            name: ENTRY_MODULE.to_owned(),
            kind: ModuleKind::EsModule,
            bytes: ENTRY_JS.as_bytes().to_vec(),
        },
        Module {
            name: format!("{STEM}.js"),
            kind: ModuleKind::EsModule,
            bytes: read(&build.glue_js)?,
        },
        Module {
            name: format!("{STEM}_bg.wasm"),
            kind: ModuleKind::Wasm,
            bytes: read(&build.wasm)?,
        },
    ];
    for (name, file) in &build.snippets {
        modules.push(Module {
            name: name.clone(),
            kind: ModuleKind::EsModule,
            bytes: read(file)?,
        });
    }
    Ok(modules)
}

/// Plans the run of `suite`'s marked scenarios.
pub fn prepare(
    suite: &Suite,
    options: &CloudflareRunOptions<'_>,
    modules: &[Module],
) -> Result<CloudflareRun, CloudflareRunError> {
    check_prefix(options.prefix)?;
    if options.namespace_base == 0 {
        return Err(CloudflareRunError::NamespaceBase);
    }
    let mut chosen = Vec::new();
    let mut left_out = Vec::new();
    let mut malformed = Vec::new();
    for trial in &suite.trials {
        if options.filter.is_some_and(|f| !trial.name().contains(f)) {
            continue;
        }
        match trial {
            Trial::Malformed { name, error } => malformed.push((name.clone(), error.clone())),
            Trial::Scenario(prepared) => {
                let scenario = prepared.scenario.scenario.get_ref();
                if scenario.on_cloudflare.is_some() {
                    chosen.push(prepared);
                } else {
                    let why = cloudflare_obstacle(scenario, prepared.runs_natively())
                        .map_or_else(|| "not marked `on_cloudflare`".to_owned(), |(_, why)| why);
                    left_out.push((prepared.trial_name.clone(), why));
                }
            }
        }
    }
    if chosen.is_empty() && malformed.is_empty() {
        return Err(CloudflareRunError::Nothing(
            options
                .filter
                .map_or_else(String::new, |f| format!(" among those matching `{f}`")),
        ));
    }
    // The longest first, so the run does not end waiting for one started last.
    chosen.sort_by_key(|p| std::cmp::Reverse(estimate(p)));
    let stem = format!("{}-{}-", options.prefix, random_suffix());
    let mut next_namespace = options.namespace_base;
    let mut scenarios = Vec::with_capacity(chosen.len());
    for (number, prepared) in chosen.into_iter().enumerate() {
        let planned = plan_scenario(
            prepared,
            format!("{stem}{}", number + 1),
            next_namespace,
            options.compatibility_date,
            modules,
        )?;
        if let Some((_, last)) = planned.namespaces {
            next_namespace = last + 1;
        }
        scenarios.push(planned);
    }
    let estimate = makespan(
        &scenarios.iter().map(|s| s.estimate).collect::<Vec<_>>(),
        options.jobs,
    );
    Ok(CloudflareRun {
        script_stem: stem,
        namespace_base: options.namespace_base,
        namespace_count: next_namespace - options.namespace_base,
        scenarios,
        left_out,
        malformed,
        jobs: options.jobs,
        estimate,
        compatibility_date: options.compatibility_date.to_owned(),
    })
}

fn plan_scenario(
    prepared: &Prepared,
    script: String,
    namespace: u64,
    compatibility_date: &str,
    modules: &[Module],
) -> Result<ScenarioOnCloudflare, CloudflareRunError> {
    let trial = || prepared.trial_name.clone();
    let app = rebase(prepared, namespace)?;
    let deployable =
        app.deployable(&prepared.deployable)
            .ok_or_else(|| CloudflareRunError::Deployable {
                trial: trial(),
                deployable: prepared.deployable.clone(),
            })?;
    let planned = Bindings::for_deployable(&app, deployable);
    let scenario = prepared.scenario.scenario.get_ref();
    let behaviours = scenario
        .bindings
        .as_ref()
        .map(|b| b.get_ref().clone())
        .unwrap_or_default();
    let missing = |name: &str| behaviour_of(&behaviours, name) == Some(&Behaviour::Missing);
    let mut bindings = Vec::new();
    let mut omitted = Vec::new();
    for b in &planned.bindings {
        if missing(&b.name) {
            omitted.push(b.name.clone());
        } else {
            bindings.push(Binding::Ratelimit {
                name: b.name.clone(),
                namespace_id: b.namespace_id.to_string(),
                simple: Simple {
                    limit: b.limit.requests,
                    period: b.limit.window_seconds,
                },
            });
        }
    }
    // The dataset its data points go to, as `wrangler --write` writes
    // `analytics_engine_datasets`: the edge's own, so they are written there.
    if let Some(entry) = runtime::bindings::DatasetEntry::of(&app) {
        bindings.push(Binding::AnalyticsEngine {
            name: entry.binding,
            dataset: entry.dataset,
        });
    }
    // The Worker builds its gate from the plan the build step writes, as
    // the local run's Workers do (`harness validate --plan`).
    let plan = GatePlan::new(&app, &prepared.deployable)
        .map_err(|e| e.to_string())
        .and_then(|plan| plan.to_text().map_err(|e| e.to_string()))
        .map_err(|detail| CloudflareRunError::Rebase {
            trial: trial(),
            detail,
        })?;
    bindings.push(Binding::PlainText {
        name: "PLAN".to_owned(),
        text: plan,
    });
    bindings.push(Binding::PlainText {
        name: MARKER_BINDING.to_owned(),
        text: marker_text(&script),
    });
    let namespaces = planned.bindings.iter().map(|b| b.namespace_id).fold(
        None,
        |range: Option<(u64, u64)>, id| match range {
            None => Some((id, id)),
            Some((first, last)) => Some((first.min(id), last.max(id))),
        },
    );
    Ok(ScenarioOnCloudflare {
        prepared: prepared.clone(),
        script,
        namespaces,
        upload: Upload {
            metadata: Metadata {
                main_module: ENTRY_MODULE.to_owned(),
                compatibility_date: compatibility_date.to_owned(),
                compatibility_flags: Vec::new(),
                bindings,
            },
            modules: modules.to_vec(),
        },
        omitted,
        label: on_cloudflare::label(scenario),
        estimate: estimate(prepared),
    })
}

/// The scenario's application with its Cloudflare store's namespace set
/// to `namespace`, so the Worker's own description names the ids it is
/// bound to: the description rewritten ([`rebased_text`]) and validated
/// again, as the namespace decides whether its ids are valid. One without
/// such a store is the scenario's own, as validated on loading.
fn rebase(prepared: &Prepared, namespace: u64) -> Result<Application, CloudflareRunError> {
    let invalid = |diagnostics: &Diagnostics| CloudflareRunError::Application {
        trial: prepared.trial_name.clone(),
        namespace,
        diagnostics: diagnostics.render("application"),
    };
    let app = prepared.application.as_ref().map_err(invalid)?;
    let rebased = rebased_text(&prepared.application_toml, app, namespace).map_err(|detail| {
        CloudflareRunError::Rebase {
            trial: prepared.trial_name.clone(),
            detail,
        }
    })?;
    match rebased {
        Some(text) => Application::from_toml(&text).map_err(|d| invalid(&d)),
        None => Ok(app.clone()),
    }
}

/// The description `application_toml` (validated as `app`) with its
/// Cloudflare store's namespace set to `namespace`, everything else as
/// written; `None` when it has no such store, so it stays as it is.
fn rebased_text(
    application_toml: &str,
    app: &Application,
    namespace: u64,
) -> Result<Option<String>, String> {
    let counts_through_binding = matches!(
        app.store.as_ref().map(|s| &s.driver),
        Some(StoreDriver::CloudflareRateLimits { .. })
    );
    if !counts_through_binding {
        return Ok(None);
    }
    let mut doc: toml_edit::DocumentMut = application_toml
        .parse()
        .map_err(|e| format!("its application is not TOML: {e}"))?;
    let connection = doc["rate_limits"]["store"]
        .as_str()
        .map(str::to_owned)
        .ok_or("its application's `rate_limits.store` is not a connection's name")?;
    let id = i64::try_from(namespace).map_err(|_| format!("namespace {namespace} is too large"))?;
    doc["connections"][connection.as_str()]["namespace"] = toml_edit::value(id);
    Ok(Some(doc.to_string()))
}

/// How long a scenario should take on Cloudflare: its deploy, its requests
/// one after another (over its concurrency), and every window step waiting
/// a whole window (the worst case: it depends on when the step comes).
pub fn estimate(prepared: &Prepared) -> Duration {
    let scenario = prepared.scenario.scenario.get_ref();
    let sends = on_cloudflare::sends(scenario);
    let mut total = DEPLOY_ESTIMATE;
    for (index, step) in scenario.steps.iter().enumerate() {
        total += match step.get_ref().action() {
            Ok(Action::Send { .. }) => sends
                .iter()
                .find(|s| s.index == index)
                .map_or(Duration::ZERO, |s| {
                    REQUEST_ESTIMATE * (s.requests().div_ceil(s.send.concurrency.max(1)) as u32)
                }),
            Ok(Action::WaitForWindow(seconds)) => Duration::from_secs(seconds.into()),
            Ok(Action::WaitForRoom(room)) => Duration::from_secs(room.window.into()),
            Ok(Action::SleepMs(ms)) => Duration::from_millis(ms),
            _ => Duration::ZERO,
        };
    }
    total
}

/// How long `durations` take, longest first, `jobs` at a time.
fn makespan(durations: &[Duration], jobs: usize) -> Duration {
    let mut lanes = vec![Duration::ZERO; jobs.max(1)];
    for d in durations {
        if let Some(lane) = lanes.iter_mut().min() {
            *lane += *d;
        }
    }
    lanes.into_iter().max().unwrap_or_default()
}

impl CloudflareRun {
    /// The first and last namespace id the run uses (none without a binding).
    pub fn namespace_ids(&self) -> Option<(u64, u64)> {
        (self.namespace_count > 0).then(|| {
            (
                self.namespace_base,
                self.namespace_base + self.namespace_count - 1,
            )
        })
    }

    /// What the run will do, for people: one line per scenario and the time.
    pub fn summary(&self) -> String {
        let mut out = format!(
            "{} scenarios on Cloudflare, {} at once, about {} (window steps wait real time; each Worker takes ~{} s to deploy); scripts {}N",
            self.scenarios.len(),
            self.jobs,
            minutes(self.estimate),
            DEPLOY_ESTIMATE.as_secs(),
            self.script_stem,
        );
        match self.namespace_ids() {
            None => out.push_str(", no binding\n"),
            Some((first, last)) => out.push_str(&format!(", namespace ids {first} to {last}\n")),
        }
        for s in &self.scenarios {
            let omitted = if s.omitted.is_empty() {
                String::new()
            } else {
                format!(", uploaded without {}", s.omitted.join(", "))
            };
            out.push_str(&format!(
                "  {} ({}, ~{} s{omitted})\n",
                s.prepared.trial_name,
                s.label,
                s.estimate.as_secs()
            ));
        }
        out.push_str(&format!(
            "{} scenarios stay local (traffic.json says why)\n",
            self.left_out.len()
        ));
        out
    }
}

/// `2 min 40 s`.
pub fn minutes(d: Duration) -> String {
    let s = d.as_secs();
    if s < 60 {
        format!("{s} s")
    } else {
        format!("{} min {} s", s / 60, s % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_names_are_the_prefix_a_suffix_and_a_number() {
        assert!(check_prefix("harness-rl").is_ok());
        for bad in [
            "",
            "Upper",
            "1st",
            "trailing-",
            "under_score",
            &"x".repeat(41),
        ] {
            assert!(check_prefix(bad).is_err(), "{bad:?}");
        }
        let suffix = random_suffix();
        assert_eq!(suffix.len(), 6);
        assert!(is_run_script(
            "harness-rl",
            &format!("harness-rl-{suffix}-3")
        ));
        for other in [
            "harness-rl",
            "harness-rl-prod",
            "harness-rl-abc123",
            "harness-rl-abc123-",
            "harness-rl-ABC123-1",
            "harness-rlx-abc123-1",
            "api-abc123-1",
        ] {
            assert!(!is_run_script("harness-rl", other), "{other}");
        }
        // One marker for all of a run's scripts, another for another run's.
        assert_eq!(
            marker_text("harness-rl-abc123-3"),
            "harness cloudflare run harness-rl-abc123"
        );
        assert_eq!(
            marker_text("harness-rl-abc123-17"),
            marker_text("harness-rl-abc123-1")
        );
        assert_ne!(
            marker_text("harness-rl-abc123-1"),
            marker_text("harness-rl-zz9zz9-1")
        );
    }

    #[test]
    fn the_namespace_is_rebased_and_nothing_else_changes() {
        let app = "# comment kept\n[connections.limits]\ndriver = \"cloudflare_rate_limits\"\nnamespace = 1001\n\n[rate_limits]\nstore = \"limits\"\n\n[[deployables]]\nname = \"edge\"\ntarget = \"workers\"\nserves_api = true\n";
        let valid = |text: &str| Application::from_toml(text).expect("valid");
        let rebased = rebased_text(app, &valid(app), 900_001).expect("rebased");
        assert_eq!(rebased, Some(app.replace("1001", "900001")));
        let memory = "[[deployables]]\nname = \"site\"\ntarget = \"workers\"\nserves_api = false\n";
        // Unchanged: the scenario's own application, with no text rewritten.
        assert_eq!(
            rebased_text(memory, &valid(memory), 5).expect("unchanged"),
            None
        );
    }

    #[test]
    fn scenarios_run_longest_first_in_as_many_lanes_as_jobs() {
        let s = Duration::from_secs;
        assert_eq!(makespan(&[s(60), s(30), s(30), s(20)], 2), s(80));
        assert_eq!(makespan(&[s(60), s(30)], 4), s(60));
        assert_eq!(minutes(s(160)), "2 min 40 s");
    }
}
