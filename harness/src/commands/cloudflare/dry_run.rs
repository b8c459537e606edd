//! `--dry-run`: what a run on Cloudflare would send, written into a folder
//! with no network: the traffic plan (`traffic.json`, `traffic.md`) and each
//! Worker's exact upload body, its content type, metadata and bindings.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use super::run::CloudflareRun;
use crate::language::cloudflare::CloudflareCheck;
use crate::language::on_cloudflare::{self, SendOnCloudflare};
use crate::language::scenario::{Action, Prepared};

/// The traffic plan, as `traffic.json` holds it.
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

impl CloudflareRun {
    /// The plan as `traffic.json` holds it.
    pub fn file(&self) -> PlanFile {
        PlanFile {
            scripts: format!("{}N", self.script_stem),
            namespace_ids: self.namespace_ids(),
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

/// Writes the plan into `dir`: `traffic.json`, `traffic.md`, and for each
/// scenario `NN-SCRIPT/` with `upload.multipart` (the exact body),
/// `content-type.txt` (its boundary), `metadata.json` and `bindings.json`.
pub fn write_dry_run(plan: &CloudflareRun, dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let file = plan.file();
    std::fs::write(
        dir.join("traffic.json"),
        serde_json::to_string_pretty(&file).unwrap_or_default() + "\n",
    )?;
    std::fs::write(dir.join("traffic.md"), traffic_markdown(plan))?;
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

fn traffic_markdown(plan: &CloudflareRun) -> String {
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
