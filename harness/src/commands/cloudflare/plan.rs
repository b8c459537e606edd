//! What a run on Cloudflare will do, decided before it touches the network:
//! which scenarios (those marked `on_cloudflare`, longest first), each one's
//! script name and namespace ids (its own, from `--namespace-base`), its
//! upload (the same wasm, glue and snippets as the local run, with the
//! bindings of the same plan as `harness wrangler`, less those the scenario
//! says are missing), its traffic and how long it should take. `--dry-run`
//! writes exactly this.

use std::collections::BTreeMap;
use std::hash::{BuildHasher, Hasher};
use std::path::{Path, PathBuf};
use std::time::Duration;

use runtime::config::{Application, StoreDriver};
use runtime::plan::BindingPlan;
use serde::Serialize;

use crate::commands::suite::{Suite, Trial};
use crate::language::cloudflare::CloudflareCheck;
use crate::language::on_cloudflare::{self, SendOnCloudflare};
use crate::language::scenario::{Action, Behaviour, Prepared, behaviour_of, cloudflare_obstacle};
use crate::world::cloudflare::upload::{Binding, Metadata, Module, ModuleKind, Simple, Upload};
use crate::world::wasm::{Deployable, STEM};

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
pub enum PlanError {
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
    /// A scenario's application could not be given its namespace.
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
pub struct PlannedScenario {
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
pub struct RunPlan {
    /// The scripts' common start: `PREFIX-SUFFIX-`.
    pub script_stem: String,
    /// The first namespace id the run may use.
    pub namespace_base: u64,
    /// How many namespace ids the run uses, from `namespace_base`.
    pub namespace_count: u64,
    /// In run order: the longest first.
    pub scenarios: Vec<PlannedScenario>,
    /// Scenarios not run on Cloudflare, and why.
    pub left_out: Vec<(String, String)>,
    /// Files that could not be read, as trials that failed.
    pub malformed: Vec<(String, String)>,
    /// Scenarios on Cloudflare at once.
    pub jobs: usize,
    /// How long the run should take with `jobs` scenarios at once.
    pub estimate: Duration,
}

/// What the run is asked.
#[derive(Debug, Clone)]
pub struct PlanOptions<'a> {
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
pub fn check_prefix(prefix: &str) -> Result<(), PlanError> {
    let ok = (1..=40).contains(&prefix.len())
        && prefix.starts_with(|c: char| c.is_ascii_lowercase())
        && !prefix.ends_with('-')
        && prefix
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if ok {
        Ok(())
    } else {
        Err(PlanError::Prefix(prefix.to_owned()))
    }
}

/// Whether `script` is a name a run with `prefix` gave (`PREFIX-xxxxxx-N`),
/// so `clean` deletes no one else's scripts.
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
pub fn modules(deployable: &Deployable) -> Result<Vec<Module>, PlanError> {
    let read = |path: &Path| {
        std::fs::read(path).map_err(|source| PlanError::Module {
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
            bytes: read(&deployable.glue_js)?,
        },
        Module {
            name: format!("{STEM}_bg.wasm"),
            kind: ModuleKind::Wasm,
            bytes: read(&deployable.wasm)?,
        },
    ];
    for (name, file) in &deployable.snippets {
        modules.push(Module {
            name: name.clone(),
            kind: ModuleKind::EsModule,
            bytes: read(file)?,
        });
    }
    Ok(modules)
}

/// Plans the run of `suite`'s marked scenarios.
pub fn plan(
    suite: &Suite,
    options: &PlanOptions<'_>,
    modules: &[Module],
) -> Result<RunPlan, PlanError> {
    check_prefix(options.prefix)?;
    if options.namespace_base == 0 {
        return Err(PlanError::NamespaceBase);
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
        return Err(PlanError::Nothing(
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
    Ok(RunPlan {
        script_stem: stem,
        namespace_base: options.namespace_base,
        namespace_count: next_namespace - options.namespace_base,
        scenarios,
        left_out,
        malformed,
        jobs: options.jobs,
        estimate,
    })
}

fn plan_scenario(
    prepared: &Prepared,
    script: String,
    namespace: u64,
    compatibility_date: &str,
    modules: &[Module],
) -> Result<PlannedScenario, PlanError> {
    let trial = || prepared.trial_name.clone();
    let application_toml =
        rebase(&prepared.application_toml, namespace).map_err(|detail| PlanError::Rebase {
            trial: trial(),
            detail,
        })?;
    let app = Application::from_toml(&application_toml).map_err(|d| PlanError::Application {
        trial: trial(),
        namespace,
        diagnostics: d.render("application"),
    })?;
    let deployable = app
        .deployable(&prepared.deployable)
        .ok_or_else(|| PlanError::Deployable {
            trial: trial(),
            deployable: prepared.deployable.clone(),
        })?;
    let planned = BindingPlan::for_deployable(&app, deployable);
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
    bindings.push(Binding::PlainText {
        name: "APPLICATION".to_owned(),
        text: application_toml.clone(),
    });
    bindings.push(Binding::PlainText {
        name: "DEPLOYABLE".to_owned(),
        text: prepared.deployable.clone(),
    });
    let namespaces = planned.bindings.iter().map(|b| b.namespace_id).fold(
        None,
        |range: Option<(u64, u64)>, id| match range {
            None => Some((id, id)),
            Some((first, last)) => Some((first.min(id), last.max(id))),
        },
    );
    Ok(PlannedScenario {
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

/// The application with its Cloudflare store's namespace set to
/// `namespace` (everything else as written), so the Worker's own
/// description names the ids it is bound to. One without such a store is
/// unchanged.
fn rebase(application_toml: &str, namespace: u64) -> Result<String, String> {
    let counts_through_binding = Application::from_toml(application_toml).is_ok_and(|app| {
        matches!(
            app.store.map(|s| s.driver),
            Some(StoreDriver::CloudflareRateLimits { .. })
        )
    });
    if !counts_through_binding {
        return Ok(application_toml.to_owned());
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
    Ok(doc.to_string())
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

/// The traffic plan, as `plan.json` holds it.
#[derive(Debug, Serialize)]
pub struct PlanFile {
    /// The scripts' names, `PREFIX-SUFFIX-N`.
    pub scripts: String,
    /// The first and last namespace id used.
    pub namespace_ids: Option<(u64, u64)>,
    /// Scenarios on Cloudflare at once.
    pub jobs: usize,
    /// How long it should take.
    pub estimate_seconds: u64,
    /// In run order.
    pub scenarios: Vec<ScenarioFilePlan>,
    /// Each scenario left local, and why.
    pub left_out: BTreeMap<String, String>,
    /// Each file that could not be read, and where.
    pub malformed: BTreeMap<String, String>,
}

/// One scenario's part of [`PlanFile`].
#[derive(Debug, Serialize)]
pub struct ScenarioFilePlan {
    /// The trial's name.
    pub name: String,
    /// Its script's name.
    pub script: String,
    /// The first and last namespace id used.
    pub namespace_ids: Option<(u64, u64)>,
    /// The planned bindings its upload leaves out.
    pub omitted_bindings: Vec<String>,
    /// `exact` or `bounded xN`.
    pub on_cloudflare: String,
    /// How long it should take.
    pub estimate_seconds: u64,
    /// Each step as Cloudflare runs it.
    pub steps: Vec<serde_json::Value>,
}

impl RunPlan {
    /// The plan as `plan.json` holds it.
    pub fn file(&self) -> PlanFile {
        PlanFile {
            scripts: format!("{}N", self.script_stem),
            namespace_ids: (self.namespace_count > 0).then(|| {
                (
                    self.namespace_base,
                    self.namespace_base + self.namespace_count - 1,
                )
            }),
            jobs: self.jobs,
            estimate_seconds: self.estimate.as_secs(),
            scenarios: self
                .scenarios
                .iter()
                .map(|s| ScenarioFilePlan {
                    name: s.prepared.trial_name.clone(),
                    script: s.script.clone(),
                    namespace_ids: s.namespaces,
                    omitted_bindings: s.omitted.clone(),
                    on_cloudflare: s.label.clone(),
                    estimate_seconds: s.estimate.as_secs(),
                    steps: steps(&s.prepared),
                })
                .collect(),
            left_out: self.left_out.iter().cloned().collect(),
            malformed: self.malformed.iter().cloned().collect(),
        }
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
        match self.namespace_count {
            0 => out.push_str(", no binding\n"),
            n => out.push_str(&format!(
                ", namespace ids {} to {}\n",
                self.namespace_base,
                self.namespace_base + n - 1
            )),
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
            "{} scenarios stay local (plan.json says why)\n",
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

/// Each step of a planned scenario, as Cloudflare runs it.
fn steps(prepared: &Prepared) -> Vec<serde_json::Value> {
    let scenario = prepared.scenario.scenario.get_ref();
    let sends = on_cloudflare::sends(scenario);
    scenario
        .steps
        .iter()
        .enumerate()
        .map(|(index, step)| match step.get_ref().action() {
            Ok(Action::Send { .. }) => sends
                .iter()
                .find(|s| s.index == index)
                .map_or(serde_json::Value::Null, |s| send_step(index, s)),
            Ok(Action::WaitForWindow(seconds)) => serde_json::json!({
                "step": index + 1,
                "wait_for_window": seconds,
                "waits": "for the next real boundary",
            }),
            Ok(Action::WaitForRoom(room)) => serde_json::json!({
                "step": index + 1,
                "wait_for_room": { "window": room.window, "seconds": room.seconds },
                "waits": "for the next real boundary, if too little is left",
            }),
            Ok(Action::SleepMs(ms)) => serde_json::json!({ "step": index + 1, "sleep_ms": ms }),
            _ => serde_json::json!({ "step": index + 1, "not_on_cloudflare": true }),
        })
        .collect()
}

fn send_step(index: usize, s: &SendOnCloudflare<'_>) -> serde_json::Value {
    // How each expectation the step writes is checked there.
    let mut checks = serde_json::Map::new();
    let written = s.expect.map(|e| e.get_ref());
    let no_5xx = written.is_none_or(|e| e.no_5xx);
    if no_5xx {
        checks.insert("no_5xx".into(), CloudflareCheck::Exact.label().into());
    }
    if let Some(e) = written {
        for (name, present, check) in [
            ("statuses", e.statuses.is_some(), s.checks.statuses),
            ("counts", e.counts.is_some(), s.checks.counts),
            ("retry_after", e.retry_after.is_some(), s.checks.retry_after),
            ("headers", e.headers.is_some(), s.checks.headers),
            ("body", e.body.is_some(), s.checks.body),
            ("latency", e.latency.is_some(), s.checks.latency),
        ] {
            if present {
                checks.insert(name.into(), check.label().into());
            }
        }
    }
    serde_json::json!({
        "step": index + 1,
        "send": {
            "path": s.send.path,
            "caller": s.send.caller,
            "address": s.send.address.as_ref().map(|_| "the runner's own (Cloudflare sets CF-Connecting-IP)"),
            "headers": s.send.headers,
            "concurrency": s.send.concurrency,
            "spacing_ms": s.send.spacing_ms,
            "requests_at_most": s.requests(),
            "stops_at_first_refusal": s.stops_at_first_refusal(),
        },
        "limit": s.limit,
        "bound": s.bound.map(|b| serde_json::json!({
            "refusal_by": b.refusal_by,
            "first_refusal_after_at_least": b.limit,
            "first_refusal_after_at_most": b.most_passes(),
        })),
        "checks": checks,
    })
}

/// Writes the plan into `dir`: `plan.json`, `plan.md`, and for each
/// scenario `NN-SCRIPT/` with `upload.multipart` (the exact body),
/// `content-type.txt` (its boundary), `metadata.json` and `bindings.json`.
pub fn write_dry_run(plan: &RunPlan, dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let file = plan.file();
    std::fs::write(
        dir.join("plan.json"),
        serde_json::to_string_pretty(&file).unwrap_or_default() + "\n",
    )?;
    std::fs::write(dir.join("plan.md"), plan_markdown(plan))?;
    for (number, s) in plan.scenarios.iter().enumerate() {
        let folder = dir.join(format!("{:02}-{}", number + 1, s.script));
        std::fs::create_dir_all(&folder)?;
        let multipart = s.upload.multipart();
        std::fs::write(folder.join("upload.multipart"), &multipart.body)?;
        std::fs::write(
            folder.join("content-type.txt"),
            multipart.content_type + "\n",
        )?;
        std::fs::write(
            folder.join("metadata.json"),
            serde_json::to_string_pretty(&s.upload.metadata).unwrap_or_default() + "\n",
        )?;
        std::fs::write(
            folder.join("bindings.json"),
            serde_json::to_string_pretty(&s.upload.metadata.bindings).unwrap_or_default() + "\n",
        )?;
    }
    Ok(())
}

fn plan_markdown(plan: &RunPlan) -> String {
    let mut out = String::from("# The run on Cloudflare, planned\n\n");
    out.push_str(&plan.summary());
    out.push_str("\n| # | scenario | script | namespace ids | without | on Cloudflare | ~s |\n|---:|---|---|---|---|---|---:|\n");
    for (number, s) in plan.scenarios.iter().enumerate() {
        let ids = s
            .namespaces
            .map_or("-".to_owned(), |(a, b)| format!("{a}-{b}"));
        out.push_str(&format!(
            "| {} | {} | {} | {ids} | {} | {} | {} |\n",
            number + 1,
            s.prepared.trial_name,
            s.script,
            if s.omitted.is_empty() {
                "-".to_owned()
            } else {
                s.omitted.join(", ")
            },
            s.label,
            s.estimate.as_secs()
        ));
    }
    out.push_str("\n## Local only\n\n");
    for (name, why) in &plan.left_out {
        out.push_str(&format!("- {name}: {why}\n"));
    }
    out
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
    }

    #[test]
    fn the_namespace_is_rebased_and_nothing_else_changes() {
        let app = "# comment kept\n[connections.limits]\ndriver = \"cloudflare_rate_limits\"\nnamespace = 1001\n\n[rate_limits]\nstore = \"limits\"\n\n[[deployables]]\nname = \"edge\"\ntarget = \"workers\"\nserves_api = true\n";
        let rebased = rebase(app, 900_001).expect("rebased");
        assert_eq!(rebased, app.replace("1001", "900001"));
        let memory = "[[deployables]]\nname = \"site\"\ntarget = \"workers\"\nserves_api = false\n";
        assert_eq!(rebase(memory, 5).expect("unchanged"), memory);
    }

    #[test]
    fn scenarios_run_longest_first_in_as_many_lanes_as_jobs() {
        let s = Duration::from_secs;
        assert_eq!(makespan(&[s(60), s(30), s(30), s(20)], 2), s(80));
        assert_eq!(makespan(&[s(60), s(30)], 4), s(60));
        assert_eq!(minutes(s(160)), "2 min 40 s");
    }
}
